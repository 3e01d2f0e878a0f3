// What a user can still do to jobs while the plan is being edited under a running `gpuq run`:
// kill a job that an edit removed while it ran, kill while the file on disk does not load, and
// `gpuq add` checked against the running run's --gpus. Real binary, real bash jobs.
#include <signal.h>

#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

struct EditedQueue : PlanFolder {
  EditedQueue() : PlanFolder(2) { d.write("slow.sh", "echo \"start $GPUQ_JOB_ID\" >> trace\nexec sleep 300\n"); }
  std::unique_ptr<Background> start() const {
    return start_gpuq({"run", "--plan", "plan.json", "--poll", "20", "--gpus", "0,1"}, d.path(), env);
  }
  void save(const std::string& text) const {
    d.write(".plan.json.tmp", text);
    fs::rename(d.path() + "/.plan.json.tmp", d.path() + "/plan.json");
  }
  json entry(const std::string& id) const {
    json s = state();
    return s.contains(id) ? s[id] : json();
  }
  void stop(Background& r) const {
    r.signal(SIGTERM);
    r.wait(kPatience);
    kill_jobs();
  }
};

constexpr const char* kTwo = R"([{"id": "a", "script": "slow.sh", "gpus": 1}, {"id": "b", "script": "slow.sh", "gpus": 1}])";

}  // namespace

// An edit drops b while it runs: status names it and the GPU it holds, kill stops it, logs
// shows its log. Before, every command said "no job b" and nothing could stop it.
TEST(EditControl, AJobRemovedWhileItRunsCanStillBeKilledAndItsLogRead) {
  EditedQueue q;
  q.d.write("plan.json", kTwo);
  auto r = q.start();
  ASSERT_TRUE(eventually([&] { return lines_of(q.d.path() + "/trace").size() == 2u; }, kPatience)) << r->out();
  q.save(R"([{"id": "a", "script": "slow.sh", "gpus": 1}])");
  ASSERT_TRUE(eventually([&] { return q.entry("b").contains("removed"); }, kPatience)) << r->out();
  Output st = q.gpuq({"status", "--gpus", "0,1", "--svg", "live.svg"});
  EXPECT_THAT(st.err, HasSubstr("b runs but is no longer in plan.json: it keeps GPUs ["));
  // Its GPU is drawn busy, under its id (issue 25, point 14: it was left out, the GPU idle).
  EXPECT_THAT(q.d.read("live.svg"), HasSubstr("<title>b (not in the plan) (running): "));
  EXPECT_THAT(st.err, Not(HasSubstr("delete their entries")));
  Output hold = q.gpuq({"hold", "b"});
  EXPECT_EQ(hold.status, 2);
  EXPECT_THAT(hold.err, HasSubstr("only kill acts on a job the plan no longer has"));
  Output logs = q.gpuq({"logs", "b"});
  EXPECT_EQ(logs.status, 0) << logs.err;
  EXPECT_THAT(logs.err, HasSubstr("b is not in plan.json"));
  EXPECT_THAT(logs.out, HasSubstr("== gpuq: attempt 1"));
  Output kill = q.gpuq({"kill", "b"});
  EXPECT_EQ(kill.status, 0) << kill.out << kill.err;
  EXPECT_THAT(kill.out, HasSubstr("b is not in plan.json; killing it as its entry in the state says"));
  ASSERT_TRUE(eventually([&] { return q.entry("b")["status"] == "failed"; }, kPatience));
  EXPECT_EQ(q.entry("b")["exit"], -15);
  EXPECT_EQ(q.entry("a")["status"], "running");
  q.stop(*r);
}

// The plan on disk does not load (run goes on with the version it loaded): kill, hold and retry
// work on the version the run goes on with, and say that the plan file does not load (where
// and why), never that the job "is not in plan.json". With no run going, kill works from the
// state alone and the others refuse, saying why.
TEST(EditControl, ControlCommandsWorkWhileThePlanOnDiskDoesNotLoad) {
  EditedQueue q;
  q.d.write("plan.json", R"([{"id": "a", "script": "slow.sh", "gpus": 1},
    {"id": "b", "script": "slow.sh", "gpus": 1, "deps": ["a"]}])");
  auto r = q.start();
  ASSERT_TRUE(eventually([&] { return lines_of(q.d.path() + "/trace").size() == 1u; }, kPatience)) << r->out();
  q.save(R"([{"id": "a", "script": "slow.sh", "gpus": 1}, {"id": "a", "script": "slow.sh"}])");
  ASSERT_TRUE(eventually([&] { return r->out().find("still running the version loaded at") != std::string::npos; },
                         kPatience));
  Output hold = q.gpuq({"hold", "b"});
  EXPECT_EQ(hold.status, 0) << hold.out << hold.err;
  EXPECT_THAT(hold.err, HasSubstr("plan.json: job 'a': duplicate id (job #1 and job #2)"));  // where and why
  EXPECT_THAT(hold.err, HasSubstr("gpuq hold: the plan file plan.json does not load (above); acting on the version "
                                  "the running `gpuq run` goes on with"));
  EXPECT_THAT(hold.out + hold.err, Not(HasSubstr("not in plan.json")));
  EXPECT_EQ(q.entry("b")["status"], "held");
  Output retry = q.gpuq({"retry", "b"});
  EXPECT_EQ(retry.status, 0) << retry.out << retry.err;
  EXPECT_THAT(retry.err, HasSubstr("does not load"));
  EXPECT_NE(q.entry("b")["status"], "held");
  EXPECT_EQ(q.gpuq({"hold", "b"}).status, 0);  // kept from starting once a is killed
  Output kill = q.gpuq({"kill", "a"});
  EXPECT_EQ(kill.status, 0) << kill.out << kill.err;
  EXPECT_THAT(kill.err, HasSubstr("duplicate id"));  // the loader's problems are still shown
  EXPECT_THAT(kill.out + kill.err, Not(HasSubstr("not in plan.json")));
  ASSERT_TRUE(eventually([&] { return q.entry("a")["status"] == "failed"; }, kPatience));
  EXPECT_EQ(q.entry("a")["exit"], -15);
  q.stop(*r);
  // No run goes on: hold cannot know the jobs, and says why; nothing changes.
  Output alone = q.gpuq({"retry", "b"});
  EXPECT_EQ(alone.status, 2);
  EXPECT_THAT(alone.err, HasSubstr("gpuq retry: the plan file plan.json does not load (above), and no `gpuq run` goes "
                                   "on with an earlier version"));
  EXPECT_THAT(alone.out + alone.err, Not(HasSubstr("not in plan.json")));
  EXPECT_EQ(q.entry("b")["status"], "held");
}

// `gpuq add` checks the job's width against what the running run was given, not 0-7: the
// run would refuse the edit, and the job would never run.
TEST(EditControl, AddChecksTheWidthAgainstTheRunningRunsGpus) {
  EditedQueue q;
  const std::string text = R"([{"id": "a", "script": "slow.sh", "gpus": 1}])";
  q.d.write("plan.json", text);
  auto r = q.start();
  ASSERT_TRUE(eventually([&] { return lines_of(q.d.path() + "/trace").size() == 1u; }, kPatience)) << r->out();
  Output wide = q.gpuq({"add", "--id", "wide", "--gpus", "4", "--", "slow.sh"});
  EXPECT_EQ(wide.status, 2) << wide.out;
  EXPECT_THAT(wide.err, HasSubstr("needs 4 GPUs but the running `gpuq run` (pid "));
  EXPECT_THAT(wide.err, HasSubstr("--gpus gives 2"));
  EXPECT_EQ(q.d.read("plan.json"), text);
  Output two = q.gpuq({"add", "--id", "fits", "--gpus", "1", "--node-gpus", "0", "--", "slow.sh"});
  EXPECT_EQ(two.status, 0) << two.err;  // --node-gpus, when given, is what counts
  EXPECT_THAT(two.out, HasSubstr(fmt::format("the running `gpuq run` (pid {}) starts it when it is ready", r->pid())));
  Output named = q.gpuq({"add", "--id", "w3", "--gpus", "3", "--node-gpus", "0,1", "--", "slow.sh"});
  EXPECT_THAT(named.err, HasSubstr("needs 3 GPUs but --node-gpus gives 2"));
  q.stop(*r);
}

// Issue 25, point 8: `gpuq add --id sixth -- 'step.sh sixth 2'` took the quoted string for the
// script (validate knows the case), and with no run going said "a running gpuq run starts it".
TEST(EditControl, AddRefusesACommandLineForAScriptAndSaysWhoStartsTheJob) {
  EditedQueue q;
  const std::string text = R"([{"id": "a", "script": "slow.sh", "gpus": 1}])";
  q.d.write("plan.json", text);
  q.d.write("step.sh", "exit 0\n");
  Output quoted = q.gpuq({"add", "--id", "sixth", "--", "step.sh sixth 2"});
  EXPECT_EQ(quoted.status, 2) << quoted.out;
  EXPECT_THAT(quoted.err, HasSubstr("the script \"step.sh sixth 2\" is not a file: a script's arguments go in \"args\""));
  EXPECT_THAT(quoted.err, HasSubstr("gpuq add ... -- step.sh sixth 2 (nothing was added)"));
  EXPECT_EQ(q.d.read("plan.json"), text);
  // A script whose name has a space, and that exists, is a script.
  q.d.write("my step.sh", "exit 0\n");
  EXPECT_EQ(q.gpuq({"add", "--id", "spaced", "--", "my step.sh"}).status, 0);
  // The words as they should be: no run is going, and the line says so.
  Output ok = q.gpuq({"add", "--id", "sixth", "--", "step.sh", "sixth", "2"});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("no `gpuq run` is running this plan: `gpuq run` starts it"));
  EXPECT_THAT(ok.out, Not(HasSubstr("a running")));
  EXPECT_THAT(q.d.read("plan.json"), HasSubstr(R"({"id": "sixth", "script": "step.sh", "args": ["sixth", "2"]})"));
}

// Issue 25, point 14: a job waiting for the GPUs of a killed job that is still ending said
// "needs 1 GPU, 0 free" without naming the holder.
TEST(EditControl, AJobWaitingOnAKilledJobStillEndingNamesIt) {
  EditedQueue q;
  q.d.write("stubborn.sh", "trap '' TERM\necho start >> trace\nwhile true; do sleep 0.05; done\n");
  q.d.write("plan.json", R"([{"id": "a", "script": "stubborn.sh", "gpus": 2, "priority": 1},
                            {"id": "b", "script": "slow.sh", "gpus": 1, "priority": 2}])");
  auto r = start_gpuq({"run", "--plan", "plan.json", "--poll", "20", "--gpus", "0,1", "--kill-grace", "300"}, q.d.path(),
                      q.env);
  ASSERT_TRUE(eventually([&] { return lines_of(q.d.path() + "/trace").size() == 1u; }, kPatience)) << r->out();
  Output kill = q.gpuq({"kill", "a"});
  ASSERT_EQ(kill.status, 0) << kill.out << kill.err;
  Output st = q.gpuq({"status", "--gpus", "0,1"});
  EXPECT_THAT(st.out, HasSubstr("needs 1 GPU, 0 free; GPU 0 busy: a was stopped and its processes are still ending"))
      << st.out;
  q.stop(*r);
}
