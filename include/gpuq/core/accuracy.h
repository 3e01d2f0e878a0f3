// A score for every prediction: `run` records, beside the event log (PLAN.predictions.jsonl),
// the plan's predicted finish and each waiting job's predicted start whenever a job or a
// reading moved; `gpuq history --accuracy` holds them to what happened (the event log).
// Plain data and functions: the file is live's.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/events.h"

namespace gpuq {

/// What a prediction was made from: the plan's est_hours; est_hours scaled by what each id
/// prefix took before (--learned-estimates); est_hours with the running jobs' progress.
inline constexpr const char* kPredictionSources[] = {"estimate", "learned", "progress"};

/// One prediction `run` made: at `t`, per source, the plan's finish and the start of each job
/// that had not started (unix seconds). "progress" is left out where it predicted what
/// "estimate" did (no job reported progress), "learned" where there was nothing to learn from.
struct PredictionRecord {
  double t = 0;
  std::map<std::string, double> finish;                        ///< source -> finish
  std::map<std::string, std::map<std::string, double>> starts;  ///< source -> job -> start
  bool operator==(const PredictionRecord&) const = default;
};

/// One line of JSON (without the newline): times rounded to the second.
std::string prediction_line(const PredictionRecord& r);
/// Parses one line; nullopt when it is none.
std::optional<PredictionRecord> parse_prediction_line(std::string_view line);

/// The predictions held to what happened.
struct Accuracy {
  std::optional<double> finished;  ///< the real end of the plan's last attempt, when every attempt ended
  /// How the predicted finish moved: each record's finish per source (its `t` first).
  struct FinishAt {
    double t = 0;
    std::map<std::string, double> finish;
  };
  std::vector<FinishAt> finish;
  /// Per horizon (how long before the real start the prediction was made): per source, the
  /// median absolute error of predicted starts (seconds) and how many predictions it is over.
  struct Horizon {
    std::string name;  ///< "up to 1 h ahead", ...
    double from = 0, to = 0;  ///< seconds ahead: (from, to]
    std::map<std::string, std::pair<double, size_t>> error;
  };
  std::vector<Horizon> horizons;
};

/// Scores `records` against the attempts the event log tells of: a job's real start is the
/// first attempt that started at or after the record (a prediction of a start already past
/// is not scored); the real finish is the last attempt's end, when none is still running.
Accuracy score_predictions(const std::vector<PredictionRecord>& records, const std::vector<Attempt>& attempts);

}  // namespace gpuq
