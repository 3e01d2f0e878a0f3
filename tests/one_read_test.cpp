// One read of the node (issue 49): `run`'s tick and `status` read the GPUs of one recorded world
// through the same function (gpu_use.h's see_reading) and see the same thing. The world is
// files, as a node leaves them: the plan, its state (a job running, one killed and still dying,
// one done) and what nvidia-smi prints (another user's memory on a GPU). The tick reads it through
// the fakes (the state parsed from the file, the reading parsed from nvidia-smi's text); the look
// reads the files themselves, through a fake nvidia-smi. Both must find the same free GPUs, the
// same words for the GPU someone else holds, and the jobs status predicts to start now must be the
// ones the tick starts, on the same GPUs.
#include <gmock/gmock.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <functional>
#include <set>

#include "gpuq/core/outlook.h"
#include "gpuq/live/launcher.h"
#include "gpuq/live/look.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/state_codec.h"
#include "gpuq/live/store.h"
#include "tick_loop.h"

using namespace gpuq;
using namespace gpuq::test;

namespace {

constexpr const char* kWorldPlan = R"([
  {"id": "a", "script": "job.sh", "gpus": 2, "est_hours": 1},
  {"id": "b", "script": "job.sh", "gpus": 3, "priority": 5, "est_hours": 2},
  {"id": "c", "script": "job.sh", "gpus": 2, "priority": 3, "est_hours": 1},
  {"id": "d", "script": "job.sh", "gpus": 1, "priority": 1, "est_hours": 0.1},
  {"id": "e", "script": "job.sh", "gpus": 1, "deps": ["c"], "est_hours": 1},
  {"id": "k", "script": "job.sh", "gpus": 1, "est_hours": 1},
  {"id": "z", "script": "job.sh", "gpus": 1, "est_hours": 1}
])";

// GPU 5 holds 30 GB of someone else's; a's GPUs hold a little of its own.
constexpr const char* kWorldSmi = "0, 500\n1, 500\n2, 0\n3, 0\n4, 0\n5, 30000\n6, 0\n7, 0\n";

// The state as run left it at `now`: a running on [0, 1], k killed 5 s ago and still dying on
// [6] (its pid is alive: this process's), z done.
std::string world_state(double now) {
  const long long pid = ::getpid();
  return fmt::format(R"({{
  "a": {{"status": "running", "pid": {0}, "gpus": [0, 1], "start": {1}, "attempts": 0}},
  "k": {{"status": "failed", "outcome": "killed", "exit": -15, "pid": {0}, "gpus": [6], "start": {2}, "end": {3}, "kill_sent": {3}, "attempts": 1}},
  "z": {{"status": "done", "gpus": [7], "start": {2}, "end": {4}, "exit": 0, "attempts": 1}}
}})",
                     pid, now - 100, now - 600, now - 5, now - 300);
}

// What the tick and status each saw of one recorded world.
struct BothSaw {
  std::vector<int> tick_free, status_free;
  std::map<int, std::string> tick_others, status_others;
  std::vector<double> tick_mem_other, status_mem_other;  // where jobs pack: GiB per GPU beyond their declared
  std::vector<std::string> tick_out;  // what run said
  std::string said_for_5;             // the line run would say for GPU 5's holder
  std::set<std::pair<std::string, std::vector<int>>> started, predicted;  // the tick's; status's for now
};

// The world: `plan` (its jobs run job.sh), the state file's text at a `now` (world_at), what
// nvidia-smi prints, and the node's GPUs.
BothSaw both_see(const std::string& plan, const std::function<std::string(double)>& world_at, const std::string& smi,
                 const std::vector<int>& gpus, const std::string& gpus_text) {
  BothSaw out;
  TempDir d;
  d.write("job.sh", "true\n", 0755);
  std::map<std::string, std::string> env = fake_nvidia_smi(d, smi);
  d.write("plan.json", plan);
  const std::string plan_file = d.path() + "/plan.json";
  d.write(paths_for(plan_file).state.substr(d.path().size() + 1), world_at(unix_now()));

  // The settings of both: one PlanSetup, as the CLI makes it.
  PlanSetup s;
  s.plan = plan_file;
  s.node_dir = "off";
  s.gpus = gpus_text;
  s.gpu_probe = "nvidia-smi";
  s.nvidia_smi = env.at("GPUQ_NVIDIA_SMI");
  s.pairs = "original";

  // status's look at the files.
  LookAsk ask;
  ask.run = false;
  ask.snapshots = false;
  PlanSetup status_setup = s;
  Look l = look_at(status_setup, ask);
  EXPECT_TRUE(l.plan) << (l.report.errors.empty() ? "" : l.report.errors[0]);
  if (!l.plan) return out;
  Outlook o = outlook_of(l, ask);

  // run's tick over the same world, at the look's instant.
  std::string problem;
  std::optional<Placement> placement = placement_of(s, "auto", gpus, &problem);
  EXPECT_TRUE(placement) << problem;
  if (!placement) return out;
  Loop q(plan, [&](RunOptions& opt) {
    opt = run_options(s, gpus);
    opt.placement = *placement;
    opt.poll = 3600;
  }, gpus);
  StateLoad loaded = parse_state(world_at(l.now), "plan.state.json");
  EXPECT_TRUE(loaded.state) << loaded.error;
  if (!loaded.state) return out;
  q.disk.replace(std::move(*loaded.state));
  q.probe.reading = parse_gpu_csv(smi);
  q.clock.t = l.now;
  q.tick();

  out.tick_free = ids_of(q.loop->gpus_read().free);
  out.status_free = ids_of(l.free);
  out.tick_others = q.loop->gpus_read().others;
  out.tick_mem_other = q.loop->gpus_read().mem_other;
  out.status_mem_other = l.mem_other;
  out.status_others = l.others;
  out.tick_out = q.out;
  if (l.others.count(5)) out.said_for_5 = q.line(l.others.at(5) + "; no job starts on it until that memory is let go");
  for (const SimRow& r : o.sim.rows)
    if (o.jobs[r.job].status == "pending" && r.start < 1.0 / 3600) out.predicted.insert({l.plan->jobs[r.job].id, r.gpus});
  for (const LaunchSpec& spec : q.launcher.launches) out.started.insert({spec.id, spec.gpus});
  return out;
}

std::set<std::string> ids_in(const std::set<std::pair<std::string, std::vector<int>>>& jobs) {
  std::set<std::string> ids;
  for (const auto& [id, on] : jobs) ids.insert(id);
  return ids;
}

}  // namespace

TEST(OneRead, TheTickAndStatusSeeOneRecordedWorldAlike) {
  BothSaw b = both_see(kWorldPlan, world_state, kWorldSmi, {0, 1, 2, 3, 4, 5, 6, 7}, "0-7");
  // The same free GPUs: not a's two, not GPU 5 (another's memory), not GPU 6 (k dying).
  EXPECT_EQ(b.tick_free, b.status_free);
  EXPECT_EQ(b.status_free, (std::vector<int>{2, 3, 4, 7}));
  // The same words for the GPU someone else holds; run says them with what follows.
  ASSERT_EQ(b.tick_others.count(5), 1u);
  ASSERT_EQ(b.status_others.count(5), 1u);
  EXPECT_EQ(b.tick_others.at(5), b.status_others.at(5));
  EXPECT_THAT(b.tick_out, ::testing::Contains(b.said_for_5));
  // What status predicts to start now is what the tick started, on the same GPUs: d and c, first
  // by priority (the lower number first), on 3 of the 4 free GPUs; b (3 GPUs) waits.
  EXPECT_EQ(b.started, b.predicted);
  EXPECT_EQ(ids_in(b.started), (std::set<std::string>{"c", "d"}));
}

// A packed job that on_oom resized is the same size to both: `big` declared 20 GiB, runs its
// first on_oom retry at 40 and uses 30 of them (nvidia-smi: no process list, so a GPU's use
// beyond its packed jobs' declared GiB is another's). Counted at the plan's 20, as status did
// before one function gave both the size, 10 GiB of GPU 0 would be another's to status and none
// to the tick; at the attempt's 40, none to either.
TEST(OneRead, APackedJobThatOnOomResizedIsTheSameSizeToTheTickAndToStatus) {
  const char* plan = R"([
    {"id": "big", "script": "job.sh", "gpus": 1, "gpu_mem_gib": 20, "est_hours": 1,
     "on_oom": {"retries": 2, "gpu_mem_factor": 2}},
    {"id": "small", "script": "job.sh", "gpus": 1, "gpu_mem_gib": 30, "est_hours": 1}
  ])";
  auto world = [](double now) {
    return fmt::format(R"({{"big": {{"status": "running", "pid": {}, "gpus": [0], "start": {}, "attempts": 1,
                           "oom_retries": 1}}}})",
                       ::getpid(), now - 100);
  };
  BothSaw b = both_see(plan, world, "0, 30720\n", {0}, "0");
  EXPECT_EQ(b.tick_free, b.status_free);
  ASSERT_FALSE(b.tick_mem_other.empty());
  EXPECT_EQ(b.tick_mem_other, b.status_mem_other);
  EXPECT_EQ(b.status_mem_other[0], 0.0) << "big's 30 GiB are within its attempt's 40";
  EXPECT_EQ(b.started, b.predicted);
  EXPECT_EQ(ids_in(b.started), (std::set<std::string>{"small"}));
}

// Another's memory on a packed job's GPU, beyond what the job declared, makes no GPU busy: `big`
// declares 40 GiB and nvidia-smi reads 50 on its GPU, so 10 are another's and `small` (30 GiB)
// does not fit beside them in 76 (80, less 5 % headroom). The tick leaves it waiting; status
// predicted it to start now (the prediction counted the others' memory only while a GPU was
// busy), and now predicts what the tick does.
TEST(OneRead, AnothersMemoryOnAPackedJobsGpuKeepsTheSameJobWaitingToBoth) {
  const char* plan = R"([
    {"id": "big", "script": "job.sh", "gpus": 1, "gpu_mem_gib": 40, "est_hours": 1},
    {"id": "small", "script": "job.sh", "gpus": 1, "gpu_mem_gib": 30, "est_hours": 1}
  ])";
  auto world = [](double now) {
    return fmt::format(R"({{"big": {{"status": "running", "pid": {}, "gpus": [0], "start": {}, "attempts": 1}}}})",
                       ::getpid(), now - 100);
  };
  BothSaw b = both_see(plan, world, "0, 51200\n", {0}, "0");
  ASSERT_FALSE(b.tick_mem_other.empty());
  EXPECT_EQ(b.tick_mem_other, b.status_mem_other);
  EXPECT_EQ(b.status_mem_other[0], 10.0);
  EXPECT_EQ(b.started, b.predicted);
  EXPECT_TRUE(b.started.empty()) << "small does not fit beside big and another's 10 GiB";
}

namespace {

// A pid no process has: a child's, once reaped.
long long gone_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// Each entry of `state` as the state file writes it, by id.
std::map<std::string, std::string> entries_of(const State& state) {
  std::map<std::string, std::string> out;
  for (const auto& [id, s] : state.entries()) {
    State one;
    one.set(id, s);
    out[id] = dump_state(one);
  }
  return out;
}

}  // namespace

// The ends one read sees settle alike for the tick and for status. One recorded world: jobs that
// ended while no run looked (their codes in logs/, their processes gone) beside one that still
// runs. The tick reads it through the real launcher over the files, as `run` does (its state
// from the store's fake, parsed from the file), and decides on the read; status reads the files
// through look_at, in memory only. Every entry each leaves is the same: done on exit 0 (a
// preempted job's too), failed on exit 3, lost with no code, pending again for a requeue whose
// group is gone, and running for the job whose process is alive. Before one read, the two
// gathered the ends with two functions (the tick's refresh, the backend's).
TEST(OneRead, TheEndsOfOneRecordedWorldSettleAlikeForTheTickAndForStatus) {
  const char* plan = R"([
    {"id": "a", "script": "job.sh", "gpus": 1, "est_hours": 1},
    {"id": "b", "script": "job.sh", "gpus": 1, "est_hours": 1},
    {"id": "c", "script": "job.sh", "gpus": 1, "est_hours": 1},
    {"id": "d", "script": "job.sh", "gpus": 1, "deps": ["f"], "est_hours": 1},
    {"id": "e", "script": "job.sh", "gpus": 1, "preemptible": true, "est_hours": 1},
    {"id": "f", "script": "job.sh", "gpus": 1, "est_hours": 1}
  ])";
  TempDir d;
  d.write("job.sh", "true\n", 0755);
  std::map<std::string, std::string> env = fake_nvidia_smi(d, idle_gpus(8));
  d.write("plan.json", plan);
  const std::string plan_file = d.path() + "/plan.json";
  const PlanPaths paths = paths_for(plan_file);
  d.write("logs/a.exit", "0\n");
  d.write("logs/b.exit", "3\n");
  d.write("logs/e.exit", "0\n");
  const long long gone = gone_pid();
  auto world_at = [&](double now) {
    return fmt::format(R"({{
  "a": {{"status": "running", "pid": {0}, "gpus": [0], "start": {2}, "attempts": 0}},
  "b": {{"status": "running", "pid": {0}, "gpus": [1], "start": {2}, "attempts": 0}},
  "c": {{"status": "running", "pid": {0}, "gpus": [2], "start": {2}, "attempts": 0}},
  "d": {{"status": "running", "pid": {0}, "gpus": [3], "start": {2}, "attempts": 0, "requeue": {3}, "kill_sent": {3}}},
  "e": {{"status": "running", "pid": {0}, "gpus": [4], "start": {2}, "attempts": 0, "preempt": {3}}},
  "f": {{"status": "running", "pid": {1}, "gpus": [5], "start": {2}, "attempts": 0}}
}})",
                       gone, ::getpid(), now - 100, now - 10);
  };
  const std::string world = world_at(unix_now());
  d.write(paths.state.substr(d.path().size() + 1), world);

  PlanSetup s;
  s.plan = plan_file;
  s.node_dir = "off";
  s.gpus = "0-7";
  s.gpu_probe = "nvidia-smi";
  s.nvidia_smi = env.at("GPUQ_NVIDIA_SMI");
  LookAsk ask;
  ask.run = false;
  ask.snapshots = false;
  PlanSetup status_setup = s;
  Look l = look_at(status_setup, ask);
  ASSERT_TRUE(l.plan);

  // run's tick, at the look's instant, over the same files.
  const std::vector<int> gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  RunOptions opt = run_options(s, gpus);
  opt.poll = 3600;
  FakeClock clock;
  clock.t = l.now;
  PosixLauncher launcher(paths);
  FakeProbe probe;
  FakeDisk disk;
  FakeStore store{disk, nullptr};
  FakeFiles files;
  FakeWaker waker{clock};
  StateLoad loaded = parse_state(world, "plan.state.json");
  ASSERT_TRUE(loaded.state) << loaded.error;
  disk.replace(std::move(*loaded.state));
  std::vector<std::string> out;
  RunLoop loop(*l.plan, opt, Ports{clock, launcher, probe, store, files, waker},
               [&](const std::string& line) { out.push_back(line); }, [&](const std::string&) {});
  loop.tick();

  EXPECT_EQ(entries_of(disk.state), entries_of(l.state)) << ::testing::PrintToString(out);
  EXPECT_EQ(disk.state.status_of("a"), Status::Done);
  EXPECT_EQ(disk.state.status_of("b"), Status::Failed);
  EXPECT_EQ(disk.state.find("b")->exit, 3);
  EXPECT_EQ(disk.state.status_of("c"), Status::Failed);
  EXPECT_EQ(disk.state.status_of("d"), Status::Pending);
  EXPECT_EQ(disk.state.status_of("e"), Status::Done);
  EXPECT_EQ(disk.state.status_of("f"), Status::Running);
}
