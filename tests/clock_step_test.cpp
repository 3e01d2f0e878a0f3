// The wall clock against the monotonic one (core/clock_step.h), and a RunLoop over the fakes
// whose wall clock steps or whose look comes late: no limit, watchdog or retry early or late.
#include "gpuq/core/clock_step.h"

#include "tick_loop.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ClockStep, AStepIsTheWallTimeBeyondTheMonotonicTimeAndALateLookIsPastItsDue) {
  ClockReading a{1000, 50};
  ClockSeen s = see_clock(a, {1000 + 3605, 55}, 5);
  EXPECT_EQ(s.step, 3600);
  EXPECT_EQ(s.late, 0);
  EXPECT_EQ(s.old_now, 1005);
  s = see_clock(a, {1000 - 3595, 55}, 5);
  EXPECT_EQ(s.step, -3600);
  s = see_clock(a, {1001.5, 51}, 5);  // drift under kClockStepMin
  EXPECT_EQ(s.step, 0);
  s = see_clock(a, {1000 + 65, 50 + 65}, 5);  // stopped a minute
  EXPECT_EQ(s.step, 0);
  EXPECT_EQ(s.late, 60);
  s = see_clock(a, {1000 + 12, 50 + 12}, 5);  // a busy machine, under kLateLookMin
  EXPECT_EQ(s.late, 0);
}

TEST(ClockStep, MoveTimesMovesTheTimesOfTheOldClockOnly) {
  State st;
  JobState run;
  run.status = Status::Running;
  run.start = 900;
  run.log_grew = 990;
  run.kill_sent = 1100;  // written after the step, on the new clock
  st.set("a", run);
  JobState failed;
  failed.status = Status::Failed;
  failed.start = 800;
  failed.end = 850;
  st.set("b", failed);
  EXPECT_EQ(move_times(st, 3600, 1000), 4u);
  EXPECT_EQ(st.find("a")->start, 4500);
  EXPECT_EQ(st.find("a")->log_grew, 4590);
  EXPECT_EQ(st.find("a")->kill_sent, 1100);
  EXPECT_EQ(st.find("b")->end, 4450);
  EXPECT_EQ(st.find("b")->end.value() - st.find("b")->start.value(), 50);
}

TEST(ClockStep, TheWatchdogForgivesTheTimeNobodyLookedButNotPastNow) {
  State st;
  JobState run;
  run.status = Status::Running;
  run.start = 100;
  run.gpus_busy = 150;
  st.set("a", run);
  JobState done;
  done.status = Status::Done;
  done.start = 100;
  st.set("b", done);
  forgive_unwatched(st, 60, 190);
  EXPECT_EQ(st.find("a")->log_grew, 160);  // silent since its start: from there
  EXPECT_EQ(st.find("a")->gpus_busy, 190);
  EXPECT_EQ(st.find("a")->start, 100) << "a time limit counts the time: the job ran";
  EXPECT_FALSE(st.find("b")->log_grew);
  EXPECT_EQ(step_text(3599.6), "+1.0h");
  EXPECT_EQ(step_text(-42), "-42 s");
}

namespace {
constexpr const char* kLimited = R"({"jobs": [{"id": "a", "script": "a.sh", "gpus": 1, "time_limit_hours": 0.5},
  {"id": "b", "script": "b.sh", "gpus": 1}]})";
}  // namespace

TEST(ClockStepTick, AStepForwardKillsNothingEarlyAndRetriesNothingEarly) {
  Loop q(kLimited, [](RunOptions& o) { o.retry_after = 300; });
  q.clock.mono = 50;
  q.tick();  // a and b start
  q.launcher.exit(q.launcher.pid_of("b"), 1);
  q.clock.advance(10);
  q.tick();  // b failed: retried 300 s after its end
  q.clock.advance(60);
  q.clock.step(3600);  // NTP: an hour forward
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(HasSubstr("the wall clock jumped +1.0h (against the monotonic clock)")));
  EXPECT_EQ(q.status("a"), Status::Running) << "not timed out: it ran 70 s of its 30 min";
  EXPECT_EQ(q.status("b"), Status::Failed) << "not retried early";
  EXPECT_NEAR(q.entry("a").start.value(), q.clock.t - 70, 1e-6) << "its start on the new clock";
  q.clock.advance(240);
  q.tick();
  EXPECT_EQ(q.status("b"), Status::Running) << "retried 300 s after its end";
  q.clock.advance(1800 - 320);  // 10 s before its limit
  q.tick();
  EXPECT_EQ(q.status("a"), Status::Running);
  q.clock.advance(20);
  q.tick();
  EXPECT_EQ(q.entry("a").outcome.value_or(""), "timeout") << "and stopped at its limit, not later";
}

TEST(ClockStepTick, AStepBackRetriesNothingLateAndStillStopsAtTheLimit) {
  Loop q(kLimited, [](RunOptions& o) { o.retry_after = 300; });
  q.clock.mono = 50;
  q.tick();
  q.launcher.exit(q.launcher.pid_of("b"), 1);
  q.clock.advance(10);
  q.tick();
  q.clock.advance(60);
  q.clock.step(-3600);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(HasSubstr("the wall clock jumped -1.0h")));
  q.clock.advance(240);
  q.tick();
  EXPECT_EQ(q.status("b"), Status::Running) << "retried 300 s after its end, not an hour later";
  q.clock.advance(1800 - 290);
  q.tick();
  EXPECT_EQ(q.entry("a").outcome.value_or(""), "timeout");
}

TEST(ClockStepTick, WithoutAMonotonicClockNothingIsMoved) {
  Loop q(kLimited);
  q.tick();
  q.clock.advance(3700);
  q.tick();
  EXPECT_EQ(q.entry("a").outcome.value_or(""), "timeout");
}

// run stopped (SIGSTOP) in the middle of a tick, continued 12 s later: the next look, after the
// tick's own short wait, is late by that much and says so, as after a stop between ticks (the
// tick's own time was counted as due, and a stop that landed in it went unseen). A tick as slow
// without a stop (work: many sbatch calls, a git snapshot, a wait for a lock) is no late look.
TEST(ClockStepTick, AStopInTheMiddleOfATickMakesTheNextLookLateAndASlowTickDoesNot) {
  for (bool stop : {true, false}) {
    SCOPED_TRACE(stop ? "stopped in the tick" : "a slow tick");
    Loop q(kLimited, [](RunOptions& o) { o.poll = 1; });
    q.clock.mono = 50;
    q.tick();
    bool slow = false;
    q.store.on_note = [&](const std::string& what) {
      if (what == "lock" && !slow) {
        slow = true;
        q.clock.advance(12);  // stopped here and continued 12 s later, or 12 s of work
        q.clock.stopped = stop;
      }
    };
    TickResult r = q.tick();
    q.store.on_note = nullptr;
    EXPECT_THAT(q.out, ::testing::Not(::testing::Contains(HasSubstr("did not look"))));
    ASSERT_LE(r.wake_in, 1);
    q.clock.advance(r.wake_in);
    q.tick();
    if (stop)
      EXPECT_THAT(q.out, ::testing::Contains(HasSubstr("this run did not look for 12 s"))) << ::testing::PrintToString(q.out);
    else
      EXPECT_THAT(q.out, ::testing::Not(::testing::Contains(HasSubstr("did not look")))) << ::testing::PrintToString(q.out);
    q.clock.advance(1);
    q.tick();
    EXPECT_THAT(q.out, ::testing::Not(::testing::Contains(HasSubstr("did not look")))) << "said once";
  }
}
