// `gpuq run` on this machine: the RunLoop over the POSIX ports.
#include <fmt/format.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "gpuq/live/launcher.h"
#include "gpuq/live/local_files.h"
#include "gpuq/live/plan_edit.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/run_info.h"
#include "gpuq/live/run_loop.h"
#include "gpuq/live/waker.h"
#include "gpuq/core/local_time.h"

namespace gpuq {

int run_queue(Plan plan, const PlanPaths& paths, const RunOptions& given, std::FILE* out, RunInfo* info,
              const std::string* plan_text) {
  RunOptions opt = given;
  // Orphans of our jobs come back to us to be reaped (fix 8).
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    fmt::print(stderr, "gpuq run: prctl(PR_SET_CHILD_SUBREAPER): {}\n", std::strerror(errno));
  SystemClock clock;
  PosixLauncher launcher(paths, opt.workdir);
  // Read in the background (every second at most, once per tick at least): a tick never waits for it.
  BackgroundProbe probe(make_probe(parse_probe_kind(opt.gpu_probe).value_or(ProbeKind::Auto), opt.nvidia_smi,
                                   opt.nvidia_smi_timeout),
                        1.0);
  FileStore store(paths);
  LocalFiles files(opt.workdir);
  // The plan (and the file a link names) and PLAN.paused wake the wait when they change.
  std::vector<std::string> also{paths.plan, paths.paused};
  std::error_code ec;
  if (std::string real = std::filesystem::canonical(paths.plan, ec).string(); !ec && real != paths.plan)
    also.push_back(real);
  PosixWaker waker(paths.state, also);
  auto say = [out](const std::string& line) {
    fmt::print(out, "{}\n", line);
    std::fflush(out);
  };
  if (opt.placement.kind == Placement::Kind::Auto) {
    opt.placement.topology = probe.topology().value_or(Topology{});
    say(fmt::format("{} {}", clock_stamp(clock.now()), placement_line(opt.placement, mask_of(opt.node_gpus))));
  }
  Journal journal(events_path_for(paths.state), opt.events_max_mb * 1024 * 1024);
  std::vector<HookSpec> specs;
  for (const std::string& text : opt.on_event)
    if (auto h = parse_hook(text, nullptr)) specs.push_back(*h);
  HookRunner hooks(std::move(specs), {opt.hook_timeout, paths.logs + "/gpuq-hooks.log", paths.plan, paths.logs},
                   [&clock, say](const std::string& line) { say(fmt::format("{} {}", clock_stamp(clock.now()), line)); });
  std::optional<PlanFile> plan_file;
  if (plan_text) plan_file.emplace(paths.plan, opt.node_gpus, *plan_text);
  RunLoop loop(
      std::move(plan), opt, {clock, launcher, probe, store, files, waker},
      [out](const std::string& line) {
        fmt::print(out, "{}\n", line);
        std::fflush(out);
      },
      [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
  loop.log_events(&journal, hooks.empty() ? nullptr : &hooks);
  loop.pause_from([&paths] { return paused_since(paths); });
  if (plan_file)
    loop.watch_plan(&*plan_file, [&paths, info](const std::string& text, double now) {
      // What `status` reads: the version run uses now, and a copy of its text.
      try {
        replace_file_durably(paths.run_plan, text);
      } catch (const StoreError&) {
      }
      if (!info) return;
      info->loaded = stamp_plan(paths.plan).value_or(PlanStamp{});
      info->loaded_at = now;
      write_run_info(paths, *info);
    });
  if (!info) return loop.run();
  write_run_info(paths, *info);
  loop.after_tick([&](double now) {
    info->tick = now;
    write_run_info(paths, *info);
  });
  int status = loop.run();
  info->ended = clock.now();
  write_run_info(paths, *info);
  return status;
}

}  // namespace gpuq
