// The CLI layer's shared parts: flags, loading the plan, the free GPUs.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <filesystem>
#include <malloc.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpuq/core/hint.h"
#include "gpuq/core/local_time.h"
#include "gpuq/live/node_dir.h"
#include "gpuq/live/run_info.h"
#include "gpuq/views/node_text.h"
#include "gpuq/core/plan.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/snapshots.h"
#include "gpuq/live/store.h"

#include "cli.h"

namespace gpuq::cli {

/// Adds --plan and the original's flags: those in `used` are documented, the
/// rest accepted and ignored (the original took every flag with every command).
void add_flags(CLI::App* sub, Flags& f, std::initializer_list<Flag> used) {
  sub->add_option("--plan", f.plan,
                  "the plan file (JSON); its state, lock and logs/ live beside it (default: $GPUQ_PLAN, else "
                  "plan.json in the current folder)")
      ->type_name(kPlanType);
  setting_flag(f, sub->add_option("--state-dir", f.state_dir,
                                  "keep the state, locks and logs/ in this folder instead of beside the plan "
                                  "(default: $GPUQ_STATE_DIR)"));
  setting_flag(f, sub->add_option("--workdir", f.workdir,
                                  "run jobs in this folder and take relative script and file: paths from it "
                                  "(default: the plan's \"workdir\", else the current folder)"));
  auto uses = [&](Flag x) { return std::find(used.begin(), used.end(), x) != used.end(); };
  auto group = [&](CLI::Option* o, Flag x) {
    o->group(uses(x) ? "Options" : "");
    if (x != kAll) setting_flag(f, o);
  };
  group(sub->add_option("--gpus", f.gpus, "GPU ids of this node, comma-separated")->capture_default_str(), kGpus);
  group(sub->add_option("--poll", f.poll, "longest sleep between two looks at the queue, in seconds")
            ->capture_default_str()
            ->check(CLI::PositiveNumber),
        kPoll);
  group(sub->add_flag("--all", f.all, "also list jobs the default listing leaves out"), kAll);
  group(sub->add_option("--backfill-max-hours", f.backfill_max_hours,
                        "while a higher-priority job waits for GPUs, only jobs this short (hours) may start")
            ->capture_default_str()
            ->check(CLI::NonNegativeNumber.description(""))
            ->type_name("H"),
        kBackfill);
  group(sub->add_option("--max-retries", f.max_retries, "automatic retries of a failed job")
            ->capture_default_str()
            ->check(CLI::NonNegativeNumber),
        kRetries);
  group(sub->add_option("--retry-after", f.retry_after, "seconds between a failure and its automatic retry")
            ->capture_default_str()
            ->check(CLI::NonNegativeNumber.description(""))
            ->type_name("S"),
        kRetryAfter);
  group(sub->add_option("--max-used-mib", f.max_used_mib,
                        "a GPU with more memory in use than this (nvidia-smi) is not given to a new job")
            ->capture_default_str(),
        kMaxUsed);
}

void add_time_limit_factor(CLI::App* sub, Flags& f) {
  setting_flag(f, sub->add_option("--time-limit-factor", f.time_limit_factor,
                                  "a job without time_limit_hours gets a limit of F x est_hours (0: no limit)")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("F"));
}

SlurmShards cluster_shards(const Flags& f) {
  return {slurm_shards_per_gpu(), f.gpu_mem_gib, f.gpu_mem_headroom};
}

void add_gpu_memory(CLI::App* sub, Flags& f) {
  setting_flag(f, sub->add_option("--gpu-mem-gib", f.gpu_mem_gib,
                                  "GiB of memory of each GPU where the GPU probe gives none: jobs with gpu_mem_gib "
                                  "share GPUs within it")
                      ->capture_default_str()
                      ->check(CLI::PositiveNumber.description(""))
                      ->type_name("GIB"));
  setting_flag(f, sub->add_option("--gpu-mem-headroom", f.gpu_mem_headroom,
                                  "percent of each GPU's memory that jobs sharing it leave free")
                      ->capture_default_str()
                      ->check(CLI::Range(0.0, 99.0).description(""))
                      ->type_name("PCT"));
}

void add_quiet_minutes(CLI::App* sub, Flags& f) {
  setting_flag(f, sub->add_option("--quiet-minutes", f.quiet_minutes,
                                  "hang watchdog for every job without quiet_minutes: its log silent and its GPUs "
                                  "idle for M minutes marks it hung? (0: off)")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("M"));
}

std::string plan_in_reach(const Flags& f) {
  if (!f.plan.empty()) return f.plan;
  if (const char* env = std::getenv("GPUQ_PLAN"); env && *env) return env;
  struct stat st;
  if (::stat("plan.json", &st) == 0 && !S_ISDIR(st.st_mode)) return "plan.json";
  return "";
}

bool resolve_plan(Flags& f) {
  if (!f.plan.empty()) return true;
  f.plan = plan_in_reach(f);
  if (f.plan == "plan.json") fmt::print(stderr, "gpuq: no --plan given: using plan.json in the current folder\n");
  if (!f.plan.empty()) return true;
  fmt::print(stderr,
             "gpuq: no plan: give --plan PLAN.json, set GPUQ_PLAN, or run gpuq in the folder that holds plan.json\n");
  return false;
}

std::string hint_flags_for(const Flags& f) {
  namespace fs = std::filesystem;
  const char* env = std::getenv("GPUQ_PLAN");
  std::string dflt = env && *env ? env : "plan.json";
  std::error_code ec1, ec2;
  fs::path given = fs::weakly_canonical(f.plan, ec1), taken = fs::weakly_canonical(dflt, ec2);
  bool same = f.plan == dflt || (!ec1 && !ec2 && given == taken);
  std::string out = same ? "" : "--plan " + shell_word(f.plan);
  if (f.source_of("state_dir") == SettingSource::Flag && !f.state_dir.empty())
    out += (out.empty() ? "" : " ") + std::string("--state-dir ") + shell_word(f.state_dir);
  return out;
}

PlanPaths plan_paths(const Flags& f) {
  if (!f.state_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.state_dir, ec);  // a failure is reported where a file is made in it
  }
  return paths_for(f.plan, f.state_dir);
}

std::string absolute_workdir(const Workdir& wd) {
  std::error_code ec;
  return wd.path.empty() ? std::filesystem::current_path(ec).string() : wd.path;
}

std::string snapshot_problem(const Flags& f, const Plan& plan, const Workdir& wd, Snapshots& snapshots) {
  const Job* asks = nullptr;
  for (const Job& j : plan.jobs)
    if (uses_snapshot(j, f.snapshot) && (!asks || j.snapshot)) {
      asks = &j;
      if (j.snapshot) break;  // a job's own field names the job; else the setting is named
    }
  if (!asks) return "";
  std::string why;
  if (!snapshots.repo_of(absolute_workdir(wd), &why).empty()) return "";
  SettingSource from = f.source_of("snapshot");
  std::string who = asks->snapshot ? fmt::format("job \"{}\" asks for \"snapshot\": \"git\"", asks->id)
                    : from == SettingSource::Flag ? std::string("--snapshot git is given")
                    : from == SettingSource::Run  ? std::string("the running `gpuq run` takes snapshots")
                                                  : std::string("\"settings\" give \"snapshot\": \"git\"");
  return fmt::format("{}: {}, but {}", f.plan, who, why);
}

Workdir workdir_of(const Flags& f, const std::optional<std::string>& plan_workdir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto absolute = [&](const fs::path& p) {
    fs::path a = fs::absolute(p, ec).lexically_normal();
    std::string s = a.string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
  };
  SettingSource from = f.source_of("workdir");
  if (!f.workdir.empty() && (from == SettingSource::Flag || from == SettingSource::Run)) {
    std::string p = absolute(expand_path(f.workdir));
    return {p, p + (from == SettingSource::Flag ? " (--workdir)" : " (the running `gpuq run`'s workdir)")};
  }
  std::optional<std::string> in_plan = plan_workdir;
  if (!in_plan && from == SettingSource::Plan) in_plan = f.workdir;
  if (in_plan) {
    fs::path w = expand_path(*in_plan);
    std::string p = absolute(w.is_absolute() ? w : fs::path(f.plan).parent_path() / w);
    return {p, fmt::format("{} (the plan's \"workdir\" {})", p, *in_plan)};
  }
  return {"", absolute(fs::current_path(ec)) + " (the current folder)"};
}

std::optional<std::vector<int>> node_gpus(const Flags& f) {
  std::string err;
  auto ids = parse_gpu_list(f.gpus, &err);
  if (!ids) fmt::print(stderr, "gpuq: {}\n", err);
  return ids;
}

std::string with_gpus_source(std::string error, const std::string& source) {
  if (auto at = error.find("--gpus gives"); at != std::string::npos && source != "--gpus") error.replace(at, 6, source);
  return error;
}

std::optional<Plan> load_or_report(Flags& f, std::vector<std::string>* warnings,
                                   std::vector<std::string>* unknown_fields) {
  // A path that is no plan file at all: one line, before any talk of problems in a plan.
  if (std::string problem = plan_file_problem(f.plan); !problem.empty()) {
    fmt::print(stderr, "gpuq: plan {}: {}\n", f.plan, problem);
    return std::nullopt;
  }
  PlanLoad load = load_plan_choosing_gpus(f.plan, choose_gpus(f));
  take_settings(f, {});  // a plan that is not JSON gave none: the others still count
  for (std::string& e : settings_problems(f)) load.errors.insert(load.errors.begin(), std::move(e));
  if (!load.plan || !load.errors.empty()) {
    fmt::print(stderr, "gpuq: the plan {} is not valid ({} problem{}):\n", f.plan, load.errors.size(),
               load.errors.size() == 1 ? "" : "s");
    for (const auto& e : load.errors) fmt::print(stderr, "  {}\n", with_gpus_source(e, f.gpus_source));
    // The fields gpuq does not read with the errors, not only once they are fixed.
    for (const auto& u : load.unknown_fields) fmt::print(stderr, "gpuq: warning: {}\n", u);
    return std::nullopt;
  }
  if (unknown_fields)
    *unknown_fields = std::move(load.unknown_fields);
  else
    for (const auto& u : load.unknown_fields) fmt::print(stderr, "gpuq: warning: {}\n", u);
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
  opt.gpu_mem_gib = f.gpu_mem_gib;
  opt.gpu_mem_headroom = f.gpu_mem_headroom;
  opt.max_used_mib = f.max_used_mib;
  opt.kill_grace = f.kill_grace;
  opt.time_limit_factor = f.time_limit_factor;
  opt.quiet_minutes = f.quiet_minutes;
  opt.on_event = f.on_event;
  opt.hook_timeout = f.hook_timeout;
  opt.events_max_mb = f.events_max_mb;
  opt.progress_from_log = f.progress_from_log;
  opt.eta_slip_percent = f.eta_slip_percent;
  opt.eta_slip_minutes = f.eta_slip_minutes;
  opt.snapshot = f.snapshot;
  const char* env = std::getenv("GPUQ_NVIDIA_SMI");
  opt.nvidia_smi = !f.nvidia_smi.empty() ? f.nvidia_smi : env && *env ? env : "nvidia-smi";
  opt.gpu_probe = f.gpu_probe;
  opt.ignore_process = f.ignore_process;
  return opt;
}


bool readable_file(const std::string& path) {
  struct stat st;
  return ::access(path.c_str(), R_OK) == 0 && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// Writes `text` to `path`, or says why it could not.
bool write_output(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0) {
    fmt::print(stderr, "gpuq: cannot write {}: {}\n", path, std::strerror(errno));
    return false;
  }
  return true;
}


std::optional<Loaded> load_command(Flags& f) {
  if (!node_gpus(f)) return std::nullopt;  // a bad --gpus: said before the plan is read
  auto plan = load_or_report(f);
  if (!plan) return std::nullopt;
  auto gpus = node_gpus(f);  // as the settings give them
  if (!gpus) return std::nullopt;
  return Loaded{std::move(*gpus), std::move(*plan)};
}

void warn_state_beside_link(const std::string& plan) {
  if (std::string split = state_beside_link_problem(paths_for(plan)); !split.empty())
    fmt::print(stderr, "gpuq: warning: {}\n", split);
}

/// Warns about state entries of jobs the plan no longer has (renamed or removed jobs). One
/// still running is named on a line of its own: it holds GPUs, and only `kill` reaches it.
/// Entries that a running `run` marked "removed" when an edit dropped their job are expected.
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
    if (s.status == Status::Running) {
      fmt::print(stderr, "gpuq: note: {} runs but is no longer in {}: it keeps GPUs {} until it ends ({} stops it, {} "
                         "shows its log)\n",
                 id, paths.plan, s.gpus ? py_list(*s.gpus) : "[]", hint("kill", {id}), hint("logs", {id}));
      continue;
    }
    if (s.removed) continue;
    if (n++ < 10) list += (list.empty() ? "" : ", ") + id + " (" + status_name(s.status) + ")";
  }
  if (n)
    fmt::print(stderr,
               "gpuq: warning: {} names {} job(s) that are not in {}: {}{}. Their entries are kept as they are, for "
               "the history; they change nothing (a job renamed in the plan starts afresh under its new id)\n",
               paths.state, n, paths.plan, list, n > 10 ? ", ..." : "");
}

/// What status says holds a GPU that a running job the plan no longer has is on.
void name_removed_holders(const Plan& plan, const State& state, std::map<int, std::string>& others) {
  for (const auto& [id, s] : state.entries())
    if (s.status == Status::Running && s.gpus && !plan.find(id))
      for (int g : *s.gpus)
        others[g] = fmt::format("GPU {} busy: {} runs there, no longer in the plan ({} stops it)", g, id, hint("kill", {id}));
}

// Short commands that read a big plan spend much of their time in page faults, 4 KB at
// a time (bench/run.sh measures status with and without this; doc/benchmarks.md has the figures).
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

std::string others_plan_problem(const std::string& plan, const std::string& action) {
  struct stat st{};
  std::string state = paths_for(plan, "").state;
  if (geteuid() == 0 || stat(state.c_str(), &st) != 0 || st.st_uid == geteuid()) return "";
  struct passwd* pw = getpwuid(st.st_uid);
  std::string owner = pw ? pw->pw_name : fmt::format("uid {}", st.st_uid);
  return fmt::format("the plan {} is {}'s (its state {} is theirs): only {} may {} its jobs; {} shows them", plan,
                     owner, state, owner, action, hint("status"));
}

NodeRoom node_room(const Flags& f, const std::vector<int>& gpus) {
  Policy p;
  p.gpu_mem_gib = f.gpu_mem_gib;
  p.gpu_mem_headroom = f.gpu_mem_headroom;
  p.node_gpus = gpus;
  return p.gpu_rooms();
}

std::string node_dir_for(const Flags& f, const std::optional<RunInfo>& info) {
  bool named = !f.node_dir.empty() || std::getenv("GPUQ_NODE_DIR");
  return named || !info || info->node_dir.empty() ? choose_node_dir(f.node_dir) : info->node_dir;
}

NodeLook node_look(const Flags& f, const PlanPaths& paths, const std::vector<int>& gpus, double now,
                   std::map<int, std::string>* others, bool whole, const std::vector<NodeWant>* plan_wants) {
  NodeLook look;
  std::optional<RunInfo> info = read_run_info(paths);
  if (info && info->slurm) return look;  // Slurm places the jobs
  std::string dir = node_dir_for(f, info);
  if (dir.empty()) return look;
  look.dir = dir;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    look.problem = std::filesystem::exists(dir, ec) ? "not a folder" : "no such folder";
    look.line = fmt::format("shared node {}: {}; the prediction leaves other users out\n", dir, look.problem);
    return look;
  }
  GpuMask node = mask_of(gpus);
  NodeView v;
  try {
    v = read_node_dir(dir, node);
  } catch (const std::exception& e) {
    look.problem = e.what();
    look.line = fmt::format("shared node {}: cannot be read ({}); the prediction leaves other users out\n", dir, e.what());
    return look;
  }
  look.notes = v.notes;
  std::string mine = std::filesystem::absolute(paths.plan, ec).lexically_normal().string();
  std::string me = node_user_me();
  std::set<std::string> users;
  // The GPUs other users' jobs hold, this user's other runs', this plan's run's (a GPU packed jobs
  // share counts once).
  GpuMask theirs_m = 0, yours_m = 0, own_m = 0;
  for (const NodeUser& u : v.users)
    for (const NodeRun& r : u.runs) {
      if (u.name == me && r.plan == mine) {  // the plan's own run: status predicts from it; simulate replaces it
        for (const NodeHold& h : r.holds) own_m |= mask_of(h.gpus) & node;
        continue;
      }
      if (r.gone && r.holds.empty()) continue;  // a run that has ended, nothing of it left
      users.insert(u.name != me ? u.name : "you (another plan)");
      for (const NodeHold& h : r.holds) {
        GpuMask g = mask_of(h.gpus) & node;
        if (!g) continue;
        double end = h.start + std::max(0.0, h.est_hours) * 3600;
        look.held.push_back({g, end, u.name == me});
        (u.name == me ? yours_m : theirs_m) |= g;
        for (int id : h.gpus)
          if (others && (node >> id & 1))
            (*others)[id] = fmt::format("{} {} (gpuq, ends ~{})", u.name == me ? "your" : u.name + "'s", h.id,
                                        local_time(std::max(end, now), now));
      }
    }
  const int theirs = count(theirs_m), yours = count(yours_m & ~theirs_m), own = count(own_m);
  look.cap = v.config.limits_of(me).max_gpus;
  for (const std::string& n : look.notes) look.line += "node: " + n + "\n";
  if (users.empty() && !look.cap) return look;  // alone: the plan's own prediction says it all
  if (whole) {  // the plan from its beginning: its run as it would be now, its first ready jobs wanting
    NodeUser* self = nullptr;
    for (NodeUser& u : v.users)
      if (u.name == me) self = &u;
    if (!self) self = &v.users.emplace_back(NodeUser{me, 0, now, {}});
    std::erase_if(self->runs, [&](const NodeRun& r) { return r.plan == mine; });
    NodeRun r;
    r.plan = mine;
    if (plan_wants) r.wants = *plan_wants;
    self->runs.push_back(std::move(r));
  }
  // Once for the node: why each of the plan's ready jobs waits, and when the others' waiting jobs
  // are predicted to run: their GPUs are busy in the plan's prediction meanwhile.
  NodeWaits w = node_whys(v.users, node, now, v.config, f.backfill_max_hours, node_room(f, gpus));
  look.waits = waits_of(w, v.users, me, mine);
  int waiting = 0;
  for (const NodePredicted& p : w.predicted) {
    const NodeUser& u = v.users[p.slot.user];
    if (u.name == me && u.runs[p.slot.run].plan == mine) continue;
    look.held.push_back({mask_of(p.gpus) & node, p.end, u.name == me, p.start});
    ++waiting;
  }
  std::string who;
  for (const std::string& u : users) who += (who.empty() ? "" : ", ") + u;
  auto gpus_text = [](int n) { return fmt::format("{} GPU{}", n, n == 1 ? "" : "s"); };
  std::string held = gpus_text(theirs) + " held by other users' jobs";
  if (yours) held += ", " + gpus_text(yours) + " by your other plans'";
  if (whole && own)
    held += fmt::format("; this plan's own run (holding {}) is left out: the plan is predicted from its beginning "
                        "(--from-state: from where its run is)",
                        gpus_text(own));
  if (waiting)
    held += fmt::format("; their {} waiting job{} placed where the node's fair order starts {}", waiting,
                        waiting == 1 ? " is" : "s are", waiting == 1 ? "it" : "them");
  look.line += fmt::format("shared node {}: {}{}; {} shows every user's jobs\n", dir,
                           who.empty() ? "" : "runs of " + who + "; ", held, hint("status --node"));
  return look;
}

void keep_until_exit(std::shared_ptr<void> x) {
  static auto* kept = new std::vector<std::shared_ptr<void>>;
  kept->push_back(std::move(x));
}

/// The free GPUs as `run` would see them now: not used by a running job, not busy by the reading.
GpuMask free_now(const State& state, const RunOptions& opt, std::optional<GpuReading> probed,
                 std::map<int, std::string>* others) {
  GpuMask busy = busy_in_state(state);
  GpuReading reading = probed ? std::move(*probed) : probe_of(opt)->read();
  GpuRules rules{opt.max_used_mib, opt.ignore_process};
  if (reading.used_mib) busy |= busy_by_reading(reading, state, rules);
  if (reading.used_mib && others) *others = held_by_others(reading, state, rules);
  return mask_of(opt.node_gpus) & ~busy;
}

void add_gpu_flags(CLI::App* sub, Flags& f, const char* pairs_default) {
  setting_flag(f, sub->add_option("--gpu-probe", f.gpu_probe,
                                  "where GPU readings come from: auto (NVML, else nvidia-smi), nvml, nvidia-smi, none")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"auto", "nvml", "nvidia-smi", "none"})));
  setting_flag(f, sub->add_option("--pairs", f.pairs,
                                  fmt::format("how multi-GPU jobs are placed: auto (from the GPU topology), original "
                                              "(pairs 0-1, 2-3, 4-5, 6-7), or pairs such as 0-2,1-3 (default: {})",
                                              pairs_default)));
  setting_flag(f, sub->add_option("--ignore-process", f.ignore_process,
                                  "a process name (as ps shows it) whose GPU processes never make a GPU busy; "
                                  "repeatable")
                      ->allow_extra_args(false));
}

std::optional<Placement> placement_of(const Flags& f, const char* dflt, const RunOptions& opt) {
  std::string text = f.pairs.empty() ? dflt : f.pairs;
  std::string err;
  std::optional<Placement> p = parse_pairs(text, &err);
  if (!p) {
    fmt::print(stderr, "gpuq: {}\n", err);
    return std::nullopt;
  }
  if (p->kind == Placement::Kind::Auto) p->topology = probe_of(opt)->topology().value_or(Topology{});
  return p;
}

std::unique_ptr<GpuProbe> probe_of(const RunOptions& opt) {
  return make_probe(parse_probe_kind(opt.gpu_probe).value_or(ProbeKind::Auto), opt.nvidia_smi,
                    opt.nvidia_smi_timeout);
}

}  // namespace gpuq::cli
