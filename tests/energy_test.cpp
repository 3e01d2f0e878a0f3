// Energy per job (issue 53, part 3): each GPU's energy counter rise shared among the jobs on it
// (gpu_use.h's share_energy), and history's lines per job and plan (history_text.h). The run
// through the fake NVML is in nvml_test.cpp.
#include <gmock/gmock.h>

#include "gpuq/core/gpu_use.h"
#include "gpuq/views/history_text.h"

using namespace gpuq;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

JobState on(std::vector<int> gpus) {
  JobState s;
  s.status = Status::Running;
  s.pid = 1000;
  s.start = 0;
  s.gpus = std::move(gpus);
  return s;
}

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
  st.set("wide", on({0, 1}));
  st.set("a", on({2}));
  st.set("b", on({2}));
  JobState done = on({3});
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
  fresh.set("c", on({0}));
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
