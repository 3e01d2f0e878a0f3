// The views as text: `simulate`'s timeline (the original's, byte for byte),
// `status`'s rows and its outlook.
#pragma once

#ifdef GPUQ_CORE
#error "the core does not include views: it returns data, views print it"
#endif

#include <string>

#include "gpuq/core/gpu_use.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"
#include "gpuq/views/json.h"

namespace gpuq {

/// The original's output: one row per job (eval_ jobs only with `all`) in
/// order of (start, id), the makespan and utilization line, and the first-look
/// line. Byte for byte the original's.
std::string format_timeline(const Plan& plan, const Simulation& sim, const SimOptions& opt, bool all);

/// The one stderr line beside the timeline: how many eval_ rows it leaves out
/// (and --all would add), and what its round-100 line means; "" when neither.
std::string timeline_note(const Plan& plan, const Simulation& sim, bool all);

/// What packing buys (simulate, for a plan whose jobs share GPUs by gpu_mem_gib): "packed:
/// makespan 2.1h (64 jobs with gpu_mem_gib; at most 3 on one GPU of 80 GiB less 5%); whole GPUs:
/// makespan 8.0h". `whole` is the same prediction with every job on whole GPUs.
std::string packing_note(const Plan& plan, const SimOptions& opt, const Simulation& packed, const Simulation& whole);

/// Why the simulation got stuck, one line per job, for stderr.
std::string format_stuck(const Plan& plan, const SimOptions& opt, const Simulation& sim);

/// `gpuq status`: the original's rows and counts, read-only.
std::string format_status(const Plan& plan, const State& state, double now, bool all);

/// `gpuq status`'s lines on the stale done jobs (stale.h): each with why, and the command that
/// reruns them (`plan` as the user gave it, for its --plan); "" when none is stale.
std::string format_stale(const Plan& plan, const State& state, const std::string& plan_arg);

/// The lines `status` prints below the original's rows: each job not done, in
/// predicted order, with its prediction and why it waits; then the plan's finish.
/// At most `limit` jobs unless `all`.
std::string format_outlook(const Plan& plan, const State& state, const Outlook& o, bool all,
                           size_t limit = kOutlookRows);

/// `status`'s lines about the plan's `gpuq run` (`plan_arg`: the plan as the user named it),
/// before the outlook: whether one runs (and when it last ticked), a pause, an edit it has not
/// taken yet or refuses.
std::string run_text(const RunSeen& r, const std::string& plan_arg, double now);

/// A line for each packed job that uses more GPU memory than it declared.
std::string memory_over_text(const std::vector<MemoryUse::Over>& over);

}  // namespace gpuq
