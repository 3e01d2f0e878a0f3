// Energy per job (issue 53, part 3): each GPU's energy counter rise shared among the jobs on it
// (gpu_use.h's share_energy), and history's lines per job and plan (history_text.h). The run
// through the fake NVML is in nvml_test.cpp.
#include <gmock/gmock.h>

#include "gpuq/core/gpu_use.h"
#include "gpuq/core/node.h"
#include "gpuq/views/gpus_text.h"
#include "test_util.h"
#include "gpuq/views/history_text.h"

using namespace gpuq;
using gpuq::test::running_entry;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

Attempt ended(const std::string& id, std::optional<long long> joules) {
  Attempt a;
  a.id = id;
  a.start = 0;
  a.end = 100;
  a.outcome = "done";
  a.energy_j = joules;
  return a;
}

}  // namespace

TEST(Energy, AWholeGpuTakesItsRiseAndPackedJobsShareByTheirDeclaredGib) {
  State st;
  st.set("wide", running_entry({0, 1}));
  st.set("a", running_entry({2}));
  st.set("b", running_entry({2}));
  JobState done = running_entry({3});
  done.status = Status::Done;
  st.set("gone", done);
  std::map<std::string, double> gib{{"a", 10}, {"b", 30}};
  std::function<double(const std::string&)> declared = [&](const std::string& id) {
    return gib.count(id) ? gib[id] : 0.0;
  };
  // mJ: GPU 0 rises 300 kJ, GPU 1 100 kJ, GPU 2 40 kJ, GPU 3 (no job runs there) 7 kJ.
  std::map<int, unsigned long long> before{{0, 1000000}, {1, 0}, {2, 5000}, {3, 0}};
  std::map<int, unsigned long long> after{{0, 301000000}, {1, 100000000}, {2, 40005000}, {3, 7000000}};
  share_energy(before, after, st, declared);
  EXPECT_EQ(st.find("wide")->energy_j, 400000);
  EXPECT_EQ(st.find("a")->energy_j, 10000);  // 10 of 40 GiB declared
  EXPECT_EQ(st.find("b")->energy_j, 30000);
  EXPECT_FALSE(st.find("gone")->energy_j);
  // A counter that fell (the driver reloaded) or a GPU missing from a reading gives nothing;
  // the jobs keep what they had.
  share_energy(after, {{0, 5}, {2, 40005000}}, st, declared);
  EXPECT_EQ(st.find("wide")->energy_j, 400000);
  EXPECT_EQ(st.find("a")->energy_j, 10000);  // read, rose by 0: known, and still 10 kJ
  // The first reading only: nothing before it to rise from.
  State fresh;
  fresh.set("c", running_entry({0}));
  share_energy({}, after, fresh, declared);
  EXPECT_FALSE(fresh.find("c")->energy_j);
}

TEST(Energy, HistorySumsPerJobAndPlanWithTheFactorAndSaysWhenThereIsNone) {
  std::vector<Attempt> attempts{ended("train", 3600000), ended("train", 1800000), ended("eval", 360000),
                                ended("old", std::nullopt)};
  Attempt running = ended("train", 99999999);
  running.end.reset();  // its energy comes with its end
  attempts.push_back(running);
  std::string text = energy_text(attempts, 0, "");
  EXPECT_THAT(text, HasSubstr("train                       2 attempts       1.50 kWh\n"));
  EXPECT_THAT(text, HasSubstr("eval                        1 attempt       0.100 kWh\n"));
  EXPECT_THAT(text, HasSubstr("the plan                    3 attempts       1.60 kWh\n"));
  EXPECT_THAT(text, HasSubstr("(1 ended attempt without a reading: not counted)"));
  EXPECT_THAT(text, Not(HasSubstr(" x ")));
  std::string priced = energy_text(attempts, 0.35, "kg CO2e");
  EXPECT_THAT(priced, HasSubstr("1.50 kWh x 0.35 = 0.525 kg CO2e"));
  EXPECT_THAT(priced, HasSubstr("1.60 kWh x 0.35 = 0.560 kg CO2e"));
  // No reading at all: said, and no kWh shown, never a 0.
  std::string none = energy_text({ended("a", std::nullopt)}, 0.35, "EUR");
  EXPECT_THAT(none, HasSubstr("GPU energy: no attempt has a reading"));
  EXPECT_THAT(none, Not(HasSubstr("kWh")));
  EXPECT_EQ(energy_text({}, 0, ""), "");
  // Each attempt's row says its own.
  AttemptOutcome outcome = [](const Attempt& a) { return a.outcome.value_or("?"); };
  EXPECT_THAT(attempts_text({ended("eval", 360000)}, outcome, 100), HasSubstr("done, 0.100 kWh"));
  EXPECT_THAT(attempts_text({ended("old", std::nullopt)}, outcome, 100), Not(HasSubstr("kWh")));
  EXPECT_THAT(attempts_json({ended("old", std::nullopt)}, outcome), HasSubstr("\"energy_kwh\": null"));
}

TEST(IdleHolders, AProcessOfNoJobOnAnIdleGpuKeepsItsSinceUntilTheGpuWorksOrItGoes) {
  std::map<int, std::vector<GpuProcess>> foreign{{1, {GpuProcess{.pid = 42, .used_mib = 2000, .name = "python",
                                                                 .command = "python nb.py", .user = "ana"}}},
                                                 {2, {GpuProcess{.pid = 43, .used_mib = 0}}}};
  std::vector<IdleHolder> seen = note_idle_holders({}, foreign, {{1, 0}, {2, 0}}, 5, 100);
  ASSERT_EQ(seen.size(), 1u);  // 43 holds no memory there
  EXPECT_EQ(seen[0], (IdleHolder{1, 42, "ana", "python", "python nb.py", 2000, 100}));
  seen = note_idle_holders(seen, foreign, {{1, 5}}, 5, 200);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].since, 100);  // still idle: since its first idle reading
  EXPECT_TRUE(note_idle_holders(seen, foreign, {{1, 6}}, 5, 300).empty());  // the GPU works
  EXPECT_TRUE(note_idle_holders(seen, foreign, {}, 5, 300).empty());        // no utilization: not known
  EXPECT_TRUE(note_idle_holders(seen, {}, {{1, 0}}, 5, 300).empty());       // it has gone
  // Two runs that saw it: the earliest since.
  IdleHolder later = seen[0];
  later.since = 150;
  std::vector<IdleHolder> merged = merge_idle_holders({{later}, seen});
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].since, 100);
  // Named only past the threshold.
  EXPECT_EQ(idle_holders_text(merged, 100 + 1799, 1800, 5), "");
  EXPECT_THAT(idle_holders_text(merged, 100 + 3 * 3600, 1800, 5),
              HasSubstr("GPU 1: ana's process 42 `python nb.py`, 2000 MiB, at or below 5% for 3.0 h (since "));
}

TEST(IdleHolders, TheNodeFileKeepsThemAndAnOlderFileReadsAsBefore) {
  NodeUser u;
  u.name = "ana";
  NodeRun r;
  r.plan = "/p/plan.json";
  r.pid = 4242;
  r.idle_holders = {IdleHolder{3, 77, "bo", "python", "python x.py", 1000, 12.5}};
  u.runs.push_back(r);
  std::string text = write_node_user(u);
  std::string problem;
  std::optional<NodeUser> back = read_node_user(text, "ana", 0xff, &problem, nullptr);
  ASSERT_TRUE(back) << problem << text;
  ASSERT_EQ(back->runs.size(), 1u);
  EXPECT_EQ(back->runs[0].idle_holders, r.idle_holders);
  r.idle_holders.clear();
  u.runs = {r};
  EXPECT_EQ(write_node_user(u).find("idle_processes"), std::string::npos);
}
