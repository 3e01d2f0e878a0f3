// `gpuq run` and the control commands against real bash jobs, real signals and a fake
// nvidia-smi: the OS seams. The loop's rules are tested tick by tick in tick_test.cpp.
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpuq/live/probe.h"
#include "test_util.h"

using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

/// A plan folder (8 idle GPUs unless told) with a tracing job script.
struct Queue : PlanFolder {
  explicit Queue(const std::string& smi_output = idle_gpus(8)) : PlanFolder(smi_output) {
    // Each job appends "start ID" and "end ID" to trace, and its GPUs to ID.gpus. With GATE set,
    // it goes on only once the test has made that file.
    d.write("job.sh", R"(echo "start $GPUQ_JOB_ID" >> trace
echo "$CUDA_VISIBLE_DEVICES" > "$GPUQ_JOB_ID.gpus"
if [ -n "$GATE" ]; then while [ ! -e "$GATE" ]; do sleep 0.01; done; else sleep 0.2; fi
echo "end $GPUQ_JOB_ID" >> trace
)");
  }
  std::unique_ptr<Background> start(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{"run", "--poll", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return background(args);
  }
  std::vector<std::string> trace() const { return lines_of(d.path() + "/trace"); }
  size_t index_of(const std::string& line) const {
    auto t = trace();
    auto it = std::find(t.begin(), t.end(), line);
    EXPECT_NE(it, t.end()) << line << " not in trace";
    return static_cast<size_t>(it - t.begin());
  }
};

}  // namespace

TEST(Run, DepsOfEachKindAreHonoured) {
  Queue q;
  q.plan(R"([
    {"id": "a", "script": "job.sh", "gpus": 1},
    {"id": "b", "script": "job.sh", "gpus": 1, "deps": ["a"]},
    {"id": "c", "script": "job.sh", "gpus": 1, "deps": ["after:b"]},
    {"id": "d", "script": "job.sh", "gpus": 1, "deps": ["file:c.gpus"]}
  ])");
  auto r = q.start()->wait(kPatience);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("all jobs finished"));
  EXPECT_LT(q.index_of("end a"), q.index_of("start b"));
  EXPECT_LT(q.index_of("end b"), q.index_of("start c"));
  EXPECT_LT(q.index_of("start c"), q.index_of("start d"));  // c.gpus is written as c starts
  for (const char* id : {"a", "b", "c", "d"}) EXPECT_EQ(q.status_of(id), "done");
}

TEST(Run, FailingJobIsRetriedThenBlocksItsDependantsAndRetryReleasesThem) {
  Queue q;
  q.d.write("flaky.sh", "echo \"try $GPUQ_ATTEMPT\" >> flaky.trace\n[ -e fixed ] || exit 3\n");
  q.plan(R"([
    {"id": "flaky", "script": "flaky.sh", "gpus": 1},
    {"id": "child", "script": "job.sh", "gpus": 1, "deps": ["flaky"]},
    {"id": "grandchild", "script": "job.sh", "gpus": 0, "deps": ["child"]},
    {"id": "after_any", "script": "job.sh", "gpus": 0, "deps": ["after:flaky"]}
  ])");
  auto r = q.start({"--max-retries", "1", "--retry-after", "0"})->wait(kPatience);
  ASSERT_EQ(r.status, 3) << r.out << r.err;  // 3: a job did not end done
  EXPECT_THAT(r.out, HasSubstr("auto-retry flaky (retry 1)"));
  EXPECT_EQ(lines_of(q.d.path() + "/flaky.trace"), (std::vector<std::string>{"try 1", "try 2"}));
  auto s = q.state();
  EXPECT_EQ(s["flaky"]["status"], "failed");
  EXPECT_EQ(s["flaky"]["exit"], 3);
  EXPECT_EQ(s["flaky"]["attempts"], 1);
  EXPECT_EQ(s["child"]["status"], "blocked");
  EXPECT_EQ(s["grandchild"]["status"], "blocked");
  EXPECT_EQ(s["after_any"]["status"], "done");  // after: counts a finished failure

  q.d.write("fixed", "");
  auto retry = q.gpuq({"retry", "flaky"});
  EXPECT_EQ(retry.status, 0);
  EXPECT_THAT(retry.out, HasSubstr("flaky is pending again (was failed)"));
  EXPECT_THAT(retry.out, HasSubstr("child is pending again (was blocked)"));
  EXPECT_EQ(q.status_of("child"), "pending");
  r = q.start()->wait(kPatience);
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* id : {"flaky", "child", "grandchild"}) EXPECT_EQ(q.status_of(id), "done") << id;
}

// A job's own max_retries (gpuq's own field) wins over --max-retries, for a real run, and a
// bad value is refused by name.
TEST(Run, AJobsOwnMaxRetriesWinsOverTheFlag) {
  Queue q;
  q.d.write("fail.sh", "echo \"try $GPUQ_ATTEMPT\" >> \"$GPUQ_JOB_ID.trace\"\nexit 3\n");
  q.plan(R"([
    {"id": "never", "script": "fail.sh", "gpus": 1, "max_retries": 0},
    {"id": "thrice", "script": "fail.sh", "gpus": 1, "max_retries": 3},
    {"id": "plain", "script": "fail.sh", "gpus": 1}
  ])");
  auto r = q.start({"--max-retries", "1", "--retry-after", "0"})->wait(kPatience);
  ASSERT_EQ(r.status, 3) << r.out << r.err;  // 3: a job did not end done
  EXPECT_THAT(r.out, HasSubstr("0 done, 3 failed"));
  EXPECT_EQ(lines_of(q.d.path() + "/never.trace").size(), 1u);
  EXPECT_EQ(lines_of(q.d.path() + "/thrice.trace").size(), 4u);
  EXPECT_EQ(lines_of(q.d.path() + "/plain.trace").size(), 2u);
  EXPECT_THAT(r.out, HasSubstr("auto-retry thrice (retry 3)"));
  EXPECT_THAT(r.out, Not(HasSubstr("auto-retry never")));

  q.plan(R"([{"id": "bad", "script": "fail.sh", "max_retries": -1}, {"id": "half", "script": "fail.sh", "max_retries": 1.5}])");
  auto v = q.gpuq({"validate"});
  EXPECT_NE(v.status, 0);
  EXPECT_THAT(v.err + v.out, HasSubstr("job 'bad': \"max_retries\""));
  EXPECT_THAT(v.err + v.out, HasSubstr("job 'half': \"max_retries\""));
}

// `gpuq run && notify done` must not lie: run ends 0 only when every job is done, and 3 (kExitJobsNotDone)
// when one failed, timed out or could not start, or is blocked by one; a retry that ends all done is 0 again.
TEST(Run, RunExitsNonZeroWhenAJobDidNotEndDone) {
  Queue q;
  q.d.write("ok.sh", "exit 0\n");
  q.d.write("fail.sh", "exit 3\n");
  q.d.write("slow.sh", "sleep 30\n");
  q.plan(R"([{"id": "a", "script": "ok.sh", "gpus": 0}, {"id": "b", "script": "ok.sh", "gpus": 0, "deps": ["a"]}])");
  auto r = q.start({"--max-retries", "0"})->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("all jobs finished: 2 done"));
  struct Case {
    const char* plan;
    const char* says;
  };
  const Case cases[] = {
      {R"([{"id": "a", "script": "ok.sh", "gpus": 0}, {"id": "f", "script": "fail.sh", "gpus": 0},
           {"id": "after_f", "script": "ok.sh", "gpus": 0, "deps": ["f"]}])",
       "1 done, 1 failed (f: exit 3), 1 blocked by a failed dep (after_f)"},
      {R"([{"id": "t", "script": "slow.sh", "gpus": 0, "time_limit_hours": 0.0003}])", "0 done, 1 failed (t: timed out)"},
      // A script its dep removes: it cannot start.
      {R"([{"id": "rm", "script": "rm.sh", "gpus": 0}, {"id": "u", "script": "victim.sh", "gpus": 0, "deps": ["rm"]}])",
       "1 done, 1 failed (u: could not start)"},
  };
  for (const Case& c : cases) {
    std::filesystem::remove(q.d.path() + "/plan.state.json");
    q.d.write("victim.sh", "true\n");
    q.d.write("rm.sh", "rm victim.sh\n");
    q.plan(c.plan);
    auto f = q.start({"--max-retries", "0", "--kill-grace", "1"})->wait(kPatience);
    EXPECT_EQ(f.status, 3) << c.plan << "\n" << f.out << f.err;
    EXPECT_THAT(f.out, HasSubstr(std::string("all jobs finished: ") + c.says));
  }
  // The failed job fixed and retried: the plan ends all done, and run says 0.
  std::filesystem::remove(q.d.path() + "/plan.state.json");
  q.plan(R"([{"id": "f", "script": "fail.sh", "gpus": 0}])");
  EXPECT_EQ(q.start({"--max-retries", "0"})->wait(kPatience).status, 3);
  q.d.write("fail.sh", "exit 0\n");
  EXPECT_EQ(q.gpuq({"retry", "f"}).status, 0);
  auto again = q.start({"--max-retries", "0"})->wait(kPatience);
  EXPECT_EQ(again.status, 0) << again.out << again.err;
  EXPECT_THAT(again.out, HasSubstr("all jobs finished: 1 done"));
}

// Attempt numbers only grow, per job: after a retry by hand or a requeue the next attempt goes on
// from the last (GPUQ_ATTEMPT, the log's header, the event log), and each requeue and retry is an
// event. The state's `attempts` keeps the original's meaning (automatic retries).
TEST(Run, AttemptNumbersGoOnAfterARetryByHandAndARequeue) {
  Queue q;
  q.d.write("a.sh", "echo \"$GPUQ_ATTEMPT\" >> a.trace\n[ -e a.ok ] || exit 3\n");
  q.d.write("b.sh", "echo \"$GPUQ_ATTEMPT\" >> b.trace\n[ -e b.ok ] || exec sleep 300\n");
  q.plan(R"([{"id": "a", "script": "a.sh", "gpus": 0}])");
  auto r = q.start({"--max-retries", "1", "--retry-after", "0"})->wait(kPatience);
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_EQ(lines_of(q.d.path() + "/a.trace"), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(q.state()["a"]["attempts"], 1);  // the original's count: one automatic retry
  EXPECT_EQ(q.gpuq({"retry", "a"}).status, 0);
  q.d.write("a.ok", "");
  r = q.start({"--max-retries", "1", "--retry-after", "0"})->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(lines_of(q.d.path() + "/a.trace"), (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_EQ(q.state()["a"].value("attempts", 0), 0);  // a retry by hand starts the original's count over
  EXPECT_EQ(q.state()["a"]["attempt"], 3);

  // A requeue of a running job: its next attempt is 2, not 1 again.
  q.plan(R"([{"id": "a", "script": "a.sh", "gpus": 0}, {"id": "b", "script": "b.sh", "gpus": 0}])");
  auto run = q.start({"--kill-grace", "1"});
  ASSERT_TRUE(eventually([&] { return lines_of(q.d.path() + "/b.trace").size() == 1; })) << run->wait(1).out;
  q.d.write("b.ok", "");
  Output requeued = q.gpuq({"requeue", "b"});
  EXPECT_EQ(requeued.status, 0) << requeued.out << requeued.err;  // failed once in a loaded full suite: say why
  r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(lines_of(q.d.path() + "/b.trace"), (std::vector<std::string>{"1", "2"}));

  // Each log header once, numbers growing.
  std::string a_log = q.d.read("logs/a.log"), b_log = q.d.read("logs/b.log");
  for (const char* n : {"1", "2", "3"}) {
    std::string header = std::string("== gpuq: attempt ") + n + " ";
    size_t at = a_log.find(header);
    EXPECT_NE(at, std::string::npos) << a_log;
    EXPECT_EQ(a_log.find(header, at + 1), std::string::npos) << a_log;
  }
  EXPECT_NE(b_log.find("== gpuq: attempt 2 "), std::string::npos) << b_log;
  EXPECT_EQ(b_log.find("== gpuq: attempt 1 "), b_log.rfind("== gpuq: attempt 1 ")) << b_log;

  // The event log: starts numbered 1, 2, 3 and 1, 2; a retry event (by hand) and a requeue event.
  std::map<std::string, std::vector<long long>> starts;
  std::vector<std::string> kinds_b;
  bool retry_a = false;
  for (const std::string& line : lines_of(q.d.path() + "/plan.events.jsonl")) {
    json e = json::parse(line);
    std::string id = e.value("id", ""), kind = e.value("event", "");
    long long attempt = e.value("attempt", 0LL);
    if (kind == "start") starts[id].push_back(attempt);
    if (id == "a" && kind == "retry" && e.value("by", "") == "retry") retry_a = attempt == 3;
    if (id == "b") kinds_b.push_back(kind + " " + std::to_string(attempt));
  }
  EXPECT_EQ(starts["a"], (std::vector<long long>{1, 2, 3}));
  EXPECT_EQ(starts["b"], (std::vector<long long>{1, 2}));
  EXPECT_TRUE(retry_a);
  EXPECT_THAT(kinds_b, ::testing::Contains("requeue 2")) << ::testing::PrintToString(kinds_b);
  bool requeued_end = false;
  for (const std::string& line : lines_of(q.d.path() + "/plan.events.jsonl")) {
    json e = json::parse(line);
    if (e.value("id", "") == "b" && e.value("event", "") == "end" && e.value("attempt", 0) == 1)
      requeued_end = e.value("outcome", "") == "requeued";
  }
  EXPECT_TRUE(requeued_end);  // not "unknown": the history says why the attempt ended
  // history shows each attempt once: no number twice.
  Output h = q.gpuq({"history"});
  EXPECT_EQ(h.status, 0) << h.err;
}

TEST(Run, GpuWithForeignMemoryIsBusy) {
  Queue q("0, 30000\n1, 500\n2, 2000\n3, 0\n");
  q.plan(R"([{"id": "a", "script": "job.sh", "gpus": 1}, {"id": "b", "script": "job.sh", "gpus": 1}])");
  auto r = q.start({"--gpus", "0,1,2,3", "--max-used-mib", "2500"})->wait(kPatience);
  ASSERT_EQ(r.status, 0) << r.out;
  // GPU 0 (30000 MiB) is over --max-used-mib 2500; 1 (500 MiB) and 2 (2000 MiB) are not.
  EXPECT_EQ(q.d.read("a.gpus"), "1\n");
  EXPECT_EQ(q.d.read("b.gpus"), "2\n");
}

// The probe of this machine against fake nvidia-smi commands.
TEST(Run, NvidiaSmiGivesAReadingOrSaysItsProblem) {
  TempDir d;
  auto smi = [&](const std::string& name, const std::string& body) {
    return d.write(name, "#!/bin/sh\n" + body, 0755);
  };
  gpuq::GpuReading good = gpuq::probe_gpus(smi("good", "printf '0, 30000\\n1, 5\\n'\n"), 10);
  ASSERT_TRUE(good.used_mib) << good.problem;
  EXPECT_EQ(*good.used_mib, (std::map<int, long long>{{0, 30000}, {1, 5}}));
  auto problem = [&](const std::string& cmd, double timeout) { return gpuq::NvidiaSmiProbe(cmd, timeout).read(); };
  gpuq::GpuReading garbage = problem(smi("garbage", "echo 'No devices were found'\n"), 10);
  EXPECT_FALSE(garbage.used_mib);
  EXPECT_EQ(garbage.problem, "unexpected line from nvidia-smi: 'No devices were found'");
  EXPECT_EQ(problem(smi("fails", "exit 9\n"), 10).problem, d.path() + "/fails exited with status 9");
  EXPECT_EQ(problem(d.path() + "/none", 10).problem, "cannot run " + d.path() + "/none: No such file or directory");
  // A hung nvidia-smi: the reading gives up at the timeout (the test waits for that, not for a sleep).
  gpuq::GpuReading hung = problem(smi("hangs", "exec sleep 600\n"), 0.2);
  EXPECT_EQ(hung.problem, d.path() + "/hangs did not answer within 0.2 s");
}

TEST(Run, KillEscalatesToSigkillForAJobThatIgnoresSigterm) {
  Queue q;
  q.d.write("stubborn.sh", "trap '' TERM\necho $$ > stubborn.pid\nwhile true; do sleep 0.1; done\n");
  q.plan(R"([{"id": "stubborn", "script": "stubborn.sh", "gpus": 1}])");
  auto run = q.start({"--kill-grace", "1"});
  ASSERT_TRUE(eventually([&] { return !lines_of(q.d.path() + "/stubborn.pid").empty(); }));
  long long pid = std::stoll(lines_of(q.d.path() + "/stubborn.pid")[0]);
  auto k = q.gpuq({"kill", "stubborn"});
  EXPECT_EQ(k.status, 0);
  EXPECT_THAT(k.out, HasSubstr("killed stubborn: sent SIGTERM to process group"));
  EXPECT_TRUE(pid_alive(pid));  // it ignores SIGTERM
  auto s = q.state();
  EXPECT_EQ(s["stubborn"]["status"], "failed");
  EXPECT_EQ(s["stubborn"]["exit"], -15);
  auto r = run->wait(kPatience);
  EXPECT_EQ(r.status, 3);  // 3: a job did not end done
  EXPECT_THAT(r.out, HasSubstr("SIGKILL to stubborn"));
  EXPECT_FALSE(pid_alive(pid));
  EXPECT_THAT(r.out, HasSubstr("all jobs finished"));
}

TEST(Run, KillOfAJobThatIsNotRunningSaysSo) {
  Queue q;
  q.plan(R"([{"id": "a", "script": "job.sh"}])");
  auto k = q.gpuq({"kill", "a"});
  EXPECT_EQ(k.status, 1);
  EXPECT_THAT(k.out, HasSubstr("not killed: a is not running (it is pending)"));
}

TEST(Run, UnknownIdsAreRefusedAndNamed) {
  Queue q;
  q.plan(R"([{"id": "a", "script": "job.sh"}])");
  for (const char* action : {"retry", "kill", "hold"}) {
    auto r = q.gpuq({action, "a", "ghost", "phantom"});
    EXPECT_EQ(r.status, 2) << action;
    EXPECT_THAT(r.err, HasSubstr("no job ghost, phantom in plan.json; nothing was changed"));
  }
  EXPECT_FALSE(std::ifstream(q.d.path() + "/plan.state.json").good());
}

TEST(Run, LeftoverBackgroundProcessIsReaped) {
  Queue q;
  q.d.write("leaky.sh", "sleep 300 &\necho $! > leaky.child\nexit 0\n");
  q.plan(R"([{"id": "leaky", "script": "leaky.sh", "gpus": 1}])");
  auto r = q.start()->wait(kPatience);
  ASSERT_EQ(r.status, 0) << r.out;
  long long child = std::stoll(lines_of(q.d.path() + "/leaky.child").at(0));
  EXPECT_TRUE(eventually([&] { return !pid_alive(child); })) << "the background sleep survived";
}

TEST(Run, ScriptPathWithSpaceAndSemicolonRunsAsOneArgument) {
  Queue q;
  q.d.write("my jobs/odd;touch pwned.sh", "echo ran > ran.txt\n");
  q.plan(R"([{"id": "odd", "script": "my jobs/odd;touch pwned.sh", "gpus": 0}])");
  auto r = q.start()->wait(kPatience);
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(q.status_of("odd"), "done");
  EXPECT_EQ(q.d.read("ran.txt"), "ran\n");
  EXPECT_FALSE(std::ifstream(q.d.path() + "/pwned").good());
}

TEST(Run, ScriptPathExpandsHomeAndVariables) {
  Queue q;
  q.d.write("scripts/hello.sh", "echo hi > hello.txt\n");
  q.env["MYJOBS"] = q.d.path() + "/scripts";
  q.env["HOME"] = q.d.path();
  q.plan(R"([{"id": "v", "script": "$MYJOBS/hello.sh", "gpus": 0},
             {"id": "h", "script": "~/scripts/hello.sh", "gpus": 0, "deps": ["v"]}])");
  ASSERT_EQ(q.start()->wait(kPatience).status, 0);
  EXPECT_EQ(q.status_of("v"), "done");
  EXPECT_EQ(q.status_of("h"), "done");
}

TEST(Run, MissingScriptFailsTheJobNotTheQueue) {
  Queue q;
  // A script missing when run starts: nothing starts (one message, exit 2).
  q.plan(R"([{"id": "gone", "script": "no_such.sh", "gpus": 0}, {"id": "fine", "script": "job.sh", "gpus": 0}])");
  auto refused = q.start({"--max-retries", "0"})->wait(kPatience);
  EXPECT_EQ(refused.status, 2);
  EXPECT_THAT(refused.err, HasSubstr("nothing started: 1 script is missing or not readable: no_such.sh (job 'gone')"));
  EXPECT_FALSE(q.has_state()) << "a refused run writes no state";
  EXPECT_EQ(q.status_of("fine"), "pending");
  // A script that goes away while run goes: that job fails (exit 127), the queue goes on.
  q.d.write("victim.sh", "true\n");
  q.d.write("remover.sh", "rm victim.sh\n");
  q.plan(R"([{"id": "remover", "script": "remover.sh", "gpus": 0},
             {"id": "gone", "script": "victim.sh", "gpus": 0, "deps": ["remover"]},
             {"id": "fine", "script": "job.sh", "gpus": 0, "deps": ["remover"]}])");
  auto r = q.start({"--max-retries", "0"})->wait(kPatience);
  EXPECT_EQ(r.status, 3) << r.err;  // 3: a job did not end done
  EXPECT_EQ(q.status_of("gone"), "failed");
  EXPECT_EQ(q.state()["gone"]["exit"], 127);
  EXPECT_THAT(q.d.read("logs/gone.log"), HasSubstr("victim.sh is missing or not a readable file"));
  EXPECT_EQ(q.status_of("fine"), "done");
}

// A script that an earlier job of the plan writes is not there when run starts: the job that
// waits for its maker is not refused (only said), and runs once its script exists.
TEST(Run, ScriptMadeByAnEarlierJobIsAwaitedNotRefused) {
  Queue q;
  q.d.write("make.sh", "mkdir -p gen && printf 'echo made > made.txt\\n' > gen/use.sh\n");
  q.plan(R"([{"id": "make", "script": "make.sh", "gpus": 0},
             {"id": "use", "script": "gen/use.sh", "gpus": 0, "deps": ["make"]}])");
  auto r = q.start({"--max-retries", "0"})->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("not there yet, for jobs that wait on other jobs (which may make them): "
                               "1 script is missing or not readable: gen/use.sh (job 'use')"));
  EXPECT_EQ(q.status_of("use"), "done");
  EXPECT_EQ(q.d.read("made.txt"), "made\n");
}

TEST(Run, JobEnvironmentAndExitFile) {
  Queue q;
  q.d.write("env.sh", "env | grep -E '^(CUDA_DEVICE_ORDER|CUDA_VISIBLE_DEVICES|TDPRM_GPU0|GPUQ_JOB_ID|GPUQ_ATTEMPT)=' | sort > env.txt\nexit 7\n");
  q.plan(R"([{"id": "e", "script": "env.sh", "gpus": 2}])");
  ASSERT_EQ(q.start({"--max-retries", "0", "--gpus", "4,5,6,7"})->wait(kPatience).status, 3);  // 3: a job did not end done
  EXPECT_EQ(q.d.read("env.txt"),
            "CUDA_DEVICE_ORDER=PCI_BUS_ID\nCUDA_VISIBLE_DEVICES=4,5\nGPUQ_ATTEMPT=1\nGPUQ_JOB_ID=e\nTDPRM_GPU0=4\n");
  EXPECT_EQ(q.d.read("logs/e.exit"), "7\n");
  EXPECT_EQ(q.state()["e"]["exit"], 7);
}

TEST(Run, StatusChangesNothingAndSignalsNothing) {
  Queue q;
  q.plan(R"([{"id": "leaky", "script": "job.sh", "gpus": 1}, {"id": "b", "script": "job.sh", "deps": ["leaky"]}])");
  // A job that has ended (exit file written) but whose process group still holds a process.
  Background leftover({"sleep", "300"}, q.d.path());
  q.d.write("logs/leaky.exit", "0\n");
  q.d.write("plan.state.json", R"({"leaky": {"status": "running", "gpus": [0], "pid": )" +
                                     std::to_string(leftover.pid()) + R"(, "start": 1000.5, "attempts": 0}})");
  std::string before = q.d.read("plan.state.json");
  auto s = q.gpuq({"status", "--all"});
  EXPECT_EQ(s.status, 0);
  EXPECT_THAT(s.out, HasSubstr("done     leaky"));       // status sees the exit file...
  EXPECT_EQ(q.d.read("plan.state.json"), before);     // ...but writes nothing
  EXPECT_TRUE(leftover.running());                       // and kills nothing (fix 13)
  EXPECT_FALSE(std::ifstream(q.d.path() + "/plan.lock").good());
}

TEST(Run, StatusRowsAndCountsAreTheOriginals) {
  Queue q;
  q.plan(R"([{"id": "a", "script": "job.sh", "est_hours": 2}, {"id": "b", "script": "job.sh"},
             {"id": "c", "script": "job.sh"}])");
  q.d.write("plan.state.json", R"({"a": {"status": "failed", "gpus": [3], "pid": 1, "start": 1000.0,
      "end": 8200.0, "exit": 2, "attempts": 2}, "c": {"status": "held"}})");
  auto s = q.gpuq({"status"});
  // The original's rows and counts come first, unchanged; gpuq's outlook follows.
  EXPECT_THAT(s.out, ::testing::StartsWith(
            "failed   a                                             gpus=[3]       2.00h est=2.0h\n"
            "held     c                                             gpus=-         0.00h est=0.0h\n"
            "{'failed': 1, 'pending': 1, 'held': 1}\n\n"));
}

// Issue 43, point 10: every job under 6 minutes read "est=0.0h". An estimate under an hour is in
// minutes or seconds, as people read it; an hour or more as the original printed it.
TEST(Run, StatusShowsShortEstimatesInMinutesOrSeconds) {
  Queue q;
  q.plan(R"([{"id": "a", "script": "job.sh", "est_hours": 0.05}, {"id": "b", "script": "job.sh", "est_hours": 0.005},
             {"id": "c", "script": "job.sh", "est_hours": 2.25}, {"id": "d", "script": "job.sh"}])");
  q.d.write("plan.state.json", R"({"a": {"status": "held"}, "b": {"status": "held"}, "c": {"status": "held"},
                                   "d": {"status": "held"}})");
  auto s = q.gpuq({"status"});
  EXPECT_THAT(s.out, HasSubstr("gpus=-         0.00h est=3 min\n"));
  EXPECT_THAT(s.out, HasSubstr("gpus=-         0.00h est=18 s\n"));
  EXPECT_THAT(s.out, HasSubstr("gpus=-         0.00h est=2.2h\n"));  // {:.1f} of 2.25, as the original
  EXPECT_THAT(s.out, HasSubstr("held     d                                             gpus=-         0.00h est=0.0h\n"))
      << "no estimate: the original's 0.0h";
}

TEST(Run, SigtermStopsTheQueueAndLeavesJobsRunning) {
  Queue q;
  q.env["GATE"] = "gate";  // a runs until the test lets it end
  q.plan(R"([{"id": "a", "script": "job.sh", "gpus": 1}])");
  auto run = q.start();
  ASSERT_TRUE(eventually([&] { return q.trace().size() == 1; }));
  run->signal(SIGTERM);
  auto r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("stopped by Terminated: the state is saved; 1 job(s) left running: a"));
  long long pid = q.state()["a"]["pid"];
  EXPECT_TRUE(pid_alive(pid));
  // A new run adopts it and sees it end.
  auto next = q.start();
  q.d.write("gate", "");
  auto again = next->wait(kPatience);
  EXPECT_EQ(again.status, 0);
  EXPECT_THAT(again.out, Not(HasSubstr("start a")));
  EXPECT_EQ(q.status_of("a"), "done");
  EXPECT_EQ(q.trace(), (std::vector<std::string>{"start a", "end a"}));
}

TEST(Run, InvalidPlanIsRejectedBeforeAnythingRuns) {
  Queue q;
  q.plan(R"([{"id": "a", "script": "job.sh", "deps": ["nope"]}])");
  auto r = q.gpuq({"run"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("dep \"nope\" names no job"));
  EXPECT_FALSE(std::ifstream(q.d.path() + "/plan.state.json").good());
}

TEST(Run, UnreadableStateStopsTheCommandAndIsNotOverwritten) {
  Queue q;
  q.plan(R"([{"id": "a", "script": "job.sh"}])");
  q.d.write("plan.state.json", "{\"a\": {\"status\": \"done\",");
  for (auto args : std::vector<std::vector<std::string>>{{"run"}, {"status"}, {"retry", "a"}}) {
    auto r = q.gpuq(args);
    EXPECT_EQ(r.status, 1) << args[0];
    EXPECT_THAT(r.err, HasSubstr("plan.state.json: line 1")) << args[0];
    EXPECT_THAT(r.err, HasSubstr("will not overwrite it")) << args[0];
  }
  EXPECT_EQ(q.d.read("plan.state.json"), "{\"a\": {\"status\": \"done\",");
}

TEST(Run, ASecondRunOnTheSamePlanIsRefused) {
  Queue q;
  q.env["GATE"] = "gate";
  q.plan(R"([{"id": "a", "script": "job.sh", "gpus": 1}])");
  auto first = q.start();
  ASSERT_TRUE(eventually([&] { return q.status_of("a") == "running"; }));
  auto second = q.gpuq({"run", "--poll", "1"});
  EXPECT_EQ(second.status, 1);
  EXPECT_THAT(second.err, HasSubstr("another `gpuq run` (pid " + std::to_string(first->pid()) +
                                    ", started as `gpuq run --plan plan.json` on "));
  EXPECT_THAT(second.err, HasSubstr(") is already running plan.json"));
  q.d.write("gate", "");
  EXPECT_EQ(first->wait(kPatience).status, 0);
  EXPECT_EQ(q.trace(), (std::vector<std::string>{"start a", "end a"}));
  // Once the first has ended, a new run may start.
  EXPECT_EQ(q.gpuq({"run", "--poll", "1"}).status, 0);
}

namespace {

// True when process `pid` has `path` open.
bool holds_open(long long pid, const std::string& path) {
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code rec;
    if (std::filesystem::read_symlink(fd.path(), rec) == path) return true;
  }
  return false;
}

// A pid that no process has: a child that has exited and been reaped.
long long dead_pid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, nullptr, 0);
  return p;
}

// Holds PLAN.run.lock the way a job caught between posix_spawn's clone and its exec does, after the
// run that took the lock (whose pid the file names) was killed.
struct LeftoverLock {
  int fd;
  explicit LeftoverLock(const TempDir& d, const std::string& recorded) {
    d.write("plan.run.lock", recorded);
    fd = ::open((d.path() + "/plan.run.lock").c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  }
  void release() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  ~LeftoverLock() { release(); }
};

}  // namespace

// CI found this: a run started right after a SIGKILLed one was refused, the lock still held by the
// killed run's job that was being spawned. A run whose recorded holder is dead waits for the lock.
TEST(Run, ALockHeldAfterItsRunDiedIsWaitedForNotRefused) {
  for (bool empty : {false, true}) {  // empty: the holder has locked but not yet written its pid
    Queue q;
    q.plan(R"([{"id": "a", "script": "job.sh", "gpus": 1}])");
    LeftoverLock lock(q.d, empty ? "" : std::to_string(dead_pid()) + "\n");
    auto run = q.start();
    // Once run has opened the lock file, it is waiting for the lock.
    ASSERT_TRUE(eventually([&] { return holds_open(run->pid(), q.d.path() + "/plan.run.lock"); }));
    EXPECT_TRUE(run->running()) << empty << ": " << run->wait(0).err;
    EXPECT_FALSE(q.has_state()) << "it must not schedule before it holds the lock";
    EXPECT_EQ(q.status_of("a"), "pending");
    lock.release();
    auto r = run->wait(kPatience);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(q.trace(), (std::vector<std::string>{"start a", "end a"}));
  }
}

TEST(Run, ALockNeverLetGoAfterItsRunDiedIsReportedWithTheRecordedPid) {
  Queue q;
  q.plan(R"([{"id": "a", "script": "job.sh", "gpus": 1}])");
  long long pid = dead_pid();
  LeftoverLock lock(q.d, std::to_string(pid) + "\n");
  auto r = q.gpuq({"run", "--poll", "1"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("plan.run.lock is locked by a process other than the `gpuq run` that took it (pid " +
                               std::to_string(pid) + ", which has exited)"));
  EXPECT_THAT(r.err, HasSubstr("fuser"));
  EXPECT_TRUE(q.trace().empty());
}
