// `gpuq history`, and --learned-estimates for status and simulate: both read the
// event log (journal.h) that run and the control commands write.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpuq/core/accuracy.h"
#include "gpuq/core/events.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/progress.h"
#include "gpuq/live/journal.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/store.h"

#include "gpuq/core/snapshot.h"

#include "cli.h"
#include "gpuq/core/job_words.h"

namespace gpuq::cli {

namespace {

std::vector<Attempt> logged_attempts(const Flags& f, bool quiet_warnings = false) {
  std::vector<std::string> warnings;
  std::vector<Event> events = read_events(events_path_for(plan_paths(f).state), &warnings);
  if (!quiet_warnings)
    for (const std::string& w : warnings) fmt::print(stderr, "gpuq: event log: {}\n", w);
  return attempts_of(events);
}

// "12 min", "2.0 h", "40 s": an error's size.
std::string size_words(double seconds) { return shift_text(std::fabs(seconds)).substr(1); }

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  return lines;
}

// --accuracy: the predictions run recorded (PLAN.predictions.jsonl) against what happened.
int print_accuracy(const Flags& f, const std::vector<Attempt>& attempts, double now) {
  std::string path = predictions_path_for(plan_paths(f).state);
  std::vector<PredictionRecord> records;
  for (const std::string& line : read_lines(path))
    if (auto r = parse_prediction_line(line)) records.push_back(std::move(*r));
  Accuracy a = score_predictions(records, attempts);
  if (f.json) {
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
    fmt::print("{}\n", out.dump(1));
    return 0;
  }
  if (records.empty()) {
    fmt::print("no predictions in {} yet (gpuq run records them)\n", path);
    return 0;
  }
  if (a.finished)
    fmt::print("the plan finished at {}\n", local_time(*a.finished, now));
  else
    fmt::print("the plan has not finished: its predicted finishes are not scored yet\n");
  fmt::print("its predicted finish as run saw it{}:\n", a.finished ? " (and how far off)" : "");
  auto cell = [&](const std::map<std::string, double>& m, const char* src) -> std::string {
    auto it = m.find(src);
    if (it == m.end() && std::string_view(src) == "progress") it = m.find("estimate");  // none reported any
    if (it == m.end()) return "-";
    std::string s = local_time(it->second, now);
    if (a.finished) s += " (" + shift_text(it->second - *a.finished) + ")";
    return s;
  };
  fmt::print("  {:<18} {:<30} {:<30} {}\n", "at", "estimate", "learned", "progress");
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
    fmt::print("  {:<18} {:<30} {:<30} {}\n", local_time(shown[k]->t, now), cell(shown[k]->finish, "estimate"),
               cell(shown[k]->finish, "learned"), cell(shown[k]->finish, "progress"));
  fmt::print("median absolute error of predicted starts (predictions scored):\n");
  fmt::print("  {:<20} {:<18} {:<18} {}\n", "horizon", "estimate", "learned", "progress");
  for (const auto& h : a.horizons) {
    auto e = [&](const char* src) -> std::string {
      auto it = h.error.find(src);
      if (it == h.error.end()) return "-";
      return fmt::format("{} ({})", size_words(it->second.first), it->second.second);
    };
    fmt::print("  {:<20} {:<18} {:<18} {}\n", h.name, e("estimate"), e("learned"), e("progress"));
  }
  return 0;
}

// --since: "90m", "6h", "2d", "2026-12-01", "2026-12-01 14:00" (local time), or seconds since the epoch.
std::optional<double> parse_since(const std::string& text, double now) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && std::isfinite(v) && v >= 0) {
    std::string unit(end);
    if (unit == "s") return now - v;
    if (unit == "m") return now - v * 60;
    if (unit == "h") return now - v * 3600;
    if (unit == "d") return now - v * 86400;
    if (unit.empty() && v > 1e9) return v;
  }
  for (const char* fmt : {"%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"}) {
    std::tm tm{};
    const char* rest = strptime(text.c_str(), fmt, &tm);
    if (rest && *rest == '\0') {
      tm.tm_isdst = -1;
      return static_cast<double>(std::mktime(&tm));
    }
  }
  return std::nullopt;
}

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

int print_estimates(const Flags& f, const Plan& plan, const std::vector<Attempt>& attempts) {
  std::vector<Learned> learned = learn_estimates(attempts, plan);
  if (f.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const Learned& l : learned)
      out.push_back({{"prefix", l.prefix}, {"runs", l.runs}, {"median_ratio", l.median}, {"lowest", l.low},
                     {"highest", l.high},
                     {"median_peak_gib", l.peak_runs ? nlohmann::ordered_json(l.peak_gib) : nlohmann::ordered_json()},
                     {"highest_peak_gib", l.peak_runs ? nlohmann::ordered_json(l.peak_max_gib) : nlohmann::ordered_json()}});
    fmt::print("{}\n", out.dump(1));
    return 0;
  }
  if (learned.empty()) {
    fmt::print("no done run of a job with an estimate in the event log yet\n");
    return 0;
  }
  fmt::print("run time / est_hours, from the done runs in the event log:\n");
  fmt::print("{:<16} {:>5} {:>8} {:>15}  {}\n", "prefix", "runs", "median", "range", "--learned-estimates");
  for (const Learned& l : learned)
    fmt::print("{:<16} {:>5} {:>7.2f}x {:>6.2f}x-{:.2f}x  {}\n", l.prefix, l.runs, l.median, l.low, l.high,
               l.runs >= 3 ? fmt::format("pending {}* jobs x{:.2f}", l.prefix, l.median) : "not used (under 3 runs)");
  bool peaks = std::any_of(learned.begin(), learned.end(), [](const Learned& l) { return l.peak_runs > 0; });
  if (peaks) {
    fmt::print("\nGPU memory peak on one GPU (NVML), from the same runs:\n");
    fmt::print("{:<16} {:>5} {:>10} {:>10}\n", "prefix", "runs", "median", "highest");
    for (const Learned& l : learned)
      if (l.peak_runs)
        fmt::print("{:<16} {:>5} {:>6.1f} GiB {:>6.1f} GiB\n", l.prefix, l.peak_runs, l.peak_gib, l.peak_max_gib);
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
  if (!off.empty()) fmt::print("\nfurthest from their estimate:\n");
  for (size_t i = 0; i < off.size() && i < 5; ++i)
    fmt::print("  {} (attempt {}): ran {:.2f}h, est_hours {:g}: {:.2f}x\n", off[i].id, off[i].attempt, off[i].ran,
               off[i].est, off[i].ratio);
  return 0;
}

}  // namespace

int cmd_history(Flags& f) {
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const Plan& plan = loaded->plan;
  double now = unix_now();
  std::optional<double> since = parse_since(f.since, now);
  if (!f.since.empty() && !since) {
    fmt::print(stderr, "gpuq history: --since {}: not a time (try 6h, 2d, 2026-12-01 or \"2026-12-01 14:00\")\n",
               f.since);
    return kExitBadInput;
  }
  JobWords words = resolve_job_words(plan, f.jobs);  // a sweep's points; a number spelled otherwise
  for (const std::string& note : words.notes) fmt::print(stderr, "gpuq history: {}\n", note);
  f.jobs = words.ids;
  for (const std::string& id : f.jobs)
    if (!plan.find(id))
      fmt::print(stderr, "gpuq history: note: no job {} in {} (its past is shown if logged){}\n", id, f.plan,
                 job_suggestion(plan, id));
  std::vector<Attempt> attempts = logged_attempts(f);
  std::erase_if(attempts, [&](const Attempt& a) {
    if (!f.jobs.empty() && std::find(f.jobs.begin(), f.jobs.end(), a.id) == f.jobs.end()) return true;
    double when = a.end.value_or(a.start.value_or(now));
    return since && when < *since;
  });
  if (f.estimates) return print_estimates(f, plan, attempts);
  if (f.accuracy) return print_accuracy(f, attempts, now);
  State state = read_state(plan_paths(f));
  auto outcome = [&](const Attempt& a) -> std::string {
    std::string o = a.outcome.value_or("");
    if (o.empty()) {
      const JobState* s = state.find(a.id);
      o = s && s->status == Status::Running && s->start == a.start ? "running" : "?";
    }
    return o;
  };
  if (f.json) {
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
      if (a.snapshot)  // the code it ran: `git -C REPO worktree add --detach DIR COMMIT` checks it out again
        j["snapshot"] = {{"commit", *a.snapshot},
                         {"dirty", a.snapshot_dirty.value_or(false)},
                         {"repo", a.repo ? nlohmann::ordered_json(*a.repo) : nlohmann::ordered_json()},
                         {"ref", "refs/gpuq/snapshots/" + *a.snapshot}};
      out.push_back(std::move(j));
    }
    fmt::print("{}\n", out.dump(1));
    return 0;
  }
  if (attempts.empty()) {
    fmt::print("nothing in the event log {}{}\n", events_path_for(plan_paths(f).state),
               f.jobs.empty() && !since ? " yet (gpuq run writes it)" : " that matches");
    return 0;
  }
  size_t w = 3;
  for (const Attempt& a : attempts) w = std::max(w, a.id.size());
  fmt::print("{:<{}}  {:>7}  {:<10} {:<19} {:<19} {:>8}  {}\n", "job", w, "attempt", "GPUs", "start", "end", "ran",
             "outcome");
  for (const Attempt& a : attempts) {
    std::string o = outcome(a);
    if (a.exit && o != "done") o += fmt::format(" (exit {})", *a.exit);
    if (a.gpu_mem_peak_mib) o += fmt::format(", peak {:.1f} GiB", static_cast<double>(*a.gpu_mem_peak_mib) / 1024);
    if (a.snapshot)
      o += fmt::format(", code {}{}", short_commit(*a.snapshot), a.snapshot_dirty.value_or(false) ? " (uncommitted changes)" : "");
    fmt::print("{:<{}}  {:>7}  {:<10} {:<19} {:<19} {:>8}  {}\n", a.id, w, a.attempt, list(a.gpus),
               moment(a.start, now), moment(a.end, now),
               took(a.start && a.end ? std::optional<double>(*a.end - *a.start) : std::nullopt), o);
  }
  return 0;
}

void add_learned_estimates(CLI::App* sub, Flags& f) {
  sub->add_flag("--learned-estimates", f.learned_estimates,
                "predict pending jobs with est_hours x the median ratio their id prefix (train_, eval_, ...) ran at "
                "before, where it has 3 or more done runs in the event log (gpuq history --estimates)");
}

void learn_into(const Flags& f, Plan& plan, const State& state) {
  std::vector<Learned> learned = learn_estimates(logged_attempts(f), plan);
  std::vector<Learned> used = apply_learned(plan, state, learned);
  fmt::print(stderr, "gpuq: --learned-estimates: {}\n", learned_text(learned, used));
}

void add_history_command(CLI::App& app, Flags& f, Action& action) {
  auto* h = app.add_subcommand("history", "what ran, when, where, for how long and how it ended (the event log "
                                          "PLAN.events.jsonl), across restarts of run");
  add_flags(h, f, {});
  h->add_option("--job", f.jobs, "only this job (repeatable)")->allow_extra_args(false);
  h->add_option("--since", f.since, "only attempts that ended (or started) since: 6h, 2d, 2026-12-01, \"2026-12-01 14:00\"");
  h->add_flag("--json", f.json, "one JSON array of attempts (or of prefixes with --estimates)");
  h->add_flag("--estimates", f.estimates,
              "how the done runs compare with est_hours, per id prefix: median ratio, range, the runs furthest off");
  h->add_flag("--accuracy", f.accuracy,
              "how run's predictions held up: the plan's predicted finish over time against the real one, and the "
              "median error of predicted starts an hour and a day ahead, from estimates, learned estimates and "
              "progress (PLAN.predictions.jsonl)");
  h->callback([&] { action = [&] { return cmd_history(f); }; });
}

}  // namespace gpuq::cli
