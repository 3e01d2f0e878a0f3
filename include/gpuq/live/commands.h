// The commands that act on a plan, below the CLI: `run`, the control commands (retry, kill,
// hold, requeue), `add`, `pause` and `resume`, and what `history`, `logs` and `validate` read.
// Each takes the plan's setup (setup.h) and what the command line asked, and says its lines
// through `Say`s (the CLI prints them). One of the library's entry points for the CLI.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/events.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"
#include "gpuq/core/validate.h"
#include "gpuq/live/backend.h"
#include "gpuq/live/follow.h"
#include "gpuq/live/phase.h"
#include "gpuq/live/proc.h"  // unix_now: the clock of the commands that read the time (history, top)
#include "gpuq/live/setup.h"

namespace gpuq {

/// Where a command says a line (without its newline).
using SayLine = std::function<void(const std::string&)>;

/// `gpuq run` of the loaded `plan` (its text before the load: `plan_text`, which the reload on
/// edit compares with) on the node's `gpus`, through `backend`. Refuses, saying why through
/// `err` ("nothing started: ..."), what would fail later (a bad --pairs or hook, scripts that are
/// not there, a state of the other kind of run, a snapshot with no repository, a node directory
/// it may not use, a second run of the plan); else runs to the end. Returns the exit status.
int run_plan(PlanSetup& s, Plan plan, const std::vector<int>& gpus, const std::string& plan_text,
             const Backend& backend, const SayLine& err);

/// `gpuq drain GPU --why TEXT` (`drain`), `gpuq undrain GPU`: this user's drain record of `gpu` in
/// the node directory (s.node_dir as run chooses it; core/gpu_health.h), which every user's run
/// reads at its next tick. `gpu` must be one of s.gpus. Returns the exit status.
int drain_gpu(const PlanSetup& s, int gpu, bool drain, std::string why, const SayLine& out, const SayLine& err);

/// A control command: retry, kill, hold or requeue of `jobs` (retry `stale`: the stale done
/// jobs and the done ones after them too).
struct ControlAsk {
  std::string action;
  std::vector<std::string> jobs;
  bool stale = false;
};

/// Carries out `ask` on the plan of `s`: `loaded` as the caller loaded it, or (nullopt: the file
/// does not load) the version a running `gpuq run` goes on with, else (kill) the state's running
/// entries alone. Through the backend the jobs are in. Returns the exit status.
int control_plan(PlanSetup& s, std::optional<Plan> loaded, const ControlAsk& ask, const SayLine& out,
                 const SayLine& err);

/// The job `gpuq add` appends: its id, its script and arguments, and its text as one line of the
/// plan's JSON.
struct NewJob {
  std::string id;
  std::vector<std::string> script;  ///< the script, then its arguments
  std::string text;
};

/// Appends `job` to the plan file of `s` (checked first, the rest of the file kept as it is,
/// under the state's lock), and says who starts it; `dry_run`: writes nothing and says how the job
/// would move each other job's predicted start and the plan's finish. Returns the exit status.
int add_job(PlanSetup& s, const NewJob& job, bool dry_run, const SayLine& out, const SayLine& err);

/// `gpuq pause` (on) and `gpuq resume`: what it did, in a line.
std::string pause_plan(const PlanSetup& s, bool on);

/// `gpuq preempt --dry-run`: for each job, what a preemption would do (its signal, the grace,
/// SIGKILL) and when the prediction has it resume, nothing changed. Returns the exit status.
int preempt_dry_run(PlanSetup& s, const std::vector<std::string>& jobs, const SayLine& out, const SayLine& err);

/// `gpuq validate`: the plan loaded, and every finding of one round.
struct Validation {
  std::string bad_gpus;    ///< the GPU list the settings give is not one ("": it is)
  std::string not_a_plan;  ///< a path that is no plan file at all
  std::vector<int> gpus;
  std::optional<Plan> plan;  ///< valid: `findings` say the rest
  // Not valid: the loader's errors, what the files say of the jobs it could read, its warnings
  // and the fields gpuq does not read (errors with `strict`), all in one round.
  std::vector<std::string> errors;
  std::vector<Finding> file_findings;
  std::vector<std::string> warned;
  std::vector<Finding> findings;  ///< valid: the loader's warnings, the plan's checks, the world's
  std::string host_note;          ///< RunOptions::host_note: node_cpus lowered to the cores jobs may be pinned to
};

/// Validates the plan of `s`: the loader, the plan's own checks (deadlocks, scripts and files,
/// estimates), what `batch` (a batch queue, when given) refuses, snapshots without a repository,
/// jobs too big for any GPU, and what earlier runs of the same kind of job took.
Validation validate_setup(PlanSetup& s, bool strict, const Backend* batch);

/// The text of the plan file as it is now ("" when it cannot be read): what `run` compares edits with.
std::string plan_text_now(const std::string& plan);

/// `gpuq` is also each job's wrapper (launcher.h): its exit status when `argv` asks for the
/// wrapper, else nullopt.
std::optional<int> as_job_wrapper(int argc, char** argv);

/// The plan's state as it is on disk (empty when there is none yet).
State plan_state(const PlanSetup& s);

/// The event log's attempts (PLAN.events.jsonl and its rotated parts); each line it could not
/// read to `warnings` when given.
std::vector<Attempt> logged_attempts(const PlanSetup& s, std::vector<std::string>* warnings);

/// The event log's path for the plan.
std::string events_log_of(const PlanSetup& s);

/// The predictions `run` recorded for the plan (PLAN.predictions.jsonl, accuracy.h).
std::string predictions_log_of(const PlanSetup& s);

}  // namespace gpuq
