#include "gpuq/phase.h"
#include "gpuq/async.h"
#include "gpuq/outlook.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <future>
#include <map>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "gpuq/proc.h"
#include "gpuq/schedule.h"

namespace gpuq {

using ojson = nlohmann::ordered_json;

namespace {

// Local time of day, with the weekday when it is not today.
std::string when(double t) {
  time_t secs = static_cast<time_t>(std::llround(t)), today = time(nullptr);
  tm local, now;
  localtime_r(&secs, &local);
  localtime_r(&today, &now);
  char buf[32];
  bool same_day = local.tm_yday == now.tm_yday && local.tm_year == now.tm_year;
  strftime(buf, sizeof buf, same_day ? "%H:%M" : "%a %H:%M", &local);
  return buf;
}

std::string duration(double seconds) {
  if (seconds < 3600) return fmt::format("{:.0f} min", std::max(0.0, seconds / 60));
  return fmt::format("{:.1f}h", seconds / 3600);
}

std::string names(const std::vector<std::string>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 5; ++i) s += (i ? ", " : "") + ids[i];
  if (ids.size() > 5) s += fmt::format(" and {} more", ids.size() - 5);
  return s;
}

bool will_retry(const JobState& s, const RunOptions& opt) {
  return s.status == Status::Failed && s.exit != -15 && s.attempts_or0() < opt.max_retries && s.end;
}

}  // namespace

SimStart live_start(const Plan& plan, const State& state, const RunOptions& opt, double now,
                    const std::function<bool(const std::string&)>& file_exists) {
  size_t n = plan.jobs.size();
  SimStart st;
  st.kind.assign(n, SimStart::Kind::Pending);
  st.elapsed.assign(n, 0);
  st.gpus.assign(n, {});
  st.files_present.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const JobState* s = state.of(plan, i);
    switch (s ? s->status : Status::Pending) {
      case Status::Pending: break;
      case Status::Running:
        st.kind[i] = SimStart::Kind::Running;
        st.elapsed[i] = s->start ? std::max(0.0, (now - *s->start) / 3600) : 0;
        st.gpus[i] = s->gpus.value_or(std::vector<int>{});
        break;
      case Status::Done: st.kind[i] = SimStart::Kind::Done; break;
      case Status::Failed: st.kind[i] = will_retry(*s, opt) ? SimStart::Kind::Pending : SimStart::Kind::Finished; break;
      case Status::Blocked: st.kind[i] = SimStart::Kind::Finished; break;
      case Status::Held: st.kind[i] = SimStart::Kind::Held; break;
    }
    // Files matter only to jobs that are yet to start (a done job's outputs may be long gone).
    if (st.kind[i] == SimStart::Kind::Pending)
      for (const Dep& d : plan.jobs[i].deps)
        if (d.kind == Dep::Kind::File && !file_exists(expand_path(d.target))) st.files_present[i] = 0;
  }
  return st;
}

Outlook make_outlook(const Plan& plan, const State& state, const RunOptions& opt, double now, GpuMask free,
                     const std::function<bool(const std::string&)>& file_exists_uncached,
                     std::optional<size_t> explain_first) {
  Outlook o;
  o.now = now;
  const size_t n = plan.jobs.size();
  // Each path is looked at once: live_start, the tick and the reasons all ask.
  std::unordered_map<std::string, bool> seen_files;
  const std::function<bool(const std::string&)> file_exists = [&](const std::string& p) {
    auto [it, fresh] = seen_files.emplace(p, false);
    if (fresh) it->second = file_exists_uncached(p);
    return it->second;
  };
  SimOptions so;
  so.node_gpus = opt.node_gpus;
  so.backfill_max_hours = opt.backfill_max_hours;
  // The simulation's model of the plan on a second core, while this one reads the state.
  auto model = on_another_core([&] { return SimModel(plan, so); });
  {
    // The file: deps live_start asks about, those of jobs yet to start, each looked at once
    // and half of them on another core: at 100,000 jobs (the bench's plan) they are 11,000
    // system calls of 1 to 4 microseconds each on these machines.
    std::vector<std::pair<const std::string*, bool*>> todo;
    for (size_t i = 0; i < n; ++i) {
      const Job& j = plan.jobs[i];
      if (!j.has_file_dep()) continue;
      const JobState* s = state.of(plan, i);
      Status st = s ? s->status : Status::Pending;
      if (st != Status::Pending && !(st == Status::Failed && will_retry(*s, opt))) continue;
      for (const Dep& d : j.deps)
        if (d.kind == Dep::Kind::File)
          if (auto [it, fresh] = seen_files.emplace(expand_path(d.target), false); fresh)
            todo.emplace_back(&it->first, &it->second);
    }
    auto look = [&](size_t from, size_t to) {  // each thread writes its own entries' values only
      for (size_t k = from; k < to; ++k) *todo[k].second = file_exists_uncached(*todo[k].first);
    };
    const size_t half = todo.size() >= 256 ? todo.size() / 2 : todo.size();
    auto other = on_another_core([&] { look(half, todo.size()); });
    look(0, half);
    other.get();
  }
  SimStart start = live_start(plan, state, opt, now, file_exists);
  phase("live start");

  // On a second core, while this one simulates: the views' fields from the state, and the
  // next tick's decisions explained (they do not depend on the prediction). The tick is
  // worked out in case a row that will be explained needs it; which rows that is, only
  // the prediction says. Both threads only read plan and state (live_start has bound the
  // state to the plan), and the worker reads the file memo without adding to it.
  bool any_running = false;
  TickDecision tick;
  auto worker = on_another_core([&] {
    o.jobs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const Job& j = plan.jobs[i];
      const JobState* s = state.of(plan, i);
      JobView v;
      v.job = i;
      Status st = s ? s->status : Status::Pending;
      v.status = status_name(st);
      if (s) {
        v.gpus = s->gpus.value_or(std::vector<int>{});
        v.attempts = s->attempts_or0();
        v.exit = s->exit;
        v.start = s->start;
        v.end = s->end;
        if (s->start) v.elapsed = (s->end && *s->end != 0 ? *s->end : now) - *s->start;
      }
      v.overdue = st == Status::Running && v.elapsed / 3600 > j.est_hours;
      o.jobs.push_back(std::move(v));
    }
    for (const auto& [id, s] : state.entries()) any_running |= s.status == Status::Running;
    const std::function<bool(const std::string&)> file_exists_read_only = [&](const std::string& p) {
      auto it = seen_files.find(p);
      return it != seen_files.end() ? it->second : file_exists_uncached(p);
    };
    tick = preview_tick(plan, state, opt, now, free, any_running, file_exists_read_only);
  });
  o.sim = simulate(plan, so, model.get(), &start);
  phase("simulate");
  worker.get();
  phase("views, explained tick (the rest of them)");

  std::vector<const SimRow*> row_of(n, nullptr);
  double last_end = 0;
  for (const SimRow& r : o.sim.rows) {
    row_of[r.job] = &r;
    last_end = std::max(last_end, r.end);
  }
  if (!o.sim.rows.empty()) o.finish = now + last_end * 3600;
  std::vector<std::string> stuck_why(n);
  for (const Stuck& s : o.sim.stuck) {
    o.never.push_back(s.job);
    stuck_why[s.job] = s.why;
  }
  for (size_t i = 0; i < n; ++i) {
    if (const SimRow* r = row_of[i]) {
      JobView& v = o.jobs[i];
      const JobState* s = state.of(plan, i);
      v.predicted_start = s && s->status == Status::Running && s->start ? *s->start : now + r->start * 3600;
      v.predicted_finish = now + r->end * 3600;
    }
  }
  phase("predictions");

  // Which jobs to explain: all, or the first rows `status` shows (the reasons cost more
  // than everything else at 100,000 jobs).
  std::vector<size_t> explain;
  if (explain_first) {
    o.order = predicted_order(o, *explain_first);
    o.order_sorted = std::min(o.order.size(), *explain_first);
    explain.assign(o.order.begin(), o.order.begin() + std::min(o.order.size(), *explain_first));
  } else {
    for (size_t i = 0; i < n; ++i) explain.push_back(i);
  }
  std::vector<const Held*> held(n, nullptr);
  std::vector<char> starts(n, 0);
  for (const Held& h : tick.pass.held) held[h.job] = &h;
  for (const Start& s : tick.pass.starts) starts[s.job] = 1;
  std::vector<bool> open(plan.reservations.size());
  for (size_t r = 0; r < open.size(); ++r)
    for (size_t m : plan.reservations[r].jobs) {
      Status st = state.status_of(plan, m);
      if (st != Status::Done && st != Status::Failed && st != Status::Blocked) open[r] = true;
    }

  for (size_t i : explain) {
    const Job& j = plan.jobs[i];
    const JobState* s = state.of(plan, i);
    Status st = s ? s->status : Status::Pending;
    JobView& v = o.jobs[i];
    std::vector<std::string> failed_deps;
    for (const Dep& d : j.deps) {
      if (d.kind != Dep::Kind::Done) continue;
      Status ds = state.status_of(plan, d.job);
      if (ds == Status::Failed || ds == Status::Blocked) failed_deps.push_back(plan.jobs[d.job].id);
    }
    switch (st) {
      case Status::Held: v.why = fmt::format("held by hand; `gpuq retry {}` releases it", j.id); break;
      case Status::Blocked: v.why = fmt::format("blocked: its dep {} failed; `gpuq retry` the dep to run it", names(failed_deps)); break;
      case Status::Failed:
        if (s->exit == -15)
          v.why = "killed; `gpuq retry " + j.id + "` runs it again";
        else if (will_retry(*s, opt))
          v.why = fmt::format("failed (exit {}); automatic retry {} of {} at {}", s->exit.value_or(-1),
                              s->attempts_or0() + 1, opt.max_retries, when(*s->end + opt.retry_after));
        else
          v.why = fmt::format("failed (exit {}), automatic retries used up; `gpuq retry {}` runs it again",
                              s->exit.value_or(-1), j.id);
        break;
      case Status::Running:
        if (v.overdue) v.why = fmt::format("past its estimate ({:.1f}h run, est {:.1f}h)", v.elapsed / 3600, j.est_hours);
        break;
      case Status::Done: break;
      case Status::Pending: {
        if (!failed_deps.empty()) {
          v.why = fmt::format("blocked: its dep {} failed", names(failed_deps));
          break;
        }
        std::vector<std::string> deps, afters, files;
        for (const Dep& d : j.deps) {
          if (d.kind == Dep::Kind::File) {
            std::string p = expand_path(d.target);
            if (!file_exists(p)) files.push_back(p);
          } else if (d.kind == Dep::Kind::Done) {
            if (state.status_of(plan, d.job) != Status::Done) deps.push_back(plan.jobs[d.job].id);
          } else if (!finished(state.of(plan, d.job), opt.max_retries)) {
            afters.push_back(plan.jobs[d.job].id);
          }
        }
        std::vector<std::string> parts;
        if (!deps.empty()) parts.push_back("waits for " + names(deps) + " to be done");
        if (!afters.empty()) parts.push_back("waits for " + names(afters) + " to finish");
        if (!files.empty()) parts.push_back("waits for the file " + names(files));
        if (!parts.empty()) {
          for (size_t k = 0; k < parts.size(); ++k) v.why += (k ? "; " : "") + parts[k];
        } else if (starts[i]) {
          v.why = "ready: starts at the next tick";
        } else if (const Held* h = held[i]) {
          if (h->why == Held::Why::Backfill) {
            v.why = fmt::format("held back by the backfill limit: est {}h is over --backfill-max-hours {} while {} "
                                "waits for GPUs",
                                j.est_hours, opt.backfill_max_hours, plan.jobs[h->head].id);
          } else {
            v.why = fmt::format("needs {} GPU{}, {} free", j.gpus, j.gpus == 1 ? "" : "s", h->free_for_job);
            if (h->closed) {
              std::vector<std::string> rs;
              const auto& mine = plan.reservations_of[i];
              for (size_t r = 0; r < open.size(); ++r)
                if (open[r] && (plan.reservations[r].gpus & h->closed) &&
                    std::find(mine.begin(), mine.end(), r) == mine.end())
                  rs.push_back(fmt::format("#{}", r + 1));
              v.why += fmt::format(" to it; GPUs {} are closed by reservation {}", py_list(ids_of(h->closed)), names(rs));
            }
          }
        }
        if (!stuck_why[i].empty() && v.why.empty()) v.why = stuck_why[i];
        break;
      }
    }
  }
  phase("reasons");
  return o;
}

std::vector<size_t> predicted_order(const Outlook& o, size_t first) {
  // By predicted start, ties in plan order. The keys are sorted next to the jobs: at
  // 100,000 jobs, looking them up in the views from the comparison cost 15 ms in cache misses.
  std::vector<std::pair<double, size_t>> keyed;
  for (const JobView& v : o.jobs)
    if (v.status != "done") keyed.emplace_back(v.predicted_start.value_or(1e300), v.job);
  // (start, job) pairs are unique: sorting them is the stable sort by start.
  if (first < keyed.size())
    std::partial_sort(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(first), keyed.end());
  else
    std::sort(keyed.begin(), keyed.end());
  std::vector<size_t> open(keyed.size());
  for (size_t k = 0; k < keyed.size(); ++k) open[k] = keyed[k].second;
  return open;
}

std::string format_outlook(const Plan& plan, const Outlook& o, bool all, size_t limit) {
  std::vector<const JobView*> open;
  bool ordered = !o.order.empty() && !all && (limit <= o.order_sorted || o.order_sorted == o.order.size());
  for (size_t i : ordered ? o.order : predicted_order(o)) open.push_back(&o.jobs[i]);
  std::string out;
  if (open.empty()) return "nothing left to run\n";
  out += fmt::format("{:<45} {:<8} {:<25} {}\n", "job", "status", "predicted", "why");
  size_t shown = 0;
  for (const JobView* v : open) {
    if (!all && shown == limit) {
      out += fmt::format("... {} more (gpuq status --all shows every job)\n", open.size() - shown);
      break;
    }
    ++shown;
    std::string pred;
    if (v->status == "running" && v->predicted_finish)
      pred = "ends ~" + when(*v->predicted_finish);
    else if (v->predicted_start && v->predicted_finish)
      pred = when(*v->predicted_start) + " -> " + when(*v->predicted_finish);
    else if (v->status == "failed" || v->status == "blocked")
      pred = "-";
    else
      pred = "never";
    out += fmt::format("{:<45} {:<8} {:<25} {}\n", plan.jobs[v->job].id, v->status, pred, v->why);
  }
  if (o.finish) {
    out += fmt::format("the plan is predicted to finish ~{} (in {})", when(*o.finish), duration(*o.finish - o.now));
    if (!o.never.empty()) out += fmt::format("; {} job(s) never start as things stand", o.never.size());
    out += "\n";
  } else if (!o.never.empty()) {
    out += fmt::format("{} job(s) never start as things stand\n", o.never.size());
  }
  return out;
}

namespace {

ojson opt_num(const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); }

ojson job_json(const Plan& plan, const JobView& v) {
  const Job& j = plan.jobs[v.job];
  ojson e = ojson::object();
  e["id"] = j.id;
  e["status"] = v.status;
  e["gpus"] = v.gpus;
  e["attempts"] = v.attempts;
  e["exit"] = v.exit ? ojson(*v.exit) : ojson(nullptr);
  e["start"] = opt_num(v.start);
  e["end"] = opt_num(v.end);
  e["elapsed"] = v.elapsed;
  e["est"] = j.est_hours;
  e["why"] = v.why;
  e["overdue"] = v.overdue;
  e["predicted_start"] = opt_num(v.predicted_start);
  e["predicted_finish"] = opt_num(v.predicted_finish);
  return e;
}

}  // namespace

std::string outlook_json(const Plan& plan, const std::string& plan_path, const Outlook& o) {
  ojson doc = ojson::object();
  doc["plan"] = plan_path;
  doc["now"] = o.now;
  doc["finish"] = opt_num(o.finish);
  ojson counts = ojson::object();
  for (const JobView& v : o.jobs) counts[v.status] = counts.value(v.status, 0) + 1;
  doc["counts"] = counts;
  ojson jobs = ojson::array();
  for (const JobView& v : o.jobs) jobs.push_back(job_json(plan, v));
  doc["jobs"] = std::move(jobs);
  return doc.dump(1) + "\n";
}

std::string simulation_json(const Plan& plan, const std::string& plan_path, const Simulation& sim,
                            const SimOptions& opt) {
  ojson doc = ojson::object();
  doc["plan"] = plan_path;
  double makespan = 0, busy = 0;
  for (const SimRow& r : sim.rows) {
    makespan = std::max(makespan, r.end);
    busy += static_cast<double>(r.gpus.size()) * (r.end - r.start);
  }
  doc["makespan_hours"] = makespan;
  doc["utilization"] = makespan > 0 ? busy / (static_cast<double>(opt.node_gpus.size()) * makespan) : 0.0;
  ojson stuck = ojson::array();
  for (const Stuck& s : sim.stuck) stuck.push_back({{"id", plan.jobs[s.job].id}, {"why", s.why}});
  doc["stuck"] = stuck;
  std::vector<const SimRow*> row_of(plan.jobs.size(), nullptr);
  for (const SimRow& r : sim.rows) row_of[r.job] = &r;
  ojson jobs = ojson::array();
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    JobView v;
    v.job = i;
    v.status = row_of[i] ? "predicted" : "never";
    if (const SimRow* r = row_of[i]) {
      v.gpus = r->gpus;
      v.predicted_start = r->start;
      v.predicted_finish = r->end;
    }
    for (const Stuck& s : sim.stuck)
      if (s.job == i) v.why = s.why;
    jobs.push_back(job_json(plan, v));
  }
  doc["jobs"] = std::move(jobs);
  return doc.dump(1) + "\n";
}

namespace {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* fill_of(const std::string& status) {
  if (status == "done") return "#4caf50";
  if (status == "running") return "#2196f3";
  if (status == "failed") return "#e53935";
  return "#b0bec5";  // predicted
}

}  // namespace

std::string gantt_svg(const Plan& plan, const std::vector<Bar>& bars, const std::vector<int>& node_gpus,
                      std::optional<double> now_h, const std::string& title) {
  // Rows: one per GPU, then as many CPU rows as 0-GPU jobs overlap (first fit).
  std::vector<std::pair<double, size_t>> cpu_order;
  for (size_t b = 0; b < bars.size(); ++b)
    if (bars[b].gpus.empty()) cpu_order.push_back({bars[b].start, b});
  std::sort(cpu_order.begin(), cpu_order.end());
  std::vector<double> lane_free;
  std::map<size_t, size_t> lane_of;
  for (auto& [s, b] : cpu_order) {
    size_t lane = 0;
    while (lane < lane_free.size() && lane_free[lane] > bars[b].start + 1e-9) ++lane;
    if (lane == lane_free.size()) lane_free.push_back(0);
    lane_free[lane] = bars[b].end;
    lane_of[b] = lane;
  }
  double t0 = 0, t1 = 0;
  for (const Bar& b : bars) {
    t0 = std::min(t0, b.start);
    t1 = std::max(t1, b.end);
  }
  if (now_h) t1 = std::max(t1, *now_h);
  if (t1 - t0 < 1e-9) t1 = t0 + 1;
  const double left = 90, right = 30, top = 50, row_h = 26, width = 1400;
  size_t rows = node_gpus.size() + lane_free.size();
  double height = top + rows * row_h + 60;
  double scale = (width - left - right) / (t1 - t0);
  auto x = [&](double h) { return left + (h - t0) * scale; };
  std::map<int, size_t> row_of_gpu;
  for (size_t i = 0; i < node_gpus.size(); ++i) row_of_gpu[node_gpus[i]] = i;

  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.0f}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
      width, height, width, height, left, xml_escape(title));
  // Legend.
  double lx = width - right - 420;
  for (const char* s : {"done", "running", "failed", "predicted"}) {
    out += fmt::format("<rect x=\"{:.0f}\" y=\"12\" width=\"14\" height=\"12\" fill=\"{}\"/><text x=\"{:.0f}\" y=\"22\">{}</text>\n",
                       lx, fill_of(s), lx + 18, s);
    lx += 100;
  }
  // Row labels and stripes.
  for (size_t r = 0; r < rows; ++r) {
    double y = top + r * row_h;
    std::string label = r < node_gpus.size() ? fmt::format("GPU {}", node_gpus[r])
                                             : fmt::format("no GPU {}", r - node_gpus.size() + 1);
    out += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"{}\"/>\n", left, y,
                       width - left - right, row_h, r % 2 ? "#fafafa" : "#f0f0f0");
    out += fmt::format("<text x=\"8\" y=\"{:.0f}\">{}</text>\n", y + row_h * 0.65, label);
  }
  // Time axis: about 10 ticks at a round step.
  // The axis step: 1, 2 or 5 times a power of ten, for at most about 12 ticks.
  double span = t1 - t0, magnitude = std::pow(10.0, std::floor(std::log10(span / 12))), step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (span / (m * magnitude) <= 12) {
      step = m * magnitude;
      break;
    }
  double axis_y = top + rows * row_h;
  out += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.0f}\" x2=\"{:.0f}\" y2=\"{:.0f}\" stroke=\"#333\"/>\n", left, axis_y,
                     width - right, axis_y);
  for (double h = std::ceil(t0 / step) * step; h <= t1 + 1e-9; h += step) {
    out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.0f}\" x2=\"{0:.1f}\" y2=\"{2:.0f}\" stroke=\"#ccc\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3:.0f}\" text-anchor=\"middle\">{4}h</text>\n",
                       x(h), top, axis_y + 4, axis_y + 18, fmt::format("{:g}", h));
  }
  out += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">hours</text>\n", (left + width - right) / 2,
                     axis_y + 36);
  // Bars.
  for (size_t b = 0; b < bars.size(); ++b) {
    const Bar& bar = bars[b];
    std::vector<size_t> rws;
    if (bar.gpus.empty())
      rws.push_back(node_gpus.size() + lane_of[b]);
    else
      for (int g : bar.gpus)
        if (row_of_gpu.count(g)) rws.push_back(row_of_gpu[g]);
    const std::string& id = plan.jobs[bar.job].id;
    double w = std::max(1.0, (bar.end - bar.start) * scale);
    for (size_t k = 0; k < rws.size(); ++k) {
      double y = top + rws[k] * row_h + 3;
      out += fmt::format(
          "<g><title>{} ({}): {:.2f}h -> {:.2f}h, GPUs {}</title>"
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.0f}\" rx=\"2\" fill=\"{}\" stroke=\"white\" "
          "stroke-width=\"0.5\"/>",
          xml_escape(id), bar.status, bar.start, bar.end, py_list(bar.gpus), x(bar.start), y, w, row_h - 6,
          fill_of(bar.status));
      // A label where it fits (about 6.5 px a character).
      size_t fit = static_cast<size_t>((w - 4) / 6.5);
      if (fit >= 3) {
        std::string label = id.size() <= fit ? id : id.substr(0, fit - 1) + "~";
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\">{}</text>", x(bar.start) + 3, y + row_h * 0.5,
                           bar.status == "predicted" ? "#263238" : "white", xml_escape(label));
      }
      out += "</g>\n";
    }
  }
  if (now_h)
    out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.0f}\" x2=\"{0:.1f}\" y2=\"{2:.0f}\" stroke=\"#d81b60\" "
                       "stroke-width=\"2\"/><text x=\"{0:.1f}\" y=\"{3:.0f}\" fill=\"#d81b60\" "
                       "text-anchor=\"middle\">now</text>\n",
                       x(*now_h), top - 4, axis_y, top - 8);
  out += "</svg>\n";
  return out;
}

}  // namespace gpuq
