// Where the plan, its state and its scripts are found; args, env and sweeps; logs; status --watch into a pipe.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gpuq/core/gpus.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/validate.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

const std::vector<int> kNode{0, 1, 2, 3, 4, 5, 6, 7};

/// A folder with a fake nvidia-smi (8 idle GPUs) for real runs.
struct Node : PlanFolder {
  Node() : PlanFolder(8) {}
  /// `gpuq ARGS` in the folder or its subfolder `cwd`, with no --plan added (these tests choose the plan).
  Output gpuq(const std::vector<std::string>& args, const std::string& cwd = "") const {
    return run_gpuq(args, cwd.empty() ? d.path() : d.path() + "/" + cwd, env);
  }
};

}  // namespace

// --- 14: --gpus ranges, GPUQ_PLAN, plan.json in the current folder ---

TEST(GpuList, RangesAndMixedLists) {
  std::string err;
  EXPECT_EQ(parse_gpu_list("0-3", &err), (std::vector<int>{0, 1, 2, 3})) << err;
  EXPECT_EQ(parse_gpu_list("0,2-4", &err), (std::vector<int>{0, 2, 3, 4})) << err;
  EXPECT_EQ(parse_gpu_list("6-7,0", &err), (std::vector<int>{6, 7, 0})) << err;
  EXPECT_EQ(parse_gpu_list("5-5", &err), (std::vector<int>{5})) << err;
  EXPECT_FALSE(parse_gpu_list("3-1", &err));
  EXPECT_THAT(err, HasSubstr("runs backwards"));
  EXPECT_FALSE(parse_gpu_list("0-2,1", &err));
  EXPECT_THAT(err, HasSubstr("GPU id 1 appears twice"));
  EXPECT_FALSE(parse_gpu_list("0-", &err));
  EXPECT_FALSE(parse_gpu_list("0-70", &err));
}

TEST(PlanChoice, GpuqPlanAndALonePlanJsonStandForPlan) {
  Node n;
  n.d.write("plan.json", R"([{"id": "a", "script": "a.sh", "gpus": 2, "est_hours": 1}])");
  n.d.write("other.json", R"([{"id": "b", "script": "b.sh", "gpus": 1, "est_hours": 2}])");
  auto given = n.gpuq({"simulate", "--plan", "plan.json", "--gpus", "4-7"});
  ASSERT_EQ(given.status, 0) << given.err;
  EXPECT_THAT(given.out, HasSubstr("gpus=[4, 5]   a"));
  // No --plan: plan.json of the current folder, said on stderr; stdout is the same.
  auto lone = n.gpuq({"simulate", "--gpus", "4,5,6,7"});
  EXPECT_EQ(lone.status, 0) << lone.err;
  EXPECT_EQ(lone.out, given.out);
  EXPECT_THAT(lone.err, HasSubstr("using plan.json in the current folder"));
  // GPUQ_PLAN comes before plan.json; --plan before both.
  n.env["GPUQ_PLAN"] = "other.json";
  auto from_env = n.gpuq({"simulate"});
  EXPECT_EQ(from_env.status, 0) << from_env.err;
  EXPECT_THAT(from_env.out, HasSubstr(" b\n"));
  EXPECT_EQ(n.gpuq({"simulate", "--plan", "plan.json", "--gpus", "4-7"}).out, given.out);
  // Nothing to take: a clear error, exit 2.
  n.env.erase("GPUQ_PLAN");
  fs::remove(n.d.path() + "/plan.json");
  auto none = n.gpuq({"status"});
  EXPECT_EQ(none.status, 2);
  EXPECT_THAT(none.err, HasSubstr("no plan: give --plan PLAN.json, set GPUQ_PLAN"));
}

// --- 13: --state-dir / GPUQ_STATE_DIR, and the real cause in a read-only folder ---

TEST(StateDir, StateLocksAndLogsGoWhereTheyAreTold) {
  Node n;
  n.d.write("proj/plan.json", R"([{"id": "a", "script": "a.sh", "gpus": 0}, {"id": "b", "script": "a.sh"}])");
  n.d.write("proj/a.sh", "echo ran in $PWD\n");
  auto held = n.gpuq({"hold", "--plan", "proj/plan.json", "--state-dir", "st", "b"});
  ASSERT_EQ(held.status, 0) << held.err;
  EXPECT_TRUE(fs::exists(n.d.path() + "/st/plan.state.json"));
  EXPECT_TRUE(fs::exists(n.d.path() + "/st/plan.lock"));
  EXPECT_FALSE(fs::exists(n.d.path() + "/proj/plan.state.json"));
  EXPECT_FALSE(fs::exists(n.d.path() + "/proj/plan.lock"));
  EXPECT_EQ(n.state("st/plan.state.json")["b"]["status"], "held");
  // The environment variable names the same folder; run's logs go there too.
  n.env["GPUQ_STATE_DIR"] = n.d.path() + "/st";
  ASSERT_EQ(n.gpuq({"retry", "--plan", "proj/plan.json", "b"}).status, 0);
  auto run = n.gpuq({"run", "--plan", "proj/plan.json", "--poll", "1", "--workdir", "proj"});
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(fs::exists(n.d.path() + "/st/logs/a.log"));
  EXPECT_FALSE(fs::exists(n.d.path() + "/proj/logs"));
  json state = n.state("st/plan.state.json");
  EXPECT_EQ(state["a"]["status"], "done");
  EXPECT_EQ(state["b"]["status"], "done");
  auto status = n.gpuq({"status", "--plan", "proj/plan.json"});
  EXPECT_THAT(status.out, HasSubstr("'done': 2"));
}

TEST(StateDir, ReadOnlyFolderNamesTheRealCauseAndTheWayOut) {
  Node n;
  n.d.write("ro/plan.json", R"([{"id": "a", "script": "a.sh"}])");
  // A read-only bind mount in a namespace of our own (no root needed where user namespaces are allowed).
  std::string script = "mount --bind ro ro && mount -o remount,bind,ro ro && cd ro && " + gpuq_binary() +
                       " hold --plan plan.json a; echo \"exit $?\"; " + gpuq_binary() +
                       " hold --plan plan.json --state-dir ../st a; echo \"exit $?\"";
  auto probe = run({"unshare", "-rm", "true"}, n.d.path());
  if (probe.status != 0) GTEST_SKIP() << "no user namespaces here: " << probe.err;
  auto r = run({"unshare", "-rm", "bash", "-c", script}, n.d.path(), n.env);
  EXPECT_THAT(r.out, ::testing::StartsWith("exit 1\n")) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("held a (was pending)")) << r.out << r.err;
  EXPECT_THAT(r.out, ::testing::EndsWith("exit 0\n")) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("plan.lock: Read-only file system"));
  EXPECT_THAT(r.err, Not(HasSubstr("No such file or directory")));
  EXPECT_THAT(r.err, HasSubstr("--state-dir DIR"));
  EXPECT_EQ(n.state("st/plan.state.json")["a"]["status"], "held");
}

// --- 7 and 15: where scripts are taken from, said once; every finding in one round ---

TEST(Workdir, RunRefusesOnceNamingTheFolderBeforeStartingAnything) {
  Node n;
  std::string jobs;
  for (int i = 0; i < 5; ++i)
    jobs += std::string(i ? "," : "") + R"({"id": "j)" + std::to_string(i) + R"(", "script": "job.sh", "gpus": 0})";
  n.d.write("proj/plan.json", "[" + jobs + "]");
  n.d.write("proj/job.sh", "true\n");
  auto r = n.gpuq({"run", "--plan", "proj/plan.json", "--poll", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(count_of(r.err, "\n"), 1u) << r.err;  // one message, not one per job
  EXPECT_THAT(r.err, HasSubstr("1 script is missing or not readable: job.sh (5 jobs: 'j0', 'j1', 'j2', ...)"));
  EXPECT_THAT(r.err, HasSubstr("taken from " + fs::canonical(n.d.path()).string() + " (the current folder)"));
  EXPECT_THAT(r.err, HasSubstr("\"workdir\""));
  EXPECT_THAT(r.err, HasSubstr("--workdir DIR"));
  EXPECT_FALSE(fs::exists(n.d.path() + "/proj/logs"));
  EXPECT_FALSE(fs::exists(n.d.path() + "/proj/plan.state.json"));
  // validate says it once too.
  auto v = n.gpuq({"validate", "--plan", "proj/plan.json"});
  EXPECT_EQ(v.status, 2);
  EXPECT_EQ(count_of(v.out, "error:"), 1u) << v.out;
  EXPECT_THAT(v.out, HasSubstr("(the current folder)"));
  // --workdir: the same run goes.
  auto w = n.gpuq({"run", "--plan", "proj/plan.json", "--poll", "1", "--workdir", "proj"});
  EXPECT_EQ(w.status, 0) << w.err;
}

TEST(Workdir, PlanWorkdirIsTakenFromThePlansFolderAndJobsRunThere) {
  Node n;
  n.d.write("proj/plan.json", R"({"workdir": "code", "jobs": [
    {"id": "a", "script": "job.sh", "gpus": 0},
    {"id": "b", "script": "job.sh", "gpus": 0, "deps": ["file:out/a.done"], "produced_by": "a"}]})");
  n.d.write("proj/code/job.sh", "mkdir -p out && pwd > out/$GPUQ_JOB_ID.done\n");
  auto v = n.gpuq({"validate", "--plan", "proj/plan.json"});
  EXPECT_EQ(v.status, 0) << v.out << v.err;
  auto r = n.gpuq({"run", "--plan", "proj/plan.json", "--poll", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string code = fs::canonical(n.d.path() + "/proj/code").string();
  EXPECT_EQ(n.d.read("proj/code/out/a.done"), code + "\n");
  EXPECT_EQ(n.d.read("proj/code/out/b.done"), code + "\n");
}

TEST(Validate, LoaderErrorsAndMissingFilesInOneRound) {
  Node n;
  n.d.write("plan.json", R"([
    {"id": "a", "script": "gone.sh", "gpus": "2"},
    {"id": "b", "script": "here.sh", "deps": ["file:data/none.txt"]},
    {"id": "c", "script": "here.sh", "deps": ["zz"]}])");
  n.d.write("here.sh", "true\n");
  auto v = n.gpuq({"validate", "--plan", "plan.json"});
  EXPECT_EQ(v.status, 2);
  EXPECT_THAT(v.err, HasSubstr("not valid (4 problems)"));
  EXPECT_THAT(v.err, HasSubstr("job 'a': \"gpus\" must be a whole number"));
  EXPECT_THAT(v.err, HasSubstr("job 'c': dep \"zz\" names no job"));
  EXPECT_THAT(v.err, HasSubstr("1 script is missing or not readable: gone.sh (job 'a')"));
  EXPECT_THAT(v.err, HasSubstr("job 'b': waits for the file data/none.txt"));
}

// Issue 43, point 9: a job with three problems said only the first (its width, a loader error,
// kept validate from the GPU memory and the estimate), and a missing jobs.sh got no "did you mean".
TEST(Validate, EveryProblemOfAJobInOneRoundAndTheNearestScript) {
  Node n;
  n.d.write("plan.json", R"([{"id": "a", "script": "jobs.sh", "gpus": 16, "gpu_mem_gib": 100, "est_hours": 600},
                             {"id": "b", "script": "trian.sh", "gpus": 1, "est_hours": 1},
                             {"id": "c", "script": "job.sh", "gpus": 1, "est_hours": "x"}])");
  n.d.write("job.sh", "true\n");
  n.d.write("train.sh", "true\n");  // in the folder, no job's script
  auto v = n.gpuq({"validate", "--plan", "plan.json"});
  EXPECT_EQ(v.status, 2);
  EXPECT_THAT(v.err, HasSubstr("not valid (4 problems)")) << v.err;
  EXPECT_THAT(v.err, HasSubstr("job 'a': needs 16 GPUs but --gpus gives 8"));
  EXPECT_THAT(v.err, HasSubstr("job 'a': gpu_mem_gib: it needs 100 GiB on a GPU, more than any takes"));
  EXPECT_THAT(v.err, HasSubstr("job 'c': \"est_hours\" must be a number"));
  EXPECT_THAT(v.err, HasSubstr("2 scripts are missing or not readable: jobs.sh (job 'a'; did you mean job.sh?), "
                               "trian.sh (job 'b'; did you mean train.sh?)"));
  EXPECT_THAT(v.err, HasSubstr("and 1 warning:\n  warning: plan.json: job 'a': est_hours 600 is more than a week"));
  EXPECT_THAT(v.err, Not(HasSubstr("job 'c': has no est_hours"))) << "its est_hours is given, as a bad value";
  // Fixed but for the estimate: the same checks in the round of a valid plan.
  n.d.write("plan.json", R"([{"id": "a", "script": "jobs.sh", "gpus": 8, "gpu_mem_gib": 100, "est_hours": 600}])");
  v = n.gpuq({"validate", "--plan", "plan.json"});
  EXPECT_EQ(v.status, 2);
  EXPECT_THAT(v.out, HasSubstr("error: job 'a': 1 script is missing or not readable: jobs.sh (job 'a'; did you mean "
                               "job.sh?)"));
  EXPECT_THAT(v.out, HasSubstr("error: job 'a': gpu_mem_gib: it needs 100 GiB"));
  EXPECT_THAT(v.out, HasSubstr("warning: job 'a': est_hours 600 is more than a week"));
}

// The "did you mean" of a missing script: a script of the plan that is there first, then a
// file of its folder (the nearest in each folder of the path); none for scripts also missing.
TEST(Validate, NearestScriptIsAScriptOfThePlanThenAFileOfItsFolder) {
  struct Folder : FileChecks {
    std::vector<std::string> paths{"/p", "/p/job.sh", "/p/train.py", "/p/src", "/p/src/eval.py"};
    std::string expand(const std::string& w) const override { return w[0] == '/' ? w : "/p/" + w; }
    bool exists(const std::string& p) const override {
      return std::find(paths.begin(), paths.end(), p) != paths.end() || p == "/";
    }
    std::vector<std::string> names_in(const std::string& folder) const override {
      std::vector<std::string> out;
      for (const std::string& p : paths)
        if (p.rfind(folder + "/", 0) == 0 && p.find('/', folder.size() + 1) == std::string::npos)
          out.push_back(p.substr(folder.size() + 1));
      return out;
    }
  } files;
  Plan plan = plan_of(R"([{"id": "a", "script": "job.sh"}, {"id": "b", "script": "jobs.sh"},
                          {"id": "c", "script": "sr/evl.py"}, {"id": "d", "script": "trian.py"},
                          {"id": "e", "script": "gone.sh"}, {"id": "f", "script": "gone2.sh"}])");
  EXPECT_EQ(nearest_script(plan, "jobs.sh", files), "job.sh");
  EXPECT_EQ(nearest_script(plan, "sr/evl.py", files), "src/eval.py");
  EXPECT_EQ(nearest_script(plan, "trian.py", files), "train.py");
  EXPECT_EQ(nearest_script(plan, "/p/trian.py", files), "/p/train.py");
  EXPECT_EQ(nearest_script(plan, "gone.sh", files), "");
  const FileTable all([](const std::string&) { return true; });
  EXPECT_EQ(nearest_script(plan, "gone2.sh", all), "gone.sh");
  EXPECT_EQ(nearest_script(plan, "gone2.sh", all, {"gone.sh"}), "") << "gone.sh is missing too";
  EXPECT_EQ(nearest_script(plan, "train.py --lr 1", files), "") << "a command line: kArgsGoInArgs says it";
}

TEST(Validate, MissingScriptsAreOneFindingNamingTheFolder) {
  Plan plan = plan_of(R"([{"id": "a", "script": "x.sh"}, {"id": "b", "script": "y.sh"},
                         {"id": "c", "script": "/abs/z.sh"}, {"id": "d", "script": "ok.sh"}])");
  auto readable = [](const std::string& p) { return p == "ok.sh"; };
  const FileTable all([](const std::string&) { return true; });
  auto found = file_findings(plan, all, readable, "/home/me (the current folder)");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].error);
  EXPECT_THAT(found[0].text, HasSubstr("3 scripts are missing or not readable: x.sh (job 'a'), y.sh (job 'b'), "
                                       "/abs/z.sh (job 'c')"));
  EXPECT_THAT(found[0].text, HasSubstr("taken from /home/me (the current folder)"));
}

// A job that waits on another may have its script written by it: a warning of its own, not the error.
TEST(Validate, AScriptAJobWaitsForIsAWarningNotAnError) {
  Plan plan = plan_of(R"([{"id": "make", "script": "make.sh"}, {"id": "use", "script": "gen/use.sh", "deps": ["make"]},
                         {"id": "root", "script": "gone.sh"}])");
  auto readable = [](const std::string& p) { return p == "make.sh"; };
  const FileTable all([](const std::string&) { return true; });
  auto found = file_findings(plan, all, readable, "/home/me (the current folder)");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_TRUE(found[0].error);
  EXPECT_EQ(found[0].job, "root");
  EXPECT_THAT(found[0].text, HasSubstr("1 script is missing or not readable: gone.sh (job 'root')"));
  EXPECT_FALSE(found[1].error);
  EXPECT_EQ(found[1].job, "use");
  EXPECT_THAT(found[1].text, HasSubstr("not there yet, for jobs that wait on other jobs (which may make them): "
                                       "1 script is missing or not readable: gen/use.sh (job 'use')"));
}

// --- 8: args, env, matrix ---

TEST(Sweep, ExpandsIntoOneJobPerPointWithEnvArgsAndDeps) {
  Plan plan = plan_of(R"({"jobs": [
    {"id": "sweep", "script": "s.sh", "gpus": 1, "est_hours": 0.5, "args": ["--lr", "{lr}", "--wd={wd}"],
     "env": {"SEED": 7, "TAG": "lr{lr}"}, "matrix": {"lr": [1e-4, 3e-4], "wd": [0, 0.1]}},
    {"id": "report", "script": "r.sh", "gpus": 0, "deps": ["after:sweep"]}],
    "reservations": [{"gpus": [6, 7], "jobs": ["sweep"]}]})");
  ASSERT_EQ(plan.jobs.size(), 5u);
  std::vector<std::string> ids;
  for (const Job& j : plan.jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"sweep_lr=1e-4_wd=0", "sweep_lr=1e-4_wd=0.1", "sweep_lr=3e-4_wd=0",
                                           "sweep_lr=3e-4_wd=0.1", "report"}));
  const Job& p = plan.jobs[1];
  EXPECT_EQ(p.args, (std::vector<std::string>{"--lr", "1e-4", "--wd=0.1"}));
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(p.env, (Env{{"SEED", "7"}, {"TAG", "lr1e-4"}, {"lr", "1e-4"}, {"wd", "0.1"}}));
  EXPECT_EQ(p.gpus, 1);
  EXPECT_EQ(p.est_hours, 0.5);
  ASSERT_EQ(plan.sweeps.size(), 1u);
  EXPECT_EQ(plan.sweeps[0].id, "sweep");
  EXPECT_EQ(plan.sweeps[0].count, 4u);
  // A dep on the sweep's id is a dep on each point, of the same kind.
  const Job& report = plan.jobs[4];
  ASSERT_EQ(report.deps.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(report.deps[k].job, k);
    EXPECT_EQ(report.deps[k].kind, Dep::Kind::After);
  }
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].jobs, (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(Sweep, BadMatricesArgsAndEnvAreErrorsNamingTheJob) {
  auto one = [](const std::string& fields) {
    auto e = errors_of(R"([{"id": "s", "script": "s.sh", )" + fields + "}]");
    return e.size() == 1 ? e[0] : "(" + std::to_string(e.size()) + " errors)";
  };
  EXPECT_THAT(one(R"("matrix": [1, 2])"), HasSubstr("job 's': \"matrix\" must be an object of lists"));
  EXPECT_THAT(one(R"("matrix": {"lr": []})"), HasSubstr("matrix \"lr\" must be a non-empty list"));
  EXPECT_THAT(one(R"("matrix": {"learning-rate": [1]})"), HasSubstr("matrix key \"learning-rate\" must be a variable"));
  EXPECT_THAT(one(R"("matrix": {"x": [{"a": 1}]})"), HasSubstr("matrix \"x\": {\"a\":1} is not a string or a number"));
  EXPECT_THAT(one(R"("matrix": {"x": ["a b"]})"), HasSubstr("makes the id \"s_x=a b\", which cannot be a file name"));
  EXPECT_THAT(one(R"("args": "--lr 1")"), HasSubstr("\"args\" must be a list of strings"));
  EXPECT_THAT(one(R"("args": ["a", 1])"), HasSubstr("args[1] must be a string"));
  EXPECT_THAT(one(R"("env": {"A": [1]})"), HasSubstr("env \"A\" must be a string or a number"));
  EXPECT_THAT(one(R"("env": {"1A": "x"})"), HasSubstr("env: \"1A\" is not a variable name"));
  auto clash = errors_of(R"([{"id": "s", "script": "x", "matrix": {"a": [1]}}, {"id": "s", "script": "x"}])");
  ASSERT_EQ(clash.size(), 1u);
  EXPECT_THAT(clash[0], HasSubstr("is the id of a sweep"));
}

TEST(Sweep, SimulateAndValidateShowThePointsAndARunPassesArgsAndEnv) {
  Node n;
  n.d.write("plan.json", R"([
    {"id": "sw", "script": "s.sh", "gpus": 1, "est_hours": 0.25, "args": ["--lr", "{lr}"],
     "env": {"GREETING": "hi there"}, "matrix": {"lr": [0.001, "3e-4"]}},
    {"id": "after_all", "script": "s.sh", "gpus": 0, "est_hours": 0.1, "deps": ["sw"]}])");
  n.d.write("s.sh", "echo \"$GPUQ_JOB_ID|$#|$1|$2|$lr|$GREETING\" >> out.txt\n");
  auto sim = n.gpuq({"simulate", "--plan", "plan.json"});
  ASSERT_EQ(sim.status, 0) << sim.err;
  EXPECT_THAT(sim.out, HasSubstr("  0.00h ->   0.25h gpus=[0]      sw_lr=0.001\n"
                                 "  0.00h ->   0.25h gpus=[1]      sw_lr=3e-4\n"
                                 "  0.25h ->   0.35h gpus=[]       after_all\n"));
  auto v = n.gpuq({"validate", "--plan", "plan.json"});
  EXPECT_EQ(v.status, 0) << v.out << v.err;
  EXPECT_THAT(v.out, HasSubstr("sweep 'sw': 2 job(s): sw_lr=0.001, sw_lr=3e-4\n"));
  auto r = n.gpuq({"run", "--plan", "plan.json", "--poll", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto lines = lines_of(n.d.path() + "/out.txt");
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"after_all|0||||", "sw_lr=0.001|2|--lr|0.001|0.001|hi there",
                                             "sw_lr=3e-4|2|--lr|3e-4|3e-4|hi there"}));
  // The state file stays the original's: the points are plain ids.
  json state = n.state();
  EXPECT_EQ(state["sw_lr=3e-4"]["status"], "done");
  EXPECT_FALSE(state.contains("sw"));
}

// --- 12: a line before each attempt; logs -f says it waits, and how the job ended ---

TEST(Logs, EachAttemptStartsWithALineAndFollowSaysHowTheJobEnded) {
  Node n;
  n.d.write("plan.json", R"([{"id": "flaky", "script": "f.sh", "gpus": 1}])");
  // Fails the first time, and the second with exit 3.
  n.d.write("f.sh", "echo try $GPUQ_ATTEMPT\nexit 3\n");
  auto r = n.gpuq({"run", "--plan", "plan.json", "--poll", "1", "--retry-after", "0", "--max-retries", "1"});
  ASSERT_EQ(r.status, 3) << r.err;  // 3: a job did not end done
  auto log = lines_of(n.d.path() + "/logs/flaky.log");
  ASSERT_EQ(log.size(), 4u) << n.d.read("logs/flaky.log");
  EXPECT_THAT(log[0], ::testing::MatchesRegex("== gpuq: attempt 1 on GPUs \\[0\\] at [0-9-]+ [0-9:]+"));
  EXPECT_EQ(log[1], "try 1");
  EXPECT_THAT(log[2], ::testing::MatchesRegex("== gpuq: attempt 2 on GPUs \\[0\\] at [0-9-]+ [0-9:]+"));
  EXPECT_EQ(log[3], "try 2");
  auto f = n.gpuq({"logs", "--plan", "plan.json", "flaky", "-n", "1", "-f"});
  EXPECT_EQ(f.out, "try 2\n");
  EXPECT_EQ(f.err, "gpuq logs: flaky is failed (exit 3)\n");
  // -n 0: the whole log.
  EXPECT_EQ(lines_of(n.d.path() + "/logs/flaky.log").size(), 4u);
  EXPECT_EQ(n.gpuq({"logs", "--plan", "plan.json", "flaky", "-n", "0"}).out, n.d.read("logs/flaky.log"));
}

TEST(Logs, FollowOfAJobNotStartedSaysItWaits) {
  Node n;
  n.d.write("plan.json", R"([{"id": "later", "script": "l.sh", "gpus": 1}])");
  n.d.write("l.sh", "echo hello\n");
  auto follow = start_gpuq({"logs", "--plan", "plan.json", "later", "-f"}, n.d.path(), n.env);
  ASSERT_TRUE(eventually([&] { return follow->err().find("has not started yet") != std::string::npos; }, kPatience))
      << follow->err();
  EXPECT_EQ(follow->err(), "gpuq logs: later has not started yet (pending); waiting for it to start (Ctrl-C to stop)\n");
  EXPECT_EQ(n.gpuq({"run", "--plan", "plan.json", "--poll", "1"}).status, 0);
  auto r = follow->wait(kPatience);
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("hello\n"));
  EXPECT_THAT(r.err, HasSubstr("gpuq logs: later is done (exit 0)\n"));
}

// --- 17: status --watch into a pipe; an edited plan is read again ---

TEST(StatusWatch, IntoAPipeWritesPlainTextAndReadsAnEditedPlanAgain) {
  Node n;
  n.d.write("plan.json", R"([{"id": "first", "script": "x.sh", "est_hours": 1}])");
  auto watch = start_gpuq({"status", "--plan", "plan.json", "--watch", "0.1"}, n.d.path(), n.env);
  ASSERT_TRUE(eventually([&] { return count_of(watch->out(), "gpuq status --plan") >= 2; }, kPatience));
  n.d.write("plan.json", R"([{"id": "first", "script": "x.sh", "est_hours": 1},
                             {"id": "added_later", "script": "x.sh", "est_hours": 1}])");
  EXPECT_TRUE(eventually([&] { return watch->out().find("added_later") != std::string::npos; }, kPatience));
  watch->signal(SIGTERM);
  auto r = watch->wait(kPatience);
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "escape codes in a pipe";
}
