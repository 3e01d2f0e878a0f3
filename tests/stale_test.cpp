// Stale done jobs (issue 25, point 2): the rule on inline plans and states.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpuq/core/stale.h"
#include "test_util.h"

using namespace gpuq;
using V = std::vector<std::string>;

namespace {

// A train sweep of two seeds, an eval on it, a report on the eval and on train.
const char* kPlan2 = R"([
  {"id": "prep", "script": "s.sh", "est_hours": 1},
  {"id": "train", "script": "s.sh", "gpus": 1, "matrix": {"seed": [0, 1]}, "deps": ["prep"]},
  {"id": "eval", "script": "s.sh", "gpus": 1, "deps": ["train"]},
  {"id": "report", "script": "s.sh", "deps": ["eval", "after:train", "file:out/x"]},
  {"id": "other", "script": "s.sh"}
])";
// The same, grown by a seed.
const char* kPlan3 = R"([
  {"id": "prep", "script": "s.sh", "est_hours": 1},
  {"id": "train", "script": "s.sh", "gpus": 1, "matrix": {"seed": [0, 1, 2]}, "deps": ["prep"]},
  {"id": "eval", "script": "s.sh", "gpus": 1, "deps": ["train"]},
  {"id": "report", "script": "s.sh", "deps": ["eval", "after:train", "file:out/x"]},
  {"id": "other", "script": "s.sh"}
])";

JobState done(double start, double end, std::optional<V> deps = std::nullopt) {
  JobState s;
  s.status = Status::Done;
  s.start = start;
  s.end = end;
  s.exit = 0;
  if (deps) set_deps_ran(s, *deps);
  return s;
}

// Everything done in order: prep 0-1, the seeds 1-2, eval 2-3, report 3-4, as gpuq records it.
State all_done(const Plan& p) {
  State st;
  st.set("prep", done(0, 1));
  st.set("train_seed=0", done(1, 2, V{"prep"}));
  st.set("train_seed=1", done(1, 2, V{"prep"}));
  st.set("eval", done(2, 3, V{"train_seed=0", "train_seed=1"}));
  st.set("report", done(3, 4, V{"eval", "train_seed=0", "train_seed=1"}));
  st.set("other", done(0, 9));
  (void)p;
  return st;
}

size_t at(const Plan& p, const std::string& id) { return static_cast<size_t>(p.find(id) - p.jobs.data()); }

std::vector<std::string> ids(const Plan& p, const std::vector<size_t>& js) {
  V out;
  for (size_t j : js) out.push_back(p.jobs[j].id);
  return out;
}

}  // namespace

TEST(Stale, JobDepsAreTheExpandedJobDepsWithoutFiles) {
  Plan p = test::plan_of(kPlan2);
  EXPECT_EQ(job_deps_of(p.jobs[at(p, "report")]), (V{"eval", "train_seed=0", "train_seed=1"}));
  EXPECT_EQ(job_deps_of(p.jobs[at(p, "prep")]), V{});
  JobState s;
  EXPECT_FALSE(deps_ran(s));
  set_deps_ran(s, {"a", "b"});
  EXPECT_EQ(deps_ran(s), (V{"a", "b"}));
}

TEST(Stale, NothingIsStaleWhenEveryJobRanAfterItsDeps) {
  Plan p = test::plan_of(kPlan2);
  EXPECT_TRUE(stale_jobs(p, all_done(p)).empty());
  EXPECT_TRUE(stale_reruns(p, all_done(p)).empty());
}

TEST(Stale, AGrownSweepMakesItsDoneDependentsStaleAndTheyAreRerunWithTheirDoneDependents) {
  Plan p = test::plan_of(kPlan3);
  State st = all_done(p);  // seed 2 added to the plan, not run yet
  Staleness e = staleness_of(p, at(p, "eval"), st);
  EXPECT_EQ(e.added, V{"train_seed=2"});
  EXPECT_TRUE(e.redoing.empty()) << "said once, as added";
  EXPECT_EQ(staleness_text(e), "dep train_seed=2 added since it ran");
  EXPECT_EQ(ids(p, stale_jobs(p, st)), (V{"eval", "report"}));
  // Seed 2 ran since (5-6): still stale, now for that.
  st.set("train_seed=2", done(5, 6, V{"prep"}));
  EXPECT_EQ(staleness_text(staleness_of(p, at(p, "eval"), st)), "dep train_seed=2 added since it ran");
  // retry --stale: the stale ones; a done job downstream of one comes too.
  EXPECT_EQ(ids(p, stale_reruns(p, st)), (V{"eval", "report"}));
}

TEST(Stale, ADepThatRanAgainOrIsToRunAgainMakesItStale) {
  Plan p = test::plan_of(kPlan2);
  State st = all_done(p);
  st.set("train_seed=1", done(7, 8, V{"prep"}));  // retried by hand and ran again after eval started
  Staleness e = staleness_of(p, at(p, "eval"), st);
  EXPECT_EQ(e.reran, V{"train_seed=1"});
  EXPECT_EQ(staleness_text(e), "dep train_seed=1 ran again after it started");
  EXPECT_EQ(ids(p, stale_jobs(p, st)), (V{"eval", "report"})) << "report: after:train_seed=1 too";
  JobState pending;
  st.set("train_seed=1", pending);  // retried, not run yet
  EXPECT_EQ(staleness_of(p, at(p, "eval"), st).redoing, V{"train_seed=1"});
  // A dep that ran before it started is no reason (the normal order); nor one whose end gpuq saw
  // after the start a batch queue gives in whole seconds (eval started at 2.0, seed 1 seen done at 2.4).
  st.set("train_seed=1", done(1, 2, V{"prep"}));
  EXPECT_TRUE(staleness_of(p, at(p, "eval"), st).empty());
  st.set("train_seed=1", done(1.2, 2.4, V{"prep"}));
  EXPECT_TRUE(staleness_of(p, at(p, "eval"), st).empty());
}

TEST(Stale, OnlyDoneJobsAreStaleAndAnEntryWithoutItsDepsRecordedIsJudgedByTimesAlone) {
  Plan p3 = test::plan_of(kPlan3);
  State st = all_done(p3);
  // The original's entry (no deps_ran): a new dep not run yet is one to run; one that ran
  // before it started cannot be told from an old one.
  st.set("eval", done(2, 3));
  st.set("report", done(3, 4));
  EXPECT_EQ(staleness_of(p3, at(p3, "eval"), st).redoing, V{"train_seed=2"});
  st.set("train_seed=2", done(1, 2));
  EXPECT_TRUE(staleness_of(p3, at(p3, "eval"), st).empty());
  // A removed dep (the sweep shrank) makes a recorded entry stale.
  Plan p2 = test::plan_of(kPlan2);
  State st2 = all_done(p2);
  st2.set("eval", done(2, 3, V{"train_seed=0", "train_seed=1", "train_seed=9"}));
  EXPECT_EQ(staleness_text(staleness_of(p2, at(p2, "eval"), st2)), "dep train_seed=9 removed since it ran");
  // A failed, running or pending job is never stale.
  JobState failed = done(2, 3, V{});
  failed.status = Status::Failed;
  st2.set("eval", failed);
  EXPECT_TRUE(staleness_of(p2, at(p2, "eval"), st2).empty());
  // A stale job's failed dependent is not rerun with it; a done one is.
  st2.set("eval", done(2, 3, V{"train_seed=0"}));
  JobState rf = done(3, 4, V{"eval", "train_seed=0", "train_seed=1"});
  rf.status = Status::Failed;
  st2.set("report", rf);
  EXPECT_EQ(ids(p2, stale_reruns(p2, st2)), V{"eval"});
}

// Real processes: the issue's story. A finished sweep grows by a seed; `run` runs the new
// point, leaves eval and report done, and its last line counts them stale; `status` says why;
// `retry --stale` reruns them and the done job after them, and the next run ends with none stale.
TEST(StaleRun, AGrownSweepsDependentsAreCountedSaidAndRerunByRetryStale) {
  using namespace gpuq::test;
  using ::testing::HasSubstr;
  using ::testing::Not;
  TempDir d;
  auto env = fake_nvidia_smi(d, idle_gpus(2));
  d.write("job.sh", "echo \"$GPUQ_JOB_ID\" >> ran.txt\n");
  auto plan = [&](const std::string& seeds) {
    d.write("plan.json", R"([
      {"id": "train", "script": "job.sh", "gpus": 1, "matrix": {"seed": [)" + seeds + R"(]}},
      {"id": "eval", "script": "job.sh", "gpus": 1, "deps": ["train"]},
      {"id": "report", "script": "job.sh", "deps": ["eval", "train"]},
      {"id": "summary", "script": "job.sh", "deps": ["report"]},
      {"id": "other", "script": "job.sh"}
    ])");
  };
  std::vector<std::string> run_args{"run", "--plan", "plan.json", "--gpus", "0,1", "--poll", "1"};
  plan("0, 1");
  auto r1 = run_gpuq(run_args, d.path(), env);
  ASSERT_EQ(r1.status, 0) << r1.out << r1.err;
  EXPECT_THAT(r1.out, HasSubstr("all jobs finished: 6 done\n"));
  plan("0, 1, 2");
  auto r2 = run_gpuq(run_args, d.path(), env);
  ASSERT_EQ(r2.status, 0) << r2.out << r2.err;
  EXPECT_THAT(r2.out, HasSubstr("start train_seed=2"));
  EXPECT_THAT(r2.out, Not(HasSubstr("start eval"))) << "a done job is never rerun on its own";
  EXPECT_THAT(r2.out, HasSubstr("all jobs finished: 7 done (2 stale: eval, report; `gpuq retry --stale` reruns them)"));

  auto st = run_gpuq({"status", "--plan", "plan.json"}, d.path(), env);
  ASSERT_EQ(st.status, 0) << st.err;
  EXPECT_THAT(st.out, HasSubstr("stale: 2 done jobs ran before their deps changed or ran again:\n"
                                "  eval    dep train_seed=2 added since it ran\n"
                                "  report  dep train_seed=2 added since it ran\n"
                                "`gpuq retry --plan plan.json --stale` reruns them and the 1 done job after them\n"));
  auto sj = nlohmann::json::parse(run_gpuq({"status", "--plan", "plan.json", "--json"}, d.path(), env).out);
  for (const auto& j : sj["jobs"]) {
    bool stale = j["id"] == "eval" || j["id"] == "report";
    EXPECT_EQ(j["stale"], stale ? nlohmann::json("dep train_seed=2 added since it ran") : nlohmann::json()) << j["id"];
  }
  auto retry = run_gpuq({"retry", "--plan", "plan.json", "--stale"}, d.path(), env);
  ASSERT_EQ(retry.status, 0) << retry.out << retry.err;
  EXPECT_THAT(retry.out, HasSubstr("stale: eval (dep train_seed=2 added since it ran)\n"));
  EXPECT_THAT(retry.out, HasSubstr("stale: report (dep train_seed=2 added since it ran)\n"));
  EXPECT_THAT(retry.out, HasSubstr("summary: done after a stale job it depends on; rerun with it\n"));
  auto r3 = run_gpuq(run_args, d.path(), env);
  ASSERT_EQ(r3.status, 0) << r3.out << r3.err;
  EXPECT_THAT(r3.out, HasSubstr("all jobs finished: 7 done\n"));
  auto ran = lines_of(d.path() + "/ran.txt");
  for (const char* id : {"eval", "report", "summary"}) EXPECT_EQ(std::count(ran.begin(), ran.end(), id), 2) << id;
  for (const char* id : {"other", "train_seed=0", "train_seed=1", "train_seed=2"})
    EXPECT_EQ(std::count(ran.begin(), ran.end(), id), 1) << id;
  auto none = run_gpuq({"retry", "--plan", "plan.json", "--stale"}, d.path(), env);
  EXPECT_EQ(none.status, 0);
  EXPECT_THAT(none.out, HasSubstr("no done job of plan.json is stale: nothing to rerun"));
}
