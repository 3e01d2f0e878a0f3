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
#include "gpuq/live/commands.h"
#include "gpuq/views/history_text.h"

#include "gpuq/core/snapshot.h"

#include "cli.h"
#include "gpuq/core/job_words.h"

namespace gpuq::cli {

namespace {

std::vector<Attempt> logged_attempts(const Flags& f, bool quiet_warnings = false) {
  std::vector<std::string> warnings;
  std::vector<Attempt> attempts = gpuq::logged_attempts(f, &warnings);
  if (!quiet_warnings)
    for (const std::string& w : warnings) fmt::print(stderr, "gpuq: event log: {}\n", w);
  return attempts;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  return lines;
}

// --accuracy: the predictions run recorded (PLAN.predictions.jsonl) against what happened.
int print_accuracy(const Flags& f, const std::vector<Attempt>& attempts, double now) {
  std::string path = predictions_log_of(f);
  std::vector<PredictionRecord> records;
  for (const std::string& line : read_lines(path))
    if (auto r = parse_prediction_line(line)) records.push_back(std::move(*r));
  Accuracy a = score_predictions(records, attempts);
  if (!f.json && records.empty()) {
    fmt::print("no predictions in {} yet (gpuq run records them)\n", path);
    return 0;
  }
  std::string out = f.json ? accuracy_json(a) : accuracy_text(a, now);
  std::fwrite(out.data(), 1, out.size(), stdout);
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

int print_estimates(const Flags& f, const Plan& plan, const std::vector<Attempt>& attempts) {
  std::vector<Learned> learned = learn_estimates(attempts, plan);
  std::string out = f.json ? estimates_json(learned) : estimates_text(plan, learned, attempts);
  std::fwrite(out.data(), 1, out.size(), stdout);
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
  State state = plan_state(f);
  auto outcome = [&](const Attempt& a) -> std::string {
    std::string o = a.outcome.value_or("");
    if (o.empty()) {
      const JobState* s = state.find(a.id);
      o = s && s->status == Status::Running && s->start == a.start ? "running" : "?";
    }
    return o;
  };
  if (!f.json && attempts.empty()) {
    fmt::print("nothing in the event log {}{}\n", events_log_of(f),
               f.jobs.empty() && !since ? " yet (gpuq run writes it)" : " that matches");
    return 0;
  }
  std::string out = f.json ? attempts_json(attempts, outcome)
                           : attempts_text(attempts, outcome, now) + energy_text(attempts, f.energy_factor, f.energy_unit);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

void add_learned_estimates(CLI::App* sub, Flags& f) {
  sub->add_flag("--learned-estimates", f.learned_estimates,
                "predict pending jobs with est_hours x the median ratio their id prefix (train_, eval_, ...) ran at "
                "before, where it has 3 or more done runs in the event log (gpuq history --estimates)");
}

Plan learn_into(const Flags& f, const Plan& given, const State& state) {
  Plan plan = given;
  std::vector<Learned> learned = learn_estimates(logged_attempts(f), plan);
  std::vector<Learned> used = apply_learned(plan, state, learned);
  fmt::print(stderr, "gpuq: --learned-estimates: {}\n", learned_text(learned, used));
  return plan;
}

void add_history_command(CLI::App& app, Flags& f, Action& action) {
  auto* h = app.add_subcommand("history", "what ran, when, where, for how long and how it ended (the event log "
                                          "PLAN.events.jsonl), across restarts of run");
  add_flags(h, f, 0);
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
