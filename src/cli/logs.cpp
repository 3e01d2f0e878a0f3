// `gpuq logs`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <cstdlib>

#include "gpuq/core/plan.h"
#include "gpuq/core/rules.h"
#include "gpuq/live/commands.h"

#include "cli.h"
#include "gpuq/core/job_words.h"

namespace gpuq::cli {

namespace fs = std::filesystem;

namespace {

/// "done (exit 0)", "failed (exit 3)", "failed: killed by gpuq kill", ...: the status, and how it came to be.
std::string how_it_ended(const JobState& s) {
  std::string code = s.exit ? fmt::format("exit {}", *s.exit) : "no exit code";
  switch (outcome_of(s).value_or(Outcome::Failed)) {
    case Outcome::Done:
      return fmt::format("{} ({})", status_name(s.status), code);
    case Outcome::Killed:
      return fmt::format("{}: killed by gpuq kill ({})", status_name(s.status), code);
    case Outcome::Timeout:
      return fmt::format("{}: stopped at its time limit ({})", status_name(s.status), code);
    case Outcome::Hung:
      return fmt::format("{}: stopped by the hang watchdog ({})", status_name(s.status), code);
    case Outcome::Idle:
      return fmt::format("{}: stopped by the idle watch, its GPUs unused ({})", status_name(s.status), code);
    case Outcome::Unstartable:
      return fmt::format("{}: could not start: {}", status_name(s.status), s.reason.value_or("no reason recorded"));
    case Outcome::OverMemory:
      return fmt::format("{}: stopped over its mem_gib ({})", status_name(s.status), code);
    case Outcome::OomGpu:
      return fmt::format("{}: out of memory on the GPU, as its log says ({})", status_name(s.status), code);
    case Outcome::OomHost:
      return fmt::format("{}: killed by the kernel's OOM killer ({})", status_name(s.status), code);
    case Outcome::Lost:
      return fmt::format("{}: its process vanished without an exit code, or it could not start", status_name(s.status));
    case Outcome::Failed:
      break;
  }
  if (s.status != Status::Failed) return status_name(s.status);  // held, blocked
  return fmt::format("failed ({})", code);
}

}  // namespace

int cmd_logs(Flags& f) {
  auto loaded = load_command(f);
  if (!loaded && !fs::exists(f.plan)) return kExitBadInput;
  if (!loaded) fmt::print(stderr, "gpuq logs: the plan does not load; going on from the logs folder alone\n");
  std::string id = f.jobs.empty() ? "" : f.jobs[0];
  PlanPaths paths = plan_paths(f);
  if (loaded && !loaded->plan.find(id) && !fs::exists(paths.log(id))) {
    // A sweep's id (one log each: name a point), or a point with a number spelled otherwise.
    JobWords words = resolve_job_words(loaded->plan, {id});
    if (words.ids.size() > 1) {
      fmt::print(stderr, "gpuq logs: {}; each has its own log: give one\n", words.notes[0]);
      return kExitBadInput;
    }
    for (const std::string& note : words.notes) fmt::print(stderr, "gpuq logs: {}\n", note);
    id = words.ids[0];
  }
  // A job no longer in the plan (removed while it ran; or no plan) still has its log.
  if (f.jobs.size() != 1 || (!(loaded && loaded->plan.find(id)) && !fs::exists(paths.log(id)))) {
    fmt::print(stderr, "gpuq logs: no job {} in {}{}\n", id, f.plan, loaded ? job_suggestion(loaded->plan, id) : "");
    return kExitBadInput;
  }
  if (loaded && !loaded->plan.find(id)) fmt::print(stderr, "gpuq logs: note: {} is not in {}; showing the log it left\n", id, f.plan);
  if (f.follow) {
    // The longest wait without an inotify event (tests set it long, so that a missed event shows).
    double safety_s = 5;
    if (const char* env = std::getenv("GPUQ_FOLLOW_SAFETY_NET_S"); env && *env) {
      char* end = nullptr;
      double v = std::strtod(env, &end);
      if (*end == '\0' && v > 0 && v < 86400) safety_s = v;
    }
    JobState last;
    const Job* job = loaded ? loaded->plan.find(id) : nullptr;
    follow_log(paths, id, f.lines, stdout, stderr, static_cast<int>(safety_s * 1000), &last, job);
    fmt::print(stderr, "gpuq logs: {} is {}\n", id, how_it_ended(last));
    return 0;
  }
  if (!print_tail(paths.log(id), f.lines, stdout)) {
    fmt::print(stderr, "gpuq logs: {} has no log yet ({} does not exist): it has not started\n", id, paths.log(id));
    return kExitFailure;
  }
  return 0;
}

void add_logs_command(CLI::App& app, Flags& f, Action& action) {
  auto* logs = app.add_subcommand("logs", "print the end of a job's log (logs/ID.log), or follow it until the job ends");
  add_flags(logs, f, 0);
  logs->add_option("job", f.jobs, "the job id")->required()->expected(1);
  logs->add_option("-n,--lines", f.lines, "how many lines from the end (0: the whole log)")->capture_default_str();
  logs->add_flag("-f,--follow", f.follow, "keep printing what the job writes until it is no longer running");
  logs->callback([&] { action = [&] { return cmd_logs(f); }; });
}

}  // namespace gpuq::cli
