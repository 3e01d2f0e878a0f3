// `run`'s loop tick by tick over fakes of the OS (fakes.h): a fake clock moved by hand,
// jobs that end when the test says, a state in memory. No process, no file, no sleep.
#include <memory>

#include "fakes.h"
#include "tick_loop.h"
#include "gpuq/live/control.h"
#include "gpuq/live/run_loop.h"
#include "test_util.h"
#include "gpuq/core/local_time.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace {

constexpr const char* kOne = R"([{"id": "a", "script": "a.sh", "gpus": 1}])";

}  // namespace

TEST(Tick, AStartedJobIsSavedBeforeItIsReleasedAndItsLineIsPrinted) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 2}])");
  TickResult r = q.tick();
  EXPECT_EQ(r.next, TickResult::Next::Wait);
  EXPECT_EQ(r.wake_in, 3600);
  // Exactly once: the job runs only once the state that records it is saved.
  // The record is durable (the folder synced too) before the job passes its start line.
  EXPECT_THAT(q.journal, ElementsAre("lock", "read", "launch a", "save", "sync", "release a", "unlock"));
  ASSERT_EQ(q.launcher.launches.size(), 1u);
  EXPECT_EQ(q.launcher.launches[0].id, "a");
  EXPECT_EQ(q.launcher.launches[0].script, "a.sh");
  EXPECT_EQ(q.launcher.launches[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(q.launcher.launches[0].attempt, 1);
  EXPECT_THAT(q.out, ElementsAre(q.line("start a on GPUs [0, 1] (pid 1000)")));
  const JobState& a = q.entry("a");
  EXPECT_EQ(a.status, Status::Running);
  EXPECT_EQ(a.pid, 1000);
  EXPECT_EQ(a.pid_start, 10000u);
  EXPECT_EQ(a.start, q.clock.t);
  EXPECT_EQ(a.attempts, 0);
  EXPECT_THAT(q.waker.jobs, ElementsAre(1000));
  EXPECT_THAT(q.waker.ids, ElementsAre("a"));  // its exit code in place wakes the loop before its wrapper is gone
  EXPECT_EQ(q.waker.drains, 1);
}

TEST(Tick, ExitZeroIsDoneExitThreeIsFailedAndWhatTheyLeftIsKilled) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1}])");
  q.tick();
  q.clock.advance(5);
  q.launcher.exit(1000, 0, true);
  q.launcher.exit(1001, 3);
  TickResult r = q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("done a"), q.line("failed b (exit 3)")));
  EXPECT_EQ(q.status("a"), Status::Done);
  EXPECT_EQ(q.entry("a").exit, 0);
  EXPECT_EQ(q.entry("a").end, q.clock.t);
  EXPECT_EQ(q.status("b"), Status::Failed);
  EXPECT_EQ(q.entry("b").exit, 3);
  // The process group of a job that ended is killed (fix 7), whether or not it still holds a process.
  EXPECT_THAT(q.launcher.signals, ElementsAre(std::pair{1000LL, Signal::Kill}, std::pair{1001LL, Signal::Kill}));
  EXPECT_EQ(r.wake_in, 300);  // b's retry, at the default --retry-after
  EXPECT_THAT(q.waker.jobs, IsEmpty());
}

TEST(Tick, AFailedJobIsRetriedAtRetryAfterNotBefore) {
  Loop q(kOne, [](RunOptions& o) { o.retry_after = 300; });
  q.tick();
  q.clock.advance(10);
  q.launcher.exit(1000, 3);
  TickResult r = q.tick();
  EXPECT_EQ(r.wake_in, 300);
  const double end = q.clock.t;
  q.clock.advance(299.5);
  r = q.tick();
  EXPECT_THAT(q.out, IsEmpty());
  EXPECT_EQ(q.status("a"), Status::Failed);
  EXPECT_EQ(q.launcher.launches.size(), 1u);
  EXPECT_EQ(r.wake_in, 0.5);
  q.clock.advance(0.5);
  ASSERT_EQ(q.clock.t - end, 300);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("auto-retry a (retry 1)"), q.line("start a on GPUs [0] (pid 1001)")));
  ASSERT_EQ(q.launcher.launches.size(), 2u);
  EXPECT_EQ(q.launcher.launches[1].attempt, 2);
  EXPECT_EQ(q.entry("a").attempts, 1);
}

TEST(Tick, RetriesUsedUpLeaveTheJobFailedAndRunFinished) {
  Loop q(kOne, [](RunOptions& o) {
    o.max_retries = 1;
    o.retry_after = 0;
  });
  q.tick();
  q.launcher.exit(1000, 3);
  q.tick();  // failed, then retried at once (--retry-after 0) and started again
  EXPECT_EQ(q.launcher.launches.size(), 2u);
  q.launcher.exit(1001, 3);
  TickResult r = q.tick();
  EXPECT_EQ(r.next, TickResult::Next::Finished);
  EXPECT_EQ(q.entry("a").exit, 3);
  EXPECT_EQ(q.entry("a").attempts, 1);
}

TEST(Tick, KillEscalatesToSigkillExactlyAfterTheGraceAndTheGpuWaitsForTheGroup) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "priority": 1},
             {"id": "b", "script": "b.sh", "gpus": 1, "priority": 2}])",
         [](RunOptions& o) { o.kill_grace = 30; }, {0});
  q.tick();
  ASSERT_EQ(q.launcher.pid_of("a"), 1000);
  q.launcher.procs[1000].ignores_term = true;
  ControlResult k = q.control("kill", {"a"});
  EXPECT_EQ(k.status, 0);
  EXPECT_THAT(k.lines, ElementsAre("killed a: sent SIGTERM to process group 1000; `gpuq run` sends SIGKILL if it "
                                   "outlives --kill-grace"));
  EXPECT_EQ(q.entry("a").exit, kKilledExit);
  EXPECT_EQ(q.entry("a").kill_sent, q.clock.t);

  q.clock.advance(29.5);
  TickResult r = q.tick();
  // a's group is alive: GPU 0 is not free, b waits (the kill from the other shell gets its line)
  EXPECT_THAT(q.out, ElementsAre(q.line("gpuq kill a from another shell: failed (was running)")));
  EXPECT_EQ(q.launcher.launches.size(), 1u);
  EXPECT_EQ(r.next, TickResult::Next::Wait);
  EXPECT_EQ(r.wake_in, 0.5);
  q.clock.advance(0.5);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("SIGKILL to a (process group 1000): still alive 30 s after SIGTERM"),
                                 q.line("start b on GPUs [0] (pid 1001)")));
  EXPECT_EQ(q.launcher.signals.back(), (std::pair{1000LL, Signal::Kill}));
  EXPECT_FALSE(q.entry("a").kill_sent);
}

TEST(Tick, AKilledJobWhoseGroupIsGoneFreesItsGpuWithoutSigkill) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "priority": 1},
             {"id": "b", "script": "b.sh", "gpus": 1, "priority": 2}])",
         [](RunOptions& o) { o.kill_grace = 30; }, {0});
  q.tick();
  q.launcher.procs[1000].ignores_term = true;
  q.control("kill", {"a"});
  q.tick();
  EXPECT_EQ(q.launcher.launches.size(), 1u);
  q.launcher.procs[1000].group = false;  // it exits on its own
  q.clock.advance(1);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("start b on GPUs [0] (pid 1001)")));
  EXPECT_EQ(q.launcher.signals.back(), (std::pair{1000LL, Signal::Term}));
  EXPECT_FALSE(q.entry("a").kill_sent);
}

TEST(Tick, AFailedSaveAbandonsTheLaunchedJobsAndNothingStartsUntilASaveSucceeds) {
  Loop q(kOne);
  const std::string why = "cannot write plan.state.json.tmp.7: No space left on device";
  q.store.fail_next_error = StoreError(why, "plan.state.json.tmp.7", ENOSPC);
  TickResult r = q.tick();
  EXPECT_THAT(q.journal, ElementsAre("lock", "read", "launch a", "save", "abandon a", "unlock"));
  EXPECT_THAT(q.out, ElementsAre(q.line("the disk holding plan.state.json is full (No space left on device): no job "
                                        "starts until the state can be saved; 0 running job(s) go on (the previous "
                                        "state is intact; " +
                                        why + ")")));
  EXPECT_EQ(r.wake_in, 2);
  EXPECT_EQ(r.next, TickResult::Next::Wait);
  EXPECT_EQ(q.disk.state.find("a"), nullptr);

  // The same problem again is not said again; while it lasts, the tick saves first, alone, and
  // launches nothing.
  q.store.fail_next_error = StoreError(why, "plan.state.json.tmp.7", ENOSPC);
  q.clock.advance(2);
  q.tick();
  EXPECT_THAT(q.journal, ElementsAre("lock", "read", "save", "save", "unlock"));
  EXPECT_THAT(q.out, ElementsAre(q.line("the state is saved again: jobs start again")));  // the second save

  q.clock.advance(2);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("start a on GPUs [0] (pid 1001)")));
  EXPECT_EQ(q.entry("a").pid, 1001);
  EXPECT_EQ(q.launcher.released, (std::set<long long>{1001}));
  EXPECT_EQ(q.launcher.abandoned, (std::set<long long>{1000}));
  EXPECT_THAT(q.launcher.held, IsEmpty());
}

TEST(Tick, ALaunchShortOfDiskOrProcessesWaitsUnfailedAndStartsWhenItPasses) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "a.sh", "gpus": 1}])");
  q.launcher.short_of = CannotStartNow("posix_spawn(gpuq-job a.sh) failed: Resource temporarily unavailable", "",
                                       EAGAIN);
  TickResult r = q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("no process can be made (Resource temporarily unavailable): no job starts "
                                        "until it passes; 0 running job(s) go on (cannot start a: posix_spawn(gpuq-job "
                                        "a.sh) failed: Resource temporarily unavailable)")));
  EXPECT_EQ(q.launcher.launches.size(), 1u) << "the rest wait too: they would fail alike";
  EXPECT_EQ(r.wake_in, 2);
  EXPECT_EQ(q.status("a"), Status::Pending);
  EXPECT_EQ(q.status("b"), Status::Pending);
  ASSERT_NE(q.disk.state.find("a"), nullptr);
  EXPECT_EQ(q.entry("a").attempts_or0(), 0) << "no retry is spent";
  q.clock.advance(2);
  q.tick();
  EXPECT_THAT(q.out, IsEmpty()) << "said once";
  q.launcher.short_of.reset();
  q.clock.advance(2);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("jobs start again: no process can be made (Resource temporarily "
                                        "unavailable) is past"),
                                 q.line("start a on GPUs [0] (pid 1000)"), q.line("start b on GPUs [1] (pid 1001)")));
  EXPECT_EQ(q.entry("a").attempts_or0(), 0);
}

TEST(Tick, ALaunchThatFailsFailsItsJob) {
  Loop q(kOne);
  q.launcher.fail_next = "posix_spawn(gpuq-job a.sh) failed: Resource temporarily unavailable";
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("cannot start a: posix_spawn(gpuq-job a.sh) failed: Resource temporarily "
                                        "unavailable")));
  const JobState& a = q.entry("a");
  EXPECT_EQ(a.status, Status::Failed);
  EXPECT_EQ(a.exit, -1);
  EXPECT_EQ(a.end, q.clock.t);
  EXPECT_EQ(a.attempts, 0);
  EXPECT_FALSE(a.pid);
  EXPECT_THAT(q.launcher.released, IsEmpty());
}

TEST(Tick, AnAdoptedJobIsWatchedAndItsEndStartsItsDependant) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1, "deps": ["a"]},
             {"id": "c", "script": "c.sh", "gpus": 1}])",
         {}, {0, 1});
  q.adopt("a", 4242, {0});
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("adopted 1 running job: a"),
                                 q.line("start c on GPUs [1] (pid 1000)")));  // GPU 0 is a's
  EXPECT_THAT(q.waker.jobs, ElementsAre(4242, 1000));
  q.launcher.exit(4242, 0);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("done a"), q.line("start b on GPUs [0] (pid 1001)")));
  EXPECT_EQ(q.launcher.launches.size(), 2u);  // a was not started again
}

TEST(Tick, AVanishedJobFailsWithExitMinusOne) {
  Loop q(kOne);
  q.adopt("a", 4242, {0});
  q.launcher.vanish(4242);
  TickResult r = q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("adopted 1 running job: a"),
                                 q.line("failed a (its process is gone without an exit code)")));
  EXPECT_EQ(q.status("a"), Status::Failed);
  EXPECT_EQ(q.entry("a").exit, -1);
  EXPECT_EQ(r.wake_in, 300);
}

TEST(Tick, AnAbortedLaunchIsRequeuedWithItsAttemptsAndStartedAgain) {
  Loop q(kOne);
  q.adopt("a", 4242, {0}, 1);
  q.launcher.abort(4242);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("adopted 1 running job: a"),
                                 q.line("requeued a: its launch was cut short before it ran"),
                                 q.line("start a on GPUs [0] (pid 1000)")));
  ASSERT_EQ(q.launcher.launches.size(), 1u);
  EXPECT_EQ(q.launcher.launches[0].attempt, 2);
  EXPECT_EQ(q.entry("a").attempts, 1);
  // Nothing of an aborted launch ran: its group is not signalled.
  EXPECT_THAT(q.launcher.signals, IsEmpty());
}

// The launch removes the last attempt's exit and aborted files: a run killed between that and
// its save would leave a state naming the last attempt with nothing to say how it ended (CI saw
// "failed job14 (its process is gone without an exit code)" after repeated SIGKILLs). So the end
// is saved, durably, before the launch, and the state on disk then says pending.
TEST(Tick, AJobLaunchedAgainInTheTickThatSawItsEndHasThatEndSavedFirst) {
  Loop q(kOne);
  q.adopt("a", 4242, {0}, 1);
  q.launcher.abort(4242);
  q.journal.clear();
  q.tick();
  // (Its exit code, where it wrote one, synced before the save that records the end: sync_ends.)
  EXPECT_THAT(q.journal, ElementsAre("lock", "read", "sync code a", "save", "sync", "launch a", "save", "sync", "release a",
                                     "unlock"));
  // A retry at once (--retry-after 0): the failure saved before the second attempt's launch.
  Loop r(kOne, [](RunOptions& o) {
    o.max_retries = 1;
    o.retry_after = 0;
  });
  r.tick();
  r.launcher.exit(1000, 3);
  r.journal.clear();
  r.tick();
  // (What the failed attempt left in its group is killed once the state is saved.)
  EXPECT_THAT(r.journal,
              ElementsAre("lock", "sync code a", "save", "sync", "launch a", "save", "sync", "kill a", "release a", "unlock"));
  // A job that ended and is not launched again is saved once, at the tick's end, as before.
  Loop d(kOne);
  d.tick();
  d.launcher.exit(1000, 0);
  d.journal.clear();
  d.tick();
  EXPECT_THAT(d.journal, ElementsAre("lock", "sync code a", "save", "kill a", "unlock"));
}

TEST(Tick, WhatAnEndedJobLeftIsNotKilledWhenItsPidIsAnotherProcessNow) {
  Loop q(kOne);
  q.adopt("a", 4242, {0});
  q.launcher.exit(4242, 0);
  q.launcher.procs[4242].recycled = true;
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("adopted 1 running job: a"), q.line("done a")));
  EXPECT_THAT(q.launcher.signals, IsEmpty());
}

TEST(Tick, AGpuOverMaxUsedMibIsNotGiven) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1},
             {"id": "c", "script": "c.sh", "gpus": 1}])",
         [](RunOptions& o) { o.max_used_mib = 1024; }, {0, 1, 2});
  q.probe.reading.used_mib = std::map<int, long long>{{0, 2000}, {1, 1024}, {2, 0}};
  q.tick();
  ASSERT_EQ(q.launcher.launches.size(), 2u);
  EXPECT_EQ(q.launcher.launches[0].gpus, std::vector<int>{1});  // 1024 is not over 1024
  EXPECT_EQ(q.launcher.launches[1].gpus, std::vector<int>{2});
  EXPECT_EQ(q.status("c"), Status::Pending);
}

TEST(Tick, NoReadingIsSaidOnceAndEveryGpuCountsAsFree) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1, "deps": ["a"]}])",
         {}, {0});
  q.probe.reading = reading_of(std::nullopt, "nvidia-smi exited with status 9");
  q.tick();
  const std::string said = "no GPU memory reading (nvidia-smi exited with status 9); every GPU not used by a job "
                           "counts as free, as the original does";
  EXPECT_THAT(q.out, ElementsAre(q.line(said), q.line("start a on GPUs [0] (pid 1000)")));
  q.tick();
  EXPECT_THAT(q.out, IsEmpty());
  q.probe.reading = reading_of(std::map<int, long long>{{0, 0}});
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("nvidia-smi gives readings again")));
  q.tick();
  EXPECT_THAT(q.out, IsEmpty());
  q.probe.reading = reading_of(std::nullopt, "nvidia-smi exited with status 9");
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line(said)));
  EXPECT_EQ(q.probe.reads, 5);
}

TEST(Tick, AStateReplacedBetweenTicksIsReadAgainAndOnlyThen) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "deps": ["file:go"]},
             {"id": "b", "script": "b.sh", "gpus": 1, "deps": ["file:go"]}])");
  q.tick();
  q.tick();
  EXPECT_EQ(q.store.reads, 1);  // the state this loop saved is kept
  ControlResult h = q.control("hold", {"b"});
  EXPECT_THAT(h.lines, ElementsAre("held b (was pending); `gpuq retry b` releases it"));
  q.tick();
  EXPECT_EQ(q.store.reads, 2);
  q.files.present.insert("go");
  q.tick();
  EXPECT_EQ(q.store.reads, 2);
  EXPECT_THAT(q.out, ElementsAre(q.line("start a on GPUs [0] (pid 1000)")));
  EXPECT_EQ(q.status("b"), Status::Held);
}

TEST(Tick, AMissingFileIsWatchedAndOneMadeWhileTheWatchIsSetWakesAtOnce) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "deps": ["file:ckpt/READY"]}])");
  TickResult r = q.tick();
  EXPECT_THAT(q.waker.files, ElementsAre("ckpt/READY"));
  EXPECT_EQ(r.wake_in, 3600);
  // Made after decide looked and before the watch was set: no event would come.
  q.waker.on_watch_files = [&] { q.files.present.insert("ckpt/READY"); };
  r = q.tick();
  EXPECT_THAT(q.out, IsEmpty());
  EXPECT_EQ(r.wake_in, 0);
  q.waker.on_watch_files = nullptr;
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("start a on GPUs [0] (pid 1000)")));
  EXPECT_THAT(q.waker.files, IsEmpty());
}

TEST(Tick, AJobWithItsFilesWaitingForAGpuWatchesNoFile) {
  Loop q(R"([{"id": "r", "script": "r.sh", "gpus": 1}, {"id": "a", "script": "a.sh", "gpus": 1, "deps": ["file:x"]}])",
         {}, {0});
  q.adopt("r", 4242, {0});
  q.files.present.insert("x");
  TickResult r = q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("adopted 1 running job: r")));
  EXPECT_THAT(q.waker.files, IsEmpty());
  EXPECT_EQ(r.wake_in, 3600);  // r's end wakes run (watch_jobs), not a timer
  EXPECT_THAT(q.waker.jobs, ElementsAre(4242));
}

TEST(Tick, AnUnreachableStateIsTriedAgainShortly) {
  Loop q(kOne);
  q.store.fail_reads = StoreError("cannot open plan.state.json: Permission denied");
  TickResult r = q.tick();
  EXPECT_EQ(r.next, TickResult::Next::Wait);
  EXPECT_EQ(r.wake_in, 2);
  EXPECT_THAT(q.out, ElementsAre(q.line("cannot reach the state (cannot open plan.state.json: Permission denied): no "
                                        "job starts until it can; running jobs go on, and it is tried again shortly")));
  EXPECT_THAT(q.launcher.launches, IsEmpty());
  q.store.fail_reads.reset();
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("the state is saved again: jobs start again"),
                                 q.line("start a on GPUs [0] (pid 1000)")));
}

TEST(Tick, RunEndsWhenAllJobsAreFinished) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1, "deps": ["a"]}])");
  q.waker.on_wait = [&](double) {
    q.clock.advance(2);
    q.launcher.exit_all_running(0);
    return Wake{};
  };
  const double t0 = q.clock.t;
  EXPECT_EQ(q.loop->run(), 0);
  auto at = [&](double t, const std::string& s) { return clock_stamp(t) + " " + s; };
  EXPECT_THAT(q.out, ElementsAre(at(t0, "start a on GPUs [0] (pid 1000)"), at(t0 + 2, "done a"),
                                 at(t0 + 2, "start b on GPUs [0] (pid 1001)"), at(t0 + 4, "done b"),
                                 "all jobs finished: 2 done"));
  EXPECT_THAT(q.waker.waits, ElementsAre(3600, 3600));
}

TEST(Tick, AStopSignalEndsRunAndLeavesItsJobsRunning) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1}])");
  q.waker.on_wait = [](double) { return Wake{true, "Terminated"}; };
  EXPECT_EQ(q.loop->run(), 0);
  EXPECT_EQ(q.out.back(), q.line("stopped by Terminated: the state is saved; 2 job(s) left running: a, b; the next "
                                 "`gpuq run` adopts them"));
  EXPECT_THAT(q.launcher.signals, IsEmpty());
}

TEST(Tick, ADamagedStateEndsRunWithStatusOne) {
  Loop q(kOne);
  q.store.fail_reads = StoreError("plan.state.json: line 1, column 2: not valid JSON", StoreError::Kind::Content);
  EXPECT_EQ(q.loop->run(), 1);
  EXPECT_THAT(q.err, ElementsAre("gpuq run: plan.state.json: line 1, column 2: not valid JSON"));
  EXPECT_THAT(q.launcher.launches, IsEmpty());
  EXPECT_EQ(q.store.writes, 0);
}

TEST(Control, KillOfAJobWhoseProcessIsGoneMarksItFailedWithoutASignal) {
  Loop q(kOne);
  q.adopt("a", 4242, {0});
  q.launcher.vanish(4242);
  ControlResult k = q.control("kill", {"a"});
  EXPECT_EQ(k.status, 0);
  EXPECT_THAT(k.lines, ElementsAre("killed a: its process was already gone; marked failed"));
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  EXPECT_EQ(q.status("a"), Status::Failed);
  EXPECT_EQ(q.entry("a").exit, kKilledExit);
  EXPECT_FALSE(q.entry("a").kill_sent);
}

TEST(Control, KillDoesNotSignalARecycledPid) {
  Loop q(kOne);
  q.adopt("a", 4242, {0});
  q.launcher.procs[4242].recycled = true;
  EXPECT_THAT(q.control("kill", {"a"}).lines, ElementsAre("killed a: its process was already gone; marked failed"));
  EXPECT_THAT(q.launcher.signals, IsEmpty());
}

TEST(Control, HoldAndRetryOfARunningJobAreRefused) {
  Loop q(kOne);
  q.adopt("a", 4242, {0});
  ControlResult h = q.control("hold", {"a"});
  EXPECT_EQ(h.status, 1);
  EXPECT_THAT(h.lines, ElementsAre("not held: a is running (`gpuq kill a` stops it)"));
  ControlResult r = q.control("retry", {"a"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.lines, ElementsAre("not retried: a is running (pid 4242); a retry would start a second copy"));
  EXPECT_EQ(q.status("a"), Status::Running);
  EXPECT_EQ(q.entry("a").pid, 4242);
}

TEST(Control, RetryMakesEveryBlockedJobPendingToo) {
  Loop q(R"([{"id": "a", "script": "a.sh"}, {"id": "b", "script": "b.sh", "deps": ["a"]},
             {"id": "c", "script": "c.sh", "deps": ["a"]}])");
  State s;
  JobState failed, blocked;
  failed.status = Status::Failed;
  failed.exit = 3;
  blocked.status = Status::Blocked;
  s.set("a", failed);
  s.set("b", blocked);
  s.set("c", blocked);
  q.disk.replace(s);
  ControlResult r = q.control("retry", {"a"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.lines, ElementsAre("a is pending again (was failed)", "b is pending again (was blocked)",
                                   "c is pending again (was blocked)"));
  for (const char* id : {"a", "b", "c"}) EXPECT_EQ(q.status(id), Status::Pending) << id;
  EXPECT_FALSE(q.entry("a").exit);
}

TEST(Control, UnknownIdsChangeNothingAndTakeNoLock) {
  Loop q(kOne);
  ControlResult r = q.control("hold", {"a", "ghost"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.lines, ElementsAre("gpuq hold: no job ghost in plan.json; nothing was changed"));
  EXPECT_THAT(q.journal, ElementsAre("read"));  // is ghost a running job the plan no longer has? No lock for that
  EXPECT_EQ(q.other.writes, 0);
}

// The act's signals as data (issue 49): a signal the tick decides (a warning, a stop at the time
// limit) goes once the state that records it is saved and synced. A power cut between the two
// leaves the record of a signal never sent (the restart finds the job cut by the restart, timed
// out as recorded), never a job stopped with no word of why: its exit 143 would read as a
// failure, and be retried.
TEST(Tick, ASignalTheTickDecidesGoesOnlyOnceTheStateThatRecordsItIsSynced) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "time_limit_hours": 0.01, "warn_signal": "USR1@10"}])");
  q.tick();
  q.clock.advance(26);
  q.tick();
  EXPECT_THAT(q.journal, ElementsAre("lock", "save", "sync", "warn a", "unlock"));
  EXPECT_EQ(q.entry("a").warn_sent, q.clock.t);  // in the save that came before the warning
  q.clock.advance(10);
  q.tick();
  EXPECT_THAT(q.journal, ElementsAre("lock", "save", "sync", "term a", "unlock"));
  EXPECT_EQ(q.entry("a").outcome, "timeout");
  EXPECT_EQ(q.entry("a").kill_sent, q.clock.t);
}

// A stop whose record cannot be saved is not sent: the job runs on, as the state on disk says,
// and the next tick, which starts again from that state, decides the stop again. It goes once a
// save takes it; its line and its note in the job's log are said once, not at every try.
TEST(Tick, AStopWhoseRecordCannotBeSavedWaitsForTheDisk) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "time_limit_hours": 0.01}])");
  q.tick();
  q.clock.advance(36);
  auto full = [&] {
    q.store.fail_next_error = StoreError("cannot write plan.state.json.tmp.7: No space left on device",
                                         "plan.state.json.tmp.7", ENOSPC);
  };
  full();
  q.tick();
  EXPECT_THAT(q.journal, ElementsAre("lock", "save", "unlock"));
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  ASSERT_EQ(q.out.size(), 2u);
  EXPECT_THAT(q.out[0], HasSubstr("timed out a after 36 s (limit 36 s): SIGTERM to process group 1000"));
  EXPECT_THAT(q.out[1], HasSubstr("no job starts until the state can be saved"));
  // The next tick's first save (alone, first, after a failed one) fails too; its second succeeds.
  q.clock.advance(2);
  full();
  q.tick();
  EXPECT_THAT(q.journal, ElementsAre("lock", "read", "save", "save", "sync", "term a", "unlock"));
  EXPECT_THAT(q.out, ElementsAre(q.line("the state is saved again: jobs start again")));
  EXPECT_EQ(q.entry("a").outcome, "timeout");
  EXPECT_THAT(q.launcher.signals, ElementsAre(std::pair{1000LL, Signal::Term}));
  EXPECT_EQ(q.launcher.log_notes.size(), 1u);
}

// `gpuq kill` and `gpuq preempt` alike: the state that records the stop is written and synced
// before the signal (kill here, and preempt of a job with a preempt_signal).
TEST(Control, AStopIsSignalledOnlyOnceItsRecordIsSynced) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1,
             "preemptible": true, "preempt_signal": "USR1"}])");
  q.tick();
  q.journal.clear();
  EXPECT_EQ(q.control("kill", {"a"}).status, 0);
  EXPECT_THAT(q.journal, ElementsAre("lock", "read", "save", "sync", "term a", "unlock"));
  q.journal.clear();
  EXPECT_EQ(q.control("preempt", {"b"}).status, 0);
  EXPECT_THAT(q.journal, ElementsAre("lock", "read", "save", "sync", "warn b", "unlock"));
}

// A kill whose record cannot be written stops nothing: the write's error reaches the command
// (which says nothing was changed), the job runs on, its entry as it was. It killed the job
// first, and `run` then found it gone with no word of why and retried it: the kill undone.
TEST(Control, AKillThatCannotBeSavedSignalsNothing) {
  Loop q(kOne);
  q.tick();
  q.journal.clear();
  q.other.fail_next_error = StoreError("cannot write plan.state.json.tmp.9: No space left on device",
                                       "plan.state.json.tmp.9", ENOSPC);
  EXPECT_THROW(q.control("kill", {"a"}), StoreError);
  EXPECT_THAT(q.journal, ElementsAre("lock", "read", "save", "unlock"));
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  EXPECT_EQ(q.status("a"), Status::Running);
  EXPECT_FALSE(q.entry("a").kill_sent);
}

// While the state cannot be saved each tick starts again from the state on disk and decides the
// same things again; each line is said once. The tick whose save first succeeds decides them once
// more (its save comes first, alone): what it says again was said already. The manual test of a
// `gpuq kill` on a full disk printed `auto-retry a (retry 1)` twice, 4 s apart, for one retry.
TEST(Tick, ALineSaidWhileTheStateCouldNotBeSavedIsNotSaidAgainWhenItIs) {
  Loop q(kOne, [](RunOptions& o) { o.retry_after = 0; });
  q.tick();
  q.launcher.exit(1000, 3);
  q.store.fail_writes = StoreError("cannot write plan.state.json.tmp.7: No space left on device",
                                   "plan.state.json.tmp.7", ENOSPC);
  q.tick();
  ASSERT_EQ(q.out.size(), 3u);
  EXPECT_EQ(q.out[0], q.line("failed a (exit 3)"));
  EXPECT_THAT(q.out[1], HasSubstr("no job starts until the state can be saved"));  // the end's save, first
  EXPECT_EQ(q.out[2], q.line("auto-retry a (retry 1)"));
  EXPECT_THAT(q.launcher.launches.size(), 1u);  // nothing starts unsaved
  q.store.fail_writes.reset();
  q.clock.advance(2);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("the state is saved again: jobs start again"),
                                 q.line("start a on GPUs [0] (pid 1001)")));
  // The next failure of the job is a new line, said.
  q.launcher.exit(1001, 3);
  q.clock.advance(1);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("failed a (exit 3)"), q.line("auto-retry a (retry 2)"),
                                 q.line("start a on GPUs [0] (pid 1002)")));
}

// With --kill-grace 0 the SIGKILL follows the SIGTERM in the tick that stops the job. It goes
// with it or not at all: sent alone while the stop's save failed, it would end the job (its
// wrapper too, so no exit code) with the state on disk still saying it runs, and the next tick
// would take it for a job lost and run it again.
TEST(Tick, WithNoKillGraceTheSigkillWaitsForTheStopsSaveToo) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "time_limit_hours": 0.01, "max_retries": 2}])",
         [](RunOptions& o) { o.kill_grace = 0; });
  q.tick();
  q.clock.advance(36);
  q.store.fail_writes = StoreError("cannot write plan.state.json.tmp.7: No space left on device",
                                   "plan.state.json.tmp.7", ENOSPC);
  q.tick();
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  EXPECT_EQ(q.status("a"), Status::Running);
  q.store.fail_writes.reset();
  q.clock.advance(2);
  q.tick();
  // The code a wrapper may have renamed into place is synced before the SIGKILL can cut its sync.
  EXPECT_THAT(q.journal, ElementsAre("lock", "read", "sync code a", "save", "sync", "save", "term a", "kill a", "unlock"));
  EXPECT_EQ(q.entry("a").outcome, "timeout");
  EXPECT_EQ(q.launcher.launches.size(), 1u);  // not run again
}

// A chain's hand-off (write_exit_code, refresh_ended): the loop reads a's code as soon as it is in
// place, while a's wrapper still syncs it, and starts b at once. Nothing records a's end before
// its code is durable: run syncs it itself after b's launch (b's wrapper loads meanwhile) and
// before the save that records the end; b passes its start line only after that save; what a left
// in its group is killed after it. An end read once its wrapper is gone is synced all the same (a
// wrapper killed mid-sync is gone too).
TEST(Tick, AnEndReadWhileItsWrapperSyncsIsMadeDurableBeforeTheSaveThatRecordsIt) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1, "deps": ["a"]},
             {"id": "c", "script": "c.sh", "gpus": 1, "deps": ["b"]}])");
  q.tick();
  q.launcher.exit_syncing(1000, 0);
  q.tick();
  EXPECT_THAT(q.journal, ElementsAre("lock", "launch b", "sync code a", "save", "sync", "kill a", "release b", "unlock"));
  EXPECT_EQ(q.status("a"), Status::Done);
  q.launcher.exit(1001, 0);  // b's wrapper gone before the loop looked
  q.tick();
  EXPECT_THAT(q.journal, ElementsAre("lock", "launch c", "sync code b", "save", "sync", "kill b", "release c", "unlock"));
  EXPECT_THAT(q.launcher.synced, ElementsAre(ElementsAre("a"), ElementsAre("b")));
}

// A job's cgroup is removed as soon as its end is read, and that removal kills the wrapper still
// syncing the code: the code is synced first. A failed end is saved before its job may be launched
// again (save_ends_before_relaunch): synced before that save, once.
TEST(Tick, AnEndWhoseCgroupIsRemovedIsSyncedBeforeTheRemoval) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "mem_gib": 1}])");
  q.tick();
  ASSERT_TRUE(q.entry("a").cgroup) << "the fake gives a job with mem_gib a cgroup";
  q.launcher.exit_syncing(1000, 3);
  q.tick();
  EXPECT_THAT(q.journal, ElementsAre("lock", "sync code a", "remove cg-a", "save", "sync", "save", "kill a", "unlock"));
  EXPECT_THAT(q.launcher.synced, ElementsAre(ElementsAre("a")));
  EXPECT_EQ(q.status("a"), Status::Failed);
}
