// `run --slurm` against a real one-node Slurm (tests/slurm/start.sh, started by ctest's
// fixture "slurm"; SLURM_CONF names it). No Slurm is a failure here, never a skip.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "test_util.h"

extern char** environ;

namespace gpuq::test {
namespace {

namespace fs = std::filesystem;

std::string slurm_conf() {
  const char* c = std::getenv("SLURM_CONF");
  return c ? c : "";
}

// Slurm's queue: "ID NAME" per job of the test Slurm.
std::vector<std::pair<std::string, std::string>> queued_jobs();
// Every gpuq run a test started (start_gpuq): killed in the test's teardown.
std::vector<pid_t>& started_runs() {
  static std::vector<pid_t> pids;
  return pids;
}

// Each test starts with an empty queue and leaves one: its teardown kills the runs it started
// and cancels, by name (gpuq-...), every job of the plan left in Slurm, so a test that fails
// half-way leaves nothing holding GPUs for the next.
class SlurmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(slurm_conf().empty()) << "SLURM_CONF is not set: run these tests through ctest (fixture slurm)";
    Output s = run({"sinfo", "-h", "-o", "%t"});
    ASSERT_EQ(s.status, 0) << "the test Slurm is not up: " << s.err;
    // plnd: up, and planned by the backfill scheduler.
    ASSERT_THAT(s.out, ::testing::AnyOf(::testing::HasSubstr("idle"), ::testing::HasSubstr("mix"),
                                        ::testing::HasSubstr("alloc"), ::testing::HasSubstr("plnd")))
        << s.out;
    std::string left;
    for (auto& [id, name] : queued_jobs()) left += " " + id + " " + name;
    ASSERT_EQ(left, "") << "jobs an earlier test left in Slurm's queue";
  }
  void TearDown() override {
    for (pid_t p : started_runs()) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    started_runs().clear();
    std::vector<std::string> ids;
    for (auto& [id, name] : queued_jobs())
      if (name.rfind("gpuq-", 0) == 0) ids.push_back(id);
    if (ids.empty()) return;
    std::vector<std::string> cancel{"scancel"};
    cancel.insert(cancel.end(), ids.begin(), ids.end());
    run(cancel);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!queued_jobs().empty() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(queued_jobs().empty()) << "jobs still in Slurm's queue 30 s after scancel";
  }
};

std::vector<std::pair<std::string, std::string>> queued_jobs() {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(run({"squeue", "-h", "-o", "%i %j"}).out);
  for (std::string id, name; in >> id >> name;) out.push_back({id, name});
  return out;
}

nlohmann::json state_of(const TempDir& d, const std::string& plan = "plan.json") {
  std::string text = d.read(plan.substr(0, plan.size() - 5) + ".state.json");
  if (text.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

// `gpuq ARGS` started in `cwd` with stdout+stderr to `log`; returns its pid.
pid_t start_gpuq(const std::vector<std::string>& args, const std::string& cwd, const std::string& log,
                 const std::map<std::string, std::string>& env = {}) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(cwd.c_str()) != 0) _exit(126);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1), ::dup2(fd, 2);
    for (auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv{const_cast<char*>("gpuq")};
    std::string bin = gpuq_binary();
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    _exit(127);
  }
  started_runs().push_back(pid);
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  std::erase(started_runs(), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// A folder of wrappers on PATH that log each call of `command` (one line: its arguments) to `log`.
std::string logging_wrapper(const TempDir& d, const std::string& command, const std::string& log) {
  std::string real = run({"bash", "-c", "command -v " + command}).out;
  while (!real.empty() && real.back() == '\n') real.pop_back();
  d.write("bin/" + command, "#!/bin/bash\necho \"$*\" >> " + log + "\nexec " + real + " \"$@\"\n", 0755);
  return d.path() + "/bin:" + std::getenv("PATH");
}

// The demo's tracked files (its plan and scripts), never what a run of it left there.
std::string copy_demo(const TempDir& d) {
  std::string demo = std::string(EXAMPLES) + "/demo";
  fs::copy_file(demo + "/plan.json", d.path() + "/plan.json");
  fs::create_directories(d.path() + "/scripts");
  for (const auto& e : fs::directory_iterator(demo + "/scripts"))
    if (e.is_regular_file() && e.path().extension() == ".sh")
      fs::copy_file(e.path(), d.path() + "/scripts/" + e.path().filename().string());
  return d.path();
}

// The demo plan (deps, after:, a file dep, priorities, GPU counts) through Slurm ends as it does on this machine.
TEST_F(SlurmTest, DemoPlanEndsAsLocally) {
  TempDir local, slurm;
  copy_demo(local), copy_demo(slurm);
  std::map<std::string, std::string> env{{"DEMO_SECONDS", "0.3"}};
  Output l = run({gpuq_binary(), "run", "--plan", "plan.json", "--poll", "1"}, local.path(), env);
  ASSERT_EQ(l.status, 0) << l.out << l.err;
  Output s = run({gpuq_binary(), "run", "--plan", "plan.json", "--slurm", "--poll", "1"}, slurm.path(), env);
  ASSERT_EQ(s.status, 0) << s.out << s.err;
  auto last = [](const std::string& out) {
    std::string t = out.substr(0, out.find_last_not_of('\n') + 1);
    return t.substr(t.rfind('\n') + 1);
  };
  EXPECT_EQ(last(s.out), last(l.out)) << s.out;
  EXPECT_THAT(last(s.out), ::testing::HasSubstr("8 done"));
  auto st = state_of(slurm);
  for (auto& [id, e] : st.items()) {
    EXPECT_EQ(e["status"], "done") << id;
    EXPECT_TRUE(e.contains("slurm_id") && e["slurm_id"].is_number_integer()) << id << e.dump();
  }
  // Slurm bound the GPUs: a 2-GPU job saw two devices, a 0-GPU job none.
  EXPECT_THAT(slurm.read("logs/train_a.log"), ::testing::ContainsRegex("CUDA_VISIBLE_DEVICES='[0-7],[0-7]'"));
  EXPECT_THAT(slurm.read("logs/prep.log"), ::testing::HasSubstr("CUDA_VISIBLE_DEVICES=''"));
  // The order of the deps: a job is submitted only after what it waits for.
  auto at = [&](const std::string& line) { return s.out.find(line); };
  EXPECT_LT(at("done prep"), at("submit train_a as Slurm job"));
  EXPECT_LT(at("submit train_a as Slurm job"), at("submit eval_a as Slurm job"));
  EXPECT_LT(at("done wide"), at("submit report as Slurm job"));
  EXPECT_LT(at("done sweep_2"), at("submit report as Slurm job"));
}

// A failing job's automatic retry, `kill` (scancel), `hold` of a job waiting in Slurm's queue
// (scontrol hold) and its `retry` (scontrol release), a time limit hit.
TEST_F(SlurmTest, RetryKillHoldAndTimeLimit) {
  TempDir d;
  d.write("flaky.sh", "[ \"$GPUQ_ATTEMPT\" -ge 2 ] || exit 3\necho fine\n");
  d.write("long.sh", "touch long.started\nsleep 60\n");
  d.write("short.sh", "echo ran\n");
  d.write("limited.sh", "sleep 60\n");
  d.write("plan.json", R"({"jobs": [
    {"id": "flaky", "script": "flaky.sh", "gpus": 1, "est_hours": 0.01},
    {"id": "long", "script": "long.sh", "gpus": 8, "est_hours": 0.01},
    {"id": "waiter", "script": "short.sh", "gpus": 8, "est_hours": 0.01, "deps": ["file:long.started"]},
    {"id": "limited", "script": "limited.sh", "gpus": 0, "est_hours": 0.01, "time_limit_hours": 0.0006}
  ]})");
  pid_t run_pid = start_gpuq({"run", "--plan", "plan.json", "--slurm", "--poll", "1", "--retry-after", "0",
                              "--kill-grace", "2"},
                             d.path(), d.path() + "/run.out");
  // waiter is in Slurm's queue, waiting for the GPUs long holds.
  ASSERT_TRUE(eventually(
      [&] {
        auto s = state_of(d);
        if (!s.contains("waiter") || s["waiter"]["status"] != "running") return false;
        Output q = run({"squeue", "-h", "-j", std::to_string(s["waiter"]["slurm_id"].get<long long>()), "-o", "%T"});
        return q.out.find("PENDING") != std::string::npos;
      }))
      << d.read("run.out");
  Output h = run_gpuq({"hold", "--plan", "plan.json", "waiter"}, d.path());
  EXPECT_EQ(h.status, 0) << h.out << h.err;
  EXPECT_THAT(h.out, ::testing::HasSubstr("scontrol hold"));
  EXPECT_EQ(state_of(d)["waiter"]["status"], "held");
  long long waiter_id = state_of(d)["waiter"]["slurm_id"];
  EXPECT_THAT(run({"squeue", "-h", "-j", std::to_string(waiter_id), "-o", "%r"}).out, ::testing::HasSubstr("JobHeld"));
  Output k = run_gpuq({"kill", "--plan", "plan.json", "long"}, d.path());
  EXPECT_EQ(k.status, 0) << k.out << k.err;
  long long long_id = state_of(d)["long"]["slurm_id"];
  EXPECT_THAT(k.out, ::testing::HasSubstr(fmt::format("killed long: scancel of Slurm job {}", long_id)));
  ASSERT_TRUE(eventually([&] { return run({"squeue", "-h", "-j", std::to_string(long_id)}).out.empty(); }));
  // long's GPUs are free, but waiter is held: still pending in Slurm.
  EXPECT_THAT(run({"squeue", "-h", "-j", std::to_string(waiter_id), "-o", "%T %r"}).out,
              ::testing::HasSubstr("PENDING JobHeld"));
  Output r = run_gpuq({"retry", "--plan", "plan.json", "waiter"}, d.path());
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("scontrol release"));
  ASSERT_TRUE(eventually([&] { return d.read("run.out").find("all jobs finished") != std::string::npos; }))
      << d.read("run.out");
  EXPECT_EQ(wait_exit(run_pid), 3);  // 3: long was killed, so not every job is done
  auto s = state_of(d);
  EXPECT_EQ(s["flaky"]["status"], "done");
  EXPECT_EQ(s["flaky"]["attempts"], 1) << "one automatic retry";
  // Each attempt's header in the log, as locally (1 GPU: Slurm's CUDA_VISIBLE_DEVICES).
  EXPECT_THAT(d.read("logs/flaky.log"), ::testing::ContainsRegex("== gpuq: attempt 1 on GPUs \\[[0-7]\\] at .*\n"
                                                                  "== gpuq: attempt 2 on GPUs \\[[0-7]\\] at .*\nfine\n"))
      << d.read("logs/flaky.log");
  EXPECT_EQ(s["long"]["status"], "failed");
  EXPECT_EQ(s["long"]["exit"], -15);
  EXPECT_EQ(s["waiter"]["status"], "done");
  EXPECT_EQ(s["waiter"]["slurm_id"], waiter_id) << "released, not submitted again";
  EXPECT_EQ(s["limited"]["status"], "failed");
  EXPECT_EQ(s["limited"]["outcome"], "timeout");
  EXPECT_THAT(d.read("run.out"), ::testing::HasSubstr("timed out limited"));
}

// An edit of the plan while run --slurm runs: a job added is submitted from the plan in use
// (with its own priority rank), and an edit with a reservation of GPU ids is refused as the
// start refuses it, the version in use going on.
TEST_F(SlurmTest, AnEditIsReloadedAndAReservationOfGpuIdsRefused) {
  TempDir d;
  d.write("gate.sh", "touch gate.started\nwhile [ ! -e open ]; do sleep 0.1; done\n");
  d.write("short.sh", "echo ran $GPUQ_JOB_ID\n");
  d.write("plan.json", R"({"jobs": [{"id": "gate", "script": "gate.sh", "gpus": 1, "est_hours": 0.01}]})");
  pid_t run_pid = start_gpuq({"run", "--plan", "plan.json", "--slurm", "--poll", "1"}, d.path(), d.path() + "/run.out");
  ASSERT_TRUE(eventually([&] { return fs::exists(d.path() + "/gate.started"); })) << d.read("run.out");
  // A reservation of GPU ids: refused, said once; nothing of it is taken.
  d.write("plan.json.tmp", R"({"jobs": [{"id": "gate", "script": "gate.sh", "gpus": 1, "est_hours": 0.01},
    {"id": "bad", "script": "short.sh", "gpus": 1}], "reservations": [{"gpus": [0], "jobs": ["bad"]}]})");
  fs::rename(d.path() + "/plan.json.tmp", d.path() + "/plan.json");
  ASSERT_TRUE(eventually([&] { return d.read("run.out").find("still running the version loaded at") != std::string::npos; }))
      << d.read("run.out");
  EXPECT_THAT(d.read("run.out"), ::testing::HasSubstr("run --slurm: "));
  EXPECT_FALSE(state_of(d).contains("bad"));
  // status says what run says: the problem (on stderr), and the version run goes on with.
  Output st = run_gpuq({"status", "--plan", "plan.json"}, d.path());
  EXPECT_EQ(st.status, 0) << st.err;
  EXPECT_THAT(st.out, ::testing::HasSubstr("the plan on disk has 1 problem; still running the version loaded at"));
  EXPECT_THAT(st.out, ::testing::HasSubstr("`gpuq validate --slurm` lists them"));
  EXPECT_THAT(st.out, ::testing::Not(::testing::HasSubstr("is reloaded at run's next tick")));
  EXPECT_THAT(st.out, ::testing::Not(::testing::ContainsRegex("\nbad ")));
  EXPECT_THAT(st.err, ::testing::HasSubstr("plan.json: run --slurm: reservation #1 closes GPUs [0]"));
  auto doc = nlohmann::json::parse(run_gpuq({"status", "--plan", "plan.json", "--json"}, d.path()).out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["run"]["plan_problems"], 1) << doc["run"].dump();
  // A valid edit: the new job runs through Slurm while gate still holds its GPU.
  d.write("plan.json.tmp", R"({"jobs": [{"id": "gate", "script": "gate.sh", "gpus": 1, "est_hours": 0.01},
    {"id": "added", "script": "short.sh", "gpus": 1, "priority": 5}]})");
  fs::rename(d.path() + "/plan.json.tmp", d.path() + "/plan.json");
  ASSERT_TRUE(eventually([&] { return state_of(d).value("added", nlohmann::json::object()).value("status", "") == "done"; }))
      << d.read("run.out");
  EXPECT_THAT(d.read("run.out"), ::testing::HasSubstr("plan reloaded: +1 job (added)"));
  EXPECT_THAT(d.read("logs/added.log"), ::testing::HasSubstr("ran added"));
  EXPECT_TRUE(state_of(d)["added"].contains("slurm_id"));
  d.write("open", "");
  ASSERT_TRUE(eventually([&] { return d.read("run.out").find("all jobs finished") != std::string::npos; }))
      << d.read("run.out");
  EXPECT_EQ(wait_exit(run_pid), 0);
}

// `run --slurm` killed with SIGKILL at random moments, 20 times, then run to the end: every
// job submitted exactly once (the sbatch calls, by job name) and run exactly once.
TEST_F(SlurmTest, KillNineTwentyTimesSubmitsEachJobOnce) {
  uint64_t seed = test_seed(20261202);
  SCOPED_TRACE(seed_note(seed));
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  TempDir d;
  d.write("job.sh", "echo \"$GPUQ_JOB_ID $GPUQ_ATTEMPT\" >> ran.txt\nsleep 0.2\n");
  std::string jobs;
  const int n = 40;
  for (int i = 0; i < n; ++i) {
    std::string deps = i >= 10 ? fmt::format(", \"deps\": [\"j{}\"]", i - 10) : "";
    jobs += fmt::format("{}{{\"id\": \"j{}\", \"script\": \"job.sh\", \"gpus\": {}, \"priority\": {}, "
                        "\"est_hours\": 0.01{}}}",
                        i ? ",\n" : "", i, i % 3, i % 5, deps);
  }
  d.write("plan.json", "{\"jobs\": [" + jobs + "]}");
  std::string path = logging_wrapper(d, "sbatch", d.path() + "/sbatch.calls");
  std::map<std::string, std::string> env{{"PATH", path}};
  std::uniform_int_distribution<int> ms(30, 900);
  for (int k = 0; k < 20; ++k) {
    pid_t p = start_gpuq({"run", "--plan", "plan.json", "--slurm", "--poll", "1"}, d.path(), d.path() + "/run.out",
                         env);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms(rng)));
    ::kill(p, SIGKILL);
    wait_exit(p);
  }
  Output last = run({gpuq_binary(), "run", "--plan", "plan.json", "--slurm", "--poll", "1"}, d.path(), env);
  ASSERT_EQ(last.status, 0) << last.out << last.err;
  EXPECT_THAT(last.out, ::testing::HasSubstr(fmt::format("all jobs finished: {} done", n)));
  std::map<std::string, int> submitted, ran;
  std::istringstream calls(d.read("sbatch.calls"));
  for (std::string line; std::getline(calls, line);) {
    auto at = line.find("-J gpuq-plan-");
    ASSERT_NE(at, std::string::npos) << line;
    ++submitted[line.substr(at + 3, line.find(' ', at + 3) - at - 3)];
  }
  std::istringstream runs(d.read("ran.txt"));
  for (std::string line; std::getline(runs, line);) ++ran[line];
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(submitted[fmt::format("gpuq-plan-j{}-1", i)], 1) << "j" << i;
    EXPECT_EQ(ran[fmt::format("j{} 1", i)], 1) << "j" << i;
  }
  EXPECT_EQ(submitted.size(), static_cast<size_t>(n));
  EXPECT_EQ(ran.size(), static_cast<size_t>(n));
  // Nothing of the plan is left in Slurm's queue (no held copy submitted twice).
  EXPECT_EQ(run({"squeue", "-h", "-n", "gpuq-plan-j0-1"}).out, "");
}

// 1,000 short jobs: one squeue per tick (and never one per job), counted by a wrapper on PATH.
TEST_F(SlurmTest, ThousandJobsOneSqueuePerTick) {
  TempDir d;
  d.write("job.sh", "true\n");
  std::string jobs;
  const int n = 1000;
  for (int i = 0; i < n; ++i)
    jobs += fmt::format("{}{{\"id\": \"t{}\", \"script\": \"job.sh\", \"gpus\": 0, \"est_hours\": 0.01}}",
                        i ? ",\n" : "", i);
  d.write("plan.json", "{\"jobs\": [" + jobs + "]}");
  std::string path = logging_wrapper(d, "squeue", d.path() + "/squeue.calls");
  Output r = run({gpuq_binary(), "run", "--plan", "plan.json", "--slurm", "--max-queued", "1000"}, d.path(),
                 {{"PATH", path}, {"GPUQ_PHASES", "1"}});
  ASSERT_EQ(r.status, 0) << r.out.substr(0, 2000) << r.err.substr(0, 2000);
  EXPECT_THAT(r.out, ::testing::HasSubstr(fmt::format("all jobs finished: {} done", n)));
  size_t ticks = 0, calls = 0;
  for (size_t at = 0; (at = r.err.find("gpuq phase tick: wait", at)) != std::string::npos; ++at) ++ticks;
  std::istringstream in(d.read("squeue.calls"));
  for (std::string line; std::getline(in, line);) ++calls;
  std::printf("%zu ticks, %zu squeue calls for %d jobs\n", ticks, calls, n);
  EXPECT_GT(ticks, 0u);
  EXPECT_LE(calls, ticks);
  EXPECT_LT(calls, static_cast<size_t>(n) / 10) << "one call per tick, not per job";
}

// A job that must wait in Slurm's queue behind another: status says it is queued (with
// Slurm's reason), hold and retry say so in run's lines, and the event log has one start and
// one end per attempt, its start when Slurm started it. Its log has the attempt header.
TEST_F(SlurmTest, AJobQueuedBehindAnotherStartsOnceAndIsSaidToBeQueued) {
  TempDir d;
  d.write("gate.sh", "touch gate.started\nwhile [ ! -e open ]; do sleep 0.1; done\n");
  d.write("short.sh", "echo ran $GPUQ_JOB_ID\n");
  d.write("plan.json", R"({"jobs": [
    {"id": "gate", "script": "gate.sh", "gpus": 8, "est_hours": 0.01},
    {"id": "w1", "script": "short.sh", "gpus": 2, "est_hours": 0.01, "deps": ["file:gate.started"]}]})");
  pid_t run_pid = start_gpuq({"run", "--plan", "plan.json", "--slurm", "--poll", "1"}, d.path(), d.path() + "/run.out");
  auto queued = [&] {
    auto s = state_of(d);
    if (!s.contains("w1") || s["w1"]["status"] != "running") return false;
    Output q = run({"squeue", "-h", "-j", std::to_string(s["w1"]["slurm_id"].get<long long>()), "-o", "%T"});
    return q.out.find("PENDING") != std::string::npos;
  };
  ASSERT_TRUE(eventually(queued)) << d.read("run.out");
  EXPECT_FALSE(state_of(d)["w1"].contains("start")) << state_of(d)["w1"].dump();
  // Slurm gives a pending reason (Resources, Priority) at its next scheduling cycle: wait for it.
  Output st;
  bool reason = eventually([&] {
    st = run_gpuq({"status", "--plan", "plan.json"}, d.path());
    return st.out.find("Slurm's reason:") != std::string::npos;
  });
  EXPECT_TRUE(reason) << st.out;
  EXPECT_THAT(st.out, ::testing::ContainsRegex("\nw1 +running +when Slurm starts it +queued in Slurm \\(Slurm's "
                                               "reason: [A-Za-z]+\\)"))
      << st.out;
  Output js = run_gpuq({"status", "--plan", "plan.json", "--json"}, d.path());
  auto doc = nlohmann::json::parse(js.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << js.out;
  for (auto& j : doc["jobs"]) EXPECT_EQ(j["queued_in_slurm"], j["id"] == "w1") << j.dump();
  ASSERT_EQ(run_gpuq({"hold", "--plan", "plan.json", "w1"}, d.path()).status, 0);
  ASSERT_TRUE(eventually([&] { return d.read("run.out").find("gpuq hold w1 from another shell: held (was queued in "
                                                             "Slurm)") != std::string::npos; }))
      << d.read("run.out");
  ASSERT_EQ(run_gpuq({"retry", "--plan", "plan.json", "w1"}, d.path()).status, 0);
  ASSERT_TRUE(eventually([&] { return d.read("run.out").find("gpuq retry w1 from another shell: queued in Slurm (was "
                                                             "held)") != std::string::npos; }))
      << d.read("run.out");
  ASSERT_TRUE(eventually(queued)) << d.read("run.out");
  d.write("open", "");
  struct stat made;
  ASSERT_EQ(::stat((d.path() + "/open").c_str(), &made), 0);
  double opened = static_cast<double>(made.st_mtim.tv_sec);
  ASSERT_TRUE(eventually([&] { return d.read("run.out").find("all jobs finished") != std::string::npos; }))
      << d.read("run.out");
  EXPECT_EQ(wait_exit(run_pid), 0);
  std::map<std::string, int> starts, ends;
  std::istringstream events(d.read("plan.events.jsonl"));
  for (std::string line; std::getline(events, line);) {
    auto e = nlohmann::json::parse(line);
    std::string key = e["id"].get<std::string>() + " " + std::to_string(e["attempt"].get<long long>());
    if (e["event"] == "start") ++starts[key];
    if (e["event"] == "end") ++ends[key];
  }
  EXPECT_EQ(starts, (std::map<std::string, int>{{"gate 1", 1}, {"w1 1", 1}})) << d.read("plan.events.jsonl");
  EXPECT_EQ(ends, (std::map<std::string, int>{{"gate 1", 1}, {"w1 1", 1}})) << d.read("plan.events.jsonl");
  // Slurm started w1 once gate had ended, after `open` (Slurm's start is in whole seconds).
  EXPECT_GE(state_of(d)["w1"]["start"].get<double>(), opened) << state_of(d)["w1"].dump();
  Output h = run_gpuq({"history", "--plan", "plan.json"}, d.path());
  EXPECT_EQ(h.status, 0) << h.err;
  size_t rows = 0;
  std::istringstream hist(h.out);
  for (std::string line; std::getline(hist, line);) rows += line.rfind("w1 ", 0) == 0;
  EXPECT_EQ(rows, 1u) << h.out;
  // The attempt's header, with the two GPUs Slurm gave it (CUDA_VISIBLE_DEVICES), before its output.
  EXPECT_THAT(d.read("logs/w1.log"),
              ::testing::ContainsRegex("^== gpuq: attempt 1 on GPUs \\[[0-7], [0-7]\\] at [0-9-]+ [0-9:]+\nran w1\n"))
      << d.read("logs/w1.log");
}

// Jobs that share GPUs by memory (gpu_mem_gib) go to Slurm as GPU shards (the test node has 8 a
// GPU): each 30 GiB job of a GPU of 80 GiB (less 5 %: 9.5 GiB a shard) asks for 4 shards, so two
// run on one GPU at once. A 2-GPU packed job is refused by validate --slurm, in one line.
TEST_F(SlurmTest, PackedJobsShareAGpuThroughShards) {
  TempDir d;
  d.write("job.sh", "echo \"$CUDA_VISIBLE_DEVICES $SLURM_SHARDS_ON_NODE $(date +%s.%N)\" > $GPUQ_JOB_ID.seen\n"
                    "sleep 3\necho \"$(date +%s.%N)\" >> $GPUQ_JOB_ID.seen\n");
  std::string jobs;
  for (int k = 0; k < 4; ++k)
    jobs += fmt::format(R"({}{{"id": "p{}", "script": "job.sh", "gpus": 1, "est_hours": 0.01, "gpu_mem_gib": 30}})",
                        k ? "," : "", k);
  d.write("plan.json", "[" + jobs + "]");
  std::string sbatch_log = d.path() + "/sbatch.calls";
  std::map<std::string, std::string> env{{"PATH", logging_wrapper(d, "sbatch", sbatch_log)}};
  Output r = run({gpuq_binary(), "run", "--plan", "plan.json", "--slurm", "--poll", "1"}, d.path(), env);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::string calls = d.read("sbatch.calls");
  EXPECT_EQ(std::count(calls.begin(), calls.end(), '\n'), 4) << calls;
  std::istringstream each(calls);
  for (std::string line; std::getline(each, line);) {
    EXPECT_THAT(line, ::testing::HasSubstr("--gres=shard:4")) << calls;
    EXPECT_THAT(line, ::testing::Not(::testing::HasSubstr("--gres=gpu"))) << calls;
  }
  // Each saw one GPU and its 4 shards; two of them ran on one GPU at the same time.
  struct Seen { std::string gpu; double from, to; };
  std::vector<Seen> seen;
  for (int k = 0; k < 4; ++k) {
    std::istringstream in(d.read(fmt::format("p{}.seen", k)));
    Seen s{};
    std::string shards;
    ASSERT_TRUE(in >> s.gpu >> shards >> s.from >> s.to) << d.read(fmt::format("p{}.seen", k));
    EXPECT_THAT(s.gpu, ::testing::MatchesRegex("[0-7]"));
    EXPECT_EQ(shards, "4");
    seen.push_back(s);
  }
  bool shared = false;
  for (size_t a = 0; a < seen.size(); ++a)
    for (size_t b = a + 1; b < seen.size(); ++b)
      shared |= seen[a].gpu == seen[b].gpu && seen[a].from < seen[b].to && seen[b].from < seen[a].to;
  EXPECT_TRUE(shared) << "no two packed jobs ran on one GPU at once";
  d.write("wide.json", R"([{"id": "w", "script": "job.sh", "gpus": 2, "est_hours": 0.01, "gpu_mem_gib": 30}])");
  Output v = run_gpuq({"validate", "--plan", "wide.json", "--slurm"}, d.path());
  EXPECT_NE(v.status, 0) << v.out;
  EXPECT_THAT(v.out + v.err, ::testing::HasSubstr("job w gives gpu_mem_gib 30 on each of 2 GPUs, and Slurm gives a job "
                                                  "its GPU shards on one GPU"));
}

}  // namespace
}  // namespace gpuq::test
