// One read of the node (issue 49): `run`'s tick and `status` read the GPUs of one recorded world
// through the same function (gpu_use.h's see_reading) and see the same thing. The world is
// files, as a node leaves them: the plan, its state (a job running, one killed and still dying,
// one done) and what nvidia-smi prints (another user's memory on a GPU). The tick reads it through
// the fakes (the state parsed from the file, the reading parsed from nvidia-smi's text); the look
// reads the files themselves, through a fake nvidia-smi. Both must find the same free GPUs, the
// same words for the GPU someone else holds, and the jobs status predicts to start now must be the
// ones the tick starts, on the same GPUs.
#include <gmock/gmock.h>
#include <unistd.h>

#include <fmt/format.h>

#include <set>

#include "gpuq/core/outlook.h"
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

}  // namespace

TEST(OneRead, TheTickAndStatusSeeOneRecordedWorldAlike) {
  TempDir d;
  d.write("job.sh", "true\n", 0755);
  std::map<std::string, std::string> env = fake_nvidia_smi(d, kWorldSmi);
  d.write("plan.json", kWorldPlan);
  const double now = unix_now();
  const std::string plan_file = d.path() + "/plan.json";
  d.write(paths_for(plan_file).state.substr(d.path().size() + 1), world_state(now));
  const std::vector<int> gpus{0, 1, 2, 3, 4, 5, 6, 7};

  // The settings of both: one PlanSetup, as the CLI makes it.
  PlanSetup s;
  s.plan = plan_file;
  s.node_dir = "off";
  s.gpus = "0-7";
  s.gpu_probe = "nvidia-smi";
  s.nvidia_smi = env.at("GPUQ_NVIDIA_SMI");
  s.pairs = "original";

  // status's look at the files.
  LookAsk ask;
  ask.run = false;
  ask.snapshots = false;
  PlanSetup status_setup = s;
  Look l = look_at(status_setup, ask);
  ASSERT_TRUE(l.plan) << (l.report.errors.empty() ? "" : l.report.errors[0]);
  Outlook o = outlook_of(l, ask);

  // run's tick over the same world.
  std::string problem;
  std::optional<Placement> placement = placement_of(s, "auto", gpus, &problem);
  ASSERT_TRUE(placement) << problem;
  Loop q(kWorldPlan, [&](RunOptions& opt) {
    opt = run_options(s, gpus);
    opt.placement = *placement;
    opt.poll = 3600;
  });
  StateLoad loaded = parse_state(world_state(l.now), "plan.state.json");
  ASSERT_TRUE(loaded.state) << loaded.error;
  q.disk.replace(std::move(*loaded.state));
  q.probe.reading = parse_gpu_csv(kWorldSmi);
  q.clock.t = l.now;
  q.tick();

  // The same free GPUs: not a's two, not GPU 5 (another's memory), not GPU 6 (k dying).
  EXPECT_EQ(ids_of(q.loop->gpus_read().free), ids_of(l.free));
  EXPECT_EQ(ids_of(l.free), (std::vector<int>{2, 3, 4, 7}));
  // The same words for the GPU someone else holds; run says them with what follows.
  ASSERT_EQ(q.loop->gpus_read().others.count(5), 1u);
  EXPECT_EQ(q.loop->gpus_read().others.at(5), l.others.at(5));
  EXPECT_THAT(q.out, ::testing::Contains(q.line(l.others.at(5) + "; no job starts on it until that memory is let go")));

  // What status predicts to start now is what the tick started, on the same GPUs: d and c, first
  // by priority (the lower number first), on 3 of the 4 free GPUs; b (3 GPUs) waits.
  std::set<std::pair<std::string, std::vector<int>>> predicted, started;
  for (const SimRow& r : o.sim.rows)
    if (o.jobs[r.job].status == "pending" && r.start < 1.0 / 3600) predicted.insert({l.plan->jobs[r.job].id, r.gpus});
  for (const LaunchSpec& spec : q.launcher.launches) started.insert({spec.id, spec.gpus});
  EXPECT_EQ(started, predicted);
  std::set<std::string> ids;
  for (const auto& [id, on] : started) ids.insert(id);
  EXPECT_EQ(ids, (std::set<std::string>{"c", "d"}));
}
