// One end-to-end test per setting flag no other test passes on the command line: each runs the
// built binary with the flag, and fails if the flag were ignored (its default would do otherwise).
// The --slurm flags that reach sbatch (--account, --qos, --time-margin) are in
// slurm_fake_test.cpp, beside the fake Slurm they need; history --since in journal_test.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gpuq::test;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

namespace {

// --time-limit-factor F: a job without time_limit_hours is stopped at F x est_hours (default 0:
// no limit, and the job would end done).
TEST(Flags, TimeLimitFactorStopsAJobAtThatManyTimesItsEstimate) {
  PlanFolder f(1);
  f.d.write("slow.sh", "sleep 30\n");
  f.d.write("plan.json", R"([{"id": "slow", "script": "slow.sh", "gpus": 1, "est_hours": 0.0002}])");
  Output o = f.gpuq({"run", "--time-limit-factor", "2", "--max-retries", "0", "--kill-grace", "1", "--poll", "1"});
  EXPECT_EQ(o.status, 3) << o.out << o.err;  // 3: it ended, not done
  EXPECT_THAT(o.out, HasSubstr("timed out slow after"));
  EXPECT_EQ(f.state()["slow"]["outcome"], "timeout") << f.state().dump();
}

// --quiet-minutes M: the hang watchdog watches every job (default 0: off, nothing said).
TEST(Flags, QuietMinutesWatchesAJobThatPrintsNothing) {
  PlanFolder f(1);
  f.d.write("quiet.sh", "sleep 6\n");
  f.d.write("plan.json", R"([{"id": "quiet", "script": "quiet.sh", "gpus": 1, "est_hours": 0.01}])");
  Output o = f.gpuq({"run", "--quiet-minutes", "0.03", "--poll", "1"});
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("hung? quiet: "));
  EXPECT_THAT(o.out, HasSubstr("(quiet_minutes 0.03)"));
}

// --events-max-mb: past that size the event log goes on in a new file (default 64 MB: one file).
TEST(Flags, EventsMaxMbStartsANewEventLogPastThatSize) {
  PlanFolder f(2);
  f.d.write("job.sh", "true\n");
  std::string jobs;
  for (int i = 0; i < 30; ++i)
    jobs += fmt::format(R"({}{{"id": "j{}", "script": "job.sh", "gpus": 1, "est_hours": 0.01}})", i ? "," : "", i);
  f.d.write("plan.json", "[" + jobs + "]");
  Output o = f.gpuq({"run", "--events-max-mb", "0.002", "--poll", "1"});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_FALSE(f.d.read("plan.events.jsonl.1").empty()) << "no second part";
  // Each part stops near the limit (run starts a new one at its next look past it; a busy
  // machine may let a tick's few events in first), far from the whole log.
  size_t whole = f.d.read("plan.events.jsonl.1").size() + f.d.read("plan.events.jsonl").size();
  for (size_t k = 2; !f.d.read(fmt::format("plan.events.jsonl.{}", k)).empty(); ++k)
    whole += f.d.read(fmt::format("plan.events.jsonl.{}", k)).size();
  EXPECT_GT(whole, 3 * 2100u);  // 60 events: several parts' worth
  EXPECT_LT(f.d.read("plan.events.jsonl.1").size(), whole - 2100) << "the first part is not most of the log";
  // history reads every part: 30 jobs, each once.
  Output h = f.gpuq({"history", "--json"});
  ASSERT_EQ(h.status, 0) << h.err;
  json doc = json::parse(h.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << h.out;
  size_t attempts = 0;
  for (auto& a : doc.is_array() ? doc : doc["attempts"]) attempts += a.is_object();
  EXPECT_EQ(attempts, 30u) << h.out.substr(0, 600);
}

// --nvidia-smi PATH: the GPU reading comes from that command (no $GPUQ_NVIDIA_SMI here): GPU 0
// holds 30 GiB of another's, so the job goes on GPU 1.
TEST(Flags, NvidiaSmiReadsTheNodeThroughThatCommand) {
  TempDir d;
  d.write("smi.sh", "#!/bin/sh\nprintf '0, 30000\\n1, 0\\n'\n", 0755);
  d.write("job.sh", "echo \"$CUDA_VISIBLE_DEVICES\" > gpus.txt\n");
  d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 1, "est_hours": 0.01}])");
  Output o = run_gpuq({"run", "--plan", "plan.json", "--nvidia-smi", d.path() + "/smi.sh", "--gpus", "0-1",
                       "--gpu-probe", "nvidia-smi", "--poll", "1"},
                      d.path(), {{"GPUQ_NVIDIA_SMI", "/nonexistent/nvidia-smi"}});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_EQ(d.read("gpus.txt"), "1\n") << o.out;
  EXPECT_THAT(o.out, HasSubstr("GPU 0 busy"));
}

// --ignore-process NAME: a GPU that only a process of that name holds is free (default: busy).
// The fake NVML lists this test's own process on GPU 0.
TEST(Flags, IgnoreProcessFreesAGpuThatOnlyThatProcessHolds) {
  std::string name;
  {
    std::ifstream comm("/proc/self/comm");
    std::getline(comm, name);
  }
  TempDir d;
  json devs = json::array();
  for (int k = 0; k < 2; ++k)
    devs.push_back({{"bus_id", fmt::format("00000000:{:02X}:00.0", 0x18 + 0x10 * k)}, {"name", "NVIDIA A100"},
                    {"total_mib", 81559}, {"used_mib", k == 0 ? 2000 : 5}, {"util", 0}});
  devs[0]["processes"] = {{{"pid", ::getpid()}, {"used_mib", 2000}}};
  std::string nvml = d.write("nvml.json", json{{"devices", devs}}.dump());
  std::map<std::string, std::string> env{{"GPUQ_NVML_LIB", FAKE_NVML}, {"GPUQ_FAKE_NVML", nvml}};
  d.write("job.sh", "echo \"$CUDA_VISIBLE_DEVICES\" > \"$GPUQ_JOB_ID.gpus\"\n");
  d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 1, "est_hours": 0.01}])");
  Output plain = run_gpuq({"run", "--plan", "plan.json", "--gpus", "0-1", "--poll", "1", "--max-used-mib", "4000"},
                          d.path(), env);
  ASSERT_EQ(plain.status, 0) << plain.out << plain.err;
  EXPECT_EQ(d.read("a.gpus"), "1\n") << plain.out;  // GPU 0 is another's
  std::filesystem::remove(d.path() + "/plan.state.json");
  Output ignoring = run_gpuq({"run", "--plan", "plan.json", "--gpus", "0-1", "--poll", "1", "--ignore-process", name,
                              "--max-used-mib", "4000"},
                             d.path(), env);
  ASSERT_EQ(ignoring.status, 0) << ignoring.out << ignoring.err;
  EXPECT_EQ(d.read("a.gpus"), "0\n") << ignoring.out;
  EXPECT_THAT(ignoring.out, Not(HasSubstr("GPU 0 busy")));
}

}  // namespace
