// The scheduling pass, with inline plans: pairs, backfill, reservations, ties, the stall breaker.
#include <gtest/gtest.h>

#include "gpuq/schedule.h"
#include "test_util.h"

using namespace gpuq;
using gpuq::test::plan_of;

namespace {

const GpuMask kNode8 = mask_of({0, 1, 2, 3, 4, 5, 6, 7});

PassInput input(const Plan& plan, std::vector<size_t>& ready, GpuMask free) {
  sort_ready(plan, ready);
  PassInput in;
  in.ready = ready;
  in.free = free;
  in.node = kNode8;
  in.open.assign(plan.reservations.size(), true);
  return in;
}

std::vector<std::string> started_ids(const Plan& plan, const PassResult& r) {
  std::vector<std::string> ids;
  for (const Start& s : r.starts) ids.push_back(plan.jobs[s.job].id);
  return ids;
}

}  // namespace

TEST(PickGpus, TwoGpuJobTakesFirstWholeNvlinkPair) {
  // 0 and 3 busy: pairs (0,1) and (2,3) are broken, (4,5) is the first whole one.
  EXPECT_EQ(pick_gpus(2, mask_of({1, 2, 4, 5, 6, 7})), (std::vector<int>{4, 5}));
}

TEST(PickGpus, TwoGpuJobWithoutWholePairTakesLowestFree) {
  EXPECT_EQ(pick_gpus(2, mask_of({1, 2, 5})), (std::vector<int>{1, 2}));
}

TEST(PickGpus, OtherWidthsTakeLowestIdsAndZeroTakesNone) {
  EXPECT_EQ(pick_gpus(3, mask_of({7, 2, 5, 6})), (std::vector<int>{2, 5, 6}));
  EXPECT_EQ(pick_gpus(0, 0), std::vector<int>{});
  EXPECT_FALSE(pick_gpus(4, mask_of({0, 1, 2})).has_value());
}

TEST(Pass, ReadyOrderIsPriorityThenPlanPosition) {
  Plan plan = plan_of(R"([
    {"id": "c", "script": "x", "priority": 50},
    {"id": "a", "script": "x", "priority": 10},
    {"id": "b", "script": "x", "priority": 50},
    {"id": "d", "script": "x", "priority": 10}
  ])");
  std::vector<size_t> ready{0, 1, 2, 3};
  // Only two GPUs: the two priority-10 jobs take them, in plan order.
  auto r = schedule_pass(plan, input(plan, ready, mask_of({3, 5})));
  EXPECT_EQ(started_ids(plan, r), (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(r.starts[0].gpus, std::vector<int>{3});
  EXPECT_EQ(r.starts[1].gpus, std::vector<int>{5});
}

TEST(Pass, ShortJobBackfillsWhileWideJobWaits) {
  Plan plan = plan_of(R"([
    {"id": "wide", "script": "x", "gpus": 4, "priority": 1, "est_hours": 5},
    {"id": "long", "script": "x", "gpus": 1, "priority": 2, "est_hours": 3},
    {"id": "short", "script": "x", "gpus": 1, "priority": 3, "est_hours": 0.5},
    {"id": "cpu_long", "script": "x", "gpus": 0, "priority": 4, "est_hours": 2},
    {"id": "cpu_short", "script": "x", "gpus": 0, "priority": 5, "est_hours": 0.1}
  ])");
  std::vector<size_t> ready{0, 1, 2, 3, 4};
  auto r = schedule_pass(plan, input(plan, ready, mask_of({0, 1, 2})));
  // long (3h) and cpu_long (2h, no GPUs at all) are held back; the limit is inclusive.
  EXPECT_EQ(started_ids(plan, r), (std::vector<std::string>{"short", "cpu_short"}));
  ASSERT_TRUE(r.waiting_head.has_value());
  EXPECT_EQ(plan.jobs[*r.waiting_head].id, "wide");
  int backfill_held = 0;
  for (const Held& h : r.held)
    if (h.why == Held::Why::Backfill) {
      ++backfill_held;
      EXPECT_EQ(h.head, 0u);
    }
  EXPECT_EQ(backfill_held, 2);
}

TEST(Pass, BackfillLimitIsAFlag) {
  Plan plan = plan_of(R"([
    {"id": "wide", "script": "x", "gpus": 4, "priority": 1},
    {"id": "long", "script": "x", "gpus": 1, "priority": 2, "est_hours": 3}
  ])");
  std::vector<size_t> ready{0, 1};
  PassInput in = input(plan, ready, mask_of({0, 1}));
  in.backfill_max_hours = 3;
  EXPECT_EQ(started_ids(plan, schedule_pass(plan, in)), std::vector<std::string>{"long"});
}

TEST(Pass, ZeroGpuJobsNeverSetTheLimit) {
  Plan plan = plan_of(R"([
    {"id": "cpu", "script": "x", "gpus": 0, "priority": 1},
    {"id": "long", "script": "x", "gpus": 1, "priority": 2, "est_hours": 3}
  ])");
  std::vector<size_t> ready{0, 1};
  auto r = schedule_pass(plan, input(plan, ready, mask_of({6})));
  EXPECT_EQ(started_ids(plan, r), (std::vector<std::string>{"cpu", "long"}));
  EXPECT_EQ(r.starts[0].gpus, std::vector<int>{});
}

TEST(Pass, ReservationClosesGpusToOthersWhileOpen) {
  Plan plan = plan_of(R"({"jobs": [
    {"id": "train", "script": "x", "gpus": 1, "priority": 1},
    {"id": "eval", "script": "x", "gpus": 1, "priority": 2, "deps": ["train"]}
  ], "reservations": [{"gpus": [0, 1], "jobs": ["eval"]}]})");
  std::vector<size_t> ready{0};
  auto r = schedule_pass(plan, input(plan, ready, mask_of({0, 1, 2})));
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].gpus, std::vector<int>{2});
  // Once every job it lists is finished, the reservation is closed no more.
  PassInput in = input(plan, ready, mask_of({0, 1, 2}));
  in.open = {false};
  EXPECT_EQ(schedule_pass(plan, in).starts[0].gpus, std::vector<int>{0});
}

TEST(Pass, ReservationMemberThatCannotFitDoesNotSetTheLimit) {
  Plan plan = plan_of(R"({"jobs": [
    {"id": "member", "script": "x", "gpus": 4, "priority": 1},
    {"id": "long", "script": "x", "gpus": 1, "priority": 2, "est_hours": 9}
  ], "reservations": [{"gpus": [0, 1, 2, 3], "jobs": ["member"]}]})");
  std::vector<size_t> ready{0, 1};
  auto r = schedule_pass(plan, input(plan, ready, mask_of({0, 5})));
  EXPECT_FALSE(r.waiting_head.has_value());
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(plan.jobs[r.starts[0].job].id, "long");
  EXPECT_EQ(r.starts[0].gpus, std::vector<int>{5});  // GPU 0 is closed to it
}

// The deadlock of fix 12: an 8-GPU job waits for GPUs a reservation closes to
// it, and the reservation's only job is too long to backfill.
constexpr const char* kStallPlan = R"({"jobs": [
    {"id": "full", "script": "x", "gpus": 8, "priority": 1},
    {"id": "member", "script": "x", "gpus": 2, "priority": 2, "est_hours": 4}
  ], "reservations": [{"gpus": [6, 7], "jobs": ["member"]}]})";

TEST(Pass, StallBreakerLiftsTheLimitWhenNothingRunsAndTheHeadCanNeverFit) {
  Plan plan = plan_of(kStallPlan);
  std::vector<size_t> ready{0, 1};
  PassInput in = input(plan, ready, kNode8);
  in.nothing_running = true;
  auto r = schedule_pass(plan, in);
  EXPECT_TRUE(r.stall_broken);
  ASSERT_EQ(started_ids(plan, r), std::vector<std::string>{"member"});
  EXPECT_EQ(r.starts[0].gpus, (std::vector<int>{0, 1}));
}

TEST(Pass, StallBreakerWaitsWhileSomethingRuns) {
  Plan plan = plan_of(kStallPlan);
  std::vector<size_t> ready{0, 1};
  PassInput in = input(plan, ready, kNode8);
  in.nothing_running = false;
  auto r = schedule_pass(plan, in);
  EXPECT_FALSE(r.stall_broken);
  EXPECT_TRUE(r.starts.empty());
}

TEST(Pass, StallBreakerWaitsWhenTheHeadCouldFitOnceGpusFree) {
  // Same plan without the reservation's hold on the head: GPUs 0-3 are busy
  // with foreign memory, nothing of the plan runs, but the head fits the node.
  Plan plan = plan_of(R"([
    {"id": "wide", "script": "x", "gpus": 6, "priority": 1},
    {"id": "long", "script": "x", "gpus": 1, "priority": 2, "est_hours": 4}
  ])");
  std::vector<size_t> ready{0, 1};
  PassInput in = input(plan, ready, mask_of({4, 5, 6, 7}));
  in.nothing_running = true;
  auto r = schedule_pass(plan, in);
  EXPECT_FALSE(r.stall_broken);
  EXPECT_TRUE(r.starts.empty());
}
