// Reload on edit, pause and `gpuq add`'s text edit (issue 14): the core's plan diff and
// text insertion with inline data, the run loop's reload and pause over the fakes, and
// PlanFile (the plan file as run looks at it) on real files.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "gpuq/core/job_fields.h"
#include "gpuq/core/limits.h"
#include "gpuq/core/plan_diff.h"
#include "gpuq/core/plan_text.h"
#include "gpuq/live/hooks.h"
#include "gpuq/live/plan_watch.h"
#include "tick_loop.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

namespace {

/// The plan file as the test edits it: each look returns the next version handed to it.
class FakePlanSource : public PlanSource {
 public:
  std::vector<PlanLook> next;
  int looks = 0;
  void edit(const std::string& json) {
    PlanLook l;
    l.kind = PlanLook::Kind::Loaded;
    l.plan = plan_of(json);
    l.text = json;
    next.push_back(std::move(l));
  }
  void broken(std::vector<std::string> errors) {
    PlanLook l;
    l.kind = PlanLook::Kind::Broken;
    l.errors = std::move(errors);
    next.push_back(std::move(l));
  }
  PlanLook look(double) override {
    ++looks;
    if (next.empty()) return {};
    PlanLook l = std::move(next.front());
    next.erase(next.begin());
    return l;
  }
};

struct Reloading : Loop {
  FakePlanSource source;
  std::vector<std::string> reloaded;  // the texts run_queue would copy to PLAN.run.plan.json
  explicit Reloading(const std::string& plan_json, const std::function<void(RunOptions&)>& tweak = {})
      : Loop(plan_json, tweak) {
    loop->watch_plan(&source, [this](const std::string& text, double) { reloaded.push_back(text); });
  }
  std::vector<std::string> launched() const {
    std::vector<std::string> ids;
    for (const LaunchSpec& s : launcher.launches) ids.push_back(s.id);
    return ids;
  }
};

bool said(const std::vector<std::string>& out, const std::string& text) {
  for (const std::string& l : out)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

// ---- the core: what changed, and the line that says it

TEST(PlanDiff, SaysAddedRemovedAndChangedJobsByIdNotByPosition) {
  Plan a = plan_of(R"([{"id": "x", "script": "x.sh"}, {"id": "y", "script": "y.sh", "deps": ["x"]},
                       {"id": "gone", "script": "g.sh"}])");
  Plan b = plan_of(R"([{"id": "new", "script": "n.sh"}, {"id": "y", "script": "y.sh", "deps": ["x"]},
                       {"id": "x", "script": "x.sh", "priority": 10}])");
  PlanChange c = diff_plans(a, b);
  EXPECT_THAT(c.added, ElementsAre("new"));
  EXPECT_THAT(c.removed, ElementsAre("gone"));
  EXPECT_THAT(c.changed, ElementsAre("x"));  // y moved (its dep x too), and is the same job
  EXPECT_EQ(change_text(c), "+1 job (new), 1 removed (gone), 1 changed (x)");
  EXPECT_TRUE(diff_plans(a, a).empty());
  EXPECT_EQ(change_text(diff_plans(a, a)), "no job changed");
}

TEST(PlanDiff, EveryFieldOfAJobCountsAsAChange) {
  // An edit of each field of the table (job_fields.h) that the diff compares: a new row
  // without an edit here fails, so that each field is shown to count.
  const std::map<std::string_view, std::string> edits = {
      {"script", R"("script": "b.sh")"},
      {"gpus", R"("gpus": 2)"},
      {"priority", R"("priority": 1)"},
      {"est_hours", R"("est_hours": 3)"},
      {"deps", R"("deps": ["k"])"},
      {"produced_by", R"("produced_by": "k")"},
      {"produced_at_frac", R"("produced_at_frac": 0.5)"},
      {"first_look_frac", R"("first_look_frac": 0.2)"},
      {"time_limit_hours", R"("time_limit_hours": 2)"},
      {"warn_signal", R"("warn_signal": "USR1@9")"},
      {"retry_on_timeout", R"("retry_on_timeout": true)"},
      {"max_retries", R"("max_retries": 0)"},
      {"gpu_mem_gib", R"("gpu_mem_gib": 20)"},
      {"quiet_minutes", R"("quiet_minutes": 5)"},
      {"on_quiet", R"("on_quiet": "kill")"},
      {"on_idle", R"("on_idle": "requeue")"},
      {"idle_ok", R"("idle_ok": true)"},
      {"progress_from_log", R"("progress_from_log": false)"},
      {"args", R"("args": ["--x"])"},
      {"env", R"("env": {"A": "1"})"},
      {"snapshot", R"("snapshot": "git")"},
      {"preemptible", R"("preemptible": true)"},
      {"preempt_signal", R"("preempt_signal": "B:USR1")"},
      {"cpus", R"("cpus": 4)"},
      {"mem_gib", R"("mem_gib": 12)"},
      {"on_oom", R"("on_oom": {"env": {"BATCH_SIZE": "half"}})"},
  };
  const std::string k = R"({"id": "k", "script": "k.sh"})";
  Plan p = plan_of(R"([{"id": "j", "script": "a.sh"}, )" + k + "]");
  for (const JobField& f : job_fields()) {
    if (!f.same || f.name == "id") continue;  // a changed id is a job removed and one added
    auto edit = edits.find(f.name);
    if (edit == edits.end()) {
      ADD_FAILURE() << "no edit of \"" << f.name << "\" here to show that the diff sees it";
      continue;
    }
    std::string edited = f.name == "script" ? R"({"id": "j", "script": "b.sh"})"
                                            : R"({"id": "j", "script": "a.sh", )" + edit->second + "}";
    Plan q = plan_of("[" + edited + ", " + k + "]");
    EXPECT_THAT(diff_plans(p, q).changed, ElementsAre("j")) << f.name;
    EXPECT_THAT(diff_plans(q, q).changed, IsEmpty()) << f.name;
  }
  // "file:" deps whose producer moved is no change: produced_by is compared by the id it names.
  Plan a = plan_of(R"([{"id": "j", "script": "a.sh", "deps": ["file:x"], "produced_by": "k"}, )" + k + "]");
  Plan b = plan_of("[" + k + R"(, {"id": "j", "script": "a.sh", "deps": ["file:x"], "produced_by": "k"}])");
  EXPECT_TRUE(diff_plans(a, b).empty());
}

TEST(PlanDiff, ASweepArmDroppedIsOneRemovedPoint) {
  Plan a = plan_of(R"([{"id": "s", "script": "s.sh", "matrix": {"lr": [1, 2, 3]}}])");
  Plan b = plan_of(R"([{"id": "s", "script": "s.sh", "matrix": {"lr": [1, 3]}}])");
  PlanChange c = diff_plans(a, b);
  ASSERT_EQ(a.jobs.size(), 3u);
  EXPECT_THAT(c.removed, ElementsAre(a.jobs[1].id));
  EXPECT_THAT(c.added, IsEmpty());
  EXPECT_THAT(c.changed, IsEmpty());
}

TEST(PlanText, AppendsBeforeTheClosingBracketKeepingEveryOtherByte) {
  const std::string text = "[\n  {\"id\": \"a\", \"script\": \"a.sh\"},  // not JSON? no: kept as is\n"
                           "  {\"id\": \"b\", \"script\": \"b]}.sh\"}\n]\n";
  // (The comment is only bytes to keep; the scanner does not judge the JSON.)
  auto out = append_job_text(text, R"({"id": "c"})", nullptr);
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "[\n  {\"id\": \"a\", \"script\": \"a.sh\"},  // not JSON? no: kept as is\n"
                  "  {\"id\": \"b\", \"script\": \"b]}.sh\"},\n  {\"id\": \"c\"}\n]\n");
}

TEST(PlanText, FindsTheLastJobsListOfAnObjectPlanAndHandlesEmptyAndOneLineLists) {
  auto obj = append_job_text(R"({"reservations": [{"gpus": [7], "jobs": ["x"]}], "jobs": [{"id": "x"}], "w": 1})",
                             R"({"id": "y"})", nullptr);
  ASSERT_TRUE(obj);
  EXPECT_EQ(*obj, R"({"reservations": [{"gpus": [7], "jobs": ["x"]}], "jobs": [{"id": "x"}, {"id": "y"}], "w": 1})");
  auto empty = append_job_text("{\"jobs\": [ ]}", R"({"id": "y"})", nullptr);
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, "{\"jobs\": [{\"id\": \"y\"} ]}");
  std::string problem;
  EXPECT_FALSE(append_job_text("{\"jobs\": 3}", "{}", &problem));
  EXPECT_THAT(problem, HasSubstr("no list of jobs"));
  EXPECT_FALSE(append_job_text("[{\"id\": \"a\"", "{}", &problem));  // cut short: no closing bracket
}

// ---- the run loop over the fakes

TEST(Reload, AnAddedJobIsQueuedAndStartsAtTheNextTickWithOneLineSayingSo) {
  Reloading l(R"([{"id": "a", "script": "a.sh"}])");
  l.tick();
  EXPECT_THAT(l.launched(), ElementsAre("a"));
  l.source.edit(R"([{"id": "a", "script": "a.sh"}, {"id": "eval_c", "script": "c.sh"}, {"id": "eval_d", "script": "d.sh"}])");
  l.tick();
  EXPECT_THAT(l.launched(), ElementsAre("a", "eval_c", "eval_d"));
  EXPECT_THAT(l.out, testing::Contains(l.line("plan reloaded: +2 jobs (eval_c, eval_d)")));
  EXPECT_EQ(l.loop->plan().jobs.size(), 3u);
  EXPECT_EQ(l.reloaded.size(), 1u);
}

TEST(Reload, ARemovedPendingJobNeverStartsAndARemovedRunningJobFinishesAndIsKeptAsRemoved) {
  Reloading l(R"([{"id": "run", "script": "r.sh", "gpus": 8}, {"id": "wait", "script": "w.sh", "gpus": 8},
                  {"id": "keep", "script": "k.sh", "gpus": 8, "deps": ["run"]}])");
  l.tick();
  ASSERT_THAT(l.launched(), ElementsAre("run"));
  l.source.edit(R"([{"id": "keep", "script": "k.sh", "gpus": 8}])");
  l.tick();
  EXPECT_THAT(l.out, testing::Contains(l.line("plan reloaded: 2 removed (run, wait), 1 changed (keep)")));
  EXPECT_EQ(l.status("run"), Status::Running);  // left to finish: nothing signalled
  EXPECT_TRUE(l.launcher.signals.empty());
  ASSERT_TRUE(l.entry("run").removed);
  EXPECT_THAT(l.launched(), ElementsAre("run"));  // keep waits: run holds every GPU
  long long pid = l.launcher.pid_of("run");
  l.launcher.exit(pid, 1);  // it fails: a job of the plan would be retried; this one never
  auto r = l.tick();
  EXPECT_EQ(l.status("run"), Status::Failed);
  EXPECT_TRUE(l.entry("run").removed);  // kept in the state as removed
  EXPECT_THAT(l.launched(), ElementsAre("run", "keep"));
  l.launcher.exit(l.launcher.pid_of("keep"), 0);
  l.clock.advance(3600);
  r = l.tick();
  EXPECT_EQ(r.next, TickResult::Next::Finished);
  EXPECT_THAT(l.launched(), ElementsAre("run", "keep"));  // neither run nor wait started again
}

TEST(Reload, RunWaitsForARemovedRunningJobBeforeItFinishes) {
  Reloading l(R"([{"id": "a", "script": "a.sh", "gpus": 1}, {"id": "b", "script": "b.sh", "gpus": 1}])");
  l.tick();
  l.source.edit(R"([{"id": "b", "script": "b.sh", "gpus": 1}])");
  l.launcher.exit(l.launcher.pid_of("b"), 0);
  auto r = l.tick();
  EXPECT_EQ(r.next, TickResult::Next::Wait) << "a still runs";
  l.launcher.exit(l.launcher.pid_of("a"), 0);
  r = l.tick();
  EXPECT_EQ(r.next, TickResult::Next::Finished);
}

TEST(Reload, APendingJobTakesItsNewPriorityAtOnce) {
  // One GPU: the order of the waiting jobs is the plan's priority order.
  auto one = [](RunOptions& o) { o.node_gpus = {0}; };
  Reloading l(R"([{"id": "first", "script": "f.sh"}, {"id": "x", "script": "x.sh", "priority": 10},
                  {"id": "y", "script": "y.sh", "priority": 20}])", one);
  l.tick();  // lower priority first: x
  ASSERT_THAT(l.launched(), ElementsAre("x"));
  l.source.edit(R"([{"id": "first", "script": "f.sh", "priority": 1}, {"id": "x", "script": "x.sh", "priority": 10},
                    {"id": "y", "script": "y.sh", "priority": 20}])");
  l.launcher.exit(l.launcher.pid_of("x"), 0);
  l.tick();
  EXPECT_THAT(l.launched(), ElementsAre("x", "first"));  // without the reload: y
}

TEST(Reload, ARunningJobKeepsItsDefinitionAndOnlyItsRetryTakesTheNewOne) {
  Reloading l(R"([{"id": "a", "script": "old.sh", "time_limit_hours": 1}])", [](RunOptions& o) {
    o.retry_after = 0;
  });
  l.tick();
  long long pid = l.launcher.pid_of("a");
  l.source.edit(R"([{"id": "a", "script": "new.sh", "time_limit_hours": 100}])");
  l.tick();
  EXPECT_THAT(l.out, testing::Contains(l.line("plan reloaded: 1 changed (a)")));
  EXPECT_EQ(l.launcher.launches.size(), 1u);  // the running copy is not touched or started again
  EXPECT_TRUE(l.launcher.signals.empty());
  // Its limit is the one it started with: 1 hour, not 100.
  l.clock.advance(3601);
  l.tick();
  EXPECT_EQ(l.status("a"), Status::Failed);
  EXPECT_EQ(l.entry("a").outcome, kTimeoutOutcome);
  EXPECT_THAT(l.launcher.signals, testing::Contains(std::pair{pid, Signal::Term}));
  // Retried by hand: the new script.
  l.launcher.procs[pid].group = false;
  l.control("retry", {"a"});
  l.tick();
  ASSERT_EQ(l.launcher.launches.size(), 2u);
  EXPECT_EQ(l.launcher.launches[0].script, "old.sh");
  EXPECT_EQ(l.launcher.launches[1].script, "new.sh");
}

TEST(Reload, AnEditWithErrorsChangesNothingAndIsSaidOnce) {
  Reloading l(R"([{"id": "a", "script": "a.sh", "gpus": 8}, {"id": "b", "script": "b.sh", "gpus": 8}])");
  l.tick();
  l.source.broken({"plan.json: job 2: \"gpus\" must be a number", "plan.json: job 3: unknown dep \"zz\""});
  l.tick();
  EXPECT_THAT(l.out, testing::Contains(l.line("plan.json: job 2: \"gpus\" must be a number")));
  EXPECT_THAT(l.out, testing::Contains(l.line("plan.json: job 3: unknown dep \"zz\"")));
  EXPECT_TRUE(said(l.out, "the plan on disk has 2 problems; still running the version loaded at "));
  EXPECT_EQ(l.loop->plan().jobs.size(), 2u);
  l.tick();  // the source says Same from now on: nothing more is said
  EXPECT_FALSE(said(l.out, "problem"));
  l.launcher.exit(l.launcher.pid_of("a"), 0);
  l.tick();
  EXPECT_THAT(l.launched(), ElementsAre("a", "b"));  // the old plan goes on
}

// SIGKILL after --kill-grace still comes for a killed job whose definition a reload
// changed or removed, and its GPUs stay busy until its group is gone.
TEST(Reload, AReloadDuringAKillsGraceKeepsTheEscalationAndTheGpus) {
  Reloading l(R"([{"id": "a", "script": "a.sh", "gpus": 8}, {"id": "b", "script": "b.sh", "gpus": 8}])",
              [](RunOptions& o) { o.kill_grace = 30; });
  l.tick();
  long long pid = l.launcher.pid_of("a");
  l.launcher.procs[pid].ignores_term = true;
  l.control("kill", {"a"});
  l.tick();
  l.source.edit(R"([{"id": "b", "script": "b.sh", "gpus": 8}])");
  l.clock.advance(10);
  l.tick();
  EXPECT_THAT(l.launched(), ElementsAre("a")) << "b waits for a's GPUs";
  l.clock.advance(25);
  l.tick();
  EXPECT_THAT(l.launcher.signals, testing::Contains(std::pair{pid, Signal::Kill}));
}

// The exactly-once rule holds across a reload: a job the reloaded plan adds is launched
// held, and released only after the save; a failed save (run dying there) abandons it,
// and the next good tick starts it once.
TEST(Reload, ANewJobIsStartedOnceEvenWhenTheSaveOfItsTickFails) {
  Reloading l(R"([{"id": "a", "script": "a.sh"}])");
  l.tick();
  l.source.edit(R"([{"id": "a", "script": "a.sh"}, {"id": "n", "script": "n.sh"}])");
  l.store.fail_next_write = "disk gone";
  l.tick();
  long long first = l.launcher.pid_of("n");
  EXPECT_TRUE(l.launcher.abandoned.count(first));
  EXPECT_FALSE(l.launcher.released.count(first));
  l.tick();
  long long second = l.launcher.pid_of("n");
  EXPECT_NE(first, second);
  EXPECT_TRUE(l.launcher.released.count(second));
  auto jr = std::find(l.journal.begin(), l.journal.end(), "save");
  auto rel = std::find(l.journal.begin(), l.journal.end(), "release n");
  EXPECT_LT(jr - l.journal.begin(), rel - l.journal.begin());
  size_t released_n = 0;
  for (long long p : l.launcher.released) released_n += l.launcher.procs[p].id == "n";
  EXPECT_EQ(released_n, 1u);
}

TEST(Pause, NothingStartsWhilePausedAndRunningJobsGoOn) {
  std::optional<double> paused;
  Loop l(R"([{"id": "a", "script": "a.sh"}, {"id": "b", "script": "b.sh", "deps": ["a"]}])");
  l.loop->pause_from([&] { return paused; });
  l.tick();
  paused = l.clock.t;
  l.launcher.exit(l.launcher.pid_of("a"), 0);
  l.tick();
  EXPECT_EQ(l.status("a"), Status::Done);
  EXPECT_EQ(l.launcher.launches.size(), 1u) << "b is ready but paused";
  EXPECT_TRUE(said(l.out, "paused since "));
  l.tick();
  EXPECT_FALSE(said(l.out, "paused since ")) << "said once";
  paused.reset();
  l.tick();
  EXPECT_TRUE(said(l.out, "resumed: jobs start again"));
  EXPECT_EQ(l.launcher.launches.size(), 2u);
}

// ---- PlanFile: the plan file on disk

namespace {

void write_text(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

const char* kA = R"([{"id": "a", "script": "a.sh"}])";
const char* kAB = R"([{"id": "a", "script": "a.sh"}, {"id": "b", "script": "b.sh"}])";

}  // namespace

TEST(PlanFile, AnEditorsRenameOverIsLoadedOnce) {
  TempDir d;
  std::string p = d.write("plan.json", kA);
  PlanFile f(p, {0, 1}, kA, 0.25);
  EXPECT_EQ(f.look(100).kind, PlanLook::Kind::Same);
  write_text(d.path() + "/.plan.json.swp", kAB);
  ASSERT_EQ(::rename((d.path() + "/.plan.json.swp").c_str(), p.c_str()), 0);
  PlanLook l = f.look(100);
  ASSERT_EQ(l.kind, PlanLook::Kind::Loaded);
  EXPECT_EQ(l.plan->jobs.size(), 2u);
  EXPECT_EQ(l.text, kAB);
  EXPECT_EQ(f.look(100.1).kind, PlanLook::Kind::Same);
}

TEST(PlanFile, APartialWriteIsNotTakenNorReportedAndTheFullWriteIsLoaded) {
  TempDir d;
  std::string p = d.write("plan.json", kA);
  PlanFile f(p, {0, 1}, kA, 0.25);
  std::string full = kAB;
  write_text(p, full.substr(0, full.size() / 2));  // an editor mid-save
  PlanLook l = f.look(100);
  EXPECT_EQ(l.kind, PlanLook::Kind::Settling);
  EXPECT_NEAR(l.recheck_in, 0.25, 1e-9);
  write_text(p, full);
  l = f.look(100.1);
  ASSERT_EQ(l.kind, PlanLook::Kind::Loaded);
  EXPECT_EQ(l.plan->jobs.size(), 2u);
}

TEST(PlanFile, AnEditWithErrorsIsReportedOnceAfterTheSettleTime) {
  TempDir d;
  std::string p = d.write("plan.json", kA);
  PlanFile f(p, {0, 1}, kA, 0.25);
  write_text(p, R"([{"id": "a", "script": "a.sh", "deps": ["nope"]}])");
  EXPECT_EQ(f.look(100).kind, PlanLook::Kind::Settling);
  EXPECT_EQ(f.look(100.1).kind, PlanLook::Kind::Settling);
  PlanLook l = f.look(100.3);
  ASSERT_EQ(l.kind, PlanLook::Kind::Broken);
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_THAT(l.errors[0], HasSubstr("nope"));
  for (double t : {100.4, 101.0, 110.0}) EXPECT_EQ(f.look(t).kind, PlanLook::Kind::Same) << t;
  write_text(p, kAB);  // fixed
  EXPECT_EQ(f.look(111).kind, PlanLook::Kind::Loaded);
}

// A refused edit (here run --slurm's own refusal, through adapt) reverted to the version in
// use: taken again each time, so that run says so each time (not only when the text differs).
TEST(PlanFile, ARefusedEditRevertedToTheVersionInUseIsTakenAgainEveryTime) {
  TempDir d;
  std::string p = d.write("plan.json", kA);
  PlanFile f(p, {0, 1}, kA, 0.25);
  f.adapt = [](Plan& plan) { return plan.jobs.size() > 1 ? std::string("two jobs") : std::string(); };
  double t = 100;
  for (int round = 0; round < 2; ++round) {
    write_text(p, kAB);
    EXPECT_EQ(f.look(t).kind, PlanLook::Kind::Settling) << round;
    PlanLook bad = f.look(t += 0.3);
    ASSERT_EQ(bad.kind, PlanLook::Kind::Broken) << round;
    EXPECT_THAT(bad.errors.at(0), HasSubstr("two jobs"));
    write_text(p, kA);  // back to the version in use, byte for byte
    PlanLook back = f.look(t += 0.3);
    ASSERT_EQ(back.kind, PlanLook::Kind::Loaded) << round;
    EXPECT_EQ(back.text, kA);
    EXPECT_EQ(f.look(t += 2).kind, PlanLook::Kind::Same) << round;
  }
}

// ---- the plan's own events in the event log and the hooks' filters

TEST(PlanEvents, ReloadPauseAndResumeAreEventKindsTheHooksAcceptAndTheLogKeeps) {
  std::string problem;
  EXPECT_TRUE(parse_hook("reload,pause,resume:notify.sh", &problem)) << problem;
  Event e = plan_event("reload", 1000.5, "run", "+1 job (x)");
  EXPECT_FALSE(job_event(e));
  auto back = parse_event(event_line(e), &problem);
  ASSERT_TRUE(back) << problem;
  EXPECT_EQ(*back, e);
  EXPECT_EQ(back->detail, "+1 job (x)");
  EXPECT_TRUE(attempts_of({e}).empty());  // history's attempts: none of a job
}

// A job a reload removed never runs again: when it goes idle, on_idle "requeue" cannot run it
// again, so it is said once, as "warn" says it, and left to finish (issue 53).
TEST(Reload, ARemovedJobThatGoesIdleIsSaidOnceAndNotRequeued) {
  Reloading l(R"([{"id": "gone", "script": "g.sh", "gpus": 1, "on_idle": "requeue"},
                  {"id": "kept", "script": "k.sh", "gpus": 1, "idle_ok": true}])",
              [](RunOptions& o) { o.settings.idle_minutes = 5; });
  for (auto& [g, mib] : *l.probe.reading.used_mib) l.probe.reading.util_pct[g] = 0;
  l.tick();
  ASSERT_THAT(l.launched(), ElementsAre("gone", "kept"));
  l.source.edit(R"([{"id": "kept", "script": "k.sh", "gpus": 1, "idle_ok": true}])");
  std::vector<std::string> lines;
  for (int minute = 1; minute <= 20; ++minute) {
    l.clock.advance(60);
    l.tick();
    lines.insert(lines.end(), l.out.begin(), l.out.end());
  }
  int said_idle = 0;
  for (const std::string& line : lines) said_idle += line.find("idle: gone: idle 5 min on GPU [0]") != std::string::npos;
  EXPECT_EQ(said_idle, 1) << testing::PrintToString(lines);
  EXPECT_FALSE(said(lines, "requeued gone"));
  EXPECT_TRUE(l.launcher.signals.empty());
  EXPECT_EQ(l.status("gone"), Status::Running);
}
