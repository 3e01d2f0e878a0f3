// The rest of the box (issue 45) in the core, with inline plans and no process: the fields
// `cpus` and `mem_gib` and their "did you mean", admission by cores and host memory in the one
// pass (the engine, the prediction, status's reasons), a job that can never fit, and plans that
// give neither field scheduled exactly as before. The real runs are in host_run_test.cpp.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "gpuq/core/cores.h"
#include "gpuq/core/engine.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/simulate.h"
#include "gpuq/views/reasons.h"
#include "test_util.h"

namespace gpuq {
namespace {

using test::errors_of;
using test::plan_of;
using ::testing::HasSubstr;

// An engine in seconds on `gpus` GPUs with `cpus` cores and `gib` GiB of host memory for jobs.
struct HostEng {
  Plan plan;
  Policy p;
  std::optional<Engine> e;
  HostEng(const std::string& jobs, int gpus, double cpus, double gib) : plan(plan_of(jobs)) {
    p.node_gpus.clear();
    for (int g = 0; g < gpus; ++g) p.node_gpus.push_back(g);
    p.node_cpus = cpus;
    p.node_mem_gib = gib;
    e.emplace(plan, p, 1);
  }
  size_t at(const std::string& id) const { return static_cast<size_t>(plan.find(id) - plan.jobs.data()); }
  LifeKind kind(const std::string& id) const { return kind_of(e->life(at(id))); }
  std::vector<std::string> tick(double now, bool explain = false) {
    ev::Tick t;
    t.now = now;
    t.explain = explain;
    e->apply(t);
    std::vector<std::string> ids;
    for (const Launch& l : e->effects().launches) ids.push_back(plan.jobs[l.job].id);
    return ids;
  }
  void exit(const std::string& id, double at) { e->apply(ev::Exited{this->at(id), at, 0}); }
};

TEST(HostFields, CpusAndMemGibAreReadAndCheckedAndOtherSchedulersSpellingsAreNamed) {
  Plan plan = plan_of(R"([{"id": "a", "script": "x", "cpus": 6, "mem_gib": 12.5}, {"id": "b", "script": "x"}])");
  EXPECT_EQ(plan.jobs[0].cpus, 6);
  EXPECT_FLOAT_EQ(plan.jobs[0].mem_gib, 12.5f);
  EXPECT_EQ(plan.jobs[1].cpus, 0) << "not given";
  EXPECT_EQ(plan.jobs[1].mem_gib, 0) << "not given";
  auto one_error = [](const std::string& job) {
    std::vector<std::string> errs = errors_of("[" + job + "]");
    return errs.size() == 1 ? errs[0] : fmt::format("{} errors", errs.size());
  };
  EXPECT_THAT(one_error(R"({"id": "a", "script": "x", "cpus": 0})"), HasSubstr("\"cpus\" must be at least 1"));
  EXPECT_THAT(one_error(R"({"id": "a", "script": "x", "cpus": 2.5})"), HasSubstr("\"cpus\""));
  EXPECT_THAT(one_error(R"({"id": "a", "script": "x", "cpus": 70000})"), HasSubstr("more than any node has"));
  EXPECT_THAT(one_error(R"({"id": "a", "script": "x", "mem_gib": -1})"), HasSubstr("\"mem_gib\""));
  EXPECT_THAT(one_error(R"({"id": "a", "script": "x", "mem_gib": 0})"), HasSubstr("\"mem_gib\" must be more than 0"));
  for (auto [spelled, field] : std::vector<std::pair<std::string, std::string>>{{"cpus_per_task", "cpus"},
                                                                                 {"ncpus", "cpus"},
                                                                                 {"mem", "mem_gib"},
                                                                                 {"mem_per_gpu", "mem_gib"},
                                                                                 {"ram_gb", "mem_gib"},
                                                                                 {"memory", "mem_gib"}})
    EXPECT_THAT(one_error(fmt::format(R"({{"id": "a", "script": "x", "{}": 4}})", spelled)),
                HasSubstr(fmt::format("did you mean \"{}\"", field)))
        << spelled;
}

// The issue's case: on a node given 4 cores, four jobs asking 2 cores each run two at a time.
TEST(HostPass, FourJobsOfTwoCoresOnFourCoresRunTwoAtATime) {
  std::string jobs;
  for (int k = 0; k < 4; ++k)
    jobs += fmt::format(R"({}{{"id": "j{}", "script": "x", "gpus": 0, "cpus": 2, "est_hours": 0.1}})",
                        k ? "," : "", k);
  HostEng g("[" + jobs + "]", 8, 4, 64);
  EXPECT_EQ(g.tick(0), (std::vector<std::string>{"j0", "j1"}));
  EXPECT_TRUE(g.tick(1).empty()) << "4 cores are taken";
  EXPECT_EQ(g.e->host_used().cpus, 4);
  g.exit("j1", 2);
  EXPECT_EQ(g.tick(2), std::vector<std::string>{"j2"});
  g.exit("j0", 3);
  g.exit("j2", 3);
  EXPECT_EQ(g.tick(3), std::vector<std::string>{"j3"});
  EXPECT_EQ(g.e->host_used().cpus, 2);
  EXPECT_EQ(g.e->recount(), "");
}

// A job allocating 1.5 GiB beside another's 1 GiB waits on a node of 2 GiB for jobs, and says so.
TEST(HostPass, AJobWhoseMemoryDoesNotFitBesideTheRunningOnesWaitsAndSaysForWhat) {
  HostEng g(R"([{"id": "small", "script": "x", "gpus": 0, "mem_gib": 1},
            {"id": "big", "script": "x", "gpus": 0, "mem_gib": 1.5}])",
        8, 16, 2);
  EXPECT_EQ(g.tick(0, true), std::vector<std::string>{"small"});
  EXPECT_EQ(g.kind("big"), LifeKind::Waiting);
  Why w = g.e->why(g.at("big"));
  ASSERT_EQ(w.kind, Why::Kind::Host);
  EXPECT_FLOAT_EQ(w.need.mem_gib, 1.5f);
  EXPECT_DOUBLE_EQ(w.host.mem_gib, 1.0);
  g.exit("small", 5);
  EXPECT_EQ(g.tick(5), std::vector<std::string>{"big"});
}

// A job's cores and memory count beside its GPUs: a 1-GPU job waits for cores while GPUs idle;
// a job without "cpus" takes a share of the node's cores per GPU (1 without GPUs).
TEST(HostPass, CoresCountBesideGpusAndAJobWithoutCpusTakesAShareOfTheNodesPerGpu) {
  Policy p;  // 8 GPUs
  p.node_cpus = 64;
  Plan plan = plan_of(R"([{"id": "one", "script": "x"}, {"id": "four", "script": "x", "gpus": 4},
                          {"id": "cpu", "script": "x", "gpus": 0}, {"id": "mine", "script": "x", "cpus": 3}])");
  EXPECT_EQ(p.cpus_of(plan.jobs[0]), 8);
  EXPECT_EQ(p.cpus_of(plan.jobs[1]), 32);
  EXPECT_EQ(p.cpus_of(plan.jobs[2]), 1);
  EXPECT_EQ(p.cpus_of(plan.jobs[3]), 3);
  HostEng g(R"([{"id": "pre", "script": "x", "gpus": 0, "cpus": 30},
            {"id": "train", "script": "x", "gpus": 1, "cpus": 8}])",
        8, 32, 0);
  EXPECT_EQ(g.tick(0, true), std::vector<std::string>{"pre"});
  Why w = g.e->why(g.at("train"));
  ASSERT_EQ(w.kind, Why::Kind::Host) << "8 GPUs idle, 2 cores free";
  EXPECT_EQ(w.need.cpus, 8);
  EXPECT_DOUBLE_EQ(w.host.cpus, 2);
}

// A job that needs more than the node has never starts and holds no job back (the backfill
// limit is not set by it); one that waits for cores sets it, as a job waiting for GPUs does.
TEST(HostPass, AJobTooBigForTheNodeHoldsNoneBackButOneWaitingForCoresSetsTheBackfillLimit) {
  HostEng never(R"([{"id": "huge", "script": "x", "gpus": 0, "mem_gib": 300, "priority": 1},
                {"id": "long", "script": "x", "gpus": 0, "mem_gib": 10, "est_hours": 5}])",
            8, 16, 240);
  EXPECT_EQ(never.tick(0), std::vector<std::string>{"long"});
  EXPECT_TRUE(never.p.host_too_big(never.plan.jobs[never.at("huge")]));
  EXPECT_EQ(host_too_big_text(never.p, never.plan.jobs[never.at("huge")]),
            "needs 300 GiB of host memory, the node has 240 for jobs (node_mem_gib)");
  HostEng wait(R"([{"id": "busy", "script": "x", "gpus": 0, "cpus": 12, "priority": 0},
               {"id": "wide", "script": "x", "gpus": 0, "cpus": 8, "priority": 1},
               {"id": "long", "script": "x", "gpus": 0, "cpus": 2, "est_hours": 5, "priority": 2},
               {"id": "short", "script": "x", "gpus": 0, "cpus": 2, "est_hours": 0.1, "priority": 3}])",
           8, 16, 0);
  EXPECT_EQ(wait.tick(0, true), (std::vector<std::string>{"busy", "short"}))
      << "wide waits for 8 cores: only short jobs may start meanwhile";
  EXPECT_EQ(wait.e->why(wait.at("long")).kind, Why::Kind::Backfill);
  EXPECT_TRUE(wait.e->why(wait.at("long")).head_host) << "wide waits for cores, not GPUs: the reason says so";
  EXPECT_EQ(wait.e->why(wait.at("wide")).kind, Why::Kind::Host);
}

// The prediction runs the same pass: two jobs of 2 cores on 2 cores run one after the other,
// and status says what the second waits for.
TEST(HostPrediction, SimulateAndStatusAccountCoresAsRunDoes) {
  Plan plan = plan_of(R"([{"id": "a", "script": "x", "gpus": 1, "cpus": 2, "est_hours": 1},
                          {"id": "b", "script": "x", "gpus": 1, "cpus": 2, "est_hours": 1}])");
  SimOptions opt;
  opt.node_cpus = 2;
  opt.node_mem_gib = 100;
  Simulation sim = simulate(plan, opt);
  ASSERT_EQ(sim.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(sim.rows[0].start, 0);
  EXPECT_DOUBLE_EQ(sim.rows[1].start, 1) << "b waits for a's cores although GPUs idle";
  opt.node_cpus = 4;
  EXPECT_DOUBLE_EQ(simulate(plan, opt).rows[1].start, 0) << "4 cores: both at once";
  // status, a running: b waits for its cores.
  opt.node_cpus = 2;
  State st;
  JobState a;
  a.status = Status::Running;
  a.pid = 7;
  a.start = 0;
  a.gpus = std::vector<int>{0};
  st.set("a", a);
  Outlook o = make_outlook(plan, st, opt, 600, mask_of({1, 2, 3, 4, 5, 6, 7}),
                           FileTable([](const std::string&) { return true; }));
  const JobView* b = nullptr;
  for (const JobView& v : o.jobs)
    if (v.job == 1) b = &v;
  ASSERT_TRUE(b);
  EXPECT_EQ(why_text(plan, st, o, *b), "needs 2 cores, 0 free");
  ASSERT_TRUE(b->predicted_start);
  EXPECT_DOUBLE_EQ(*b->predicted_start, 3600) << "when a ends";
}

// choose_cores before issue 45's NUMA preference, kept here word for word: with no preference
// the choice must stay exactly this.
std::vector<int> choose_cores_before(const std::vector<int>& node, const std::vector<std::vector<int>>& held, int n) {
  std::vector<int> cores = node;
  std::sort(cores.begin(), cores.end());
  cores.erase(std::unique(cores.begin(), cores.end()), cores.end());
  n = std::min<int>(n, static_cast<int>(cores.size()));
  if (n <= 0) return {};
  std::map<int, int> use;
  for (const std::vector<int>& job : held)
    for (int c : job) ++use[c];
  auto used = [&](int c) {
    auto it = use.find(c);
    return it == use.end() ? 0 : it->second;
  };
  for (size_t i = 0; i + static_cast<size_t>(n) <= cores.size(); ++i) {
    bool run = true;
    for (size_t k = i; k < i + static_cast<size_t>(n) && run; ++k)
      run = used(cores[k]) == 0 && (k == i || cores[k] == cores[k - 1] + 1);
    if (run) return {cores.begin() + static_cast<long>(i), cores.begin() + static_cast<long>(i) + n};
  }
  std::stable_sort(cores.begin(), cores.end(), [&](int a, int b) { return used(a) < used(b); });
  std::vector<int> out(cores.begin(), cores.begin() + n);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> range(int from, int to) {
  std::vector<int> out;
  for (int c = from; c <= to; ++c) out.push_back(c);
  return out;
}

// A job whose GPUs are on the NUMA node of cores 8-15 gets its cores there: a run of free ones
// (8-9 are held), where the rule without a preference takes 0-3; near cores of two nodes (8-11,
// 0-3 as two GPUs give them) are one pool; near cores that are not the node's (16-20) are none.
TEST(Cores, APreferenceThatFitsIsTakenARunWithinItFirst) {
  const std::vector<int> node = range(0, 15);
  EXPECT_EQ(choose_cores(node, {{8, 9}}, 4, range(8, 15)), (std::vector<int>{10, 11, 12, 13}));
  EXPECT_EQ(choose_cores(node, {{8, 9}}, 4), (std::vector<int>{0, 1, 2, 3})) << "no preference: as before";
  std::vector<int> two = range(8, 11);
  two.insert(two.end(), {0, 1, 2, 3});
  EXPECT_EQ(choose_cores(node, {{1}, {9}}, 3, two), (std::vector<int>{0, 2, 3})) << "no run of 3 free there";
  EXPECT_EQ(choose_cores(node, {{1}, {9}}, 2, two), (std::vector<int>{2, 3})) << "the first run within them";
  EXPECT_EQ(choose_cores(node, {}, 2, range(14, 20)), (std::vector<int>{14, 15}));
  EXPECT_EQ(choose_cores(node, {}, 5, range(14, 20)), (std::vector<int>{0, 1, 2, 14, 15})) << "16-20: not the node's";
}

// Too few of the near cores free: those that are, and the rest by the rule without a preference
// over the other cores; none free (or none of the node's): exactly the choice without one.
TEST(Cores, APreferencePartlyFullSpillsToTheOtherCores) {
  const std::vector<int> node = range(0, 15);
  EXPECT_EQ(choose_cores(node, {{8, 9, 10}}, 4, range(8, 11)), (std::vector<int>{0, 1, 2, 11}));
  EXPECT_EQ(choose_cores(node, {{0}, {8, 9, 10}}, 4, range(8, 11)), (std::vector<int>{1, 2, 3, 11}));
  EXPECT_EQ(choose_cores(node, {{8, 9, 10, 11}}, 2, range(8, 11)), choose_cores_before(node, {{8, 9, 10, 11}}, 2));
  // More cores asked than are free: the free near one, then the least shared of the rest, lowest first.
  EXPECT_EQ(choose_cores(range(0, 3), {{0, 1}, {2}}, 3, {2, 3}), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(choose_cores(range(0, 3), {{0, 1}, {2}}, 3, {1}), choose_cores_before(range(0, 3), {{0, 1}, {2}}, 3));
}

// No topology (no preference, or one naming none of the node's cores): the choice of before,
// exactly, on random nodes, holdings and sizes.
TEST(Cores, WithoutAPreferenceTheChoiceIsExactlyAsBefore) {
  uint64_t seed = test::test_seed(4545);
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 2000; ++round) {
    std::vector<int> node;
    int cores = 1 + static_cast<int>(rng() % 24);
    for (int c = 0; c < cores; ++c)
      if (rng() % 4) node.push_back(c + (rng() % 8 == 0 ? 32 : 0));
    std::shuffle(node.begin(), node.end(), rng);
    std::vector<std::vector<int>> held(rng() % 5);
    for (auto& h : held)
      for (int k = static_cast<int>(rng() % 6); k > 0; --k) h.push_back(static_cast<int>(rng() % 40));
    int n = static_cast<int>(rng() % 10) - 1;
    std::vector<int> before = choose_cores_before(node, held, n);
    EXPECT_EQ(choose_cores(node, held, n), before) << round;
    EXPECT_EQ(choose_cores(node, held, n, {}), before) << round;
    EXPECT_EQ(choose_cores(node, held, n, {100, 101}), before) << round;
  }
}

// Plans that give neither field count neither: the engine passes nothing of the host to the
// pass, whatever the node's cores, and schedules as before (random plans against the same plans
// on a node with no cores counted).
TEST(HostPass, APlanWithoutTheFieldsIsScheduledExactlyAsBefore) {
  uint64_t seed = test::test_seed(45);
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 30; ++round) {
    std::string jobs;
    int n = 4 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k)
      jobs += fmt::format(R"({}{{"id": "j{}", "script": "x", "gpus": {}, "est_hours": {}, "priority": {}}})",
                          k ? "," : "", k, rng() % 4, 0.1 + (rng() % 20) / 4.0, rng() % 5);
    Plan plan = plan_of("[" + jobs + "]");
    SimOptions none, tiny;
    tiny.node_cpus = 1;  // would hold every job back, were cores counted
    tiny.node_mem_gib = 0.5;
    Engine e(plan, tiny, 1);
    EXPECT_FALSE(e.counts_host());
    Simulation a = simulate(plan, none), b = simulate(plan, tiny);
    ASSERT_EQ(a.rows.size(), b.rows.size());
    for (size_t r = 0; r < a.rows.size(); ++r) {
      EXPECT_EQ(a.rows[r].job, b.rows[r].job);
      EXPECT_EQ(a.rows[r].start, b.rows[r].start);
      EXPECT_EQ(a.rows[r].gpus, b.rows[r].gpus);
    }
  }
}

}  // namespace
}  // namespace gpuq

// A core list is read as Cpus_allowed_list writes it, and nothing else: other users' node files
// give them too, so a range past any machine's cores (or one whose end would overflow) is none.
TEST(Cores, ACoreListIsReadBackAndOneOutOfRangeIsNone) {
  EXPECT_EQ(gpuq::parse_core_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(gpuq::core_list_text({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(gpuq::parse_core_list(gpuq::core_list_text({5, 7, 9, 10})), (std::vector<int>{5, 7, 9, 10}));
  EXPECT_TRUE(gpuq::parse_core_list("2147483640-2147483647").empty());
  EXPECT_TRUE(gpuq::parse_core_list("3-1").empty());
  EXPECT_TRUE(gpuq::parse_core_list("-1").empty());
  EXPECT_TRUE(gpuq::parse_core_list("0-70000").empty());
  EXPECT_TRUE(gpuq::parse_core_list("a-b").empty());
}
