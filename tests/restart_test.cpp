// Restarts and drop-in: `run` killed mid-plan adopts its jobs; the original's state is carried on.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <random>

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
