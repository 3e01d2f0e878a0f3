// The commands that act on a plan, below the CLI (commands.h): `run` and what `history` reads.
#include "gpuq/live/commands.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <chrono>
#include <filesystem>
#include <thread>

#include "gpuq/core/hint.h"
#include "gpuq/core/job_words.h"
#include "gpuq/core/life.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/plan_text.h"
#include "gpuq/core/progress.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/snapshot.h"
#include "gpuq/core/plan_diff.h"
#include "gpuq/core/queue_state.h"
#include "gpuq/core/suggest.h"
#include "gpuq/core/stale.h"
#include "gpuq/core/validate.h"
#include "gpuq/live/control.h"
#include "gpuq/live/hooks.h"
#include "gpuq/live/journal.h"
#include "gpuq/live/launcher.h"
#include "gpuq/live/local_files.h"
#include "gpuq/live/look.h"
#include "gpuq/live/node_dir.h"
#include "gpuq/live/plan_edit.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/snapshots.h"
#include "gpuq/live/run_info.h"
#include "gpuq/live/store.h"

namespace gpuq {

namespace {

// --pairs and --on-event into `opt`; the problem with either, or "".
std::string take_placement_and_hooks(const PlanSetup& s, RunOptions& opt) {
  std::string problem;
  std::optional<Placement> placement = placement_of(s, "auto", opt.node_gpus, &problem);
  if (!placement) return problem;
  opt.placement = *placement;  // auto: run_queue reads the topology from its probe
  for (const std::string& text : opt.on_event)
    if (!parse_hook(text, &problem)) return problem;
  return "";
}

// Every script of a job still to run, before anything starts: a wrong folder would fail them one by one.
// A job that waits on another job of the plan may have its script made by that job: its missing
// script is said, not refused (it fails as unstartable if the script is still missing when due).
// False (said) when run must refuse.
bool scripts_there(const Plan& plan, const State& state, const Policy& policy, const Workdir& wd,
                   const SayLine& err) {
  LocalFiles files(wd.path);
  auto done = [&](size_t i) { return state.status_of(plan, i) == Status::Done; };
  // The jobs this run may start: waiting, blocked, or failed with an automatic retry to come. Not
  // one held, running (adopted), done, or failed for good (a missing script made it so: retry
  // starts it again once it is there), which would keep a restart from running the rest.
  auto to_run = [&](size_t i) {
    const JobState* s = state.of(plan, i);
    Life l = life_of(s, false, 0);
    LifeKind k = kind_of(l);
    return k == LifeKind::Waiting || k == LifeKind::Blocked ||
           (k == LifeKind::Ended && !finished(l, policy.retries_of(plan.jobs[i])));
  };
  std::vector<size_t> missing = jobs_without_script(plan, files, readable_file, to_run);
  auto later = std::stable_partition(missing.begin(), missing.end(), [&](size_t i) { return !waits_on_a_job(plan, i, done); });
  if (later != missing.begin()) {
    err("gpuq run: nothing started: " + missing_scripts_text(plan, std::vector<size_t>(missing.begin(), later), files, wd.shown));
    return false;
  }
  if (!missing.empty())
    err("gpuq run: not there yet, for jobs that wait on other jobs (which may make them): " +
        missing_scripts_text(plan, missing, files, wd.shown));
  return true;
}

// The settings this run uses, as PLAN.run.json records them for `status`: each as the run
// takes it (pairs, nvidia-smi, poll and workdir as they are in effect, not as given).
GivenSettings settings_in_use(const PlanSetup& s, const RunOptions& opt, const Workdir& wd) {
  GivenSettings out;
  out.values = s;
  out.given.fill(true);
  if (out.values.pairs.empty()) out.values.pairs = "auto";
  out.values.nvidia_smi = opt.nvidia_smi;
  out.values.poll = opt.poll;
  std::error_code ec;
  out.values.workdir = wd.path.empty() ? std::filesystem::current_path(ec).string() : wd.path;
  out.values.state_dir = s.state_dir;
  out.given[setting_index(*find_setting("state_dir"))] = !s.state_dir.empty();
  return out;
}

}  // namespace

std::string plan_text_now(const std::string& plan) {
  try {
    return read_file(plan).value_or("");
  } catch (const StoreError&) {
    return "";
  }
}

int run_plan(PlanSetup& s, Plan plan, const std::vector<int>& gpus, const std::string& plan_text,
             const Backend& backend, const SayLine& err) {
  RunOptions opt = run_options(s, gpus);
  if (std::string problem = take_placement_and_hooks(s, opt); !problem.empty()) {
    err("gpuq run: " + problem);
    return 2;
  }
  Workdir wd = workdir_of(s, plan.workdir);
  opt.workdir = wd.path;
  PlanPaths paths = plan_paths(s);
  State state = read_state(paths);
  // The plan as the backend schedules it: every check below is of that one.
  Plan runs = backend.plan_for(plan);
  if (backend.batch())
    if (std::string problem = backend.plan_problem(plan, true); !problem.empty()) {
      err("gpuq run " + backend.run_flag() + ": " + problem);
      return 2;
    }
  if (std::string mix = mode_mix_problem(state, backend.batch()); !mix.empty()) {
    err("gpuq run: nothing started: " + mix);
    return 1;
  }
  if (!scripts_there(runs, state, opt, wd, err)) return 2;
  if (std::string problem = snapshot_problem(s, runs, wd); !problem.empty()) {
    err("gpuq run: " + problem);
    return 2;
  }
  if (!backend.batch())
    if (std::string problem = node_dir_problem(choose_node_dir(opt.node_dir)); !problem.empty()) {
      err("gpuq run: nothing started: " + problem);
      return 2;
    }
  RunGuard guard(paths);
  // Two states for one plan file would run every job twice: refuse until there is one.
  if (std::string split = state_beside_link_problem(paths); !split.empty()) {
    err("gpuq run: " + split);
    return 1;
  }
  for (const std::string& line : unknown_entry_lines(plan, paths, read_state(paths))) err("gpuq: " + line);
  // What `status` reads to tell whether this run works, and on which version of the plan.
  RunInfo info;
  info.pid = ::getpid();
  char host[256] = {0};
  info.host = ::gethostname(host, sizeof host - 1) == 0 ? host : "?";
  info.plan = s.plan;
  info.gpus = gpus;
  info.max_retries = s.max_retries;
  info.settings = settings_in_use(s, opt, wd);
  info.started = unix_now();
  info.tick = info.started;
  info.loaded = stamp_plan(s.plan).value_or(PlanStamp{});
  info.loaded_at = info.started;
  info.slurm = backend.batch();
  if (!backend.batch()) info.node_dir = choose_node_dir(opt.node_dir);
  // Jobs that run from a snapshot and changed since the last run loaded the plan (its copy,
  // PLAN.run.plan.json): loaded anew, so each takes a snapshot of the code as it is now.
  if (any_snapshot(runs, opt.snapshot)) try {
      if (std::optional<std::string> was = read_file(paths.run_plan))
        if (PlanLoad last = parse_plan(*was, paths.run_plan, gpus); last.plan)
          opt.snapshot_changed = diff_plans(*last.plan, runs).changed;
    } catch (const StoreError&) {
      // no copy to compare with: every queued job keeps its snapshot
    }
  keep_loaded_plan(paths, s.plan);
  return backend.run(std::move(plan), paths, opt, s.source_of("poll") != SettingSource::Default, stdout, &info,
                     &plan_text);
}

Validation validate_setup(PlanSetup& s, bool strict, const Backend* batch) {
  Validation v;
  if (!gpu_ids(s, &v.bad_gpus)) return v;
  // A path that is no plan file at all: one line, before any talk of problems in a plan.
  if (v.not_a_plan = plan_file_problem(s.plan); !v.not_a_plan.empty()) return v;
  PlanLoad load = load_plan_choosing_gpus(s.plan, choose_gpus(s));
  take_settings(s, {});  // a plan that is not JSON gave none: the flags and variables still count
  for (std::string& e : settings_problems(s)) load.errors.insert(load.errors.begin(), std::move(e));
  if (!load.errors.empty()) load.plan.reset();
  std::optional<std::vector<int>> gpus = gpu_ids(s, &v.bad_gpus);  // as the settings give them
  if (!gpus) return v;
  v.gpus = *gpus;
  const Plan* plan = load.plan ? &*load.plan : load.partial ? &*load.partial : nullptr;
  Workdir wd = workdir_of(s, plan ? plan->workdir : std::nullopt);
  LocalFiles files(wd.path);
  // The node's memory, for a job that packs with more GiB than a GPU takes, and its cores and host
  // memory as run counts them, for a job that needs more (either never starts).
  Policy mem;
  mem.gpu_mem_gib = s.gpu_mem_gib;
  mem.gpu_mem_headroom = s.gpu_mem_headroom;
  {
    RunOptions host = run_options(s, v.gpus);
    mem.node_cpus = host.node_cpus_asked > 0 ? host.node_cpus_asked : host.node_cpus;  // the node the plan names
    mem.node_mem_gib = host.node_mem_gib;
    v.host_note = host.host_note;
  }
  if (!load.plan) {
    // The loader's errors, and in the same round what the files and each job's own checks say of
    // the jobs it could read.
    std::vector<Finding> found;
    if (plan) {
      found = file_findings(*plan, files, readable_file, wd.shown);
      for (Finding& x : job_findings(*plan, &mem)) found.push_back(std::move(x));
    }
    // The loader's warnings and the fields gpuq does not read too (errors with --strict): one
    // round shows everything, not the warnings only once the errors are fixed.
    v.warned = load.warnings;
    for (std::string& u : load.unknown_fields) (strict ? load.errors : v.warned).push_back(std::move(u));
    for (Finding& x : found)
      if (x.error || strict) v.file_findings.push_back(std::move(x));
      else v.warned.push_back(fmt::format("{}: {}{}", s.plan, x.job.empty() ? "" : "job '" + x.job + "': ", x.text));
    for (std::string& e : load.errors) v.errors.push_back(with_gpus_source(std::move(e), s.gpus_source));
    return v;
  }
  // The loader's warnings first (its checks come first), counted and printed as validate's own.
  std::vector<Finding>& findings = v.findings;
  findings = loader_findings(load.warnings);
  // Fields gpuq does not read: notes the plan may carry, or a mistake; strict takes them for mistakes.
  for (std::string& u : load.unknown_fields) findings.push_back({strict, "", std::move(u)});
  for (Finding& x : validate_plan(*plan, *gpus, s.backfill_max_hours, files, readable_file, wd.shown, &mem))
    findings.push_back(std::move(x));
  if (!v.host_note.empty() && mem.counts_host(*plan)) findings.push_back({false, "", v.host_note});
  // What a run through the batch queue refuses (a reservation of GPU ids without the queue's own).
  if (batch)
    if (std::string why = batch->plan_problem(*plan, true); !why.empty())
      findings.push_back({true, "", batch->run_flag() + ": " + why});
  // Snapshots of the code: the workdir must be in a git repository.
  if (std::string problem = snapshot_problem(s, *plan, wd); !problem.empty()) findings.push_back({true, "", std::move(problem)});
  // What earlier runs of the same kind of job took (the event log, when there is one).
  std::vector<Event> events = read_events(events_log_of(s), nullptr);
  if (!events.empty()) {
    State state;
    try {
      state = plan_state(s);
    } catch (const StoreError&) {
    }
    std::vector<Learned> learned = learn_estimates(attempts_of(events), *plan);
    for (EstimateWarning& w : estimate_warnings(*plan, state, learned))
      findings.push_back({false, std::move(w.job), std::move(w.text)});
    for (EstimateWarning& w : memory_warnings(*plan, state, learned, mem.gpu_room(0)))
      findings.push_back({false, std::move(w.job), std::move(w.text)});
  }
  v.plan = std::move(load.plan);
  return v;
}

namespace {

/// The rest of `requeue`: wait for each stopped job's group to be gone (SIGKILL after
/// kill_grace), then make the job pending. False when a group outlived SIGKILL too.
bool wait_for_requeues(const PlanSetup& s, const std::vector<std::string>& jobs, const Plan& plan, FileStore& store,
                       Launcher& launcher, const SayLine& out) {
  std::vector<std::pair<std::string, long long>> groups;
  {
    State state = store.read();
    for (const auto& id : jobs)
      if (const JobState* st = state.find(id); st && st->requeue && st->status == Status::Running && st->pid)
        groups.push_back({id, *st->pid});
  }
  auto all_gone = [&] {
    for (auto& [id, g] : groups)
      if (launcher.group_alive(g)) return false;
    return true;
  };
  auto wait = [&](double seconds) {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!all_gone() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return all_gone();
  };
  if (!wait(s.kill_grace)) {
    for (auto& [id, g] : groups)
      if (launcher.group_alive(g)) {
        launcher.signal_group(g, Signal::Kill);
        out(fmt::format("SIGKILL to {} (process group {}): still alive {:g} s after SIGTERM", id, g, s.kill_grace));
      }
    wait(10);
  }
  bool gone = all_gone();
  std::vector<std::string> stopped;
  for (auto& [id, g] : groups) stopped.push_back(id);
  for (const auto& line : finish_requeues(plan, store, launcher, stopped, unix_now(), events_log_of(s))) out(line);
  return gone;
}

}  // namespace

// retry --stale: the stale done jobs, each said with why, and the done jobs after them (stale once
// they rerun), added to `jobs`. An exit status when there is nothing more to do (none stale, or
// the state unreadable); else nullopt.
static std::optional<int> add_stale_reruns(const Plan& plan, const std::string& plan_name, FileStore& store,
                                           std::vector<std::string>& jobs, const SayLine& out, const SayLine& err) {
  State state;
  try {
    state = store.read();
  } catch (const StoreError& e) {
    err(fmt::format("gpuq retry: {}", e.what()));
    return 1;
  }
  std::vector<size_t> reruns = stale_reruns(plan, state);
  if (reruns.empty() && jobs.empty()) {
    out(fmt::format("no done job of {} is stale: nothing to rerun", plan_name));
    return 0;
  }
  for (size_t i : reruns) {
    Staleness why = staleness_of(plan, i, state);
    out(why.empty() ? fmt::format("{}: done after a stale job it depends on; rerun with it", plan.jobs[i].id)
                    : fmt::format("stale: {} ({})", plan.jobs[i].id, staleness_text(why)));
    if (std::find(jobs.begin(), jobs.end(), plan.jobs[i].id) == jobs.end()) jobs.push_back(plan.jobs[i].id);
  }
  return std::nullopt;
}

int control_plan(PlanSetup& s, std::optional<Plan> loaded, const ControlAsk& ask, const SayLine& out,
                 const SayLine& err) {
  const std::string& action = ask.action;
  // The control commands must work while the plan on disk has problems (an edit half done):
  // with the version a running `run` goes on with, else (kill) from the state's running
  // entries alone. The caller has said where the file has problems and what they are.
  std::error_code ec;
  if (!loaded && !std::filesystem::exists(s.plan, ec)) return 2;
  PlanPaths paths = plan_paths(s);
  std::optional<Plan> kept;
  if (!loaded)
    if (std::optional<std::vector<int>> ids = gpu_ids(s, nullptr); ids && run_presence(paths).running)
      kept = std::move(load_plan(paths.run_plan, *ids).plan);
  if (std::string why = others_plan_problem(s.plan, action); !why.empty()) {
    err(fmt::format("gpuq {}: {}", action, why));
    return 1;
  }
  std::string plan_name = s.plan;
  if (!loaded && kept) {
    err(fmt::format("gpuq {}: the plan file {} does not load (above); acting on the version the running `gpuq run` "
                    "goes on with ({})",
                    action, s.plan, paths.run_plan));
  } else if (!loaded && action == "kill") {
    err(fmt::format("gpuq kill: the plan file {} does not load (above), and no `gpuq run` goes on with an earlier "
                    "version; going on from the state alone",
                    s.plan));
    plan_name = s.plan + " (which does not load)";
  } else if (!loaded) {
    err(fmt::format("gpuq {0}: the plan file {1} does not load (above), and no `gpuq run` goes on with an earlier "
                    "version to take the jobs from; nothing was changed: fix {1}, then {0} again",
                    action, s.plan));
    return 2;
  }
  Plan none;
  const Plan& plan = loaded ? *loaded : kept ? *kept : none;
  if (std::string split = state_beside_link_problem(paths); !split.empty()) err("gpuq: warning: " + split);
  FileStore store(paths);
  // The backend the plan's jobs are in: kill of a batch queue's job cancels it there, hold of one
  // not started holds it there, retry releases it.
  std::unique_ptr<Backend> backend;
  try {
    State state = store.read();
    backend = backend_in_use(&state, nullptr);
  } catch (const StoreError&) {
    backend = local_backend();
  }
  std::unique_ptr<Launcher> launcher = backend->launcher(plan, paths);
  std::vector<std::string> jobs = ask.jobs;
  if (action == "retry" && ask.stale) {
    if (std::optional<int> done = add_stale_reruns(plan, plan_name, store, jobs, out, err)) return *done;
  } else if (jobs.empty()) {
    err(fmt::format("gpuq {}: no job given: name the jobs{}", action,
                    action == "retry" ? ", or --stale for the stale done ones" : ""));
    return 2;
  }
  SystemClock clock;
  // A sweep's id names its points; a sweep point may be written with a number spelled otherwise.
  JobWords words = resolve_job_words(plan, jobs);
  for (const std::string& note : words.notes) out(fmt::format("gpuq {}: {}", action, note));
  jobs = words.ids;  // requeue waits for these
  Policy policy;  // the engine's defaults, with whether jobs may be preempted (gpuq preempt)
  policy.preemptible_default = s.preemptible == "true";
  ControlResult r;
  try {
    r = control(plan, plan_name, store, *launcher, clock, action, jobs, events_log_of(s), policy);
  } catch (const StoreError& e) {
    // Its stops are sent only once saved (control()): a state that cannot be written stops nothing.
    bool stops = action == "kill" || action == "requeue" || action == "preempt";
    err(fmt::format("gpuq {0}: {1}: the state is as it was{2}; {0} again once it can be written", action, e.what(),
                    stops ? " and no job was signalled" : ""));
    return 1;
  }
  for (const auto& line : r.lines) (r.status == 2 ? err : out)(line);
  if (action == "requeue" && r.status != 2 && !wait_for_requeues(s, jobs, plan, store, *launcher, out)) return 1;
  return r.status;
}

namespace {

// The first predicted start of each job (unix seconds) and the plan's finish, from the live state.
struct WhatIf {
  std::map<std::string, double> starts;
  std::optional<double> finish;
  std::vector<std::pair<std::string, std::string>> preempts;  // (who gives way, to whom): the words for it
};

WhatIf predict_from(const Look& l, const Plan& plan) {
  LiveStart ls = live_start_of(l, plan);
  Simulation sim = simulate(plan, l.opt, &ls);
  WhatIf w;
  for (const SimRow& r : sim.rows) {
    const std::string& id = plan.jobs[r.job].id;
    const JobState* st = l.state.find(id);
    if (!st || st->status != Status::Running) w.starts.emplace(id, l.now + r.start * 3600);  // its first attempt's
    w.finish = std::max(w.finish.value_or(l.now), l.now + r.end * 3600);
  }
  if (!sim.stuck.empty()) w.finish.reset();
  for (const SimPreemption& p : sim.preemptions) {
    std::optional<double> back = sim.resumes_at(p);
    w.preempts.push_back({plan.jobs[p.by].id,
                          fmt::format("{} at ~{} (it ran {}; {})", plan.jobs[p.job].id,
                                      local_time(l.now + p.at * 3600, l.now), duration_text(p.ran * 3600),
                                      back ? "resumes ~" + local_time(l.now + *back * 3600, l.now)
                                           : std::string("does not resume as things stand"))});
  }
  return w;
}

// add --dry-run: how the new job would move every other job's predicted start (the prediction
// `status` makes, from the live state), and the plan's finish. Nothing is written.
int what_if(PlanSetup& s, const std::string& id, const Plan& before, const Plan& after, const SayLine& out) {
  LookAsk ask;
  ask.run_plan_when_broken = false;
  ask.probe = ask.snapshots = false;
  // The node as status sees it, run or no run: GPUs other runs hold are not free (issue 51, item 16).
  ask.node = true;
  ask.pairs_default = "original";
  Look l = look_at(s, ask);  // with the run's pause: a paused plan starts nothing new
  WhatIf was = predict_from(l, before), will = predict_from(l, after);
  // The new job, or a sweep's points: the first of them to start.
  std::optional<double> first;
  size_t points = 0;
  for (const Job& j : after.jobs)
    if (!before.find(j.id)) {
      ++points;
      if (auto it = will.starts.find(j.id); it != will.starts.end()) first = std::min(first.value_or(it->second), it->second);
    }
  std::string when = first ? "~" + local_time(*first, l.now) : std::string("never, as things stand");
  if (l.opt.paused) when += " (the plan is paused: nothing new starts until `gpuq resume`)";
  out(fmt::format("gpuq add --dry-run: {} not added (nothing written); {} {}", id,
                  points > 1 ? fmt::format("its {} points would start from", points) : std::string("it would start"),
                  when));
  for (const auto& [by, what] : will.preempts)
    if (!before.find(by)) out(fmt::format("  it would preempt {}", what));
  size_t moved = 0, same = 0;
  for (const Job& j : before.jobs) {
    auto a = was.starts.find(j.id), b = will.starts.find(j.id);
    if (a == was.starts.end() && b == will.starts.end()) continue;  // running or done: nothing to move
    if (a != was.starts.end() && b != will.starts.end() && std::fabs(b->second - a->second) < 1) {
      ++same;
      continue;
    }
    ++moved;
    std::string from = a == was.starts.end() ? "never" : local_time(a->second, l.now);
    std::string to = b == will.starts.end() ? "never" : local_time(b->second, l.now);
    std::string by = a != was.starts.end() && b != will.starts.end() ? " (" + shift_text(b->second - a->second) + ")" : "";
    out(fmt::format("  {:<30} starts {} -> {}{}", j.id, from, to, by));
  }
  if (!moved) out("  no other job's predicted start moves");
  else if (same) out(fmt::format("  {} other job(s) start as predicted before", same));
  if (was.finish && will.finish)
    out(fmt::format("the plan's predicted finish: {} -> {} ({})", local_time(*was.finish, l.now),
                    local_time(*will.finish, l.now), shift_text(*will.finish - *was.finish)));
  return 0;
}

// `gpuq add --id x -- 'step.sh x 2'`: one word that is no file but a command line (validate's
// rule): the refusal, with the words as they should be given; "" where the script is one.
std::string command_line_script(const PlanSetup& s, const Plan& plan, const NewJob& job) {
  const std::string& script = job.script.front();
  if (job.script.size() != 1 || !script_holds_arguments(script) ||
      readable_file(LocalFiles(workdir_of(s, plan.workdir).path).expand(script)))
    return "";
  std::vector<std::string> words;
  for (size_t at = 0; at != std::string::npos;) {
    size_t from = script.find_first_not_of(" \t", at);
    if (from == std::string::npos) break;
    at = script.find_first_of(" \t", from);
    words.push_back(script.substr(from, at == std::string::npos ? at : at - from));
  }
  std::string split;
  for (const std::string& w : words) split += " " + shell_word(w);
  return fmt::format("gpuq add: the script \"{}\" is not a file: {}; give the script and its arguments as separate "
                     "words after --: gpuq add ... --{} (nothing was added)",
                     script, kArgsGoInArgs, split);
}

// Why the jobs `after` adds to `before` are refused ("": they are not): a script that is not
// there fails the job when it is due (validate calls it an error), unless the job waits on a job
// of the plan, which may make it; a job that can never start here (more GiB than any GPU takes)
// is refused, as a job wider than the node is.
std::string refusal_of_added(const PlanSetup& s, const Plan& before, const Plan& after, const std::string& id,
                             const std::vector<int>& gpus) {
  LocalFiles files(workdir_of(s, after.workdir).path);
  auto added = [&](size_t i) { return !before.find(after.jobs[i].id); };
  std::vector<size_t> missing = jobs_without_script(after, files, readable_file, added);
  std::erase_if(missing, [&](size_t i) { return waits_on_a_job(after, i, [](size_t) { return false; }); });
  if (!missing.empty())
    return fmt::format("gpuq add: {} not added: {}; {} is unchanged", id,
                       missing_scripts_text(after, missing, files, workdir_of(s, after.workdir).shown), s.plan);
  Policy mem;
  mem.gpu_mem_gib = s.gpu_mem_gib;
  mem.gpu_mem_headroom = s.gpu_mem_headroom;
  mem.node_gpus = gpus;
  for (size_t i = 0; i < after.jobs.size(); ++i)
    if (added(i) && mem.too_big(after.jobs[i]))
      return fmt::format("gpuq add: {} not added: {}: it would never start (GPUs with more memory: --gpu-mem-gib); {} "
                         "is unchanged",
                         id, too_big_text(mem, after.jobs[i]), s.plan);
  return "";
}

}  // namespace

int add_job(PlanSetup& s, const NewJob& job, bool dry_run, const SayLine& out, const SayLine& err) {
  std::optional<std::vector<int>> gpus = gpu_ids(s, nullptr);
  if (!gpus) return 2;
  PlanPaths paths = plan_paths(s);
  std::string source = s.source_of("gpus") == SettingSource::Flag ? "--node-gpus" : s.gpus_source;
  auto say = [&](const std::string& e) { err(with_gpus_source(e, source)); };
  // The file itself, where the plan is a link: the link stays a link.
  std::error_code ec;
  std::string target = std::filesystem::canonical(s.plan, ec).string();
  if (ec) target = s.plan;
  FileStore store(paths);
  Store::Locked lock(store);  // one writer of the plan at a time: two adds never lose one
  std::string text = read_file(target).value_or("");
  PlanLoad before = parse_plan(text, s.plan, *gpus);
  if (!before.plan) {
    for (const std::string& e : before.errors) say(e);
    err(fmt::format("gpuq add: the plan has {} problem(s) already; fix them first (nothing was added)",
                    before.errors.size()));
    return 2;
  }
  if (std::string words = command_line_script(s, *before.plan, job); !words.empty()) {
    err(words);
    return 2;
  }
  std::string problem;
  auto next = append_job_text(text, job.text, &problem);
  if (!next) {
    err(fmt::format("gpuq add: {}: {}; nothing was added", s.plan, problem));
    return 2;
  }
  PlanLoad after = parse_plan(*next, s.plan, *gpus);
  if (!after.plan) {
    for (const std::string& e : after.errors) say(e);
    err(fmt::format("gpuq add: {} not added: the plan with it would have {} problem(s); {} is unchanged", job.id,
                    after.errors.size(), s.plan));
    return 2;
  }
  if (std::string refused = refusal_of_added(s, *before.plan, *after.plan, job.id, *gpus); !refused.empty()) {
    err(refused);
    return 2;
  }
  if (dry_run) return what_if(s, job.id, *before.plan, *after.plan, out);
  // A job that runs from a snapshot: the code as it is now, recorded before the plan names the job
  // (a running `gpuq run` keeps it when it reloads the plan).
  std::string code;
  if (const Job* j = after.plan->find(job.id); j && uses_snapshot(*j, s.snapshot)) {
    Workdir wd = workdir_of(s, after.plan->workdir);
    GitSnapshots snapshots(its_own_files(paths));
    try {
      SnapshotRef snap = snapshots.take(absolute_workdir(wd), unix_now());
      State state = store.read();
      set_snapshot(state.at(job.id), snap);
      store.write(state, false);
      code = fmt::format(" (snapshot {}{})", short_commit(snap.commit), snap.dirty ? ", with uncommitted changes" : "");
    } catch (const SnapshotError& e) {
      err(fmt::format("gpuq add: {} not added: it runs from a snapshot (\"snapshot\": \"git\"), and none can be "
                      "taken: {}; {} is unchanged",
                      job.id, e.what(), s.plan));
      return 2;
    } catch (const StoreError& e) {
      err(fmt::format("gpuq add: {} not added: cannot record its snapshot: {}; {} is unchanged", job.id, e.what(),
                      s.plan));
      return 1;
    }
  }
  replace_file_durably(target, *next);
  // Who starts it: the run going on (it reloads the plan), or the next run.
  RunPresence run = run_presence(paths);
  std::string starts = run.running && run.info
                           ? fmt::format("the running `gpuq run` (pid {}) starts it when it is ready", run.info->pid)
                       : run.running ? "the running `gpuq run` starts it when it is ready"
                                     : "no `gpuq run` is running this plan: " + hint("run") + " starts it";
  out(fmt::format("added {}{} to {} ({} jobs); {}", job.id, code, s.plan, after.plan->jobs.size(), starts));
  return 0;
}

int preempt_dry_run(PlanSetup& s, const std::vector<std::string>& jobs, const SayLine& out, const SayLine& err) {
  LookAsk ask;
  ask.run_plan_when_broken = true;
  ask.snapshots = false;
  Look l = look_at(s, ask);
  if (!l.plan) {
    err(fmt::format("gpuq preempt: the plan {} does not load; nothing to say", s.plan));
    return 2;
  }
  const Plan& plan = *l.plan;
  QueueState q(plan, l.opt, l.state, l.now, "preempt");
  int status = 0;
  std::vector<size_t> preempted;
  for (const std::string& id : jobs) {
    const Job* j = plan.find(id);
    if (!j) {
      err(fmt::format("gpuq preempt: no job {} in {}{}", id, s.plan, job_suggestion(plan, id)));
      status = 2;
      continue;
    }
    size_t i = static_cast<size_t>(j - plan.jobs.data());
    const Effects& fx = q.apply(ev::Preempt{i, l.now, std::nullopt}, l.now);
    if (fx.refused) {
      out(fmt::format("{}: not preemptible now ({})", id,
                      fx.refused == Refusal::NotPreemptible ? "give it \"preemptible\": true"
                      : fx.refused == Refusal::Requeueing  ? "it is being preempted or requeued already"
                                                           : "it is not running"));
      status = std::max(status, 1);
      continue;
    }
    preempted.push_back(i);
    const JobState& e = q.entry(i);
    out(fmt::format("gpuq preempt --dry-run: {} not preempted (nothing sent); it would get {}, {:g} s to checkpoint "
                    "and exit (--preempt-grace), then SIGKILL; an exit 0 then is done, any other end makes it "
                    "pending again, no retry spent",
                    id, preempt_signal_text(e, *j), l.opt.preempt_grace));
  }
  if (preempted.empty()) return status;
  l.state = q.state();
  Outlook o = outlook_of(l, ask);
  for (size_t i : preempted)
    for (const JobView& v : o.jobs)
      if (v.job == i)
        out(v.predicted_start ? fmt::format("  {} would resume ~{}, running what is left of its estimate",
                                            plan.jobs[i].id, local_time(*v.predicted_start, l.now))
                              : fmt::format("  {} would not run again as things stand", plan.jobs[i].id));
  return status;
}

std::string pause_plan(const PlanSetup& s, bool on) { return set_paused(plan_paths(s), on, unix_now()); }

std::optional<int> as_job_wrapper(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == kJobWrapperArg) return job_wrapper(argc, argv);
  return std::nullopt;
}

State plan_state(const PlanSetup& s) { return read_state(plan_paths(s)); }

std::string events_log_of(const PlanSetup& s) { return events_path_for(plan_paths(s).state); }

std::string predictions_log_of(const PlanSetup& s) { return predictions_path_for(plan_paths(s).state); }

std::vector<Attempt> logged_attempts(const PlanSetup& s, std::vector<std::string>* warnings) {
  return attempts_of(read_events(events_log_of(s), warnings));
}

}  // namespace gpuq
