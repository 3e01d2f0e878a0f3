// run --slurm's pieces that need no Slurm: what sbatch is asked, what squeue and sacct say,
// which plans it refuses, the state field. (The real-Slurm tests are slurm_test.cpp.)
#include <fmt/format.h>

#include <filesystem>

#include "gpuq/core/events.h"
#include "gpuq/core/rules.h"
#include "gpuq/live/control.h"
#include "gpuq/live/slurm.h"
#include "gpuq/live/state_codec.h"
#include "test_util.h"

namespace gpuq::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Contains;
using ::testing::Not;

TEST(SlurmUnit, SbatchArgsForAJob) {
  SlurmOptions o;
  o.chdir = "/work/p";
  o.partition = "gpu";
  o.sbatch_args = {"--mem=8G"};
  auto a = sbatch_args(o, "gpuq-plan-train-2", 2, 90, 3, "/work/p/logs/train.log", "", "exec gpuq __job");
  EXPECT_THAT(a, Contains("--gres=gpu:2"));
  EXPECT_THAT(a, Contains("--time=90"));
  EXPECT_THAT(a, Contains("--nice=3"));
  EXPECT_THAT(a, Contains("--hold"));
  EXPECT_THAT(a, Contains("--parsable"));
  EXPECT_THAT(a, Contains("--open-mode=append"));
  EXPECT_THAT(a, Contains("--partition=gpu"));
  EXPECT_THAT(a, Contains("--mem=8G"));
  EXPECT_THAT(a, Not(Contains(HasSubstr("--reservation"))));
  EXPECT_EQ(a.back(), "--wrap=exec gpuq __job");
  auto none = sbatch_args(o, "n", 0, 1, 0, "l", "maint", "w");
  EXPECT_THAT(none, Not(Contains(HasSubstr("--gres"))));  // a 0-GPU job asks for none
  EXPECT_THAT(none, Contains("--reservation=maint"));
}

// A job's cores and host memory go to Slurm as --cpus-per-task and --mem (MiB, rounded up);
// a job that gives neither leaves Slurm's defaults.
TEST(SlurmUnit, CpusAndMemGibGoToCpusPerTaskAndMem) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "cpus": 6, "mem_gib": 1.5},
                       {"id": "b", "script": "b.sh", "mem_gib": 0.3},
                       {"id": "c", "script": "c.sh"}])");
  EXPECT_EQ(slurm_host_args(p.jobs[0]), (std::vector<std::string>{"--cpus-per-task=6", "--mem=1536M"}));
  EXPECT_EQ(slurm_host_args(p.jobs[1]), (std::vector<std::string>{"--mem=308M"}));  // 307.2 MiB, up
  EXPECT_TRUE(slurm_host_args(p.jobs[2]).empty());
}

TEST(SlurmUnit, TimeFromLimitOrEstimateTimesMargin) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "est_hours": 2},
                       {"id": "b", "script": "b.sh", "est_hours": 2, "time_limit_hours": 0.5},
                       {"id": "c", "script": "c.sh", "est_hours": 0.0001}])");
  EXPECT_EQ(slurm_minutes(p.jobs[0], 1.5), 180);       // 2 h x 1.5
  EXPECT_EQ(slurm_minutes(p.jobs[0], 1.01), 122);      // 121.2 rounded up
  EXPECT_EQ(slurm_minutes(p.jobs[1], 1.5), 31);        // the limit, and a minute for gpuq's own to come first
  EXPECT_EQ(slurm_minutes(p.jobs[2], 1.5), 1);         // at least a minute
}

TEST(SlurmUnit, NiceIsThePriorityRankNeverNegative) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "priority": 30}, {"id": "b", "script": "b.sh", "priority": -5},
                       {"id": "c", "script": "c.sh", "priority": 30}, {"id": "d", "script": "d.sh", "priority": 7}])");
  EXPECT_THAT(slurm_nice(p), ElementsAre(2, 0, 2, 1));
}

TEST(SlurmUnit, JobNameAndTag) {
  EXPECT_EQ(plan_tag("runs/my.plan.json"), "my.plan");
  EXPECT_EQ(plan_tag("plan"), "plan");
  EXPECT_EQ(slurm_job_name("plan", "train_a", 3), "gpuq-plan-train_a-3");
}

TEST(SlurmUnit, ParsesSqueueJsonOf2205AndLater) {
  auto jobs = parse_squeue_json(R"({"meta": {}, "errors": [], "jobs": [
    {"job_id": 12, "name": "gpuq-plan-a-1", "job_state": "PENDING", "state_reason": "Resources"},
    {"job_id": {"set": true, "number": 13}, "name": "gpuq-plan-b-1", "job_state": ["RUNNING"], "state_reason": "None"}]})");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].id, 12);
  EXPECT_EQ(jobs[0].state, "PENDING");
  EXPECT_EQ(jobs[0].reason, "Resources");
  EXPECT_EQ(jobs[1].id, 13);
  EXPECT_EQ(jobs[1].state, "RUNNING");
  EXPECT_THROW(parse_squeue_json("squeue: error: unrecognized option '--json'"), std::runtime_error);
}

TEST(SlurmUnit, ParsesSqueueFormatLines) {
  auto jobs = parse_squeue_lines("7|gpuq-plan-a|b-1|PENDING|Priority\n8|gpuq-plan-c-1|RUNNING|None\ngarbage\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].name, "gpuq-plan-a|b-1");  // a '|' in a name
  EXPECT_EQ(jobs[0].reason, "Priority");
  EXPECT_EQ(jobs[1].id, 8);
  EXPECT_EQ(jobs[1].state, "RUNNING");
}

TEST(SlurmUnit, ParsesSacctJson) {
  auto jobs = parse_sacct_json(R"({"jobs": [{"job_id": 5, "name": "x", "state": {"current": "FAILED"},
                                              "exit_code": {"status": "FAILED", "return_code": 3}}]})");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].state, "FAILED");
  EXPECT_EQ(jobs[0].exit, 3);
}

TEST(SlurmUnit, RefusesAReservationOfGpuIdsUnlessItNamesASlurmReservation) {
  Plan p = plan_of(R"({"jobs": [{"id": "a", "script": "a.sh"}, {"id": "b", "script": "b.sh"}],
                       "reservations": [{"gpus": [7], "jobs": ["a"]}]})");
  EXPECT_THAT(slurm_plan_problem(p, std::nullopt), HasSubstr("reservation #1 closes GPUs [7]"));
  Plan q = plan_of(R"({"jobs": [{"id": "a", "script": "a.sh"}, {"id": "b", "script": "b.sh"}],
                       "reservations": [{"gpus": [7], "jobs": ["a"], "slurm_reservation": "evals"}]})");
  EXPECT_EQ(slurm_plan_problem(q, std::nullopt), "");
  EXPECT_EQ(slurm_reservations(q), (std::map<std::string, std::string>{{"a", "evals"}}));
  EXPECT_TRUE(slurm_copy(q).reservations.empty());
  EXPECT_THAT(errors_of(R"({"jobs": [{"id": "a", "script": "a.sh"}],
                            "reservations": [{"gpus": [7], "jobs": ["a"], "slurm_reservation": 5}]})"),
              Contains(HasSubstr("\"slurm_reservation\" must be the name of a Slurm reservation")));
}

TEST(SlurmUnit, StateKeepsTheSlurmId) {
  State s;
  JobState& e = s.at("a");
  e.status = Status::Running;
  e.pid = 4242;
  e.queue_id = 4242;
  e.gpus = std::vector<int>{};
  std::string text = dump_state(s);
  EXPECT_THAT(text, HasSubstr("\"slurm_id\": 4242"));
  StateLoad back = parse_state(text, "x.state.json");
  ASSERT_TRUE(back.error.empty()) << back.error;
  ASSERT_TRUE(back.state && back.state->find("a"));
  EXPECT_EQ(back.state->find("a")->queue_id, 4242);
  EXPECT_TRUE(state_in_slurm(*back.state));
}

// squeue's answer for one job of plan.json, as a fake squeue on PATH prints it.
std::string squeue_answer(const std::string& state, const std::string& reason, long long start_time) {
  return fmt::format(R"({{"jobs": [{{"job_id": 9, "name": "gpuq-plan-w1-1", "job_state": "{}", "state_reason": "{}",
                          "start_time": {}}}]}})",
                     state, reason, start_time);
}

// A job waiting in Slurm's queue keeps no start (it is pending to the event log) however many
// ticks survey it; once Slurm starts it, its start is Slurm's, set once: one start event in all.
// One job, w1, recorded running as Slurm job 9, over a squeue that answers DIR/queue.json and an
// scontrol that logs its arguments to DIR/scontrol.calls (first on PATH while it lives).
struct OneSlurmJob {
  TempDir d;
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  Plan plan = plan_of(R"({"jobs": [{"id": "w1", "script": "w.sh", "gpus": 2}]})");
  State state;
  OneSlurmJob() {
    d.write("bin/squeue", "#!/bin/sh\ncat " + d.path() + "/queue.json\n", 0755);
    d.write("bin/scontrol", "#!/bin/sh\necho \"$*\" >> " + d.path() + "/scontrol.calls\n", 0755);
    ::setenv("PATH", (d.path() + "/bin:" + path).c_str(), 1);
    JobState& e = state.at("w1");
    e.status = Status::Running;
    e.queue_id = e.pid = 9;
    e.gpus = std::vector<int>{};
  }
  ~OneSlurmJob() { ::setenv("PATH", path.c_str(), 1); }
};

TEST(SlurmUnit, AJobWaitingInTheQueueGetsOneStartWhenSlurmStartsIt) {
  OneSlurmJob w;
  TempDir& d = w.d;
  const Plan& plan = w.plan;
  SlurmLauncher slurm(plan, paths_for(d.path() + "/plan.json"), SlurmOptions{});
  QueueState q(plan, Policy{}, w.state, 1000, "run");
  ASSERT_EQ(kind_of(q.engine().life(0)), LifeKind::Queued);
  std::vector<Event> logged;
  auto tick = [&](double now) {
    settle(see_jobs(slurm, q.state(), now, &q.plan()), q, now);
    for (Event& x : q.take_events()) logged.push_back(x);
  };
  d.write("queue.json", squeue_answer("PENDING", "Resources", 5000));  // Slurm's guess: not a start
  for (double now : {1000, 1001, 1002}) tick(now);
  EXPECT_FALSE(q.state().find("w1")->start) << "no start while queued";
  EXPECT_EQ(kind_of(q.engine().life(0)), LifeKind::Queued);
  EXPECT_TRUE(logged.empty()) << event_line(logged.at(0));
  d.write("queue.json", squeue_answer("RUNNING", "None", 1003));
  for (double now : {1004, 1005, 1006}) tick(now);
  EXPECT_EQ(q.state().find("w1")->start, 1003.0) << "Slurm's start";
  ASSERT_EQ(logged.size(), 1u) << event_line(logged.back());
  EXPECT_EQ(logged[0].kind, "start");
  EXPECT_EQ(logged[0].t, 1003.0);
}

// A job recorded running but still held in Slurm's queue (its run died between its save and its
// release): the read's survey only finds it, so a look (status, logs -f) leaves it held, and the
// run's mend, as it acts, releases it, once.
TEST(SlurmUnit, AStrayHoldIsFoundByTheSurveyAndReleasedOnlyByTheRunsMend) {
  OneSlurmJob w;
  TempDir& d = w.d;
  SlurmLauncher slurm(w.plan, paths_for(d.path() + "/plan.json"), SlurmOptions{});
  d.write("queue.json", squeue_answer("PENDING", "JobHeldUser", 5000));
  JobsSeen seen = see_jobs(slurm, w.state, 1000, nullptr);
  EXPECT_TRUE(seen.started.empty()) << "held: not started";
  EXPECT_FALSE(std::filesystem::exists(d.path() + "/scontrol.calls")) << d.read("scontrol.calls");
  slurm.mend();
  slurm.mend();  // mended once: the next survey finds it again if it is still held
  EXPECT_EQ(d.read("scontrol.calls"), "release 9\n");
}

TEST(SlurmUnit, CommandResultCapturesOutputAndStatus) {
  CommandResult r = run_command({"bash", "-c", "echo out; echo err >&2; echo $GPUQ_X; exit 3"}, {{"GPUQ_X", "v"}});
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, "out\nv\n");
  EXPECT_EQ(r.err, "err\n");
}

}  // namespace
}  // namespace gpuq::test

namespace gpuq::test {
namespace {

// What `run --slurm` refuses, `validate --slurm` says; neither needs a Slurm to say it.
TEST(SlurmCli, ValidateAndRunRefuseAReservationOfGpuIds) {
  TempDir d;
  d.write("a.sh", "true\n");
  d.write("plan.json", R"({"jobs": [{"id": "a", "script": "a.sh", "gpus": 1}],
                           "reservations": [{"gpus": [7], "jobs": ["a"]}]})");
  Output plain = run_gpuq({"validate", "--plan", "plan.json"}, d.path());
  EXPECT_EQ(plain.status, 0) << plain.out << plain.err;
  Output v = run_gpuq({"validate", "--plan", "plan.json", "--slurm"}, d.path());
  EXPECT_EQ(v.status, 2) << v.out << v.err;
  EXPECT_THAT(v.out, HasSubstr("error: --slurm: reservation #1 closes GPUs [7]"));
  Output r = run_gpuq({"run", "--plan", "plan.json", "--slurm"}, d.path());
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("gpuq run --slurm: reservation #1 closes GPUs [7]"));
  EXPECT_EQ(d.read("plan.state.json"), "") << "nothing started";
}

// A plan whose jobs are in Slurm's queue is not run on this machine (its pids are Slurm ids), nor the reverse.
TEST(SlurmCli, RunRefusesAStateOfTheOtherKind) {
  TempDir d;
  d.write("a.sh", "true\n");
  d.write("plan.json", R"([{"id": "a", "script": "a.sh", "gpus": 0}, {"id": "b", "script": "a.sh", "gpus": 0}])");
  d.write("plan.state.json", R"({"a": {"status": "running", "gpus": [], "pid": 77, "start": 1.0, "slurm_id": 77}})");
  Output r = run_gpuq({"run", "--plan", "plan.json"}, d.path());
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("job a is running in Slurm (Slurm job 77)"));
  d.write("plan.state.json", R"({"a": {"status": "running", "gpus": [0], "pid": 1, "start": 1.0}})");
  Output s = run_gpuq({"run", "--plan", "plan.json", "--slurm"}, d.path());
  EXPECT_EQ(s.status, 1) << s.out << s.err;
  EXPECT_THAT(s.err, HasSubstr("job a is running on this machine (pid 1)"));
}

}  // namespace
}  // namespace gpuq::test

using gpuq::test::plan_of;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(SlurmUnit, RefusesJobsThatShareGpusByMemoryWhereTheClusterHasNoShardsInOneLineNamingThem) {
  using namespace gpuq;
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh"}, {"id": "b", "script": "b.sh", "gpu_mem_gib": 20},
                       {"id": "c", "script": "c.sh", "gpu_mem_gib": 20}])");
  std::string why = slurm_plan_problem(p, SlurmShards{});
  EXPECT_THAT(why, HasSubstr("2 jobs (b, ...) give gpu_mem_gib"));
  EXPECT_THAT(why, HasSubstr("this cluster has no GPU shards"));
  EXPECT_EQ(why.find('\n'), std::string::npos);
  EXPECT_EQ(slurm_plan_problem(plan_of(R"([{"id": "a", "script": "a.sh"}])"), SlurmShards{}), "");
  // With shards (8 a GPU of 80 GiB less 5 %: 9.5 GiB each), the same plan goes.
  EXPECT_EQ(slurm_plan_problem(p, SlurmShards{8, 80, 5}), "");
  // Not asked (simulate --nodes): packed jobs pass.
  EXPECT_EQ(slurm_plan_problem(p, std::nullopt), "");
}

TEST(SlurmUnit, ShardsPerGpuFromScontrol) {
  using namespace gpuq;
  EXPECT_EQ(parse_shards_per_gpu("NodeName=n1 Arch=x86_64 CoresPerSocket=8 Gres=gpu:8,shard:64 NodeAddr=n1\n"), 8);
  // Types and socket lists (a comma inside them is no separator); the fewest of the nodes.
  EXPECT_EQ(parse_shards_per_gpu("NodeName=a Gres=gpu:a100:4(S:0,1),shard:a100:32(S:0-1) State=IDLE\n"
                                 "NodeName=b Gres=gpu:h100:8(S:0-1),shard:h100:32(S:0-1) State=IDLE\n"),
            4);
  // A node without shards does not count; none with them: 0.
  EXPECT_EQ(parse_shards_per_gpu("NodeName=a Gres=gpu:8 State=IDLE\nNodeName=b Gres=gpu:2,shard:12 State=IDLE\n"), 6);
  EXPECT_EQ(parse_shards_per_gpu("NodeName=a Gres=gpu:8 GresDrain=shard:9 State=IDLE\n"), 0);
  EXPECT_EQ(parse_shards_per_gpu("NodeName=a Gres=(null) State=IDLE\n"), 0);
  EXPECT_EQ(parse_shards_per_gpu(""), 0);
}

TEST(SlurmUnit, APackedJobAsksForTheShardsOfItsGibOnOneGpu) {
  using namespace gpuq;
  SlurmShards s{8, 80, 5};  // a shard: 76 / 8 = 9.5 GiB
  EXPECT_EQ(shards_for(9.5, s), 1);
  EXPECT_EQ(shards_for(9.6, s), 2);
  EXPECT_EQ(shards_for(20, s), 3);
  EXPECT_EQ(shards_for(76, s), 8);
  EXPECT_EQ(shards_for(0.1, s), 1);
  EXPECT_EQ(shards_for(20, SlurmShards{}), 0);
  SlurmOptions o;
  o.chdir = "/w";
  auto a = sbatch_args(o, "n", 1, 10, 0, "l", "", "w", shards_for(20, s));
  EXPECT_THAT(a, Contains("--gres=shard:3"));
  EXPECT_THAT(a, Not(Contains(HasSubstr("--gres=gpu"))));
  EXPECT_THAT(sbatch_args(o, "n", 1, 10, 0, "l", "", "w"), Contains("--gres=gpu:1"));
  // More than one GPU's shards, or several GPUs: Slurm would keep it waiting for ever.
  Plan big = plan_of(R"([{"id": "big", "script": "a.sh", "gpu_mem_gib": 78}])");
  EXPECT_THAT(slurm_plan_problem(big, s), HasSubstr("job big gives gpu_mem_gib 78, 9 shards of a GPU that has 8"));
  Plan wide = plan_of(R"([{"id": "wide", "script": "a.sh", "gpus": 2, "gpu_mem_gib": 20}])");
  EXPECT_THAT(slurm_plan_problem(wide, s), HasSubstr("job wide gives gpu_mem_gib 20 on each of 2 GPUs"));
}
