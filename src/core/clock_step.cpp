#include "gpuq/core/clock_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpuq/core/local_time.h"
#include "gpuq/core/state_fields.h"

namespace gpuq {

ClockSeen see_clock(const ClockReading& before, const ClockReading& now, double due_in) {
  ClockSeen s;
  double mono = now.mono - before.mono;
  double step = (now.wall - before.wall) - mono;
  if (std::abs(step) >= kClockStepMin) s.step = step;
  s.old_now = before.wall + mono;
  double late = mono - std::max(0.0, due_in);
  if (late >= kLateLookMin) s.late = late;
  return s;
}

size_t move_times(State& state, double by, double old_now) {
  size_t n = 0;
  for (auto& [id, s] : state.entries())
    for (const StateField& f : kStateFields) {
      if (f.kind != StateKind::UnixSeconds) continue;
      auto member = std::get<std::optional<double> JobState::*>(f.member);
      std::optional<double>& t = s.*member;
      if (t && *t <= old_now) {
        *t += by;
        ++n;
      }
    }
  return n;
}

size_t forgive_unwatched(State& state, double late, double now) {
  size_t n = 0;
  for (auto& [id, s] : state.entries()) {
    if (s.status != Status::Running || !s.start) continue;
    // Silent since its start when the log never grew: the mark starts from there.
    if (!s.log_grew) s.log_grew = s.start;
    for (std::optional<double> JobState::*m : {&JobState::log_grew, &JobState::gpus_busy, &JobState::gpus_read,
                                               &JobState::idle_since, &JobState::unused_since}) {
      std::optional<double>& t = s.*m;
      if (!t) continue;
      *t = std::min(now, *t + late);
      ++n;
    }
  }
  return n;
}

std::string step_text(double by) { return (by < 0 ? "-" : "+") + duration_text(std::round(std::abs(by))); }

}  // namespace gpuq
