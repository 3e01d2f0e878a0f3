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

#include "gpuq/core/plan.h"

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
            ->check(CLI::NonNegativeNumber.description(""))
            ->type_name("N"),
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

void add_preempt_flags(CLI::App* sub, Flags& f) {
  setting_flag(f, sub->add_option("--preemptible", f.preemptible,
                                  "true: every job without its own \"preemptible\" may be stopped to give its GPUs to "
                                  "more urgent work, and runs again")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"true", "false"}).description(""))
                      ->type_name("BOOL"));
  setting_flag(f, sub->add_option("--preempt-grace", f.preempt_grace,
                                  "seconds a preempted job may take to checkpoint and exit after its signal, before "
                                  "SIGKILL")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("S"));
  setting_flag(f, sub->add_option("--preempt-min-minutes", f.preempt_min_minutes,
                                  "a job runs at least this long after its (re)start before it may be preempted")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("M"));
}

void add_host_flags(CLI::App* sub, Flags& f) {
  setting_flag(f, sub->add_option("--node-cpus", f.node_cpus,
                                  "cores jobs may use at once, counted where a job gives cpus or mem_gib (0: this "
                                  "machine's less --reserve-cpus, 1)")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("N"));
  setting_flag(f, sub->add_option("--node-mem-gib", f.node_mem_gib,
                                  "GiB of host memory jobs may use at once, likewise (0: this machine's less "
                                  "--reserve-mem-gib, 4)")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("GIB"));
  // Said in the two lines above, not on lines of their own: run --help fits a screen.
  setting_flag(f, sub->add_option("--reserve-cpus", f.reserve_cpus, "cores kept for the system")
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->group(""));
  setting_flag(f, sub->add_option("--reserve-mem-gib", f.reserve_mem_gib, "GiB of host memory kept for the system")
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->group(""));
  setting_flag(f, sub->add_option("--mem-margin-percent", f.mem_margin_percent,
                                  "run stops a job whose processes' resident memory is over its mem_gib by more "
                                  "than this percent (a job's cgroup holds it there too: --mem-cgroup)")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("P"));
  setting_flag(f, sub->add_option("--mem-cgroup", f.mem_cgroup,
                                  "auto: each job with mem_gib in a cgroup whose memory limit the kernel holds, "
                                  "where the node allows; off: never")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"auto", "off"}).description(""))
                      ->type_name("WHEN")
                      ->group(""));
}

void add_quiet_minutes(CLI::App* sub, Flags& f) {
  setting_flag(f, sub->add_option("--quiet-minutes", f.quiet_minutes,
                                  "hang watchdog for every job without quiet_minutes: its log silent and its GPUs "
                                  "idle for M minutes marks it hung? (0: off)")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("M"));
}

bool resolve_plan(Flags& f) {
  if (!f.plan.empty()) return true;
  f.plan = plan_in_reach(f.plan);
  if (f.plan == "plan.json") fmt::print(stderr, "gpuq: no --plan given: using plan.json in the current folder\n");
  if (!f.plan.empty()) return true;
  fmt::print(stderr,
             "gpuq: no plan: give --plan PLAN.json, set GPUQ_PLAN, or run gpuq in the folder that holds plan.json\n");
  return false;
}

std::optional<std::vector<int>> node_gpus(const Flags& f) {
  std::string err;
  auto ids = parse_gpu_list(f.gpus, &err);
  if (!ids) fmt::print(stderr, "gpuq: {}\n", err);
  return ids;
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

void keep_until_exit(std::shared_ptr<void> x) {
  static auto* kept = new std::vector<std::shared_ptr<void>>;
  kept->push_back(std::move(x));
}

void add_gpu_flags(CLI::App* sub, Flags& f, const char* pairs_default) {
  setting_flag(f, sub->add_option("--gpu-probe", f.gpu_probe,
                                  "where GPU readings come from: auto (NVML, else nvidia-smi), nvml, nvidia-smi, none")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"auto", "nvml", "nvidia-smi", "none"}).description(""))
                      ->type_name("KIND"));
  setting_flag(f, sub->add_option("--pairs", f.pairs,
                                  fmt::format("how multi-GPU jobs are placed: auto (from the GPU topology), original "
                                              "(pairs 0-1, 2-3, 4-5, 6-7), or pairs such as 0-2,1-3 (default: {})",
                                              pairs_default)));
  setting_flag(f, sub->add_option("--ignore-process", f.ignore_process,
                                  "a process name (as ps shows it) whose GPU processes never make a GPU busy; "
                                  "repeatable")
                      ->allow_extra_args(false));
}

bool say_load(const Flags& f, const PlanReport& r, std::vector<std::string>* warnings,
              std::vector<std::string>* unknown_fields) {
  if (!r.bad_gpus.empty()) {
    fmt::print(stderr, "gpuq: {}\n", r.bad_gpus);
    return false;
  }
  if (!r.not_a_plan.empty()) {
    fmt::print(stderr, "gpuq: plan {}: {}\n", f.plan, r.not_a_plan);
    return false;
  }
  if (!r.errors.empty() || !r.plan) {
    fmt::print(stderr, "gpuq: the plan {} is not valid ({} problem{}):\n", f.plan, r.errors.size(),
               r.errors.size() == 1 ? "" : "s");
    for (const auto& e : r.errors) fmt::print(stderr, "  {}\n", e);
    // The fields gpuq does not read with the errors, not only once they are fixed.
    for (const auto& u : r.unknown_fields) fmt::print(stderr, "gpuq: warning: {}\n", u);
    return false;
  }
  if (unknown_fields)
    *unknown_fields = r.unknown_fields;
  else
    for (const auto& u : r.unknown_fields) fmt::print(stderr, "gpuq: warning: {}\n", u);
  if (warnings)
    *warnings = r.warnings;
  else
    for (const auto& w : r.warnings) fmt::print(stderr, "gpuq: warning: {}\n", w);
  return true;
}

std::optional<Loaded> load_command(Flags& f, std::vector<std::string>* warnings,
                                   std::vector<std::string>* unknown_fields) {
  PlanReport r = load_plan_report(f);
  if (!say_load(f, r, warnings, unknown_fields)) return std::nullopt;
  return Loaded{std::move(r.gpus), std::move(*r.plan)};
}

bool take_plan_settings_only(Flags& f, const char* command) {
  std::string note;
  std::vector<std::string> errors = gpuq::take_plan_settings_only(f, command ? &note : nullptr);
  if (!note.empty()) fmt::print(stderr, "gpuq {}: note: {}\n", command, note);
  if (errors.empty()) return true;
  fmt::print(stderr, "gpuq: the plan {} is not valid ({} problem{}):\n", f.plan, errors.size(),
             errors.size() == 1 ? "" : "s");
  for (const std::string& e : errors) fmt::print(stderr, "  {}\n", e);
  return false;
}

}  // namespace gpuq::cli
