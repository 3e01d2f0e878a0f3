// `status --json` and `simulate --json`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "gpuq/core/stale.h"
#include "gpuq/views/json.h"

#include "gpuq/core/snapshot.h"
#include "gpuq/views/reasons.h"

namespace gpuq {

using ojson = nlohmann::ordered_json;

namespace {

ojson opt_num(const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); }

// `stale` (status only): why a done job is stale, or null (stale.h).
ojson job_json(const Plan& plan, const JobView& v, const std::string& why, const ojson* stale = nullptr) {
  const Job& j = plan.jobs[v.job];
  ojson e = ojson::object();
  e["id"] = j.id;
  e["status"] = v.status;
  e["gpus"] = v.gpus;
  e["attempts"] = v.attempts;
  e["exit"] = v.exit ? ojson(*v.exit) : ojson(nullptr);
  e["outcome"] = v.outcome ? ojson(*v.outcome) : ojson(nullptr);
  e["start"] = opt_num(v.start);
  e["end"] = opt_num(v.end);
  e["elapsed"] = v.elapsed;
  e["est"] = j.est_hours;
  e["why"] = why;
  e["overdue"] = v.overdue;
  e["hung"] = v.hung;
  e["queued_in_slurm"] = v.queued;
  e["after_resume"] = v.after_resume;
  e["predicted_start"] = opt_num(v.predicted_start);
  e["predicted_finish"] = opt_num(v.predicted_finish);
  if (stale) {  // status: a running job's progress and where its end comes from (simulate's JSON stays as it was)
    e["progress"] = opt_num(v.progress);
    e["finish_source"] = v.finish_source ? ojson(*v.finish_source == FinishSource::Progress ? "progress" : "estimate")
                                         : ojson(nullptr);
    e["stale"] = *stale;
    e["idle_minutes"] = v.idle_for ? ojson(std::floor(*v.idle_for / 60)) : ojson(nullptr);  // the idle watch
  }
  return e;
}

}  // namespace

std::string outlook_json(const Plan& plan, const State& state, const std::string& plan_path, const Outlook& o,
                         const RunSeen& run, const nlohmann::ordered_json& settings) {
  ojson doc = ojson::object();
  doc["plan"] = plan_path;
  doc["now"] = o.now;
  doc["finish"] = opt_num(o.finish);
  ojson counts = ojson::object();
  for (const JobView& v : o.jobs) counts[v.status] = counts.value(v.status, 0) + 1;
  doc["counts"] = counts;
  doc["plan_loaded_at"] = run.running ? opt_num(run.plan_loaded_at) : ojson(nullptr);
  doc["paused"] = run.paused_since.has_value();
  doc["paused_since"] = opt_num(run.paused_since);
  if (run.running) {
    ojson r = ojson::object();
    r["pid"] = run.pid ? ojson(*run.pid) : ojson(nullptr);
    r["host"] = run.host.empty() ? ojson(nullptr) : ojson(run.host);
    r["started"] = opt_num(run.started);
    r["last_tick"] = opt_num(run.last_tick);
    r["plan_loaded_at"] = opt_num(run.plan_loaded_at);
    r["plan_changed"] = run.plan_changed;
    r["plan_problems"] = run.plan_problems ? ojson(*run.plan_problems) : ojson(nullptr);
    doc["run"] = std::move(r);
  } else {
    doc["run"] = nullptr;
  }
  if (!settings.is_null()) doc["settings"] = settings;
  ojson jobs = ojson::array();
  for (const JobView& v : o.jobs) {
    Staleness st = staleness_of(plan, v.job, state);
    ojson stale = st.empty() ? ojson(nullptr) : ojson(staleness_text(st));
    ojson j = job_json(plan, v, why_text(plan, state, o, v), &stale);
    if (const JobState* e = state.of(plan, v.job))
      if (std::optional<SnapshotRef> snap = snapshot_of(*e))  // the code it runs (the snapshot setting)
        j["snapshot"] = {{"commit", snap->commit},
                         {"taken_at", snap->at},
                         {"dirty", snap->dirty},
                         {"repo", snap->repo},
                         {"tree_changed", o.stale_snapshots.count(snap->commit) > 0}};
    jobs.push_back(std::move(j));
  }
  doc["jobs"] = std::move(jobs);
  return doc.dump(1) + "\n";
}

std::string simulation_json(const Plan& plan, const std::string& plan_path, const Simulation& sim,
                            const SimOptions& opt) {
  ojson doc = ojson::object();
  doc["plan"] = plan_path;
  double makespan = 0, busy = busy_gpu_hours(plan, sim, opt);
  for (const SimRow& r : sim.rows) makespan = std::max(makespan, r.end);
  doc["makespan_hours"] = makespan;
  doc["utilization"] = makespan > 0 ? busy / (static_cast<double>(opt.node_gpus.size() * static_cast<size_t>(opt.nodes)) * makespan) : 0.0;
  if (opt.nodes > 1) {  // simulate --nodes
    doc["nodes"] = opt.nodes;
    doc["gpus_per_node"] = opt.node_gpus.size();
  }
  ojson stuck = ojson::array();
  for (const Stuck& s : sim.stuck) stuck.push_back({{"id", plan.jobs[s.job].id}, {"why", stuck_text(plan, opt, s)}});
  doc["stuck"] = stuck;
  // Every attempt, in the order they start (a job retried after a timeout has several).
  ojson attempts = ojson::array();
  for (const SimRow& r : sim.rows) {
    ojson a = {{"id", plan.jobs[r.job].id}, {"start", r.start}, {"end", r.end}, {"gpus", r.gpus}};
    if (opt.nodes > 1) a["node"] = r.node;
    attempts.push_back(std::move(a));
  }
  doc["attempts"] = std::move(attempts);
  std::vector<const SimRow*> row_of(plan.jobs.size(), nullptr);  // the first attempt's row
  std::vector<double> last_end(plan.jobs.size(), 0);
  for (const SimRow& r : sim.rows) {
    if (!row_of[r.job]) row_of[r.job] = &r;
    last_end[r.job] = std::max(last_end[r.job], r.end);
  }
  ojson jobs = ojson::array();
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    JobView v;
    v.job = i;
    v.status = row_of[i] ? "predicted" : "never";
    if (const SimRow* r = row_of[i]) {
      v.gpus = r->gpus;
      v.predicted_start = r->start;
      v.predicted_finish = last_end[i];
    }
    std::string why;
    for (const Stuck& s : sim.stuck)
      if (s.job == i) why = stuck_text(plan, opt, s);
    for (const Stuck& s : sim.blocked)
      if (s.job == i) why = stuck_text(plan, opt, s);
    jobs.push_back(job_json(plan, v, why));
    if (opt.nodes > 1) jobs.back()["node"] = row_of[i] ? ojson(row_of[i]->node) : ojson(nullptr);
  }
  doc["jobs"] = std::move(jobs);
  return doc.dump(1) + "\n";
}

}  // namespace gpuq
