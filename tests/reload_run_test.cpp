// Reload on edit, `gpuq add` and pause/resume with the real binary (issue 14): an editor's
// rename-over, an edit with errors, add's refusals, pause across a restart, and
// exactly-once under SIGKILL racing reloads.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "gpuq/core/job_fields.h"
#include "gpuq/core/plan.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

struct Queue : PlanFolder {
  Queue() : PlanFolder(2) {
    d.write("quick.sh", "echo \"$GPUQ_JOB_ID\" >> ran.txt\n");
    d.write("slow.sh", "echo \"start $GPUQ_JOB_ID\" >> trace\nexec sleep 300\n");
  }
  std::unique_ptr<Background> start() const {
    return start_gpuq({"run", "--plan", "plan.json", "--poll", "20", "--gpus", "0,1"}, d.path(), env);
  }
  /// An editor's save: the new text to a temporary file, renamed over the plan.
  void save(const std::string& text) const {
    d.write(".plan.json.tmp", text);
    fs::rename(d.path() + "/.plan.json.tmp", d.path() + "/plan.json");
  }
};

}  // namespace

// An editor's rename-over wakes run (no --poll wait: --poll is 20 s and the test waits on
// the new job's own output), the new job starts, and the line says what changed.
TEST(RunReload, AnEditorsRenameOverAddsAJobThatStartsWithoutARestart) {
  Queue q;
  q.d.write("plan.json", R"([{"id": "a", "script": "slow.sh", "gpus": 1}])");
  auto r = q.start();
  ASSERT_TRUE(eventually([&] { return lines_of(q.d.path() + "/trace").size() == 1u; }, kPatience));
  q.save(R"([{"id": "a", "script": "slow.sh", "gpus": 1}, {"id": "eval_c", "script": "quick.sh", "gpus": 1}])");
  ASSERT_TRUE(eventually([&] { return q.d.read("ran.txt") == "eval_c\n"; }, kPatience)) << r->out();
  EXPECT_THAT(r->out(), HasSubstr("plan reloaded: +1 job (eval_c)"));
  EXPECT_EQ(q.d.read("plan.run.plan.json"), q.d.read("plan.json"));  // what status compares with
  Output st = q.gpuq({"status", "--json", "--gpus", "0,1"});
  json doc = json::parse(st.out);
  EXPECT_EQ(doc["run"]["plan_changed"], false);
  EXPECT_TRUE(doc["plan_loaded_at"].is_number());
  EXPECT_EQ(doc["paused"], false);
  // The event log has the reload, for history and the hooks.
  EXPECT_THAT(q.d.read("plan.events.jsonl"), HasSubstr(R"("event":"reload")"));
  r->signal(SIGTERM);
  r->wait(kPatience);
  q.kill_jobs();
}

// An edit with errors: each problem once, the line, status shows it; the fixed file is taken.
TEST(RunReload, AnEditWithErrorsIsRefusedReportedOnceAndShownByStatus) {
  Queue q;
  q.d.write("plan.json", R"([{"id": "a", "script": "slow.sh", "gpus": 1}, {"id": "b", "script": "slow.sh", "gpus": 1, "deps": ["a"]}])");
  auto r = q.start();
  ASSERT_TRUE(eventually([&] { return lines_of(q.d.path() + "/trace").size() == 1u; }, kPatience));
  q.save(R"([{"id": "a", "script": "slow.sh", "gpus": 1}, {"id": "b", "script": "slow.sh", "gpus": 1, "deps": ["zz"]}])");
  ASSERT_TRUE(eventually([&] { return r->out().find("still running the version loaded at") != std::string::npos; },
                         kPatience));
  EXPECT_THAT(r->out(), HasSubstr("the plan on disk has 1 problem; still running the version loaded at"));
  EXPECT_THAT(r->out(), HasSubstr("zz"));
  Output st = q.gpuq({"status", "--gpus", "0,1"});
  EXPECT_EQ(st.status, 0) << st.err;
  EXPECT_THAT(st.out, HasSubstr("the plan on disk has 1 problem; still running the version loaded at"));
  EXPECT_THAT(st.err, HasSubstr("zz"));
  // The same broken text saved again wakes run for another tick: nothing is said again.
  double before = json::parse(q.d.read("plan.run.json"))["tick"].get<double>();
  q.save(R"([{"id": "a", "script": "slow.sh", "gpus": 1}, {"id": "b", "script": "slow.sh", "gpus": 1, "deps": ["zz"]}])");
  ASSERT_TRUE(eventually([&] {
    json j = json::parse(q.d.read("plan.run.json"), nullptr, false);
    return !j.is_discarded() && j["tick"].get<double>() > before;
  }, kPatience));
  EXPECT_EQ(count_of(r->out(), "still running the version loaded at"), 1u) << r->out();
  q.save(R"([{"id": "a", "script": "slow.sh", "gpus": 1}, {"id": "b", "script": "slow.sh", "gpus": 1}])");
  ASSERT_TRUE(eventually([&] { return r->out().find("plan reloaded: 1 changed (b)") != std::string::npos; },
                         kPatience)) << r->out();
  r->signal(SIGTERM);
  r->wait(kPatience);
  q.kill_jobs();
}

TEST(Add, RefusesADuplicateIdOrAnUnknownDepAndLeavesTheFileByteForByte) {
  Queue q;
  const std::string text = "[\n  {\"id\": \"a\", \"script\": \"quick.sh\", \"gpus\": 0}   \n]  \n";
  q.d.write("plan.json", text);
  Output dup = q.gpuq({"add", "--id", "a", "--", "quick.sh"});
  EXPECT_EQ(dup.status, 2);
  EXPECT_THAT(dup.err, HasSubstr("duplicate id"));
  EXPECT_THAT(dup.err, HasSubstr("not added"));
  Output dep = q.gpuq({"add", "--id", "b", "--deps", "a,nope", "--", "quick.sh"});
  EXPECT_EQ(dep.status, 2);
  EXPECT_THAT(dep.err, HasSubstr("nope"));
  EXPECT_EQ(q.d.read("plan.json"), text);
  Output ok = q.gpuq({"add", "--id", "b", "--gpus", "0", "--priority", "5", "--deps", "a", "--est-hours", "0.5",
                      "--", "quick.sh", "--lr", "1e-3"});
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(q.d.read("plan.json"),
            "[\n  {\"id\": \"a\", \"script\": \"quick.sh\", \"gpus\": 0},\n  {\"id\": \"b\", \"script\": \"quick.sh\", "
            "\"gpus\": 0, \"priority\": 5, \"est_hours\": 0.5, \"deps\": [\"a\"], \"args\": [\"--lr\", \"1e-3\"]}   \n]  \n");
  Output v = q.gpuq({"validate"});
  EXPECT_EQ(v.status, 0) << v.out << v.err;
}

// Every field of a job has its flag on `gpuq add` (from the field table, job_fields.h), and the
// job added with them has their values as the plan loader reads them.
TEST(Add, EveryJobFieldHasItsFlagAndTheAddedJobHasItsValues) {
  Queue q;
  q.d.write("plan.json", R"({"jobs": [{"id": "a", "script": "quick.sh", "gpus": 0}]})");
  Output help = q.gpuq({"add", "--help"});
  for (const JobField& field : job_fields()) {
    if (field.name == "id" || field.name == "script" || field.name == "args") continue;
    EXPECT_THAT(help.out, HasSubstr("--" + dashed_name(field.name) + " ")) << field.name;
  }
  Output ok = q.gpuq({"add", "--id", "sweep", "--gpus", "1", "--gpu-mem-gib", "20", "--env", "BATCH=32", "--env",
                      "TAG=x y", "--matrix", "lr=1e-4,3e-4", "--time-limit-hours", "2", "--warn-signal",
                      "B:USR1@90", "--retry-on-timeout", "true", "--max-retries", "0", "--quiet-minutes", "15",
                      "--on-quiet", "kill", "--deps", "after:a", "--", "quick.sh", "--lr"});
  ASSERT_EQ(ok.status, 0) << ok.err;
  PlanLoad load = load_plan(q.d.path() + "/plan.json", {0, 1, 2, 3, 4, 5, 6, 7});
  ASSERT_TRUE(load.plan) << (load.errors.empty() ? "" : load.errors[0]);
  ASSERT_EQ(load.plan->jobs.size(), 3u);  // a, and the sweep's two points
  const Job& j = load.plan->jobs[1];
  EXPECT_EQ(j.gpus, 1);
  EXPECT_EQ(j.gpu_mem_gib, 20.0);
  EXPECT_EQ(j.time_limit_hours, 2.0);
  EXPECT_EQ(j.retry_on_timeout, true);
  EXPECT_EQ(j.max_retries, 0);
  EXPECT_EQ(j.quiet_minutes, 15.0);
  EXPECT_TRUE(j.kill_on_quiet);
  auto env = [&](const std::string& k) {
    for (const auto& [key, value] : j.env)
      if (key == k) return value;
    return std::string("(none)");
  };
  EXPECT_EQ(env("BATCH"), "32");
  EXPECT_EQ(env("TAG"), "x y");
  ASSERT_EQ(j.args.size(), 1u);
  EXPECT_EQ(j.args[0], "--lr");
  // A word an object field cannot take: said, nothing added.
  std::string before = q.d.read("plan.json");
  Output bad = q.gpuq({"add", "--id", "b", "--env", "BATCH", "--", "quick.sh"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.err, HasSubstr("--env takes KEY=VALUE, not \"BATCH\""));
  EXPECT_EQ(q.d.read("plan.json"), before);
}

// `gpuq add` while run goes: the reload takes it, and it runs.
TEST(Add, ARunningRunPicksUpTheAddedJob) {
  Queue q;
  q.d.write("plan.json", R"({"jobs": [{"id": "a", "script": "slow.sh", "gpus": 1}]})");
  auto r = q.start();
  ASSERT_TRUE(eventually([&] { return lines_of(q.d.path() + "/trace").size() == 1u; }, kPatience));
  Output ok = q.gpuq({"add", "--id", "eval", "--gpus", "1", "--", "quick.sh"});
  ASSERT_EQ(ok.status, 0) << ok.err;
  ASSERT_TRUE(eventually([&] { return q.d.read("ran.txt") == "eval\n"; }, kPatience)) << r->out();
  EXPECT_THAT(r->out(), HasSubstr("plan reloaded: +1 job (eval)"));
  r->signal(SIGTERM);
  r->wait(kPatience);
  q.kill_jobs();
}

// pause: nothing starts, across a restart of run; resume: the job starts.
TEST(Pause, APauseSurvivesARestartOfRunAndResumeStartsTheJob) {
  Queue q;
  q.d.write("plan.json", R"([{"id": "a", "script": "quick.sh", "gpus": 1}])");
  Output p = q.gpuq({"pause"});
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("paused"));
  for (int round = 0; round < 2; ++round) {  // the second: a restarted run
    auto r = q.start();
    // Its first tick has been (PLAN.run.json's tick moves past its start) and said it is paused.
    ASSERT_TRUE(eventually([&] { return r->out().find("paused since") != std::string::npos; }, kPatience));
    ASSERT_TRUE(eventually([&] {
      std::string t = q.d.read("plan.run.json");
      if (t.empty()) return false;
      json j = json::parse(t, nullptr, false);
      return !j.is_discarded() && j["tick"].get<double>() > j["started"].get<double>();
    }, kPatience));
    EXPECT_EQ(q.d.read("ran.txt"), "") << "round " << round;
    Output st = q.gpuq({"status", "--gpus", "0,1"});
    EXPECT_THAT(st.out, HasSubstr("paused since"));
    // Paused, a ready job is said to start after resume, and no time is predicted for it.
    EXPECT_THAT(st.out, ::testing::ContainsRegex(
                            "\na +pending +after gpuq resume +paused: ready, starts at the first tick after `gpuq resume`"))
        << st.out;
    EXPECT_THAT(st.out, Not(HasSubstr("starts at the next tick")));
    EXPECT_THAT(st.out, Not(HasSubstr("predicted to finish")));
    json doc = json::parse(q.gpuq({"status", "--json", "--gpus", "0,1"}).out);
    EXPECT_EQ(doc["paused"], true);
    EXPECT_EQ(doc["jobs"][0]["after_resume"], true);
    EXPECT_TRUE(doc["jobs"][0]["predicted_start"].is_null()) << doc.dump();
    EXPECT_TRUE(doc["finish"].is_null()) << doc.dump();
    if (round == 0) {
      r->signal(SIGTERM);
      ASSERT_EQ(r->wait(kPatience).status, 0);
      continue;
    }
    Output res = q.gpuq({"resume"});
    ASSERT_EQ(res.status, 0) << res.err;
    auto done = r->wait(kPatience);
    EXPECT_EQ(done.status, 0) << done.out;
    EXPECT_THAT(done.out, HasSubstr("resumed: jobs start again"));
    EXPECT_EQ(q.d.read("ran.txt"), "a\n");
  }
  std::string events = q.d.read("plan.events.jsonl");
  EXPECT_THAT(events, HasSubstr(R"("event":"pause")"));
  EXPECT_THAT(events, HasSubstr(R"("event":"resume")"));
}

// SIGKILL at random moments while the plan is edited under run (jobs added, priorities
// changed): every job of the final plan runs exactly once, and is logged once.
TEST(RunReload, ExactlyOnceUnderSigkillRacingReloads) {
  TempDir d;
  std::map<std::string, std::string> env = fake_nvidia_smi(d, idle_gpus(4));
  d.write("mark.sh", "echo \"$GPUQ_JOB_ID\" >> \"markers/$GPUQ_JOB_ID\"\nsleep 0.$((RANDOM % 3 + 1))\n");
  fs::create_directories(d.path() + "/markers");
  const uint64_t seed = test_seed(20261201);
  std::printf("%s\n", seed_note(seed).c_str());
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> delay_ms(5, 150);
  int n = 10;
  auto plan_text = [&](int jobs, int round) {
    json plan = json::array();
    for (int i = 0; i < jobs; ++i)
      plan.push_back({{"id", "job" + std::to_string(i)}, {"script", "mark.sh"}, {"gpus", 1},
                      {"priority", (i * 7 + round) % 11}});
    return plan.dump(1);
  };
  d.write("plan.json", plan_text(n, 0));
  for (int round = 1; round <= 15; ++round) {
    auto run = start_gpuq({"run", "--plan", "plan.json", "--poll", "20", "--gpus", "0-3"}, d.path(), env);
    usleep(delay_ms(rng) * 1000);
    n += 3;
    d.write(".plan.tmp", plan_text(n, round));
    fs::rename(d.path() + "/.plan.tmp", d.path() + "/plan.json");
    usleep(delay_ms(rng) * 100);  // the kill lands before, during or after the reload
    run->signal(SIGKILL);
    run->wait(kPatience);
  }
  auto last = start_gpuq({"run", "--plan", "plan.json", "--poll", "1", "--gpus", "0-3"}, d.path(), env)->wait(kPatience);
  ASSERT_EQ(last.status, 0) << last.out << last.err;
  EXPECT_THAT(last.out, HasSubstr("all jobs finished"));
  json state = json::parse(d.read("plan.state.json"));
  std::map<std::string, int> starts;
  for (const std::string& line : lines_of(d.path() + "/plan.events.jsonl")) {
    json e = json::parse(line, nullptr, false);
    if (!e.is_discarded() && e["event"] == "start") ++starts[e["id"]];
  }
  for (int i = 0; i < n; ++i) {
    std::string id = "job" + std::to_string(i);
    EXPECT_EQ(lines_of(d.path() + "/markers/" + id), std::vector<std::string>{id}) << id;
    EXPECT_EQ(state[id]["status"], "done") << id;
    EXPECT_EQ(starts[id], 1) << id;
  }
}
