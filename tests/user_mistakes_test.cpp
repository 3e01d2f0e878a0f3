// The mistakes users make and what gpuq says: typos in a plan are named, one plan file is one queue, `status`
// says whether a run works and on which plan, a job that cannot start fails for good,
// `requeue` is one step, and `run` says what others do. Pure and fake-driven parts here;
// real processes in user_mistakes_run_test.cpp.
#include <memory>

#include "fakes.h"
#include "gpuq/core/suggest.h"
#include "gpuq/live/control.h"
#include "gpuq/live/run_loop.h"
#include "test_util.h"
#include "tick_loop.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

namespace {

// The first error that contains `text`, or "" (for a readable failure message).
bool any_has(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(Suggest, EditDistanceCountsInsertsDeletesReplacesAndSwaps) {
  EXPECT_EQ(edit_distance("dep", "deps"), 1u);
  EXPECT_EQ(edit_distance("priorty", "priority"), 1u);
  EXPECT_EQ(edit_distance("est_huors", "est_hours"), 1u);  // a swap of neighbours is one edit
  EXPECT_EQ(edit_distance("GPUS", "gpus"), 0u);
  EXPECT_EQ(edit_distance("notes", "deps"), 4u);
  EXPECT_EQ(nearest_name("gpu", kJobFieldNames), "gpus");
  EXPECT_EQ(nearest_name("est_hour", kJobFieldNames), "est_hours");
  EXPECT_EQ(nearest_name("notes", kJobFieldNames), std::nullopt);
  EXPECT_EQ(nearest_name("comment", kJobFieldNames), std::nullopt);
}

TEST(PlanTypos, AMisspelledFieldIsAnErrorThatNamesTheFieldMeant) {
  auto errors = errors_of(R"([{"id": "prep", "script": "p.sh", "gpus": 0},
    {"id": "train", "script": "t.sh", "gpu": 4, "dep": ["prep"], "est_hour": 5, "priorty": 1}])");
  EXPECT_TRUE(any_has(errors, R"(job 'train': "gpu" is not a field of a job; did you mean "gpus"?)"))
      << ::testing::PrintToString(errors);
  EXPECT_TRUE(any_has(errors, R"("dep" is not a field of a job; did you mean "deps"?)"));
  EXPECT_TRUE(any_has(errors, R"("est_hour" is not a field of a job; did you mean "est_hours"?)"));
  EXPECT_TRUE(any_has(errors, R"("priorty" is not a field of a job; did you mean "priority"?)"));
}

// The issue's plan: other schedulers' names for deps, a limit, GPUs were ignored, and "second"
// started beside "first". Each is an error naming gpuq's field, even where the job gives it too.
TEST(PlanTypos, OtherSchedulersNamesForAFieldAreErrorsThatNameGpuqsField) {
  PlanLoad load = parse_plan(R"([{"id": "first", "script": "a.sh"},
    {"id": "second", "script": "b.sh", "depends_on": ["first"], "time_limit": 3, "num_gpus": 4},
    {"id": "third", "script": "c.sh", "walltime": "1:00:00", "command": "python x.py", "gpus": 1,
     "env_vars": {"A": "1"}, "Dependencies": ["first"]}])",
                             "plan.json", {0, 1, 2, 3});
  EXPECT_FALSE(load.plan);
  const auto& errors = load.errors;
  EXPECT_TRUE(any_has(errors, R"(job 'second': "depends_on" is not a field of a job; did you mean "deps"?)"))
      << ::testing::PrintToString(errors);
  EXPECT_TRUE(any_has(errors, R"(job 'second': "time_limit" is not a field of a job; did you mean "time_limit_hours"?)"));
  EXPECT_TRUE(any_has(errors, R"(job 'second': "num_gpus" is not a field of a job; did you mean "gpus"?)"));
  EXPECT_TRUE(any_has(errors, R"(job 'third': "walltime" is not a field of a job; did you mean "time_limit_hours"?)"));
  EXPECT_TRUE(any_has(errors, R"(job 'third': "command" is not a field of a job; did you mean "script"?)"));
  EXPECT_TRUE(any_has(errors, R"(job 'third': "env_vars" is not a field of a job; did you mean "env"?)"));
  EXPECT_TRUE(any_has(errors, R"(job 'third': "Dependencies" is not a field of a job; did you mean "deps"?)"));
  EXPECT_EQ(errors.size(), 7u) << ::testing::PrintToString(errors);
}

TEST(PlanTypos, OtherUnknownFieldsAreAcceptedAndListedForValidate) {
  PlanLoad load = parse_plan(R"([{"id": "a", "script": "a.sh", "notes": "baseline", "owner": "me"},
    {"id": "b", "script": "b.sh", "notes": "x", "gpus": 1, "gpus_": 2}])",
                             "plan.json", {0, 1, 2, 3});
  ASSERT_TRUE(load.plan) << ::testing::PrintToString(load.errors);
  EXPECT_THAT(load.warnings, IsEmpty());  // the notes are apart: validate lists them as its findings
  // "gpus_" is a near miss of "gpus", but the job gives "gpus" too: a note, not a typo.
  EXPECT_THAT(load.unknown_fields,
              ElementsAre(R"(plan.json: "gpus_" in 1 job(s) (b) is not a field gpuq reads; it is ignored)",
                          R"(plan.json: "notes" in 2 job(s) (a, b) is not a field gpuq reads; it is ignored)",
                          R"(plan.json: "owner" in 1 job(s) (a) is not a field gpuq reads; it is ignored)"));
}

TEST(PlanTypos, AnUnknownDepProducerOrTopLevelFieldSuggestsTheNearestName) {
  auto errors = errors_of(R"({"jobs": [{"id": "prep", "script": "p.sh"},
    {"id": "b", "script": "b.sh", "deps": ["perp", "after:prepp", "nothing_like_it"], "produced_by": "pre"}],
    "reservation": [{"gpus": [0], "jobs": ["b"]}]})");
  EXPECT_TRUE(any_has(errors, R"(job 'b': dep "perp" names no job of the plan; did you mean "prep"?)"))
      << ::testing::PrintToString(errors);
  EXPECT_TRUE(any_has(errors, R"(dep "after:prepp" names no job of the plan; did you mean "prep"?)"));
  EXPECT_TRUE(any_has(errors, R"(dep "nothing_like_it" names no job of the plan)"));
  EXPECT_FALSE(any_has(errors, R"("nothing_like_it" names no job of the plan; did you mean)"));
  EXPECT_TRUE(any_has(errors, R"("produced_by" names "pre", no job of the plan; did you mean "prep"?)"));
  EXPECT_TRUE(any_has(errors, R"(top level: "reservation" is not a field of a plan; did you mean "reservations"?)"));
}

// A job whose launch fails for a cause no retry fixes fails for good: not retried, finished
// for after: deps, and its plain dependents blocked, so that the plan ends.
TEST(Unstartable, AJobThatCannotStartFailsForGoodAndThePlanGoesOn) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1, "deps": ["after:a"]},
             {"id": "c", "script": "c.sh", "gpus": 1, "deps": ["a"]}])",
         [](RunOptions& o) { o.retry_after = 0; });
  q.launcher.cannot_start["a"] = "its log logs/a.log is a symbolic link, which gpuq does not follow; remove it";
  q.tick();
  EXPECT_THAT(q.out, Contains(HasSubstr("cannot start a: its log logs/a.log is a symbolic link")));
  const JobState& a = q.entry("a");
  EXPECT_EQ(a.status, Status::Failed);
  EXPECT_EQ(a.outcome, kUnstartableOutcome);
  EXPECT_THAT(a.reason.value_or(""), HasSubstr("symbolic link"));
  EXPECT_THAT(q.launcher.log_notes, Contains(std::pair<std::string, std::string>(
                                        "a", "cannot start: its log logs/a.log is a symbolic link, which gpuq does not follow; remove it")));
  q.clock.advance(1);
  q.tick();  // no retry (retry_after is 0): b starts (after: a finished), c is blocked
  EXPECT_EQ(q.entry("a").attempts_or0(), 0);
  EXPECT_EQ(q.launcher.launches.size(), 2u);
  EXPECT_EQ(q.launcher.launches[1].id, "b");
  EXPECT_EQ(q.status("c"), Status::Blocked);
  q.launcher.exit(q.launcher.pid_of("b"), 0);
  q.clock.advance(1);
  EXPECT_EQ(q.tick().next, TickResult::Next::Finished);
}

TEST(RunPane, ControlCommandsFromAnotherShellGetALineEach) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1, "deps": ["a"]},
             {"id": "c", "script": "c.sh", "gpus": 1, "deps": ["a"]}])");
  q.tick();
  q.control("hold", {"b"});
  q.control("kill", {"a"});
  q.clock.advance(1);
  q.tick();
  EXPECT_THAT(q.out, Contains(q.line("gpuq kill a from another shell: failed (was running)")));
  EXPECT_THAT(q.out, Contains(q.line("gpuq hold b from another shell: held (was pending)")));
  // Released, b is blocked at once: its dep a was killed.
  ControlResult r = q.control("retry", {"b"});
  EXPECT_THAT(r.lines, Contains("released b (was held), but it is blocked: its dep a failed; `gpuq retry a` runs the "
                                "dep again"));
  q.clock.advance(1);
  q.tick();
  EXPECT_THAT(q.out, Contains(q.line("gpuq retry b from another shell: blocked (was held)")));
}

TEST(RunPane, ARestartSaysWhichRunningJobsItAdopted) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1},
             {"id": "c", "script": "c.sh", "gpus": 1}])");
  q.adopt("a", 77, {0});
  q.adopt("c", 78, {1});
  q.tick();
  EXPECT_THAT(q.out, Contains(q.line("adopted 2 running jobs: a, c")));
  q.clock.advance(1);
  q.tick();
  EXPECT_THAT(q.out, Not(Contains(HasSubstr("adopted"))));  // once, at the start
}

TEST(RunPane, TheLastLineCountsOutcomesAndNamesEachFailure) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "hang", "script": "h.sh", "gpus": 1},
             {"id": "bad", "script": "b.sh", "gpus": 1}, {"id": "d", "script": "d.sh", "gpus": 1, "deps": ["bad"]}])",
         [](RunOptions& o) { o.max_retries = 0; });
  std::vector<std::string> out;
  q.waker.on_wait = [&](double) {
    q.clock.advance(1);
    if (q.status("a") == Status::Running) {
      q.launcher.exit(q.launcher.pid_of("a"), 0);
      q.launcher.exit(q.launcher.pid_of("bad"), 3);
      q.control("kill", {"hang"});
    }
    return Wake{};
  };
  RunLoop loop(q.plan, q.opt, Ports{q.clock, q.launcher, q.probe, q.store, q.files, q.waker},
               [&](const std::string& l) { out.push_back(l); }, [](const std::string&) {});
  EXPECT_EQ(loop.run(), kExitJobsNotDone);  // a job could not start
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), "all jobs finished: 1 done, 2 failed (hang: killed, bad: exit 3), 1 blocked by a failed dep (d)");
}

// kill then retry lets run start the after: dependents in between; requeue never does.
TEST(Requeue, TheJobIsPendingAgainOnceItsGroupIsGoneAndDependentsNeverStart) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1, "deps": ["after:a"]}])",
         [](RunOptions& o) { o.kill_grace = 30; });
  q.tick();
  long long first = q.launcher.pid_of("a");
  q.launcher.procs[first].ignores_term = true;  // takes its time to exit
  ControlResult r = q.control("requeue", {"a"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.lines, ElementsAre(HasSubstr("requeueing a: sent SIGTERM to process group 1000")));
  EXPECT_EQ(q.status("a"), Status::Running);  // until the group is gone
  q.launcher.procs[first].seen = {Observed::Kind::Vanished, -1, ""};  // the wrapper died, the group lives on
  q.clock.advance(5);
  q.tick();
  EXPECT_THAT(q.out, Contains(HasSubstr("gpuq requeue a from another shell")));
  EXPECT_EQ(q.status("a"), Status::Running);
  q.clock.advance(30);
  q.tick();  // past --kill-grace: SIGKILL
  EXPECT_THAT(q.launcher.signals, Contains(std::pair<long long, Signal>(first, Signal::Kill)));
  q.clock.advance(1);
  q.tick();
  EXPECT_THAT(q.out, Contains(q.line("requeued a: its process group is gone; it is pending again")));
  ASSERT_EQ(q.launcher.launches.size(), 2u);
  EXPECT_EQ(q.launcher.launches[1].id, "a");  // started again, and b never
  EXPECT_EQ(q.status("a"), Status::Running);
  EXPECT_EQ(q.status("b"), Status::Pending);
}

TEST(Requeue, OnlyARunningJobCanBeRequeued) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1}])");
  q.control("hold", {"b"});
  ControlResult r = q.control("requeue", {"b"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.lines, ElementsAre("not requeued: b is not running (it is held); `gpuq retry b` makes it pending"));
}

// Settings written beside "jobs" were ignored with a warning: the run then used max_retries 2,
// every GPU and no snapshots, silently. Each is an error that says where it goes.
TEST(UserMistakes, ASettingAtTheTopLevelIsAnErrorThatSaysWhereItGoes) {
  std::vector<std::string> errors = gpuq::test::errors_of(
      R"({"snapshot": "git", "max_retries": 0, "gpus": "0-3", "jobs": [{"id": "a", "script": "a.sh", "gpus": 1}]})");
  EXPECT_THAT(errors, ::testing::ElementsAre(
                          ::testing::HasSubstr("top level: \"snapshot\" is a setting, which gpuq reads in \"settings\"; "
                                               "did you mean \"settings\": {\"snapshot\": \"git\"}?"),
                          ::testing::HasSubstr("did you mean \"settings\": {\"max_retries\": 0}?"),
                          ::testing::HasSubstr("did you mean \"settings\": {\"gpus\": \"0-3\"}?")));
  // In "settings" they are read, and a field that is no setting is still only a warning.
  EXPECT_THAT(gpuq::test::errors_of(R"({"settings": {"max_retries": 0}, "note": "x",
                                        "jobs": [{"id": "a", "script": "a.sh", "gpus": 1}]})"),
              ::testing::IsEmpty());
}
