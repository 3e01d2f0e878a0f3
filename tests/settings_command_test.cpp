// Settings kept with the plan, with the built binary: every command reads the plan's
// "settings", a flag wins for its command, `status` and `simulate --from-state` predict with
// the settings of the `gpuq run` that holds the plan, `gpuq settings` says where each came
// from, and a bad setting is a load error.
#include <sched.h>
#include <signal.h>
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

/// Three 1-GPU jobs of an hour, and a 2-GPU one after the first.
const std::string kJobs = R"([{"id": "a", "script": "ok.sh"}, {"id": "b", "script": "ok.sh"},
                               {"id": "c", "script": "ok.sh"}, {"id": "d", "script": "ok.sh", "gpus": 2, "deps": ["a"]}])";

std::string plan_with(const std::string& settings, const std::string& jobs = kJobs) {
  return R"({"settings": )" + settings + R"(, "jobs": )" + jobs + "}";
}

/// `simulate --json` of the plan file `plan` with `flags`, without the plan's name.
json simulated(const PlanFolder& q, const std::string& plan, std::vector<std::string> flags = {}) {
  flags.insert(flags.begin(), {"simulate", "--json"});
  Output r = q.gpuq(flags, plan);
  EXPECT_EQ(r.status, 0) << r.err;
  json doc = json::parse(r.out);
  doc.erase("plan");
  return doc;
}

/// The job `id` of a `status --json` or `simulate --json` document.
json job_of(const json& doc, const std::string& id) {
  for (const json& j : doc["jobs"])
    if (j["id"] == id) return j;
  ADD_FAILURE() << "no job " << id << " in " << doc.dump();
  return json::object();
}

}  // namespace

// simulate and validate take the node's GPUs from the plan: the same as --gpus on a plan
// without settings, and not the default.
TEST(PlanSettings, SimulateAndValidateTakeTheirGpus) {
  PlanFolder q(8);
  q.d.write("ok.sh", "true\n");
  q.d.write("with.json", plan_with(R"({"gpus": "0-1"})"));
  q.d.write("plain.json", plan_with("{}"));
  json with = simulated(q, "with.json");
  EXPECT_EQ(with, simulated(q, "plain.json", {"--gpus", "0-1"}));
  EXPECT_NE(with, simulated(q, "plain.json"));
  q.d.write("wide.json", plan_with(R"({"gpus": "0-1"})", R"([{"id": "w", "script": "ok.sh", "gpus": 3}])"));
  Output v = q.gpuq({"validate"}, "wide.json");
  EXPECT_EQ(v.status, 2);
  EXPECT_THAT(v.err, HasSubstr(R"(job 'w': needs 3 GPUs but the plan's "settings" "gpus" gives 2 ([0, 1]))"));
  EXPECT_EQ(q.gpuq({"validate", "--gpus", "0-3"}, "wide.json").status, 0);
}

// run, status, logs, history, retry, hold, pause, resume, add and settings all find the
// state, the logs and the event log in the plan's state_dir, and run keeps its retries.
TEST(PlanSettings, EveryCommandWorksInTheirStateDir) {
  PlanFolder q(8);
  q.d.write("ok.sh", "echo hello from $GPUQ_JOB_ID\n");
  q.d.write("bad.sh", "exit 3\n");
  q.d.write("plan.json", plan_with(R"({"state_dir": "st", "gpus": "0-1", "max_retries": 0, "poll": 1})",
                                   R"([{"id": "ok", "script": "ok.sh", "est_hours": 0.001},
                                       {"id": "bad", "script": "bad.sh", "est_hours": 0.001}])"));
  auto run = start_gpuq({"run", "--plan", "plan.json"}, q.d.path(), q.env);
  Output ran = run->wait(kPatience);  // max_retries 0: run ends once bad failed (the default would retry it)
  ASSERT_NE(ran.status, -1) << run->out() << run->err();
  EXPECT_FALSE(fs::exists(q.d.path() + "/plan.state.json"));
  json state = q.state("st/plan.state.json");
  EXPECT_EQ(state["ok"]["status"], "done");
  EXPECT_EQ(state["bad"]["status"], "failed");
  EXPECT_EQ(state["bad"]["attempts"], 0);
  EXPECT_THAT(state["ok"]["gpus"][0].get<int>(), ::testing::Le(1));
  json info = json::parse(q.d.read("st/plan.run.json"));
  EXPECT_EQ(info["settings"]["gpus"], "0-1");
  EXPECT_EQ(info["settings"]["max_retries"], 0);

  json st = json::parse(q.gpuq({"status", "--json"}).out);
  EXPECT_EQ(st["counts"]["done"], 1);
  EXPECT_EQ(st["settings"]["state_dir"]["from"], "plan");
  EXPECT_THAT(q.gpuq({"logs", "ok"}).out, HasSubstr("hello from ok"));
  EXPECT_THAT(q.gpuq({"history"}).out, HasSubstr("bad"));
  EXPECT_EQ(q.gpuq({"hold", "bad"}).status, 0);
  EXPECT_EQ(q.state("st/plan.state.json")["bad"]["status"], "held");
  EXPECT_EQ(q.gpuq({"retry", "bad"}).status, 0);
  EXPECT_EQ(q.state("st/plan.state.json")["bad"]["status"], "pending");
  EXPECT_EQ(q.gpuq({"pause"}).status, 0);
  EXPECT_TRUE(fs::exists(q.d.path() + "/st/plan.paused"));
  EXPECT_EQ(q.gpuq({"resume"}).status, 0);
  EXPECT_FALSE(fs::exists(q.d.path() + "/st/plan.paused"));
  Output add = q.gpuq({"add", "--id", "wide", "--gpus", "3", "--", "ok.sh"});
  EXPECT_EQ(add.status, 2);
  EXPECT_THAT(add.err, HasSubstr(R"(needs 3 GPUs but the plan's "settings" "gpus" gives 2)"));
  EXPECT_EQ(q.gpuq({"add", "--id", "two", "--gpus", "2", "--", "ok.sh"}).status, 0);
  EXPECT_THAT(q.gpuq({"settings"}).out, HasSubstr("max_retries          0                          plan"));
  EXPECT_FALSE(fs::exists(q.d.path() + "/plan.state.json"));
}

// gpus reads its probe from the plan; an environment variable beats the plan.
TEST(PlanSettings, GpusTakesTheirProbe) {
  PlanFolder q(8);
  q.d.write("three.txt", idle_gpus(3));
  q.d.write("three-smi", "#!/bin/sh\ncat \"$(dirname \"$0\")/three.txt\"\n", 0755);
  q.d.write("plan.json", plan_with(R"({"gpu_probe": "nvidia-smi", "nvidia_smi": ")" + q.d.path() + R"(/three-smi"})"));
  auto count = [](const Output& r) { return r.status == 0 ? json::parse(r.out)["gpus"].size() : 0u; };
  EXPECT_EQ(count(run_gpuq({"gpus", "--plan", "plan.json", "--json"}, q.d.path())), 3u);
  EXPECT_EQ(count(q.gpuq({"gpus", "--json"})), 8u);  // $GPUQ_NVIDIA_SMI
}

// A flag overrides the plan's setting for its command only.
TEST(PlanSettings, AFlagWinsForItsCommand) {
  PlanFolder q(8);
  q.d.write("ok.sh", "true\n");
  q.d.write("with.json", plan_with(R"({"gpus": "0-1"})"));
  q.d.write("plain.json", plan_with("{}"));
  EXPECT_EQ(simulated(q, "with.json", {"--gpus", "0-3"}), simulated(q, "plain.json", {"--gpus", "0-3"}));
  EXPECT_EQ(simulated(q, "with.json"), simulated(q, "plain.json", {"--gpus", "0-1"}));  // the next command: the plan's
  // run: --max-retries 1 over the plan's 0 (and the plan's retry_after 0, so the retry is at once).
  q.d.write("bad.sh", "exit 3\n");
  q.d.write("plan.json", plan_with(R"({"max_retries": 0, "retry_after": 0, "poll": 1})",
                                   R"([{"id": "bad", "script": "bad.sh", "est_hours": 0.001}])"));
  auto run = start_gpuq({"run", "--plan", "plan.json", "--max-retries", "1"}, q.d.path(), q.env);
  ASSERT_NE(run->wait(kPatience).status, -1) << run->out() << run->err();
  EXPECT_EQ(q.state()["bad"]["attempts"], 1);
  EXPECT_THAT(run->out(), HasSubstr("auto-retry bad"));
}

// The issue's case: `gpuq run --gpus 0-3`, then `gpuq status` in another pane without the
// flag. With 8 GPUs on the node, status used to predict a job that waits for GPUs as
// starting "at the next tick"; it predicts with the run's 4 GPUs, as status --gpus 0-3 does.
TEST(StatusWithARun, PredictsWithTheRunsGpusWithoutTheFlag) {
  PlanFolder q(8);
  q.d.write("slow.sh", "exec sleep 300\n");
  q.d.write("plan.json", R"([{"id": "a", "script": "slow.sh", "gpus": 2, "est_hours": 0.05},
                            {"id": "b", "script": "slow.sh", "gpus": 2, "est_hours": 0.1},
                            {"id": "c", "script": "slow.sh", "gpus": 2, "est_hours": 0.01}])");
  auto run = start_gpuq({"run", "--plan", "plan.json", "--gpus", "0-3", "--poll", "1"}, q.d.path(), q.env);
  ASSERT_TRUE(eventually([&] {
    json s = q.state();
    return s.contains("a") && s["a"]["status"] == "running" && s.contains("b") && s["b"]["status"] == "running";
  }, kPatience)) << run->out() << run->err();

  json plain = json::parse(q.gpuq({"status", "--json"}).out);
  json given = json::parse(q.gpuq({"status", "--json", "--gpus", "0-3"}).out);
  json c = job_of(plain, "c");
  EXPECT_EQ(c["status"], "pending");
  EXPECT_THAT(c["why"].get<std::string>(), Not(HasSubstr("next tick")));
  // c starts when the first of a and b ends, as with the flag repeated by hand.
  double first_end = std::min(job_of(plain, "a")["predicted_finish"].get<double>(),
                              job_of(plain, "b")["predicted_finish"].get<double>());
  EXPECT_GE(c["predicted_start"].get<double>(), first_end - 1);
  EXPECT_NEAR(c["predicted_start"].get<double>(), job_of(given, "c")["predicted_start"].get<double>(), 2.0);
  EXPECT_EQ(c["why"], job_of(given, "c")["why"]);
  EXPECT_EQ(plain["settings"]["gpus"]["value"], "0-3");
  EXPECT_EQ(plain["settings"]["gpus"]["from"], "run");
  EXPECT_EQ(given["settings"]["gpus"]["from"], "flag");

  // The text says where the GPUs came from; a flag that differs wins, and is said.
  EXPECT_THAT(q.gpuq({"status"}).out, HasSubstr("predicting with the run's --gpus 0-3, --poll 1 (plan.run.json)"));
  Output other = q.gpuq({"status", "--json", "--gpus", "0-7"});
  EXPECT_THAT(job_of(json::parse(other.out), "c")["why"].get<std::string>(), HasSubstr("next tick"));
  EXPECT_THAT(q.gpuq({"status", "--gpus", "0-7"}).out, HasSubstr("--gpus 0-7 given here; the run uses 0-3"));

  // simulate --from-state predicts with them too.
  Output sim = q.gpuq({"simulate", "--from-state", "--json"});
  ASSERT_EQ(sim.status, 0) << sim.err;
  json sim_given = json::parse(q.gpuq({"simulate", "--from-state", "--json", "--gpus", "0-3"}).out);
  EXPECT_NEAR(job_of(json::parse(sim.out), "c")["predicted_start"].get<double>(),
              job_of(sim_given, "c")["predicted_start"].get<double>(), 2.0 / 3600);
  EXPECT_GT(job_of(json::parse(sim.out), "c")["predicted_start"].get<double>(), 0.0);
  EXPECT_THAT(sim.err, HasSubstr("gpuq: predicting with the run's --gpus 0-3, --pairs auto, --poll 1 (plan.run.json)"));

  EXPECT_THAT(q.gpuq({"settings"}).out, HasSubstr("gpus                 0-3                        run"));
  run->signal(SIGTERM);
  run->wait(kPatience);
  q.kill_jobs();
}

// The plan's settings edited while a run goes on: the run says it keeps its own, and status
// says which the plan has that the run does not use.
TEST(StatusWithARun, SaysWhenThePlansSettingsDifferFromTheRuns) {
  PlanFolder q(2);
  q.d.write("slow.sh", "exec sleep 300\n");
  std::string jobs = R"([{"id": "a", "script": "slow.sh", "est_hours": 0.05}])";
  q.d.write("plan.json", R"({"jobs": )" + jobs + "}");
  auto run = start_gpuq({"run", "--plan", "plan.json", "--gpus", "0,1", "--poll", "1"}, q.d.path(), q.env);
  ASSERT_TRUE(eventually([&] { json s = q.state(); return s.contains("a") && s["a"]["status"] == "running"; },
                         kPatience)) << run->err();
  q.d.write("plan.json", plan_with(R"({"max_retries": 5})", jobs));
  ASSERT_TRUE(eventually([&] { return run->out().find("the plan's \"settings\" changed") != std::string::npos; },
                         kPatience)) << run->out() << run->err();
  EXPECT_THAT(run->out(), HasSubstr("changed (max_retries 5): this run keeps the settings it started with"));
  Output st = q.gpuq({"status"});
  EXPECT_THAT(st.out, HasSubstr("predicting with the run's --gpus 0,1, --max-retries 2, --poll 1 (plan.run.json)"));
  EXPECT_THAT(st.out, HasSubstr(R"(the plan's "settings" say max_retries 5: the run keeps the settings it started with)"));
  json s = json::parse(q.gpuq({"settings", "--json"}).out);
  EXPECT_EQ(s["settings"]["max_retries"]["value"], 2);
  EXPECT_EQ(s["settings"]["max_retries"]["from"], "run");
  EXPECT_EQ(s["settings"]["max_retries"]["plan"], 5);
  run->signal(SIGTERM);
  run->wait(kPatience);
  q.kill_jobs();
}

// Each source, as `gpuq settings` names it: flag > env > plan > default.
TEST(SettingsCommand, SaysWhereEachValueCameFrom) {
  PlanFolder q(2);
  q.d.write("plan.json", plan_with(R"({"max_retries": 0, "poll": 5, "pairs": "original"})"));
  std::map<std::string, std::string> env = q.env;
  env["GPUQ_STATE_DIR"] = q.d.path() + "/envstate";
  Output text = run_gpuq({"settings", "--plan", "plan.json", "--poll", "7"}, q.d.path(), env);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("max_retries          0                          plan     --max-retries"));
  EXPECT_THAT(text.out, HasSubstr("poll                 7                          flag     --poll                the plan says 5"));
  EXPECT_THAT(text.out, HasSubstr("backfill_max_hours   0.5                        default  --backfill-max-hours"));
  EXPECT_THAT(text.out, HasSubstr("state_dir            " + q.d.path() + "/envstate"));
  EXPECT_THAT(text.out, HasSubstr("$GPUQ_STATE_DIR"));
  json doc = json::parse(run_gpuq({"settings", "--plan", "plan.json", "--poll", "7", "--json"}, q.d.path(), env).out);
  const json& s = doc["settings"];
  EXPECT_EQ(s["max_retries"], json({{"value", 0}, {"from", "plan"}, {"flag", "--max-retries"}}));
  EXPECT_EQ(s["poll"]["value"], 7.0);
  EXPECT_EQ(s["poll"]["from"], "flag");
  EXPECT_EQ(s["poll"]["plan"], 5.0);
  EXPECT_EQ(s["pairs"]["value"], "original");
  EXPECT_EQ(s["state_dir"]["from"], "env");
  EXPECT_EQ(s["gpus"]["from"], "default");
  EXPECT_EQ(s["nvidia_smi"]["from"], "env");  // the tests' fake, $GPUQ_NVIDIA_SMI
  EXPECT_TRUE(doc["run_info"].is_null());
  // Every setting of `gpuq settings` has its flag, and every flag is taken.
  Output help = run_gpuq({"settings", "--help"});
  for (auto& [name, v] : s.items()) EXPECT_THAT(help.out, HasSubstr(v["flag"].get<std::string>())) << name;
}

// A bad setting stops every command that reads the plan, naming the file and the setting.
TEST(SettingsErrors, EveryCommandRefusesABadSetting) {
  PlanFolder q(2);
  q.d.write("ok.sh", "true\n");
  q.d.write("plan.json", plan_with(R"({"max_retires": 1})"));
  const std::string said = R"(plan.json: "settings": "max_retires" is not a setting; did you mean "max_retries"?)";
  std::vector<std::vector<std::string>> commands = {
      {"run"}, {"status"}, {"simulate"}, {"validate"}, {"settings"}, {"pause"}, {"resume"},
      {"retry", "a"}, {"hold", "a"}, {"history"}, {"add", "--id", "x", "--", "ok.sh"}};
  for (const auto& cmd : commands) {
    Output r = q.gpuq(cmd);
    EXPECT_EQ(r.status, 2) << cmd[0] << ": " << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(said)) << cmd[0];
  }
  EXPECT_FALSE(fs::exists(q.d.path() + "/plan.paused"));
  // Checks only the CLI can make (a hook's event kinds) are load errors all the same.
  q.d.write("plan.json", plan_with(R"({"on_event": ["finished:notify.sh"]})"));
  Output r = q.gpuq({"run"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr(R"(plan.json: "settings": "on_event": 'finished:notify.sh': "finished" is not an event kind)"));
  // A bad value, with what was expected.
  q.d.write("plan.json", plan_with(R"({"gpus": "0-x", "poll": "fast"})"));
  r = q.gpuq({"simulate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("(2 problems)"));
  EXPECT_THAT(r.err, HasSubstr(R"(plan.json: "settings": "poll": must be a number, not a string ("fast"))"));
}

// `gpuq settings` says what run takes of this machine where node_cpus and node_mem_gib are 0 (the
// machine's less a reserve: the numbers, not "0"), and what would hold a job's memory here.
TEST(PlanSettings, SettingsShowTheMachinesCoresMemoryAndWhatHoldsAJobsMemory) {
  PlanFolder q(8);
  q.plan(kJobs);
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  int cores = CPU_COUNT(&set);  // this process's, as gpuq's (its child's) own
  std::string allowed;
  for (const std::string& line : lines_of("/proc/self/status"))
    if (line.rfind("Cpus_allowed_list:", 0) == 0) allowed = line.substr(line.find_first_not_of(" \t", 18));
  json m = json::parse(q.gpuq({"settings", "--json", "--reserve-cpus", "0"}).out)["machine"];
  EXPECT_EQ(m["node_cpus"].get<double>(), static_cast<double>(cores)) << m;  // all of them: no reserve
  EXPECT_EQ(m["cores"], allowed);
  EXPECT_EQ(m["pinned_to"], m["cores"]);
  EXPECT_GT(m["mem_gib"].get<double>(), 0);
  EXPECT_NEAR(m["node_mem_gib"].get<double>(), std::max(m["mem_gib"].get<double>() / 2, m["mem_gib"].get<double>() - 4),
              1e-6);
  EXPECT_TRUE(m["cgroup"] == "v1" || m["cgroup"] == "v2" || m["cgroup"] == "none") << m;
  EXPECT_FALSE(m["cgroup_note"].get<std::string>().empty());
  // As text, with given values, and with the cgroups turned off.
  Output t = q.gpuq({"settings", "--node-cpus", "3", "--node-mem-gib", "12.5", "--mem-cgroup", "off"});
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("this machine, for jobs that give cpus or mem_gib:"));
  // At most the cores jobs may be pinned to (the machine's less reserve_cpus 1): node_cpus past
  // them is lowered to them, and said (issue 50).
  int pinnable = cores > 1 ? cores - 1 : 1;
  EXPECT_THAT(t.out, HasSubstr(fmt::format("; jobs may use {} at once, pinned to ", std::min(3, pinnable))));
  EXPECT_THAT(t.out, HasSubstr("(node_cpus 3)"));
  if (pinnable < 3)
    EXPECT_THAT(t.out, HasSubstr(fmt::format("node_cpus 3 is more than the {} core", pinnable))) << t.out;
  else
    EXPECT_THAT(t.out, ::testing::Not(HasSubstr("is more than the"))) << t.out;
  EXPECT_THAT(t.out, HasSubstr("jobs may use 12.5 GiB at once (node_mem_gib 12.5)"));
  EXPECT_THAT(t.out, HasSubstr("memory held  sampled (each job's resident memory, every 5 s at most), on every node; "
                               "no cgroup: --mem-cgroup off"));
  Output d = q.gpuq({"settings", "--reserve-cpus", "0"});
  EXPECT_THAT(d.out, HasSubstr(fmt::format("jobs may use {} at once", cores)));
  EXPECT_THAT(d.out, HasSubstr("(node_cpus 0: the machine's less reserve_cpus 0)"));
  EXPECT_THAT(d.out, HasSubstr(m["cgroup_note"].get<std::string>()));
}

// A flag's value is checked by the reader of the plan's "settings" (settings.h's table), so a bad
// one gets the same words as in the plan, with the flag named (issue 49: each setting declared once).
TEST(SettingsErrors, AFlagsBadValueGetsThePlansWords) {
  PlanFolder q(2);
  q.d.write("ok.sh", "true\n");
  q.plan(R"([{"id": "a", "script": "ok.sh", "gpus": 1, "est_hours": 0.01}])");
  struct Case {
    std::vector<std::string> args;
    std::string said;
  };
  for (const Case& c : {Case{{"simulate", "--max-retries", "two"}, "gpuq: --max-retries: must be a whole number, not \"two\""},
                        Case{{"simulate", "--retry-after", "soon"}, "gpuq: --retry-after: must be a number, not \"soon\""},
                        Case{{"run", "--poll", "0"}, "gpuq: --poll: must be more than 0 (got 0)"},
                        Case{{"status", "--node-cpus", "-1"}, "gpuq: --node-cpus: must not be negative (got -1)"},
                        Case{{"simulate", "--gpu-mem-headroom", "150"}, "gpuq: --gpu-mem-headroom: must be below 100 (got 150)"},
                        Case{{"run", "--preemptible", "maybe"}, "gpuq: --preemptible: must be one of false, true, not \"maybe\""}}) {
    Output r = q.gpuq(c.args);
    EXPECT_NE(r.status, 0) << c.args[1];
    EXPECT_THAT(r.err, HasSubstr(c.said)) << c.args[1];
    EXPECT_FALSE(fs::exists(q.d.path() + "/plan.state.json")) << c.args[1] << ": nothing ran";
  }
}
