// Times of day as gpuq prints them, in the local time zone.
#pragma once

#include <string>

namespace gpuq {

/// Local time of day of `t` (unix seconds) as "14:02", with the weekday
/// ("Tue 14:02") when it is not the day of `now`.
std::string local_time(double t, double now);

/// Local wall clock as [HH:MM:SS] (the stamp of `run`'s lines).
std::string clock_stamp(double unix_time);

}  // namespace gpuq
