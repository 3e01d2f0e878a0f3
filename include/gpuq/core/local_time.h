// Times of day as gpuq prints them, in the local time zone.
#pragma once

#include <string>

namespace gpuq {

/// Local time of day of `t` (unix seconds) as "14:02", with the weekday
/// ("Tue 14:02") when it is not the day of `now`, and the date too ("Mon 21 Dec
/// 23:40", the year when not now's) when more than six days from `now` (a
/// weekday alone would name the wrong week). A time past the year 9999 (or not
/// finite) is "after the year 9999".
std::string local_time(double t, double now);

/// A number as fmt's "{:W.Pf}" prints it (what the original printed), unless it
/// is absurdly large (1e12 or more): then "{:W.Pe}" ("1.00e+300" rather than a
/// 300-digit number).
std::string fixed(double v, int width, int precision);
/// The same, appended to `out` (simulate prints a few of these per job).
void append_fixed(std::string& out, double v, int width, int precision);

/// A length of time for people: "40 s" under a minute, "12 min" under an hour, else "2.5h".
std::string duration_text(double seconds);

/// Hours as the time-limit lines give them, "1.25h" (two decimals); under 0.1 h in seconds or
/// minutes ("36 s", "5 min"), where two decimals of an hour say little ("0.01h") or nothing ("0.00h").
std::string hours_text(double hours);

/// Local wall clock as [HH:MM:SS] (the stamp of `run`'s lines).
std::string clock_stamp(double unix_time);

}  // namespace gpuq
