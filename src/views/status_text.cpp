// `status` as text: the original's rows and counts, then the outlook.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <array>

#include "gpuq/core/hint.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/stale.h"
#include "gpuq/views/reasons.h"
#include "gpuq/views/text.h"

namespace gpuq {

std::string format_outlook(const Plan& plan, const State& state, const Outlook& o, bool all, size_t limit) {
  std::vector<const JobView*> open;
  bool ordered = !o.order.empty() && !all && (limit <= o.order_sorted || o.order_sorted == o.order.size());
  for (size_t i : ordered ? o.order : predicted_order(o)) open.push_back(&o.jobs[i]);
  std::string out;
  if (open.empty()) return "nothing left to run\n";
  out += fmt::format("{:<45} {:<8} {:<25} {}\n", "job", "status", "predicted", "why");
  size_t shown = 0;
  for (const JobView* v : open) {
    if (!all && shown == limit) {
      out += fmt::format("... {} more ({} shows every job)\n", open.size() - shown, hint("status --all"));
      break;
    }
    ++shown;
    std::string pred, done;
    if (v->queued)
      pred = "when Slurm starts it";
    else if (v->status == "running" && v->predicted_finish) {
      pred = "ends ~" + local_time(*v->predicted_finish, o.now);
      // How far it is heads the why column (in the predicted one it ran into the why: issue 51, item 11).
      if (v->progress)
        done = fmt::format("{:.0f} % done, its end from its {}", std::floor(*v->progress * 100),
                           v->finish_source == FinishSource::Progress ? "progress" : "estimate");
    }
    else if (v->predicted_start && v->predicted_finish)
      pred = local_time(*v->predicted_start, o.now) + " -> " + local_time(*v->predicted_finish, o.now);
    else if (v->after_resume)
      pred = "after gpuq resume";
    else if (v->status == "failed" || v->status == "blocked")
      pred = "-";
    else
      pred = "never";
    std::string why = why_text(plan, state, o, *v);
    if (!done.empty()) why = why.empty() ? done : done + "; " + why;
    out += fmt::format("{:<45} {:<8} {:<25} {}\n", plan.jobs[v->job].id, v->status, pred, why);
  }
  if (o.paused) {
    size_t waiting = 0;
    for (const JobView& v : o.jobs) waiting += v.after_resume;
    if (waiting) out += fmt::format("paused: {} job(s) start after {}\n", waiting, hint("resume"));
  }
  if (o.finish) {
    out += fmt::format("the plan is predicted to finish ~{} (in {})", local_time(*o.finish, o.now), duration_text(*o.finish - o.now));
    if (!o.never.empty()) out += fmt::format("; {} job(s) never start as things stand", o.never.size());
    out += "\n";
  } else if (!o.never.empty()) {
    out += fmt::format("{} job(s) never start as things stand\n", o.never.size());
  }
  return out;
}

std::string format_status(const Plan& plan, const State& state, double now, bool all) {
  std::string out;
  // Per status, its count, and the statuses in the order first met, like the original's dict.
  constexpr size_t kStatuses = static_cast<size_t>(Status::Held) + 1;
  std::array<size_t, kStatuses> count{};
  std::vector<Status> met;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const Job& j = plan.jobs[i];
    const JobState* s = state.of(plan, i);
    Status st = s ? s->status : Status::Pending;
    const char* name = status_name(st);
    if (count[static_cast<size_t>(st)]++ == 0) met.push_back(st);
    if (st == Status::Running || st == Status::Failed || st == Status::Blocked || st == Status::Held || all) {
      double el = 0;
      if (s && s->start) {
        double end = s->end && *s->end != 0 ? *s->end : now;
        el = (end - *s->start) / 3600;
      }
      std::string gpus = s && s->gpus ? py_list(*s->gpus) : "-";
      // The original's row; an estimate under an hour as people read it ("est=20 min", not "est=0.3h").
      out += fmt::format("{:<8} {:<45} gpus={:<8} {}h est={}\n", name, j.id, gpus, fixed(el, 5, 2),
                         j.est_given ? duration_text(j.est_hours * 3600) : "0.0h");
    }
  }
  out += "{";
  for (size_t i = 0; i < met.size(); ++i)
    out += fmt::format("{}'{}': {}", i ? ", " : "", status_name(met[i]), count[static_cast<size_t>(met[i])]);
  out += "}\n";
  return out;
}

std::string format_stale(const Plan& plan, const State& state, const std::string& plan_arg) {
  std::vector<size_t> stale = stale_jobs(plan, state);
  if (stale.empty()) return "";
  std::string out = fmt::format("stale: {} done job{} ran before {} deps changed or ran again:\n", stale.size(),
                                stale.size() == 1 ? "" : "s", stale.size() == 1 ? "its" : "their");
  size_t width = 0;
  for (size_t i : stale) width = std::max(width, plan.jobs[i].id.size());
  for (size_t i : stale)
    out += fmt::format("  {:<{}}  {}\n", plan.jobs[i].id, width, staleness_text(staleness_of(plan, i, state)));
  size_t after = stale_reruns(plan, state).size() - stale.size();
  out += fmt::format("`gpuq retry --plan {} --stale` reruns {}{}\n", plan_arg, stale.size() == 1 ? "it" : "them",
                     after ? fmt::format(" and the {} done job{} after {}", after, after == 1 ? "" : "s",
                                         stale.size() == 1 ? "it" : "them")
                           : "");
  return out;
}

std::string run_text(const RunSeen& r, const std::string& plan_arg, double now) {
  std::string who = r.pid ? fmt::format("pid {}{}", *r.pid, r.host.empty() ? "" : " on " + r.host) : "pid ?";
  std::string paused = r.paused_since ? fmt::format("paused since {}: no new job starts until {} (running jobs go on)\n",
                                                    local_time(*r.paused_since, now), hint("resume"))
                                      : "";
  if (!r.running) {
    std::string last;
    if (r.pid && (r.ended || r.last_tick))
      last = fmt::format(" (the last one, {}, {} at {})", who, r.ended ? "ended" : "stopped ticking",
                         local_time(r.ended ? *r.ended : *r.last_tick, now));
    return paused + fmt::format("no `gpuq run` is running this plan{}: nothing starts until {} is started\n", last,
                                hint("run"));
  }
  std::string out = paused + fmt::format("`gpuq run` ({}) is running this plan", who);
  if (r.file_pid)
    out += fmt::format("; its run file is an earlier run's (pid {}, ended): this one has not written it yet (a full "
                       "disk or a read-only folder? its pane says why)",
                       *r.file_pid);
  if (r.last_tick) {
    double ago = std::max(0.0, now - *r.last_tick);
    out += fmt::format("; its last tick {} ({:.0f} s ago)", clock_stamp(*r.last_tick), ago);
    // A run looks at least every --poll seconds: far longer means it is stopped, or cannot write.
    if (r.poll && ago > std::max(30.0, 5 * *r.poll))
      out += fmt::format(", more than {:.0f} of its polls: it may be stopped (Ctrl-Z, SIGSTOP) or unable to write "
                         "its files (a full disk? its pane says why)",
                         ago / *r.poll);
  }
  out += "\n";
  std::string loaded_at = r.plan_loaded_at ? local_time(*r.plan_loaded_at, now) : "?";
  if (r.plan_problems)
    out += fmt::format("the plan on disk has {} problem{}; still running the version loaded at {} ({} lists them; "
                       "fix the file and run reloads it)\n",
                       *r.plan_problems, *r.plan_problems == 1 ? "" : "s", loaded_at,
                       hint(r.slurm ? "validate --slurm" : "validate"));
  else if (r.plan_changed)
    out += fmt::format("`gpuq run` is using the plan as loaded at {}; {} changed since and is reloaded at run's "
                       "next tick\n",
                       loaded_at, plan_arg);
  return out;
}

std::string memory_over_text(const std::vector<MemoryUse::Over>& over) {
  std::string out;
  for (const MemoryUse::Over& x : over)
    out += fmt::format("{} uses {:.1f} GiB on GPU {}, declared {:g} (gpu_mem_gib): nothing more is placed on GPU {} "
                       "while it does\n",
                       x.id, x.used_gib, x.gpu, x.declared_gib, x.gpu);
  return out;
}

}  // namespace gpuq
