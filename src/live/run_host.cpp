// `run`'s steps for the rest of the box (issue 45): cores and host memory.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "gpuq/core/cores.h"
#include "gpuq/core/host_mem.h"
#include "gpuq/core/rules.h"
#include "gpuq/live/host.h"
#include "run_tick.h"

namespace gpuq {

// A job that needs more cores or host memory than the node has for jobs never starts: said once,
// when the plan is new (run goes on with the rest).
void RunLoop::watch_host(Tick& t) {
  Engine& engine = q_->engine();
  if (!engine.counts_host() || host_.seen == plan_.serial) return;
  host_.seen = plan_.serial;
  if (!opt_.host_note.empty() && told_.fresh("host note", opt_.host_note)) say(t, opt_.host_note);
  for (const Job& j : plan_.jobs)
    if (engine.policy().host_too_big(j) && told_.fresh("host too big:" + j.id))
      say(t, fmt::format("{} {}: it never starts here (edit the plan: run reloads it; more for jobs: "
                             "--node-cpus, --node-mem-gib)",
                             j.id, host_too_big_text(engine.policy(), j)));
}

// The cores job j is pinned to at its launch: its cpus of the node's cores, apart from those the
// running jobs were pinned to (their entries' "cores") where enough are free, and on the NUMA node
// of its `gpus` where the topology gives their CPU affinity (the topology run read at its start).
std::vector<int> RunLoop::cores_for(size_t job, const std::vector<int>& gpus) const {
  std::vector<std::vector<int>> held;
  for (const auto& [id, s] : q_->state().entries())
    if (s.status == Status::Running && s.cores && id != plan_.jobs[job].id) held.push_back(parse_core_list(*s.cores));
  if (node_)  // other runs' jobs on this node (their holds): their cores are theirs
    for (const std::string& cores : node_->others_host().cores) held.push_back(parse_core_list(cores));
  return choose_cores(opt_.node_cores, held, q_->engine().host_need(job).cpus,
                      opt_.placement.topology.cores_near(gpus));
}

// For the start line of job j, pinned away from its GPUs' NUMA node (too few of its cores were
// free, or gpuq's): "; cores 40-47 are off its GPUs' NUMA node (cores 0-31: too few free)". Else "".
std::string RunLoop::cores_note(size_t job, const std::vector<int>& gpus) const {
  const JobState* s = q_->state().of(plan_, job);
  std::vector<int> near = opt_.placement.topology.cores_near(gpus);
  if (!q_->engine().counts_host() || !s || !s->cores || near.empty()) return "";
  for (int c : parse_core_list(*s->cores))
    if (!std::binary_search(near.begin(), near.end(), c))
      return fmt::format("; cores {} are off its GPUs' NUMA node (cores {}: too few free)", *s->cores,
                         core_list_text(near));
  return "";
}

// How often run samples the resident memory of jobs with mem_gib, at the longest (seconds): a job
// that grows is stopped before the kernel's OOM killer picks a victim (--poll may be longer).
constexpr double kMemorySample = 5;

// Each running job with a mem_gib: the resident memory of its process tree (one pass over /proc for
// all of them, live/proc.h's resident_trees), its attempt's peak kept in its entry; one over its
// mem_gib by more than --mem-margin-percent is stopped as at a time limit (outcome "over memory").
// Nothing at all is read where no running job gives mem_gib.
void RunLoop::watch_memory(Tick& t) {
  std::vector<long long> groups;
  std::vector<std::pair<std::string, long long>> watched;
  for (auto& [id, s] : q_->state().entries()) {
    if (s.status != Status::Running || !s.pid || s.kill_sent || s.preempt || s.requeue) continue;
    const Job* job = job_of(id);
    if (!job || !(job->mem_gib > 0)) continue;
    groups.push_back(*s.pid);
    watched.emplace_back(id, *s.pid);
  }
  if (groups.empty()) return;
  t.wake_in = std::min(t.wake_in, kMemorySample);
  std::map<long long, ResidentTree> trees = os_.launcher.resident(groups);
  std::vector<std::tuple<std::string, double, double>> over;  // id, resident GiB, the attempt's mem_gib
  for (const auto& [id, group] : watched) {
    auto it = trees.find(group);
    if (it == trees.end() || it->second.pids.empty()) continue;  // gone since: refresh sees its end
    JobState& s = *q_->state().find(id);
    if (os_.launcher.identify(s) != Identity::Same) continue;  // a recycled pid is no job's
    double gib = static_cast<double>(it->second.bytes) / (1024.0 * 1024 * 1024);
    long long mib = std::llround(static_cast<double>(it->second.bytes) / (1024.0 * 1024));
    if (mib > s.mem_peak_mib.value_or(-1)) s.mem_peak_mib = mib;
    // The attempt's own mem_gib: after on_oom retries, the plan's times mem_factor.
    double mem = job_of(id)->mem_gib;
    if (std::optional<size_t> j = index_of(id))
      if (const Running* r = std::get_if<Running>(&q_->engine().life(*j)); r && r->oom_retries > 0)
        mem = oom_values(*job_of(id), r->oom_retries).mem_gib;
    if (over_memory(mem, gib, opt_.mem_margin_percent)) over.emplace_back(id, gib, mem);
  }
  for (const auto& [id, gib, mem] : over) stop_over_memory(t, *job_of(id), id, gib, mem);
}

// A job with mem_gib or on_oom: GPUQ_MEM_GIB says the host memory its attempt may use, and after
// on_oom retries (host_mem.h) the attempt's variables are the changed ones; the entry keeps what
// they are (oom_values: the start event and history show them).
void RunLoop::oom_launch(size_t i, const Life& life, LaunchSpec& spec) {
  const Job& j = plan_.jobs[i];
  OomValues v = oom_values(j, oom_retries_of(life));
  for (const auto& [name, value] : v.env) {
    auto it = std::find_if(spec.env.begin(), spec.env.end(), [&](const auto& kv) { return kv.first == name; });
    if (it != spec.env.end())
      it->second = value;
    else
      spec.env.emplace_back(name, value);
  }
  if (v.mem_gib > 0) {
    spec.env.emplace_back("GPUQ_MEM_GIB", fmt::format("{:g}", v.mem_gib));
    spec.mem_gib = v.mem_gib;
    // The kernel's limit, where the node gives the job a cgroup: where the sampling stops it.
    spec.mem_limit_bytes = static_cast<long long>(std::ceil(v.mem_gib * (1 + opt_.mem_margin_percent / 100) * 1073741824.0));
  }
  if (!v.text.empty()) q_->entry(i).oom_values = v.text;
}

}  // namespace gpuq
