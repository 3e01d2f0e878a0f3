// `simulate --nodes`: the same pass and simulator over a cluster of nodes, a job on one node.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "gpuq/core/simulate.h"
#include "gpuq/views/json.h"
#include "gpuq/views/text.h"
#include "test_util.h"

using namespace gpuq;
using gpuq::test::plan_of;
using ::testing::HasSubstr;

namespace {

const SimRow& row(const Plan& plan, const Simulation& sim, const std::string& id) {
  for (const SimRow& r : sim.rows)
    if (plan.jobs[r.job].id == id) return r;
  throw std::runtime_error("no row for " + id);
}

SimOptions cluster(int nodes, int gpus_per_node) {
  SimOptions opt;
  opt.node_gpus.clear();
  for (int g = 0; g < gpus_per_node; ++g) opt.node_gpus.push_back(g);
  opt.nodes = nodes;
  return opt;
}

}  // namespace

// Two nodes of 4 GPUs: 3 + 3 GPUs leave one free on each node, 2 in all, and a 2-GPU job
// does not span them: it waits for a node to free up.
TEST(Cluster, AJobRunsOnOneNodeOnly) {
  Plan plan = plan_of(R"([
    {"id": "a", "script": "x", "gpus": 3, "est_hours": 1},
    {"id": "b", "script": "x", "gpus": 3, "est_hours": 1},
    {"id": "c", "script": "x", "gpus": 2, "est_hours": 1},
    {"id": "d", "script": "x", "gpus": 1, "est_hours": 0.25}
  ])", {0, 1, 2, 3});
  Simulation sim = simulate(plan, cluster(2, 4));
  ASSERT_TRUE(sim.stuck.empty());
  EXPECT_EQ(row(plan, sim, "a").node, 0);
  EXPECT_EQ(row(plan, sim, "a").gpus, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(row(plan, sim, "b").node, 1);
  EXPECT_EQ(row(plan, sim, "b").gpus, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(row(plan, sim, "c").start, 1);  // 2 GPUs free at 0, but one on each node
  // A 1-GPU job fits in what c could not use (backfill: it is short), on the first node.
  EXPECT_EQ(row(plan, sim, "d").start, 0);
  EXPECT_EQ(row(plan, sim, "d").node, 0);
  EXPECT_EQ(row(plan, sim, "d").gpus, (std::vector<int>{3}));
  // On one node of 8 the same plan runs a, b and c at once.
  Simulation one = simulate(plan_of(R"([
    {"id": "a", "script": "x", "gpus": 3, "est_hours": 1},
    {"id": "b", "script": "x", "gpus": 3, "est_hours": 1},
    {"id": "c", "script": "x", "gpus": 2, "est_hours": 1}
  ])"), {});
  for (const SimRow& r : one.rows) EXPECT_EQ(r.start, 0);
}

// Jobs wider than what any one node has free wait, even with more GPUs free across nodes;
// the pass's reason says how many one node has.
TEST(Cluster, TheWaitingReasonCountsOneNode) {
  Plan plan = plan_of(R"([
    {"id": "a", "script": "x", "gpus": 3, "est_hours": 1},
    {"id": "b", "script": "x", "gpus": 3, "est_hours": 1},
    {"id": "wide", "script": "x", "gpus": 4, "est_hours": 1}
  ])", {0, 1, 2, 3});
  SimOptions opt = cluster(2, 4);
  std::vector<GpuMask> nodes = {0b1000, 0b1000};  // after a and b: one GPU free on each
  ReadySet ready(plan, opt.backfill_max_hours, std::vector<size_t>{2});
  PassInput in;
  in.node = 0b1111;
  in.nodes = nodes;
  in.open.assign(plan.reservations.size(), false);
  in.explain = true;
  PassResult r = schedule_pass(plan, ready, in);
  EXPECT_TRUE(r.starts.empty());
  ASSERT_EQ(r.held.size(), 1u);
  EXPECT_EQ(r.held[0].free_for_job, 1);
  nodes[1] = 0b1111;  // the second node frees up: wide goes there
  r = schedule_pass(plan, ready, in);
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].node, 1);
  EXPECT_EQ(r.starts[0].gpus, (std::vector<int>{0, 1, 2, 3}));
}

// With jobs of at most one GPU, where a job runs cannot matter: N nodes of G GPUs start every
// job when one node of N x G GPUs does. Random plans (deps of every kind, priorities, zero
// est_hours), seeded.
TEST(Cluster, OneGpuJobsStartAsOnOneNodeOfAllTheGpus) {
  uint64_t seed = test::test_seed(20261201);
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    int nodes = 1 + static_cast<int>(rng() % 6), per = 1 + static_cast<int>(rng() % 8);
    size_t n = 1 + rng() % 40;
    std::string text = "[";
    for (size_t j = 0; j < n; ++j) {
      std::string deps;
      for (size_t k = 0; k < j; ++k)
        if (rng() % 8 == 0) deps += fmt::format("{}\"{}j{}\"", deps.empty() ? "" : ", ", rng() % 3 ? "" : "after:", k);
      text += fmt::format("{}{{\"id\": \"j{}\", \"script\": \"x\", \"gpus\": {}, \"priority\": {}, "
                          "\"est_hours\": {}, \"deps\": [{}]}}",
                          j ? ", " : "", j, rng() % 4 ? 1 : 0, rng() % 5, static_cast<double>(rng() % 9) / 4, deps);
    }
    text += "]";
    SCOPED_TRACE(fmt::format("round {}: {} nodes of {}: {}", round, nodes, per, text));
    std::vector<int> node, all;
    for (int g = 0; g < per; ++g) node.push_back(g);
    for (int g = 0; g < nodes * per; ++g) all.push_back(g);
    Plan plan = plan_of(text, node);
    Simulation many = simulate(plan, cluster(nodes, per));
    SimOptions big;
    big.node_gpus = all;
    Simulation one = simulate(plan_of(text, all), big);
    ASSERT_EQ(many.rows.size(), one.rows.size());
    std::map<size_t, double> start;
    for (const SimRow& r : one.rows) start[r.job] = r.start;
    for (const SimRow& r : many.rows) {
      ASSERT_EQ(r.start, start.at(r.job)) << plan.jobs[r.job].id;
      ASSERT_GE(r.node, 0);
      ASSERT_LT(r.node, nodes);
    }
    // No two rows share a GPU of a node at once.
    for (const SimRow& a : many.rows) {
      for (const SimRow& b : many.rows) {
        if (&a == &b || a.node != b.node || !(a.start < b.end && b.start < a.end)) continue;
        for (int g : a.gpus) ASSERT_EQ(std::count(b.gpus.begin(), b.gpus.end(), g), 0);
      }
    }
  }
}

TEST(Cluster, TheTimelineNamesTheNodeAndCountsEveryGpu) {
  Plan plan = plan_of(R"([
    {"id": "a", "script": "x", "gpus": 4, "est_hours": 2},
    {"id": "b", "script": "x", "gpus": 4, "est_hours": 2}
  ])", {0, 1, 2, 3});
  SimOptions opt = cluster(3, 4);
  Simulation sim = simulate(plan, opt);
  std::string text = format_timeline(plan, sim, opt, false);
  EXPECT_THAT(text, HasSubstr("node=0 gpus=[0, 1, 2, 3] a\n"));
  EXPECT_THAT(text, HasSubstr("node=1 gpus=[0, 1, 2, 3] b\n"));
  EXPECT_THAT(text, HasSubstr("GPU utilization 66.7%"));  // 8 of 12 GPUs for the whole makespan
  std::string json = simulation_json(plan, "plan.json", sim, opt);
  EXPECT_THAT(json, HasSubstr("\"nodes\": 3"));
  EXPECT_THAT(json, HasSubstr("\"gpus_per_node\": 4"));
  EXPECT_THAT(json, HasSubstr("\"node\": 1"));
}
