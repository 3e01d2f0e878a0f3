// The engine (engine.h): its rules on a job's life, its tick against the original's own words
// (an oracle written here from gpuq.py, calling nothing of gpuq's rules), and the prediction
// from a live state against the next tick of run.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "gpuq/core/engine.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/queue_state.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"
#include "gpuq/live/state_codec.h"
#include "gpuq/views/reasons.h"
#include "test_util.h"

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

Life life_in(const std::string& entry_json, double now = 0) {
  State s = *parse_state("{\"x\": " + entry_json + "}", "s.json").state;
  return life_of(s.find("x"), s.find("x")->queue_id.has_value(), now);
}

TEST(Life, OutcomesFromTheStateFilesCodes) {
  auto outcome = [](const std::string& e) { return std::get<Ended>(life_in(e)).outcome; };
  EXPECT_EQ(outcome(R"({"status": "failed", "exit": -15})"), Outcome::Killed);
  EXPECT_EQ(outcome(R"({"status": "failed", "exit": -1})"), Outcome::Lost);
  EXPECT_EQ(outcome(R"({"status": "failed", "exit": 3})"), Outcome::Failed);
  EXPECT_EQ(outcome(R"({"status": "done", "exit": 0})"), Outcome::Done);
  EXPECT_EQ(outcome(R"({"status": "failed", "exit": -15, "outcome": "timeout"})"), Outcome::Timeout);
  EXPECT_EQ(outcome(R"({"status": "failed", "exit": 124, "outcome": "hung"})"), Outcome::Hung);
  EXPECT_EQ(outcome(R"({"status": "failed", "exit": 127, "outcome": "unstartable"})"), Outcome::Unstartable);
  EXPECT_EQ(kind_of(life_in(R"({"status": "running", "pid": 4, "start": 5})")), LifeKind::Running);
  // Handed to a batch queue and not started there: queued (a running entry to the file).
  EXPECT_EQ(kind_of(life_in(R"({"status": "running", "pid": 4, "slurm_id": 4})")), LifeKind::Queued);
  EXPECT_EQ(kind_of(life_in(R"({"status": "held", "pid": 4, "slurm_id": 4})")), LifeKind::Held);
  EXPECT_TRUE(std::get<Held>(life_in(R"({"status": "held", "pid": 4, "slurm_id": 4})")).in_queue);
}

TEST(Life, FinishedRetriesAndReservations) {
  const long long max = 2;
  Ended failed = std::get<Ended>(life_in(R"({"status": "failed", "exit": 1, "attempts": 1, "end": 1000})"));
  EXPECT_FALSE(finished(failed, max));  // one retry left
  EXPECT_TRUE(will_retry(failed, max));
  EXPECT_TRUE(leaves_reservation(failed));  // the original's rule, retries left or not
  EXPECT_TRUE(blocks_dependents(failed));
  failed.attempts = 2;
  EXPECT_TRUE(finished(failed, max));
  EXPECT_FALSE(will_retry(failed, max));
  Ended killed = std::get<Ended>(life_in(R"({"status": "failed", "exit": -15, "end": 1000})"));
  EXPECT_TRUE(finished(killed, max));  // kill is final
  EXPECT_FALSE(will_retry(killed, max));
  Ended no_end = std::get<Ended>(life_in(R"({"status": "failed", "exit": 1})"));
  EXPECT_FALSE(will_retry(no_end, max));
  Ended timed_out = std::get<Ended>(life_in(R"({"status": "failed", "exit": 124, "outcome": "timeout", "end": 9})"));
  EXPECT_TRUE(will_retry(timed_out, max));  // retry_on_timeout's exit code: retried
  EXPECT_TRUE(finished(Blocked{}, max));
  EXPECT_TRUE(leaves_reservation(Blocked{}));
  EXPECT_TRUE(blocks_dependents(Blocked{}));
  EXPECT_FALSE(leaves_reservation(Held{}));
  EXPECT_FALSE(blocks_dependents(Held{}));
  EXPECT_FALSE(finished(Waiting{}, max));
  EXPECT_TRUE(is_done(life_in(R"({"status": "done", "exit": 0})")));
}

// Each life written into an entry reads back as itself.
// Attempt numbers only grow: the entry's number (attempt_of) goes on after a retry by hand
// and a requeue, though the original's `attempts` (automatic retries) starts over or stays;
// the number is written only where `attempts` + 1 does not give it.
TEST(Life, AttemptNumbersOnlyGrow) {
  JobState e;  // a job never started: its first attempt is 1
  EXPECT_EQ(attempt_of(e), 1);
  write_life(e, Running{0, 10, {0}, 0, std::nullopt}, Cause::Start);
  EXPECT_EQ(attempt_of(e), 1);
  EXPECT_FALSE(e.attempt);  // the original's number: nothing of gpuq's written
  write_life(e, ended_by_exit(3, 20, 10, 0), Cause::Exit);
  write_life(e, Waiting{1}, Cause::AutoRetry);  // the original's retry: attempts 1, attempt 2
  EXPECT_EQ(attempt_of(e), 2);
  EXPECT_FALSE(e.attempt);
  write_life(e, Running{1, 30, {0}, 0, std::nullopt}, Cause::Start);
  write_life(e, ended_by_exit(3, 40, 30, 1), Cause::Exit);
  EXPECT_EQ(attempt_of(e), 2);
  write_life(e, Waiting{0}, Cause::Retry);  // by hand: attempts start over, the number goes on
  EXPECT_EQ(e.attempts_or0(), 0);
  EXPECT_EQ(attempt_of(e), 3);
  write_life(e, Held{0, false}, Cause::Hold);  // held before it ran: still its next, 3
  EXPECT_EQ(attempt_of(e), 3);
  write_life(e, Waiting{0}, Cause::Retry);
  write_life(e, Running{0, 50, {0}, 0, std::nullopt}, Cause::Start);
  EXPECT_EQ(attempt_of(e), 3);
  EXPECT_EQ(e.attempt, 3);
  write_life(e, Waiting{0}, Cause::Requeued);  // requeued: the next is 4
  EXPECT_EQ(attempt_of(e), 4);
  write_life(e, Running{0, 60, {0}, 0, std::nullopt}, Cause::Start);
  write_life(e, Waiting{0}, Cause::Abort);  // a launch cut short never ran: 4 again
  EXPECT_EQ(attempt_of(e), 4);
  write_life(e, Running{0, 70, {0}, 0, std::nullopt}, Cause::Start);
  write_life(e, ended_lost(80, 70, 0), Cause::LaunchFail);  // a launch that failed is a record of attempt 4
  EXPECT_EQ(attempt_of(e), 4);
  write_life(e, Waiting{1}, Cause::AutoRetry);
  EXPECT_EQ(attempt_of(e), 5);
  EXPECT_EQ(e.attempts_or0(), 1);  // the original's count: one automatic retry since the last by hand
}

TEST(Life, WrittenEntriesReadBack) {
  JobState e;
  std::vector<std::pair<Life, Cause>> steps = {
      {Running{0, 100, {2, 3}, 0, std::nullopt}, Cause::Start},
      {ended_by_exit(3, 200, 100, 0), Cause::Exit},
      {Waiting{1}, Cause::AutoRetry},
      {Running{1, 600, {0}, 0, std::nullopt}, Cause::Start},
      {Running{1, 600, {0}, 0, 650.0}, Cause::Requeue},
      {Waiting{1}, Cause::Requeued},
      {Held{}, Cause::Hold},
      {Waiting{}, Cause::Retry},
      {Blocked{}, Cause::Block},
      {Waiting{}, Cause::Unblock},
  };
  for (const auto& [life, cause] : steps) {
    write_life(e, life, cause);
    if (kind_of(life) == LifeKind::Running) e.pid = 7;
    State s;
    s.set("x", e);
    State back = *parse_state(dump_state(s), "s.json").state;
    Life read = life_of(back.find("x"), false, 0);
    EXPECT_EQ(kind_of(read), kind_of(life)) << static_cast<int>(cause);
    if (const Running* r = std::get_if<Running>(&life)) {
      EXPECT_EQ(std::get<Running>(read).gpus, r->gpus);
      EXPECT_EQ(std::get<Running>(read).start, r->start);
      EXPECT_EQ(std::get<Running>(read).requeue, r->requeue);
      EXPECT_EQ(std::get<Running>(read).attempts, r->attempts);
    }
    if (const Waiting* w = std::get_if<Waiting>(&life)) {
      EXPECT_EQ(std::get<Waiting>(read).attempts, w->attempts);
    }
  }
  // The first attempt is kept in gpuq's list of earlier attempts.
  EXPECT_EQ(earlier_attempts(e).size(), 1u);
}

// --- The engine's rules, one at a time, on inline plans. ---

struct Driven {
  Plan plan;
  Engine engine;
  explicit Driven(const std::string& json, Policy p = Policy{}) : plan(plan_of(json)), engine(plan, p, 1) {}
  size_t id(const std::string& name) const { return static_cast<size_t>(plan.find(name) - plan.jobs.data()); }
  LifeKind kind(const std::string& name) const { return kind_of(engine.life(id(name))); }
  std::vector<std::string> tick(double now, GpuMask unavailable = 0) {
    ev::Tick t;
    t.now = now;
    t.unavailable = unavailable;
    engine.apply(t);
    std::vector<std::string> started;
    for (const Launch& l : engine.effects().launches) started.push_back(plan.jobs[l.job].id);
    return started;
  }
  void exit(const std::string& name, double at, long long code) { engine.apply(ev::Exited{id(name), at, code}); }
};

TEST(Engine, AFailureBlocksItsPlainDependentsAndARetryReleasesThem) {
  Driven r(R"([{"id": "a", "script": "s"}, {"id": "b", "script": "s", "deps": ["a"]},
            {"id": "c", "script": "s", "deps": ["b"]}, {"id": "d", "script": "s", "deps": ["after:b"]},
            {"id": "x", "script": "s"}, {"id": "y", "script": "s", "deps": ["x"]}])");
  EXPECT_EQ(r.tick(0), (std::vector<std::string>{"a", "x"}));
  r.exit("a", 10, 1);  // retries left: blocks b, and c through b
  EXPECT_EQ(r.kind("b"), LifeKind::Blocked);
  EXPECT_EQ(r.kind("c"), LifeKind::Blocked);
  EXPECT_EQ(r.kind("d"), LifeKind::Waiting);
  EXPECT_TRUE(r.engine.ready(r.id("d")));  // a blocked job is finished for after: deps
  r.exit("x", 10, 2);  // y blocked by x
  EXPECT_EQ(r.kind("y"), LifeKind::Blocked);
  // The automatic retry of a (300 s later) releases every blocked job whose deps no longer fail:
  // b and c wait again; y stays blocked (x failed and waits for its own retry).
  EXPECT_EQ(r.tick(309), (std::vector<std::string>{"d"}));
  std::vector<std::string> started = r.tick(310);
  EXPECT_EQ(started, (std::vector<std::string>{"a", "x"}));
  EXPECT_EQ(r.kind("b"), LifeKind::Waiting);
  EXPECT_EQ(r.kind("c"), LifeKind::Waiting);
  EXPECT_EQ(r.kind("y"), LifeKind::Waiting);  // x was retried in the same tick
  EXPECT_EQ(std::get<Running>(r.engine.life(r.id("a"))).attempts, 1);
}

TEST(Engine, ATimeoutIsAFailureAndRetryOnTimeoutRetriesIt) {
  Driven r(R"([{"id": "t", "script": "s", "time_limit_hours": 1, "retry_on_timeout": true},
            {"id": "k", "script": "s", "time_limit_hours": 1},
            {"id": "dt", "script": "s", "deps": ["t"]}, {"id": "dk", "script": "s", "deps": ["k"]}])");
  r.tick(0);
  r.engine.apply(ev::LimitReached{r.id("t"), 3600});
  EXPECT_EQ(r.engine.effects().stops.size(), 1u);
  r.engine.apply(ev::LimitReached{r.id("k"), 3600});
  const Ended& t = std::get<Ended>(r.engine.life(r.id("t")));
  const Ended& k = std::get<Ended>(r.engine.life(r.id("k")));
  EXPECT_EQ(t.outcome, Outcome::Timeout);
  EXPECT_EQ(t.exit, kTimeoutRetryExit);
  EXPECT_EQ(k.exit, kKilledExit);
  EXPECT_EQ(r.kind("dt"), LifeKind::Blocked);  // until t's retry
  EXPECT_EQ(r.kind("dk"), LifeKind::Blocked);
  EXPECT_EQ(r.engine.next_retry(), 3600 + 300.0);
  EXPECT_EQ(r.tick(3900), (std::vector<std::string>{"t"}));
  EXPECT_EQ(r.kind("dt"), LifeKind::Waiting);
  EXPECT_EQ(r.kind("dk"), LifeKind::Blocked);  // k is failed for good
}

// A job's own max_retries wins over the run's --max-retries (2 here), in both directions:
// "none" fails for good at its first failure and blocks its dependent for good; "many" is
// retried 4 times; "plain" gets the run's 2.
TEST(Engine, AJobsOwnMaxRetriesWinsOverTheRuns) {
  Driven r(R"([{"id": "none", "script": "s", "max_retries": 0}, {"id": "many", "script": "s", "max_retries": 4},
            {"id": "plain", "script": "s"}, {"id": "after_none", "script": "s", "deps": ["none"]}])");
  std::map<std::string, int> starts;
  double t = 0;
  for (int round = 0; round < 8; ++round, t += 1000) {
    for (const std::string& id : r.tick(t)) ++starts[id];
    for (const char* id : {"none", "many", "plain"})
      if (r.kind(id) == LifeKind::Running) r.exit(id, t + 1, 1);
  }
  EXPECT_EQ(starts["none"], 1);
  EXPECT_EQ(starts["many"], 5);
  EXPECT_EQ(starts["plain"], 3);
  EXPECT_EQ(starts["after_none"], 0);
  EXPECT_FALSE(r.engine.retry_at(r.id("none")));
  EXPECT_EQ(r.kind("after_none"), LifeKind::Blocked);
  for (const char* id : {"none", "many", "plain"}) EXPECT_FALSE(r.engine.retry_at(r.id(id))) << id;
}

TEST(Engine, ReservationsCloseGpusUntilTheirJobsHaveLeft) {
  Driven r(R"({"jobs": [{"id": "m", "script": "s", "gpus": 2, "deps": ["gate"]}, {"id": "gate", "script": "s", "gpus": 0},
                     {"id": "big", "script": "s", "gpus": 7}],
            "reservations": [{"gpus": [6, 7], "jobs": ["m"]}]})");
  EXPECT_EQ(r.tick(0), (std::vector<std::string>{"gate"}));  // big needs 7 of the 6 open to it
  r.exit("gate", 1, 0);
  EXPECT_EQ(r.tick(1), (std::vector<std::string>{"m"}));
  r.exit("m", 2, 0);
  EXPECT_EQ(r.tick(2), (std::vector<std::string>{"big"}));  // m left: the reservation opens
}

TEST(Engine, PausedStartsNothingButRetriesStillFallDue) {
  Policy p;
  p.paused = true;
  Driven r(R"([{"id": "a", "script": "s"}])", p);
  EXPECT_TRUE(r.tick(0).empty());
  r.engine.policy().paused = false;
  EXPECT_EQ(r.tick(1), (std::vector<std::string>{"a"}));
}

TEST(Engine, ControlCommandsAreRefusedWhereTheOriginalWouldDoHarm) {
  Driven r(R"([{"id": "a", "script": "s"}, {"id": "b", "script": "s"}])");
  r.tick(0);
  r.engine.apply(ev::Retry{r.id("a")});
  EXPECT_EQ(r.engine.effects().refused, Refusal::Running);  // fix 4: no second copy
  r.engine.apply(ev::Hold{r.id("a")});
  EXPECT_EQ(r.engine.effects().refused, Refusal::Running);
  r.exit("b", 5, 0);
  r.engine.apply(ev::Hold{r.id("b")});
  EXPECT_EQ(r.engine.effects().refused, Refusal::Done);
  r.engine.apply(ev::Kill{r.id("b"), 6});
  EXPECT_EQ(r.engine.effects().refused, Refusal::NotRunning);
  r.engine.apply(ev::Kill{r.id("a"), 7});
  EXPECT_FALSE(r.engine.effects().refused);
  EXPECT_EQ(std::get<Ended>(r.engine.life(r.id("a"))).outcome, Outcome::Killed);
  EXPECT_FALSE(r.engine.next_retry());  // a kill is never retried
}

// --- The tick against the original's words. ---

// The state file's entries as the original's dicts see them.
struct RefJob {
  std::string status = "pending";
  long long exit = 0, attempts = 0;
  std::optional<double> end;
  bool unstartable = false;
  std::vector<int> gpus;
};

// gpuq.py's pick_gpus.
std::optional<std::vector<int>> ref_pick(int n, const std::set<int>& free) {
  if (n == 0) return std::vector<int>{};
  if (n == 2)
    for (auto [a, b] : std::vector<std::pair<int, int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}})
      if (free.count(a) && free.count(b)) return std::vector<int>{a, b};
  if (static_cast<int>(free.size()) >= n) return std::vector<int>(free.begin(), std::next(free.begin(), n));
  return std::nullopt;
}

struct RefTick {
  std::vector<std::pair<size_t, std::vector<int>>> starts;
  std::vector<size_t> retried;
  std::vector<std::string> status;  // per job, after the tick
};

// One tick of gpuq.py's run loop, written from its text: retries due (each releases every
// blocked job), then pending jobs with a failed or blocked plain dep blocked (gpuq settles the
// cascade at once, where the original takes a tick per step of a chain listed backwards), the
// ready jobs in (priority, plan position) order, the backfill rule, reservations, the pairs;
// and gpuq's fix 12 (a pass that starts nothing while nothing runs, its waiting head unable to
// fit even on every GPU open to it, runs again without the limit). `free` are the GPUs the
// probe leaves; the running entries' GPUs are taken out here, as the original does.
RefTick reference_tick(const Plan& plan, std::vector<RefJob> st, const Policy& opt, double now, GpuMask free_mask,
                       const std::set<std::string>& files) {
  RefTick out;
  const size_t n = plan.jobs.size();
  auto retryable = [&](const RefJob& s) {
    return s.status == "failed" && s.exit != -15 && !s.unstartable && s.attempts < opt.max_retries &&
           now - s.end.value_or(now) >= opt.retry_after;
  };
  for (size_t i = 0; i < n; ++i)
    if (retryable(st[i])) {
      long long a = st[i].attempts + 1;
      st[i] = RefJob{};
      st[i].attempts = a;
      for (RefJob& o : st)
        if (o.status == "blocked") o.status = "pending";
      out.retried.push_back(i);
    }
  std::set<int> free;
  for (int g : opt.node_gpus)
    if (free_mask >> g & 1) free.insert(g);
  for (const RefJob& s : st)
    if (s.status == "running")
      for (int g : s.gpus) free.erase(g);
  auto failed_or_blocked = [&](size_t d) { return st[d].status == "failed" || st[d].status == "blocked"; };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (st[i].status != "pending") continue;
      for (const Dep& d : plan.jobs[i].deps)
        if (d.kind == Dep::Kind::Done && failed_or_blocked(d.job)) {
          st[i] = RefJob{};
          st[i].status = "blocked";
          changed = true;
          break;
        }
    }
  }
  auto finished = [&](const RefJob& s) {
    return s.status == "done" || s.status == "blocked" ||
           (s.status == "failed" && (s.exit == -15 || s.unstartable || s.attempts >= opt.max_retries));
  };
  auto deps_met = [&](size_t i) {
    for (const Dep& d : plan.jobs[i].deps) {
      if (d.kind == Dep::Kind::File && !files.count(d.target)) return false;
      if (d.kind == Dep::Kind::After && !finished(st[d.job])) return false;
      if (d.kind == Dep::Kind::Done && st[d.job].status != "done") return false;
    }
    return true;
  };
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (st[i].status == "pending" && deps_met(i)) ready.push_back(i);
  std::stable_sort(ready.begin(), ready.end(),
                   [&](size_t a, size_t b) { return plan.jobs[a].priority < plan.jobs[b].priority; });
  auto in_a_reservation = [&](size_t i) {
    for (const Reservation& r : plan.reservations)
      if (std::count(r.jobs.begin(), r.jobs.end(), i)) return true;
    return false;
  };
  auto reserved = [&](size_t i) {
    std::set<int> closed;
    for (const Reservation& r : plan.reservations) {
      bool open = false;
      for (size_t m : r.jobs) open = open || !(st[m].status == "done" || st[m].status == "failed" || st[m].status == "blocked");
      if (open && !std::count(r.jobs.begin(), r.jobs.end(), i)) closed.insert(r.gpu_list.begin(), r.gpu_list.end());
    }
    return closed;
  };
  bool any_running = std::any_of(st.begin(), st.end(), [](const RefJob& s) { return s.status == "running"; });
  auto pass = [&](bool limit, std::optional<size_t>& head) {
    std::vector<std::pair<size_t, std::vector<int>>> starts;
    std::set<int> left = free;
    head.reset();
    for (size_t i : ready) {
      const Job& j = plan.jobs[i];
      if (limit && head && j.est_hours > opt.backfill_max_hours) continue;
      std::set<int> open = left;
      for (int g : reserved(i)) open.erase(g);
      auto gpus = ref_pick(j.gpus, open);
      if (!gpus) {
        if (j.gpus > 0 && !in_a_reservation(i) && !head) head = i;
        continue;
      }
      for (int g : *gpus) left.erase(g);
      starts.push_back({i, *gpus});
    }
    return starts;
  };
  std::optional<size_t> head;
  out.starts = pass(true, head);
  if (out.starts.empty() && !any_running && head) {
    std::set<int> usable(opt.node_gpus.begin(), opt.node_gpus.end());
    for (int g : reserved(*head)) usable.erase(g);
    std::optional<size_t> again;
    if (!ref_pick(plan.jobs[*head].gpus, usable)) out.starts = pass(false, again);
  }
  for (auto& [i, gpus] : out.starts) st[i].status = "running";
  for (const RefJob& s : st) out.status.push_back(s.status);
  return out;
}

// Over random plans (deps of every kind, a reservation) and states (every status, retries due
// or not, blocked jobs to be released, held jobs, missing entries), the engine's tick through
// the state file (QueueState) decides as the original's words above: the same starts on the
// same GPUs, the same retries, every job left in the same status.
TEST(EngineTick, DecidesAsTheOriginalsWords) {
  Gen g(test::test_seed(23));
  SCOPED_TRACE(test::seed_note(g.seed));
  size_t released = 0, rounds_with_starts = 0, retried = 0, rounds = 0;
  const char* statuses[] = {"pending", "running", "done", "failed", "blocked", "held"};
  for (int round = 0; round < 600; ++round) {
    size_t n = g.below(30) + 1;
    std::string plan_text = "{\"jobs\": [";
    for (size_t k = 0; k < n; ++k) {
      std::string deps;
      for (size_t d = 0; d < n && deps.size() < 40; ++d)
        if (d != k && g.coin(d < k ? 15 : 3))
          deps += fmt::format("{}\"{}j{}\"", deps.empty() ? "" : ", ", g.coin(30) ? "after:" : "", d);
      if (g.coin(10)) deps += fmt::format("{}\"file:f{}\"", deps.empty() ? "" : ", ", g.below(3));
      plan_text += fmt::format(R"({}{{"id": "j{}", "script": "s", "gpus": {}, "priority": {}, "est_hours": {}, "deps": [{}]}})",
                               k ? "," : "", k, g.below(5), g.below(4) * 10, g.coin() ? 0.25 : 2.0, deps);
    }
    plan_text += fmt::format(R"(], "reservations": [{{"gpus": [6, 7], "jobs": ["j{}"]}}]}})", g.below(n));
    PlanLoad load = parse_plan(plan_text, "p.json", {0, 1, 2, 3, 4, 5, 6, 7});
    if (!load.plan) continue;  // a cycle among the backward deps
    ++rounds;
    const Plan& plan = *load.plan;
    std::string state_text = "{";
    std::vector<RefJob> ref(n);
    for (size_t k = 0; k < n; ++k) {
      if (g.coin(20)) continue;  // no entry: pending
      RefJob& r = ref[k];
      r.status = statuses[g.below(6)];
      std::string more;
      if (r.status == "running") {
        r.gpus = {static_cast<int>(g.below(8))};
        more = fmt::format(R"(, "pid": 1, "gpus": [{}], "start": 1500)", r.gpus[0]);
      }
      if (r.status == "failed") {
        r.exit = g.coin(20) ? -15 : 1;
        r.attempts = static_cast<long long>(g.below(3));
        r.end = g.coin() ? 1000.0 : 1900.0;
        r.unstartable = g.coin(5);
        more = fmt::format(R"(, "exit": {}, "attempts": {}, "end": {}{})", r.exit, r.attempts, *r.end,
                           r.unstartable ? R"(, "outcome": "unstartable")" : "");
      }
      state_text += fmt::format(R"({}"j{}": {{"status": "{}"{}}})", state_text.size() > 1 ? "," : "", k, r.status, more);
    }
    state_text += "}";
    SCOPED_TRACE(plan_text + "\n" + state_text);
    Policy opt;
    GpuMask free = g.below(256);
    std::set<std::string> files{"f1"};
    RefTick want = reference_tick(plan, ref, opt, 2000.0, free, files);
    QueueState q(plan, opt, *parse_state(state_text, "s.json").state, 2000.0, "run");
    ev::Tick t;
    t.now = 2000.0;
    t.unavailable = mask_of(opt.node_gpus) & ~free;
    const FileTable on_disk([&](const std::string& p) { return files.count(p) > 0; });
    t.files = &on_disk;
    const Effects& fx = q.apply(t, 2000.0);
    std::vector<std::pair<size_t, std::vector<int>>> got;
    for (const Launch& l : fx.launches) got.push_back({l.job, std::get<Running>(q.engine().life(l.job)).gpus});
    std::vector<size_t> got_retried = fx.retried;
    ASSERT_EQ(got, want.starts);
    ASSERT_EQ(got_retried, want.retried);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(status_name(q.state().status_of(plan, i)), want.status[i]) << plan.jobs[i].id;
    for (auto& [i, gpus] : want.starts) released += ref[i].status == "blocked";
    rounds_with_starts += !want.starts.empty();
    retried += !want.retried.empty();
  }
  // The rounds test what they are meant to.
  EXPECT_GT(rounds, 200u);
  EXPECT_GT(released, 10u);
  EXPECT_GT(rounds_with_starts, rounds / 4);
  EXPECT_GT(retried, 30u);
}

// The engine's incremental counts (unmet and failing deps, waiting, running, the blocked list
// and how many of it a retry would release, which lets a retry skip the walk) agree with a count
// from the lives after every event of random runs: failures, timeouts, retries by hand and
// automatic, holds, kills, requeues.
TEST(Engine, ItsCountsAgreeWithTheLivesAfterEveryEvent) {
  Gen g(test::test_seed(31));
  SCOPED_TRACE(test::seed_note(g.seed));
  size_t blocked_seen = 0, released = 0, events = 0;
  for (int round = 0; round < 150; ++round) {
    size_t n = g.below(25) + 2;
    std::string text = "[";
    for (size_t k = 0; k < n; ++k) {
      std::string deps;
      for (size_t d = 0; d < k && deps.size() < 40; ++d)
        if (g.coin(20)) deps += fmt::format("{}\"{}j{}\"", deps.empty() ? "" : ", ", g.coin(25) ? "after:" : "", d);
      text += fmt::format(R"({}{{"id": "j{}", "script": "s", "gpus": {}, "est_hours": 1{}, "deps": [{}]}})", k ? "," : "",
                          k, g.below(3), g.coin(20) ? R"(, "max_retries": 0)" : "", deps);
    }
    Plan plan = plan_of(text + "]");
    Policy p;
    p.retry_after = 5;
    Engine e(plan, p, 1);
    ASSERT_EQ(e.recount(), "");
    double t = 0;
    for (int step = 0; step < 80; ++step) {
      t += 1 + static_cast<double>(g.below(4));
      size_t j = g.below(n);
      LifeKind k = kind_of(e.life(j));
      int what = static_cast<int>(g.below(10));
      std::string did;
      if (what < 3) {
        e.apply(ev::Tick{.now = t});
        did = "tick";
      } else if (k == LifeKind::Running && what < 6) {
        e.apply(ev::Exited{j, t, g.coin(40) ? 1 : 0});
        did = "exit";
      } else if (k == LifeKind::Running && what == 6) {
        e.apply(ev::LimitReached{j, t});
        did = "limit";
      } else if (what == 7) {
        e.apply(ev::Retry{j});
        did = "retry";
      } else if (what == 8) {
        if (g.coin()) e.apply(ev::Hold{j}); else e.apply(ev::Kill{j, t});
        did = "hold/kill";
      } else {
        e.apply(ev::Requeue{j, t});
        did = "requeue";
      }
      ++events;
      for (const Change& c : e.effects().changes) released += c.cause == Cause::Unblock;
      for (size_t i = 0; i < n; ++i) blocked_seen += kind_of(e.life(i)) == LifeKind::Blocked;
      ASSERT_EQ(e.recount(), "") << "after " << did << " of " << plan.jobs[j].id << " at " << t << " in\n" << text;
    }
  }
  // The runs reach what they are meant to.
  EXPECT_GT(blocked_seen, 500u);
  EXPECT_GT(released, 50u);
  std::printf("%zu events, %zu blocked job-steps, %zu released\n", events, blocked_seen, released);
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
  QueueState q(plan, p, state, now, "run");
  ev::Tick t;
  t.now = now;
  t.files = &files;
  const Effects& fx = q.apply(t, now);
  ASSERT_EQ(fx.launches.size(), 1u);
  EXPECT_EQ(plan.jobs[fx.launches[0].job].id, "other");
  EXPECT_EQ(why_text(plan, state, o, o.jobs[1]), "ready: starts at the next tick");
  ASSERT_TRUE(o.jobs[1].predicted_start);
  EXPECT_EQ(*o.jobs[1].predicted_start, now);
  // The member is retried when its time comes, and waits for the GPUs the other job holds.
  ASSERT_TRUE(o.jobs[0].predicted_start);
  EXPECT_EQ(*o.jobs[0].predicted_start, now + 2 * 3600);
}

// GPUs held by a job gpuq stopped, while its processes end (kill_sent, in --kill-grace): run
// frees them as soon as the group is gone (it wakes for that), so the next job is predicted to
// start then, not at run's next --poll as for a GPU someone else's memory holds.
TEST(Outlook, GpusOfAnEndingJobAreFreeAsSoonAsItsProcessesAreGone) {
  Plan plan = plan_of(R"([{"id": "a", "script": "s", "est_hours": 1}, {"id": "b", "script": "s", "est_hours": 1}])",
                      {0});
  Policy p;
  p.node_gpus = {0};
  const double now = 1000.5;
  const FileTable files([](const std::string&) { return true; });
  State ending = *parse_state(R"({"a": {"status": "failed", "exit": -15, "start": 900, "end": 1000,
                                        "gpus": [0], "pid": 4242, "kill_sent": 1000}})", "s").state;
  Outlook o = make_outlook(plan, ending, p, now, 0, files);
  ASSERT_TRUE(o.jobs[1].predicted_start);
  EXPECT_NEAR(*o.jobs[1].predicted_start, now, 0.01);
  EXPECT_NEAR(*o.jobs[1].predicted_finish, now + 3600, 0.01);
  // Its processes gone (kill_sent cleared), the GPU busy all the same: someone else's, until run looks again.
  State foreign = *parse_state(R"({"a": {"status": "failed", "exit": -15, "start": 900, "end": 1000, "gpus": [0]}})",
                               "s").state;
  Outlook f = make_outlook(plan, foreign, p, now, 0, files);
  ASSERT_TRUE(f.jobs[1].predicted_start);
  EXPECT_NEAR(*f.jobs[1].predicted_start, now + p.poll, 0.01);
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
  EXPECT_EQ(why_text(plan, state, o, o.jobs[1]), "blocked: its dep a failed; the next automatic retry releases it");
  EXPECT_FALSE(o.jobs[3].predicted_start);
  EXPECT_EQ(why_text(plan, state, o, o.jobs[3]), "blocked: its dep c failed; `gpuq retry c` runs the dep again");
}

// A file system's answers (FileChecks::nested): a path exists when it is one of `files` or a
// folder of one. It counts what it is asked.
struct Tree : FileChecks {
  std::set<std::string> files;
  bool is_nested = true;
  mutable std::map<std::string, int> asked;
  std::string expand(const std::string& written) const override { return written; }
  bool exists(const std::string& path) const override {
    ++asked[path];
    for (const std::string& f : files)
      if (f == path || f.rfind(path + "/", 0) == 0) return true;
    return false;
  }
  bool nested() const override { return is_nested; }
};

// status looks at each file: dep once, and on a file system, when the folder they all lie in is
// missing (outputs not made yet), at the folder instead of each of them; the reasons and the
// prediction are those of a look at every path.
TEST(Outlook, AMissingFolderAnswersForThePathsUnderItAndTheOutlookIsTheSame) {
  const int n = 40;
  std::string text = "[";
  for (int k = 0; k < n; ++k)
    text += fmt::format(R"({{"id": "e{0}", "script": "s", "deps": ["file:out/run{0}/mid/READY"]}}, )"
                        R"({{"id": "f{0}", "script": "s", "deps": ["file:out/run{0}/final/READY"]}}, )", k);
  text += R"({"id": "last", "script": "s"}])";
  Plan plan = plan_of(text);
  auto outlook_with = [&](const Tree& t) {
    Outlook o = make_outlook(plan, State{}, Policy{}, 1000, 0xff, t);
    std::vector<std::string> rows;
    for (const JobView& v : o.jobs)
      rows.push_back(fmt::format("{} {} {}", plan.jobs[v.job].id, v.predicted_start.value_or(-1),
                                 why_text(plan, State{}, o, v)));
    return rows;
  };
  for (std::set<std::string> files : {std::set<std::string>{}, std::set<std::string>{"out/other"},
                                      std::set<std::string>{"out/run3/mid/READY", "out/run7/final/READY", "out/run8/x"}}) {
    SCOPED_TRACE(fmt::format("files: {}", fmt::join(files, ", ")));
    Tree plain, nested;
    plain.is_nested = false;
    plain.files = nested.files = files;
    std::vector<std::string> want = outlook_with(plain), got = outlook_with(nested);
    EXPECT_EQ(got, want);
    for (const auto& [path, times] : plain.asked) EXPECT_EQ(times, 1) << path;  // each path once
    EXPECT_EQ(plain.asked.size(), size_t{2 * n});
    for (const auto& [path, times] : nested.asked) EXPECT_EQ(times, 1) << path;
    if (files.empty()) {
      // Two paths, then "out" (missing): the 78 others are not looked at.
      EXPECT_LE(nested.asked.size(), 3u);
      EXPECT_EQ(nested.asked.count("out"), 1u);
    } else {
      EXPECT_LE(nested.asked.size(), size_t{2 * n + n + 2});  // at most one look more per folder
    }
  }
  // Not a file system (a table of paths): every path is asked, however its folders answer.
  Tree table;
  table.is_nested = false;
  table.files = {"out/run5/mid/READY"};
  std::vector<std::string> rows = outlook_with(table);
  EXPECT_EQ(table.asked.size(), size_t{2 * n});
  EXPECT_THAT(rows[10], ::testing::HasSubstr("e5 1000 "));  // e5's file is there: it starts now
}

// A job wider than the user's cap on a shared node never starts: status says so, also when the
// node does not list the job (its run has ended, so its wants are gone).
TEST(Outlook, AJobWiderThanTheNodeCapSaysNeverWhateverIsFree) {
  Plan plan = plan_of(R"([{"id": "wide", "script": "s", "gpus": 4}, {"id": "one", "script": "s", "gpus": 1}])");
  Policy p;
  p.max_gpus = 2;
  for (GpuMask free : {GpuMask{0}, GpuMask{0xff}}) {
    Outlook o = make_outlook(plan, State{}, p, 1000, free, FileTable([](const std::string&) { return true; }));
    EXPECT_EQ(why_text(plan, State{}, o, o.jobs[0]),
              "never: needs 4 GPUs, more than the 2 you may hold at once on this node (the node config's max_gpus)");
    EXPECT_FALSE(o.jobs[0].predicted_start);
    EXPECT_THAT(why_text(plan, State{}, o, o.jobs[1]), ::testing::Not(::testing::HasSubstr("never")));
  }
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
    QueueState q(c.plan, p, c.state, now, "run");
    ev::Tick t;
    t.now = now;
    t.unavailable = mask_of(p.node_gpus) & ~c.free;
    t.others_running = q.others_running();
    t.files = &files;
    const Effects& fx = q.apply(t, now);
    std::vector<std::pair<size_t, std::vector<int>>> ticked, predicted;
    for (const Launch& l : fx.launches) ticked.push_back({l.job, std::get<Running>(q.engine().life(l.job)).gpus});
    for (const SimRow& r : o.sim.rows)
      if (r.start == 0 && c.state.status_of(c.plan, r.job) != Status::Running) predicted.push_back({r.job, r.gpus});
    std::sort(ticked.begin(), ticked.end());
    std::sort(predicted.begin(), predicted.end());
    ASSERT_EQ(predicted, ticked);
    for (const JobView& v : o.jobs) {
      std::string why = why_text(c.plan, c.state, o, v);
      if (p.paused && why == "paused: ready, starts at the first tick after `gpuq resume`") {
        ++paused_said;
        EXPECT_TRUE(v.after_resume && !v.predicted_start) << c.plan.jobs[v.job].id;
      }
      if (why != "ready: starts at the next tick") continue;
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
    retried += !fx.retried.empty();
  }
  // The rounds test what they are meant to.
  EXPECT_GT(rounds_with_starts, 200u);
  EXPECT_GT(retried, 30u);
  EXPECT_GT(ready_said, 200u);
  EXPECT_GT(paused_said, 60u);
}

}  // namespace
}  // namespace gpuq
