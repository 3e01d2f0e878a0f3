// `gpuq run` on this machine: the RunLoop over the POSIX ports.
#include <fmt/format.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "gpuq/live/journal.h"
#include "gpuq/live/launcher.h"
#include "gpuq/live/local_files.h"
#include "gpuq/live/node_dir.h"
#include "gpuq/live/plan_edit.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/run_info.h"
#include "gpuq/live/run_loop.h"
#include "gpuq/live/snapshots.h"
#include "gpuq/live/waker.h"
#include "gpuq/core/local_time.h"

namespace gpuq {

namespace {

// The plan (and the file a link names) and PLAN.paused: they wake the wait when they change.
std::vector<std::string> files_that_wake(const PlanPaths& paths) {
  std::vector<std::string> also{paths.plan, paths.paused};
  std::error_code ec;
  if (std::string real = std::filesystem::canonical(paths.plan, ec).string(); !ec && real != paths.plan)
    also.push_back(real);
  return also;
}

// The settings `now` gives otherwise than `before` ("max_retries 5, poll (removed)"), or "".
std::string changed_settings(const GivenSettings& before, const GivenSettings& now) {
  std::string out;
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    if (before.given[i] == now.given[i] && (!now.given[i] || same_setting(spec, before.values, now.values))) continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", spec.name,
                       now.given[i] ? setting_text(spec, now.values) : "(removed)");
  }
  return out;
}

// A node shared with other users' runs, through the node directory --node-dir chooses: the
// usage this plan's attempts charge, and the loop's decisions made with the node's.
void share_node(std::optional<NodeShare>& node, RunLoop& loop, const RunOptions& opt, const PlanPaths& paths,
                Clock& clock, const std::function<void(const std::string&)>& say) {
  std::string dir = choose_node_dir(opt.node_dir);
  if (dir.empty()) return;
  std::error_code ec;
  std::string plan_path = std::filesystem::absolute(paths.plan, ec).lexically_normal().string();
  node.emplace(dir, plan_path, mask_of(opt.node_gpus), opt.placement, opt.backfill_max_hours);
  try {  // the usage this plan's attempts charge, however the node file fares (its warnings: the log's own)
    std::vector<std::string> ignored;
    node->charge_at_least(attempts_of(read_events(events_path_for(paths.state), &ignored)));
  } catch (const std::exception& e) {
    say(fmt::format("{} the event log was not read for your usage on the node (your node file's is counted): {}",
                    clock_stamp(clock.now()), e.what()));
  }
  loop.share_node(&*node);
  if (dir == own_node_dir()) {
    node->decide_at_first_look();
    say(fmt::format("{} sharing the GPUs with your other runs on this machine through {} (--node-dir off runs "
                    "alone)",
                    clock_stamp(clock.now()), dir));
  } else {
    say(fmt::format("{} sharing the node with other users' runs through {}", clock_stamp(clock.now()), dir));
  }
}

// The loop run to its end with PLAN.run.json (how `status` knows this run is alive) written at
// the start, after each tick and at the end.
int run_with_info(RunLoop& loop, const PlanPaths& paths, RunInfo& run_info, Clock& clock,
                  const std::function<void(const std::string&)>& say) {
  RunInfo* info = &run_info;
  write_run_info(paths, *info);
  // PLAN.run.json is how `status` knows this run is alive: a write that fails is said once
  // (the file and the error), and again when it is written again; jobs go on either way.
  std::string run_file_problem;
  loop.after_tick([&](double now) {
    info->tick = now;
    std::string problem;
    write_run_info(paths, *info, &problem);
    if (problem != run_file_problem)
      say(fmt::format("{} {}", clock_stamp(now),
                      problem.empty() ? std::string("the run file is written again")
                                      : fmt::format("{}: the run file is not updated (status may take this run for "
                                                    "one that stopped ticking); jobs go on",
                                                    problem)));
    run_file_problem = problem;
  });
  int status = loop.run();
  info->ended = clock.now();
  write_run_info(paths, *info);
  return status;
}

// The --on-event hooks (checked before the run began).
std::vector<HookSpec> hook_specs(const RunOptions& opt) {
  std::vector<HookSpec> specs;
  for (const std::string& text : opt.on_event)
    if (auto h = parse_hook(text, nullptr)) specs.push_back(*h);
  return specs;
}

// An edit of the plan file, once the loop has loaded it: a batch queue takes the plan in use, a
// change of its "settings" is said (the run keeps those it started with), and what `status`
// reads is written (the version run uses now, a copy of its text, and when it was loaded).
void watch_plan_file(RunLoop& loop, PlanFile& plan_file, BatchPorts* queue, GivenSettings& settings_seen,
                     const PlanPaths& paths, RunInfo* info, const std::function<void(const std::string&)>& say) {
  loop.watch_plan(&plan_file, [&loop, queue, &settings_seen, &paths, info, say](const std::string& text, double now) {
    if (queue) queue->use_plan(loop.plan());
    if (std::string changed = changed_settings(settings_seen, loop.plan().settings); !changed.empty())
      say(fmt::format("{} the plan's \"settings\" changed ({}): this run keeps the settings it started with; "
                      "restart it to take them",
                      clock_stamp(now), changed));
    settings_seen = loop.plan().settings;
    try {
      replace_file_durably(paths.run_plan, text);
    } catch (const StoreError&) {
    }
    if (!info) return;
    info->loaded = stamp_plan(paths.plan).value_or(PlanStamp{});
    info->loaded_at = now;
    write_run_info(paths, *info);
  });
}

}  // namespace

// It wires this machine's or a batch queue's ports, the event log and hooks, the watched plan and
// PLAN.run.json around one RunLoop; each part is a few lines that read in order.
int run_queue(Plan plan, const PlanPaths& paths, const RunOptions& given, std::FILE* out, RunInfo* info,
              const std::string* plan_text, const BatchPortsMaker* batch) {
  RunOptions opt = given;
  // Orphans of our jobs come back to us to be reaped (fix 8).
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    fmt::print(stderr, "gpuq run: prctl(PR_SET_CHILD_SUBREAPER): {}\n", std::strerror(errno));
  SystemClock clock;
  PosixLauncher local_launcher(paths, opt.workdir);
  if (!opt.mem_cgroup) local_launcher.no_cgroups();
  // Read in the background (every second at most, once per tick at least): a tick never waits for it.
  // Not through a batch queue: the cluster's GPUs are the queue's business.
  std::optional<BackgroundProbe> local_probe;
  if (!batch)
    local_probe.emplace(make_probe(parse_probe_kind(opt.gpu_probe).value_or(ProbeKind::Auto), opt.nvidia_smi,
                                   opt.nvidia_smi_timeout),
                        1.0);
  FileStore store(paths);
  LocalFiles files(opt.workdir);
  PosixWaker local_waker(paths.state, files_that_wake(paths), [paths](const std::string& id) { return paths.exit(id); });
  // Through a batch queue: the same loop, its jobs submitted, their ends seen as logs/ID.exit appearing.
  std::unique_ptr<BatchPorts> queue = batch ? (*batch)(local_waker) : nullptr;
  Launcher& launcher = queue ? queue->launcher() : local_launcher;
  GpuProbe& probe = queue ? queue->probe() : *local_probe;
  Waker& waker = queue ? queue->waker() : local_waker;
  auto say = [out](const std::string& line) {
    fmt::print(out, "{}\n", line);
    std::fflush(out);
  };
  // The topology, read once: --pairs auto places by it, and a plan that counts cores has them
  // chosen on its GPUs' NUMA node (its CPU affinity; other placements take no other part of it).
  const bool auto_pairs = opt.placement.kind == Placement::Kind::Auto;
  if (!queue && (auto_pairs || opt.counts_host(plan)))
    opt.placement.topology = local_probe->topology().value_or(Topology{});
  if (!queue && auto_pairs)
    say(fmt::format("{} {}", clock_stamp(clock.now()), placement_line(opt.placement, mask_of(opt.node_gpus))));
  Journal journal(events_path_for(paths.state), opt.events_max_mb * 1024 * 1024);
  HookRunner hooks(hook_specs(opt),
                   {opt.hook_timeout, paths.logs + "/gpuq-hooks.log", paths.plan, paths.logs, 8,
                    hook_marks_path_for(paths.state)},
                   [&clock, say](const std::string& line) { say(fmt::format("{} {}", clock_stamp(clock.now()), line)); });
  std::optional<PlanFile> plan_file;
  if (plan_text) plan_file.emplace(paths.plan, opt.node_gpus, *plan_text);
  // Through a batch queue: an edit is taken as the start took the plan (no reservation of GPU
  // ids; a reservation is the queue's), and the launcher submits from the plan in use.
  if (plan_file && queue) plan_file->adapt = [&queue](Plan& p) { return queue->adapt(p); };
  // The settings are read once, at the start: an edit of the plan's "settings" is said, not taken.
  GivenSettings settings_seen = plan.settings;
  RunLoop loop(std::move(plan), opt, {clock, launcher, probe, store, files, waker}, say,
               [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
  if (queue) queue->use_plan(loop.plan());
  GitSnapshots snapshots(its_own_files(paths), std::filesystem::absolute(paths.state).lexically_normal().string());
  {
    std::error_code ec;
    std::string workdir = opt.workdir.empty() ? std::filesystem::current_path(ec).string() : opt.workdir;
    loop.use_snapshots(&snapshots, snapshots_root(paths.state), workdir, opt.snapshot);
    loop.snapshot_again(opt.snapshot_changed);
  }
  // A node shared with other users' runs (not through a batch queue: it places the jobs).
  std::optional<NodeShare> node;
  if (!queue) share_node(node, loop, opt, paths, clock, say);
  loop.log_events(&journal, hooks.empty() ? nullptr : &hooks);
  loop.record_predictions(predictions_path_for(paths.state));
  loop.pause_from([&paths] { return paused_since(paths); });
  if (plan_file) watch_plan_file(loop, *plan_file, queue.get(), settings_seen, paths, info, say);
  return info ? run_with_info(loop, paths, *info, clock, say) : loop.run();
}

}  // namespace gpuq
