// Several jobs on one GPU (a job's gpu_mem_gib): the pass's placement, the engine's room, and a
// property test over random plans: `run` (the RunLoop over fakes) never overbooks a GPU, never
// shares a whole job's GPU, and places every job where and when the prediction does.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "gpuq/core/engine.h"
#include "gpuq/core/events.h"
#include "gpuq/core/gpu_use.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/schedule.h"
#include "gpuq/core/simulate.h"
#include "gpuq/views/text.h"
#include "test_util.h"
#include "tick_loop.h"

using namespace gpuq;
using namespace gpuq::test;

namespace {

const GpuMask kNode8 = mask_of({0, 1, 2, 3, 4, 5, 6, 7});

// A pass over one node of 8 GPUs: `room` GiB a packed job may declare on each, all free.
PassInput packed_input(const Plan& plan, std::vector<double>& room, GpuMask free = kNode8) {
  PassInput in;
  in.free = free;
  in.node = kNode8;
  in.open.assign(plan.reservations.size(), true);
  in.explain = true;
  in.room = room;
  in.room_empty = 76;
  return in;
}

ev::Tick tick_at(double now) {
  ev::Tick t;
  t.now = now;
  return t;
}

std::vector<size_t> all_jobs(const Plan& plan) {
  std::vector<size_t> v;
  for (size_t j = 0; j < plan.jobs.size(); ++j) v.push_back(j);
  return v;
}

// The sweep of `n` jobs of `gib` GiB each on one GPU, with `extra` jobs before it.
std::string sweep(int n, double gib, const std::string& extra = "") {
  std::string jobs = extra;
  for (int k = 0; k < n; ++k)
    jobs += (jobs.empty() ? "" : ",") + fmt::format(R"({{"id": "s{}", "script": "x", "gpu_mem_gib": {}}})", k, gib);
  return "[" + jobs + "]";
}

}  // namespace

// Issue 43, point 8: while GPUs are idle and no whole job waits for them, a packed job takes an
// idle one (co-located jobs slow each other); when a wider job wants the idle ones, the fullest
// GPU with room (best fit), so that they stay whole for it.
TEST(PackPass, APackedJobTakesAnIdleGpuUnlessAWiderJobWantsThemThenTheFullestWithRoom) {
  auto pass = [](const std::string& extra) {
    Plan plan = plan_of("[" + extra + R"({"id": "s0", "script": "x", "gpu_mem_gib": 20, "est_hours": 0.25}])");
    std::vector<double> room(kMaxGpuId + 1, -1);
    for (int g = 0; g < 8; ++g) room[g] = 76;
    room[5] = 30;  // GPU 5 holds packed jobs already (and is no longer free whole)
    room[6] = 25;  // fuller still
    room[2] = 10;  // too full for 20 GiB
    PassInput in = packed_input(plan, room, kNode8 & ~mask_of({2, 5, 6}));
    PassResult r = schedule_pass(plan, ReadySet(plan, 0.5, all_jobs(plan)), in);
    for (const Start& st : r.starts)
      if (plan.jobs[st.job].id == "s0") return st.gpus;
    return std::vector<int>{};
  };
  EXPECT_EQ(pass(""), std::vector<int>{0}) << "GPUs 0, 1, 3, 4, 7 idle: the first of them";
  EXPECT_EQ(pass(R"({"id": "wide", "script": "x", "gpus": 5},)"), std::vector<int>{6})
      << "wide takes the five idle GPUs: s0 joins the fullest";
  EXPECT_EQ(pass(R"({"id": "wide", "script": "x", "gpus": 6},)"), std::vector<int>{6})
      << "wide waits for six: the five idle stay whole for it";
  EXPECT_EQ(pass(R"({"id": "wide", "script": "x", "gpus": 4},)"), std::vector<int>{7})
      << "wide takes four of the five idle GPUs: s0 the fifth";
}

TEST(PackPass, PackedJobsSpreadOverIdleGpusThenFillTheFullest) {
  auto per_gpu = [](const std::string& plan_text) {
    Plan plan = plan_of(plan_text);
    std::vector<double> room(kMaxGpuId + 1, -1);
    for (int g = 0; g < 8; ++g) room[g] = 76;
    PassInput in = packed_input(plan, room);
    PassResult r = schedule_pass(plan, ReadySet(plan, 0.5, all_jobs(plan)), in);
    std::map<int, int> on;
    for (const Start& s : r.starts)
      if (plan.jobs[s.job].gpu_mem_gib) ++on[s.gpus.at(0)];
    return on;
  };
  // Seven on eight idle GPUs: one each. Ten: one each, then the fullest with room (GPU 0) twice.
  EXPECT_EQ(per_gpu(sweep(7, 20)), (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}));
  EXPECT_EQ(per_gpu(sweep(10, 20)),
            (std::map<int, int>{{0, 3}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}}));
  // A whole job of 5 after them wants five idle GPUs: the sweep spreads over the three it leaves,
  // then fills the fullest (76 GiB take three jobs of 20): GPUs 0 and 1 full, one job on GPU 2;
  // 3..7 stay whole, and wide takes them.
  EXPECT_EQ(per_gpu(sweep(7, 20, R"({"id": "wide", "script": "x", "gpus": 5, "priority": 99})")),
            (std::map<int, int>{{0, 3}, {1, 3}, {2, 1}}));
}

TEST(PackPass, AWholeJobsGpusTakeNoPackedJobAndAPackedJobTooBigSaysTheMostRoom) {
  Plan plan = plan_of(sweep(2, 50, R"({"id": "wide", "script": "x", "gpus": 7, "priority": 1})"));
  std::vector<double> room(kMaxGpuId + 1, -1);
  for (int g = 0; g < 8; ++g) room[g] = 76;
  room[7] = 40;  // another's memory on GPU 7 leaves 40 GiB (and it is not free for whole jobs)
  PassInput in = packed_input(plan, room, kNode8 & ~mask_of({7}));
  PassResult r = schedule_pass(plan, ReadySet(plan, 0.5, all_jobs(plan)), in);
  ASSERT_EQ(r.starts.size(), 1u) << "wide takes 0-6 whole; 50 GiB fit on none of the rest";
  EXPECT_EQ(plan.jobs[r.starts[0].job].id, "wide");
  ASSERT_EQ(r.held.size(), 2u);
  EXPECT_EQ(r.held[0].why, PassedOver::Why::Gpus);
  EXPECT_EQ(r.held[0].free_for_job, 0);
  EXPECT_DOUBLE_EQ(r.held[0].room, 40);
}

TEST(PackPass, AWaitingPackedJobSetsTheBackfillLimitAsAWholeOneDoes) {
  // s0 (50 GiB) cannot get room; the long job after it may not start, the short one may.
  Plan plan = plan_of(R"([
    {"id": "s0", "script": "x", "gpu_mem_gib": 50, "priority": 1},
    {"id": "long", "script": "x", "gpus": 1, "est_hours": 5, "priority": 2},
    {"id": "short", "script": "x", "gpus": 1, "est_hours": 0.25, "priority": 3}
  ])");
  std::vector<double> room(kMaxGpuId + 1, -1);
  room[0] = 30;
  room[1] = 76;  // the only free GPU... but the pass sees 50 fit on GPU 1
  PassInput in = packed_input(plan, room, mask_of({1}));
  PassResult r = schedule_pass(plan, ReadySet(plan, 0.5, all_jobs(plan)), in);
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(plan.jobs[r.starts[0].job].id, "s0") << "50 GiB fit on the empty GPU 1";
  room[1] = 30;
  in = packed_input(plan, room, mask_of({1}));
  r = schedule_pass(plan, ReadySet(plan, 0.5, all_jobs(plan)), in);
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(plan.jobs[r.starts[0].job].id, "short");
  ASSERT_TRUE(r.waiting_head);
  EXPECT_EQ(plan.jobs[*r.waiting_head].id, "s0");
}

TEST(PackPass, APackedJobOfMoreGibThanAnEmptyGpuTakesHoldsNoJobBack) {
  // Every GPU holds packed jobs and has 30 GiB left. big (90 GiB) never fits an empty GPU of 76:
  // the long 20 GiB job after it starts. At 70 GiB big would fit once a GPU empties: it is the
  // head that waits, and the long job waits behind it (the backfill limit).
  auto pass = [](const std::string& big_gib) {
    Plan plan = plan_of(fmt::format(R"([
      {{"id": "big", "script": "x", "gpu_mem_gib": {}, "priority": 1}},
      {{"id": "long", "script": "x", "gpu_mem_gib": 20, "est_hours": 5, "priority": 2}}
    ])", big_gib));
    std::vector<double> room(kMaxGpuId + 1, -1);
    for (int g = 0; g < 8; ++g) room[g] = 30;
    PassInput in = packed_input(plan, room, 0);
    PassResult r = schedule_pass(plan, ReadySet(plan, 0.5, all_jobs(plan)), in);
    std::vector<std::string> got;
    for (const Start& st : r.starts) got.push_back(plan.jobs[st.job].id);
    if (r.waiting_head) got.push_back("head " + plan.jobs[*r.waiting_head].id);
    return got;
  };
  EXPECT_EQ(pass("90"), std::vector<std::string>{"long"});
  EXPECT_EQ(pass("70"), std::vector<std::string>{"head big"});
}

TEST(PackEngine, SixtyFourJobsOfTwentyGibTakeThreePerGpuAndAForeignProcessKeepsThemOffItsGpu) {
  Plan plan = plan_of(sweep(64, 20));
  Policy p;
  Engine e(plan, p, 1);
  std::vector<double> other(kMaxGpuId + 1, 0);
  other[3] = 70;  // another user's 70 GiB on GPU 3 (not free whole either)
  ev::Tick t;
  t.now = 0;
  t.unavailable = mask_of({3});
  t.mem_other = other;
  e.apply(t);
  std::map<int, int> per_gpu;
  for (const Launch& l : e.effects().launches) ++per_gpu[std::get<Running>(e.life(l.job)).gpus.at(0)];
  EXPECT_EQ(per_gpu, (std::map<int, int>{{0, 3}, {1, 3}, {2, 3}, {4, 3}, {5, 3}, {6, 3}, {7, 3}}));
  EXPECT_DOUBLE_EQ(e.declared_gib(0), 60);
  // Without a word on its memory, an unavailable GPU takes no packed job either.
  Engine e2(plan, p, 1);
  ev::Tick t2;
  t2.unavailable = mask_of({0, 1, 2, 3, 4, 5, 6});
  e2.apply(t2);
  ASSERT_EQ(e2.effects().launches.size(), 3u);
  for (const Launch& l : e2.effects().launches) EXPECT_EQ(std::get<Running>(e2.life(l.job)).gpus, std::vector<int>{7});
}

TEST(PackEngine, AnEndedPackedJobGivesBackItsGibAndAGpuWithNoneIsWholeAgain) {
  Plan plan = plan_of(sweep(2, 30, R"({"id": "wide", "script": "x", "gpus": 8, "priority": 99})"));
  Policy p;
  Engine e(plan, p, 1);
  e.apply(tick_at(0));
  ASSERT_EQ(e.effects().launches.size(), 2u);  // both on GPU 0; wide waits for all 8
  EXPECT_EQ(std::get<Running>(e.life(1)).gpus, std::vector<int>{0});
  EXPECT_EQ(std::get<Running>(e.life(2)).gpus, std::vector<int>{0});
  e.apply(ev::Exited{1, 10, 0});
  EXPECT_DOUBLE_EQ(e.declared_gib(0), 30);
  e.apply(tick_at(10));
  EXPECT_TRUE(e.effects().launches.empty()) << "GPU 0 still holds s1";
  e.apply(ev::Exited{2, 20, 0});
  EXPECT_DOUBLE_EQ(e.declared_gib(0), 0);
  e.apply(tick_at(20));
  ASSERT_EQ(e.effects().launches.size(), 1u);
  EXPECT_EQ(plan.jobs[e.effects().launches[0].job].id, "wide");
}

TEST(PackEngine, WithPackingOffEveryJobTakesItsGpusWholeAsBefore) {
  Plan plan = plan_of(sweep(10, 20));
  Policy p;
  p.pack = false;
  Engine e(plan, p, 1);
  e.apply(tick_at(0));
  std::set<int> gpus;
  for (const Launch& l : e.effects().launches) gpus.insert(std::get<Running>(e.life(l.job)).gpus.at(0));
  EXPECT_EQ(e.effects().launches.size(), 8u);
  EXPECT_EQ(gpus.size(), 8u);
}

TEST(PackPlan, GpuMemGibIsAPositiveNumberOnAJobWithGpusAndOtherNamesForItAreRefused) {
  EXPECT_EQ(plan_of(sweep(1, 12.5)).jobs[0].gpu_mem_gib, 12.5);
  auto has = [](const std::vector<std::string>& errs, const std::string& what) {
    for (const auto& e : errs)
      if (e.find(what) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has(test::errors_of(R"([{"id": "a", "script": "x", "gpu_mem_gib": 0}])"), "gpu_mem_gib"));
  EXPECT_TRUE(has(test::errors_of(R"([{"id": "a", "script": "x", "gpu_mem_gib": "20"}])"), "gpu_mem_gib"));
  EXPECT_TRUE(has(test::errors_of(R"([{"id": "a", "script": "x", "gpus": 0, "gpu_mem_gib": 20}])"), "\"gpus\": 0"));
  EXPECT_TRUE(has(test::errors_of(R"([{"id": "a", "script": "x", "vram": 20}])"), "did you mean \"gpu_mem_gib\""));
}

TEST(PackMemory, WithAProcessListEachJobCountsTheLargerOfDeclaredAndUsedAndOthersCountWhole) {
  State state;
  JobState a;
  a.status = Status::Running;
  a.pid = 100;
  a.gpus = std::vector<int>{2};
  state.set("a", a);  // packs 20 GiB, uses 31
  JobState b = a;
  b.pid = 200;
  state.set("b", b);  // packs 20 GiB, uses 5 (counted as 20: declared)
  JobState w = a;
  w.pid = 300;
  w.gpus = std::vector<int>{4};
  state.set("w", w);  // whole
  GpuReading r;
  r.used_mib = std::map<int, long long>{{2, 36 * 1024 + 10 * 1024}, {4, 1000}, {5, 0}};
  r.processes = std::map<int, std::vector<GpuProcess>>{
      {2, {GpuProcess{101, 31 * 1024, "python", "", {101, 100}}, GpuProcess{200, 5 * 1024, "python", "", {200}},
           GpuProcess{999, 10 * 1024, "other", "", {999}}}},
      {5, {GpuProcess{998, -1, "other", "", {998}}}}};
  MemoryUse u = memory_use(r, state, GpuRules{}, [](const std::string& id) { return id == "w" ? 0.0 : 20.0; });
  EXPECT_DOUBLE_EQ(u.other[2], 11 + 10) << "a's 11 over its 20, and the foreign 10";
  EXPECT_TRUE(std::isinf(u.other[4])) << "a whole job's GPU";
  EXPECT_TRUE(std::isinf(u.other[5])) << "a process of no job with no memory given";
  EXPECT_DOUBLE_EQ(u.other[0], 0);
  ASSERT_EQ(u.over.size(), 1u);
  EXPECT_EQ(u.over[0].id, "a");
  EXPECT_DOUBLE_EQ(u.over[0].used_gib, 31);
  EXPECT_DOUBLE_EQ(u.used_gib.at("b"), 5);
  // nvidia-smi (no process list): what the GPU reads beyond its jobs' declared 40.
  r.processes.reset();
  u = memory_use(r, state, GpuRules{}, [](const std::string& id) { return id == "w" ? 0.0 : 20.0; });
  EXPECT_DOUBLE_EQ(u.other[2], 46 - 40);
}

TEST(PackSimulate, TheTimelineSaysWhatPackingBuysAndUtilizationCountsASharedGpuOnce) {
  Plan plan = plan_of(sweep(48, 20));
  SimOptions opt;
  Simulation packed = simulate(plan, opt);
  SimOptions whole_opt = opt;
  whole_opt.pack = false;
  Simulation whole = simulate(plan, whole_opt);
  double end_packed = 0, end_whole = 0;
  for (const SimRow& r : packed.rows) end_packed = std::max(end_packed, r.end);
  for (const SimRow& r : whole.rows) end_whole = std::max(end_whole, r.end);
  EXPECT_EQ(end_packed, 2.0) << "48 jobs, 24 at a time (3 of 20 GiB in 76)";
  EXPECT_EQ(end_whole, 6.0) << "48 jobs, 8 at a time";
  EXPECT_EQ(busy_gpu_hours(plan, packed, opt), 16.0) << "8 GPUs busy for 2 hours";
  std::string text = format_timeline(plan, packed, opt, true);
  EXPECT_NE(text.find("GPU utilization 100.0%"), std::string::npos) << text;
  std::string note = packing_note(plan, opt, packed, whole);
  EXPECT_NE(note.find("packed: makespan 2.0h"), std::string::npos) << note;
  EXPECT_NE(note.find("at most 3 on one GPU"), std::string::npos) << note;
  EXPECT_NE(note.find("whole GPUs: makespan 6.0h"), std::string::npos) << note;
}

// Issue 43, point 8, as the issue saw it: simulate on 8 free GPUs put three 20 GiB sweep jobs on
// GPU 2 and three on GPU 3 while GPUs 4-7 idled. Each takes an idle GPU of its own; past eight,
// they pack; and the same placement is the run's (one pass), the whole-GPU plan's unchanged.
TEST(PackSimulate, ASweepSpreadsOverTheIdleGpusBeforeItShares) {
  auto rows = [](const std::string& text) {
    Plan plan = plan_of(text);
    Simulation sim = simulate(plan, SimOptions{});
    std::map<int, int> at_start;  // GPU -> sweep jobs on it at 0h
    for (const SimRow& r : sim.rows)
      if (r.start == 0 && plan.jobs[r.job].gpu_mem_gib) ++at_start[r.gpus.at(0)];
    return at_start;
  };
  const std::string train = R"({"id": "train", "script": "x", "gpus": 2, "est_hours": 4})";
  EXPECT_EQ(rows(sweep(6, 20, train)), (std::map<int, int>{{2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}}));
  EXPECT_EQ(rows(sweep(8, 20, train)), (std::map<int, int>{{2, 3}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}}));
}

// The property: over random plans mixing packed and whole jobs, `run` (the RunLoop over fakes,
// every job exiting 0 at its estimate) never has more declared GiB on a GPU than it takes, never
// shares a whole job's GPU, and starts each job when and where the prediction does.
TEST(PackProperty, RunNeverOverbooksNeverSharesAWholeGpuAndPlacesAsThePredictionDoes) {
  uint64_t seed = test::test_seed(20261202);
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  const double kRoom = 80 * 0.95;
  for (int round = 0; round < 40; ++round) {
    int n = 6 + static_cast<int>(rng() % 30);
    std::string jobs;
    std::vector<double> gib(static_cast<size_t>(n), 0);
    for (int k = 0; k < n; ++k) {
      int gpus = rng() % 5 == 0 ? 1 + static_cast<int>(rng() % 4) : 1;
      std::string extra;
      if (rng() % 3 != 0) {
        gib[static_cast<size_t>(k)] = static_cast<double>(5 + rng() % 8 * 5);
        extra = fmt::format(R"(, "gpu_mem_gib": {})", gib[static_cast<size_t>(k)]);
      }
      if (k > 0 && rng() % 5 == 0) extra += fmt::format(R"(, "deps": ["j{}"])", rng() % static_cast<uint64_t>(k));
      jobs += fmt::format(R"({}{{"id": "j{}", "script": "x", "gpus": {}, "priority": {}, "est_hours": {}{}}})",
                          k ? "," : "", k, gpus, rng() % 4, 0.25 * static_cast<double>(1 + rng() % 8), extra);
    }
    SCOPED_TRACE("round " + std::to_string(round) + ": [" + jobs + "]");
    test::Loop q("[" + jobs + "]");
    const Plan& plan = q.plan;
    Simulation sim = simulate(plan, q.opt);
    std::map<size_t, const SimRow*> predicted;
    for (const SimRow& r : sim.rows) predicted[r.job] = &r;
    const double t0 = q.clock.t;
    std::map<std::string, double> ends;  // running: id -> end (unix s)
    for (int step = 0; step < 400; ++step) {
      q.tick();
      // The invariants, from the state as run saved it.
      std::map<int, double> declared;
      std::map<int, int> jobs_on, whole_on;
      for (const auto& [id, s] : q.disk.state.entries()) {
        if (s.status != Status::Running || !s.gpus) continue;
        const Job* j = plan.find(id);
        for (int g : *s.gpus) {
          ++jobs_on[g];
          if (j->gpu_mem_gib)
            declared[g] += *j->gpu_mem_gib;
          else
            ++whole_on[g];
        }
        if (!ends.count(id)) {
          ends[id] = q.clock.t + j->est_hours * 3600;
          size_t i = static_cast<size_t>(j - plan.jobs.data());
          ASSERT_TRUE(predicted.count(i)) << id << " started, not predicted to";
          EXPECT_DOUBLE_EQ(predicted[i]->start, (q.clock.t - t0) / 3600) << id << "'s start";
          EXPECT_EQ(predicted[i]->gpus, *s.gpus) << id << "'s GPUs";
        }
      }
      for (auto [g, d] : declared) EXPECT_LE(d, kRoom + 1e-9) << "GPU " << g << " overbooked";
      for (auto [g, w] : whole_on) EXPECT_EQ(jobs_on[g], 1) << "GPU " << g << " of a whole job is shared";
      if (ends.empty()) break;
      // On to the next end: every job ending then exits 0.
      double next = 1e300;
      for (auto& [id, t] : ends) next = std::min(next, t);
      q.clock.t = next;
      for (auto it = ends.begin(); it != ends.end();) {
        if (it->second <= next) {
          q.launcher.exit(q.launcher.pid_of(it->first), 0);
          it = ends.erase(it);
        } else {
          ++it;
        }
      }
    }
    size_t done = 0;
    for (const auto& [id, s] : q.disk.state.entries()) done += s.status == Status::Done;
    EXPECT_EQ(done, plan.jobs.size());
    if (testing::Test::HasFailure()) break;
  }
}

// status predicts from the live state with what run's next tick sees: another user's 10 GiB on
// GPU 3 leave room for three jobs of 20, and the prediction puts them there as run does.
TEST(PackOutlook, StatusPlacesPackedJobsOnAGpuAnotherUserSharesAsRunsNextTickDoes) {
  // wide (7 GPUs, after the sweep) wants every idle GPU: the sweep packs, GPU 3 first.
  Plan plan = plan_of(sweep(4, 20, R"({"id": "wide", "script": "x", "gpus": 7, "priority": 99})"));
  Policy p;
  std::vector<double> other(kMaxGpuId + 1, 0);
  other[3] = 10;
  FileTable files([](const std::string&) { return true; });
  Outlook o = make_outlook(plan, State{}, p, 1000, kNode8 & ~mask_of({3}), files, std::nullopt, {}, other);
  Engine e(plan, p, 1);
  ev::Tick t;
  t.unavailable = mask_of({3});
  t.mem_other = other;
  e.apply(t);
  ASSERT_EQ(e.effects().launches.size(), 4u);
  std::map<size_t, std::vector<int>> predicted;
  for (const SimRow& r : o.sim.rows)
    if (r.start == 0) predicted[r.job] = r.gpus;
  int on3 = 0;
  for (size_t j = 1; j < 5; ++j) {
    const std::vector<int>& gpus = std::get<Running>(e.life(j)).gpus;
    EXPECT_EQ(predicted[j], gpus) << plan.jobs[j].id;
    on3 += gpus == std::vector<int>{3};
  }
  EXPECT_EQ(on3, 3) << "the GPU another user shares is filled first, within its room";
}

// What runs peaked at (the event log's ends): history --estimates learns it per prefix, and
// validate warns of a gpu_mem_gib under it, or of a whole-GPU job that could share.
TEST(PackLearn, PeaksArePerPrefixAndValidateSaysWhereTheDeclaredGibDisagree) {
  Plan plan = plan_of(R"([{"id": "train_a", "script": "x", "est_hours": 1, "gpu_mem_gib": 10},
                          {"id": "train_b", "script": "x", "est_hours": 1, "gpu_mem_gib": 30},
                          {"id": "eval_a", "script": "x", "est_hours": 1},
                          {"id": "eval_b", "script": "x", "est_hours": 1}])");
  std::vector<Attempt> attempts;
  auto add = [&](const std::string& id, long long mib) {
    Attempt a;
    a.id = id;
    a.start = 0;
    a.end = 3600;
    a.outcome = "done";
    a.gpu_mem_peak_mib = mib;
    attempts.push_back(a);
  };
  for (long long mib : {12 * 1024, 20 * 1024, 14 * 1024}) add("train_a", mib);
  for (long long mib : {9 * 1024, 8 * 1024, 10 * 1024}) add("eval_a", mib);
  std::vector<Learned> learned = learn_estimates(attempts, plan);
  ASSERT_EQ(learned.size(), 2u);
  EXPECT_EQ(learned[1].prefix, "train_");
  EXPECT_EQ(learned[1].peak_runs, 3u);
  EXPECT_DOUBLE_EQ(learned[1].peak_gib, 14);
  EXPECT_DOUBLE_EQ(learned[1].peak_max_gib, 20);
  std::vector<EstimateWarning> w = memory_warnings(plan, State{}, learned, 76);
  std::map<std::string, std::string> by_job;
  for (auto& x : w) by_job[x.job] = x.text;
  EXPECT_EQ(by_job.size(), 3u) << "train_a under its peak; eval_a and eval_b could share; train_b is fine";
  EXPECT_THAT(by_job["train_a"], ::testing::HasSubstr("gpu_mem_gib 10 is less than the 3 train_* runs"));
  EXPECT_THAT(by_job["train_a"], ::testing::HasSubstr("at least 20"));
  EXPECT_THAT(by_job["eval_b"], ::testing::HasSubstr("\"gpu_mem_gib\": 11 would let 6 such jobs share a GPU"));
  EXPECT_EQ(by_job.count("train_b"), 0u);
}

TEST(PackMemory, GpuTotalsAreNvmlsMibInGibByGpuIdAndNoneWithoutThem) {
  GpuReading r;
  EXPECT_TRUE(gpu_totals_gib(r).empty());
  r.total_mib = {{0, 81920}, {3, 40960}, {99, 1}};
  std::vector<double> t = gpu_totals_gib(r);
  ASSERT_EQ(t.size(), static_cast<size_t>(kMaxGpuId + 1));
  EXPECT_DOUBLE_EQ(t[0], 80);
  EXPECT_DOUBLE_EQ(t[3], 40);
  EXPECT_DOUBLE_EQ(t[1], 0) << "no total: Policy::gpu_room takes --gpu-mem-gib";
}

// A job that packs with more GiB than any GPU takes: validate refuses it; run says once that it
// never starts and runs the rest; status says "never" with the same words.
TEST(PackRun, AJobTooBigForAnyGpuIsSaidOnceByRunAndStatusSaysNever) {
  PlanFolder pf(2);
  pf.d.write("job.sh", "sleep 0.2\n", 0755);
  pf.plan(R"([{"id": "ok", "script": "job.sh", "gpus": 1, "gpu_mem_gib": 20, "est_hours": 0.001},
              {"id": "big", "script": "job.sh", "gpus": 1, "gpu_mem_gib": 90, "est_hours": 0.001}])");
  const std::string words = "big needs 90 GiB on a GPU, more than any takes (80 GiB less --gpu-mem-headroom 5%: 76.0)";
  Output v = pf.gpuq({"validate", "--gpus", "0,1"});
  EXPECT_EQ(v.status, 2) << v.out << v.err;
  auto run = pf.background({"run", "--gpus", "0,1", "--poll", "0.2", "--node-dir", "off"});
  ASSERT_TRUE(eventually([&] { return pf.status_of("ok") == "done"; }, kPatience)) << run->out();
  ASSERT_TRUE(eventually([&] { return run->out().find("never starts here") != std::string::npos; }, kPatience));
  std::string out = run->out();
  EXPECT_THAT(out, ::testing::HasSubstr(words + ": it never starts here")) << out;
  EXPECT_EQ(out.find("never starts here"), out.rfind("never starts here")) << "said once:\n" << out;
  Output s = pf.gpuq({"status", "--gpus", "0,1"});
  EXPECT_THAT(s.out, ::testing::ContainsRegex("big +pending +never +never: needs 90 GiB on a GPU, more than any takes"))
      << s.out;
  run->signal(SIGTERM);
  run->wait(kPatience);
}
