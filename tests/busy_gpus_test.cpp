// GPUs busy with another user's memory: status names them in the
// reasons, the prediction keeps them busy until run's next reading, and run says once when
// one becomes busy or free for such outside reasons.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "gpuq/core/outlook.h"
#include "gpuq/views/reasons.h"
#include "tick_loop.h"

using namespace gpuq;
using namespace gpuq::test;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(Others, UsedByOthersLeavesOutTheGpusOfRunningJobs) {
  State st;
  JobState a;
  a.status = Status::Running;
  a.pid = 5;
  a.gpus = std::vector<int>{0};
  st.set("a", a);
  std::map<int, long long> used{{0, 30000}, {1, 20000}, {2, 100}};
  EXPECT_EQ(used_by_others(used, 1024, st), (std::map<int, long long>{{1, 20000}}));
  EXPECT_EQ(busy_by_other_text(1, 20000), "GPU 1 busy: 20000 MiB in use by another process");
}

TEST(Others, TheReasonNamesTheGpuAndThePredictionKeepsItBusyUntilTheNextReading) {
  Plan p = plan_of(R"([{"id": "wide", "script": "w.sh", "gpus": 2, "est_hours": 1}])", {0, 1});
  Policy pol;
  pol.node_gpus = {0, 1};
  pol.poll = 20;
  FileTable yes([](const std::string&) { return true; });
  double now = 1'000'000;
  Outlook o = make_outlook(p, State{}, pol, now, 0b01, yes, std::nullopt, {{1, busy_by_other_text(1, 20000)}});
  EXPECT_EQ(why_text(p, State{}, o, o.jobs[0]), "needs 2 GPUs, 1 free; GPU 1 busy: 20000 MiB in use by another process");
  ASSERT_TRUE(o.jobs[0].predicted_start);
  EXPECT_DOUBLE_EQ(*o.jobs[0].predicted_start, now + 20);  // not now: GPU 1 is busy until run looks again
  EXPECT_DOUBLE_EQ(*o.jobs[0].predicted_finish, now + 20 + 3600);
}

TEST(OthersTick, RunSaysOnceWhenAGpuBecomesBusyOrFreeForOutsideReasons) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "est_hours": 1}])", {}, {0, 1});
  (*q.probe.reading.used_mib) = {{0, 0}, {1, 20000}};
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("GPU 1 busy: 20000 MiB in use by another process; no job starts on it "
                                        "until that memory is let go"),
                                 q.line("start a on GPUs [0] (pid 1000)")));
  (*q.probe.reading.used_mib) = {{0, 30000}, {1, 20500}};  // a's own memory on GPU 0 is not another's
  q.clock.advance(20);
  q.tick();
  EXPECT_THAT(q.out, IsEmpty());
  (*q.probe.reading.used_mib) = {{0, 30000}, {1, 3}};
  q.clock.advance(20);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("GPU 1 free again: 3 MiB in use (at most --max-used-mib 1024)")));
  q.clock.advance(20);
  q.tick();
  EXPECT_THAT(q.out, IsEmpty());
}

TEST(OthersTick, AFinishedJobsMemoryLetGoOfSlowlyIsNotAnotherUsers) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "est_hours": 1}])", {}, {0});
  q.tick();
  q.launcher.exit(1000, 0);
  (*q.probe.reading.used_mib) = {{0, 30000}};  // a's processes still exiting
  q.clock.advance(5);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("done a")));
}

TEST(OthersStatus, StatusNamesTheBusyGpuFromNvidiaSmi) {
  TempDir d;
  auto env = fake_nvidia_smi(d, "0, 0, 0\n1, 20000, 97\n");
  d.write("plan.json", R"([{"id": "wide", "script": "w.sh", "gpus": 2}])");
  Output r = run_gpuq({"status", "--plan", "plan.json", "--gpus", "0,1", "--json"}, d.path(), env);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["jobs"][0]["why"],
            "needs 2 GPUs, 1 free; GPU 1 busy: 20000 MiB in use by another process");
}
