// The one read of the world (read.h): run's tick and every look.
#include "gpuq/live/read.h"

#include <filesystem>

namespace gpuq {

JobsSeen see_jobs(Launcher& launcher, const State& state, double now, const Plan* oom) {
  JobsSeen out;
  if (BatchQueue* queue = launcher.queue()) out.started = queue->survey(state, now);
  for (const auto& [id, s] : state.entries()) {
    if (s.status != Status::Running) continue;
    JobState at = s;  // as the survey leaves it: a queued job it started has its start
    for (const auto& [started, start] : out.started)
      if (started == id) at.start = start;
    Observed o = launcher.observe(id, at);
    if (o.kind == Observed::Kind::Running) continue;
    JobSeen j{id, o};
    const bool preempted = at.preempt && o.kind != Observed::Kind::Aborted;
    if (at.pid && (at.requeue || preempted)) j.group_alive = launcher.group_alive(*at.pid);
    if (oom && oom->find(id) && !at.requeue && !preempted && o.kind == Observed::Kind::Exited && o.exit != 0 && !at.kill_sent)
      j.oom = launcher.out_of_memory(id, at, o.exit, &j.oom_why);
    out.ended.push_back(std::move(j));
  }
  return out;
}

std::optional<NodeRead> read_node(const std::string& dir, GpuMask node) {
  if (dir.empty()) return std::nullopt;
  NodeRead r{dir, std::nullopt, "", false};
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    r.problem = std::filesystem::exists(dir, ec) ? "not a folder" : "no such folder";
    r.folder = true;
    return r;
  }
  try {
    r.view = read_node_dir(dir, node);
  } catch (const std::exception& e) {
    r.problem = e.what();
  }
  return r;
}

WorldRead read_world(const ReadFrom& from, const State* kept) {
  WorldRead w;
  if (from.gpus) w.gpus = from.gpus();
  if (from.node) w.node = from.node();
  if (from.state) w.state = from.state();
  w.now = from.clock();
  const State* state = w.state ? &*w.state : kept;
  if (from.launcher && state)
    if (Launcher* launcher = from.launcher(*state)) w.jobs = see_jobs(*launcher, *state, w.now, from.oom_of);
  if (from.paused) w.paused = from.paused();
  return w;
}

}  // namespace gpuq
