// Preemption on the engine (engine.h) and in the prediction (simulate.h), with inline plans and
// no process: who gives way to whom, the fewest victims that let the urgent job start, the least
// work lost, no thrashing, an exit 0 on the signal, a checkpoint exit, and the prediction's
// resume with what is left of the estimate. The real runs are in preempt_run_test.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "gpuq/core/engine.h"
#include "gpuq/core/simulate.h"
#include "test_util.h"
#include "tick_loop.h"

namespace gpuq {
namespace {

using test::plan_of;

// An engine on `gpus` GPUs, in seconds, preemption allowed at once.
struct Eng {
  Plan plan;
  Policy p;
  std::optional<Engine> e;
  Eng(const std::string& jobs, int gpus, double min_minutes = 0) : plan(plan_of(jobs)) {
    p.node_gpus.clear();
    for (int g = 0; g < gpus; ++g) p.node_gpus.push_back(g);
    p.preempt_min_minutes = min_minutes;
    e.emplace(plan, p, 1);
  }
  size_t at(const std::string& id) const { return static_cast<size_t>(plan.find(id) - plan.jobs.data()); }
  LifeKind kind(const std::string& id) const { return kind_of(e->life(at(id))); }
  const Effects& tick(double now, std::span<const double> checkpoints = {}) {
    ev::Tick t;
    t.now = now;
    t.checkpoints = checkpoints;
    e->apply(t);
    return e->effects();
  }
  std::vector<int> gpus_of(const std::string& id) const { return std::get<Running>(e->life(at(id))).gpus; }
};

std::vector<std::string> ids_of(const Plan& plan, const std::vector<Preemption>& ps) {
  std::vector<std::string> out;
  for (const Preemption& p : ps) out.push_back(plan.jobs[p.job].id);
  std::sort(out.begin(), out.end());
  return out;
}

// The urgent job takes the preemptible job's GPUs: the victim is stopped (not failed, no retry
// spent), its GPUs are held for the urgent job until it is gone, which then starts on them; the
// victim waits and starts again when GPUs free.
TEST(Preempt, AnUrgentJobTakesAPreemptibleJobsGpusAndTheVictimWaitsToResume) {
  Eng g(R"([{"id": "long", "script": "l.sh", "gpus": 4, "preemptible": true, "priority": 50},
            {"id": "urgent", "script": "u.sh", "gpus": 2, "priority": 1, "deps": ["gate"]},
            {"id": "gate", "script": "g.sh", "gpus": 0, "priority": 60}])",
        4);
  g.tick(0);
  ASSERT_EQ(g.kind("long"), LifeKind::Running);
  g.e->apply(ev::Exited{g.at("gate"), 10, 0});  // urgent is ready now
  const Effects& fx = g.tick(10);
  ASSERT_EQ(ids_of(g.plan, fx.preempted), std::vector<std::string>{"long"});
  ASSERT_EQ(fx.stops.size(), 1u);
  EXPECT_EQ(fx.stops[0].cause, Cause::Preempt);
  EXPECT_EQ(fx.preempted[0].by, g.at("urgent"));
  EXPECT_TRUE(fx.launches.empty()) << "it starts once the victim's GPUs are free";
  EXPECT_EQ(g.e->preempting_for(), g.at("urgent"));
  EXPECT_TRUE(g.tick(11).launches.empty());  // the victim still stops
  g.e->apply(ev::Exited{g.at("long"), 12, 143});
  EXPECT_EQ(g.kind("long"), LifeKind::Waiting) << "preempted: waiting again, not failed";
  EXPECT_EQ(std::get<Waiting>(g.e->life(g.at("long"))).attempts, 0) << "no retry spent";
  const Effects& after = g.tick(12);
  ASSERT_EQ(after.launches.size(), 1u);
  EXPECT_EQ(after.launches[0].job, g.at("urgent"));
  EXPECT_EQ(g.gpus_of("urgent").size(), 2u);
  EXPECT_EQ(g.kind("long"), LifeKind::Waiting) << "4 GPUs are not free while urgent runs";
  g.e->apply(ev::Exited{g.at("urgent"), 20, 0});
  ASSERT_EQ(g.tick(20).launches.size(), 1u);
  EXPECT_EQ(g.kind("long"), LifeKind::Running) << "it resumes when GPUs allow";
}

// After the signal an exit 0 is done (it finished meanwhile): it does not run again.
TEST(Preempt, AnExitZeroOnTheSignalIsDone) {
  Eng g(R"([{"id": "long", "script": "l.sh", "gpus": 2, "preemptible": true}])", 2);
  g.tick(0);
  g.e->apply(ev::Preempt{0, 5, std::nullopt});
  EXPECT_EQ(g.e->effects().stops.size(), 1u);
  g.e->apply(ev::Exited{0, 6, 0});
  EXPECT_TRUE(is_done(g.e->life(0)));
}

// Only preemptible jobs of a larger priority value give way, and only once they have run
// preempt_min_minutes since their start; a job preempted and resumed is safe for as long again.
TEST(Preempt, OnlyLessUrgentPreemptibleJobsThatRanTheirLeastGiveWay) {
  const std::string jobs = R"([{"id": "a", "script": "a.sh", "gpus": 2, "preemptible": true, "priority": 50},
            {"id": "b", "script": "b.sh", "gpus": 2, "priority": 50},
            {"id": "c", "script": "c.sh", "gpus": 2, "preemptible": true, "priority": 5},
            {"id": "urgent", "script": "u.sh", "gpus": 2, "priority": 10, "deps": ["gate"]},
            {"id": "gate", "script": "g.sh", "gpus": 0, "priority": 60}])";
  Eng g(jobs, 6, 1);  // 1 minute at least
  g.tick(0);
  g.e->apply(ev::Exited{g.at("gate"), 10, 0});
  EXPECT_TRUE(g.tick(10).preempted.empty()) << "a ran 10 s, less than its least";
  const Effects& fx = g.tick(61);
  EXPECT_EQ(ids_of(g.plan, fx.preempted), std::vector<std::string>{"a"})
      << "b is not preemptible, c is more urgent than urgent";
  g.e->apply(ev::Exited{g.at("a"), 62, 143});
  g.tick(62);
  EXPECT_EQ(g.kind("urgent"), LifeKind::Running);
  g.e->apply(ev::Exited{g.at("urgent"), 63, 0});
  g.tick(63);  // a resumes at 63 (urgent is done)
  ASSERT_EQ(g.kind("a"), LifeKind::Running);
}

// The fewest victims that let the job start, then those that lose the least work (the least time
// since their last checkpoint), then the latest started; a set that does not let it start is
// never stopped.
TEST(Preempt, TheFewestVictimsThenTheLeastWorkLostAndNoneInVain) {
  const std::string jobs = R"([{"id": "x", "script": "x.sh", "gpus": 2, "preemptible": true, "priority": 50},
            {"id": "y", "script": "y.sh", "gpus": 2, "preemptible": true, "priority": 50},
            {"id": "w", "script": "w.sh", "gpus": 4, "preemptible": true, "priority": 50},
            {"id": "two", "script": "t.sh", "gpus": 2, "priority": 1, "deps": ["gate"]},
            {"id": "four", "script": "f.sh", "gpus": 4, "priority": 2, "deps": ["gate2"]},
            {"id": "gate", "script": "g.sh", "gpus": 0, "priority": 60},
            {"id": "gate2", "script": "g.sh", "gpus": 0, "priority": 60}])";
  Eng g(jobs, 8);
  g.tick(0);
  ASSERT_EQ(g.kind("x"), LifeKind::Running);
  ASSERT_EQ(g.kind("w"), LifeKind::Running);
  // x checkpointed at 95, y at 40: x loses the least (5 s against 60).
  std::vector<double> cp(g.plan.jobs.size(), std::nan(""));
  cp[g.at("x")] = 95;
  cp[g.at("y")] = 40;
  g.e->apply(ev::Exited{g.at("gate"), 100, 0});
  const Effects& fx = g.tick(100, cp);
  EXPECT_EQ(ids_of(g.plan, fx.preempted), std::vector<std::string>{"x"}) << "one 2-GPU job is enough, the least lost";
  EXPECT_DOUBLE_EQ(fx.preempted[0].unsaved, 5);
  g.e->apply(ev::Exited{g.at("x"), 101, 143});
  g.tick(101, cp);
  EXPECT_EQ(g.kind("two"), LifeKind::Running);
  // four needs 4 GPUs: w alone (one victim) rather than y and two (two, and two is not preemptible).
  g.e->apply(ev::Exited{g.at("gate2"), 102, 0});
  EXPECT_EQ(ids_of(g.plan, g.tick(102, cp).preempted), std::vector<std::string>{"w"});
  // A job wider than what preemptible jobs could free is never a reason to stop one.
  Eng h(R"([{"id": "p", "script": "p.sh", "gpus": 2, "preemptible": true, "priority": 50},
            {"id": "q", "script": "q.sh", "gpus": 2, "priority": 50},
            {"id": "wide", "script": "w.sh", "gpus": 4, "priority": 1, "deps": ["gate"]},
            {"id": "gate", "script": "g.sh", "gpus": 0, "priority": 60}])",
        4);
  h.tick(0);
  h.e->apply(ev::Exited{h.at("gate"), 10, 0});
  EXPECT_TRUE(h.tick(10).preempted.empty()) << "q holds 2 GPUs and is not preemptible";
  EXPECT_EQ(h.kind("p"), LifeKind::Running);
}

// A preemptible job's own exit 85 ("checkpointed, run me again") waits again without a retry
// spent; a job that is not preemptible failed with it.
TEST(Preempt, AnExit85OfAPreemptibleJobIsACheckpointNotAFailure) {
  Eng g(R"([{"id": "p", "script": "p.sh", "gpus": 1, "preemptible": true},
            {"id": "n", "script": "n.sh", "gpus": 1}])",
        2);
  g.tick(0);
  g.e->apply(ev::Exited{0, 5, kCheckpointExit});
  EXPECT_EQ(g.kind("p"), LifeKind::Waiting);
  EXPECT_EQ(g.e->effects().changes.back().cause, Cause::Checkpointed);
  g.e->apply(ev::Exited{1, 5, kCheckpointExit});
  EXPECT_EQ(g.kind("n"), LifeKind::Ended);
  // By hand: a job that is not preemptible is refused.
  g.tick(6);
  g.e->apply(ev::Preempt{g.at("p"), 7, std::nullopt});
  EXPECT_FALSE(g.e->effects().refused);
  Eng h(R"([{"id": "n", "script": "n.sh", "gpus": 1}])", 1);
  h.tick(0);
  h.e->apply(ev::Preempt{0, 1, std::nullopt});
  EXPECT_EQ(h.e->effects().refused, Refusal::NotPreemptible);
}

// The prediction plays a preemption forward: the urgent job starts when it is ready, on the
// victim's GPUs, and the victim resumes after it with what was left of its estimate.
TEST(Preempt, TheSimulationPredictsThePreemptionAndTheResume) {
  Plan plan = plan_of(R"([{"id": "long", "script": "l.sh", "gpus": 4, "preemptible": true, "est_hours": 2},
            {"id": "gate", "script": "g.sh", "gpus": 0, "est_hours": 1, "priority": 60},
            {"id": "urgent", "script": "u.sh", "gpus": 2, "priority": 1, "est_hours": 0.5, "deps": ["gate"]}])");
  SimOptions opt;
  opt.node_gpus = {0, 1, 2, 3};
  opt.preempt_min_minutes = 0;
  Simulation sim = simulate(plan, opt);
  std::map<std::string, std::vector<std::pair<double, double>>> rows;
  for (const SimRow& r : sim.rows) rows[plan.jobs[r.job].id].push_back({r.start, r.end});
  ASSERT_EQ(rows["long"].size(), 2u);
  EXPECT_NEAR(rows["long"][0].first, 0, 1e-9);
  EXPECT_NEAR(rows["long"][0].second, 1, 1e-9) << "preempted when urgent is ready";
  EXPECT_NEAR(rows["urgent"][0].first, 1, 1e-9);
  EXPECT_NEAR(rows["urgent"][0].second, 1.5, 1e-9);
  EXPECT_NEAR(rows["long"][1].first, 1.5, 1e-9);
  EXPECT_NEAR(rows["long"][1].second, 2.5, 1e-9) << "the hour of work left";
  // Without preemptible, the urgent job waits for the long one.
  Plan calm = plan_of(R"([{"id": "long", "script": "l.sh", "gpus": 4, "est_hours": 2},
            {"id": "gate", "script": "g.sh", "gpus": 0, "est_hours": 1, "priority": 60},
            {"id": "urgent", "script": "u.sh", "gpus": 2, "priority": 1, "est_hours": 0.5, "deps": ["gate"]}])");
  Simulation waits = simulate(calm, opt);
  for (const SimRow& r : waits.rows) {
    if (calm.jobs[r.job].id == "urgent") EXPECT_NEAR(r.start, 2, 1e-9);
  }
  // With a least run of 90 minutes, the preemption comes at 1.5h.
  opt.preempt_min_minutes = 90;
  Simulation later = simulate(plan, opt);
  for (const SimRow& r : later.rows) {
    if (plan.jobs[r.job].id == "urgent") EXPECT_NEAR(r.start, 1.5, 1e-9);
  }
}

// A random plan of long preemptible work of larger priority values, and urgent jobs that become
// ready later (after a 0-GPU gate of their own, or another job). Estimates in quarter hours.
std::string random_preempt_plan(std::mt19937_64& rng) {
  auto below = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  int n = 3 + below(8);
  std::string jobs = "[";
  for (int k = 0; k < n; ++k) {
    bool preemptible = below(2);
    std::string deps = k > 0 && below(3) == 0 ? fmt::format(", \"deps\": [\"j{}\"]", below(k))
                       : !preemptible         ? fmt::format(", \"deps\": [\"g{}\"]", k)
                                              : "";
    jobs += fmt::format(R"({}{{"id": "j{}", "script": "s.sh", "gpus": {}, "priority": {}, "est_hours": {}{}{}}})",
                        k ? ", " : "", k, 1 + below(4), preemptible ? 30 + 10 * below(4) : 10 * below(3),
                        0.25 * (1 + below(8)), preemptible ? ", \"preemptible\": true" : "", deps);
    if (!preemptible)
      jobs += fmt::format(R"(, {{"id": "g{}", "script": "g.sh", "gpus": 0, "est_hours": {}}})", k, 0.25 * below(5));
  }
  jobs += "]";
  return jobs;
}

// Random plans of preemptible and ordinary jobs, predicted: no GPU is held by two jobs at once,
// every preemption lets its job start at that instant, no job is preempted again within its
// least run, and every job ends done with its whole estimate run (its attempts add up to it).
TEST(Preempt, RandomPlansKeepEveryRule) {
  uint64_t seed = test::test_seed(20261205);
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  auto below = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  int preempted_trials = 0;  // the property is not vacuous: preemptions happen
  for (int trial = 0; trial < 200; ++trial) {
    std::string jobs = random_preempt_plan(rng);
    Plan plan = plan_of(jobs);
    SimOptions opt;
    opt.node_gpus = {0, 1, 2, 3};
    opt.preempt_min_minutes = 15 * below(3);
    Simulation sim = simulate(plan, opt);
    SCOPED_TRACE(jobs);
    ASSERT_TRUE(sim.stuck.empty());
    std::map<size_t, double> ran;
    std::map<size_t, std::vector<std::pair<double, double>>> attempts;
    for (const SimRow& r : sim.rows) {
      ran[r.job] += r.end - r.start;
      attempts[r.job].push_back({r.start, r.end});
    }
    for (size_t j = 0; j < plan.jobs.size(); ++j) {
      EXPECT_NEAR(ran[j], plan.jobs[j].est_hours, 1e-6) << plan.jobs[j].id;
      const auto& a = attempts[j];
      for (size_t k = 0; k + 1 < a.size(); ++k)
        EXPECT_GE(a[k].second - a[k].first, opt.preempt_min_minutes / 60 - 1e-9)
            << plan.jobs[j].id << " preempted before its least run";
      if (a.size() > 1) {
        EXPECT_TRUE(opt.preemptible(plan.jobs[j])) << plan.jobs[j].id;
        ++preempted_trials;
      }
    }
    for (size_t a = 0; a < sim.rows.size(); ++a)
      for (size_t b = a + 1; b < sim.rows.size(); ++b) {
        const SimRow &x = sim.rows[a], &y = sim.rows[b];
        bool overlap = x.start < y.end - 1e-9 && y.start < x.end - 1e-9;
        if (!overlap) continue;
        for (int gx : x.gpus) {
          EXPECT_EQ(std::count(y.gpus.begin(), y.gpus.end(), gx), 0)
              << "GPU " << gx << " held by " << plan.jobs[x.job].id << " and " << plan.jobs[y.job].id;
        }
      }
  }
  EXPECT_GE(preempted_trials, 20);
}

// Run does what simulate predicted, with preemption: random plans of the test above run by
// `run`'s loop over the fakes (a clock moved by hand; a job ends when its estimate, less what its
// earlier attempts ran, has passed; a preemption's SIGTERM ends it at once, and the loop looks
// again at once, as the waker makes it). Every attempt starts and ends when and where simulate
// said, and the preemptions are the ones it predicted.
TEST(Preempt, RunOverTheFakesDoesWhatSimulatePredicted) {
  uint64_t seed = test::test_seed(4444);
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  auto below = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  int preempted_trials = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::string jobs = random_preempt_plan(rng);
    const double min_minutes = 15 * below(3);
    SCOPED_TRACE(fmt::format("trial {}, preempt_min_minutes {}: {}", trial, min_minutes, jobs));
    test::Loop q(jobs, [&](RunOptions& o) { o.preempt_min_minutes = min_minutes; }, {0, 1, 2, 3});
    SimOptions opt;
    opt.node_gpus = {0, 1, 2, 3};
    opt.preempt_min_minutes = min_minutes;
    Simulation sim = simulate(q.plan, opt);
    ASSERT_TRUE(sim.stuck.empty());
    // The run: each attempt (job, start, end in hours from the start, GPUs).
    struct Attempt {
      std::string id;
      double start, end = -1;
      std::vector<int> gpus;
    };
    std::map<long long, Attempt> ran;
    std::map<std::string, double> worked;  // hours its ended attempts ran
    const double t0 = q.clock.t;
    auto hours = [&] { return (q.clock.t - t0) / 3600; };
    size_t seen_launches = 0;
    bool finished = false;
    for (int step = 0; step < 2000 && !finished; ++step) {
      TickResult r = q.tick();
      finished = r.next == TickResult::Next::Finished;
      ASSERT_NE(r.next, TickResult::Next::Fatal);
      for (; seen_launches < q.launcher.launches.size(); ++seen_launches) {
        const LaunchSpec& l = q.launcher.launches[seen_launches];
        ran[q.launcher.pid_of(l.id)] = {l.id, hours(), -1, l.gpus};
      }
      // Ended at this tick by its signal (a preemption): it ran until now; the loop looks again now.
      bool again = false;
      for (auto& [pid, a] : ran)
        if (a.end < 0 && q.launcher.procs[pid].seen.kind == Observed::Kind::Exited) {
          a.end = hours();
          worked[a.id] += a.end - a.start;
          again = true;
        }
      if (finished || again) continue;
      // The next moment: the first running attempt to end, or the loop's own wake.
      double next = r.wake_in / 3600;
      for (const auto& [pid, a] : ran)
        if (a.end < 0) next = std::min(next, q.plan.find(a.id)->est_hours - worked[a.id] - (hours() - a.start));
      ASSERT_LT(next, 100) << "nothing to wait for";
      q.clock.advance(std::max(0.0, next) * 3600);
      for (auto& [pid, a] : ran)
        if (a.end < 0 && q.plan.find(a.id)->est_hours - worked[a.id] - (hours() - a.start) < 1e-9) {
          q.launcher.exit(pid, 0);
          a.end = hours();
          worked[a.id] += a.end - a.start;
        }
    }
    ASSERT_TRUE(finished) << "the run did not end";
    // The same attempts as the prediction, in the same order per job.
    std::map<std::string, std::vector<std::tuple<double, double, std::vector<int>>>> got, want;
    for (const auto& [pid, a] : ran) got[a.id].push_back({a.start, a.end, a.gpus});
    for (const SimRow& r : sim.rows) want[q.plan.jobs[r.job].id].push_back({r.start, r.end, r.gpus});
    ASSERT_EQ(got.size(), want.size());
    for (auto& [id, w] : want) {
      std::vector<std::tuple<double, double, std::vector<int>>>& g = got[id];
      std::sort(g.begin(), g.end());
      std::sort(w.begin(), w.end());
      ASSERT_EQ(g.size(), w.size()) << id << ": attempts";
      for (size_t k = 0; k < w.size(); ++k) {
        EXPECT_NEAR(std::get<0>(g[k]), std::get<0>(w[k]), 1e-6) << id << " attempt " << k + 1 << ": start";
        EXPECT_NEAR(std::get<1>(g[k]), std::get<1>(w[k]), 1e-6) << id << " attempt " << k + 1 << ": end";
        EXPECT_EQ(std::get<2>(g[k]), std::get<2>(w[k])) << id << " attempt " << k + 1 << ": GPUs";
      }
      preempted_trials += w.size() > 1;
    }
    EXPECT_EQ(q.status("j0") == Status::Done, true);
  }
  EXPECT_GE(preempted_trials, 5) << "preemptions happened";
}

}  // namespace
}  // namespace gpuq

namespace gpuq {
namespace {

// The fourth trial (issue 51, item 2): a job that never checkpoints was said to lose "0 s since
// its last checkpoint", and a trainer that checkpointed every 3 s "1 min" at every preemption by
// hand or across users. The work lost is from the attempt's last checkpoint (a file in its
// GPUQ_CHECKPOINT_DIR made since its start), and "no checkpoint seen" when there is none; the same
// whoever preempts (by hand, another user, a more urgent job).
TEST(Preempt, TheWorkLostIsFromTheLastCheckpointOfThisAttemptOrNoneSeen) {
  Eng g(R"([{"id": "a", "script": "s", "gpus": 1, "preemptible": true},
            {"id": "b", "script": "s", "gpus": 1, "preemptible": true},
            {"id": "c", "script": "s", "gpus": 1, "preemptible": true}])",
        3);
  g.tick(100);
  ev::Preempt by_hand{g.at("a"), 160, std::nullopt};
  by_hand.checkpoint = 157;  // written 3 s ago
  g.e->apply(by_hand);
  ASSERT_EQ(g.e->effects().preempted.size(), 1u);
  Preemption p = g.e->effects().preempted[0];
  EXPECT_TRUE(p.checkpointed);
  EXPECT_DOUBLE_EQ(p.unsaved, 3);
  EXPECT_EQ(p.work_text(), "it ran 1 min, 3 s since its last checkpoint");
  // None seen: all it ran is lost, and said so.
  ev::Preempt other{g.at("b"), 160, std::nullopt, "bo's eval"};
  g.e->apply(other);
  p = g.e->effects().preempted[0];
  EXPECT_FALSE(p.checkpointed);
  EXPECT_EQ(p.work_text(), "it ran 1 min, no checkpoint seen");
  // A checkpoint older than this attempt's start (kept from the last one) is not this attempt's.
  ev::Preempt old{g.at("c"), 160, std::nullopt};
  old.checkpoint = 90;
  g.e->apply(old);
  EXPECT_FALSE(g.e->effects().preempted[0].checkpointed);
  EXPECT_DOUBLE_EQ(g.e->effects().preempted[0].unsaved, 60);
}

}  // namespace
}  // namespace gpuq
