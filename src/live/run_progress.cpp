// `run`'s steps for predictions that track reality: each running job's progress read into its
// entry (progress.h), and the `eta` event when the plan's predicted finish slips.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <functional>

#include "gpuq/core/accuracy.h"
#include "gpuq/core/events.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/progress.h"
#include "gpuq/core/simulate.h"
#include "gpuq/live/hooks.h"
#include "gpuq/live/journal.h"
#include "run_tick.h"

namespace gpuq {

// Each running job's progress, as its launcher reads it (its GPUQ_PROGRESS file, else a bar at
// the end of its log): the first reading and the latest that moved go in its entry, where
// `status` and the prediction read them. A reading costs a stat and a read of a few KiB.
void RunLoop::note_progress(Tick& t) {
  for (size_t i = 0; i < plan_.jobs.size(); ++i) {
    JobState* s = q_->state().of(plan_, i);
    if (!s || s->status != Status::Running || !s->pid || !s->start || s->kill_sent) continue;
    const Job* job = job_of(plan_.jobs[i].id);
    std::optional<ProgressSeen> seen =
        os_.launcher.progress(plan_.jobs[i].id, progress_from_log(job ? *job : plan_.jobs[i], opt_.progress_from_log));
    if (!seen) continue;
    // Written before this attempt started (a clock step, a file left over): taken as written now.
    double at = std::min(std::max(seen->at, *s->start), t.now);
    if (gpuq::note_progress(*s, seen->fraction, at)) eta_.due = true;
  }
}

// What makes the prediction worth making again: the jobs' statuses and starts (run_tick.h).
size_t state_signature(const State& state) {
  size_t sig = state.entries().size();
  for (const auto& [id, s] : state.entries())
    sig = sig * 1000003u ^ (static_cast<size_t>(s.status) * 7919u + std::hash<double>()(s.start.value_or(0)));
  return sig;
}

namespace {

// One prediction of the plan from the live state: its finish, each job's last end, and the
// start of each job that has not started (by id). nullopt: nothing left, or stuck.
struct Predicted {
  double finish = 0;
  std::map<size_t, double> ends;
  std::map<std::string, double> starts;
};

std::optional<Predicted> predict(const Plan& plan, const Policy& p, LiveStart start, double now) {
  std::vector<char> waiting(plan.jobs.size());
  for (size_t j = 0; j < plan.jobs.size(); ++j) waiting[j] = kind_of(start.lives[j]) == LifeKind::Waiting;
  Simulation sim = simulate(plan, p, &start);
  if (sim.rows.empty() || !sim.stuck.empty()) return std::nullopt;
  Predicted out;
  out.finish = now;
  for (const SimRow& r : sim.rows) {
    double end = now + r.end * 3600;
    out.finish = std::max(out.finish, end);
    double& e = out.ends[r.job];
    e = std::max(e, end);
    if (waiting[r.job]) out.starts.emplace(plan.jobs[r.job].id, now + r.start * 3600);  // its first attempt's
  }
  return out;
}

}  // namespace

namespace {

// Why the plan's finish moved by `shift`: the job whose end moved most the same way from `was`
// to `ends` (a running one among equals: the others follow it), in words (": a is slower than
// its estimate"); "" where none moved.
std::string slip_cause(const Plan& plan, const State& state, const std::map<size_t, double>& was,
                       std::map<size_t, double>& ends, double shift, double now) {
  std::optional<size_t> cause;
  double most = 0;
  for (const auto& [j, e] : ends) {
    auto before = was.find(j);
    if (before == was.end()) continue;
    double moved = (e - before->second) * (shift < 0 ? -1 : 1);
    bool running = state.status_of(plan, j) == Status::Running;
    if (moved > most + 1 || (running && moved > most - 1 && moved > 0 &&
                             !(cause && state.status_of(plan, *cause) == Status::Running))) {
      most = std::max(most, moved);
      cause = j;
    }
  }
  if (!cause) return "";
  const Job& j = plan.jobs[*cause];
  const JobState* s = state.of(plan, *cause);
  if (s && s->status == Status::Running && finish_from_entry(j, *s, now))
    return fmt::format(": {} is {} than its estimate", j.id,
                       ends[*cause] > *s->start + j.est_hours * 3600 ? "slower" : "faster");
  return fmt::format(": {} {}", j.id, shift > 0 ? "ends later" : "ends sooner");
}

}  // namespace

// Each prediction in PLAN.predictions.jsonl (history --accuracy): at each event, and between
// events when the finish moved a minute or ten minutes passed (a line per reading would be
// megabytes an hour for a large plan). A line is appended whole or not at all; a file that
// cannot take it (a full disk) is said once, with the file and the error, and again when it
// takes lines again. Jobs go on either way.
void RunLoop::record_prediction(Tick& t, const PredictionRecord& record, bool moved) {
  auto first = record.finish.begin();
  bool record_it = first != record.finish.end() &&
                   (moved || !eta_.recorded_finish || std::fabs(first->second - *eta_.recorded_finish) > 60 ||
                    t.now - eta_.recorded_at >= 600);
  if (!record_it || eta_.predictions_path.empty()) return;
  try {
    append_lines(eta_.predictions_path, prediction_line(record) + "\n", "the predictions file", false);
  } catch (const StoreError& e) {
    std::string problem = e.err ? fault_words(e.file, e.err) : std::string(e.what());
    if (told_.fresh("predictions", problem))
      say(t, fmt::format("{}: the run's predictions are not recorded (history --accuracy goes without them) "
                             "until it can be written; jobs go on",
                             problem));
    return;
  }
  eta_.recorded_finish = first->second;
  eta_.recorded_at = t.now;
  if (told_.gone("predictions")) say(t, "the predictions file is written again: " + eta_.predictions_path);
}

// The plan's predicted finish, as `status` would predict it now; an `eta` event (the event log,
// the hooks) when it moved from the one last told by more than --eta-slip-percent of the time
// left and --eta-slip-minutes. The first prediction is told by nobody: it is where slips count
// from. Each prediction is recorded (PLAN.predictions.jsonl, for `history --accuracy`), with
// what the estimates alone and the learned estimates would have predicted. Predicting costs
// simulations of the plan: made only when a reading or a job moved, at most every 5 s, and
// never more than 2 % of run's time.
void RunLoop::watch_eta(Tick& t) {
  if (!log_.journal || !t.saved) return;
  size_t sig = state_signature(q_->state());
  bool moved = sig != eta_.sig;  // a job started or ended: an event
  if (moved) eta_.due = true;
  eta_.sig = sig;
  double every = std::max(5.0, 50 * eta_.cost);
  if (!eta_.due || t.now - eta_.predicted_at < every) {
    if (eta_.due) t.wake_in = std::min(t.wake_in, eta_.predicted_at + every - t.now);
    return;
  }
  auto began = std::chrono::steady_clock::now();
  eta_.due = false;
  eta_.predicted_at = t.now;
  Policy p = q_->engine().policy();
  p.paused = false;
  const State& state = q_->state();
  GpuMask free = mask_of(opt_.node_gpus) & ~t.busy;
  LiveStart start = live_start(plan_, state, p, t.now, free, os_.files, t.mem_other);
  bool progress = !start.progress_end.empty();
  LiveStart plain = start;
  plain.progress_end.clear();
  std::optional<Predicted> got = predict(plan_, p, std::move(start), t.now);
  PredictionRecord record;
  record.t = t.now;
  if (got) {
    record.finish[progress ? "progress" : "estimate"] = got->finish;
    record.starts[progress ? "progress" : "estimate"] = got->starts;
  }
  if (progress)
    if (std::optional<Predicted> est = predict(plan_, p, plain, t.now)) {
      record.finish["estimate"] = est->finish;
      record.starts["estimate"] = std::move(est->starts);
    }
  if (!eta_.learned_tried || eta_.learned_for != plan_.serial) {  // once per version of the plan
    eta_.learned_tried = true;
    eta_.learned_for = plan_.serial;
    eta_.learned.reset();
    std::vector<Learned> learned = learn_estimates(attempts_of(read_events(log_.journal->path(), nullptr)), plan_);
    Plan scaled = plan_;
    if (!apply_learned(scaled, state, learned).empty()) eta_.learned = std::move(scaled);
  }
  if (eta_.learned && eta_.learned->jobs.size() == plan_.jobs.size()) {
    LiveStart ls = live_start(*eta_.learned, state, p, t.now, free, os_.files, t.mem_other);
    ls.progress_end.clear();
    if (std::optional<Predicted> l = predict(*eta_.learned, p, std::move(ls), t.now)) {
      record.finish["learned"] = l->finish;
      record.starts["learned"] = std::move(l->starts);
    }
  }
  eta_.cost = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  record_prediction(t, record, moved);
  if (!got) return;  // nothing left, or no finish to speak of
  double finish = got->finish;
  std::map<size_t, double>& ends = got->ends;
  if (!eta_.told) {
    eta_.told = finish;
    eta_.ends = std::move(ends);
    return;
  }
  if (!finish_slipped(*eta_.told, finish, t.now, opt_.eta_slip_percent, opt_.eta_slip_minutes)) return;
  double shift = finish - *eta_.told;
  std::string why = slip_cause(plan_, q_->state(), eta_.ends, ends, shift, t.now);
  Event e = plan_event("eta", t.now, "run",
                       fmt::format("the plan now ends at {} ({}{})", local_time(finish, t.now), shift_text(shift), why));
  e.finish = finish;
  e.was = *eta_.told;
  eta_.told = finish;
  eta_.ends = std::move(ends);
  try {
    if (log_.journal->append_plan_event(e) && log_.hooks) log_.hooks->fire({e}, log_.journal->count());
  } catch (const StoreError& x) {
    say(t, fmt::format("cannot append the eta event to the event log ({})", x.what()));
  }
}

}  // namespace gpuq
