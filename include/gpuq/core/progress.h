// A running job's progress, and the remaining time it gives: pure functions of text and
// numbers. `run` reads a job's progress (its GPUQ_PROGRESS file, else the tail of its log:
// live/progress_read.h) and keeps the first and latest reading in its state entry; the
// prediction (`status`, `simulate --from-state`) ends the job where its rate says.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// How much of a log's end `run` reads for a progress bar (bytes): never the whole log.
inline constexpr long long kProgressTailBytes = 8192;

/// The fraction a progress file says: "0.42", "420/1000" or "42%" (surrounding blanks
/// ignored). nullopt for anything else, a count past its total, or a number outside 0-1.
std::optional<double> parse_progress_text(std::string_view text);

/// The last tqdm-style progress in the tail of a log: "k/N" (k <= N, N > 0), else "NN%",
/// in the last `\r`- or `\n`-separated piece that has one. Only what follows the last
/// "== gpuq: attempt" header counts (an earlier attempt's bar says nothing of this one), and
/// a number touching the end of `tail` is left out (its write may be cut short).
std::optional<double> progress_in_log(std::string_view tail);

/// One reading: when (unix seconds) and how far (0-1).
struct ProgressReading {
  double at = 0;
  double fraction = 0;
};

/// The first and latest readings of a running job, as its state entry keeps them (nullopt
/// when it has not reported any).
struct ProgressSpan {
  ProgressReading first, last;
};
std::optional<ProgressSpan> progress_span(const JobState& s);

/// Records a reading taken at `at` in `s`: the first one also as the first; the latest only
/// when the fraction moved (its time is then when it moved, as the source's mtime says).
/// True when the entry changed.
bool note_progress(JobState& s, double fraction, double at);

/// The rule's thresholds: progress counts once it has moved this much between two readings.
inline constexpr double kProgressMinMove = 0.02;
/// ... and is trusted whole (no blend with the estimate) once it has moved this much.
inline constexpr double kProgressFullMove = 0.10;

/// Where a running job's predicted end comes from.
enum class FinishSource { Estimate, Progress };

/// A running job's predicted end (unix seconds) from its progress: the rate between its first
/// and latest readings carried to 1, blended with its estimate (`start` + `est_seconds`, no
/// sooner than `now`) while its progress has moved less than kProgressFullMove. nullopt while
/// the progress does not count: fewer than two readings, or it moved less than
/// kProgressMinMove. Never before `now`.
struct ProgressFinish {
  double end = 0;
  double weight = 0;  ///< how much the rate counts (0-1); the estimate the rest
};
std::optional<ProgressFinish> finish_from_progress(const ProgressSpan& span, double start, double est_seconds,
                                                   double now);

/// A running job's predicted end where its entry `s` gives one (finish_from_progress over the
/// entry's readings, its start and the job's est_hours).
std::optional<ProgressFinish> finish_from_entry(const Job& job, const JobState& s, double now);

/// Whether the plan's predicted finish moved from `was` to `now_finish` (unix seconds) by more
/// than the settings allow at `now`: `percent` of the time left (`was` - `now`) and `minutes`.
bool finish_slipped(double was, double now_finish, double now, double percent, double minutes);

/// "+2 h", "-12 min", "+40 s": how far a finish moved.
std::string shift_text(double seconds);

/// Whether `run` reads job `j`'s log for progress: its own "progress_from_log", else the
/// setting (`setting` "true" or "false").
bool progress_from_log(const Job& j, std::string_view setting);

}  // namespace gpuq
