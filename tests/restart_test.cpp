// Restarts and drop-in: `run` killed mid-plan adopts its jobs; the original's state is carried on.
#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <random>

#include "gpuq/live/proc.h"
#include "test_util.h"

using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

// A plan of `n` short jobs, each appending its id to markers/ID; some depend on earlier ones.
void write_marker_plan(const TempDir& d, int n) {
  d.write("mark.sh", "echo \"$GPUQ_JOB_ID\" >> \"markers/$GPUQ_JOB_ID\"\nsleep 0.$((RANDOM % 3 + 2))\n");
  fs::create_directories(d.path() + "/markers");
  json plan = json::array();
  for (int i = 0; i < n; ++i) {
    json j = {{"id", "job" + std::to_string(i)}, {"script", "mark.sh"}, {"gpus", 1 + i % 2}, {"est_hours", 0.1}};
    if (i >= 10 && i % 4 == 0) j["deps"] = {"job" + std::to_string(i - 10)};
    plan.push_back(j);
  }
  d.write("plan.json", plan.dump(1));
}

void expect_each_marker_once(const TempDir& d, int n) {
  for (int i = 0; i < n; ++i) {
    std::string id = "job" + std::to_string(i);
    auto lines = lines_of(d.path() + "/markers/" + id);
    EXPECT_EQ(lines, std::vector<std::string>{id}) << id << " ran " << lines.size() << " times";
  }
  json state = json::parse(d.read("plan.state.json"));
  for (int i = 0; i < n; ++i) EXPECT_EQ(state["job" + std::to_string(i)]["status"], "done") << i;
}

// The event log (issue 17) against the state: each job's one run logged as one start and
// one end, done, in order: no event lost or logged twice, however run was killed.
void expect_each_run_logged_once(const TempDir& d, int n) {
  std::map<std::string, std::vector<json>> per_job;
  for (const std::string& line : lines_of(d.path() + "/plan.events.jsonl")) {
    json e = json::parse(line, nullptr, false);
    if (e.is_discarded()) continue;  // a line torn by the SIGKILL: readers skip it, and its events come again
    per_job[e["id"]].push_back(e);
  }
  for (int i = 0; i < n; ++i) {
    std::string id = "job" + std::to_string(i);
    const auto& es = per_job[id];
    ASSERT_EQ(es.size(), 2u) << id << ": " << json(es).dump();
    EXPECT_EQ(es[0]["event"], "start") << id;
    EXPECT_EQ(es[1]["event"], "end") << id;
    EXPECT_EQ(es[1]["outcome"], "done") << id;
    EXPECT_EQ(es[0]["attempt"], 1) << id;
    EXPECT_LE(es[0]["t"].get<double>(), es[1]["t"].get<double>()) << id;
  }
}

}  // namespace

TEST(Restart, KilledRunAdoptsItsRunningJobsAndNoJobRunsTwice) {
  TempDir d;
  auto env = fake_nvidia_smi(d, idle_gpus(8));
  write_marker_plan(d, 24);
  auto run = start_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, d.path(), env);
  ASSERT_TRUE(eventually([&] { return d.read("plan.state.json").find("running") != std::string::npos; }));
  run->signal(SIGKILL);
  run->wait(kPatience);
  json mid = json::parse(d.read("plan.state.json"));
  int running = 0;
  for (auto& [id, s] : mid.items()) running += s["status"] == "running";
  EXPECT_GT(running, 0);
  auto again = start_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, d.path(), env)->wait(kPatience);
  ASSERT_EQ(again.status, 0) << again.out << again.err;
  EXPECT_THAT(again.out, HasSubstr("all jobs finished"));
  expect_each_marker_once(d, 24);
}

// The crash test of issue 4: SIGKILL at random moments, at least 30 times, over 100 jobs.
TEST(Restart, ExactlyOnceUnderRepeatedSigkill) {
  TempDir d;
  auto env = fake_nvidia_smi(d, idle_gpus(8));
  const int n = 100;
  write_marker_plan(d, n);
  const uint64_t seed = test_seed(20240601);  // the moments of the kills (GPUQ_TEST_SEED=random: new ones)
  std::printf("%s\n", seed_note(seed).c_str());
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> delay_ms(5, 120);
  int kills = 0;
  for (; kills < 30; ++kills) {
    auto run = start_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, d.path(), env);
    usleep(delay_ms(rng) * 1000);
    run->signal(SIGKILL);
    auto r = run->wait(kPatience);
    if (r.out.find("all jobs finished") != std::string::npos) break;
  }
  EXPECT_GE(kills, 30) << "the plan finished before 30 kills; make the jobs longer";
  auto last = start_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, d.path(), env)->wait(kPatience);
  ASSERT_EQ(last.status, 0) << last.out << last.err;
  EXPECT_THAT(last.out, HasSubstr("all jobs finished"));
  expect_each_marker_once(d, n);
  expect_each_run_logged_once(d, n);
}

// What a `run` killed between its save and its release leaves (issue: a start logged for a
// launch never released): a running entry whose wrapper, gpuq itself, waits at its start line
// (fd 3) for a "go" that never comes. Here the test is that run: it spawns the wrapper as run
// does, writes the state run would have saved, and "dies" by closing the line.
struct LeftAtStartLine {
  long long pid = 0;
  int line = -1;  // the write end of the start line (-1: closed)
  void close_line() {
    if (line >= 0) ::close(line);
    line = -1;
  }
  ~LeftAtStartLine() {
    close_line();
    if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
  }
};

void leave_at_start_line(const TempDir& d, const std::string& id, LeftAtStartLine& left) {
  fs::create_directories(d.path() + "/logs");
  int go[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, go[0], 3);
  posix_spawn_file_actions_addopen(&fa, 1, (d.path() + "/logs/" + id + ".log").c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  std::string bin = gpuq_binary(), script = d.path() + "/mark.sh", exitf = d.path() + "/logs/" + id + ".exit",
              abortf = d.path() + "/logs/" + id + ".aborted";
  std::vector<char*> argv{const_cast<char*>("gpuq-job"), const_cast<char*>("__job"), script.data(), exitf.data(),
                          abortf.data(), nullptr};
  std::vector<std::string> vars{"GPUQ_JOB_ID=" + id, "GPUQ_ATTEMPT=1"};  // as run gives them
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, bin.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(go[0]);
  ASSERT_EQ(rc, 0);
  left.pid = pid;
  left.line = go[1];
  std::optional<unsigned long long> pid_start;
  ASSERT_TRUE(eventually([&] { return (pid_start = gpuq::process_start_time(pid)).has_value(); }));
  json state = {{id,
                 {{"status", "running"}, {"pid", pid}, {"pid_start", *pid_start}, {"start", gpuq::unix_now() - 1},
                  {"gpus", {0}}}}};
  d.write("plan.state.json", state.dump());
  // The killed run began the log at its first tick, before this launch.
  d.write("plan.events.jsonl", "");
  fs::last_write_time(d.path() + "/plan.events.jsonl", fs::file_time_type::clock::now() - std::chrono::minutes(1));
}

// The event log's lines of job `id`, as "event/outcome/attempt" (and the pids of its starts).
std::vector<std::string> logged(const TempDir& d, const std::string& id, std::vector<long long>* pids = nullptr) {
  std::vector<std::string> out;
  for (const std::string& line : lines_of(d.path() + "/plan.events.jsonl")) {
    json e = json::parse(line);
    if (e["id"] != id) continue;
    out.push_back(e["event"].get<std::string>() + "/" + e.value("outcome", "") + "/" +
                  std::to_string(e["attempt"].get<long long>()));
    if (pids && e["event"] == "start") pids->push_back(e["pid"].get<long long>());
  }
  return out;
}

void one_job_plan(const TempDir& d) {
  d.write("mark.sh", "echo \"$GPUQ_JOB_ID\" >> \"markers/$GPUQ_JOB_ID\"\n");
  fs::create_directories(d.path() + "/markers");
  d.write("plan.json", R"([{"id": "a", "script": "mark.sh", "gpus": 1}])");
}

// The run after it finds the wrapper gone already (it left logs/a.aborted): the launch never ran,
// so the log has no start of it, nor an end; only the next run's launch, which does run.
TEST(Restart, LaunchCutShortAtItsStartLineIsNoEvent) {
  TempDir d;
  auto env = fake_nvidia_smi(d, idle_gpus(8));
  one_job_plan(d);
  LeftAtStartLine left;
  leave_at_start_line(d, "a", left);
  left.close_line();  // the killed run's end of the line closes with it
  ASSERT_TRUE(eventually([&] { return fs::exists(d.path() + "/logs/a.aborted"); }));
  ::waitpid(static_cast<pid_t>(left.pid), nullptr, 0);
  long long aborted_pid = left.pid;
  left.pid = 0;
  auto r = run_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, d.path(), env);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("requeued a: its launch was cut short before it ran"));
  EXPECT_EQ(lines_of(d.path() + "/markers/a"), std::vector<std::string>{"a"});
  std::vector<long long> pids;
  EXPECT_EQ(logged(d, "a", &pids), (std::vector<std::string>{"start//1", "end/done/1"}));
  EXPECT_THAT(pids, Not(::testing::Contains(aborted_pid)));
}

// The same, with the wrapper still holding its line when the next run starts (a loaded machine:
// it has not yet seen the killed run's end of the line close): the run must not take it for a
// job that runs; its start is not logged while it waits there, nor after it gives up.
TEST(Restart, LaunchStillAtItsStartLineIsNotLoggedAsStarted) {
  TempDir d;
  auto env = fake_nvidia_smi(d, idle_gpus(8));
  one_job_plan(d);
  LeftAtStartLine left;
  leave_at_start_line(d, "a", left);
  long long held_pid = left.pid;
  auto run = start_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, d.path(), env);
  // Its first ticks see the wrapper at its start line.
  ASSERT_TRUE(eventually([&] { return run->out().find("adopt") != std::string::npos || !run->running(); }, kPatience))
      << run->out() << run->err();
  usleep(1500 * 1000);
  EXPECT_TRUE(logged(d, "a").empty()) << d.read("plan.events.jsonl");
  left.close_line();
  auto r = run->wait(kPatience);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(lines_of(d.path() + "/markers/a"), std::vector<std::string>{"a"});
  std::vector<long long> pids;
  EXPECT_EQ(logged(d, "a", &pids), (std::vector<std::string>{"start//1", "end/done/1"}));
  EXPECT_THAT(pids, Not(::testing::Contains(held_pid)));
}

// The other side: a launch the killed run did release (it died before logging it) runs, and
// the next run logs its start once, with the wrapper's pid: at once while it runs (it is not
// taken for one held at its start line), or, ended already, with its end.
TEST(Restart, LaunchReleasedBeforeTheCrashIsLoggedOnce) {
  for (bool ended : {false, true}) {
    SCOPED_TRACE(ended ? "ended before the next run" : "running when the next run starts");
    TempDir d;
    auto env = fake_nvidia_smi(d, idle_gpus(8));
    one_job_plan(d);
    // (This wrapper runs in the test's folder: the script finds its own.) It ends once `done` is there.
    d.write("mark.sh", "cd \"$(dirname \"$0\")\"\necho \"$GPUQ_JOB_ID\" >> \"markers/$GPUQ_JOB_ID\"\n"
                       "while [ ! -e done ]; do sleep 0.05; done\n");
    if (ended) d.write("done", "");
    LeftAtStartLine left;
    leave_at_start_line(d, "a", left);
    ASSERT_EQ(::write(left.line, "go\n", 3), 3);  // released; the run dies before its log line
    left.close_line();
    long long released = left.pid;
    if (ended) {
      ASSERT_TRUE(eventually([&] { return fs::exists(d.path() + "/logs/a.exit"); }));
      ::waitpid(static_cast<pid_t>(left.pid), nullptr, 0);
      left.pid = 0;
    }
    auto run = start_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, d.path(), env);
    if (!ended) {
      EXPECT_TRUE(eventually([&] { return !logged(d, "a").empty(); }, kPatience)) << "its start, while it runs";
      EXPECT_EQ(logged(d, "a"), std::vector<std::string>{"start//1"});
      d.write("done", "");
    }
    auto r = run->wait(kPatience);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_EQ(lines_of(d.path() + "/markers/a"), std::vector<std::string>{"a"}) << "ran once";
    std::vector<long long> pids;
    EXPECT_EQ(logged(d, "a", &pids), (std::vector<std::string>{"start//1", "end/done/1"}));
    EXPECT_EQ(pids, std::vector<long long>{released});
  }
}

TEST(DropIn, StateWrittenByTheOriginalIsCarriedOn) {
  TempDir d;
  fs::copy(fs::path(FIXTURES) / "original-midrun", d.path(), fs::copy_options::recursive);
  auto env = fake_nvidia_smi(d, idle_gpus(8));
  // The original left: a done, b failed (attempts 0), e blocked on b, c running with its exit file written.
  auto status = run_gpuq({"status", "--plan", "plan.json"}, d.path(), env);
  EXPECT_EQ(status.status, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("failed   b "));
  EXPECT_THAT(status.out, HasSubstr("blocked  e "));
  d.write("fail.sh", "exit 0\n");  // b succeeds on its retry
  auto r = run_gpuq({"run", "--plan", "plan.json", "--poll", "1", "--max-retries", "1", "--retry-after", "0"},
                    d.path(), env);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("done c"));
  EXPECT_THAT(r.out, HasSubstr("auto-retry b (retry 1)"));
  EXPECT_THAT(r.out, Not(HasSubstr("start a ")));
  EXPECT_THAT(r.out, Not(HasSubstr("start c ")));
  json s = json::parse(d.read("plan.state.json"));
  for (const char* id : {"a", "b", "c", "d", "e"}) EXPECT_EQ(s[id]["status"], "done") << id;
  EXPECT_EQ(s["b"]["attempts"], 1);
  EXPECT_EQ(d.read("logs/a.log"), "ok\n");  // a did not run again
}

TEST(DropIn, GpuqStateHasWhatTheOriginalReads) {
  TempDir d;
  auto env = fake_nvidia_smi(d, idle_gpus(8));
  d.write("ok.sh", "exit 0\n");
  d.write("bad.sh", "exit 4\n");
  d.write("plan.json", R"([{"id": "a", "script": "ok.sh", "gpus": 2}, {"id": "b", "script": "bad.sh"},
                          {"id": "c", "script": "ok.sh", "deps": ["b"]}, {"id": "h", "script": "ok.sh"}])");
  run_gpuq({"hold", "--plan", "plan.json", "h"}, d.path(), env);
  auto bg = start_gpuq({"run", "--plan", "plan.json", "--max-retries", "0"}, d.path(), env);
  ASSERT_TRUE(eventually([&] {
    std::string text = d.read("plan.state.json");
    if (text.empty()) return false;
    json s = json::parse(text);
    return s.value("a", json::object()).value("status", "") == "done" &&
           s.value("c", json::object()).value("status", "") == "blocked";
  }));
  bg->signal(SIGTERM);
  bg->wait(kPatience);
  // The original reads s["status"] of every entry, s["pid"] of running ones, s["start"] when present,
  // s.get("exit") == -15, s.get("attempts", 0) compared with ints, s.get("gpus") as a list of ints.
  json s = json::parse(d.read("plan.state.json"));
  ASSERT_TRUE(s.is_object());
  for (auto& [id, e] : s.items()) {
    ASSERT_TRUE(e.contains("status")) << id;
    EXPECT_TRUE(e["status"].is_string());
    EXPECT_TRUE(e["status"] != "running" || e["pid"].is_number_integer()) << id;
    EXPECT_TRUE(!e.contains("start") || e["start"].is_number()) << id;
    EXPECT_TRUE(!e.contains("end") || e["end"].is_number()) << id;
    EXPECT_TRUE(!e.contains("exit") || e["exit"].is_number_integer()) << id;
    EXPECT_TRUE(!e.contains("attempts") || e["attempts"].is_number_integer()) << id;
    for (auto& g : e.value("gpus", json::array())) EXPECT_TRUE(g.is_number_integer()) << id;
  }
  EXPECT_EQ(s["a"]["status"], "done");
  EXPECT_EQ(s["a"]["gpus"], json({0, 1}));
  EXPECT_EQ(s["b"]["status"], "failed");
  EXPECT_EQ(s["b"]["exit"], 4);
  EXPECT_EQ(s["c"]["status"], "blocked");
  EXPECT_EQ(s["h"]["status"], "held");
  // The original's exit file format: the code and a newline.
  EXPECT_EQ(d.read("logs/b.exit"), "4\n");
}
