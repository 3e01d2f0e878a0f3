// run --slurm against a fake Slurm on PATH (fake_slurm.h): what no Slurm-less test reached
// before (issue 31): the --max-queued cap, a queue that cannot be read, and what --account,
// --qos and --time-margin hand sbatch. No Slurm is started; the real-Slurm tests are
// slurm_test.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "fake_slurm.h"
#include "gpuq/core/state.h"
#include "gpuq/live/slurm.h"
#include "gpuq/live/store.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::Contains;
using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::Le;
using ::testing::Not;
using json = nlohmann::json;

namespace {

// Jobs that wait for the file `go` in their folder (30 s at most), so that the test decides when they end.
constexpr const char* kWaitForGo = "for i in $(seq 600); do [ -e go ] && exit 0; sleep 0.05; done; exit 1\n";

// Lets every job of `d` end when the test does, whatever it asserted on the way.
struct Go {
  const TempDir& d;
  ~Go() { d.write("go", ""); }
};

size_t squeue_calls(const FakeSlurm& slurm) { return lines_of(slurm.dir() + "/squeue.calls").size(); }

// Waits for `ticks` more looks at the queue by run (each tick runs squeue once).
bool ticks_pass(const FakeSlurm& slurm, size_t ticks) {
  size_t from = squeue_calls(slurm);
  return eventually([&] { return squeue_calls(slurm) >= from + ticks; });
}

}  // namespace

// --max-queued 2 with five ready jobs: two are submitted, and no third while they run (ticks
// go by); once they end the rest follow, never more than two of the plan's jobs in the queue
// (the fake counts them at each sbatch). The default (200) would submit all five at once.
TEST(SlurmFake, MaxQueuedKeepsAtMostThatManyOfThePlansJobsInTheQueue) {
  TempDir d;
  FakeSlurm slurm(d);
  Go go{d};
  d.write("wait.sh", kWaitForGo);
  std::string jobs;
  for (int i = 0; i < 5; ++i)
    jobs += fmt::format(R"({}{{"id": "j{}", "script": "wait.sh", "gpus": 1, "est_hours": 0.1}})", i ? "," : "", i);
  d.write("plan.json", "[" + jobs + "]");
  auto r = start_gpuq({"run", "--plan", "plan.json", "--slurm", "--max-queued", "2", "--poll", "0.3"}, d.path(),
                      slurm.env());
  ASSERT_TRUE(eventually([&] { return slurm.jobs().size() >= 2; })) << r->out() << r->err();
  ASSERT_TRUE(ticks_pass(slurm, 3)) << r->out() << r->err();
  EXPECT_EQ(slurm.jobs().size(), 2u) << "a third job was submitted while two were in the queue";
  d.write("go", "");
  Output o = r->wait(kPatience);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_EQ(slurm.jobs().size(), 5u);
  std::vector<std::string> queued = lines_of(slurm.dir() + "/queued_at_submit");
  ASSERT_EQ(queued.size(), 5u);
  EXPECT_THAT(queued, Each(::testing::AnyOf("1", "2")));
  EXPECT_THAT(queued, Contains("2")) << "never two at once: the cap was not what held the others";
  json state = json::parse(d.read("plan.state.json"));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(state[fmt::format("j{}", i)]["status"], "done") << state.dump();
}

// squeue answers garbage, then fails: nothing is submitted (a queue that cannot be read may
// hold the plan's jobs already: a second sbatch would run one twice), and run says why once
// for each cause; once squeue answers, the job goes to Slurm and the run ends.
TEST(SlurmFake, AnUnreadableQueueSubmitsNothingUntilSqueueAnswers) {
  TempDir d;
  FakeSlurm slurm(d);
  d.write("ok.sh", "echo ran\n");
  d.write("plan.json", R"([{"id": "a", "script": "ok.sh", "gpus": 1, "est_hours": 0.1}])");
  d.write("slurm/squeue.garbage", "<html>502 Bad Gateway</html>\n");
  auto r = start_gpuq({"run", "--plan", "plan.json", "--slurm", "--poll", "0.3"}, d.path(), slurm.env());
  const std::string garbage =
      "not submitting more jobs for now: Slurm's queue cannot be read (squeue --json: not a JSON object with a "
      "\"jobs\" list); submitting waits; submitting goes on once the queue drains";
  ASSERT_TRUE(eventually([&] { return r->out().find(garbage) != std::string::npos; })) << r->out() << r->err();
  ASSERT_TRUE(ticks_pass(slurm, 3)) << r->out() << r->err();
  EXPECT_TRUE(slurm.jobs().empty()) << "submitted while the queue could not be read";
  EXPECT_EQ(count_of(r->out(), garbage), 1u) << r->out();

  d.write("slurm/squeue.fail", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n");
  std::filesystem::remove(slurm.dir() + "/squeue.garbage");
  const std::string down =
      "not submitting more jobs for now: Slurm's queue cannot be read (squeue: slurm_load_jobs error: Unable to "
      "contact slurm controller (connect failure)); submitting waits";
  ASSERT_TRUE(eventually([&] { return r->out().find(down) != std::string::npos; })) << r->out() << r->err();
  ASSERT_TRUE(ticks_pass(slurm, 3)) << r->out() << r->err();
  EXPECT_TRUE(slurm.jobs().empty()) << "submitted while squeue failed";
  EXPECT_EQ(json::parse(d.read("plan.state.json"))["a"].value("status", "pending"), "pending");

  std::filesystem::remove(slurm.dir() + "/squeue.fail");
  Output o = r->wait(kPatience);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_EQ(slurm.jobs().size(), 1u);
  EXPECT_EQ(json::parse(d.read("plan.state.json"))["a"]["status"], "done");
  EXPECT_THAT(d.read("logs/a.log"), HasSubstr("ran\n"));
}

namespace {

// PATH with the fake first, for this process, restored at the end of the test.
struct PathFirst {
  std::string was;
  explicit PathFirst(const FakeSlurm& slurm) : was(std::getenv("PATH") ? std::getenv("PATH") : "") {
    ::setenv("PATH", slurm.env().at("PATH").c_str(), 1);
  }
  ~PathFirst() { ::setenv("PATH", was.c_str(), 1); }
};

}  // namespace

// A job running in Slurm while squeue cannot be read is still running: not lost, its id still
// its own (a kill goes to scancel), and nothing new is submitted. Only a queue that was read
// and no longer lists it (and no exit file) makes it lost.
TEST(SlurmFake, ARunningJobIsNotLostWhileTheQueueCannotBeRead) {
  TempDir d;
  FakeSlurm slurm(d);
  PathFirst path(slurm);
  d.write("slurm/jobs/9/name", "gpuq-plan-w1-1\n");
  d.write("slurm/jobs/9/exitf", d.path() + "/logs/w1.exit\n");
  d.write("slurm/jobs/9/released", "");
  d.write("w.sh", "true\n");
  Plan plan = plan_of(R"({"jobs": [{"id": "w1", "script": "w.sh", "gpus": 1}, {"id": "w2", "script": "w.sh"}]})");
  SlurmOptions opt;
  opt.chdir = d.path();
  SlurmLauncher launcher(plan, paths_for(d.path() + "/plan.json"), opt);
  State state;
  JobState& e = state.at("w1");
  e.status = Status::Running;
  e.queue_id = e.pid = 9;
  e.start = 1000;
  e.gpus = std::vector<int>{};

  d.write("slurm/squeue.fail", "slurm_load_jobs error: Socket timed out on send/recv operation\n");
  launcher.survey(state, 1010);
  Observed seen = launcher.observe("w1", e);
  EXPECT_EQ(seen.kind, Observed::Kind::Running) << seen.note;
  EXPECT_EQ(launcher.identify(e), Identity::Same);
  EXPECT_TRUE(launcher.group_alive(9));
  try {
    launcher.launch(LaunchSpec{"w2", "w.sh", {}, 0, 1, {}, {}, false, ""});
    ADD_FAILURE() << "submitted while the queue could not be read";
  } catch (const QueueFull& full) {
    EXPECT_THAT(full.what(), HasSubstr("(squeue: slurm_load_jobs error: Socket timed out on send/recv operation)"));
  }
  EXPECT_TRUE(slurm.jobs() == std::vector<long long>{9}) << "sbatch ran";

  std::filesystem::remove(slurm.dir() + "/squeue.fail");
  launcher.survey(state, 1020);
  EXPECT_EQ(launcher.observe("w1", e).kind, Observed::Kind::Running);
  EXPECT_EQ(launcher.identify(e), Identity::Same);

  std::filesystem::remove_all(slurm.dir() + "/jobs/9");  // it left the queue, and wrote no exit file
  launcher.survey(state, 1030);
  seen = launcher.observe("w1", e);
  EXPECT_EQ(seen.kind, Observed::Kind::Exited);
  EXPECT_EQ(seen.exit, kLostExit);
  EXPECT_THAT(seen.note, HasSubstr("Slurm job 9 left the queue without"));
  EXPECT_EQ(launcher.identify(e), Identity::Gone);
}

namespace {

// sbatch's arguments for the one job of a plan that `gpuq run --slurm FLAGS` submits.
std::vector<std::string> sbatch_args_with(const std::vector<std::string>& flags, const std::string& job) {
  TempDir d;
  FakeSlurm slurm(d);
  d.write("ok.sh", "true\n");
  d.write("plan.json", "[" + job + "]");
  std::vector<std::string> args{"run", "--plan", "plan.json", "--slurm", "--poll", "1"};
  args.insert(args.end(), flags.begin(), flags.end());
  Output o = run_gpuq(args, d.path(), slurm.env());
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  std::vector<long long> ids = slurm.jobs();
  EXPECT_EQ(ids.size(), 1u) << o.out << o.err;
  return ids.empty() ? std::vector<std::string>{} : slurm.args(ids[0]);
}

constexpr const char* kOneHourJob = R"({"id": "a", "script": "ok.sh", "gpus": 1, "est_hours": 1})";

}  // namespace

// --account A: every sbatch charges A (default: none given, Slurm's default account).
TEST(Flags, AccountChargesEachSbatchToThatAccount) {
  EXPECT_THAT(sbatch_args_with({"--account", "lab42"}, kOneHourJob), Contains("--account=lab42"));
  EXPECT_THAT(sbatch_args_with({}, kOneHourJob), Not(Contains(HasSubstr("--account"))));
}

// --qos Q: every sbatch asks for that quality of service (default: none given).
TEST(Flags, QosAsksEachSbatchForThatQos) {
  std::vector<std::string> args = sbatch_args_with({"--qos", "high"}, kOneHourJob);
  EXPECT_THAT(args, Contains("--qos=high"));
  EXPECT_THAT(args, Not(Contains(HasSubstr("--account"))));
  EXPECT_THAT(sbatch_args_with({}, kOneHourJob), Not(Contains(HasSubstr("--qos"))));
}

// --time-margin F: sbatch --time is est_hours x F in minutes, rounded up (1 h x 2 = 120; the
// default 1.5 gives 90); a job with time_limit_hours keeps its limit and a minute.
TEST(Flags, TimeMarginGivesSbatchTheEstimateTimesTheMargin) {
  EXPECT_THAT(sbatch_args_with({"--time-margin", "2"}, kOneHourJob), Contains("--time=120"));
  EXPECT_THAT(sbatch_args_with({"--time-margin", "1.01"}, kOneHourJob), Contains("--time=61"));  // 60.6 up
  EXPECT_THAT(sbatch_args_with({}, kOneHourJob), Contains("--time=90"));
  EXPECT_THAT(sbatch_args_with({"--time-margin", "2"},
                               R"({"id": "a", "script": "ok.sh", "gpus": 1, "est_hours": 1, "time_limit_hours": 0.5})"),
              Contains("--time=31"));
}

// A plan run from snapshots of its code (issue 30) in Slurm: each job's sbatch runs from the
// checkout of the snapshot taken when it was loaded, so an edit made while it waits in the
// queue is not what it runs; the history names the commit; no checkout is left at the end.
TEST(SlurmFake, AJobInTheQueueRunsTheCodeOfItsSnapshotNotTheEditMadeSince) {
  TempDir d;
  FakeSlurm slurm(d);
  Go go{d};
  d.write("repo/train.py", "print('v1')\n");
  d.write("repo/job.sh",
          "echo \"in $PWD, workdir $GPUQ_WORKDIR\"\n"
          "for i in $(seq 600); do [ -e \"$GPUQ_WORKDIR/../go\" ] && break; sleep 0.05; done\n"
          "cat train.py > \"$GPUQ_WORKDIR/../ran.txt\"\n");
  std::string repo = d.path() + "/repo";
  for (std::vector<std::string> args : {std::vector<std::string>{"init", "-q"}, {"add", "-A"},
                                        {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first"}}) {
    args.insert(args.begin(), {"git", "-C", repo});
    ASSERT_EQ(run(args).status, 0);
  }
  d.write("plan.json", R"({"workdir": "repo", "settings": {"snapshot": "git"},
                           "jobs": [{"id": "train", "script": "job.sh", "gpus": 1, "est_hours": 0.1}]})");
  auto r = start_gpuq({"run", "--plan", "plan.json", "--slurm", "--poll", "0.3"}, d.path(), slurm.env());
  ASSERT_TRUE(eventually([&] { return slurm.jobs().size() == 1; })) << r->out() << r->err();
  d.write("repo/train.py", "print('v2')\n");
  d.write("go", "");
  Output o = r->wait(kPatience);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_EQ(d.read("ran.txt"), "print('v1')\n") << o.out << d.read("logs/train.log");
  json h = json::parse(run_gpuq({"history", "--plan", "plan.json", "--json"}, d.path()).out);
  ASSERT_EQ(h.size(), 1u) << h.dump(1);
  std::string commit = h[0]["snapshot"]["commit"];
  EXPECT_EQ(run({"git", "-C", repo, "show", commit + ":train.py"}).out, "print('v1')\n");
  EXPECT_TRUE(std::filesystem::is_empty(d.path() + "/plan.snapshots")) << o.out;
}

// Out of memory in Slurm (issue 45): a job Slurm ends OUT_OF_MEMORY (its cgroup held it to --mem,
// its mem_gib) ends "over memory", not a bare exit 137, and on_oom submits it again at once with
// the --mem of its next attempt, which its GPUQ_MEM_GIB says too.
TEST(SlurmFake, AJobSlurmEndsOutOfMemoryIsOverMemoryAndOnOomAsksForMoreMemory) {
  TempDir d;
  FakeSlurm slurm(d);
  d.write("job.sh", "echo \"$GPUQ_ATTEMPT $GPUQ_MEM_GIB\" >> seen\n"
                    "if [ \"$GPUQ_ATTEMPT\" = 1 ]; then echo OUT_OF_MEMORY > \"" + slurm.dir() +
                        "/jobs/$SLURM_JOB_ID/final\"; kill -9 $$; fi\n");
  d.write("plan.json", R"([{"id": "prep", "script": "job.sh", "gpus": 0, "est_hours": 0.1, "mem_gib": 1,
                            "on_oom": {"mem_factor": 2}}])");
  Output o = start_gpuq({"run", "--plan", "plan.json", "--slurm", "--poll", "0.3", "--max-retries", "0"}, d.path(),
                        slurm.env())
                 ->wait(kPatience);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_EQ(lines_of(d.path() + "/seen"), (std::vector<std::string>{"1 1", "2 2"})) << o.out;
  std::vector<long long> jobs = slurm.jobs();
  ASSERT_EQ(jobs.size(), 2u) << o.out;
  auto mem_of = [&](const std::string& name) {
    for (long long id : jobs) {
      std::vector<std::string> a = slurm.args(id);
      if (std::find_if(a.begin(), a.end(), [&](const std::string& x) { return x.find(name) != std::string::npos; }) ==
          a.end())
        continue;
      for (const std::string& x : a)
        if (x.rfind("--mem=", 0) == 0) return x;
    }
    return std::string("none");
  };
  EXPECT_EQ(mem_of("-prep-1"), "--mem=1024M");
  EXPECT_EQ(mem_of("-prep-2"), "--mem=2048M");
  EXPECT_THAT(o.out, HasSubstr(fmt::format("failed prep (exit 137): over memory (Slurm job {} ended OUT_OF_MEMORY: its "
                                           "--mem, the attempt's mem_gib, was reached); on_oom runs it again at once",
                                           jobs[0])));
  json h = json::parse(run_gpuq({"history", "--plan", "plan.json", "--json"}, d.path()).out);
  ASSERT_EQ(h.size(), 2u) << h.dump(1);
  EXPECT_EQ(h[0]["outcome"], "over memory") << h.dump(1);
  EXPECT_EQ(h[1]["outcome"], "done") << h.dump(1);
}
