// Host memory against real jobs (issue 45, points 4-5): `run` samples the resident memory of the
// process tree of each job with mem_gib and stops one that grows past it (outcome "over memory")
// while a job declared large beside it is untouched; a job whose log ends with a CUDA
// out-of-memory ends "oom (GPU)"; a SIGKILL the kernel log records as an OOM kill of one of the
// job's processes ends "oom (host)". Each waits on `run` ending, not on sleeps.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "gpuq/live/cgroup.h"
#include "gpuq/live/proc.h"
#include "test_util.h"

using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

struct MemQueue : PlanFolder {
  MemQueue() : PlanFolder(1) {}
  Output run(const std::string& text, std::vector<std::string> extra = {}) {
    plan(text);
    // The sampling alone (the cgroups of --mem-cgroup auto: HostMemCgroup below).
    std::vector<std::string> args{"run", "--gpus", "0", "--poll", "0.2", "--kill-grace", "2", "--node-mem-gib", "8",
                                  "--max-retries", "0", "--node-dir", "off", "--mem-cgroup", "off"};
    args.insert(args.end(), extra.begin(), extra.end());
    return background(args)->wait(kPatience);
  }
};

// A Python that holds `mib` MiB resident (bytes filled, so every page is touched) for `seconds`.
std::string holder(int mib, double seconds) {
  return fmt::format("python3 -c 'import time; x = b\"\\1\" * ({} * 2**20); time.sleep({})'\n", mib, seconds);
}

}  // namespace

TEST(HostMemRun, AJobGrowingPastItsMemGibIsStoppedOverMemoryAndTheOtherIsUntouched) {
  MemQueue q;
  q.d.write("big.sh", "echo start\n" + holder(400, 30));
  q.d.write("small.sh", holder(120, 3));
  auto t0 = std::chrono::steady_clock::now();
  Output r = q.run(R"([{"id": "big", "script": "big.sh", "gpus": 0, "mem_gib": 0.25},
                      {"id": "small", "script": "small.sh", "gpus": 0, "mem_gib": 4}])");
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.status, 3) << r.out << r.err;  // 3: a job did not end done
  EXPECT_LT(took, 20) << "stopped long after it grew: " << r.out;
  json big = q.state()["big"], small = q.state()["small"];
  EXPECT_EQ(big["status"], "failed");
  EXPECT_EQ(big["outcome"], "over memory");
  EXPECT_EQ(big["exit"], -15);  // as a time limit's: not retried automatically
  ASSERT_TRUE(big.contains("mem_peak_mib")) << big;
  EXPECT_GT(big["mem_peak_mib"].get<long long>(), 0.275 * 1024);  // past 0.25 GiB + 10%
  EXPECT_LT(big["mem_peak_mib"].get<long long>(), 600);
  EXPECT_LT(big["end"].get<double>() - big["start"].get<double>(), 15);
  // The line says why, with the numbers.
  EXPECT_THAT(r.out, HasSubstr("stopped big: over memory: "));
  EXPECT_THAT(r.out, HasSubstr(" GiB resident, its mem_gib is 0.25 (+10%); SIGTERM to process group"));
  EXPECT_THAT(r.out, HasSubstr("1 failed (big: over memory)"));
  EXPECT_THAT(r.out, HasSubstr("host memory of jobs with mem_gib: sampled only (--mem-cgroup off)"));
  EXPECT_FALSE(big.contains("mem_cgroup_peak_mib"));  // never in a cgroup
  EXPECT_THAT(q.d.read("logs/big.log"), HasSubstr("gpuq] over memory: "));
  // The job declared large ran to its end, its peak kept (its 120 MiB, and Python's own).
  EXPECT_EQ(small["status"], "done");
  EXPECT_FALSE(small.contains("outcome"));
  ASSERT_TRUE(small.contains("mem_peak_mib")) << small;
  EXPECT_GE(small["mem_peak_mib"].get<long long>(), 120);
  EXPECT_LT(small["mem_peak_mib"].get<long long>(), 400);
  // The event log, history and status say it too.
  std::string events = q.d.read("plan.events.jsonl");
  EXPECT_THAT(events, HasSubstr(R"("outcome":"over memory")"));
  EXPECT_THAT(events, HasSubstr(R"("mem_peak_mib":)"));
  Output h = q.gpuq({"history"});
  EXPECT_THAT(h.out, HasSubstr("over memory (exit -15), host peak "));
  Output s = q.gpuq({"status"});
  EXPECT_THAT(s.out, HasSubstr("stopped over memory: "));
  EXPECT_THAT(s.out, HasSubstr("its mem_gib is 0.25"));
}

TEST(HostMemRun, AJobWithoutMemGibIsNeverSampledNorStopped) {
  MemQueue q;
  q.d.write("big.sh", holder(300, 1));
  Output r = q.run(R"([{"id": "big", "script": "big.sh", "gpus": 0}])", {"--mem-margin-percent", "0"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  json big = q.state()["big"];
  EXPECT_EQ(big["status"], "done");
  EXPECT_FALSE(big.contains("mem_peak_mib"));  // not sampled at all
  EXPECT_THAT(r.out, Not(HasSubstr("over memory")));
}

TEST(HostMemRun, ACudaOutOfMemoryInTheLogEndsOomGpu) {
  MemQueue q;
  q.d.write("train.sh", R"(echo "epoch 1"
echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB"
exit 1
)");
  q.d.write("other.sh", "echo 'RuntimeError: something else'\nexit 1\n");
  Output r = q.run(R"([{"id": "train", "script": "train.sh", "gpus": 1}, {"id": "other", "script": "other.sh", "gpus": 0}])");
  ASSERT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_EQ(q.state()["train"]["outcome"], "oom (GPU)");
  EXPECT_EQ(q.state()["train"]["exit"], 1);
  EXPECT_FALSE(q.state()["other"].contains("outcome"));  // a plain failure stays one
  EXPECT_THAT(r.out, HasSubstr("out of memory (GPU: its log says so)"));
  EXPECT_THAT(q.d.read("plan.events.jsonl"), HasSubstr(R"x("outcome":"oom (GPU)")x"));
  EXPECT_THAT(q.gpuq({"history"}).out, HasSubstr("oom (GPU) (exit 1)"));
  EXPECT_THAT(q.gpuq({"status"}).out, HasSubstr("out of memory (GPU: its log says so; exit 1)"));
}

// The kernel's OOM killer, told from its log. A real OOM kill needs memory pressure or a cgroup
// this test may not make; so the job writes the line the kernel writes for one of its own processes
// into the kernel log (/dev/kmsg takes records from root) and kills itself with SIGKILL: what gpuq
// reads (/dev/kmsg, without blocking) and how it matches the pid are exercised; the kernel's own
// kill is not. Skipped where /dev/kmsg cannot be read or written (a container, not root).
TEST(HostMemRun, ASigkillTheKernelLogRecordsAsAnOomKillEndsOomHost) {
  if (!gpuq::kernel_log() || ::access("/dev/kmsg", W_OK) != 0)
    GTEST_SKIP() << "/dev/kmsg cannot be read or written here: the oom (host) path is not exercised";
  MemQueue q;
  // Sampled (a mem_gib), so that run knows the pid of the job's bash; then the line, then SIGKILL.
  q.d.write("job.sh", R"x(sleep 1.5
echo "<3>Out of memory: Killed process $$ (bash) total-vm:1000kB, anon-rss:900kB (gpuq test)" > /dev/kmsg
kill -9 $$
)x");
  q.d.write("plain.sh", "sleep 0.5\nkill -9 $$\n");
  Output r = q.run(R"([{"id": "job", "script": "job.sh", "gpus": 0, "mem_gib": 4},
                      {"id": "plain", "script": "plain.sh", "gpus": 0, "mem_gib": 4}])");
  ASSERT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_EQ(q.state()["job"]["exit"], 137);
  EXPECT_EQ(q.state()["job"]["outcome"], "oom (host)") << r.out;
  EXPECT_FALSE(q.state()["plain"].contains("outcome"));  // a SIGKILL with no OOM kill of its own
  EXPECT_THAT(r.out, HasSubstr("out of memory (host: the kernel's OOM killer)"));
}

// on_oom (issue 45, point 6): a job that runs out of GPU memory at BATCH_SIZE 64 is run again at
// once with it halved and more host memory, which it sees; history shows both attempts' values.
TEST(HostMemRun, OnOomRunsAGpuOutOfMemoryAgainWithTheChangedValuesTheJobSees) {
  MemQueue q;
  q.d.write("train.sh", R"(echo "$BATCH_SIZE $GPUQ_ATTEMPT $GPUQ_MEM_GIB" >> seen
if [ "$BATCH_SIZE" -gt 40 ]; then
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
  exit 1
fi
)");
  Output r = q.run(R"([{"id": "train", "script": "train.sh", "gpus": 1, "mem_gib": 1, "env": {"BATCH_SIZE": 64},
                       "on_oom": {"retries": 2, "mem_factor": 1.5, "env": {"BATCH_SIZE": "half"}}}])");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(lines_of(q.d.path() + "/seen"), (std::vector<std::string>{"64 1 1", "32 2 1.5"}));
  json t = q.state()["train"];
  EXPECT_EQ(t["status"], "done");
  EXPECT_EQ(t["oom_retries"], 1);
  EXPECT_EQ(t["oom_values"], "mem_gib 1.5, BATCH_SIZE=32");
  EXPECT_EQ(t["attempts"], 0);  // no automatic retry spent (--max-retries 0)
  EXPECT_EQ(t["attempt"], 2);
  EXPECT_THAT(r.out, HasSubstr("out of memory (GPU: its log says so); on_oom runs it again at once (retry 1 of 2: "
                               "mem_gib 1.5, BATCH_SIZE=32)"));
  Output h = q.gpuq({"history"});
  EXPECT_THAT(h.out, HasSubstr("oom (GPU) (exit 1)"));
  // The host peak is there where the job's cgroup or the sampling saw one (a cgroup's memory.peak
  // always does; this machine's sampling may not, for a job that short).
  EXPECT_THAT(h.out, ::testing::ContainsRegex("done(, host peak [0-9.]+ GiB)?, on_oom: mem_gib 1\\.5, BATCH_SIZE=32"));
  json hj = json::parse(q.gpuq({"history", "--json"}).out);
  ASSERT_EQ(hj.size(), 2u) << hj;
  EXPECT_EQ(hj[0]["outcome"], "oom (GPU)");
  EXPECT_FALSE(hj[0].contains("on_oom"));
  EXPECT_EQ(hj[1]["on_oom"], "mem_gib 1.5, BATCH_SIZE=32");
}

// A job stopped over memory runs again once its processes are gone, with the memory on_oom gives;
// the second attempt (350 MiB) is over the plan's 0.25 GiB but not its own 0.5: it is not stopped
// (the limit was the plan's once: CI's sanitized wrapper pushed a 200 MiB attempt past it).
TEST(HostMemRun, OnOomRunsAJobStoppedOverMemoryAgainWithMoreMemory) {
  MemQueue q;
  q.d.write("big.sh", "echo $MB >> seen\n" + std::string("python3 -c \"import os, time; x = b'\\1' * (int(os.environ['MB']) * 2**20); time.sleep(1.5)\"\n"));
  Output r = q.run(R"([{"id": "big", "script": "big.sh", "gpus": 0, "mem_gib": 0.25, "env": {"MB": 700},
                       "on_oom": {"mem_factor": 2, "env": {"MB": "half"}}}])");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(lines_of(q.d.path() + "/seen"), (std::vector<std::string>{"700", "350"}));
  EXPECT_THAT(r.out, HasSubstr("stopped big: over memory: "));
  EXPECT_THAT(r.out, HasSubstr("on_oom runs it again once its processes are gone"));
  EXPECT_THAT(r.out, HasSubstr("big's processes are gone: on_oom runs it again (retry 1 of 1: mem_gib 0.5, MB=350)"));
  json b = q.state()["big"];
  EXPECT_EQ(b["status"], "done");
  EXPECT_EQ(b["oom_retries"], 1);
  EXPECT_GT(b["mem_peak_mib"].get<long long>(), 0.25 * 1.1 * 1024);  // the second attempt's own peak, past the
                                                                        // plan's limit, under 0.5 GiB + 10%
  EXPECT_LT(b["mem_peak_mib"].get<long long>(), 0.55 * 1024);
  EXPECT_THAT(q.gpuq({"history"}).out, HasSubstr("over memory (exit -15)"));
}

// The peaks of real runs, learned: history --estimates gives each prefix's, and validate warns of a
// pending job whose mem_gib is under them.
TEST(HostMemRun, HistoryEstimatesGiveTheHostPeakAndValidateWarnsOfAMemGibUnderIt) {
  MemQueue q;
  q.d.write("prep.sh", holder(200, 0.8));
  Output r = q.run(R"([{"id": "prep_1", "script": "prep.sh", "gpus": 0, "mem_gib": 1},
                      {"id": "prep_2", "script": "prep.sh", "gpus": 0, "mem_gib": 1},
                      {"id": "prep_3", "script": "prep.sh", "gpus": 0, "mem_gib": 1}])");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  Output est = q.gpuq({"history", "--estimates"});
  EXPECT_THAT(est.out, HasSubstr("Host memory peak of the job's processes (jobs with mem_gib), from the same runs:"));
  EXPECT_THAT(est.out, ::testing::ContainsRegex("\nprep_ +3 +0\\.[1-4][0-9] GiB +0\\.[1-4][0-9] GiB\n"));
  json ej = json::parse(q.gpuq({"history", "--estimates", "--json"}).out);
  ASSERT_EQ(ej.size(), 1u) << ej;
  EXPECT_GT(ej[0]["highest_host_peak_gib"].get<double>(), 0.19);
  EXPECT_LT(ej[0]["highest_host_peak_gib"].get<double>(), 0.5);
  // A new job of the prefix that declares less than they held.
  q.plan(R"([{"id": "prep_1", "script": "prep.sh", "gpus": 0, "mem_gib": 1},
             {"id": "prep_2", "script": "prep.sh", "gpus": 0, "mem_gib": 1},
             {"id": "prep_3", "script": "prep.sh", "gpus": 0, "mem_gib": 1},
             {"id": "prep_4", "script": "prep.sh", "gpus": 0, "mem_gib": 0.1}])");
  Output v = q.gpuq({"validate"});
  EXPECT_THAT(v.out + v.err, HasSubstr("prep_4"));
  EXPECT_THAT(v.out + v.err, HasSubstr("mem_gib 0.1 is less than the 3 prep_* runs in the event log held at the most"));
}

// --mem-cgroup auto (the default), on whatever this node allows (cgroup.h): where gpuq may make a
// cgroup (root, with the v1 memory controller or cgroup v2), a job that allocates past its limit at
// once, faster than any sampling, is killed by the kernel inside its own group and ends "over
// memory"; its group's peak is kept, the group removed, and a process that left the job's process
// group (setsid) is killed with it. Where it may not, the run says so and the sampling stops the job.
TEST(HostMemCgroup, AJobPastItsLimitIsKilledInItsOwnCgroupOrStoppedByTheSampling) {
  gpuq::Cgroups node = gpuq::look_at_cgroups(false);
  std::printf("this node: %s\n", node.why.c_str());
  MemQueue q;
  q.d.write("big.sh", "setsid sleep 300 &\necho $! > escaped.pid\n" + holder(400, 30));
  q.d.write("small.sh", holder(60, 0.5));
  q.plan(R"([{"id": "big", "script": "big.sh", "gpus": 0, "mem_gib": 0.25},
             {"id": "small", "script": "small.sh", "gpus": 0, "mem_gib": 2}])");
  // --poll 3: run's first sample of big comes seconds after its start, long after the kernel
  // killed it (a sample in the middle of its allocation could stop it first: its tree's resident
  // memory counts the wrapper's pages, which its group was never charged for; CI's sanitized
  // wrapper is large).
  Output r = q.background({"run", "--gpus", "0", "--poll", "3", "--kill-grace", "2", "--node-mem-gib", "8",
                           "--max-retries", "0", "--node-dir", "off"})
                 ->wait(kPatience);
  ASSERT_EQ(r.status, 3) << r.out << r.err;
  json big = q.state()["big"], small = q.state()["small"];
  EXPECT_EQ(big["outcome"], "over memory") << r.out;
  EXPECT_EQ(small["status"], "done") << r.out;
  EXPECT_FALSE(big.contains("cgroup")) << big;  // removed, once it ended
  EXPECT_FALSE(small.contains("cgroup")) << small;
  long long escaped = std::stoll(q.d.read("escaped.pid"));
  if (node.kind == gpuq::Cgroups::Kind::None) {
    EXPECT_THAT(r.out, HasSubstr("host memory of jobs with mem_gib: sampled only (" + node.why + ")"));
    EXPECT_EQ(big["exit"], -15);  // the sampling's stop
    EXPECT_FALSE(big.contains("mem_cgroup_peak_mib"));
    ::kill(static_cast<pid_t>(escaped), SIGKILL);
    return;
  }
  EXPECT_THAT(r.out, HasSubstr("host memory of jobs with mem_gib: sampled, and held by the kernel: " + node.why));
  EXPECT_EQ(big["exit"], 137) << r.out;  // the kernel's SIGKILL, in its group, before any sample
  EXPECT_THAT(r.out, HasSubstr("failed big (exit 137): over memory (the kernel's OOM killer in its cgroup, whose "
                               "limit is its mem_gib plus --mem-margin-percent)"));
  EXPECT_THAT(r.out, HasSubstr("1 failed (big: over memory)"));
  // Its group's peak: up to its limit, 0.25 GiB + 10% (282 MiB), and past what the job held before.
  ASSERT_TRUE(big.contains("mem_cgroup_peak_mib")) << big;
  EXPECT_GT(big["mem_cgroup_peak_mib"].get<long long>(), 200);
  EXPECT_LE(big["mem_cgroup_peak_mib"].get<long long>(), 282);
  ASSERT_TRUE(small.contains("mem_cgroup_peak_mib")) << small;
  EXPECT_GE(small["mem_cgroup_peak_mib"].get<long long>(), 60);
  // No group of theirs is left, and what escaped their process groups is gone with them.
  for (const std::string& id : {"big", "small"})
    for (const auto& e : fs::directory_iterator(node.parent))
      EXPECT_NE(e.path().filename().string().rfind(id + ".", 0), 0u) << e.path() << " was left";
  EXPECT_TRUE(eventually([&] { return !gpuq::process_alive(escaped, std::nullopt); }))
      << "the process that left big's process group (pid " << escaped << ") is alive";
  ::kill(static_cast<pid_t>(escaped), SIGKILL);
  // The event log has the outcome; history says it.
  EXPECT_THAT(q.d.read("plan.events.jsonl"), HasSubstr(R"("outcome":"over memory")"));
  EXPECT_THAT(q.gpuq({"history"}).out, HasSubstr("over memory (exit 137)"));
}

// What a group's files say, read as the kernel writes them: v2's memory.events and memory.peak,
// v1's memory.oom_control and memory.max_usage_in_bytes (a folder of plain files here).
TEST(HostMemCgroup, ReadsTheOomKillsAndThePeakOfAV1OrV2Group) {
  TempDir v2, v1, none;
  v2.write("memory.events", "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n");
  v2.write("memory.peak", "295047168\n");
  v1.write("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  v1.write("memory.max_usage_in_bytes", "104857600\n");
  EXPECT_EQ(gpuq::cgroup_oom_kills(v2.path()), 2);
  EXPECT_EQ(gpuq::cgroup_peak_bytes(v2.path()), 295047168);
  EXPECT_EQ(gpuq::cgroup_oom_kills(v1.path()), 1);
  EXPECT_EQ(gpuq::cgroup_peak_bytes(v1.path()), 104857600);
  v1.write("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");  // a kernel before 4.13: no count
  EXPECT_EQ(gpuq::cgroup_oom_kills(v1.path()), std::nullopt);
  EXPECT_EQ(gpuq::cgroup_oom_kills(none.path() + "/gone"), std::nullopt);
  EXPECT_EQ(gpuq::cgroup_peak_bytes(none.path() + "/gone"), std::nullopt);
  EXPECT_TRUE(gpuq::remove_cgroup(none.path() + "/gone"));  // gone already: nothing to wait for
  EXPECT_FALSE(gpuq::kill_cgroup(none.path() + "/gone"));
}

// Learned sizes (issue 45, point 7): each attempt's CPU time (user + system of what its script
// waited for, read by its wrapper) is kept in its state entry and end event, and history
// --estimates gives each prefix's median and the cores its runs kept busy. A job that sleeps used
// next to none.
TEST(HostMemRun, EachAttemptsCpuTimeIsKeptAndHistoryEstimatesGiveItPerPrefix) {
  MemQueue q;
  q.d.write("burn.sh", "python3 -c 'import time\nt = time.process_time()\nwhile time.process_time() - t < 1.6: pass'\n");
  q.d.write("nap.sh", "sleep 1.2\n");
  Output r = q.run(R"([{"id": "burn_1", "script": "burn.sh", "gpus": 0, "est_hours": 0.001},
                      {"id": "burn_2", "script": "burn.sh", "gpus": 0, "est_hours": 0.001},
                      {"id": "nap_1", "script": "nap.sh", "gpus": 0, "est_hours": 0.001}])");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  json st = q.state();
  for (const char* id : {"burn_1", "burn_2"}) {
    ASSERT_TRUE(st[id].contains("cpu_seconds")) << st[id];
    EXPECT_GE(st[id]["cpu_seconds"].get<long long>(), 1) << id;  // 1.6 s, rounded
    EXPECT_LE(st[id]["cpu_seconds"].get<long long>(), 4) << id;
  }
  EXPECT_EQ(st["nap_1"]["cpu_seconds"], 0);
  EXPECT_FALSE(fs::exists(q.d.path() + "/logs/burn_1.cpu.tmp"));
  std::string events = q.d.read("plan.events.jsonl");
  EXPECT_THAT(events, HasSubstr(R"("cpu_seconds":)"));
  json ej = json::parse(q.gpuq({"history", "--estimates", "--json"}).out);
  std::map<std::string, json> by;
  for (const json& l : ej) by[l["prefix"]] = l;
  ASSERT_TRUE(by.count("burn_")) << ej;
  EXPECT_GE(by["burn_"]["median_cpu_hours"].get<double>() * 3600, 1);
  EXPECT_LE(by["burn_"]["median_cpu_hours"].get<double>() * 3600, 4);
  EXPECT_GT(by["burn_"]["median_cores_busy"].get<double>(), 0.2);
  EXPECT_LT(by["nap_"]["median_cores_busy"].get<double>(), 0.2);
  EXPECT_THAT(q.gpuq({"history", "--estimates"}).out, HasSubstr("CPU time (user + system) of the job's processes"));
}

// A job in a cgroup that gpuq stops (here at its time limit) has its --kill-grace to save: its
// entry says failed at once, but its group is not killed and removed until the grace is over or
// its processes are gone. (Removed at the next tick, it was SIGKILLed mid-checkpoint.)
TEST(HostMemCgroup, AStoppedJobKeepsItsGraceBeforeItsGroupIsKilled) {
  gpuq::Cgroups node = gpuq::look_at_cgroups(false);
  std::printf("this node: %s\n", node.why.c_str());
  MemQueue q;
  q.d.write("ckpt.sh", "trap 'sleep 1.5; echo saved > saved; exit 0' TERM\nsleep 60 &\nwait\n");
  q.plan(R"([{"id": "train", "script": "ckpt.sh", "gpus": 0, "mem_gib": 1, "time_limit_hours": 0.0004}])");
  Output r = q.background({"run", "--gpus", "0", "--poll", "0.2", "--kill-grace", "6", "--max-retries", "0",
                           "--node-dir", "off"})
                 ->wait(kPatience);
  ASSERT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("timed out train"));
  EXPECT_EQ(q.d.read("saved"), "saved\n") << "its checkpoint was cut short\n" << r.out;
  EXPECT_FALSE(q.state()["train"].contains("cgroup")) << q.state()["train"];  // removed once it was gone
  if (node.kind != gpuq::Cgroups::Kind::None)
    for (const auto& e : fs::directory_iterator(node.parent))
      EXPECT_NE(e.path().filename().string().rfind("train.", 0), 0u) << e.path() << " was left";
}
