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

void add_flags(CLI::App* sub, Flags& f, uint8_t command) {
  sub->add_option("--plan", f.plan,
                  "the plan file (JSON); its state, lock and logs/ live beside it (default: $GPUQ_PLAN, else "
                  "plan.json in the current folder)")
      ->type_name(kPlanType);
  // A command lists the flags of the settings for it, but the hidden (`settings` names them in a line).
  for (const SettingSpec& spec : settings_table())
    if ((spec.lists & command) || spec.every)
      add_setting_flag(sub, f, spec, (spec.lists & command) && !spec.hidden);
  sub->add_flag("--all", f.all, "also list jobs the default listing leaves out")
      ->group(command == SettingCommand::kStatus || command == SettingCommand::kSimulate ? "Options" : "");
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
