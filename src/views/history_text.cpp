// `gpuq history` as text and JSON: the attempts the event log holds, how the done runs
// compare with their estimates (--estimates), how run's predictions held up (--accuracy).
#include "gpuq/views/history_text.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <cmath>
#include <ctime>

#include "gpuq/core/local_time.h"
#include "gpuq/core/progress.h"
#include "gpuq/core/snapshot.h"

namespace gpuq {

namespace {

// "12 min", "2.0 h", "40 s": an error's size.
std::string size_words(double seconds) { return shift_text(std::fabs(seconds)).substr(1); }

// A run time as people read it: 42.1s, 12m05s, 3.52h.
std::string took(std::optional<double> s) {
  if (!s) return "-";
  if (*s < 60) return fmt::format("{:.1f}s", *s);
  if (*s < 3600) return fmt::format("{}m{:02}s", static_cast<long long>(*s) / 60, static_cast<long long>(*s) % 60);
  return fmt::format("{:.2f}h", *s / 3600);
}

// A moment with its seconds (attempts can be seconds apart), and the date when not this week.
std::string moment(std::optional<double> t, double now) {
  if (!t) return "-";
  std::time_t tt = static_cast<std::time_t>(*t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, std::fabs(now - *t) < 6 * 86400 ? "%a %H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string list(const std::optional<std::vector<int>>& gpus) {
  if (!gpus) return "-";
  std::string s = "[";
  for (size_t i = 0; i < gpus->size(); ++i) s += (i ? "," : "") + std::to_string((*gpus)[i]);
  return s + "]";
}

double kwh(long long joules) { return static_cast<double>(joules) / 3.6e6; }

// 0.42, 12.3, 0.0031: three significant digits, no exponent.
std::string kwh_text(double k) {
  if (k >= 100) return fmt::format("{:.0f}", k);
  if (k >= 10) return fmt::format("{:.1f}", k);
  if (k >= 1) return fmt::format("{:.2f}", k);
  if (k >= 0.001) return fmt::format("{:.3f}", k);
  return k > 0 ? fmt::format("{:.6f}", k) : "0";
}

}  // namespace

std::string energy_text(const std::vector<Attempt>& attempts, double factor, const std::string& unit) {
  std::map<std::string, std::pair<long long, size_t>> per_job;  // joules, attempts read
  std::vector<std::string> order;
  size_t unread = 0;
  long long total = 0;
  for (const Attempt& a : attempts) {
    if (!a.end || (a.gpus && a.gpus->empty())) continue;  // running: its energy comes with its end; no GPU: none
    if (!a.energy_j) {
      ++unread;
      continue;
    }
    auto [it, fresh] = per_job.try_emplace(a.id, 0, 0);
    if (fresh) order.push_back(a.id);
    it->second.first += *a.energy_j;
    ++it->second.second;
    total += *a.energy_j;
  }
  if (per_job.empty())
    return unread ? "GPU energy: no attempt has a reading (gpuq reads NVML's energy counter; nvidia-smi and GPUs "
                    "before Volta give none)\n"
                  : "";
  std::string cost = factor > 0 ? fmt::format(" x {:g} = {{}} {}", factor, unit.empty() ? "(energy_factor)" : unit) : "";
  auto line = [&](const std::string& who, long long j, size_t n) {
    std::string s = fmt::format("  {:<24} {:>4} attempt{} {:>10} kWh", who, n, n == 1 ? " " : "s", kwh_text(kwh(j)));
    if (factor > 0) s += fmt::format(fmt::runtime(cost), kwh_text(kwh(j) * factor));
    return s + "\n";
  };
  std::string out = "\nGPU energy (NVML's counter, read each tick; a shared GPU split by gpu_mem_gib):\n";
  for (const std::string& id : order) out += line(id, per_job[id].first, per_job[id].second);
  size_t read = 0;
  for (const auto& [id, p] : per_job) read += p.second;
  out += line("the plan", total, read);
  if (unread) out += fmt::format("  ({} ended attempt{} without a reading: not counted)\n", unread, unread == 1 ? "" : "s");
  return out;
}

std::string attempts_json(const std::vector<Attempt>& attempts, const AttemptOutcome& outcome) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Attempt& a : attempts) {
    nlohmann::ordered_json j{{"id", a.id}, {"attempt", a.attempt}};
    j["gpus"] = a.gpus ? nlohmann::ordered_json(*a.gpus) : nlohmann::ordered_json();
    j["start"] = a.start ? nlohmann::ordered_json(*a.start) : nlohmann::ordered_json();
    j["end"] = a.end ? nlohmann::ordered_json(*a.end) : nlohmann::ordered_json();
    j["seconds"] = a.start && a.end ? nlohmann::ordered_json(*a.end - *a.start) : nlohmann::ordered_json();
    j["outcome"] = outcome(a);
    j["exit"] = a.exit ? nlohmann::ordered_json(*a.exit) : nlohmann::ordered_json();
    j["causes"] = a.causes;
    j["gpu_mem_peak_mib"] = a.gpu_mem_peak_mib ? nlohmann::ordered_json(*a.gpu_mem_peak_mib) : nlohmann::ordered_json();
    if (a.mem_peak_mib) j["mem_peak_mib"] = *a.mem_peak_mib;  // only where run sampled it (a job with mem_gib)
    j["energy_kwh"] = a.energy_j ? nlohmann::ordered_json(kwh(*a.energy_j)) : nlohmann::ordered_json();  // null: unread
    if (a.on_oom) j["on_oom"] = *a.on_oom;  // an attempt after on_oom retries: what it ran with
    if (a.snapshot)  // the code it ran: `git -C REPO worktree add --detach DIR COMMIT` checks it out again
      j["snapshot"] = {{"commit", *a.snapshot},
                       {"dirty", a.snapshot_dirty.value_or(false)},
                       {"repo", a.repo ? nlohmann::ordered_json(*a.repo) : nlohmann::ordered_json()},
                       {"ref", "refs/gpuq/snapshots/" + *a.snapshot}};
    out.push_back(std::move(j));
  }
  return out.dump(1) + "\n";
}

std::string attempts_text(const std::vector<Attempt>& attempts, const AttemptOutcome& outcome, double now) {
  size_t w = 3;
  for (const Attempt& a : attempts) w = std::max(w, a.id.size());
  std::string out = fmt::format("{:<{}}  {:>7}  {:<10} {:<19} {:<19} {:>8}  {}\n", "job", w, "attempt", "GPUs",
                                "start", "end", "ran", "outcome");
  for (const Attempt& a : attempts) {
    std::string o = outcome(a);
    if (a.exit && o != "done") o += fmt::format(" (exit {})", *a.exit);
    if (a.gpu_mem_peak_mib) o += fmt::format(", peak {:.1f} GiB", static_cast<double>(*a.gpu_mem_peak_mib) / 1024);
    if (a.mem_peak_mib) o += fmt::format(", host peak {:.2f} GiB", static_cast<double>(*a.mem_peak_mib) / 1024);
    if (a.energy_j) o += fmt::format(", {} kWh", kwh_text(kwh(*a.energy_j)));
    if (a.on_oom) o += ", on_oom: " + *a.on_oom;
    if (a.snapshot)
      o += fmt::format(", code {}{}", short_commit(*a.snapshot), a.snapshot_dirty.value_or(false) ? " (uncommitted changes)" : "");
    out += fmt::format("{:<{}}  {:>7}  {:<10} {:<19} {:<19} {:>8}  {}\n", a.id, w, a.attempt, list(a.gpus),
                       moment(a.start, now), moment(a.end, now),
                       took(a.start && a.end ? std::optional<double>(*a.end - *a.start) : std::nullopt), o);
  }
  return out;
}

std::string accuracy_json(const Accuracy& a) {
  {
    nlohmann::ordered_json out;
    out["finished"] = a.finished ? nlohmann::ordered_json(*a.finished) : nlohmann::ordered_json();
    nlohmann::ordered_json finish = nlohmann::ordered_json::array();
    for (const auto& p : a.finish) {
      nlohmann::ordered_json j{{"t", p.t}};
      for (const auto& [src, v] : p.finish) j[src] = v;
      finish.push_back(std::move(j));
    }
    out["finish"] = std::move(finish);
    nlohmann::ordered_json hs = nlohmann::ordered_json::array();
    for (const auto& h : a.horizons) {
      nlohmann::ordered_json j{{"horizon", h.name}};
      for (const auto& [src, e] : h.error) j[src] = {{"median_abs_error_s", e.first}, {"predictions", e.second}};
      hs.push_back(std::move(j));
    }
    out["starts"] = std::move(hs);
    return out.dump(1) + "\n";
  }
}

std::string accuracy_text(const Accuracy& a, double now) {
  std::string out;
  if (a.finished)
    out += fmt::format("the plan finished at {}\n", local_time(*a.finished, now));
  else
    out += fmt::format("the plan has not finished: its predicted finishes are not scored yet\n");
  out += fmt::format("its predicted finish as run saw it{}:\n", a.finished ? " (and how far off)" : "");
  auto cell = [&](const std::map<std::string, double>& m, const char* src) -> std::string {
    auto it = m.find(src);
    if (it == m.end() && std::string_view(src) == "progress") it = m.find("estimate");  // none reported any
    if (it == m.end()) return "-";
    std::string s = local_time(it->second, now);
    if (a.finished) s += " (" + shift_text(it->second - *a.finished) + ")";
    return s;
  };
  out += fmt::format("  {:<18} {:<30} {:<30} {}\n", "at", "estimate", "learned", "progress");
  // The moments it moved (by a minute or more), at most 30 of them.
  std::vector<const Accuracy::FinishAt*> shown;
  std::optional<double> last;
  for (const auto& p : a.finish) {
    double v = p.finish.count("progress") ? p.finish.at("progress") : p.finish.begin()->second;
    if (p.finish.empty() || (last && std::fabs(v - *last) < 60)) continue;
    last = v;
    shown.push_back(&p);
  }
  size_t step = std::max<size_t>(1, (shown.size() + 29) / 30);
  for (size_t k = 0; k < shown.size(); k += step)
    out += fmt::format("  {:<18} {:<30} {:<30} {}\n", local_time(shown[k]->t, now), cell(shown[k]->finish, "estimate"),
               cell(shown[k]->finish, "learned"), cell(shown[k]->finish, "progress"));
  out += fmt::format("median absolute error of predicted starts (predictions scored):\n");
  out += fmt::format("  {:<20} {:<18} {:<18} {}\n", "horizon", "estimate", "learned", "progress");
  for (const auto& h : a.horizons) {
    auto e = [&](const char* src) -> std::string {
      auto it = h.error.find(src);
      if (it == h.error.end()) return "-";
      return fmt::format("{} ({})", size_words(it->second.first), it->second.second);
    };
    out += fmt::format("  {:<20} {:<18} {:<18} {}\n", h.name, e("estimate"), e("learned"), e("progress"));
  }
  return out;
}


std::string estimates_json(const std::vector<Learned>& learned) {
  {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const Learned& l : learned)
      out.push_back({{"prefix", l.prefix}, {"runs", l.runs}, {"median_ratio", l.median}, {"lowest", l.low},
                     {"highest", l.high},
                     {"median_peak_gib", l.peak_runs ? nlohmann::ordered_json(l.peak_gib) : nlohmann::ordered_json()},
                     {"highest_peak_gib", l.peak_runs ? nlohmann::ordered_json(l.peak_max_gib) : nlohmann::ordered_json()},
                     {"median_host_peak_gib",
                      l.host_peak_runs ? nlohmann::ordered_json(l.host_peak_gib) : nlohmann::ordered_json()},
                     {"highest_host_peak_gib",
                      l.host_peak_runs ? nlohmann::ordered_json(l.host_peak_max_gib) : nlohmann::ordered_json()},
                     {"median_cpu_hours", l.cpu_runs ? nlohmann::ordered_json(l.cpu_hours) : nlohmann::ordered_json()},
                     {"median_cores_busy", l.cpu_runs ? nlohmann::ordered_json(l.cores_busy) : nlohmann::ordered_json()}});
    return out.dump(1) + "\n";
  }
}

std::string estimates_text(const Plan& plan, const std::vector<Learned>& learned, const std::vector<Attempt>& attempts) {
  if (learned.empty()) return "no done run of a job with an estimate in the event log yet\n";
  std::string out;
  out += fmt::format("run time / est_hours, from the done runs in the event log:\n");
  out += fmt::format("{:<16} {:>5} {:>8} {:>15}  {}\n", "prefix", "runs", "median", "range", "--learned-estimates");
  for (const Learned& l : learned)
    out += fmt::format("{:<16} {:>5} {:>7.2f}x {:>6.2f}x-{:.2f}x  {}\n", l.prefix, l.runs, l.median, l.low, l.high,
               l.runs >= 3 ? fmt::format("pending {}* jobs x{:.2f}", l.prefix, l.median) : "not used (under 3 runs)");
  bool peaks = std::any_of(learned.begin(), learned.end(), [](const Learned& l) { return l.peak_runs > 0; });
  if (peaks) {
    out += fmt::format("\nGPU memory peak on one GPU (NVML), from the same runs:\n");
    out += fmt::format("{:<16} {:>5} {:>10} {:>10}\n", "prefix", "runs", "median", "highest");
    for (const Learned& l : learned)
      if (l.peak_runs)
        out += fmt::format("{:<16} {:>5} {:>6.1f} GiB {:>6.1f} GiB\n", l.prefix, l.peak_runs, l.peak_gib, l.peak_max_gib);
  }
  if (std::any_of(learned.begin(), learned.end(), [](const Learned& l) { return l.host_peak_runs > 0; })) {
    out += fmt::format("\nHost memory peak of the job's processes (jobs with mem_gib), from the same runs:\n");
    out += fmt::format("{:<16} {:>5} {:>10} {:>10}\n", "prefix", "runs", "median", "highest");
    for (const Learned& l : learned)
      if (l.host_peak_runs)
        out += fmt::format("{:<16} {:>5} {:>6.2f} GiB {:>6.2f} GiB\n", l.prefix, l.host_peak_runs, l.host_peak_gib,
                           l.host_peak_max_gib);
  }
  // A table whose every median reads "0 s" (jobs that sleep, or whose work is the GPU's) says
  // nothing a line cannot (issue 51, item 13).
  size_t cpu_runs = 0;
  for (const Learned& l : learned) cpu_runs += l.cpu_runs;
  bool cpu_seen = std::any_of(learned.begin(), learned.end(),
                              [](const Learned& l) { return l.cpu_runs > 0 && l.cpu_hours * 3600 >= 0.5; });
  if (cpu_runs > 0 && !cpu_seen)
    out += fmt::format("\nCPU time (user + system) of the job's processes: each prefix's median is under a second "
                       "({} run{})\n",
                       cpu_runs, cpu_runs == 1 ? "" : "s");
  if (cpu_seen) {
    out += fmt::format("\nCPU time (user + system) of the job's processes, from the same runs (cores busy: CPU time "
                       "/ run time, what cpus might say):\n");
    out += fmt::format("{:<16} {:>5} {:>12} {:>12}\n", "prefix", "runs", "median", "cores busy");
    for (const Learned& l : learned)
      if (l.cpu_runs)
        out += fmt::format("{:<16} {:>5} {:>12} {:>12.1f}\n", l.prefix, l.cpu_runs, duration_text(l.cpu_hours * 3600),
                           l.cores_busy);
  }
  // The runs furthest from their estimate, either way.
  struct Off {
    std::string id;
    long long attempt;
    double ran, est, ratio;
  };
  std::vector<Off> off;
  for (const Attempt& a : attempts) {
    const Job* j = plan.find(a.id);
    if (a.outcome != "done" || !a.start || !a.end || !j || !(j->est_hours > 0)) continue;
    double ran = (*a.end - *a.start) / 3600;
    if (ran > 0) off.push_back({a.id, a.attempt, ran, j->est_hours, ran / j->est_hours});
  }
  std::sort(off.begin(), off.end(),
            [](const Off& x, const Off& y) { return std::fabs(std::log(x.ratio)) > std::fabs(std::log(y.ratio)); });
  if (!off.empty()) out += fmt::format("\nfurthest from their estimate:\n");
  for (size_t i = 0; i < off.size() && i < 5; ++i)
    out += fmt::format("  {} (attempt {}): ran {}, est_hours {:g} ({}): {:.2f}x\n", off[i].id, off[i].attempt,
                       duration_text(off[i].ran * 3600), off[i].est, duration_text(off[i].est * 3600), off[i].ratio);
  return out;
}

}  // namespace gpuq
