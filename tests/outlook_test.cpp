// validate's findings, status's reasons and predictions, the JSON schema, SVG (logs: follow_test.cpp).
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuq/core/validate.h"
#include "gpuq/views/reasons.h"
#include "readme_table.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

std::vector<Finding> findings(const std::string& plan_json, std::vector<int> gpus = {0, 1, 2, 3, 4, 5, 6, 7}) {
  Plan plan = plan_of(plan_json, gpus);
  auto yes = [](const std::string&) { return true; };
  return validate_plan(plan, gpus, 0.5, FileTable(yes), yes);
}

std::string only(const std::vector<Finding>& f, bool error) {
  std::string out;
  int n = 0;
  for (const Finding& x : f)
    if (x.error == error) out = x.job + ": " + x.text, ++n;
  EXPECT_EQ(n, 1) << out;
  return out;
}

struct Live : PlanFolder {
  explicit Live(const std::string& smi = idle_gpus(4)) : PlanFolder(smi) { d.write("job.sh", "true\n"); }
  /// `gpuq ARGS --plan plan.json --gpus 0,1,2,3`.
  Output gpuq(std::vector<std::string> args) const {
    args.insert(args.begin() + 1, {"--gpus", "0,1,2,3"});
    return PlanFolder::gpuq(args);
  }
  json status_json() const {
    auto r = gpuq({"status", "--json"});
    EXPECT_EQ(r.status, 0) << r.err;
    return json::parse(r.out);
  }
  std::string why(const std::string& id) const {
    json s = status_json();
    for (auto& j : s["jobs"])
      if (j["id"] == id) return j["why"];
    return "<no job>";
  }
};

}  // namespace

TEST(Validate, ReservationsThatWaitOnEachOtherAreAnError) {
  const char* text = R"({"jobs": [
    {"id": "x", "script": "s", "gpus": 8, "est_hours": 1}, {"id": "y", "script": "s", "gpus": 8, "est_hours": 1}
  ], "reservations": [{"gpus": [0], "jobs": ["x"]}, {"gpus": [1], "jobs": ["y"]}]})";
  auto f = findings(text);
  Plan plan = plan_of(text);
  int errors = 0;
  for (const Finding& x : f)
    if (x.error) {
      ++errors;
      EXPECT_THAT(finding_text(plan, Policy{}, x), HasSubstr("can never start"));
      EXPECT_THAT(finding_text(plan, Policy{}, x), HasSubstr("reservation #"));
    }
  EXPECT_EQ(errors, 2);
}

TEST(Validate, ReservationMemberWaitingOnAJobThatNeedsTheReservedGpus) {
  std::string e;
  for (const Finding& x : findings(R"({"jobs": [
    {"id": "big", "script": "s", "gpus": 8, "est_hours": 1},
    {"id": "eval", "script": "s", "gpus": 1, "est_hours": 1, "deps": ["big"]}
  ], "reservations": [{"gpus": [6, 7], "jobs": ["eval"]}]})"))
    if (x.error && x.job == "eval") e = x.job + ": " + x.text;
  EXPECT_THAT(e, HasSubstr("eval: is in reservation #1 (GPUs [6, 7]) but waits for big, which needs 8 GPUs"));
  EXPECT_THAT(e, HasSubstr("Add big to the reservation"));
}

TEST(Validate, MissingScriptAndUnproducedMissingFile) {
  Plan plan = plan_of(R"([
    {"id": "a", "script": "gone.sh", "est_hours": 1},
    {"id": "b", "script": "ok.sh", "est_hours": 1, "deps": ["file:data/missing.jsonl"]},
    {"id": "c", "script": "ok.sh", "est_hours": 1, "deps": ["file:ck/READY"], "produced_by": "a"}
  ])");
  auto readable = [](const std::string& p) { return p == "ok.sh"; };
  const FileTable none([](const std::string&) { return false; });
  auto f = validate_plan(plan, {0, 1, 2, 3, 4, 5, 6, 7}, 0.5, none, readable);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].job, "a");
  EXPECT_THAT(f[0].text, HasSubstr("1 script is missing or not readable: gone.sh (job 'a')"));
  EXPECT_EQ(f[1].job, "b");
  EXPECT_THAT(f[1].text, HasSubstr("waits for the file data/missing.jsonl, which does not exist and that no job produces"));
}

TEST(Validate, JobWithoutEstimateIsAWarning) {
  std::string w = only(findings(R"([{"id": "a", "script": "s"}, {"id": "b", "script": "s", "est_hours": 2}])"), false);
  EXPECT_THAT(w, HasSubstr("a: has no est_hours"));
}

TEST(Validate, CommandExitStatusesAndStrict) {
  Live q;
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh"}])");
  auto r = q.gpuq({"validate"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("warning: job 'a': has no est_hours"));
  EXPECT_THAT(r.out, HasSubstr("plan.json: 1 job(s), 0 error(s), 1 warning(s)"));
  EXPECT_EQ(q.gpuq({"validate", "--strict"}).status, 1);
  q.d.write("plan.json", R"([{"id": "a", "script": "nope.sh", "est_hours": 1}])");
  r = q.gpuq({"validate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.out, HasSubstr("error: job 'a': 1 script is missing or not readable: nope.sh (job 'a')"));
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh", "est_hours": 1}])");
  EXPECT_EQ(q.gpuq({"validate", "--strict"}).status, 0);
}

// The loader's own warnings (here a reserved GPU outside --gpus) are validate's findings
// too: printed once, in the same form, counted, and failing --strict.
TEST(Validate, TheLoadersWarningsAreCountedAndPrintedOnce) {
  Live q;
  const std::string loader =
      "warning: plan.json: reservation #1: GPUs [6] are not among --gpus [0, 1, 2, 3]; the reservation ignores them\n";
  q.d.write("plan.json", R"({"jobs": [{"id": "a", "script": "job.sh", "gpus": 1}],
                            "reservations": [{"gpus": [1, 6], "jobs": ["a"]}]})");
  auto r = q.gpuq({"validate"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, loader +
                       "warning: job 'a': has no est_hours: simulate and the backfill rule take 1.0; give it an estimate\n"
                       "plan.json: 1 job(s), 0 error(s), 2 warning(s)\n");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(q.gpuq({"validate", "--strict"}).status, 1);
  // The loader's warning alone.
  q.d.write("plan.json", R"({"jobs": [{"id": "a", "script": "job.sh", "gpus": 1, "est_hours": 1}],
                            "reservations": [{"gpus": [1, 6], "jobs": ["a"]}]})");
  r = q.gpuq({"validate"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, loader + "plan.json: 1 job(s), 0 error(s), 1 warning(s)\n");
  EXPECT_EQ(r.err, "");
  auto strict = q.gpuq({"validate", "--strict"});
  EXPECT_EQ(strict.status, 1);
  EXPECT_EQ(strict.out, r.out);
  // The other commands still say it on stderr.
  auto sim = q.gpuq({"simulate"});
  EXPECT_EQ(sim.status, 0);
  EXPECT_THAT(sim.err, HasSubstr("gpuq: " + loader));
}

TEST(StatusWhy, EachReasonIsGiven) {
  Live q("0, 0\n1, 0\n2, 0\n3, 9000\n");  // GPU 3 holds someone else's memory
  q.d.write("plan.json", R"({"jobs": [
    {"id": "runner", "script": "job.sh", "gpus": 2, "priority": 1},
    {"id": "dep_wait", "script": "job.sh", "deps": ["runner"]},
    {"id": "file_wait", "script": "job.sh", "deps": ["file:data/in.jsonl"]},
    {"id": "wide", "script": "job.sh", "gpus": 2, "priority": 2},
    {"id": "long", "script": "job.sh", "gpus": 1, "priority": 3, "est_hours": 5},
    {"id": "held_one", "script": "job.sh"},
    {"id": "broken", "script": "job.sh"},
    {"id": "child", "script": "job.sh", "deps": ["broken"]},
    {"id": "member", "script": "job.sh", "gpus": 1, "deps": ["runner"]}
  ], "reservations": [{"gpus": [2], "jobs": ["member"]}]})");
  Background runner({"sleep", "3600"}, q.d.path());  // alive for the whole test (killed at its end)
  q.d.write("plan.state.json", R"({"runner": {"status": "running", "gpus": [0, 1], "pid": )" +
                                   std::to_string(runner.pid()) + R"(, "start": 1.0, "attempts": 0},
    "held_one": {"status": "held"},
    "broken": {"status": "failed", "exit": 3, "attempts": 2, "end": 1.0, "start": 0.5, "gpus": [0]}})");
  EXPECT_EQ(q.why("dep_wait"), "waits for runner to be done");
  EXPECT_EQ(q.why("file_wait"), "waits for the file data/in.jsonl");
  // GPUs 0,1 run `runner`, 2 is reserved for `member`, 3 holds foreign memory.
  EXPECT_EQ(q.why("wide"), "needs 2 GPUs, 0 free to it; GPUs [2] are closed by reservation #1; GPU 3 busy: 9000 MiB "
                           "in use by another process");
  EXPECT_EQ(q.why("long"), "held back by the backfill limit: est 5h is over --backfill-max-hours 0.5 while wide waits for GPUs");
  EXPECT_EQ(q.why("held_one"), "held by hand; `gpuq retry held_one` releases it");
  EXPECT_THAT(q.why("broken"), HasSubstr("failed (exit 3), automatic retries used up"));
  EXPECT_EQ(q.why("child"), "blocked: its dep broken failed");
  auto text = q.gpuq({"status"});
  EXPECT_THAT(text.out, HasSubstr("running  runner "));  // the original's rows first
  EXPECT_THAT(text.out, HasSubstr("wide"));
  EXPECT_THAT(text.out, HasSubstr("needs 2 GPUs, 0 free"));
}

TEST(StatusPredict, NothingRunningPredictsWhatSimulatePrints) {
  Live q;
  std::string plan = R"({"jobs": [
    {"id": "prep", "script": "job.sh", "gpus": 0, "est_hours": 0.5},
    {"id": "train", "script": "job.sh", "gpus": 2, "est_hours": 3, "deps": ["prep"]},
    {"id": "eval_mid", "script": "job.sh", "gpus": 1, "est_hours": 0.5, "deps": ["file:ck/mid"], "produced_by": "train",
     "produced_at_frac": 0.5},
    {"id": "sweep", "script": "job.sh", "gpus": 1, "est_hours": 0.25, "deps": ["after:prep"]},
    {"id": "wide", "script": "job.sh", "gpus": 4, "est_hours": 2, "priority": 10}
  ], "reservations": [{"gpus": [3], "jobs": ["eval_mid"]}]})";
  q.d.write("plan.json", plan);
  auto sim = q.gpuq({"simulate", "--all"});
  auto live = q.gpuq({"simulate", "--all", "--from-state"});
  ASSERT_EQ(sim.status, 0) << sim.err;
  EXPECT_EQ(live.status, 0) << live.err;
  EXPECT_EQ(live.out, sim.out);
  // A state with jobs pending only, as a fresh queue has, predicts the same.
  q.d.write("plan.state.json", R"({"prep": {"status": "pending"}, "wide": {"status": "pending"}})");
  EXPECT_EQ(q.gpuq({"simulate", "--all", "--from-state"}).out, sim.out);
}

TEST(StatusPredict, RunningJobsFinishTheirEstimateAndOverdueOnesAreMarked) {
  Live q;
  q.d.write("plan.json", R"([
    {"id": "a", "script": "job.sh", "gpus": 1, "est_hours": 2},
    {"id": "late", "script": "job.sh", "gpus": 1, "est_hours": 1},
    {"id": "b", "script": "job.sh", "gpus": 1, "est_hours": 1, "deps": ["a"]}
  ])");
  // Alive for the whole test (killed at its end): a job that ended would not be predicted.
  Background pa({"sleep", "3600"}, q.d.path()), pl({"sleep", "3600"}, q.d.path());
  double now = static_cast<double>(time(nullptr));
  q.d.write("plan.state.json", fmt::format(R"({{"a": {{"status": "running", "gpus": [0], "pid": {}, "start": {}}},
      "late": {{"status": "running", "gpus": [1], "pid": {}, "start": {}}}}})",
                                           pa.pid(), now - 1800, pl.pid(), now - 7200));
  json s = q.status_json();
  auto job = [&](const std::string& id) {
    for (auto& j : s["jobs"])
      if (j["id"] == id) return j;
    return json();
  };
  // a ran 0.5h of 2h: 1.5h left; b starts then and runs 1h.
  EXPECT_NEAR(job("a")["predicted_finish"].get<double>() - now, 1.5 * 3600, 60);
  EXPECT_NEAR(job("b")["predicted_start"].get<double>() - now, 1.5 * 3600, 60);
  EXPECT_NEAR(s["finish"].get<double>() - now, 2.5 * 3600, 60);
  EXPECT_TRUE(job("late")["overdue"].get<bool>());
  EXPECT_THAT(job("late")["why"].get<std::string>(), HasSubstr("past its estimate (2.0h run, est 1.0h)"));
  EXPECT_FALSE(job("a")["overdue"].get<bool>());
  auto text = q.gpuq({"status"});
  EXPECT_THAT(text.out, HasSubstr("the plan is predicted to finish ~"));
  auto from = q.gpuq({"simulate", "--all", "--from-state"});
  EXPECT_THAT(from.out, HasSubstr(" -0.50h ->   1.50h gpus=[0]      a\n"));
  EXPECT_THAT(from.out, HasSubstr("  1.50h ->   2.50h gpus=[0]      b\n"));
}

TEST(Json, StatusSchemaIsWhatTheReadmeSays) {
  Live q;
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh", "est_hours": 2}, {"id": "b", "script": "job.sh", "deps": ["a"]}])");
  q.d.write("plan.state.json", R"({"a": {"status": "done", "gpus": [0], "pid": 5, "start": 100.0, "end": 3700.0,
                                        "exit": 0, "attempts": 0}})");
  json s = q.status_json();
  // The keys are those of doc/commands.md's table (the user's reference), read from it: the
  // rows up to `jobs` are the document's, the rows after it each job's. A row may name several
  // keys ("`start`, `end`").
  std::set<std::string> top, per_job, optional_job;  // a row whose meaning starts "only for": optional
  bool after_jobs = false;
  for (const auto& row : gpuq::test::readme_rows(EXAMPLES "/../doc/commands.md", "### `status --json`", {"key", "type", "meaning"}))
    for (size_t at = 0; (at = row[0].find('`', at)) != std::string::npos;) {
      size_t end = row[0].find('`', at + 1);
      std::string key = row[0].substr(at + 1, end - at - 1);
      bool only = row[2].rfind("only ", 0) == 0;
      (after_jobs ? (only ? optional_job : per_job) : top).insert(key);
      after_jobs = after_jobs || key == "jobs";
      at = end + 1;
    }
  ASSERT_GT(top.size(), 5u) << "the table of doc/commands.md was not read";
  ASSERT_GT(per_job.size(), 10u);
  std::set<std::string> got_top, got_job;
  for (auto& [k, v] : s.items()) got_top.insert(k);
  EXPECT_EQ(got_top, top);
  EXPECT_EQ(s["counts"]["done"], 1);
  ASSERT_EQ(s["jobs"].size(), 2u);
  const json& a = s["jobs"][0];
  for (auto& [k, v] : a.items())
    if (!optional_job.count(k)) got_job.insert(k);
  EXPECT_EQ(got_job, per_job);
  EXPECT_EQ(a["id"], "a");
  EXPECT_EQ(a["status"], "done");
  EXPECT_EQ(a["gpus"], json({0}));
  EXPECT_EQ(a["exit"], 0);
  EXPECT_EQ(a["outcome"], "done");
  EXPECT_EQ(a["elapsed"], 3600.0);
  EXPECT_EQ(a["est"], 2.0);
  EXPECT_TRUE(a["predicted_start"].is_null());
  EXPECT_TRUE(a["stale"].is_null());
  const json& b = s["jobs"][1];
  EXPECT_EQ(b["status"], "pending");
  EXPECT_TRUE(b["exit"].is_null());
  EXPECT_TRUE(b["outcome"].is_null());
  EXPECT_TRUE(b["predicted_start"].is_number());
  EXPECT_EQ(b["why"], "ready: starts when `gpuq run` is started");  // no run holds the plan
}

TEST(Json, SimulateSchema) {
  Live q;
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 2, "est_hours": 2}, {"id": "b", "script": "job.sh", "deps": ["a"]}])");
  auto r = q.gpuq({"simulate", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  json s = json::parse(r.out);
  EXPECT_EQ(s["makespan_hours"], 3.0);
  EXPECT_NEAR(s["utilization"].get<double>(), 5.0 / 12, 1e-9);  // (2*2 + 1*1) / (4 GPUs * 3h)
  EXPECT_EQ(s["jobs"][1]["predicted_start"], 2.0);
  EXPECT_EQ(s["jobs"][0]["gpus"], json({0, 1}));
  EXPECT_EQ(s["jobs"][0]["status"], "predicted");
}

TEST(Svg, SimulateAndStatusWriteWellFormedSvg) {
  Live q;
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 2, "est_hours": 1},
                             {"id": "b", "script": "job.sh", "gpus": 0, "est_hours": 2},
                             {"id": "c", "script": "job.sh", "gpus": 0, "est_hours": 1}])");
  ASSERT_EQ(q.gpuq({"simulate", "--svg", "sim.svg"}).status, 0);
  q.d.write("plan.state.json", R"({"a": {"status": "done", "gpus": [0, 1], "pid": 5, "start": 100.0, "end": 3700.0, "exit": 0}})");
  ASSERT_EQ(q.gpuq({"status", "--svg", "status.svg"}).status, 0);
  for (const char* f : {"sim.svg", "status.svg"}) {
    auto r = run({"python3", "-c", "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
                                   "print(d.documentElement.tagName, len(d.getElementsByTagName('rect')))",
                  q.d.path() + "/" + f});
    EXPECT_EQ(r.status, 0) << f << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("svg ")) << f;
  }
  std::string svg = q.d.read("sim.svg");
  EXPECT_THAT(svg, HasSubstr(">GPU 0<"));
  // b and c overlap: two rows for 0-GPU jobs, each "no GPU" (issue 43: "no GPU 2" read as a GPU)
  EXPECT_EQ(count_of(svg, ">no GPU<"), 2u);
  EXPECT_THAT(svg, Not(HasSubstr(">no GPU 2<")));
  EXPECT_THAT(svg, HasSubstr("hours"));
  EXPECT_THAT(q.d.read("status.svg"), HasSubstr(">now<"));
  EXPECT_LT(q.d.read("status.svg").size(), 20000u);  // a time axis of a few ticks, even over a long past
}

TEST(Watch, RedrawsUntilInterrupted) {
  Live q;
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh"}])");
  auto w = start_gpuq({"status", "--plan", "plan.json", "--gpus", "0,1,2,3", "--watch", "0.2"}, q.d.path(), q.env);
  ASSERT_TRUE(eventually([&] {
    std::string out = w->out();
    size_t first = out.find("{'pending': 1}");
    return first != std::string::npos && out.find("{'pending': 1}", first + 1) != std::string::npos;
  }, kPatience));
  w->signal(SIGINT);
  EXPECT_EQ(w->wait(kPatience).status, 128 + SIGINT);
}

TEST(StatusWhy, TextExplainsItsFirstRowsAsJsonExplainsEveryJob) {
  // Without --all, status works out reasons only for the rows it prints; they must be the same reasons.
  Live q;
  std::string jobs;
  for (int i = 0; i < 45; ++i) {
    std::string deps = i % 3 == 1 ? fmt::format(R"(, "deps": ["j{}"])", i - 1)
                       : i % 3 == 2 ? fmt::format(R"(, "deps": ["file:data/f{}"])", i) : "";
    jobs += fmt::format(R"({}{{"id": "j{}", "script": "job.sh", "gpus": {}, "priority": {}, "est_hours": {}{}}})",
                        i ? ", " : "", i, i % 4 == 0 ? 2 : 1, i % 7, i % 5 == 0 ? 3 : 0.2, deps);
  }
  q.d.write("plan.json", "[" + jobs + "]");
  q.d.write("plan.state.json", R"({"j3": {"status": "held"}, "j6": {"status": "failed", "exit": 1, "attempts": 2, "end": 1.0}})");
  json s = q.status_json();
  std::map<std::string, std::string> why;
  for (auto& j : s["jobs"]) why[j["id"]] = j["why"];

  auto rows = [&](const std::string& text) {
    std::vector<std::pair<std::string, std::string>> out;
    bool in = false;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("job ", 0) == 0 && line.find("predicted") != std::string::npos) {
        in = true;
        continue;
      }
      if (!in || line.rfind("... ", 0) == 0 || line.rfind("the plan", 0) == 0) continue;
      std::string id = line.substr(0, line.find(' '));
      out.push_back({id, line.size() > 81 ? line.substr(81) : ""});
    }
    return out;
  };
  auto text = q.gpuq({"status"});
  ASSERT_EQ(text.status, 0) << text.err;
  auto shown = rows(text.out);
  ASSERT_EQ(shown.size(), 30u);
  int with_reason = 0, from_tick = 0;
  for (auto& [id, text_why] : shown) {
    EXPECT_EQ(text_why, why[id]) << id;
    with_reason += !text_why.empty();
    from_tick += text_why.rfind("ready", 0) == 0 || text_why.rfind("needs", 0) == 0;
  }
  EXPECT_GT(with_reason, 10);
  EXPECT_GT(from_tick, 2);  // reasons that need the explained tick are among them
  auto every = rows(q.gpuq({"status", "--all"}).out);
  EXPECT_EQ(every.size(), 45u);
  for (auto& [id, text_why] : every) EXPECT_EQ(text_why, why[id]) << id;
}

// status asks nvidia-smi while it reads the plan and the state; a damaged state is reported at
// once, not after nvidia-smi (here one that hangs far past gpuq's 30 s timeout) has answered.
TEST(StatusErrors, ADamagedStateIsReportedWithoutWaitingForNvidiaSmi) {
  Live q;
  q.d.write("nvidia-smi", "#!/bin/sh\necho $$ > smi.pid.tmp && mv smi.pid.tmp smi.pid\nexec sleep 120\n", 0755);
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh"}])");
  q.d.write("plan.state.json", "{\"a\": {\"status\": ");
  std::vector<std::string> args{"status", "--plan", "plan.json", "--gpus", "0,1,2,3"};
  auto r = start_gpuq(args, q.d.path(), q.env)->wait(kPatience);
  // No race with a clock: a status that waited for nvidia-smi would have had to kill it
  // (at its 30 s timeout) before it could end. So when status is done, nvidia-smi is either
  // not started yet or still sleeping; either way it is stopped here, not left to sleep.
  std::string pid = q.d.read("smi.pid");
  bool smi_alive = pid.empty() || pid_alive(std::stoll(pid));
  if (eventually([&] { return !q.d.read("smi.pid").empty(); }, 2.0)) ::kill(std::stoi(q.d.read("smi.pid")), SIGKILL);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(smi_alive) << "status waited for nvidia-smi, which it killed at its timeout";
  EXPECT_THAT(r.err, HasSubstr("plan.state.json: line 1"));
  EXPECT_THAT(r.err, HasSubstr("will not overwrite it"));
}

// Issue 25, point 10: one round of validate shows everything: the cycle with the other errors,
// and the fields gpuq does not read with them (errors under --strict). Before, the cycle came
// only once the other errors were fixed, and the unknown field once every error was.
TEST(Validate, OneRoundShowsTheCycleAndTheWarningsWithTheOtherErrors) {
  Live q;
  q.d.write("plan.json", R"([
    {"id": "a", "script": "job.sh", "deps": ["c"], "est_hours": 1},
    {"id": "b", "script": "job.sh", "deps": ["a", "ghost"], "est_hours": 1, "owner": "me"},
    {"id": "c", "script": "job.sh", "deps": ["b"], "est_hours": -1}
  ])");
  auto r = q.gpuq({"validate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("is not valid (3 problems)"));
  EXPECT_THAT(r.err, HasSubstr("\"est_hours\" must not be negative"));
  EXPECT_THAT(r.err, HasSubstr("dep \"ghost\" names no job of the plan"));
  EXPECT_THAT(r.err, HasSubstr("dependency cycle: a -> c -> b -> a"));
  EXPECT_THAT(r.err, HasSubstr("and 1 warning:\n  warning: plan.json: \"owner\" in 1 job(s) (b) is not a field gpuq reads"));
  auto strict = q.gpuq({"validate", "--strict"});
  EXPECT_THAT(strict.err, HasSubstr("is not valid (4 problems)"));
  EXPECT_THAT(strict.err, Not(HasSubstr("warning")));
  // The other commands name the unknown field with the errors too.
  auto sim = q.gpuq({"simulate"});
  EXPECT_EQ(sim.status, 2);
  EXPECT_THAT(sim.err, HasSubstr("dependency cycle: a -> c -> b -> a"));
  EXPECT_THAT(sim.err, HasSubstr("gpuq: warning: plan.json: \"owner\" in 1 job(s)"));
}
