// The idle watch (issue 53, part 1): a running job whose GPUs all sit idle, or hold none of
// its processes, for idle_minutes is idle. The rule over inline entries (watchdog.h), the plan's
// fields and the settings, `run`'s tick over the fakes (tick_loop.h) under each on_idle,
// status's words and JSON, and real bash jobs beside a fake nvidia-smi that reports 0 %.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "gpuq/core/outlook.h"
#include "gpuq/core/validate.h"
#include "gpuq/core/watchdog.h"
#include "gpuq/views/json.h"
#include "gpuq/views/reasons.h"
#include "tick_loop.h"

using namespace gpuq;
using namespace gpuq::test;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

namespace {

Job job_a() {
  Job j;
  j.id = "a";
  return j;
}

// Utilization readings of GPUs 0-3, each at `pct`.
GpuActivity util(int pct) {
  GpuActivity a;
  for (int g = 0; g < 4; ++g) a.util_pct[g] = pct;
  return a;
}

}  // namespace

TEST(IdleWatch, AJobIsIdleWhenEveryReadingShowsAllItsGpusIdleForTheLimit) {
  Policy p;  // the defaults: 30 minutes, 5 %
  EXPECT_EQ(p.settings.idle_minutes, 30);
  EXPECT_EQ(p.settings.idle_util_percent, 5);
  Job j = job_a();
  JobState s = running_entry({2, 3});
  for (double t = 0; t <= 1740; t += 60) note_activity(s, std::nullopt, util(5), t);  // 5 % is idle
  EXPECT_EQ(s.idle_since, 0);
  IdleCheck c = check_idle(j, s, p, 1740);
  EXPECT_TRUE(c.watched);
  EXPECT_FALSE(c.idle);
  EXPECT_DOUBLE_EQ(c.next_in, 60);
  note_activity(s, std::nullopt, util(0), 1800);
  c = check_idle(j, s, p, 1800);
  EXPECT_TRUE(c.idle);
  EXPECT_EQ(c.text(), "idle 30 min on GPUs [2, 3] (at or below 5% utilization)");
  // One GPU at work ends the spell; the next one counts from its own start.
  GpuActivity busy = util(0);
  busy.util_pct[3] = 6;
  note_activity(s, std::nullopt, busy, 1860);
  EXPECT_FALSE(s.idle_since);
  EXPECT_FALSE(check_idle(j, s, p, 1860).idle);
  note_activity(s, std::nullopt, util(0), 1920);
  EXPECT_EQ(s.idle_since, 1920);
  EXPECT_DOUBLE_EQ(check_idle(j, s, p, 1920).next_in, 1800);
}

TEST(IdleWatch, AReadingMissingAGpuBreaksTheSpellAndTimeCountsOnlyToTheLastReading) {
  Policy p;
  Job j = job_a();
  JobState s = running_entry({0, 1});
  note_activity(s, std::nullopt, util(0), 0);
  GpuActivity half;
  half.util_pct[0] = 0;  // GPU 1 gave no utilization: nothing is known of it
  note_activity(s, std::nullopt, half, 600);
  EXPECT_FALSE(s.idle_since);
  note_activity(s, std::nullopt, util(0), 700);
  note_activity(s, std::nullopt, util(0), 2600);
  // A run that stopped reading at 2600 claims nothing after: status at 5000 says 31 min, not 71.
  IdleCheck c = check_idle(j, s, p, 5000);
  EXPECT_TRUE(c.idle);
  EXPECT_DOUBLE_EQ(c.idle_for, 1900);
  // Without any utilization reading (an older nvidia-smi) nothing is ever idle.
  JobState blind = running_entry({0});
  for (double t = 0; t <= 7200; t += 60) note_activity(blind, std::nullopt, GpuActivity{}, t);
  EXPECT_FALSE(check_idle(j, blind, p, 7200).idle);
}

TEST(IdleWatch, GpusHoldingNoneOfItsProcessesAreIdleToo) {
  Policy p;
  p.settings.idle_minutes = 10;
  Job j = job_a();
  JobState s = running_entry({0});
  // GPU 0 is busy with a packed neighbour's process (its lineage is not 1000): not ours.
  GpuActivity a = util(90);
  a.processes.emplace();
  (*a.processes)[0].push_back(GpuProcess{.pid = 77, .lineage = {77, 70, 1}});
  for (double t = 0; t <= 600; t += 60) note_activity(s, std::nullopt, a, t);
  IdleCheck c = check_idle(j, s, p, 600);
  EXPECT_TRUE(c.idle);
  EXPECT_TRUE(c.unused);
  EXPECT_EQ(c.detail(), "no process of it on GPU [0] for 10 min");
  // A process whose lineage holds the job's group is its own: the spell ends.
  (*a.processes)[0].push_back(GpuProcess{.pid = 1234, .lineage = {1234, 1000, 1}});
  note_activity(s, std::nullopt, a, 660);
  EXPECT_FALSE(s.unused_since);
  EXPECT_FALSE(check_idle(j, s, p, 660).idle);
  // Without process lists (nvidia-smi) the spell is never begun.
  JobState smi = running_entry({0});
  for (double t = 0; t <= 1200; t += 60) note_activity(smi, std::nullopt, util(90), t);
  EXPECT_FALSE(smi.unused_since);
}

TEST(IdleWatch, IdleOkAndZeroMinutesAreNeverWatchedAndTheJobsOnIdleComesFirst) {
  Policy p;
  Job j = job_a();
  JobState s = running_entry({0});
  note_activity(s, std::nullopt, util(0), 0);
  note_activity(s, std::nullopt, util(0), 7200);
  EXPECT_TRUE(check_idle(j, s, p, 7200).idle);
  Job ok = job_a();
  ok.idle_ok = true;
  EXPECT_FALSE(check_idle(ok, s, p, 7200).watched);
  Policy off = p;
  off.settings.idle_minutes = 0;
  EXPECT_FALSE(check_idle(j, s, off, 7200).watched);
  EXPECT_EQ(idle_action(j, p), IdleAction::Warn);
  p.settings.on_idle = "requeue";
  EXPECT_EQ(idle_action(j, p), IdleAction::Requeue);
  j.on_idle = IdleAction::Kill;
  EXPECT_EQ(idle_action(j, p), IdleAction::Kill);
}

TEST(IdleWatch, PlanFieldsAndSettingsAreReadAndRefusedByName) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "on_idle": "requeue", "idle_ok": false},
                       {"id": "b", "script": "b.sh", "on_idle": "kill", "idle_ok": true},
                       {"id": "c", "script": "c.sh", "on_idle": null}])");
  EXPECT_EQ(p.jobs[0].on_idle, IdleAction::Requeue);
  EXPECT_FALSE(p.jobs[0].idle_ok);
  EXPECT_EQ(p.jobs[1].on_idle, IdleAction::Kill);
  EXPECT_TRUE(p.jobs[1].idle_ok);
  EXPECT_EQ(p.jobs[2].on_idle, IdleAction::Setting);
  // validate warns of an on_idle that can never act.
  Plan both = plan_of(R"([{"id": "b", "script": "b.sh", "est_hours": 1, "on_idle": "kill", "idle_ok": true}])");
  auto yes = [](const std::string&) { return true; };
  std::vector<Finding> f = validate_plan(both, {0}, 0.5, FileTable(yes), yes);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].error);
  EXPECT_THAT(f[0].text, HasSubstr("has on_idle \"kill\" and idle_ok: true: an idle_ok job is never idle"));
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "on_idle": "stop"}])"),
              ElementsAre(HasSubstr("job 'a': \"on_idle\" must be \"warn\", \"requeue\" or \"kill\", not \"stop\"")));
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "idle_ok": "yes"}])"),
              ElementsAre(HasSubstr("job 'a': \"idle_ok\" must be true or false, not a string")));
  GivenSettings g;
  EXPECT_THAT(read_settings(json{{"on_idle", "pause"}}, g), ElementsAre(HasSubstr("on_idle")));
  EXPECT_THAT(read_settings(json{{"idle_util_percent", 100}}, g), ElementsAre(HasSubstr("must be below 100")));
  EXPECT_THAT(read_settings(json{{"idle_minutes", 5}, {"on_idle", "kill"}}, g), IsEmpty());
  EXPECT_EQ(g.values.idle_minutes, 5);
  EXPECT_EQ(g.values.on_idle, "kill");
}

namespace {

// A loop over the fakes whose GPUs all read 0 %, with the idle watch's settings `minutes` and `what`.
struct IdleLoop : Loop {
  IdleLoop(const std::string& plan, double minutes, const std::string& what)
      : Loop(plan, [&](RunOptions& o) {
          o.settings.idle_minutes = minutes;
          o.settings.on_idle = what;
          o.kill_grace = 30;
        }) {
    for (auto& [g, mib] : *probe.reading.used_mib) probe.reading.util_pct[g] = 0;
  }
  // Ticks each minute for `minutes` minutes; the lines said.
  std::vector<std::string> minutes(int n) {
    std::vector<std::string> said;
    for (int k = 0; k < n; ++k) {
      clock.advance(60);
      tick();
      said.insert(said.end(), out.begin(), out.end());
    }
    return said;
  }
};

}  // namespace

TEST(IdleTick, WarnSaysItOnceAndAgainOnlyAfterTheJobWorkedAgain) {
  IdleLoop q(R"([{"id": "a", "script": "a.sh", "gpus": 2}])", 10, "warn");
  EXPECT_DOUBLE_EQ(q.tick().wake_in, q.opt.poll);  // a starts on GPUs 0, 1; no spell yet: nothing to wake for
  ASSERT_EQ(q.status("a"), Status::Running);
  EXPECT_THAT(q.minutes(10), IsEmpty());
  EXPECT_EQ(q.entry("a").idle_since, q.clock.t - 540);  // from the first reading after its start
  EXPECT_DOUBLE_EQ(q.loop->tick().wake_in, 60);          // the spell's end is the next wake
  q.clock.advance(60);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("idle: a: idle 10 min on GPUs [0, 1] (at or below 5% utilization) "
                                        "(idle_minutes 10); it keeps its GPUs: `gpuq kill a` stops it, on_idle "
                                        "\"requeue\" or \"kill\" would have")));
  EXPECT_THAT(q.minutes(20), IsEmpty());  // once
  q.probe.reading.util_pct[1] = 40;       // at work again
  EXPECT_THAT(q.minutes(1), IsEmpty());
  EXPECT_FALSE(q.entry("a").idle_since);
  q.probe.reading.util_pct[1] = 0;
  std::vector<std::string> again = q.minutes(11);
  EXPECT_THAT(again, ElementsAre(HasSubstr("idle: a: idle 10 min on GPUs [0, 1]")));
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  EXPECT_EQ(q.status("a"), Status::Running);
  // status and its JSON say so, as run sees it.
  Outlook o = make_outlook(q.plan, q.disk.state, q.opt, q.clock.t, 0, q.files);
  EXPECT_EQ(why_text(q.plan, q.disk.state, o, o.jobs[0]), "idle 10 min on GPUs [0, 1] (at or below 5% utilization)");
  ASSERT_TRUE(o.jobs[0].idle_for);
  EXPECT_DOUBLE_EQ(*o.jobs[0].idle_for, 600);
}

TEST(IdleTick, RequeueStopsItAndItRunsAgainWithNoRetrySpent) {
  IdleLoop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}])", 5, "requeue");
  q.tick();
  long long first = q.launcher.pid_of("a");
  std::vector<std::string> said = q.minutes(6);  // idle from the first reading after its start
  EXPECT_THAT(said, ElementsAre(HasSubstr(fmt::format(
                        "requeued a as idle (idle 5 min on GPU [0] (at or below 5% utilization) (idle_minutes 5); "
                        "on_idle \"requeue\"): SIGTERM to process group {}; it runs again later (no retry spent)",
                        first))));
  EXPECT_THAT(q.launcher.signals, ElementsAre(std::pair{first, Signal::Term}));
  EXPECT_TRUE(q.entry("a").requeue);
  q.launcher.vanish(first);  // its processes are gone
  q.tick();
  q.tick();
  EXPECT_EQ(q.status("a"), Status::Running);
  EXPECT_NE(q.launcher.pid_of("a"), first);
  EXPECT_EQ(q.entry("a").attempts_or0(), 0);  // no retry spent
  EXPECT_FALSE(q.entry("a").idle_since.has_value() && *q.entry("a").idle_since < q.clock.t);  // a new spell
}

TEST(IdleTick, KillStopsItAsFailedWithTheOutcomeIdleAndThePlanGoesOn) {
  // a's own on_idle comes before the setting's.
  IdleLoop q(R"([{"id": "a", "script": "a.sh", "gpus": 8, "priority": 1, "on_idle": "kill"},
                 {"id": "b", "script": "b.sh", "gpus": 8, "priority": 2, "idle_ok": true, "on_idle": "kill"}])",
             5, "warn");
  q.tick();
  long long pid = q.launcher.pid_of("a");
  std::vector<std::string> said = q.minutes(6);
  EXPECT_THAT(said, ElementsAre(HasSubstr("stopped a as idle (idle 5 min on GPUs [0, 1, 2, 3, 4, 5, 6, 7] (at or "
                                          "below 5% utilization) (idle_minutes 5); on_idle \"kill\"): SIGTERM to "
                                          "process group")));
  const JobState& a = q.entry("a");
  EXPECT_EQ(a.status, Status::Failed);
  EXPECT_EQ(a.outcome, "idle");
  EXPECT_EQ(outcome_of(a), Outcome::Idle);
  ASSERT_EQ(q.launcher.log_notes.size(), 1u);
  EXPECT_THAT(q.launcher.log_notes[0].second, HasSubstr("idle: idle 5 min on GPUs"));
  q.launcher.vanish(pid);
  q.tick();  // the group is gone: b starts, and idle_ok keeps it from ever being flagged
  EXPECT_EQ(q.status("b"), Status::Running);
  EXPECT_THAT(q.minutes(60), IsEmpty());
  EXPECT_EQ(q.status("b"), Status::Running);
  Outlook o = make_outlook(q.plan, q.disk.state, q.opt, q.clock.t, 0, q.files);
  EXPECT_EQ(o.jobs[0].outcome, "idle");
  EXPECT_EQ(why_text(q.plan, q.disk.state, o, o.jobs[0]),
            "stopped as idle: idle 5 min on GPUs [0, 1, 2, 3, 4, 5, 6, 7] (at or below 5% utilization) (on_idle "
            "\"kill\"); `gpuq retry a` runs it again");
  EXPECT_FALSE(o.jobs[1].idle_for);
}

namespace {

struct IdleQueue : PlanFolder {
  IdleQueue() : PlanFolder("0, 0, 0\n1, 0, 0\n2, 0, 0\n3, 0, 0\n") {}  // four GPUs, all at 0 %
};

}  // namespace

// Real bash jobs, each on a GPU that nvidia-smi reads at 0 %, with idle_minutes of 1.2 s: one
// job per on_idle, and one that says idle_ok. The run ends on its own, each as its on_idle says.
TEST(IdleWatchRun, EachOnIdleOnRealJobs) {
  IdleQueue q;
  // r: its first attempt sits idle; requeued, its next one finds its mark and ends at once.
  q.d.write("r.sh", "if [ -e r.mark ]; then echo second; exit 0; fi; touch r.mark; echo $$ > r.pid; sleep 600\n");
  q.d.write("k.sh", "echo $$ > k.pid; sleep 600\n");
  q.d.write("w.sh", "sleep 4; echo warned\n");
  q.d.write("ok.sh", "sleep 4; echo fine\n");
  q.plan(R"({"settings": {"idle_minutes": 0.02, "on_idle": "warn"},
             "jobs": [{"id": "w", "script": "w.sh"},
                      {"id": "r", "script": "r.sh", "on_idle": "requeue"},
                      {"id": "k", "script": "k.sh", "on_idle": "kill"},
                      {"id": "ok", "script": "ok.sh", "idle_ok": true}]})");
  Output r = q.background({"run", "--gpus", "0-3", "--node-dir", "off"})->wait(kPatience);
  ASSERT_EQ(r.status, 3) << r.out << r.err;  // 3: k did not end done
  EXPECT_THAT(r.out, HasSubstr("idle: w: idle "));
  EXPECT_THAT(r.out, HasSubstr("requeued r as idle (idle "));
  EXPECT_THAT(r.out, HasSubstr("stopped k as idle (idle "));
  EXPECT_THAT(r.out, HasSubstr(" s on GPU [2] (at or below 5% utilization) (idle_minutes 0.02); on_idle \"kill\")"));
  EXPECT_THAT(r.out, HasSubstr("failed (k: stopped as idle)"));
  EXPECT_THAT(r.out, Not(HasSubstr(" ok as idle")));
  EXPECT_THAT(r.out, Not(HasSubstr("idle: ok:")));
  json s = q.state();
  EXPECT_EQ(s["w"]["status"], "done");
  EXPECT_EQ(s["r"]["status"], "done");
  EXPECT_EQ(s["r"].value("attempts", 0), 0);  // the requeue spent no retry
  EXPECT_EQ(s["k"]["status"], "failed");
  EXPECT_EQ(s["k"]["outcome"], "idle");
  EXPECT_EQ(s["ok"]["status"], "done");
  EXPECT_EQ(q.d.read("logs/r.log").find("second") != std::string::npos, true);
  EXPECT_TRUE(eventually([&] { return !pid_alive(std::stoll(q.d.read("k.pid"))); }, kPatience));
  EXPECT_TRUE(eventually([&] { return !pid_alive(std::stoll(q.d.read("r.pid"))); }, kPatience));
  EXPECT_THAT(q.d.read("logs/k.log"), HasSubstr("gpuq stopped the job (on_idle \"kill\")"));
  // The event log has an idle event for w, r and k, none for ok; history lists k's outcome.
  std::map<std::string, int> idle_events;
  std::istringstream events(q.d.read("plan.events.jsonl"));
  for (std::string line; std::getline(events, line);) {
    json e = json::parse(line);
    if (e["event"] == "idle") ++idle_events[e["id"].get<std::string>()];
  }
  EXPECT_EQ(idle_events, (std::map<std::string, int>{{"k", 1}, {"r", 1}, {"w", 1}}));
  Output h = q.gpuq({"history", "--json"});
  ASSERT_EQ(h.status, 0) << h.err;
  bool k_idle = false;
  for (const json& a : json::parse(h.out))
    if (a["id"] == "k") k_idle = a["outcome"] == "idle";
  EXPECT_TRUE(k_idle) << h.out;
}
