// The rule book: the tick's decisions against the original's words, and the
// prediction from a live state against the next tick of run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "gpuq/core/outlook.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"
#include "test_util.h"
#include "gpuq/live/state_codec.h"

namespace gpuq {
namespace {

using test::plan_of;

struct Gen {
  uint64_t seed;
  std::mt19937_64 rng;
  explicit Gen(uint64_t s) : seed(s), rng(s) {}
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
  bool coin(int percent = 50) { return below(100) < static_cast<size_t>(percent); }
};

TEST(Rules, OutcomesFromTheStateFilesCodes) {
  JobState s;
  s.status = Status::Failed;
  s.exit = kKilledExit;
  EXPECT_EQ(outcome_of(s), Outcome::Killed);
  s.exit = kLostExit;
  EXPECT_EQ(outcome_of(s), Outcome::Lost);
  s.exit = 3;
  EXPECT_EQ(outcome_of(s), Outcome::Failed);
  s.status = Status::Done;
  s.exit = 0;
  EXPECT_EQ(outcome_of(s), Outcome::Done);
  s.status = Status::Running;
  EXPECT_EQ(outcome_of(s), std::nullopt);
}

TEST(Rules, FinishedRetriesAndReservations) {
  Policy p;  // 2 retries, 300 s apart
  JobState failed;
  failed.status = Status::Failed;
  failed.exit = 1;
  failed.attempts = 1;
  failed.end = 1000;
  EXPECT_FALSE(finished(&failed, p.max_retries));  // one retry left
  EXPECT_TRUE(will_retry(&failed, p));
  EXPECT_EQ(retry_at(failed, p), 1300);
  EXPECT_FALSE(retry_due(&failed, p, 1299.5));
  EXPECT_TRUE(retry_due(&failed, p, 1300));
  EXPECT_TRUE(leaves_reservation(Status::Failed));  // the original's rule, retries left or not
  failed.attempts = 2;
  EXPECT_TRUE(finished(&failed, p.max_retries));
  EXPECT_FALSE(will_retry(&failed, p));
  EXPECT_FALSE(retry_due(&failed, p, 1e9));
  JobState killed = failed;
  killed.attempts = 0;
  killed.exit = kKilledExit;
  EXPECT_TRUE(finished(&killed, p.max_retries));  // kill is final
  EXPECT_FALSE(retry_due(&killed, p, 1e9));
  JobState no_end = failed;
  no_end.attempts = 0;
  no_end.end.reset();
  EXPECT_FALSE(will_retry(&no_end, p));
  EXPECT_FALSE(retry_due(&no_end, p, 1e9));
  EXPECT_TRUE(finished_as(Status::Blocked, nullptr, 2));
  EXPECT_FALSE(finished(nullptr, 2));
  EXPECT_FALSE(leaves_reservation(Status::Held));
  EXPECT_TRUE(blocks_dependents(Status::Blocked));
  EXPECT_FALSE(blocks_dependents(Status::Held));
}

// The tick as the original words it, changing the state as it goes (gpuq's decide_tick did
// exactly this before it worked over an array of statuses): the reference for PreviewTick.
TickDecision reference_tick(const Plan& plan, State& state, const Policy& opt, double now, GpuMask free,
                            bool any_running, const FileChecks& files) {
  TickDecision tick;
  bool unblocked = false;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobState* s = state.find(plan.jobs[i].id);
    if (retry_due(s, opt, now)) {
      long long n = s->attempts_or0() + 1;
      JobState fresh;
      fresh.attempts = n;
      state.set(plan.jobs[i].id, fresh);
      if (!unblocked)
        for (auto& [other, os] : state.entries())
          if (os.status == Status::Blocked) os.status = Status::Pending;
      unblocked = true;
      tick.retried.push_back({plan.jobs[i].id, n});
    } else if (s && s->status == Status::Failed && s->exit != kKilledExit && s->attempts_or0() < opt.max_retries && s->end) {
      tick.next_retry_in = std::min(tick.next_retry_in, *s->end + opt.retry_after - now);
    }
  }
  std::vector<size_t> ready;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    if (state.status_of(plan.jobs[i].id) != Status::Pending) continue;
    if (deps_failed(plan, plan.jobs[i], state)) {
      JobState blocked;
      blocked.status = Status::Blocked;
      state.set(plan.jobs[i].id, blocked);
      continue;
    }
    if (deps_met(plan, plan.jobs[i], state, opt.max_retries, files)) ready.push_back(i);
  }
  PassInput in;
  in.free = free;
  in.node = mask_of(opt.node_gpus);
  in.open.resize(plan.reservations.size());
  for (size_t r = 0; r < plan.reservations.size(); ++r)
    for (size_t m : plan.reservations[r].jobs) {
      Status st = state.status_of(plan.jobs[m].id);
      if (st != Status::Done && st != Status::Failed && st != Status::Blocked) in.open[r] = true;
    }
  in.nothing_running = !any_running;
  in.explain = true;
  tick.pass = schedule_pass(plan, ReadySet(plan, opt.backfill_max_hours, ready), in);
  return tick;
}

// status shows what the next tick of run would do with preview_tick, which must decide
// exactly as run's tick does, without changing the state; decide_tick must decide the same
// and leave the state as the original would: random plans (deps of every kind, a
// reservation) and states (every status, retries due or not, blocked jobs to be released,
// held jobs, missing entries), checked against the reference above on a copy.
TEST(PreviewTick, DecidesAsRunsTickAndLeavesTheStateAlone) {
  {
    // The case that matters most: a retry falls due, which releases every blocked job.
    Plan plan = *parse_plan(R"([{"id": "a", "script": "s"}, {"id": "b", "script": "s"}])", "p.json", {0, 1}).plan;
    State state = *parse_state(R"({"a": {"status": "blocked"},
                                   "b": {"status": "failed", "exit": 1, "attempts": 0, "end": 1000}})",
                               "s.json").state;
    Policy opt;
    opt.node_gpus = {0, 1};
    TickDecision shown = preview_tick(plan, state, opt, 2000.0, 0b11, false, FileTable([](const std::string&) { return true; }));
    ASSERT_EQ(shown.pass.starts.size(), 2u);  // a is released by b's retry, and both start
    EXPECT_EQ(shown.retried, (std::vector<std::pair<std::string, long long>>{{"b", 1}}));
    EXPECT_EQ(state.find("a")->status, Status::Blocked);
  }
  Gen g(test::test_seed(23));
  SCOPED_TRACE(test::seed_note(g.seed));
  size_t released = 0;  // rounds where a retry released a blocked job that then started
  const char* statuses[] = {"pending", "running", "done", "failed", "blocked", "held"};
  for (int round = 0; round < 400; ++round) {
    size_t n = g.below(30) + 1;
    std::string plan_text = "{\"jobs\": [";
    for (size_t k = 0; k < n; ++k) {
      std::string deps;
      for (size_t d = 0; d < k && deps.size() < 40; ++d)
        if (g.coin(15)) deps += fmt::format("{}\"{}j{}\"", deps.empty() ? "" : ", ", g.coin(30) ? "after:" : "", d);
      if (g.coin(10)) deps += fmt::format("{}\"file:f{}\"", deps.empty() ? "" : ", ", g.below(3));
      plan_text += fmt::format(R"({}{{"id": "j{}", "script": "s", "gpus": {}, "priority": {}, "est_hours": {}, "deps": [{}]}})",
                               k ? "," : "", k, g.below(5), g.below(4) * 10, g.coin() ? 0.25 : 2.0, deps);
    }
    plan_text += fmt::format(R"(], "reservations": [{{"gpus": [6, 7], "jobs": ["j{}"]}}]}})", g.below(n));
    PlanLoad load = parse_plan(plan_text, "p.json", {0, 1, 2, 3, 4, 5, 6, 7});
    ASSERT_TRUE(load.plan) << plan_text;
    const Plan& plan = *load.plan;
    std::string state_text = "{";
    for (size_t k = 0; k < n; ++k) {
      if (g.coin(20)) continue;  // no entry: pending
      std::string st = statuses[g.below(6)];
      std::string more;
      if (st == "running") more = R"(, "pid": 1, "gpus": [0])";
      if (st == "failed")
        more = fmt::format(R"(, "exit": {}, "attempts": {}, "end": {})", g.coin(20) ? -15 : 1, g.below(3),
                           g.coin() ? 1000.0 : 1900.0);
      state_text += fmt::format(R"({}"j{}": {{"status": "{}"{}}})", state_text.size() > 1 ? "," : "", k, st, more);
    }
    state_text += "}";
    State state = *parse_state(state_text, "s.json").state;
    const std::string before = dump_state(state);
    Policy opt;
    GpuMask free = g.below(256);
    bool any_running = g.coin();
    const FileTable files([](const std::string& p) { return p == "f1"; });
    State expected = state, copy = state;
    TickDecision ran = reference_tick(plan, expected, opt, 2000.0, free, any_running, files);
    TickDecision decided = decide_tick(plan, copy, opt, 2000.0, free, any_running, files, true);
    TickDecision shown = preview_tick(plan, state, opt, 2000.0, free, any_running, files);
    SCOPED_TRACE(plan_text + "\n" + state_text);
    EXPECT_EQ(dump_state(state), before);
    EXPECT_EQ(dump_state(copy), dump_state(expected));  // run's tick changes the state as the original
    EXPECT_EQ(decided.pass.starts.size(), ran.pass.starts.size());
    EXPECT_EQ(decided.retried, ran.retried);
    EXPECT_EQ(shown.retried, ran.retried);
    EXPECT_EQ(shown.next_retry_in, ran.next_retry_in);
    EXPECT_EQ(shown.pass.waiting_head, ran.pass.waiting_head);
    EXPECT_EQ(shown.pass.stall_broken, ran.pass.stall_broken);
    ASSERT_EQ(shown.pass.starts.size(), ran.pass.starts.size());
    for (size_t k = 0; k < ran.pass.starts.size(); ++k) {
      EXPECT_EQ(shown.pass.starts[k].job, ran.pass.starts[k].job);
      EXPECT_EQ(shown.pass.starts[k].gpus, ran.pass.starts[k].gpus);
    }
    ASSERT_EQ(shown.pass.held.size(), ran.pass.held.size());
    for (size_t k = 0; k < ran.pass.held.size(); ++k) {
      EXPECT_EQ(shown.pass.held[k].job, ran.pass.held[k].job);
      EXPECT_EQ(shown.pass.held[k].why, ran.pass.held[k].why);
      EXPECT_EQ(shown.pass.held[k].free_for_job, ran.pass.held[k].free_for_job);
      EXPECT_EQ(shown.pass.held[k].closed, ran.pass.held[k].closed);
      EXPECT_EQ(shown.pass.held[k].head, ran.pass.held[k].head);
    }
    for (const Start& st : ran.pass.starts) released += state.status_of(plan, st.job) == Status::Blocked;
    if (HasFailure()) return;
  }
  EXPECT_GT(released, 10u);  // the rounds test what they are meant to
}


// The bug that made the rule book: a reservation member that failed with retries left. run
// counts it finished (the original's rule), so the reservation's GPUs are open to others now;
// status must then say the other job starts at the next tick and predict it to start now.
TEST(Outlook, AFailedReservationMemberWithRetriesLeftAgreesWithTheTick) {
  Plan plan = plan_of(R"({"jobs": [
    {"id": "member", "script": "s", "gpus": 2, "est_hours": 1},
    {"id": "other", "script": "s", "gpus": 8, "est_hours": 2}
  ], "reservations": [{"gpus": [0, 1], "jobs": ["member"]}]})");
  State state = *parse_state(R"({"member": {"status": "failed", "exit": 1, "attempts": 0, "end": 1000}})", "s").state;
  Policy p;
  const double now = 1100;  // the retry falls due at 1300
  const FileTable files([](const std::string&) { return true; });
  Outlook o = make_outlook(plan, state, p, now, 0xff, files);
  State copy = state;
  TickDecision tick = decide_tick(plan, copy, p, now, 0xff, false, files);
  ASSERT_EQ(tick.pass.starts.size(), 1u);
  EXPECT_EQ(plan.jobs[tick.pass.starts[0].job].id, "other");
  EXPECT_EQ(o.jobs[1].why, "ready: starts at the next tick");
  ASSERT_TRUE(o.jobs[1].predicted_start);
  EXPECT_EQ(*o.jobs[1].predicted_start, now);
  // The member is retried when its time comes, and waits for the GPUs the other job holds.
  ASSERT_TRUE(o.jobs[0].predicted_start);
  EXPECT_EQ(*o.jobs[0].predicted_start, now + 2 * 3600);
}

// A job blocked by a dep that will be retried runs after it (run unblocks it at the retry); one
// blocked by a killed dep does not.
TEST(Outlook, BlockedJobsRunAfterTheRetryOfTheirDep) {
  Plan plan = plan_of(R"([{"id": "a", "script": "s", "est_hours": 1}, {"id": "b", "script": "s", "deps": ["a"]},
                          {"id": "c", "script": "s"}, {"id": "d", "script": "s", "deps": ["c"]},
                          {"id": "e", "script": "s", "deps": ["file:out"], "produced_by": "b"}])");
  State state = *parse_state(R"({"a": {"status": "failed", "exit": 1, "attempts": 0, "end": 1000},
                                 "b": {"status": "blocked"}, "c": {"status": "failed", "exit": -15, "end": 1000},
                                 "d": {"status": "blocked"}})", "s").state;
  const double now = 1100;
  Outlook o = make_outlook(plan, state, Policy{}, now, 0xff, FileTable([](const std::string&) { return false; }));
  ASSERT_TRUE(o.jobs[0].predicted_start && o.jobs[1].predicted_start && o.jobs[4].predicted_start);
  EXPECT_DOUBLE_EQ(*o.jobs[0].predicted_start, 1300);
  EXPECT_DOUBLE_EQ(*o.jobs[1].predicted_start, 1300 + 3600);
  EXPECT_DOUBLE_EQ(*o.jobs[4].predicted_start, 1300 + 2 * 3600);  // b's file, made at its end
  EXPECT_EQ(o.jobs[1].why, "blocked: its dep a failed; the next automatic retry releases it");
  EXPECT_FALSE(o.jobs[3].predicted_start);
  EXPECT_EQ(o.jobs[3].why, "blocked: its dep c failed; `gpuq retry` the dep to run it");
}

// Blocked chains written in any order: each job listed before the dep that blocks it.
TEST(Outlook, BlockedChainsListedBackwardsSettleWhetherTheyRevive) {
  for (bool root_killed : {true, false}) {
    const int n = 60;
    std::string plan_text = "[", state_text = "{";
    for (int k = 0; k < n; ++k) {
      plan_text += fmt::format(R"({{"id": "c{}", "script": "s"{}}}, )", k, k + 1 < n ? fmt::format(R"(, "deps": ["c{}"])", k + 1) : "");
      if (k + 1 < n) state_text += fmt::format(R"("c{}": {{"status": "blocked"}}, )", k);
    }
    plan_text += R"({"id": "other", "script": "s"}])";
    state_text += fmt::format(R"("c{}": {{"status": "failed", "exit": {}, "attempts": 0, "end": 1000}},)", n - 1,
                              root_killed ? -15 : 1);
    state_text += R"("other": {"status": "failed", "exit": 1, "attempts": 0, "end": 1000}})";
    Plan plan = plan_of(plan_text);
    State state = *parse_state(state_text, "s").state;
    Outlook o = make_outlook(plan, state, Policy{}, 1100, 0xff, FileTable([](const std::string&) { return true; }));
    SCOPED_TRACE(root_killed ? "root killed" : "root retried");
    for (int k = 0; k + 1 < n; ++k) EXPECT_EQ(o.jobs[k].predicted_start.has_value(), !root_killed) << k;
    EXPECT_TRUE(o.never.empty());  // blocked for good is blocked, not a job that waits in vain
  }
}

// A random plan (deps of every kind, producers, reservations, est_hours of zero) and a random
// live state (every status, retries due or not, kills in their grace time, held, blocked,
// running jobs overdue or not, an entry of no job of the plan, another user's memory).
struct LiveCase {
  std::string plan_text, state_text;
  Plan plan;
  State state;
  GpuMask free = 0;
  bool running = false;
  std::set<std::string> files;
};

LiveCase random_live_case(Gen& g) {
  LiveCase c;
  size_t n = g.below(25) + 1;
  c.plan_text = "{\"jobs\": [";
  for (size_t k = 0; k < n; ++k) {
    std::string deps, more;
    for (size_t d = 0; d < n && deps.size() < 40; ++d)
      if (d != k && d < k && g.coin(15)) deps += fmt::format("{}\"{}j{}\"", deps.empty() ? "" : ", ", g.coin(30) ? "after:" : "", d);
    if (k > 0 && g.coin(15)) {
      deps += fmt::format("{}\"file:f{}\"", deps.empty() ? "" : ", ", g.below(4));
      if (g.coin(60)) more = fmt::format(R"(, "produced_by": "j{}", "produced_at_frac": {})", g.below(k), g.coin() ? 0.0 : 0.5);
    }
    const double ests[] = {0.0, 0.25, 1.0, 2.0};
    c.plan_text += fmt::format(R"({}{{"id": "j{}", "script": "s", "gpus": {}, "priority": {}, "est_hours": {}, "deps": [{}]{}}})",
                               k ? "," : "", k, g.below(5), g.below(4) * 10, ests[g.below(4)], deps, more);
  }
  c.plan_text += fmt::format(R"(], "reservations": [{{"gpus": [6, 7], "jobs": ["j{}"]}}, {{"gpus": [0, 1], "jobs": ["j{}", "j{}"]}}]}})",
                             g.below(n), g.below(n), g.below(n));
  PlanLoad load = parse_plan(c.plan_text, "p.json", {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(load.plan) << c.plan_text;
  c.plan = std::move(*load.plan);
  const double now = 2000;
  const char* statuses[] = {"pending", "running", "done", "failed", "blocked", "held"};
  GpuMask busy = g.coin(30) ? GpuMask{1} << g.below(8) : 0;  // another user's memory
  c.state_text = "{";
  auto add = [&](const std::string& id, const std::string& body) {
    c.state_text += fmt::format(R"({}"{}": {{{}}})", c.state_text.size() > 1 ? "," : "", id, body);
  };
  for (size_t k = 0; k < n; ++k) {
    if (g.coin(20)) continue;  // no entry: pending
    std::string st = statuses[g.below(6)], body = fmt::format(R"("status": "{}")", st);
    if (st == "running") {
      int gpu = static_cast<int>(g.below(8));
      body += fmt::format(R"(, "pid": 1, "gpus": [{}], "start": {})", gpu, now - 3600.0 * static_cast<double>(g.below(3)));
      busy |= GpuMask{1} << gpu;
      c.running = true;
    }
    if (st == "failed") {
      bool killed = g.coin(20);
      body += fmt::format(R"(, "exit": {}, "attempts": {})", killed ? -15 : 1, g.below(3));
      if (!g.coin(10)) body += fmt::format(R"(, "end": {})", g.coin() ? 1000.0 : 1900.0);
      if (killed && g.coin()) {
        int gpu = static_cast<int>(g.below(8));
        body += fmt::format(R"(, "gpus": [{}], "pid": 7, "kill_sent": 1990)", gpu);
        busy |= GpuMask{1} << gpu;  // still in its grace time: its GPUs are busy
      }
    }
    add(fmt::format("j{}", k), body);
  }
  if (g.coin(20)) {  // an entry of a job the plan no longer has
    add("ghost", R"("status": "running", "pid": 9, "gpus": [3])");
    busy |= GpuMask{1} << 3;
    c.running = true;
  }
  c.state_text += "}";
  c.state = std::move(*parse_state(c.state_text, "s.json").state);
  c.free = 0xff & ~busy;
  for (int f = 0; f < 4; ++f)
    if (g.coin()) c.files.insert(fmt::format("f{}", f));
  return c;
}

// The property the rule book exists for: over random plans and live states, the jobs the
// prediction starts at time 0 (and their GPUs) are exactly the jobs the next tick of run
// starts, and every job status calls "ready: starts at the next tick" is predicted to start now.
TEST(Outlook, PredictionStartsNowExactlyWhatTheNextTickStarts) {
  Gen g(test::test_seed(20261201));
  SCOPED_TRACE(test::seed_note(g.seed));
  const double now = 2000;
  size_t rounds_with_starts = 0, retried = 0, ready_said = 0, paused_said = 0;
  // The last 200 rounds paused (`gpuq pause`): the tick starts nothing, so neither may the prediction.
  for (int round = 0; round < 800; ++round) {
    Policy p;
    p.paused = round >= 600;
    LiveCase c = random_live_case(g);
    SCOPED_TRACE(fmt::format("round {}\n{}\n{}", round, c.plan_text, c.state_text));
    const FileTable files([&](const std::string& f) { return c.files.count(f) > 0; });
    Outlook o = make_outlook(c.plan, c.state, p, now, c.free, files);
    State copy = c.state;
    TickDecision tick = decide_tick(c.plan, copy, p, now, c.free, c.running, files);
    std::vector<std::pair<size_t, std::vector<int>>> ticked, predicted;
    for (const Start& s : tick.pass.starts) ticked.push_back({s.job, s.gpus});
    for (const SimRow& r : o.sim.rows)
      if (r.start == 0 && c.state.status_of(c.plan, r.job) != Status::Running) predicted.push_back({r.job, r.gpus});
    std::sort(ticked.begin(), ticked.end());
    std::sort(predicted.begin(), predicted.end());
    ASSERT_EQ(predicted, ticked);
    for (const JobView& v : o.jobs) {
      if (p.paused && v.why == "paused: ready, starts at the first tick after `gpuq resume`") {
        ++paused_said;
        EXPECT_TRUE(v.after_resume && !v.predicted_start) << c.plan.jobs[v.job].id;
      }
      if (v.why != "ready: starts at the next tick") continue;
      ASSERT_FALSE(p.paused) << c.plan.jobs[v.job].id;
      ++ready_said;
      ASSERT_TRUE(v.predicted_start) << c.plan.jobs[v.job].id;
      EXPECT_EQ(*v.predicted_start, now) << c.plan.jobs[v.job].id;
    }
    // Nothing predicted before now, and no job both "never" and predicted.
    std::set<size_t> rows;
    for (const SimRow& r : o.sim.rows) {
      rows.insert(r.job);
      if (c.state.status_of(c.plan, r.job) != Status::Running) {
        ASSERT_GE(r.start, 0.0);
      }
    }
    for (const Stuck& s : o.sim.stuck) ASSERT_EQ(rows.count(s.job), 0u) << c.plan.jobs[s.job].id;
    rounds_with_starts += !ticked.empty();
    retried += !tick.retried.empty();
  }
  // The rounds test what they are meant to.
  EXPECT_GT(rounds_with_starts, 200u);
  EXPECT_GT(retried, 30u);
  EXPECT_GT(ready_said, 200u);
  EXPECT_GT(paused_said, 60u);
}

}  // namespace
}  // namespace gpuq
