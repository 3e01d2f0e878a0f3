// gpuq: a dependency and priority GPU job queue for one multi-GPU node.
// The CLI layer: each subcommand declares its flags and calls the library.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <system_error>
#include <thread>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuq/phase.h"
#include "gpuq/async.h"
#include "gpuq/follow.h"
#include "gpuq/launcher.h"
#include "gpuq/local_files.h"
#include "gpuq/outlook.h"
#include "gpuq/plan.h"
#include "gpuq/probe.h"
#include "gpuq/queue.h"
#include "gpuq/run_loop.h"
#include "gpuq/simulate.h"
#include "gpuq/validate.h"
#include "gpuq/store.h"

namespace {

using namespace gpuq;

/// Exit statuses: 0 success, 1 the command could not do all its work, 2 bad input.
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

/// Every flag of the original; each subcommand shows the ones it uses.
struct Flags {
  std::string plan;
  std::string gpus = "0,1,2,3,4,5,6,7";
  double poll = 20;
  bool all = false;
  double backfill_max_hours = 0.5;
  long long max_retries = 2;
  double retry_after = 300;
  long long max_used_mib = 1024;
  double kill_grace = 30;
  std::string nvidia_smi;
  std::vector<std::string> jobs;
  bool json = false;
  std::string svg;
  bool from_state = false;
  double watch = 0;
  bool strict = false;
  long lines = 20;
  bool follow = false;
};

enum Flag { kGpus, kPoll, kAll, kBackfill, kRetries, kRetryAfter, kMaxUsed };

/// Adds --plan and the original's flags: those in `used` are documented, the
/// rest accepted and ignored (the original took every flag with every command).
void add_flags(CLI::App* sub, Flags& f, std::initializer_list<Flag> used) {
  sub->add_option("--plan", f.plan, "the plan file (JSON); its state, lock and logs/ live beside it")->required();
  auto uses = [&](Flag x) { return std::find(used.begin(), used.end(), x) != used.end(); };
  auto group = [&](CLI::Option* o, Flag x) { o->group(uses(x) ? "Options" : ""); };
  group(sub->add_option("--gpus", f.gpus, "GPU ids of this node, comma-separated")->capture_default_str(), kGpus);
  group(sub->add_option("--poll", f.poll, "longest sleep between two looks at the queue, in seconds")
            ->capture_default_str()
            ->check(CLI::PositiveNumber),
        kPoll);
  group(sub->add_flag("--all", f.all, "also list jobs the default listing leaves out"), kAll);
  group(sub->add_option("--backfill-max-hours", f.backfill_max_hours,
                        "while a higher-priority job waits for GPUs, only jobs this short may start")
            ->capture_default_str()
            ->check(CLI::NonNegativeNumber),
        kBackfill);
  group(sub->add_option("--max-retries", f.max_retries, "automatic retries of a failed job")
            ->capture_default_str()
            ->check(CLI::NonNegativeNumber),
        kRetries);
  group(sub->add_option("--retry-after", f.retry_after, "seconds between a failure and its automatic retry")
            ->capture_default_str()
            ->check(CLI::NonNegativeNumber),
        kRetryAfter);
  group(sub->add_option("--max-used-mib", f.max_used_mib,
                        "a GPU with more memory in use than this (nvidia-smi) is not given to a new job")
            ->capture_default_str(),
        kMaxUsed);
}

std::optional<std::vector<int>> node_gpus(const Flags& f) {
  std::string err;
  auto ids = parse_gpu_list(f.gpus, &err);
  if (!ids) fmt::print(stderr, "gpuq: {}\n", err);
  return ids;
}

/// Loads and checks the plan, or prints every problem. The loader's warnings go to stderr,
/// or to `warnings` when given (validate reports them as its own findings).
std::optional<Plan> load_or_report(const Flags& f, const std::vector<int>& gpus,
                                   std::vector<std::string>* warnings = nullptr) {
  PlanLoad load = load_plan(f.plan, gpus);
  if (!load.plan) {
    fmt::print(stderr, "gpuq: the plan {} is not valid ({} problem{}):\n", f.plan, load.errors.size(),
               load.errors.size() == 1 ? "" : "s");
    for (const auto& e : load.errors) fmt::print(stderr, "  {}\n", e);
    return std::nullopt;
  }
  if (warnings)
    *warnings = load.warnings;
  else
    for (const auto& w : load.warnings) fmt::print(stderr, "gpuq: warning: {}\n", w);
  return std::move(load.plan);
}

RunOptions run_options(const Flags& f, const std::vector<int>& gpus) {
  RunOptions opt;
  opt.node_gpus = gpus;
  opt.poll = f.poll;
  opt.backfill_max_hours = f.backfill_max_hours;
  opt.max_retries = f.max_retries;
  opt.retry_after = f.retry_after;
  opt.max_used_mib = f.max_used_mib;
  opt.kill_grace = f.kill_grace;
  const char* env = std::getenv("GPUQ_NVIDIA_SMI");
  opt.nvidia_smi = !f.nvidia_smi.empty() ? f.nvidia_smi : env && *env ? env : "nvidia-smi";
  return opt;
}

bool file_exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

/// Writes `text` to `path`, or says why it could not.
bool write_output(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0) {
    fmt::print(stderr, "gpuq: cannot write {}: {}\n", path, std::strerror(errno));
    return false;
  }
  return true;
}

/// What every command starts from: the node's GPUs and the checked plan.
struct Loaded {
  std::vector<int> gpus;
  Plan plan;
};

/// Parses --gpus and loads the plan, or prints every problem (then the exit status is 2).
std::optional<Loaded> load_command(const Flags& f) {
  auto gpus = node_gpus(f);
  if (!gpus) return std::nullopt;
  auto plan = load_or_report(f, *gpus);
  if (!plan) return std::nullopt;
  return Loaded{std::move(*gpus), std::move(*plan)};
}

/// Warns about state entries of jobs the plan no longer has (renamed or removed jobs).
void warn_unknown_entries(const Plan& plan, const PlanPaths& paths, const State& state) {
  // Usually every entry is a job of the plan: the binding of state to plan (which the
  // outlook needs anyway) says so without looking each id up again.
  size_t known = 0;
  for (size_t i = 0; i < plan.jobs.size(); ++i) known += state.of(plan, i) != nullptr;
  if (known == state.entries().size()) return;
  std::string list;
  size_t n = 0;
  for (const auto& [id, s] : state.entries()) {
    if (plan.find(id)) continue;
    if (n++ < 10) list += (list.empty() ? "" : ", ") + id + " (" + status_name(s.status) + ")";
  }
  if (n)
    fmt::print(stderr,
               "gpuq: warning: {} names {} job(s) that are not in {}: {}{}. Their entries are kept as they are "
               "(a running one keeps its GPUs until it ends); if the jobs are gone for good, delete their entries "
               "while no `gpuq run` is going\n",
               paths.state, n, paths.plan, list, n > 10 ? ", ..." : "");
}

// Short commands that read a big plan spend much of their time in page faults, 4 KB at
// a time (bench/run.sh measures status with and without this; README has the figures).
// This gives them one heap of transparent huge pages: every thread allocates from the
// main arena, which is grown once, untouched, and marked MADV_HUGEPAGE, so that it fills
// 2 MB at a time. Where the kernel has no THP it is a no-op.
void huge_page_heap() {
  constexpr size_t kHeap = size_t{256} << 20;
  mallopt(M_ARENA_MAX, 1);
  constexpr size_t kChunk = size_t{32} << 20;  // glibc's largest mmap threshold
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kChunk));  // vectors up to 32 MB from the heap too
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // keep what is freed, untouched or not
  char* before = static_cast<char*>(sbrk(0));
  void* chunks[kHeap / kChunk] = {};
  for (auto& c : chunks) c = std::malloc(kChunk - 4096);
  for (auto* c : chunks) std::free(c);
  char* after = static_cast<char*>(sbrk(0));
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  uintptr_t lo = (reinterpret_cast<uintptr_t>(before) + kHuge - 1) & ~(kHuge - 1);
  uintptr_t hi = reinterpret_cast<uintptr_t>(after) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

/// The free GPUs as `run` would see them now: not used by a running job, not over --max-used-mib.
GpuMask free_now(const State& state, const RunOptions& opt, std::optional<GpuReading> probed = std::nullopt) {
  GpuMask busy = 0;
  for (const auto& [id, s] : state.entries())
    if ((s.status == Status::Running || s.kill_sent) && s.gpus) busy |= mask_of(*s.gpus);
  GpuReading reading = probed ? std::move(*probed) : probe_gpus(opt.nvidia_smi, opt.nvidia_smi_timeout);
  if (reading.used_mib)
    for (auto& [g, mib] : *reading.used_mib)
      if (mib > opt.max_used_mib && g <= kMaxGpuId) busy |= GpuMask{1} << g;
  return mask_of(opt.node_gpus) & ~busy;
}

int cmd_simulate(const Flags& f) {
  huge_page_heap();
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const std::vector<int>* gpus = &loaded->gpus;
  const Plan* plan = &loaded->plan;
  SimOptions opt;
  opt.node_gpus = *gpus;
  opt.backfill_max_hours = f.backfill_max_hours;
  std::optional<SimStart> from;
  if (f.from_state) {
    PlanPaths paths = paths_for(f.plan);
    State state = read_state(paths);
    double now = unix_now();
    refresh(paths, state, now);
    RunOptions ro = run_options(f, *gpus);
    from = live_start(*plan, state, ro, now, free_now(state, ro, GpuReading{}), LocalFiles());
  }
  Simulation sim = simulate(*plan, opt, from ? &*from : nullptr);
  for (const auto& note : sim.notes) fmt::print(stderr, "gpuq: {}\n", note);
  if (!f.svg.empty()) {
    std::vector<Bar> bars;
    for (const SimRow& r : sim.rows) bars.push_back({r.job, "predicted", r.start, r.end, r.gpus});
    if (!write_output(f.svg, gantt_svg(*plan, bars, *gpus, from ? std::optional<double>(0.0) : std::nullopt,
                                       "gpuq simulate: " + f.plan)))
      return kExitFailure;
  }
  if (f.json) {
    std::string out = simulation_json(*plan, f.plan, sim, opt);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return sim.stuck.empty() || from ? 0 : kExitFailure;
  }
  if (from && !sim.stuck.empty()) {
    fmt::print(stderr, "gpuq: {} job(s) never start as things stand:\n", sim.stuck.size());
    for (const Stuck& s : sim.stuck) fmt::print(stderr, "  {}: {}\n", plan->jobs[s.job].id, s.why);
    sim.stuck.clear();
  }
  if (!sim.stuck.empty()) {
    fmt::print(stderr, "gpuq: {}: {}", f.plan, format_stuck(*plan, sim));
    return kExitFailure;
  }
  std::string out = format_timeline(*plan, sim, opt, f.all);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int cmd_run(const Flags& f) {
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const std::vector<int>* gpus = &loaded->gpus;
  const Plan* plan = &loaded->plan;
  RunOptions opt = run_options(f, *gpus);
  PlanPaths paths = paths_for(f.plan);
  RunGuard guard(paths);
  warn_unknown_entries(*plan, paths, read_state(paths));
  return run_queue(*plan, paths, opt, stdout);
}

/// The Gantt bars of a live queue: what ran (hours before now) and what is predicted.
std::vector<Bar> live_bars(const Plan& plan, const State& state, const Outlook& o) {
  std::vector<Bar> bars;
  std::vector<char> predicted(plan.jobs.size(), 0);
  for (const SimRow& r : o.sim.rows) {
    const JobState* s = state.of(plan, r.job);
    bool running = s && s->status == Status::Running;
    bars.push_back({r.job, running ? "running" : "predicted", r.start, r.end, r.gpus});
    predicted[r.job] = 1;
  }
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobState* s = state.of(plan, i);
    if (predicted[i] || !s || !s->start || !s->end) continue;
    if (s->status != Status::Done && s->status != Status::Failed) continue;
    bars.push_back({i, status_name(s->status), (*s->start - o.now) / 3600, (*s->end - o.now) / 3600,
                    s->gpus.value_or(std::vector<int>{})});
  }
  return bars;
}

int status_once(const Flags& f, const Plan& plan, const std::vector<int>& gpus, State state,
                std::optional<GpuReading> probed = std::nullopt) {
  PlanPaths paths = paths_for(f.plan);
  warn_unknown_entries(plan, paths, state);
  double now = unix_now();
  refresh(paths, state, now);  // in memory only: status changes nothing (fix 13)
  phase("refresh");
  RunOptions opt = run_options(f, gpus);
  // Text without --all shows the first rows only: only they need their reasons worked out.
  Outlook o = make_outlook(plan, state, opt, now, free_now(state, opt, std::move(probed)), LocalFiles(),
                           f.json || f.all ? std::nullopt : std::optional<size_t>(kOutlookRows));
  phase("outlook");
  if (!f.svg.empty() &&
      !write_output(f.svg, gantt_svg(plan, live_bars(plan, state, o), gpus, 0.0, "gpuq status: " + f.plan)))
    return kExitFailure;
  std::string out = f.json ? outlook_json(plan, f.plan, o)
                           : format_status(plan, state, now, f.all) + "\n" + format_outlook(plan, o, f.all);
  phase("format");
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return 0;
}

/// nvidia-smi, asked on a thread of its own (it takes 0.1 to 0.5 s on a real node, or hangs
/// until its timeout) while this one loads the plan and the state. The thread is detached:
/// a command that fails before it needs the reading exits without waiting for it. It uses
/// nothing but its copy of the command (no object that exit destroys). Where no thread can
/// be had, nvidia-smi is asked when the reading is wanted.
std::future<GpuReading> probe_meanwhile(const RunOptions& opt) {
  auto ask = [command = opt.nvidia_smi, timeout = opt.nvidia_smi_timeout] { return probe_gpus(command, timeout); };
  std::packaged_task<GpuReading()> task(ask);
  std::future<GpuReading> reading = task.get_future();
  try {
    std::thread(std::move(task)).detach();
  } catch (const std::system_error&) {
    return std::async(std::launch::deferred, ask);
  }
  return reading;
}

int cmd_status(const Flags& f) {
  huge_page_heap();
  phase("start");
  // The state is read on a second core while this one reads the plan (bench/run.sh
  // measured the difference). It touches nothing but its copy of the paths; its errors
  // wait for the plan's (get() rethrows them), so a bad plan is still reported first
  // and alone, and a damaged state is reported by main (exit 1).
  std::future<State> state;
  std::future<GpuReading> probe;
  if (f.watch <= 0) {
    probe = probe_meanwhile(run_options(f, {}));
    state = on_another_core([paths = paths_for(f.plan)] { return read_state(paths); });
  }
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const std::vector<int>* gpus = &loaded->gpus;
  const Plan* plan = &loaded->plan;
  phase("load plan");
  if (f.watch <= 0) {
    State s = state.get();
    phase("read state (the rest of it)");
    return status_once(f, *plan, *gpus, std::move(s), probe.get());
  }
  // Redraw until Ctrl-C, for a tmux pane.
  while (true) {
    std::fputs("\x1b[H\x1b[2J", stdout);
    fmt::print("gpuq status --plan {}   (every {:g} s; Ctrl-C to stop)   {}\n\n", f.plan, f.watch,
               clock_stamp(unix_now()));
    try {
      status_once(f, *plan, *gpus, read_state(paths_for(f.plan)));
    } catch (const StoreError& e) {
      fmt::print("gpuq: {}\n", e.what());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(f.watch * 1000)));
  }
}

int cmd_validate(const Flags& f) {
  auto gpus = node_gpus(f);
  if (!gpus) return kExitBadInput;
  std::vector<std::string> loader_warnings;
  auto plan = load_or_report(f, *gpus, &loader_warnings);
  if (!plan) return kExitBadInput;
  auto readable = [](const std::string& p) {
    struct stat st;
    return ::access(p.c_str(), R_OK) == 0 && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  };
  // The loader's warnings first (its checks come first), counted and printed as validate's own.
  std::vector<Finding> findings = loader_findings(loader_warnings);
  for (Finding& x : validate_plan(*plan, *gpus, f.backfill_max_hours, readable, file_exists))
    findings.push_back(std::move(x));
  size_t errors = 0, warnings = 0;
  for (const Finding& x : findings) {
    (x.error ? errors : warnings)++;
    fmt::print("{}: {}{}\n", x.error ? "error" : "warning", x.job.empty() ? "" : "job '" + x.job + "': ", x.text);
  }
  fmt::print("{}: {} job(s), {} error(s), {} warning(s)\n", f.plan, plan->jobs.size(), errors, warnings);
  if (errors) return kExitBadInput;
  return warnings && f.strict ? kExitFailure : 0;
}

int cmd_logs(const Flags& f) {
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const Plan* plan = &loaded->plan;
  if (f.jobs.size() != 1 || !plan->find(f.jobs[0])) {
    fmt::print(stderr, "gpuq logs: no job {} in {}\n", f.jobs.empty() ? "" : f.jobs[0], f.plan);
    return kExitBadInput;
  }
  const std::string& id = f.jobs[0];
  PlanPaths paths = paths_for(f.plan);
  if (f.follow) {
    // The longest wait without an inotify event (tests set it long, so that a missed event shows).
    double safety_s = 5;
    if (const char* env = std::getenv("GPUQ_FOLLOW_SAFETY_NET_S"); env && *env) {
      char* end = nullptr;
      double v = std::strtod(env, &end);
      if (*end == '\0' && v > 0 && v < 86400) safety_s = v;
    }
    Status st = follow_log(paths, id, f.lines, stdout, stderr, static_cast<int>(safety_s * 1000));
    fmt::print(stderr, "gpuq logs: {} is {}\n", id, status_name(st));
    return 0;
  }
  if (!print_tail(paths.log(id), f.lines, stdout)) {
    fmt::print(stderr, "gpuq logs: {} has no log yet ({} does not exist): it has not started\n", id, paths.log(id));
    return kExitFailure;
  }
  return 0;
}

int cmd_control(const Flags& f, const std::string& action) {
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const Plan* plan = &loaded->plan;
  PlanPaths paths = paths_for(f.plan);
  FileStore store(paths);
  PosixLauncher launcher(paths);
  SystemClock clock;
  ControlResult r = control(*plan, f.plan, store, launcher, clock, action, f.jobs);
  for (const auto& line : r.lines) fmt::print(r.status == kExitBadInput ? stderr : stdout, "{}\n", line);
  return r.status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], kJobWrapperArg) == 0) return job_wrapper(argc, argv);
  CLI::App app{
      "gpuq: a dependency and priority GPU job queue for one multi-GPU node.\n"
      "Runs a plan (a JSON list of jobs) on the node's GPUs: highest priority first, short jobs\n"
      "backfilled while a wide job waits, 2-GPU jobs on NVLink pairs, state kept beside the plan.\n"
      "Exit status: 0 success, 1 the command could not do all its work, 2 bad input."};
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", "gpuq 0.1.0");
  Flags f;
  std::function<int()> action;

  auto* run = app.add_subcommand("run", "run the plan: start jobs as they become ready, until all are finished");
  add_flags(run, f, {kGpus, kPoll, kBackfill, kRetries, kRetryAfter, kMaxUsed});
  run->add_option("--kill-grace", f.kill_grace,
                  "seconds a killed job may take to exit after SIGTERM before its process group gets SIGKILL")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  run->add_option("--nvidia-smi", f.nvidia_smi,
                  "the nvidia-smi command to probe GPU memory with (default: $GPUQ_NVIDIA_SMI, else nvidia-smi)");
  run->callback([&] { action = [&] { return cmd_run(f); }; });

  auto* status = app.add_subcommand(
      "status", "show each job's status, why jobs wait, and when each job and the plan are predicted to finish");
  add_flags(status, f, {kGpus, kAll, kBackfill, kRetries, kRetryAfter, kMaxUsed});
  status->add_flag("--json", f.json, "print one JSON object (schema in README) instead of text");
  status->add_option("--svg", f.svg, "also write a Gantt chart of what ran and what is predicted to FILE");
  status->add_option("--watch", f.watch, "redraw every S seconds until Ctrl-C (for a tmux pane)")
      ->expected(0, 1)
      ->default_str("5");
  status->add_option("--nvidia-smi", f.nvidia_smi, "the nvidia-smi command (default: $GPUQ_NVIDIA_SMI, else nvidia-smi)");
  status->callback([&] { action = [&] { return cmd_status(f); }; });

  auto* sim = app.add_subcommand("simulate", "predict the timeline of the plan from est_hours");
  add_flags(sim, f, {kGpus, kAll, kBackfill});
  sim->add_flag("--json", f.json, "print one JSON object (schema in README) instead of the timeline");
  sim->add_option("--svg", f.svg, "also write the timeline as a Gantt chart (SVG) to FILE");
  sim->add_flag("--from-state", f.from_state,
                "predict from the live state: what is done stays done, running jobs finish their estimate");
  sim->callback([&] { action = [&] { return cmd_simulate(f); }; });

  auto* validate = app.add_subcommand(
      "validate", "check the whole plan before a long run: deadlocks, missing scripts and files, missing estimates");
  add_flags(validate, f, {kGpus, kBackfill});
  validate->add_flag("--strict", f.strict, "exit 1 when there are warnings (errors always exit 2)");
  validate->callback([&] { action = [&] { return cmd_validate(f); }; });

  auto* logs = app.add_subcommand("logs", "print the end of a job's log (logs/ID.log), or follow it until the job ends");
  add_flags(logs, f, {});
  logs->add_option("job", f.jobs, "the job id")->required()->expected(1);
  logs->add_option("-n,--lines", f.lines, "how many lines from the end (0: the whole log)")->capture_default_str();
  logs->add_flag("-f,--follow", f.follow, "keep printing what the job writes until it is no longer running");
  logs->callback([&] { action = [&] { return cmd_logs(f); }; });

  auto* retry = app.add_subcommand("retry", "make failed, blocked, held or done jobs pending again (not running ones)");
  auto* kill = app.add_subcommand("kill", "stop running jobs: SIGTERM to the process group, marked failed (exit -15)");
  auto* hold = app.add_subcommand("hold", "keep pending, failed or blocked jobs from starting until `retry`");
  for (auto [sub, name] : {std::pair{retry, "retry"}, std::pair{kill, "kill"}, std::pair{hold, "hold"}}) {
    add_flags(sub, f, {});
    sub->add_option("job", f.jobs, "job ids")->required();
    std::string action_name = name;
    sub->callback([&, action_name] { action = [&, action_name] { return cmd_control(f, action_name); }; });
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  try {
    int status = action ? action() : 0;
    phase("free");
    return status;
  } catch (const StoreError& e) {
    fmt::print(stderr, "gpuq: {}\n", e.what());
    return kExitFailure;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuq: {}\n", e.what());
    return kExitFailure;
  }
}
