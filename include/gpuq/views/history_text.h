// `gpuq history` as text and JSON.
#pragma once

#ifdef GPUQ_CORE
#error "the core does not include views: it returns data, views print it"
#endif

#include <functional>
#include <string>
#include <vector>

#include "gpuq/core/accuracy.h"
#include "gpuq/core/events.h"
#include "gpuq/core/plan.h"

namespace gpuq {

/// How an attempt ended, as history shows it ("done", "failed", "running", "?").
using AttemptOutcome = std::function<std::string(const Attempt&)>;

/// The attempts as one JSON array: id, attempt, gpus, start, end, seconds, outcome, exit, causes,
/// gpu_mem_peak_mib, and the snapshot of the code it ran.
std::string attempts_json(const std::vector<Attempt>& attempts, const AttemptOutcome& outcome);
/// A row per attempt: its GPUs, start, end, how long it ran, how it ended.
std::string attempts_text(const std::vector<Attempt>& attempts, const AttemptOutcome& outcome, double now);

/// The GPU energy of the ended attempts, per job and for the plan (kWh), with `factor` x kWh in
/// `unit` where factor > 0; a line saying there is none where no attempt has a reading; "" when
/// no attempt has ended.
std::string energy_text(const std::vector<Attempt>& attempts, double factor, const std::string& unit);

/// --accuracy: the plan's predicted finish over time against the real one, and the median
/// error of predicted starts per horizon, as JSON and as text.
std::string accuracy_json(const Accuracy& a);
std::string accuracy_text(const Accuracy& a, double now);

/// --estimates: run time over est_hours per id prefix (and GPU memory peaks), and the runs
/// furthest off, as JSON and as text.
std::string estimates_json(const std::vector<Learned>& learned);
std::string estimates_text(const Plan& plan, const std::vector<Learned>& learned, const std::vector<Attempt>& attempts);

}  // namespace gpuq
