// The hang watchdog (issue 13, point 4): the rule book's check (watchdog.h) over
// inline entries, the plan fields, nvidia-smi's utilization column, `run`'s tick
// over the fakes (tick_loop.h), status's mark, and a real bash job that hangs.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "gpuq/core/outlook.h"
#include "gpuq/views/reasons.h"
#include "gpuq/core/validate.h"
#include "gpuq/core/watchdog.h"
#include "gpuq/live/probe.h"
#include "tick_loop.h"

using namespace gpuq;
using namespace gpuq::test;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace {

// A running entry started at 0 on `gpus`.
JobState running(std::vector<int> gpus = {0}) { return running_entry(std::move(gpus)); }

Job watched(double minutes) {
  Job j;
  j.id = "a";
  j.quiet_minutes = minutes;
  return j;
}

}  // namespace

TEST(Watchdog, HungNeedsBothASilentLogAndIdleGpusForTheQuietTime) {
  Job j = watched(30);
  JobState s = running({0, 1});
  s.log_grew = 100;
  s.gpus_read = 2000;    // utilization readings of both GPUs
  s.gpus_busy = 1000;    // one was last over 5 % at 1000
  // The log silent 30 min (from 100), but a GPU was at work 1000 s ago: not hung; it could be at 1000 + 1800.
  QuietCheck c = check_quiet(j, s, Policy{}, 100 + 1800);
  EXPECT_TRUE(c.watched);
  EXPECT_FALSE(c.hung);
  EXPECT_DOUBLE_EQ(c.next_in, 1000 + 1800 - 1900);
  // Both quiet for 30 min.
  c = check_quiet(j, s, Policy{}, 1000 + 1800);
  EXPECT_TRUE(c.hung);
  EXPECT_TRUE(c.gpus_known);
  EXPECT_EQ(c.text(), "hung? log silent 45 min, GPUs idle");
  // GPUs idle since the start, but the log grew a minute ago: not hung.
  s.gpus_busy.reset();
  s.log_grew = 2800 - 60;
  c = check_quiet(j, s, Policy{}, 2800);
  EXPECT_FALSE(c.hung);
  EXPECT_DOUBLE_EQ(c.next_in, 1800 - 60);
  EXPECT_EQ(c.text(), "");
}

TEST(Watchdog, WithoutAUtilizationReadingTheLogAloneDecidesAndSaysSo) {
  JobState s = running();
  s.gpus_busy = 3000;  // an old mark, but no reading of utilization (gpus_read absent)
  QuietCheck c = check_quiet(watched(10), s, Policy{}, 600);
  EXPECT_TRUE(c.hung);
  EXPECT_FALSE(c.gpus_known);
  EXPECT_EQ(c.text(), "hung? log silent 10 min (no GPU utilization reading: the log alone)");
}

TEST(Watchdog, TheLimitIsTheJobsElseTheFlagElseNone) {
  Policy p;
  Job plain;
  EXPECT_FALSE(quiet_minutes(plain, p));
  EXPECT_FALSE(check_quiet(plain, running(), p, 1e6).watched);
  p.quiet_minutes = 20;
  EXPECT_EQ(quiet_minutes(plain, p), 20);
  EXPECT_EQ(quiet_minutes(watched(5), p), 5);
  JobState done = running();
  done.status = Status::Done;
  EXPECT_FALSE(check_quiet(watched(5), done, p, 1e6).hung);
}

TEST(Watchdog, NoteActivityRecordsGrowthAndUtilization) {
  JobState s = running({0, 1});
  note_activity(s, 0, {{{0, 0}, {1, 3}}}, 10);  // an empty log, both GPUs idle
  EXPECT_EQ(s.log_size, 0);
  EXPECT_FALSE(s.log_grew);
  EXPECT_EQ(s.gpus_read, 10);
  EXPECT_FALSE(s.gpus_busy);
  s.hung_noted = 15;
  note_activity(s, 200, {{{0, 90}}}, 20);  // the log grew; GPU 0 busy; GPU 1 gave no utilization
  EXPECT_EQ(s.log_size, 200);
  EXPECT_EQ(s.log_grew, 20);
  EXPECT_FALSE(s.hung_noted);  // it talks again: a next hang is said again
  EXPECT_EQ(s.gpus_busy, 20);
  EXPECT_EQ(s.gpus_read, 10);  // not a reading of all its GPUs
  note_activity(s, 200, {{{0, 5}, {1, 5}}}, 30);  // 5 % is idle
  EXPECT_EQ(s.log_grew, 20);
  EXPECT_EQ(s.gpus_busy, 20);
  EXPECT_EQ(s.gpus_read, 30);
  JobState adopted = running();
  note_activity(adopted, 4096, {}, 50);  // a first look at a log with something in it: growth
  EXPECT_EQ(adopted.log_grew, 50);
}

TEST(Watchdog, PlanFieldsAreReadAndValidated) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "quiet_minutes": 30, "on_quiet": "kill"},
                       {"id": "b", "script": "b.sh", "quiet_minutes": 2.5, "on_quiet": "warn"},
                       {"id": "c", "script": "c.sh", "on_quiet": null}])");
  EXPECT_EQ(p.jobs[0].quiet_minutes, 30);
  EXPECT_TRUE(p.jobs[0].kill_on_quiet);
  EXPECT_EQ(p.jobs[1].quiet_minutes, 2.5);
  EXPECT_FALSE(p.jobs[1].kill_on_quiet);
  EXPECT_FALSE(p.jobs[2].quiet_minutes);
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "quiet_minutes": 0}])"),
              ElementsAre(HasSubstr("inline.json: job 'a': \"quiet_minutes\" must be more than 0")));
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "quiet_minutes": "30m"}])"),
              ElementsAre(HasSubstr("job 'a': \"quiet_minutes\" must be a number")));
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "on_quiet": "stop"}])"),
              ElementsAre(HasSubstr("job 'a': \"on_quiet\" must be \"warn\" or \"kill\", not \"stop\"")));
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "on_quiet": true}])"),
              ElementsAre(HasSubstr("job 'a': \"on_quiet\" must be \"warn\" or \"kill\", not true")));
  Plan lone = plan_of(R"([{"id": "a", "script": "a.sh", "est_hours": 1, "on_quiet": "kill"}])");
  auto yes = [](const std::string&) { return true; };
  std::vector<Finding> f = validate_plan(lone, {0}, 0.5, FileTable(yes), yes);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].error);
  EXPECT_THAT(f[0].text, HasSubstr("on_quiet \"kill\" but no quiet_minutes"));
}

TEST(Watchdog, TheProbeReadsUtilizationAndOlderOutputsWithoutIt) {
  GpuReading r = parse_gpu_csv("0, 100, 37\n1, 20000, [N/A]\n2, 0, [Not Supported]\n");
  ASSERT_TRUE(r.used_mib) << r.problem;
  EXPECT_EQ((*r.used_mib), (std::map<int, long long>{{0, 100}, {1, 20000}, {2, 0}}));
  EXPECT_EQ(r.util_pct, (std::map<int, int>{{0, 37}}));
  r = parse_gpu_csv("0, 0\n1, 512\n");  // an older nvidia-smi, or a fake one
  ASSERT_TRUE(r.used_mib) << r.problem;
  EXPECT_EQ(r.used_mib->size(), 2u);
  EXPECT_THAT(r.util_pct, IsEmpty());
  // Today's query adds the uncorrectable ECC count (issue 53): a number, or [N/A] where ECC is off.
  r = parse_gpu_csv("0, 100, 3, 4\n1, 0, 0, [N/A]\n");
  ASSERT_TRUE(r.used_mib) << r.problem;
  EXPECT_EQ(r.ecc_uncorrected, (std::map<int, unsigned long long>{{0, 4}}));
  for (const char* bad : {"0, 100, 37%\n", "0, 100, 101\n", "0, 100, 3, 4, 5\n", "0, 100, 3, -4\n", "0\n",
                          "x, 1, 2\n"}) {
    r = parse_gpu_csv(bad);
    EXPECT_FALSE(r.used_mib) << bad;
    EXPECT_THAT(r.problem, HasSubstr("unexpected line from nvidia-smi")) << bad;
    EXPECT_THAT(r.util_pct, IsEmpty()) << bad;
  }
}

TEST(WatchdogTick, AJobWithASilentLogAndIdleGpusIsSaidOnceAndKeepsRunning) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 2, "quiet_minutes": 10}])");
  for (auto& [g, mib] : *q.probe.reading.used_mib) q.probe.reading.util_pct[g] = 0;
  q.launcher.log_bytes["a"] = 0;
  q.tick();  // starts a on GPUs 0, 1
  ASSERT_EQ(q.status("a"), Status::Running);
  q.probe.reading.util_pct[1] = 80;  // at work at first
  q.launcher.log_bytes["a"] = 500;
  q.clock.advance(60);
  TickResult r = q.tick();
  EXPECT_DOUBLE_EQ(r.wake_in, 600);  // quiet from now at the earliest
  EXPECT_EQ(q.entry("a").log_grew, q.clock.t);
  q.probe.reading.util_pct[1] = 2;  // then idle, the log silent
  q.clock.advance(300);
  q.tick();
  EXPECT_THAT(q.out, IsEmpty());
  q.clock.advance(300);
  q.tick();
  EXPECT_THAT(q.out, ElementsAre(q.line("hung? a: log silent 10 min, GPUs idle (quiet_minutes 10); it keeps its "
                                        "GPUs: `gpuq kill a` stops it, on_quiet \"kill\" would have")));
  EXPECT_EQ(q.entry("a").hung_noted, q.clock.t);
  q.clock.advance(300);
  q.tick();
  EXPECT_THAT(q.out, IsEmpty());  // once
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  EXPECT_EQ(q.status("a"), Status::Running);
}

TEST(WatchdogTick, AGrowingLogOrABusyGpuKeepsTheJobFromLookingHung) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1, "quiet_minutes": 10, "on_quiet": "kill"}])");
  q.probe.reading.util_pct = {{0, 0}};
  q.launcher.log_bytes["a"] = 0;
  q.tick();
  for (int minute = 1; minute <= 30; ++minute) {  // the log grows every 5 minutes: never 10 min silent
    q.clock.advance(60);
    if (minute % 5 == 0) q.launcher.log_bytes["a"] += 10;
    q.tick();
  }
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  q.probe.reading.util_pct = {{0, 99}};  // now the log is silent, but the GPU works
  for (int minute = 1; minute <= 30; ++minute) {
    q.clock.advance(60);
    q.tick();
  }
  EXPECT_THAT(q.launcher.signals, IsEmpty());
  EXPECT_EQ(q.status("a"), Status::Running);
  EXPECT_FALSE(q.entry("a").hung_noted);
}

TEST(WatchdogTick, OnQuietKillStopsItAsATimeoutIsStoppedAndTheRestOfThePlanGoesOn) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 8, "quiet_minutes": 5, "on_quiet": "kill", "priority": 1},
             {"id": "b", "script": "b.sh", "gpus": 8, "deps": ["after:a"], "priority": 2}])");
  q.probe.reading.util_pct = {};  // an nvidia-smi without utilization: the log alone
  q.launcher.log_bytes["a"] = 0;
  EXPECT_DOUBLE_EQ(q.tick().wake_in, 300);
  q.clock.advance(300);
  q.tick();
  EXPECT_THAT(q.launcher.signals, ElementsAre(std::pair{1000LL, Signal::Term}));
  EXPECT_THAT(q.out, ElementsAre(q.line("stopped a as hung (log silent 5 min (no GPU utilization reading: the log "
                                        "alone); on_quiet \"kill\"): SIGTERM to process group 1000; not retried "
                                        "automatically")));
  const JobState& a = q.entry("a");
  EXPECT_EQ(a.status, Status::Failed);
  EXPECT_EQ(a.exit, kKilledExit);
  EXPECT_EQ(a.outcome, "hung");
  EXPECT_EQ(outcome_of(a), Outcome::Hung);
  ASSERT_EQ(q.launcher.log_notes.size(), 1u);
  EXPECT_THAT(q.launcher.log_notes[0].second, HasSubstr("hung? log silent 5 min"));
  q.tick();  // the group is gone: b starts
  EXPECT_EQ(q.status("b"), Status::Running);
  // status says how a ended.
  Outlook o = make_outlook(q.plan, q.disk.state, q.opt, q.clock.t, 0, q.files);
  EXPECT_EQ(o.jobs[0].outcome, "hung");
  EXPECT_EQ(why_text(q.plan, q.disk.state, o, o.jobs[0]), "stopped as hung: log silent 5 min (no GPU utilization reading: the log alone) "
                           "(on_quiet \"kill\"); `gpuq retry a` runs it again");
}

TEST(WatchdogTick, TheFlagWatchesEveryJobAndARestartKeepsWhatWasSeen) {
  Loop q(R"([{"id": "a", "script": "a.sh", "gpus": 1}])", [](RunOptions& o) { o.quiet_minutes = 10; });
  q.probe.reading.util_pct = {{0, 0}};
  q.launcher.log_bytes["a"] = 100;
  q.tick();
  q.clock.advance(60);
  q.tick();  // a first look: the log has something in it
  double grew = *q.entry("a").log_grew;
  // Another run adopts it: the silence counts from what the state recorded.
  Loop again(R"([{"id": "a", "script": "a.sh", "gpus": 1}])", [](RunOptions& o) { o.quiet_minutes = 10; });
  again.clock.t = q.clock.t + 540;
  again.disk.replace(q.disk.state);
  again.probe.reading.util_pct = {{0, 0}};
  again.launcher.log_bytes["a"] = 100;
  again.launcher.procs[1000].id = "a";
  EXPECT_DOUBLE_EQ(again.tick().wake_in, grew + 600 - again.clock.t);
  again.clock.advance(60);
  again.tick();
  EXPECT_THAT(again.out, ElementsAre(HasSubstr("hung? a: log silent 10 min, GPUs idle")));
}

TEST(WatchdogStatus, StatusMarksAHungJobAsRunSeesIt) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "quiet_minutes": 30, "est_hours": 10}])");
  State st;
  JobState a = running({0});
  a.log_grew = 600;
  a.gpus_read = 3000;
  st.set("a", a);
  FileTable yes([](const std::string&) { return true; });
  Outlook o = make_outlook(p, st, Policy{}, 600 + 42 * 60, 0, yes);
  EXPECT_EQ(why_text(p, st, o, o.jobs[0]), "hung? log silent 42 min, GPUs idle");
  EXPECT_TRUE(o.jobs[0].hung);
  o = make_outlook(p, st, Policy{}, 600 + 20 * 60, 0, yes);
  EXPECT_EQ(why_text(p, st, o, o.jobs[0]), "");
  EXPECT_FALSE(o.jobs[0].hung);
}

namespace {

struct QuietQueue : PlanFolder {
  explicit QuietQueue(const std::string& smi) : PlanFolder(smi) {}
  Output run(const std::string& text) {
    plan(text);
    return background({"run", "--gpus", "0"})->wait(kPatience);
  }
};

}  // namespace

// A real bash job that says one line and hangs; nvidia-smi reports its GPU idle. The
// watchdog (2 s here) stops it, and the job after it runs: the plan finishes on its own.
TEST(WatchdogRun, AHangingJobIsStoppedAndThePlanFinishesOnItsOwn) {
  QuietQueue q("0, 0, 0\n");
  q.d.write("hang.sh", "echo loading; echo $$ > hang.pid; while true; do sleep 0.05; done\n");
  q.d.write("talk.sh", "for i in $(seq 30); do echo step $i; sleep 0.1; done\n");
  q.d.write("next.sh", "echo next > next.ran\n");
  Output r = q.run(R"([{"id": "hang", "script": "hang.sh", "priority": 1, "quiet_minutes": 0.03334, "on_quiet": "kill"},
                      {"id": "talk", "script": "talk.sh", "priority": 2, "quiet_minutes": 0.03334, "on_quiet": "kill"},
                      {"id": "next", "script": "next.sh", "priority": 3, "deps": ["after:hang"]}])");
  ASSERT_EQ(r.status, 3) << r.out << r.err;  // 3: a job did not end done
  EXPECT_THAT(r.out, HasSubstr("stopped hang as hung (log silent "));
  EXPECT_THAT(r.out, HasSubstr(" s, GPUs idle; on_quiet \"kill\"): SIGTERM to process group"));
  json s = q.state();
  EXPECT_EQ(s["hang"]["outcome"], "hung");
  EXPECT_THAT(r.out, HasSubstr("failed (hang: stopped as hung)"));  // the last line says how, not "exit -15"
  EXPECT_EQ(s["hang"]["status"], "failed");
  EXPECT_EQ(s["talk"]["status"], "done");  // talked every 0.1 s for 3 s: never quiet for 2 s
  EXPECT_EQ(q.d.read("next.ran"), "next\n");
  EXPECT_TRUE(eventually([&] { return !pid_alive(std::stoll(q.d.read("hang.pid"))); }, kPatience));
  EXPECT_THAT(q.d.read("logs/hang.log"), HasSubstr(" s, GPUs idle: the watchdog stopped the job"));
}
