// End to end: the built gpuq binary run as a user would, on good and bad plans.
#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.h"

using gpuq::test::run_gpuq;
using gpuq::test::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {
constexpr const char* kPlan = R"({"jobs": [
  {"id": "prep", "script": "p.sh", "gpus": 0, "est_hours": 0.5},
  {"id": "train", "script": "t.sh", "gpus": 2, "est_hours": 3, "deps": ["prep"]},
  {"id": "eval_train", "script": "e.sh", "gpus": 1, "est_hours": 1, "deps": ["train"]}
]})";
}

TEST(CliSimulate, PrintsTheTimelineAndHidesEvalRows) {
  TempDir d;
  d.write("plan.json", kPlan);
  auto r = run_gpuq({"simulate", "--plan", "plan.json"}, d.path());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "  0.00h ->   0.50h gpus=[]       prep\n"
            "  0.50h ->   3.50h gpus=[0, 1]   train\n"
            "makespan 4.5h, GPU utilization 19.4%\n");
  auto all = run_gpuq({"simulate", "--plan", "plan.json", "--all"}, d.path());
  EXPECT_THAT(all.out, HasSubstr("  3.50h ->   4.50h gpus=[0]      eval_train\n"));
}

TEST(CliSimulate, GpusFlagNamesRealIds) {
  TempDir d;
  d.write("plan.json", kPlan);
  auto r = run_gpuq({"simulate", "--plan", "plan.json", "--gpus", "4,5,6,7"}, d.path());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("gpus=[4, 5]   train"));
  EXPECT_THAT(r.out, HasSubstr("GPU utilization 38.9%"));
}

TEST(CliSimulate, InvalidPlanExitsTwoNamingFileJobAndProblem) {
  TempDir d;
  d.write("bad.json", R"([{"id": "a", "script": "a.sh", "gpus": "2"}, {"id": "b", "script": "b.sh", "deps": ["zz"]}])");
  auto r = run_gpuq({"simulate", "--plan", "bad.json"}, d.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("not valid (2 problems)"));
  EXPECT_THAT(r.err, HasSubstr("bad.json: job 'a': \"gpus\" must be a whole number"));
  EXPECT_THAT(r.err, HasSubstr("bad.json: job 'b': dep \"zz\" names no job of the plan"));
}

TEST(CliSimulate, MalformedJsonGivesLineAndColumn) {
  TempDir d;
  d.write("bad.json", "[\n{\"id\": \"a\" \"script\": \"x\"}\n]");
  auto r = run_gpuq({"simulate", "--plan", "bad.json"}, d.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("bad.json: line 2, column 12: invalid JSON"));
}

TEST(CliSimulate, MissingPlanFileExitsTwo) {
  TempDir d;
  auto r = run_gpuq({"simulate", "--plan", "nope.json"}, d.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("nope.json: cannot read the plan: No such file or directory"));
}

TEST(CliSimulate, BadGpusFlagExitsTwo) {
  TempDir d;
  d.write("plan.json", kPlan);
  auto r = run_gpuq({"simulate", "--plan", "plan.json", "--gpus", "0,1,one"}, d.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("'one'"));
}

TEST(CliSimulate, WiderThanNodeIsRejectedNamingTheJob) {
  TempDir d;
  d.write("plan.json", kPlan);
  auto r = run_gpuq({"simulate", "--plan", "plan.json", "--gpus", "0"}, d.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("job 'train': needs 2 GPUs but --gpus gives 1"));
}

TEST(CliSimulate, UnschedulablePlanExitsOneAndNamesStuckJobs) {
  TempDir d;
  d.write("plan.json", R"({"jobs": [
    {"id": "x", "script": "s", "gpus": 4}, {"id": "y", "script": "s", "gpus": 4},
    {"id": "after_x", "script": "s", "gpus": 0, "deps": ["x"]}
  ], "reservations": [{"gpus": [0], "jobs": ["x"]}, {"gpus": [1], "jobs": ["y"]}]})");
  auto r = run_gpuq({"simulate", "--plan", "plan.json", "--gpus", "0,1,2,3"}, d.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("cannot be scheduled"));
  EXPECT_THAT(r.err, HasSubstr("x: needs 4 GPUs, 3 of 4 are open to it; reservation #2 closes GPUs [1]"));
  EXPECT_THAT(r.err, HasSubstr("after_x: waits for x, which never ran"));
}

TEST(CliSimulate, StallBreakerNoteGoesToStderrOnly) {
  TempDir d;
  d.write("plan.json", R"({"jobs": [
    {"id": "full", "script": "x", "gpus": 8, "priority": 1, "est_hours": 1},
    {"id": "member", "script": "x", "gpus": 2, "priority": 2, "est_hours": 4}
  ], "reservations": [{"gpus": [6, 7], "jobs": ["member"]}]})");
  auto r = run_gpuq({"simulate", "--plan", "plan.json"}, d.path());
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.err, HasSubstr("started them without the limit"));
  EXPECT_THAT(r.out, Not(HasSubstr("limit")));
  EXPECT_THAT(r.out, HasSubstr("  4.00h ->   5.00h gpus=[0, 1, 2, 3, 4, 5, 6, 7] full\n"));
}

TEST(CliSimulate, HelpExplainsEveryFlag) {
  auto r = run_gpuq({"simulate", "--help"});
  EXPECT_EQ(r.status, 0);
  for (const char* flag : {"--plan", "--gpus", "--all", "--backfill-max-hours"}) EXPECT_THAT(r.out, HasSubstr(flag));
}

TEST(CliSimulate, UnknownFlagExitsTwo) {
  auto r = run_gpuq({"simulate", "--plan", "p.json", "--bogus"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--bogus"));
}

TEST(Demo, TheDemoQueueRunsToTheEnd) {
  TempDir d;
  std::filesystem::copy(std::string(EXAMPLES) + "/demo", d.path(), std::filesystem::copy_options::recursive);
  // Start from a fresh state even if the demo was run in the source tree.
  for (const char* leftover : {"plan.state.json", "plan.state.json.bak", "plan.lock", "logs", "out"})
    std::filesystem::remove_all(d.path() + "/" + leftover);
  auto r = run_gpuq({"run", "--plan", "plan.json"}, d.path(), {{"DEMO_SECONDS", "0.2"}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("start train_a on GPUs [0, 1]"));
  EXPECT_THAT(r.out, HasSubstr("all jobs finished"));
  auto s = run_gpuq({"status", "--plan", "plan.json"}, d.path());
  EXPECT_THAT(s.out, ::testing::StartsWith("{'done': 8}\n"));
  EXPECT_THAT(s.out, HasSubstr("nothing left to run"));
}

TEST(Demo, TheExamplePlanIsValidAndSchedulable) {
  auto r = run_gpuq({"simulate", "--plan", std::string(EXAMPLES) + "/plan.json", "--all"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("gpus=[0, 1]   train_arm_a"));
  // Only the note on the first-look line (--all lists the eval_ jobs): no warning, no stall.
  EXPECT_EQ(r.err, "gpuq: the round-100 line gives when the first and the last job with first_look_frac reach that "
                   "fraction of their est_hours\n");
}
