// Time limits (issue 13): the rule book's limits (limits.h), the plan fields, and
// `run`'s tick over the fakes (tick_loop.h): the warning signal, SIGTERM at the
// deadline, SIGKILL after the grace, a restart that keeps the deadline, retries.
#include <fmt/format.h>

#include "gpuq/core/limits.h"
#include "gpuq/core/outlook.h"
#include "gpuq/views/reasons.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/validate.h"
#include "tick_loop.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace {

WarnSpec warn_of(const std::string& text) {
  auto r = parse_warn_signal(text);
  if (auto* p = std::get_if<std::string>(&r)) throw std::runtime_error(*p);
  return std::get<WarnSpec>(r);
}

std::string warn_problem(const std::string& text) {
  auto r = parse_warn_signal(text);
  auto* p = std::get_if<std::string>(&r);
  return p ? *p : "<parsed>";
}

}  // namespace

TEST(Limits, WarnSignalIsANameOrNumberAtSeconds) {
  EXPECT_EQ(warn_of("USR1@90").name, "USR1");
  EXPECT_EQ(warn_of("USR1@90").seconds, 90);
  EXPECT_EQ(warn_of("sigusr2@1.5").name, "USR2");
  EXPECT_EQ(warn_of("sigusr2@1.5").seconds, 1.5);
  EXPECT_EQ(warn_of("10@0").number, 10);
  EXPECT_EQ(warn_of("10@0").name, "");
  EXPECT_EQ(warn_of("10@30").text(), "10@30");
  EXPECT_EQ(warn_of("SIGHUP@30").text(), "HUP@30");
  EXPECT_FALSE(warn_of("USR1@90").shell_only);
  EXPECT_TRUE(warn_of("B:USR1@90").shell_only);  // Slurm's --signal form: the batch shell only
  EXPECT_EQ(warn_of("B:SIGUSR2@60").name, "USR2");
  EXPECT_EQ(warn_of("b:10@60").text(), "B:10@60");
  EXPECT_THAT(warn_problem("B:@60"), HasSubstr("unknown signal"));
  EXPECT_THAT(warn_problem("USR1"), HasSubstr("has no '@'"));
  EXPECT_THAT(warn_problem("USR3@90"), HasSubstr("unknown signal \"USR3\""));
  EXPECT_THAT(warn_problem("65@90"), HasSubstr("signal number 65 is not 1-64"));
  EXPECT_THAT(warn_problem("USR1@"), HasSubstr("is not a number of seconds"));
  EXPECT_THAT(warn_problem("USR1@-5"), HasSubstr("\"-5\" is not a number of seconds"));
  EXPECT_THAT(warn_problem("USR1@9x"), HasSubstr("\"9x\" is not a number of seconds"));
}

TEST(Limits, PlanFieldsAreReadAndMalformedOnesNameTheJobAndField) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "est_hours": 2, "time_limit_hours": 3,
                        "warn_signal": "USR1@90", "retry_on_timeout": true},
                       {"id": "b", "script": "b.sh"}])");
  EXPECT_EQ(p.jobs[0].time_limit_hours, 3);
  ASSERT_TRUE(p.jobs[0].warn_signal);
  EXPECT_EQ(p.jobs[0].warn_signal->text(), "USR1@90");
  EXPECT_TRUE(p.jobs[0].retry_on_timeout);
  EXPECT_FALSE(p.jobs[1].time_limit_hours);
  EXPECT_FALSE(p.jobs[1].warn_signal);
  EXPECT_FALSE(p.jobs[1].retry_on_timeout);
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "warn_signal": "USR1"}])"),
              ElementsAre(HasSubstr("inline.json: job 'a': \"warn_signal\" \"USR1\" has no '@'")));
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "warn_signal": 10}])"),
              ElementsAre(HasSubstr("job 'a': \"warn_signal\" must be a string like \"USR1@90\", not")));
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "time_limit_hours": "4h"}])"),
              ElementsAre(HasSubstr("job 'a': \"time_limit_hours\" must be a number")));
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "time_limit_hours": 0}])"),
              ElementsAre(HasSubstr("job 'a': \"time_limit_hours\" must be more than 0")));
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "retry_on_timeout": 1}])"),
              ElementsAre(HasSubstr("job 'a': \"retry_on_timeout\" must be true or false")));
}

TEST(Limits, TheLimitIsTheFieldElseTheFactorTimesTheEstimate) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "est_hours": 2, "time_limit_hours": 3},
                       {"id": "b", "script": "b.sh", "est_hours": 2}])");
  EXPECT_EQ(limit_hours(p.jobs[0], 0), 3);
  EXPECT_EQ(limit_hours(p.jobs[0], 1.5), 3);
  EXPECT_FALSE(limit_hours(p.jobs[1], 0));
  EXPECT_EQ(limit_hours(p.jobs[1], 1.5), 3);
  EXPECT_EQ(run_hours(p.jobs[1], 0), 2);
  EXPECT_EQ(run_hours(p.jobs[1], 0.5), 1);
  JobState s;
  s.status = Status::Running;
  s.start = 1000;
  EXPECT_EQ(deadline(p.jobs[0], s, 0), 1000 + 3 * 3600);
  EXPECT_FALSE(deadline(p.jobs[1], s, 0));
  EXPECT_EQ(timeout_exit(p.jobs[0]), kKilledExit);
}

TEST(Limits, CheckLimitWarnsOnceThenTimesOut) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "time_limit_hours": 0.01, "warn_signal": "USR1@6"}])");
  JobState s;
  s.status = Status::Running;
  s.start = 1000;  // deadline 1036, warning at 1030
  LimitCheck c = check_limit(p.jobs[0], s, 0, 1010);
  EXPECT_EQ(c.act, LimitCheck::Act::None);
  EXPECT_DOUBLE_EQ(c.next_in, 20);
  c = check_limit(p.jobs[0], s, 0, 1030);
  EXPECT_EQ(c.act, LimitCheck::Act::Warn);
  EXPECT_DOUBLE_EQ(c.next_in, 6);
  s.warn_sent = 1030;
  c = check_limit(p.jobs[0], s, 0, 1031);
  EXPECT_EQ(c.act, LimitCheck::Act::None);
  EXPECT_DOUBLE_EQ(c.next_in, 5);
  EXPECT_EQ(check_limit(p.jobs[0], s, 0, 1036).act, LimitCheck::Act::Timeout);
  s.status = Status::Done;
  EXPECT_EQ(check_limit(p.jobs[0], s, 0, 2000).act, LimitCheck::Act::None);
}

TEST(LimitsTick, AtTheLimitTheGroupGetsSigtermAndTheJobFailsAsTimedOut) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "time_limit_hours": 0.01}])");
  TickResult r = q.tick();
  EXPECT_DOUBLE_EQ(r.wake_in, 36);  // the deadline, not --poll (3600 here)
  q.clock.advance(35.9);
  q.tick();
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  EXPECT_EQ(q.status("a"), Status::Running);
  q.clock.advance(0.1);
  r = q.tick();
  EXPECT_THAT(q.launcher.signals, ElementsAre(std::pair{1000LL, Signal::Term}));
  EXPECT_THAT(q.out, ElementsAre(q.line("timed out a after 36 s (limit 36 s): SIGTERM to process group 1000; "
                                        "not retried automatically")));
  const JobState& a = q.entry("a");
  EXPECT_EQ(a.status, Status::Failed);
  EXPECT_EQ(a.exit, kKilledExit);  // the original reads it as killed: not retried
  EXPECT_EQ(a.outcome, "timeout");
  EXPECT_EQ(a.end, q.clock.t);
  EXPECT_EQ(outcome_of(a), Outcome::Timeout);
  ASSERT_EQ(q.launcher.log_notes.size(), 1u);
  EXPECT_EQ(q.launcher.log_notes[0].first, "a");
  EXPECT_THAT(q.launcher.log_notes[0].second, HasSubstr("time limit 36 s reached after 36 s"));
  // The group is gone (the fake obeys SIGTERM): the plan is finished.
  EXPECT_EQ(q.tick().next, TickResult::Next::Finished);
}

TEST(LimitsTick, TheWarningComesOnceBeforeTheLimitAndTheTimeoutLineSaysWhen) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "time_limit_hours": 0.01, "warn_signal": "USR1@10"}])");
  EXPECT_DOUBLE_EQ(q.tick().wake_in, 26);
  q.clock.advance(26);
  std::string warned_at = local_time(q.clock.t, q.clock.t + 10);
  TickResult r = q.tick();
  EXPECT_THAT(q.launcher.warnings, ElementsAre(std::pair{1000LL, std::string("USR1@10")}));
  EXPECT_THAT(q.out, ElementsAre(q.line("warned a: USR1@10 to process group 1000")));
  EXPECT_EQ(q.entry("a").warn_sent, q.clock.t);
  EXPECT_EQ(q.entry("a").status, Status::Running);
  EXPECT_DOUBLE_EQ(r.wake_in, 10);
  q.clock.advance(5);
  EXPECT_DOUBLE_EQ(q.tick().wake_in, 5);
  EXPECT_EQ(q.launcher.warnings.size(), 1u);  // once
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  q.clock.advance(5);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line(fmt::format("timed out a after 36 s (limit 36 s), warned with USR1@10 at "
                                                    "{}: SIGTERM to process group 1000; not retried automatically",
                                                    warned_at))));
  EXPECT_EQ(q.launcher.warnings.size(), 1u);
}

TEST(LimitsTick, AJobIgnoringSigtermGetsSigkillAfterTheGraceAndKeepsItsGpuUntilThen) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "priority": 1, "time_limit_hours": 0.01},
             {"id": "b", "script": "b.sh", "gpus": 1, "priority": 2}])",
         [](RunOptions& o) { o.kill_grace = 30; }, {0});
  q.tick();
  q.launcher.procs[1000].ignores_term = true;
  q.clock.advance(36);
  TickResult r = q.tick();
  EXPECT_THAT(q.launcher.signals, ElementsAre(std::pair{1000LL, Signal::Term}));
  EXPECT_EQ(q.entry("a").kill_sent, q.clock.t);
  EXPECT_EQ(q.launcher.launches.size(), 1u);  // GPU 0 is a's until its group is gone
  EXPECT_DOUBLE_EQ(r.wake_in, 30);
  q.clock.advance(29);
  q.tick();
  EXPECT_EQ(q.launcher.launches.size(), 1u);
  q.clock.advance(1);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("SIGKILL to a (process group 1000): still alive 30 s after SIGTERM"),
                                 q.line("start b on GPUs [0] (pid 1001)")));
  EXPECT_EQ(q.launcher.signals.back(), (std::pair{1000LL, Signal::Kill}));
  EXPECT_EQ(q.entry("a").outcome, "timeout");
}

TEST(LimitsTick, ARestartedRunKeepsTheDeadlineFromTheRecordedStartAndDoesNotWarnTwice) {
  // Limit 180 s, warning 90 s before it; the job started 100 s ago under another run.
  const char* plan = R"([{"id": "a", "script": "a.sh", "gpus": 1, "time_limit_hours": 0.05,
                          "warn_signal": "USR2@90"}])";
  {
    Loop q(plan);
    q.adopt("a", 555, {0});
    State s = q.disk.state;
    s.at("a").warn_sent = q.clock.t - 20;  // the first run warned it
    q.disk.replace(s);
    TickResult r = q.tick();
    EXPECT_THAT(q.launcher.warnings, IsEmpty());
    EXPECT_THAT(q.launcher.launches, IsEmpty());
    EXPECT_DOUBLE_EQ(r.wake_in, 80);
    q.clock.advance(80);
    q.tick();
    EXPECT_THAT(q.launcher.signals, ElementsAre(std::pair{555LL, Signal::Term}));
    EXPECT_EQ(q.entry("a").outcome, "timeout");
  }
  {
    Loop q(plan);  // the same, but the first run stopped before the warning was due
    q.adopt("a", 555, {0});
    TickResult r = q.tick();
    EXPECT_THAT(q.launcher.warnings, ElementsAre(std::pair{555LL, std::string("USR2@90")}));
    EXPECT_DOUBLE_EQ(r.wake_in, 80);
  }
}

TEST(LimitsTick, ATimedOutJobIsRetriedOnlyWithRetryOnTimeout) {
  // (A long --kill-grace: the tick that stops a job sends SIGTERM at its end, so its group is
  // alive through the tick, and the wait is also the grace's.)
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "time_limit_hours": 0.01},
             {"id": "b", "script": "b.sh", "gpus": 1, "time_limit_hours": 0.01, "retry_on_timeout": true}])",
         [](RunOptions& o) {
           o.retry_after = 300;
           o.kill_grace = 1000;
         });
  q.tick();
  q.clock.advance(36);
  TickResult r = q.tick();
  EXPECT_EQ(q.entry("a").exit, kKilledExit);
  EXPECT_EQ(q.entry("b").exit, kTimeoutRetryExit);  // a failure the original retries too
  EXPECT_EQ(q.entry("b").outcome, "timeout");
  EXPECT_THAT(q.out[1], HasSubstr("timed out b after 36 s (limit 36 s): SIGTERM to process group 1001; retried "
                                  "automatically (retry_on_timeout)"));
  EXPECT_DOUBLE_EQ(r.wake_in, 300);
  q.clock.advance(300);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("auto-retry b (retry 1)"), q.line("start b on GPUs [0] (pid 1002)")));
  EXPECT_EQ(q.status("a"), Status::Failed);
  EXPECT_EQ(q.launcher.launches.size(), 3u);
  // The new attempt is a fresh entry: no outcome, no warning recorded, its own deadline.
  EXPECT_FALSE(q.entry("b").outcome);
  EXPECT_EQ(q.entry("b").start, q.clock.t);
}

TEST(LimitsTick, TheWakeTimeIsTheNextDeadlineOrWarningOfAllJobs) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "time_limit_hours": 0.02},
             {"id": "b", "script": "b.sh", "gpus": 1, "est_hours": 0.01},
             {"id": "c", "script": "c.sh", "gpus": 1, "time_limit_hours": 0.03, "warn_signal": "USR1@100"}])",
         [](RunOptions& o) {
           o.time_limit_factor = 3;
           o.kill_grace = 1000;  // (a's group is alive through the tick that stops it: not the wait)
         });
  // a at 72 s, b at 3 x 36 = 108 s, c's warning at 108 - 100 = 8 s.
  EXPECT_DOUBLE_EQ(q.tick().wake_in, 8);
  q.clock.advance(8);
  EXPECT_DOUBLE_EQ(q.tick().wake_in, 64);
  q.clock.advance(64);
  EXPECT_DOUBLE_EQ(q.tick().wake_in, 36);
  EXPECT_EQ(q.entry("a").outcome, "timeout");
  q.clock.advance(36);
  q.tick();
  EXPECT_EQ(q.entry("b").outcome, "timeout");
  EXPECT_EQ(q.entry("c").outcome, "timeout");
}

TEST(LimitsTick, WithoutLimitsNothingIsSignalledAndTheWaitIsThePoll) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "est_hours": 0.01}])");
  EXPECT_EQ(q.tick().wake_in, 3600);
  q.clock.advance(10 * 3600);
  EXPECT_EQ(q.tick().wake_in, 3600);
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  EXPECT_EQ(q.status("a"), Status::Running);
}

TEST(LimitsStatus, ATimedOutJobSaysSoAndItsOutcomeIsTimeout) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "time_limit_hours": 4, "warn_signal": "USR1@90"},
                       {"id": "b", "script": "b.sh"}, {"id": "c", "script": "c.sh"}, {"id": "d", "script": "d.sh"}])");
  State st;
  JobState a;
  a.status = Status::Failed;
  a.start = 0;
  a.end = 4 * 3600;
  a.exit = kKilledExit;
  a.outcome = "timeout";
  a.warn_sent = 4 * 3600 - 90;
  st.set("a", a);
  JobState b;
  b.status = Status::Failed;
  b.exit = kKilledExit;
  b.end = 10;
  st.set("b", b);
  JobState c;
  c.status = Status::Done;
  c.exit = 0;
  st.set("c", c);
  double now = 5 * 3600;
  Outlook o = make_outlook(p, st, Policy{}, now, 0, FileTable([](const std::string&) { return true; }));
  EXPECT_EQ(why_text(p, st, o, o.jobs[0]),
            fmt::format("timed out after 4.00h (limit 4.00h), warned with USR1@90 at {}; `gpuq retry "
                        "a` runs it again",
                        local_time(4 * 3600 - 90, now)));
  EXPECT_EQ(o.jobs[0].outcome, "timeout");
  EXPECT_EQ(o.jobs[1].outcome, "killed");
  EXPECT_EQ(o.jobs[2].outcome, "done");
  EXPECT_FALSE(o.jobs[3].outcome);  // pending: null
}

TEST(LimitsPrediction, TheSimulatorEndsAJobAtItsLimitAndValidateWarns) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "est_hours": 3, "time_limit_hours": 1, "retry_on_timeout": true},
                       {"id": "b", "script": "b.sh", "est_hours": 2, "deps": ["a"]}])");
  // a is retried on timeout: each attempt resumes, runs at most its limit, and its retry comes
  // --retry-after (300 s) after the timeout; the third attempt has 1 h left and ends done.
  Simulation sim = simulate(p, SimOptions{});
  const double gap = 300.0 / 3600;
  ASSERT_EQ(sim.rows.size(), 4u);
  EXPECT_DOUBLE_EQ(sim.rows[0].end, 1);
  EXPECT_DOUBLE_EQ(sim.rows[1].start, 1 + gap);
  EXPECT_DOUBLE_EQ(sim.rows[1].end, 2 + gap);
  EXPECT_DOUBLE_EQ(sim.rows[2].start, 2 + 2 * gap);
  EXPECT_DOUBLE_EQ(sim.rows[2].end, 3 + 2 * gap);
  EXPECT_EQ(p.jobs[sim.rows[3].job].id, "b");
  EXPECT_DOUBLE_EQ(sim.rows[3].end, 5 + 2 * gap);
  EXPECT_TRUE(sim.blocked.empty());
  SimOptions f;
  f.time_limit_factor = 0.5;  // b: limit 1 h, and no retry_on_timeout: it times out
  sim = simulate(p, f);
  EXPECT_DOUBLE_EQ(sim.rows[3].end, 4 + 2 * gap);
  // With one retry, a cannot finish: b is predicted never to run.
  SimOptions one;
  one.max_retries = 1;
  sim = simulate(p, one);
  ASSERT_EQ(sim.rows.size(), 2u);
  ASSERT_EQ(sim.blocked.size(), 1u);
  EXPECT_EQ(stuck_text(p, one, sim.blocked[0]),
            "a is predicted to time out at each of its 2 attempts (est_hours 3 is more than 2 attempts of its limit "
            "1h, with retry_on_timeout and --max-retries 1), so it never runs");
  auto yes = [](const std::string&) { return true; };
  std::vector<Finding> found = validate_plan(p, {0, 1, 2, 3, 4, 5, 6, 7}, 0.5, FileTable(yes), yes);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].error);
  EXPECT_EQ(found[0].job, "a");
  EXPECT_THAT(found[0].text, HasSubstr("est_hours 3 is over its time_limit_hours 1"));
}

// A job cut at its limit without retry_on_timeout fails there, as `run` records it: its plain
// dependents (and theirs) are blocked, its after: dependents run once it has ended.
TEST(LimitsPrediction, AJobPredictedToTimeOutBlocksItsPlainDependentsNotItsAfterOnes) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "est_hours": 3, "time_limit_hours": 1},
                       {"id": "b", "script": "b.sh", "est_hours": 2, "deps": ["a"]},
                       {"id": "c", "script": "c.sh", "est_hours": 1, "deps": ["b"]},
                       {"id": "d", "script": "d.sh", "est_hours": 1, "deps": ["after:a"]},
                       {"id": "e", "script": "e.sh", "est_hours": 1, "deps": ["after:b"]}])");
  Simulation sim = simulate(p, SimOptions{});
  EXPECT_THAT(sim.stuck, IsEmpty());  // not a plan that cannot be scheduled
  std::map<std::string, std::pair<double, double>> ran;
  for (const SimRow& r : sim.rows) ran[p.jobs[r.job].id] = {r.start, r.end};
  EXPECT_EQ(ran, (std::map<std::string, std::pair<double, double>>{{"a", {0, 1}}, {"d", {1, 2}}, {"e", {1, 2}}}));
  ASSERT_EQ(sim.blocked.size(), 2u);
  EXPECT_EQ(p.jobs[sim.blocked[0].job].id, "b");
  EXPECT_EQ(p.jobs[sim.blocked[1].job].id, "c");
  EXPECT_EQ(stuck_text(p, SimOptions{}, sim.blocked[0]),
            "a is predicted to time out (est_hours 3 over its limit 1h, no retry_on_timeout), so it never runs");
  // status, from a live state where a runs: b waits for a, and is said never to run.
  State st;
  JobState a;
  a.status = Status::Running;
  a.pid = 7;
  a.start = 0;
  a.gpus = std::vector<int>{0};
  st.set("a", a);
  Outlook o = make_outlook(p, st, Policy{}, 1800, 0b11111110, FileTable([](const std::string&) { return true; }));
  EXPECT_FALSE(o.jobs[1].predicted_start);
  EXPECT_EQ(why_text(p, st, o, o.jobs[1]), "waits for a to be done; " + stuck_text(p, SimOptions{}, sim.blocked[0]));
  EXPECT_EQ(o.never.size(), 2u);
  ASSERT_TRUE(o.jobs[3].predicted_start);
  EXPECT_DOUBLE_EQ(*o.jobs[3].predicted_start, 3600);  // d: when a is stopped at its limit
}

TEST(LimitsTick, RunWaitsForTheDeadlineLessTheTimeItsTickTook) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "time_limit_hours": 0.01}])");
  q.waker.on_watch_files = [&] { q.clock.advance(0.25); };  // a slow tick: many starts, a slow disk
  q.waker.on_wait = [&](double) { return Wake{true, "Terminated"}; };
  EXPECT_EQ(q.loop->run(), 0);
  ASSERT_EQ(q.waker.waits.size(), 1u);
  EXPECT_DOUBLE_EQ(q.waker.waits[0], 36 - 0.25);  // the deadline is 36 s after the recorded start
}
