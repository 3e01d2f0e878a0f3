// Busy means a foreign process (issue 15, point 3): the rule on NVML's process list, and
// run's lines and placement on it (fakes, tick by tick).
#include <gmock/gmock.h>

#include "gpuq/core/gpu_use.h"
#include "gpuq/views/reasons.h"
#include "gpuq/core/outlook.h"
#include "tick_loop.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

namespace {

// What the reading alone makes of the GPUs (see_reading over every GPU).
GpuMask busy_by_reading(const GpuReading& r, const State& state, const GpuRules& rules) {
  return see_reading(r, state, rules, ~GpuMask{0}).busy;
}
std::map<int, std::string> held_by_others(const GpuReading& r, const State& state, const GpuRules& rules) {
  return see_reading(r, state, rules, ~GpuMask{0}).others;
}

GpuProcess proc(long long pid, std::vector<long long> lineage, std::string name, long long mib = 100) {
  GpuProcess p;
  p.pid = pid;
  p.lineage = std::move(lineage);
  p.name = std::move(name);
  p.command = p.name + " train.py";
  p.used_mib = mib;
  return p;
}

State running(const std::string& id, long long pid, std::vector<int> gpus) {
  State st;
  JobState s;
  s.status = Status::Running;
  s.pid = pid;
  s.gpus = std::move(gpus);
  st.set(id, s);
  return st;
}

GpuReading idle8() {
  GpuReading r;
  r.used_mib = std::map<int, long long>{};
  r.processes.emplace();
  for (int g = 0; g < 8; ++g) (*r.used_mib)[g] = 300;  // what NVML reports on an idle GPU of a recent driver
  return r;
}

}  // namespace

TEST(GpuUse, AProcessUnderAJobIsOursAnyOtherIsForeignUnlessIgnored) {
  State st = running("a", 5000, {0});
  GpuReading r = idle8();
  (*r.processes)[0] = {proc(5012, {5012, 5012, 5000, 5003, 5000, 1}, "python")};  // a's grandchild
  (*r.processes)[5] = {proc(777, {777, 777, 700, 700, 1}, "python", 150)};     // another user's, little memory
  (*r.processes)[6] = {proc(888, {888, 888, 800, 1}, "Xorg")};
  GpuRules rules{1024, {"Xorg"}};
  auto foreign = foreign_processes(r, st, rules);
  ASSERT_EQ(foreign.size(), 1u);
  ASSERT_EQ(foreign.count(5), 1u);
  EXPECT_EQ(foreign[5][0].pid, 777);
  EXPECT_EQ(busy_by_reading(r, st, rules), mask_of({5}));  // 300 MiB everywhere is under --max-used-mib
  EXPECT_EQ(held_by_others(r, st, rules),
            (std::map<int, std::string>{{5, "GPU 5 busy: process 777 `python train.py` (150 MiB) is no gpuq job's"}}));
  rules.ignore = {};
  EXPECT_EQ(busy_by_reading(r, st, rules), mask_of({5, 6}));
}

// An ignored process's memory is not counted by the memory test either (a new user found
// GPU 1 busy by "20005 MiB in use by another process", the ignored one's).
TEST(GpuUse, AnIgnoredProcessesMemoryDoesNotMakeItsGpuBusy) {
  GpuReading r = idle8();
  (*r.used_mib)[1] = 20005;
  (*r.processes)[1] = {proc(999, {999, 999, 900, 1}, "sleep", 20000)};
  GpuRules rules{1024, {"sleep"}};
  EXPECT_EQ(busy_by_reading(r, State{}, rules), GpuMask{0});
  EXPECT_TRUE(held_by_others(r, State{}, rules).empty());
  (*r.used_mib)[1] = 22005;  // 2000 MiB more than the ignored process's: someone else's
  EXPECT_EQ(busy_by_reading(r, State{}, rules), mask_of({1}));
  EXPECT_EQ(held_by_others(r, State{}, rules),
            (std::map<int, std::string>{{1, "GPU 1 busy: 2005 MiB in use by another process"}}));
}

TEST(GpuUse, MemoryStillCountsWithoutAProcessListAndALostGpuIsBusy) {
  GpuReading r;
  r.used_mib = std::map<int, long long>{{0, 0}, {1, 20000}};
  r.lost[2] = "GPU is lost";
  GpuRules rules;
  EXPECT_TRUE(foreign_processes(r, State{}, rules).empty());
  EXPECT_EQ(busy_by_reading(r, State{}, rules), mask_of({1, 2}));
  EXPECT_EQ(held_by_others(r, State{}, rules),
            (std::map<int, std::string>{{1, "GPU 1 busy: 20000 MiB in use by another process"},
                                        {2, "GPU 2 busy: lost (GPU is lost)"}}));
}

TEST(GpuUseTick, AForeignProcessOnGpu5KeepsJobsOffItAndRunSaysWhoHoldsIt) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "est_hours": 1},
             {"id": "b", "script": "b.sh", "gpus": 1, "est_hours": 1}])",
         {}, {4, 5, 6});
  q.probe.reading = idle8();
  (*q.probe.reading.processes)[4] = {proc(4242, {4242, 4242, 4200, 1}, "python", 120)};
  (*q.probe.reading.processes)[5] = {proc(4343, {4343, 4343, 4300, 1}, "Xorg", 20)};
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("GPU 4 busy: process 4242 `python train.py` (120 MiB) is no gpuq job's; no "
                                        "job starts on it until that process ends"),
                                 q.line("GPU 5 busy: process 4343 `Xorg train.py` (20 MiB) is no gpuq job's; no job "
                                        "starts on it until that process ends"),
                                 q.line("start a on GPUs [6] (pid 1000)")));
  // The job's own process on its GPU is not foreign; the tenant leaves GPU 4.
  (*q.probe.reading.processes)[6] = {proc(1007, {1007, 1000, 1000, 1000, 1}, "python", 30000)};
  (*q.probe.reading.processes)[4].clear();
  q.clock.advance(20);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("GPU 4 free again: 300 MiB in use (at most --max-used-mib 1024)"),
                                 q.line("start b on GPUs [4] (pid 1001)")));
}

TEST(GpuUseTick, IgnoredProcessesBlockNothing) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "est_hours": 1}])",
         [](RunOptions& o) { o.ignore_process = {"Xorg"}; }, {5});
  q.probe.reading = idle8();
  (*q.probe.reading.processes)[5] = {proc(4343, {4343, 4343, 4300, 1}, "Xorg", 150)};
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("start a on GPUs [5] (pid 1000)")));
}

TEST(GpuUseTick, TheProbeSourceIsSaidOnceAndAgainOnlyWhenItChanges) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "est_hours": 1}])", {}, {0});
  q.probe.reading.source_note = "nvidia-smi (NVML is not available here: nvmlInit_v2: Driver Not Loaded)";
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("GPU probe: nvidia-smi (NVML is not available here: nvmlInit_v2: Driver Not Loaded)"),
                                 q.line("start a on GPUs [0] (pid 1000)")));
  q.clock.advance(20);
  q.tick();
  EXPECT_THAT(q.out, IsEmpty());
}

TEST(GpuUseTick, AReadingOlderThanAJobsEndBringsTheNextTickSoon) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "est_hours": 1},
             {"id": "b", "script": "b.sh", "gpus": 1, "est_hours": 1}])",
         {}, {0});
  q.tick();  // a starts on GPU 0
  q.launcher.exit(1000, 0);
  q.clock.advance(5);
  // The background reading was taken before a ended, and still shows its memory.
  q.probe.reading.used_mib = std::map<int, long long>{{0, 30000}};
  q.probe.reading.taken = q.clock.t - 2;
  TickResult r = q.tick();
  EXPECT_EQ(q.status("a"), Status::Done);
  EXPECT_EQ(q.status("b"), Status::Pending);
  EXPECT_LE(r.wake_in, 1.5);  // not --poll (3600): the fresh reading comes within a second
  q.probe.reading.used_mib = std::map<int, long long>{{0, 0}};
  q.probe.reading.taken = q.clock.t + 0.5;
  q.clock.advance(1.5);
  r = q.tick();
  EXPECT_EQ(q.status("b"), Status::Running);
}

TEST(GpuUseOutlook, StatusNamesWhoHoldsABusyGpu) {
  Plan p = plan_of(R"([{"id": "wide", "script": "w.sh", "gpus": 2, "est_hours": 1}])", {0, 1});
  Policy pol;
  pol.node_gpus = {0, 1};
  FileTable yes([](const std::string&) { return true; });
  GpuReading r = idle8();
  (*r.processes)[1] = {proc(4242, {4242, 4242, 4200, 1}, "python", 120)};
  GpuRules rules;
  Outlook o = make_outlook(p, State{}, pol, 1'000'000, 0b01, yes, std::nullopt, held_by_others(r, State{}, rules));
  EXPECT_EQ(why_text(p, State{}, o, o.jobs[0]), "needs 2 GPUs, 1 free; GPU 1 busy: process 4242 `python train.py` (120 MiB) is no gpuq "
                           "job's");
}

TEST(GpuUseTick, AGpuLostMidRunIsSaidOnceAndGetsNoJob) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "est_hours": 1},
             {"id": "b", "script": "b.sh", "gpus": 1, "est_hours": 1, "deps": ["a"]}])",
         {}, {0, 1});
  q.probe.reading = idle8();
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("start a on GPUs [0] (pid 1000)")));
  q.probe.reading.lost[0] = "GPU is lost";  // a's GPU falls off the bus; a fails
  q.probe.reading.used_mib->erase(0);
  q.launcher.exit(1000, 1);
  q.clock.advance(20);
  q.tick();
  // The lost GPU is drained (issue 53): a's failure was the GPU's, so a runs again at once, on
  // GPU 1, no retry spent (without the drain it waited --retry-after and spent one).
  EXPECT_THAT(q.out, ::testing::Contains(::testing::HasSubstr("GPU 0 drained: GPU lost (GPU is lost), seen by ")));
  EXPECT_THAT(q.out, ::testing::Contains(::testing::HasSubstr("requeued a: it failed (exit 1) on GPU 0, drained for "
                                                              "GPU lost (GPU is lost)")));
  EXPECT_EQ(q.status("a"), Status::Running);
  EXPECT_EQ(q.entry("a").gpus, (std::vector<int>{1}));
  EXPECT_EQ(q.entry("a").attempts_or0(), 0);
  q.clock.advance(61);  // once a's processes had their minute to let go, the lost GPU is said busy too
  q.tick();
  EXPECT_THAT(q.out, ::testing::Contains(q.line("GPU 0 busy: lost (GPU is lost); no job starts on it")));
}

// Issue 25, point 14: a job waiting on the GPUs of a job in its kill grace said "needs 1 GPU, 0
// free" without naming the holder.
TEST(GpuUse, AStoppedJobStillEndingIsNamedAsTheHolderOfItsGpus) {
  State st = running("train", 4242, {0, 1});
  JobState ending = *st.find("train");
  ending.status = Status::Failed;
  ending.exit = -15;
  ending.kill_sent = 1000;
  st.set("train", ending);
  JobState done;
  done.status = Status::Done;
  done.gpus = std::vector<int>{2};
  st.set("old", done);
  std::map<int, std::string> others{{1, "GPU 1 busy: 20000 MiB in use by another process"}};
  name_ending_holders(st, others);
  ASSERT_EQ(others.size(), 2u);
  EXPECT_EQ(others[0], "GPU 0 busy: train was stopped and its processes are still ending (SIGTERM sent; SIGKILL "
                       "after --kill-grace)");
  EXPECT_EQ(others[1], "GPU 1 busy: 20000 MiB in use by another process");  // a holder already named stays
}

// Issue 25, point 14: `gpuq gpus` said "GPU probe: nvidia-smi (nvidia-smi (NVML is not available ...))".
TEST(GpuUse, TheProbesSourceIsSaidOnce) {
  GpuReading r;
  EXPECT_EQ(probe_source_text(r), "none");
  r.source = "nvidia-smi";
  EXPECT_EQ(probe_source_text(r), "nvidia-smi");
  r.source_note = "nvidia-smi (NVML is not available here: no libnvidia-ml.so.1)";
  EXPECT_EQ(probe_source_text(r), "nvidia-smi (NVML is not available here: no libnvidia-ml.so.1)");
  r.source_note = "--gpu-probe nvidia-smi";
  EXPECT_EQ(probe_source_text(r), "nvidia-smi (--gpu-probe nvidia-smi)");
  r.source = "nvml";
  r.source_note = "NVML (driver 550.54, 8 GPUs)";
  EXPECT_EQ(probe_source_text(r), "NVML (driver 550.54, 8 GPUs)");
}
