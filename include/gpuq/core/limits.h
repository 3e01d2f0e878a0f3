// Time limits: a job's wall-clock limit, its warning signal, and what happens
// when the limit is reached. Part of the rule book (rules.h): `run`'s tick,
// `status` and the prediction read the same deadline here. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "gpuq/core/life.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// The value of the state's gpuq field "outcome" for a job stopped at its limit.
inline constexpr const char* kTimeoutOutcome = "timeout";

/// Parses a warn_signal value; the problem in words otherwise.
std::variant<WarnSpec, std::string> parse_warn_signal(std::string_view text);

/// "USR1", "SIGUSR1", "10", "B:USR1" (to the script's bash only): a signal, or the problem.
std::variant<SignalSpec, std::string> parse_signal(std::string_view text);

/// The job's limit in hours: its time_limit_hours, else `factor` x est_hours when
/// factor > 0 (--time-limit-factor), else none.
std::optional<double> limit_hours(const Job& job, double factor);

/// How long a job is predicted to run: est_hours, cut at its limit.
double run_hours(const Job& job, double factor);

/// When a running entry's limit is reached (unix seconds): its recorded start plus
/// the limit. None without a limit or a start.
std::optional<double> deadline(const Job& job, const JobState& s, double factor);

/// What the limit asks of a running job at `now`.
struct LimitCheck {
  enum class Act { None, Warn, Timeout } act = Act::None;
  double next_in = 1e300;  ///< seconds until the limit asks something next (the tick's wake time)
};

/// At the deadline: Timeout. At `warn.seconds` before it, once (warn_sent not yet
/// recorded): Warn. Otherwise None, with the time to the next of them.
LimitCheck check_limit(const Job& job, const JobState& s, double factor, double now);

/// The exit code a timed-out job is recorded with: kKilledExit (the original, and
/// gpuq, never retry it) or, with retry_on_timeout, kTimeoutRetryExit (both retry it).
long long timeout_exit(const Job& job);

/// A stop written straight into the entry, where no engine holds the job (in run, a job the
/// plan no longer has; in a look, its copy of the state past a job's limit, which run has not
/// saved yet): ended `outcome` at `at` for `cause`, with the exit a stop of `job` records
/// (timeout_exit), as the engine writes its own.
void write_stop(JobState& s, const Job& job, Outcome outcome, Cause cause, double at);

/// The entry records a stop at the job's limit (the gpuq field "outcome": "timeout").
bool timed_out(const JobState& s);

}  // namespace gpuq
