// The simulator with inline plans; the original's own outputs are checked by the parity fixtures.
#include "gpuq/core/simulate.h"

#include <gtest/gtest.h>

#include <map>

#include "test_util.h"
#include "gpuq/views/reasons.h"
#include "gpuq/views/text.h"

using namespace gpuq;
using gpuq::test::plan_of;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {
const SimRow& row(const Plan& plan, const Simulation& sim, const std::string& id) {
  for (const SimRow& r : sim.rows)
    if (plan.jobs[r.job].id == id) return r;
  throw std::runtime_error("no row for " + id);
}
}  // namespace

TEST(Simulate, DepsWaitAndPairsAreUsed) {
  Plan plan = plan_of(R"([
    {"id": "prep", "script": "x", "gpus": 0, "est_hours": 0.5},
    {"id": "train", "script": "x", "gpus": 2, "est_hours": 3, "deps": ["prep"]},
    {"id": "report", "script": "x", "gpus": 0, "est_hours": 0.25, "deps": ["after:train"]}
  ])");
  Simulation sim = simulate(plan, {});
  ASSERT_TRUE(sim.stuck.empty());
  EXPECT_EQ(row(plan, sim, "train").start, 0.5);
  EXPECT_EQ(row(plan, sim, "train").gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(row(plan, sim, "report").start, 3.5);
  EXPECT_EQ(row(plan, sim, "report").end, 3.75);
}

// run --slurm's policy (a batch queue places the jobs) given to the prediction, as run's eta
// step gives it: the prediction still places them itself, as without it (it threw
// bad_variant_access: a launch in a batch queue is a submission, not a run).
TEST(Simulate, ABatchQueuesPolicyIsPredictedAsPlacedHere) {
  Plan plan = plan_of(R"([
    {"id": "prep", "script": "x", "gpus": 0, "est_hours": 0.5},
    {"id": "train", "script": "x", "gpus": 2, "est_hours": 3, "deps": ["prep"]},
    {"id": "wide", "script": "x", "gpus": 8, "est_hours": 1}
  ])");
  Policy batch;
  batch.batch = true;
  Simulation b = simulate(plan, batch), plain = simulate(plan, {});
  ASSERT_EQ(b.rows.size(), plain.rows.size());
  for (size_t k = 0; k < b.rows.size(); ++k) {
    EXPECT_EQ(b.rows[k].job, plain.rows[k].job);
    EXPECT_EQ(b.rows[k].start, plain.rows[k].start);
    EXPECT_EQ(b.rows[k].gpus, plain.rows[k].gpus);
  }
}

TEST(Simulate, FileDepWaitsForItsProducerFraction) {
  Plan plan = plan_of(R"([
    {"id": "train", "script": "x", "gpus": 1, "est_hours": 10},
    {"id": "eval_mid", "script": "x", "gpus": 1, "est_hours": 1, "deps": ["file:ck/mid/READY"],
     "produced_by": "train", "produced_at_frac": 0.25},
    {"id": "uses_input", "script": "x", "gpus": 1, "est_hours": 1, "deps": ["file:data/in.jsonl"]}
  ])");
  Simulation sim = simulate(plan, {});
  EXPECT_EQ(row(plan, sim, "eval_mid").start, 2.5);
  EXPECT_EQ(row(plan, sim, "uses_input").start, 0);  // produced by no job: present from the start
}

// A file its producer makes as it starts (produced_at_frac 0) lets its job start at that
// same instant: the pass right after the one that started the producer must run.
TEST(Simulate, FileMadeAtTheStartOfItsProducerStartsItsJobAtOnce) {
  Plan plan = plan_of(R"([
    {"id": "train", "script": "x", "gpus": 1, "est_hours": 10},
    {"id": "watch", "script": "x", "gpus": 1, "est_hours": 1, "deps": ["file:ck/started"],
     "produced_by": "train", "produced_at_frac": 0},
    {"id": "later", "script": "x", "gpus": 4, "est_hours": 1, "deps": ["file:ck/half"],
     "produced_by": "train", "produced_at_frac": 0.5}
  ])");
  Simulation sim = simulate(plan, {});
  EXPECT_EQ(row(plan, sim, "watch").start, 0);
  EXPECT_EQ(row(plan, sim, "later").start, 5);
}

TEST(Simulate, ACapOnTheGpusHeldAtOnceSpreadsTheJobsOverTime) {
  Plan plan = plan_of(R"([
    {"id": "a", "script": "x", "gpus": 1, "est_hours": 1},
    {"id": "b", "script": "x", "gpus": 1, "est_hours": 1},
    {"id": "c", "script": "x", "gpus": 2, "est_hours": 1},
    {"id": "d", "script": "x", "gpus": 3, "est_hours": 1}
  ])");
  SimOptions opt;
  opt.max_gpus = 2;  // a shared node's cap: 8 GPUs free, 2 at once for this plan
  Simulation sim = simulate(plan, opt);
  std::map<std::string, double> start;
  for (const SimRow& r : sim.rows) start[plan.jobs[r.job].id] = r.start;
  EXPECT_EQ(start, (std::map<std::string, double>{{"a", 0}, {"b", 0}, {"c", 1}}));
  ASSERT_EQ(sim.stuck.size(), 1u);  // d, wider than the cap, never starts
  EXPECT_EQ(plan.jobs[sim.stuck[0].job].id, "d");
  opt.max_gpus.reset();
  EXPECT_EQ(simulate(plan, opt).rows.size(), 4u);
}

// A live start on a shared node: the user's other plan holds 1 GPU for an hour; with a cap of 2
// the 2-GPU job starts when that hold ends (not never), and a job the node starts later (its
// fair order) waits for that, its dependent after it.
TEST(Simulate, OnASharedNodeTheUsersOtherHoldsCountAgainstTheCapOnlyWhileTheyLast) {
  Plan plan = plan_of(R"([
    {"id": "two", "script": "x", "gpus": 2, "est_hours": 1},
    {"id": "later", "script": "x", "gpus": 1, "est_hours": 0.5},
    {"id": "after", "script": "x", "gpus": 1, "est_hours": 0.5, "deps": ["later"]}
  ])");
  SimOptions opt;
  opt.max_gpus = 2;
  LiveStart from;
  from.lives.assign(plan.jobs.size(), Waiting{});
  from.files_present.assign(plan.jobs.size(), 1);
  from.held.push_back({mask_of({7}), 1.0, true});
  from.not_before.push_back({1, 3.0});
  Simulation sim = simulate(plan, opt, &from);
  std::map<std::string, double> start;
  for (const SimRow& r : sim.rows) start[plan.jobs[r.job].id] = r.start;
  EXPECT_EQ(start, (std::map<std::string, double>{{"two", 1.0}, {"later", 3.0}, {"after", 3.5}}));
  EXPECT_TRUE(sim.stuck.empty());
}

// Another user's waiting job, predicted by the node to run on GPU 0 from 1 h to 2 h: the plan's
// job that is ready at 1.5 h waits for it to end; the GPU is the plan's before it starts and
// after it ends. Counted as the user's own (`yours`), it counts against the cap only then.
TEST(Simulate, OnASharedNodeAnotherUsersPredictedJobHoldsItsGpusFromItsStartToItsEnd) {
  Plan plan = plan_of(R"([
    {"id": "first", "script": "x", "gpus": 1, "est_hours": 1.5},
    {"id": "next", "script": "x", "gpus": 1, "est_hours": 1, "deps": ["first"]}
  ])", {0});
  SimOptions opt;
  opt.node_gpus = {0};
  LiveStart from;
  from.lives.assign(plan.jobs.size(), Waiting{});
  from.files_present.assign(plan.jobs.size(), 1);
  from.held.push_back({mask_of({0}), 2.0, false, 1.0});
  Simulation sim = simulate(plan, opt, &from);
  std::map<std::string, double> start;
  for (const SimRow& r : sim.rows) start[plan.jobs[r.job].id] = r.start;
  EXPECT_EQ(start, (std::map<std::string, double>{{"first", 0.0}, {"next", 2.0}}));
  // Held from now instead: the plan waits for all of it.
  from.held[0].from = 0;
  sim = simulate(plan, opt, &from);
  start.clear();
  for (const SimRow& r : sim.rows) start[plan.jobs[r.job].id] = r.start;
  EXPECT_EQ(start, (std::map<std::string, double>{{"first", 2.0}, {"next", 3.5}}));
}

TEST(Simulate, UsesTheGpuIdsGiven) {
  Plan plan = plan_of(R"([{"id": "a", "script": "x", "gpus": 2}, {"id": "b", "script": "x", "gpus": 1}])",
                      {4, 5, 6, 7});
  SimOptions opt;
  opt.node_gpus = {4, 5, 6, 7};
  Simulation sim = simulate(plan, opt);
  EXPECT_EQ(row(plan, sim, "a").gpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(row(plan, sim, "b").gpus, std::vector<int>{6});
}

TEST(Simulate, TimelineFormatHidesEvalRowsUnlessAll) {
  Plan plan = plan_of(R"([
    {"id": "train", "script": "x", "gpus": 2, "est_hours": 2, "first_look_frac": 0.5},
    {"id": "eval_x", "script": "x", "gpus": 1, "est_hours": 1, "deps": ["train"]}
  ])");
  SimOptions opt;
  Simulation sim = simulate(plan, opt);
  std::string hidden = format_timeline(plan, sim, opt, false);
  std::string all = format_timeline(plan, sim, opt, true);
  EXPECT_EQ(hidden,
            "  0.00h ->   2.00h gpus=[0, 1]   train\n"
            "makespan 3.0h, GPU utilization 20.8%\n"
            "round-100 in-loop eval of the first-wave arms: earliest ~1.0h, all ~1.0h\n");
  EXPECT_THAT(all, HasSubstr("  2.00h ->   3.00h gpus=[0]      eval_x\n"));
}

// simulate --from-state: a job that started a moment before now reads 0.00h (issue 51, item 10),
// one that started two hours ago -2.00h.
TEST(Simulate, ARunningJobsStartJustBeforeNowReadsZeroNotMinusZero) {
  Plan plan = plan_of(R"([{"id": "a", "script": "x", "gpus": 1}, {"id": "b", "script": "x", "gpus": 1}])");
  Simulation sim;
  sim.rows = {{0, -0.001, 0.999, {0}}, {1, -2.0, 0.5, {1}}};
  std::string text = format_timeline(plan, sim, SimOptions{}, true);
  EXPECT_THAT(text, HasSubstr("  0.00h ->   1.00h gpus=[0]      a\n")) << text;
  EXPECT_THAT(text, HasSubstr(" -2.00h ->   0.50h gpus=[1]      b\n")) << text;
  EXPECT_THAT(text, Not(HasSubstr("-0.00h"))) << text;
}

TEST(Simulate, ReservationDeadlockIsReportedWithItsReasons) {
  // Two reservations each closing GPUs the other's job needs.
  Plan plan = plan_of(R"({"jobs": [
    {"id": "x", "script": "s", "gpus": 8},
    {"id": "y", "script": "s", "gpus": 8}
  ], "reservations": [{"gpus": [0], "jobs": ["x"]}, {"gpus": [1], "jobs": ["y"]}]})");
  Simulation sim = simulate(plan, {});
  ASSERT_EQ(sim.stuck.size(), 2u);
  std::string text = format_stuck(plan, SimOptions{}, sim);
  EXPECT_THAT(text, HasSubstr("x: needs 8 GPUs, 7 of 8 are open to it; reservation #2 closes GPUs [1] until y finishes"));
  EXPECT_THAT(text, HasSubstr("y: needs 8 GPUs, 7 of 8 are open to it; reservation #1 closes GPUs [0] until x finishes"));
}

TEST(Simulate, StallBreakerNoteIsGivenAndTheTimelineFinishes) {
  Plan plan = plan_of(R"({"jobs": [
    {"id": "full", "script": "x", "gpus": 8, "priority": 1, "est_hours": 1},
    {"id": "member", "script": "x", "gpus": 2, "priority": 2, "est_hours": 4}
  ], "reservations": [{"gpus": [6, 7], "jobs": ["member"]}]})");
  Simulation sim = simulate(plan, {});
  EXPECT_TRUE(sim.stuck.empty());
  ASSERT_EQ(sim.notes.size(), 1u);
  EXPECT_THAT(sim.notes[0], HasSubstr("full waits for GPUs"));
  EXPECT_EQ(row(plan, sim, "member").start, 0);
  EXPECT_EQ(row(plan, sim, "full").start, 4);
}

TEST(SimulateFromState, MissingUnproducedFileMeansNeverWithAReason) {
  Plan plan = plan_of(R"([{"id": "a", "script": "x", "gpus": 1}, {"id": "b", "script": "x", "deps": ["file:gate"]}])");
  LiveStart from;
  from.lives = {ended_by_exit(0, -1, -2, 0), Waiting{}};
  from.files_present = {1, 0};
  Simulation sim = simulate(plan, {}, &from);
  ASSERT_EQ(sim.stuck.size(), 1u);
  EXPECT_EQ(plan.jobs[sim.stuck[0].job].id, "b");
  EXPECT_THAT(stuck_text(plan, SimOptions{}, sim.stuck[0]), HasSubstr("no job of the plan produces it"));
  EXPECT_TRUE(sim.rows.empty());  // a is done: not part of the remaining timeline
}
