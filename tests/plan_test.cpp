// The plan loader: defaults, both shapes, and one test per kind of rejected plan.
#include <gtest/gtest.h>

#include "gpuq/core/plan.h"
#include "gpuq/live/proc.h"
#include "test_util.h"

using namespace gpuq;
using gpuq::test::errors_of;
using gpuq::test::plan_of;
using ::testing::HasSubstr;

namespace {

// The single error of a plan that has exactly one problem.
std::string only_error(const std::string& json, const std::vector<int>& gpus = {0, 1, 2, 3, 4, 5, 6, 7}) {
  auto errors = errors_of(json, gpus);
  EXPECT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
  return errors.empty() ? "" : errors[0];
}

}  // namespace

TEST(PlanLoader, ListShapeGetsTheOriginalsDefaults) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "comment": "unknown fields are ignored"}])");
  ASSERT_EQ(p.jobs.size(), 1u);
  const Job& a = p.jobs[0];
  EXPECT_EQ(a.gpus, 1);
  EXPECT_EQ(a.priority, 50);
  EXPECT_EQ(a.est_hours, 1.0);
  EXPECT_FALSE(a.est_given);
  EXPECT_TRUE(a.deps.empty());
  EXPECT_EQ(a.produced_at_frac, 1.0);
  EXPECT_FALSE(a.first_look_frac.has_value());
  EXPECT_TRUE(p.reservations.empty());
}

TEST(PlanLoader, ObjectShapeReadsJobsDepsAndReservations) {
  Plan p = plan_of(R"({"jobs": [
      {"id": "train", "script": "t.sh", "gpus": 2, "priority": 10, "est_hours": 4},
      {"id": "eval", "script": "e.sh", "deps": ["train", "after:train", "file:~/ck/READY"],
       "produced_by": "train", "produced_at_frac": 0.5, "first_look_frac": 0.1}
    ], "reservations": [{"gpus": [6, 7], "jobs": ["eval"]}]})");
  const Job& e = p.jobs[1];
  ASSERT_EQ(e.deps.size(), 3u);
  EXPECT_EQ(e.deps[0].kind, Dep::Kind::Done);
  EXPECT_EQ(e.deps[0].job, 0u);
  EXPECT_EQ(e.deps[1].kind, Dep::Kind::After);
  EXPECT_EQ(e.deps[2].kind, Dep::Kind::File);
  EXPECT_EQ(e.deps[2].target, "~/ck/READY");
  EXPECT_EQ(e.produced_by, 0u);
  EXPECT_EQ(e.produced_at_frac, 0.5);
  EXPECT_EQ(e.first_look_frac, 0.1);
  ASSERT_EQ(p.reservations.size(), 1u);
  EXPECT_EQ(p.reservations[0].gpus, mask_of({6, 7}));
  EXPECT_EQ(p.reservations_of[1], std::vector<size_t>{0});
  EXPECT_TRUE(p.reservations_of[0].empty());
}

TEST(PlanLoader, SyntaxErrorNamesFileLineAndColumn) {
  std::string e = only_error("[\n  {\"id\": \"a\",\n   \"gpus\": 1,,\n}]");
  EXPECT_THAT(e, HasSubstr("inline.json: line 3, column 14"));
  EXPECT_THAT(e, HasSubstr("invalid JSON"));
}

TEST(PlanLoader, EmptyFileIsSaidToBeEmpty) {
  EXPECT_THAT(only_error("  \n"), HasSubstr("the file is empty"));
}

TEST(PlanLoader, TopLevelOfTheWrongShape) {
  EXPECT_THAT(only_error(R"("jobs")"), HasSubstr("a plan is a list of jobs or an object"));
  EXPECT_THAT(only_error(R"({"job": []})"), HasSubstr("needs a \"jobs\" list"));
  EXPECT_THAT(only_error(R"({"jobs": {}})"), HasSubstr("\"jobs\": must be a list"));
}

TEST(PlanLoader, GpusAsAStringIsAWrongType) {
  std::string e = only_error(R"([{"id": "a", "script": "a.sh", "gpus": "2"}])");
  EXPECT_THAT(e, HasSubstr("job 'a'"));
  EXPECT_THAT(e, HasSubstr("\"gpus\" must be a whole number, not a string (\"2\")"));
}

TEST(PlanLoader, WrongTypesOfEveryField) {
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "a.sh", "deps": "b"}])"),
              HasSubstr("\"deps\" must be a list of strings, not a string"));
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "a.sh", "deps": [3]}])"), HasSubstr("deps[0] must be a string"));
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "a.sh", "gpus": 1.5}])"), HasSubstr("must be a whole number"));
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "a.sh", "gpus": true}])"), HasSubstr("not a boolean"));
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "a.sh", "priority": "high"}])"),
              HasSubstr("\"priority\" must be a number"));
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "a.sh", "est_hours": null}])"),
              HasSubstr("\"est_hours\" must be a number, not null"));
  EXPECT_THAT(only_error(R"([{"id": "a", "script": ["a.sh"]}])"), HasSubstr("\"script\" must be a string"));
  EXPECT_THAT(only_error(R"([["a"]])"), HasSubstr("job #1: must be an object, not a list"));
}

TEST(PlanLoader, MissingIdIsNamedByPosition) {
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "a.sh"}, {"script": "b.sh"}])"),
              HasSubstr("job #2: has no \"id\""));
}

TEST(PlanLoader, NonStringIdIsNamedByPosition) {
  EXPECT_THAT(only_error(R"([{"id": 7, "script": "a.sh"}])"), HasSubstr("job #1: \"id\" must be a string"));
}

TEST(PlanLoader, DuplicateIdNamesBothPositions) {
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "a.sh"}, {"id": "a", "script": "b.sh"}])"),
              HasSubstr("job 'a': duplicate id (job #1 and job #2)"));
}

// A sweep is one element of the file however many points it makes: the jobs after it are
// named by where they stand in the file, not by their index among the expanded jobs.
TEST(PlanLoader, PositionsCountASweepOnce) {
  const char* sweep = R"({"id": "s", "script": "s.sh", "matrix": {"lr": [1, 2, 3]}})";
  EXPECT_THAT(only_error(std::string("[") + sweep + R"(, {"script": "b.sh"}])"), HasSubstr("job #2: has no \"id\""));
  EXPECT_THAT(only_error(std::string("[") + sweep + R"(, {"id": "a", "script": "a.sh"}, {"id": "a", "script": "b.sh"}])"),
              HasSubstr("job 'a': duplicate id (job #2 and job #3)"));
  const char* sweep2 = R"({"id": "t", "script": "t.sh", "matrix": {"a": [1, 2], "b": ["x", "y"]}})";
  EXPECT_THAT(only_error(std::string("[") + sweep + ", " + sweep2 + R"(, {"id": 5, "script": "a.sh"}])"),
              HasSubstr("job #3: \"id\" must be a string"));
  EXPECT_THAT(only_error(std::string(R"([{"id": "s_lr=2", "script": "a.sh"}, )") + sweep + "]"),
              HasSubstr("duplicate id (job #1 and a point of the sweep 's')"));
}

TEST(PlanLoader, IdsThatCannotBeFileNamesAreRejected) {
  for (const char* bad : {"../x", "a/b", ".hidden", "sp ace", "semi;colon", ""}) {
    std::string json = std::string(R"([{"id": ")") + bad + R"(", "script": "a.sh"}])";
    EXPECT_THAT(only_error(json), HasSubstr("cannot be a file name")) << bad;
  }
  EXPECT_TRUE(valid_job_id("train_arm-1.v2"));
}

TEST(PlanLoader, UnknownDepsPlainAndAfterAreNamed) {
  auto errors = errors_of(R"([{"id": "a", "script": "a.sh", "deps": ["ghost", "after:phantom"]}])");
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0], HasSubstr("job 'a': dep \"ghost\" names no job of the plan"));
  EXPECT_THAT(errors[1], HasSubstr("job 'a': dep \"after:phantom\" names no job of the plan"));
}

TEST(PlanLoader, CycleIsNamedInFull) {
  std::string e = only_error(R"([
    {"id": "a", "script": "x", "deps": ["c"]},
    {"id": "b", "script": "x", "deps": ["after:a"]},
    {"id": "c", "script": "x", "deps": ["b"]}
  ])");
  EXPECT_THAT(e, HasSubstr("dependency cycle: a -> c -> b -> a"));
}

TEST(PlanLoader, SelfDependencyIsACycle) {
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "x", "deps": ["a"]}])"), HasSubstr("dependency cycle: a -> a"));
}

TEST(PlanLoader, CycleThroughProducedByIsFound) {
  EXPECT_THAT(only_error(R"([
    {"id": "a", "script": "x", "deps": ["file:ck/READY"], "produced_by": "b"},
    {"id": "b", "script": "x", "deps": ["a"]}
  ])"),
              HasSubstr("dependency cycle"));
}

TEST(PlanLoader, NegativeGpusAndEstHours) {
  auto errors = errors_of(R"([{"id": "a", "script": "x", "gpus": -1, "est_hours": -2.5}])");
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0], HasSubstr("\"gpus\" must not be negative (got -1)"));
  EXPECT_THAT(errors[1], HasSubstr("\"est_hours\" must not be negative (got -2.5)"));
}

TEST(PlanLoader, ReservationNamingAnUnknownJob) {
  EXPECT_THAT(only_error(R"({"jobs": [{"id": "a", "script": "x"}],
                             "reservations": [{"gpus": [0], "jobs": ["a", "nobody"]}]})"),
              HasSubstr("reservation #1: job \"nobody\" is not in the plan"));
}

TEST(PlanLoader, ReservationGpuThatCannotExistIsRejected) {
  EXPECT_THAT(only_error(R"({"jobs": [{"id": "a", "script": "x"}],
                             "reservations": [{"gpus": [99], "jobs": ["a"]}]})"),
              HasSubstr("reservation #1: GPU 99 is not a GPU id"));
}

TEST(PlanLoader, ReservationGpuOutsideGpusIsAWarningAndIgnored) {
  // A plan written for the whole node, simulated on half of it (a parity case does this).
  PlanLoad load = parse_plan(R"({"jobs": [{"id": "a", "script": "x"}],
                                 "reservations": [{"gpus": [2, 6], "jobs": ["a"]}]})",
                             "p.json", {0, 1, 2, 3});
  ASSERT_TRUE(load.plan.has_value());
  ASSERT_EQ(load.warnings.size(), 1u);
  EXPECT_THAT(load.warnings[0], HasSubstr("GPUs [6] are not among --gpus [0, 1, 2, 3]"));
  EXPECT_EQ(load.plan->reservations[0].gpus, mask_of({2}));
}

TEST(PlanLoader, ProducedByNamingAnUnknownJob) {
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "x", "deps": ["file:f"], "produced_by": "ghost"}])"),
              HasSubstr("job 'a': \"produced_by\" names \"ghost\", no job of the plan"));
}

TEST(PlanLoader, JobWiderThanTheNode) {
  EXPECT_THAT(only_error(R"([{"id": "big", "script": "x", "gpus": 8}])", {0, 1, 2, 3}),
              HasSubstr("job 'big': needs 8 GPUs but --gpus gives 4 ([0, 1, 2, 3])"));
}

TEST(PlanLoader, EveryProblemIsListedAtOnce) {
  auto errors = errors_of(R"([
    {"id": "a", "script": "x", "gpus": "2"},
    {"id": "a", "script": "x"},
    {"script": "x"},
    {"id": "d", "script": "x", "deps": ["zzz"]}
  ])");
  EXPECT_EQ(errors.size(), 4u);
  for (const auto& e : errors) EXPECT_THAT(e, HasSubstr("inline.json: job "));
}

TEST(PlanLoader, UnreadableFileNamesTheFileAndTheReason) {
  PlanLoad load = load_plan("/nonexistent/plan.json", {0});
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_THAT(load.errors[0], HasSubstr("/nonexistent/plan.json: cannot read the plan: No such file or directory"));
}

TEST(GpuList, ParsesAndRejects) {
  std::string err;
  EXPECT_EQ(parse_gpu_list("4,5,6,7", &err), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_FALSE(parse_gpu_list("0,x", &err));
  EXPECT_THAT(err, HasSubstr("'x'"));
  EXPECT_FALSE(parse_gpu_list("0,0", &err));
  EXPECT_THAT(err, HasSubstr("appears twice"));
  EXPECT_FALSE(parse_gpu_list("64", &err));
  EXPECT_FALSE(parse_gpu_list("", &err));
}

TEST(PlanLoader, NumberTooLargeIsInvalidJsonNotACrash) {
  EXPECT_THAT(only_error(R"([{"id": "a", "script": "x", "est_hours": 1e999}])"), HasSubstr("invalid JSON"));
}

// file: deps and scripts are expanded as the original's os.path.expandvars(os.path.expanduser(s)):
// the table is what Python 3 makes of each, with HOME=/home/u and GPUQ_T=v.
TEST(ExpandPath, AsTheOriginalExpandsUserThenVariables) {
  std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  ::setenv("HOME", "/home/u", 1);
  ::setenv("GPUQ_T", "v", 1);
  ::unsetenv("GPUQ_UNSET");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plain/path", "plain/path"},  {"~", "/home/u"},
      {"~/a/b", "/home/u/a/b"},      {"~/", "/home/u/"},
      {"$GPUQ_T/x", "v/x"},          {"${GPUQ_T}/x", "v/x"},
      {"a$GPUQ_T", "av"},            {"$GPUQ_UNSET/x", "$GPUQ_UNSET/x"},
      {"${GPUQ_UNSET}", "${GPUQ_UNSET}"}, {"${GPUQ_T", "${GPUQ_T"},
      {"a$", "a$"},                  {"$", "$"},
      {"$$GPUQ_T", "$v"},            {"a$GPUQ_T$GPUQ_T.b", "avv.b"},
      {"~$GPUQ_T", "~v"},            {"x~/a", "x~/a"},
      {"$GPUQ_T-1", "v-1"},          {"${}x", "${}x"},
      {"~nosuchuser_zz/a", "~nosuchuser_zz/a"},
  };
  for (const auto& [in, out] : cases) EXPECT_EQ(expand_path(in), out) << in;
  ::unsetenv("GPUQ_T");
  ::setenv("HOME", home.c_str(), 1);
}

// Issue 25, point 10: the cycle was listed only once every other error was fixed.
TEST(PlanLoader, ACycleIsFoundWhileOtherErrorsAreThere) {
  auto errors = errors_of(R"([
    {"id": "a", "script": "x", "deps": ["c"], "gpus": -1},
    {"id": "b", "script": "x", "deps": ["a", "ghost"]},
    {"id": "c", "script": "x", "deps": ["b"]}
  ])");
  ASSERT_EQ(errors.size(), 3u) << ::testing::PrintToString(errors);
  EXPECT_THAT(errors[0], HasSubstr("\"gpus\" must not be negative"));
  EXPECT_THAT(errors[1], HasSubstr("dep \"ghost\" names no job of the plan"));
  EXPECT_THAT(errors[2], HasSubstr("dependency cycle: a -> c -> b -> a"));
}
