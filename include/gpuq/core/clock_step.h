// The wall clock seen against the monotonic one, between two looks of `run`: a step of the
// wall clock (NTP after a reboot, a hand-set date, a suspend) or a look that came far later than
// it was due (`run` stopped with SIGSTOP). Pure: the driver gives the readings of its clocks, and
// moves the state's times as these functions say, so that time limits, the hang watchdog and
// retry delays count the time that really passed, while every time recorded stays wall-clock.
#pragma once

#include <string>

#include "gpuq/core/state.h"

namespace gpuq {

/// A step of the wall clock under this many seconds is noise (the two clocks drift, NTP slews).
inline constexpr double kClockStepMin = 2;
/// A look this many seconds later than it was due means `run` was stopped (SIGSTOP, a debugger).
inline constexpr double kLateLookMin = 10;

/// Both clocks at one look.
struct ClockReading {
  double wall = 0;  ///< unix seconds
  double mono = 0;  ///< seconds of the monotonic clock (CLOCK_MONOTONIC)
};

/// What passed between two looks.
struct ClockSeen {
  double step = 0;  ///< how far the wall clock stepped (+ forward), beyond the monotonic time passed; 0: none
  double late = 0;  ///< how much later than due this look came (monotonic seconds); 0: on time
  double old_now = 0;  ///< the old wall clock's now: times at or before it were recorded on the old clock
};

/// Compares two looks; `due_in` is how long after `before` the second was due at the latest
/// (the wait the first one asked for, plus the time its tick took).
ClockSeen see_clock(const ClockReading& before, const ClockReading& now, double due_in);

/// The wall clock stepped by `by` seconds: every time the state records at or before `old_now`
/// moves by `by` (a running job keeps its elapsed time, a retry its delay, a kill its grace).
/// Returns how many times it moved.
size_t move_times(State& state, double by, double old_now);

/// `run` did not look for `late` seconds: the watchdogs' marks of each running job (when its
/// log last grew, when its GPUs were last read or busy, its idle streaks) move forward by it, never past `now`, so
/// that the time nobody looked is not counted as silence. Time limits count it: the job ran.
size_t forgive_unwatched(State& state, double late, double now);

/// "+1h 0m" or "-42 s": a step, signed, as the lines of `run` give it.
std::string step_text(double by);

}  // namespace gpuq
