// The scheduling pass, with inline plans: pairs, backfill, reservations, ties, the stall breaker.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "gpuq/core/schedule.h"
#include "test_util.h"

using namespace gpuq;
using gpuq::test::plan_of;
using gpuq::test::seed_note;
using gpuq::test::test_seed;

namespace {

const GpuMask kNode8 = mask_of({0, 1, 2, 3, 4, 5, 6, 7});

PassInput input(const Plan& plan, GpuMask free) {
  PassInput in;
  in.free = free;
  in.node = kNode8;
  in.open.assign(plan.reservations.size(), true);
  in.explain = true;
  return in;
}

// The pass over these ready jobs, with the default backfill limit (or `limit`).
PassResult pass(const Plan& plan, const std::vector<size_t>& ready, const PassInput& in, double limit = 0.5) {
  return schedule_pass(plan, ReadySet(plan, limit, ready), in);
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
  auto r = pass(plan, ready, input(plan, mask_of({3, 5})));
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
  auto r = pass(plan, ready, input(plan, mask_of({0, 1, 2})));
  // long (3h) and cpu_long (2h, no GPUs at all) are held back; the limit is inclusive.
  EXPECT_EQ(started_ids(plan, r), (std::vector<std::string>{"short", "cpu_short"}));
  ASSERT_TRUE(r.waiting_head.has_value());
  EXPECT_EQ(plan.jobs[*r.waiting_head].id, "wide");
  int backfill_held = 0;
  for (const PassedOver& h : r.held)
    if (h.why == PassedOver::Why::Backfill) {
      ++backfill_held;
      EXPECT_EQ(h.head, 0u);
    }
  EXPECT_EQ(backfill_held, 2);
}

TEST(Pass, ACapLeavesOutJobsWiderThanWhatIsLeftWithoutHoldingGpusForThem) {
  Plan plan = plan_of(R"([
    {"id": "pair1", "script": "x", "gpus": 2, "priority": 1, "est_hours": 5},
    {"id": "pair2", "script": "x", "gpus": 2, "priority": 2, "est_hours": 5},
    {"id": "one", "script": "x", "gpus": 1, "priority": 3, "est_hours": 5},
    {"id": "cpu", "script": "x", "gpus": 0, "priority": 4, "est_hours": 5}
  ])");
  std::vector<size_t> ready{0, 1, 2, 3};
  PassInput in = input(plan, kNode8);
  // 3 GPUs left under the cap: pair1 takes 2, pair2 is left out (no head: a long job still
  // starts after it), one takes the last; a CPU job is never capped.
  in.gpu_budget = 3;
  auto r = pass(plan, ready, in);
  EXPECT_EQ(started_ids(plan, r), (std::vector<std::string>{"pair1", "one", "cpu"}));
  EXPECT_FALSE(r.waiting_head.has_value());
  in.gpu_budget = 0;
  EXPECT_EQ(started_ids(plan, pass(plan, ready, in)), std::vector<std::string>{"cpu"});
  in.gpu_budget = -1;  // no cap: all four
  EXPECT_EQ(started_ids(plan, pass(plan, ready, in)), (std::vector<std::string>{"pair1", "pair2", "one", "cpu"}));
}

TEST(Pass, BackfillLimitIsAFlag) {
  Plan plan = plan_of(R"([
    {"id": "wide", "script": "x", "gpus": 4, "priority": 1},
    {"id": "long", "script": "x", "gpus": 1, "priority": 2, "est_hours": 3}
  ])");
  std::vector<size_t> ready{0, 1};
  PassInput in = input(plan, mask_of({0, 1}));
  EXPECT_EQ(started_ids(plan, pass(plan, ready, in, 3)), std::vector<std::string>{"long"});
}

TEST(Pass, ZeroGpuJobsNeverSetTheLimit) {
  Plan plan = plan_of(R"([
    {"id": "cpu", "script": "x", "gpus": 0, "priority": 1},
    {"id": "long", "script": "x", "gpus": 1, "priority": 2, "est_hours": 3}
  ])");
  std::vector<size_t> ready{0, 1};
  auto r = pass(plan, ready, input(plan, mask_of({6})));
  EXPECT_EQ(started_ids(plan, r), (std::vector<std::string>{"cpu", "long"}));
  EXPECT_EQ(r.starts[0].gpus, std::vector<int>{});
}

TEST(Pass, ReservationClosesGpusToOthersWhileOpen) {
  Plan plan = plan_of(R"({"jobs": [
    {"id": "train", "script": "x", "gpus": 1, "priority": 1},
    {"id": "eval", "script": "x", "gpus": 1, "priority": 2, "deps": ["train"]}
  ], "reservations": [{"gpus": [0, 1], "jobs": ["eval"]}]})");
  std::vector<size_t> ready{0};
  auto r = pass(plan, ready, input(plan, mask_of({0, 1, 2})));
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].gpus, std::vector<int>{2});
  // Once every job it lists is finished, the reservation is closed no more.
  PassInput in = input(plan, mask_of({0, 1, 2}));
  in.open = {false};
  EXPECT_EQ(pass(plan, ready, in).starts[0].gpus, std::vector<int>{0});
}

TEST(Pass, ReservationMemberThatCannotFitDoesNotSetTheLimit) {
  Plan plan = plan_of(R"({"jobs": [
    {"id": "member", "script": "x", "gpus": 4, "priority": 1},
    {"id": "long", "script": "x", "gpus": 1, "priority": 2, "est_hours": 9}
  ], "reservations": [{"gpus": [0, 1, 2, 3], "jobs": ["member"]}]})");
  std::vector<size_t> ready{0, 1};
  auto r = pass(plan, ready, input(plan, mask_of({0, 5})));
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
  PassInput in = input(plan, kNode8);
  in.nothing_running = true;
  auto r = pass(plan, ready, in);
  EXPECT_TRUE(r.stall_broken);
  ASSERT_EQ(started_ids(plan, r), std::vector<std::string>{"member"});
  EXPECT_EQ(r.starts[0].gpus, (std::vector<int>{0, 1}));
}

TEST(Pass, StallBreakerWaitsWhileSomethingRuns) {
  Plan plan = plan_of(kStallPlan);
  std::vector<size_t> ready{0, 1};
  PassInput in = input(plan, kNode8);
  in.nothing_running = false;
  auto r = pass(plan, ready, in);
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
  PassInput in = input(plan, mask_of({4, 5, 6, 7}));
  in.nothing_running = true;
  auto r = pass(plan, ready, in);
  EXPECT_FALSE(r.stall_broken);
  EXPECT_TRUE(r.starts.empty());
}

namespace {

// gpuq.py's pick_gpus, written from its text (not gpuq's pick_gpus): a 2-GPU job takes the
// first free pair of (0,1), (2,3), (4,5), (6,7); any other the lowest free ids.
std::optional<std::vector<int>> original_pick(int n, GpuMask free) {
  std::vector<int> ids;
  for (int g = 0; g < 64; ++g)
    if (free >> g & 1) ids.push_back(g);
  if (n == 2)
    for (int a : {0, 2, 4, 6})
      if ((free >> a & 1) && (free >> (a + 1) & 1)) return std::vector<int>{a, a + 1};
  if (static_cast<int>(ids.size()) < n) return std::nullopt;
  return std::vector<int>(ids.begin(), ids.begin() + n);
}

// The original's walk, written from gpuq.py's text with none of gpuq's functions (its order,
// reservations and pick are the test's own): the model the indexed pass must match. Ready jobs
// by (priority, plan position); a reservation still open closes its GPUs to jobs not in it; the
// first job that cannot get its GPUs (not in a reservation, not 0-GPU) is the head, after which
// only jobs no longer than `limit` are tried.
std::vector<std::pair<size_t, std::vector<int>>> original_walk(const Plan& plan, std::vector<size_t> ready,
                                                               GpuMask free, const std::vector<bool>& open,
                                                               double limit, std::optional<size_t>* head_out) {
  std::sort(ready.begin(), ready.end());
  std::stable_sort(ready.begin(), ready.end(),
                   [&](size_t a, size_t b) { return plan.jobs[a].priority < plan.jobs[b].priority; });
  auto member = [&](const Reservation& r, size_t j) { return std::count(r.jobs.begin(), r.jobs.end(), j) > 0; };
  std::vector<std::pair<size_t, std::vector<int>>> out;
  bool waiting_head = false;
  for (size_t j : ready) {
    const Job& job = plan.jobs[j];
    if (waiting_head && job.est_hours > limit) continue;
    GpuMask closed = 0;
    bool reserved = false;
    for (size_t r = 0; r < plan.reservations.size(); ++r) {
      reserved = reserved || member(plan.reservations[r], j);
      if (open[r] && !member(plan.reservations[r], j))
        for (int g : plan.reservations[r].gpu_list) closed |= GpuMask{1} << g;
    }
    auto gpus = original_pick(job.gpus, free & ~closed);
    if (!gpus) {
      if (job.gpus > 0 && !reserved) {
        if (!waiting_head) *head_out = j;
        waiting_head = true;
      }
      continue;
    }
    for (int g : *gpus) free &= ~(GpuMask{1} << g);
    out.push_back({j, *gpus});
  }
  return out;
}

}  // namespace

TEST(Pass, IndexedWalkMatchesTheOriginalsLinearWalkOnRandomInputs) {
  uint64_t seed = test_seed(12345);
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
  for (int round = 0; round < 3000; ++round) {
    int n = 1 + static_cast<int>(rng() % 30);
    nlohmann::json jobs = nlohmann::json::array();
    for (int i = 0; i < n; ++i) {
      static const double ests[] = {0.1, 0.25, 0.5, 0.75, 1, 3, 12};
      static const int widths[] = {0, 1, 1, 1, 2, 2, 3, 4, 6, 8};
      jobs.push_back({{"id", "j" + std::to_string(i)}, {"script", "x"}, {"gpus", widths[rng() % 10]},
                      {"priority", static_cast<int>(rng() % 4) * 10}, {"est_hours", ests[rng() % 7]}});
    }
    nlohmann::json res = nlohmann::json::array();
    for (int r = 0, nr = static_cast<int>(rng() % 3); r < nr; ++r) {
      nlohmann::json g = nlohmann::json::array(), m = nlohmann::json::array();
      for (int k = 0; k < 8; ++k)
        if (rng() % 4 == 0) g.push_back(k);
      for (int i = 0; i < n; ++i)
        if (rng() % 6 == 0) m.push_back("j" + std::to_string(i));
      res.push_back({{"gpus", g}, {"jobs", m}});
    }
    Plan plan = plan_of(nlohmann::json{{"jobs", jobs}, {"reservations", res}}.dump());
    std::vector<size_t> ready;
    for (int i = 0; i < n; ++i)
      if (rng() % 4 != 0) ready.push_back(i);
    GpuMask free = rng() & 0xff;
    std::vector<bool> open(plan.reservations.size());
    for (size_t r = 0; r < open.size(); ++r) open[r] = rng() % 3 != 0;
    double limit = (rng() % 2) ? 0.5 : 0.0;

    std::optional<size_t> head;
    auto expected = original_walk(plan, ready, free, open, limit, &head);
    PassInput in;
    in.free = free;
    in.node = 0xff;
    in.open = open;
    in.nothing_running = false;  // the stall breaker is tested on its own
    PassResult got = pass(plan, ready, in, limit);
    ASSERT_EQ(got.starts.size(), expected.size()) << "round " << round;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(got.starts[i].job, expected[i].first) << "round " << round;
      EXPECT_EQ(got.starts[i].gpus, expected[i].second) << "round " << round;
    }
    EXPECT_EQ(got.waiting_head, head) << "round " << round;
  }
}

TEST(RankSet, AgreesWithStdSetOnRandomOperations) {
  for (size_t n : {1u, 63u, 64u, 65u, 4096u, 4097u, 300000u}) {
    std::mt19937 rng(static_cast<unsigned>(n));
    gpuq::RankSet s(n);
    std::set<size_t> ref;
    for (int op = 0; op < 20000; ++op) {
      size_t r = rng() % n;
      switch (rng() % 3) {
        case 0: EXPECT_EQ(s.insert(r), ref.insert(r).second); break;
        case 1: EXPECT_EQ(s.erase(r), ref.erase(r) == 1); break;
        default: {
          auto it = ref.lower_bound(r);
          ASSERT_EQ(s.next(r), it == ref.end() ? gpuq::RankSet::npos : *it) << "n " << n << " from " << r;
        }
      }
      ASSERT_EQ(s.size(), ref.size());
      EXPECT_EQ(s.contains(r), ref.count(r) == 1);
    }
    // Walking it from the start gives every member in order.
    std::vector<size_t> walk;
    for (size_t k = s.next(0); k != gpuq::RankSet::npos; k = s.next(k + 1)) walk.push_back(k);
    EXPECT_EQ(walk, std::vector<size_t>(ref.begin(), ref.end()));
  }
}
