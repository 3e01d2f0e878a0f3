// `run`'s steps for the rest of the box (issue 45): cores and host memory.
#include <fmt/format.h>

#include "gpuq/core/cores.h"
#include "gpuq/core/rules.h"
#include "gpuq/live/host.h"
#include "run_tick.h"

namespace gpuq {

// A job that needs more cores or host memory than the node has for jobs never starts: said once,
// when the plan is new (run goes on with the rest).
void RunLoop::watch_host(Tick& t) {
  Engine& engine = q_->engine();
  if (!engine.counts_host() || host_seen_ == plan_.serial) return;
  host_seen_ = plan_.serial;
  for (const Job& j : plan_.jobs)
    if (engine.policy().host_too_big(j) && host_said_.insert(j.id).second)
      say(t.now, fmt::format("{} {}: it never starts here (edit the plan: run reloads it; more for jobs: "
                             "--node-cpus, --node-mem-gib)",
                             j.id, host_too_big_text(engine.policy(), j)));
}

// The cores job j is pinned to at its launch: its cpus of the node's cores, apart from those the
// running jobs were pinned to (their entries' "cores") where enough are free.
std::vector<int> RunLoop::cores_for(size_t job) const {
  std::vector<std::vector<int>> held;
  for (const auto& [id, s] : q_->state().entries())
    if (s.status == Status::Running && s.cores && id != plan_.jobs[job].id) held.push_back(parse_core_list(*s.cores));
  return choose_cores(opt_.node_cores, held, q_->engine().host_need(job).cpus);
}

}  // namespace gpuq
