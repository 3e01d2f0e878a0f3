// The event log (issue 17): what each state change logs, the log file (torn lines,
// rotation, exactly once), hooks, history and learned estimates.
#include <gtest/gtest.h>

#include <ctime>
#include <fmt/format.h>
#include <sstream>
#include <set>
#include <gmock/gmock.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "gpuq/core/events.h"
#include "gpuq/core/rules.h"
#include "gpuq/live/hooks.h"
#include "gpuq/live/journal.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

JobState running(double start, long long attempts, std::vector<int> gpus = {0}, long long pid = 100) {
  JobState s;
  s.status = Status::Running;
  s.start = start;
  s.attempts = attempts;
  s.gpus = gpus;
  s.pid = pid;
  return s;
}

JobState ended(const JobState& r, Status st, long long exit, double end) {
  JobState s = r;
  s.status = st;
  s.exit = exit;
  s.end = end;
  return s;
}

std::vector<std::string> kinds(const std::vector<Event>& es) {
  std::vector<std::string> k;
  for (const Event& e : es) k.push_back(e.kind);
  return k;
}

using V = std::vector<std::string>;

}  // namespace

TEST(EventsBetween, EachChangeOfAnEntryLogsWhatHappened) {
  Seen pending{};
  JobState r = running(1000, 0, {2, 3}, 4242);
  auto start = events_between("a", &pending, r, 1001, "run");
  ASSERT_EQ(kinds(start), V{"start"});
  EXPECT_EQ(start[0].t, 1000);  // dated by the entry, not by now
  EXPECT_EQ(start[0].attempt, 1);
  EXPECT_EQ(start[0].gpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(start[0].pid, 4242);

  Seen run = seen_of(r);
  EXPECT_TRUE(events_between("a", &run, r, 1500, "run").empty()) << "no change, no event";

  auto done = events_between("a", &run, ended(r, Status::Done, 0, 1600), 1601, "run");
  ASSERT_EQ(kinds(done), V{"end"});
  EXPECT_EQ(done[0].outcome, "done");
  EXPECT_EQ(done[0].exit, 0);
  EXPECT_DOUBLE_EQ(*done[0].seconds, 600);
  EXPECT_EQ(done[0].t, 1600);

  auto failed = events_between("a", &run, ended(r, Status::Failed, 3, 1700), 1701, "run");
  ASSERT_EQ(kinds(failed), V{"end"});
  EXPECT_EQ(failed[0].outcome, "failed");
  EXPECT_EQ(failed[0].exit, 3);

  auto killed = events_between("a", &run, ended(r, Status::Failed, kKilledExit, 1200), 1200, "kill");
  EXPECT_EQ(kinds(killed), (V{"kill", "end"}));
  EXPECT_EQ(killed[1].outcome, "killed");
  EXPECT_EQ(killed[0].by, "kill");

  JobState t = ended(r, Status::Failed, kKilledExit, 1300);
  t.outcome = "timeout";
  auto timed = events_between("a", &run, t, 1300, "run");
  EXPECT_EQ(kinds(timed), (V{"timeout", "end"}));
  EXPECT_EQ(timed[1].outcome, "timeout");

  // The automatic retry: failed, then pending with one more attempt, then its start.
  Seen failed_seen = seen_of(ended(r, Status::Failed, 3, 1700));
  JobState again;
  again.attempts = 1;
  auto retry = events_between("a", &failed_seen, again, 2000, "run");
  ASSERT_EQ(kinds(retry), V{"retry"});
  EXPECT_EQ(retry[0].attempt, 2);
  EXPECT_EQ(retry[0].t, 2000);

  JobState held;
  held.status = Status::Held;
  EXPECT_EQ(kinds(events_between("a", &pending, held, 1, "hold")), V{"hold"});
  JobState blocked;
  blocked.status = Status::Blocked;
  EXPECT_TRUE(events_between("a", &pending, blocked, 1, "run").empty()) << "blocked is pending to the log";

  // Seen late (the original ran it, or run crashed before logging): failed, retried, run and done.
  JobState later = ended(running(3000, 1), Status::Done, 0, 3600);
  auto seen_late = events_between("a", &failed_seen, later, 4000, "run");
  EXPECT_EQ(kinds(seen_late), (V{"retry", "start", "end"}));
  EXPECT_EQ(seen_late[1].t, 3000);
  EXPECT_DOUBLE_EQ(*seen_late[2].seconds, 600);
  // A launch that failed (no start): its end alone, lost.
  JobState lost;
  lost.status = Status::Failed;
  lost.exit = kLostExit;
  lost.end = 7;
  auto launch = events_between("a", &pending, lost, 7, "run");
  ASSERT_EQ(kinds(launch), V{"end"});
  EXPECT_EQ(launch[0].outcome, "lost");

  // One write that ended an attempt and started the next (--retry-after 0): both.
  auto both = events_between("a", &run, running(2100, 1), 2100, "run");
  EXPECT_EQ(kinds(both), (V{"end", "start"}));
  EXPECT_EQ(both[0].outcome, "unknown");
  EXPECT_EQ(both[1].attempt, 2);

  // A job the log never saw: its start if it runs (adopted), else nothing to say.
  EXPECT_EQ(kinds(events_between("a", nullptr, r, 5, "run")), V{"start"});
  EXPECT_TRUE(events_between("a", nullptr, ended(r, Status::Done, 0, 9), 9, "run").empty());
  EXPECT_TRUE(events_between("a", nullptr, held, 9, "run").empty());
}

// Replaying what events_between logs rebuilds a view from which the same entry logs
// nothing more, whatever the changes and however many a writer saw at once (a crash
// between a state write and its log append): so a restarted run logs nothing twice.
// A launch cut short at its start line (its run died before releasing it) never ran, and its
// start is never logged: its abort is no event. A requeue of a job that ran ends its attempt.
TEST(EventsOf, AnAbortedLaunchIsNoEventButARequeueEndsTheAttempt) {
  JobState r = running(1000, 2, {1}, 4242);
  JobState waiting;
  waiting.attempts = 2;
  Change abort{0, LifeKind::Running, Waiting{2}, Cause::Abort};
  EXPECT_TRUE(events_of("a", abort, r, waiting, 1001, "run").empty());
  Change requeue{0, LifeKind::Running, Waiting{2}, Cause::Requeued};
  auto requeued = events_of("a", requeue, r, waiting, 1001, "run");
  ASSERT_EQ(kinds(requeued), (V{"end", "requeue"}));
  EXPECT_EQ(requeued[0].outcome, "requeued");
  EXPECT_EQ(requeued[0].started, 1000);
}

TEST(EventsBetween, ReplayingTheEventsLeavesNothingToLogForRandomChanges) {
  const uint64_t seed = test_seed(17);
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, 7);
  Seen view{};
  JobState s;
  double now = 1000;
  std::uniform_int_distribution<int> seen_after(1, 3);
  size_t logged = 0;
  for (int i = 0; i < 5000; ++i) {
   JobState next = s;
   for (int k = seen_after(rng); k > 0; --k) {
    now += 10;
    s = next;
    switch (pick(rng)) {
      case 0: next = running(now, s.attempts_or0()); break;
      case 1: if (s.status == Status::Running) next = ended(s, Status::Done, 0, now); break;
      case 2: if (s.status == Status::Running) next = ended(s, Status::Failed, 1, now); break;
      case 3: if (s.status == Status::Running) next = ended(s, Status::Failed, kKilledExit, now); break;
      case 4: next = JobState{}; next.attempts = s.attempts_or0() + 1; break;
      case 5: next = JobState{}; next.status = Status::Held; break;
      case 6: next = JobState{}; next.status = Status::Blocked; break;
      default: next = JobState{}; break;
    }
   }
    for (const Event& e : events_between("j", &view, next, now, "run")) {
      ++logged;
      // Each line survives the file: what is replayed is what a reader parses.
      std::string problem;
      auto back = parse_event(event_line(e), &problem);
      ASSERT_TRUE(back) << problem;
      ASSERT_EQ(*back, e);
      apply_event(*back, view);
    }
    ASSERT_TRUE(events_between("j", &view, next, now + 1, "run").empty()) << "step " << i;
    if (next.status == Status::Running || next.status == Status::Done || next.status == Status::Failed ||
        next.status == Status::Held) {
      ASSERT_EQ(view, seen_of(next)) << "step " << i;
    }
    s = next;
  }
  EXPECT_GT(logged, 3000u);
}

TEST(EventLine, IsOneLineOfJsonThatParsesBackExactly) {
  Event e;
  e.t = 1764582790.1234567;
  e.kind = "end";
  e.id = "eval \"x\"\n";
  e.attempt = 3;
  e.gpus = std::vector<int>{4, 5};
  e.outcome = "failed";
  e.exit = 137;
  e.seconds = 12.5;
  e.by = "run";
  std::string line = event_line(e);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  json j = json::parse(line);
  EXPECT_EQ(j["time"], "2025-12-01T09:53:10.123Z");
  EXPECT_EQ(j["event"], "end");
  auto back = parse_event(line, nullptr);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, e);
  std::string problem;
  EXPECT_FALSE(parse_event("{\"t\":1,\"event\":\"st", &problem));
  EXPECT_THAT(problem, HasSubstr("not JSON"));
  EXPECT_FALSE(parse_event("[1]", &problem));
}

TEST(Journal, ATornLastLineIsSkippedWithAWarningAndTheNextAppendStartsAFreshLine) {
  TempDir d;
  std::string path = d.path() + "/p.events.jsonl";
  Event a;
  a.t = 10;
  a.kind = "hold";
  a.id = "a";
  a.by = "hold";
  append_events(path, {a});
  // A crash in the middle of the next line.
  std::string torn = event_line(a);
  torn.resize(torn.size() / 2);
  d.write("p.events.jsonl", d.read("p.events.jsonl") + torn);
  Event b = a;
  b.id = "b";
  append_events(path, {b});
  std::vector<std::string> warnings;
  auto events = read_events(path, &warnings);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].id, "a");
  EXPECT_EQ(events[1].id, "b");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("p.events.jsonl line 2: skipped"));
}

TEST(Journal, LogsEachChangeOnceAndCatchesUpWithOtherWriters) {
  TempDir d;
  std::string path = d.path() + "/p.events.jsonl";
  State st;
  st.at("done_before");  // pending
  st.set("done_before", ended(running(1, 0), Status::Done, 0, 2));
  Journal j(path, 0);
  EXPECT_TRUE(j.catch_up(st, nullptr).empty());
  EXPECT_TRUE(j.record(st, 5, "run").empty()) << "with no log yet, logging begins with the state as it is";
  EXPECT_TRUE(read_events(path, nullptr).empty()) << "made empty, to mark when logging began";

  st.set("a", running(10, 0));
  EXPECT_EQ(kinds(j.record(st, 10, "run")), V{"start"});
  EXPECT_TRUE(j.record(st, 11, "run").empty()) << "logged once";

  // A control command kills a: its lines are appended by it; run reads them and logs nothing twice.
  Seen before = seen_of(*st.find("a"));
  st.set("a", ended(*st.find("a"), Status::Failed, kKilledExit, 20));
  append_events(path, events_between("a", &before, *st.find("a"), 20, "kill"));
  auto others = j.catch_up(st, nullptr);
  EXPECT_EQ(kinds(others), (V{"kill", "end"}));
  EXPECT_TRUE(j.record(st, 21, "run").empty());

  // A writer that crashed after its state write, before its append: the next record logs it.
  st.set("a", JobState{});
  EXPECT_EQ(kinds(j.record(st, 30, "run")), V{"retry"});

  // A restarted run reads the whole log: nothing logged twice, the next change logged.
  Journal again(path, 0);
  again.catch_up(st, nullptr);
  EXPECT_TRUE(again.record(st, 40, "run").empty());
  st.set("a", running(50, 0));
  EXPECT_EQ(kinds(again.record(st, 50, "run")), V{"start"});
  auto all = read_events(path, nullptr);
  EXPECT_EQ(kinds(all), (V{"start", "kill", "end", "retry", "start"}));
}

// The log begins when the run's tick read the state (its clock), not when the file was made later
// in the tick: a job that tick launched, its run killed before its first append, is logged from its
// start by the next run, not taken for one that ran before logging began (the file's own coarse
// mtime came after job0's start under load, and its start was never logged).
TEST(Journal, ALogMadeInATickBeginsAtThatTicksClock) {
  TempDir d;
  std::string path = d.path() + "/p.events.jsonl";
  State st;
  st.set("before", running(500, 0));  // in the state when logging began: its past is not logged
  Journal j(path, 0);
  j.catch_up(st, nullptr, nullptr, 1000.0);
  struct stat made {};
  ASSERT_EQ(::stat(path.c_str(), &made), 0);
  EXPECT_NEAR(static_cast<double>(made.st_mtim.tv_sec) + made.st_mtim.tv_nsec * 1e-9, 1000.0, 0.01);
  st.set("job0", running(1000.0, 0));  // launched at the tick's clock; the run dies before its append
  Journal again(path, 0);
  again.catch_up(st, nullptr, nullptr, 1005.0);
  std::vector<Event> late = again.record(st, 1005.0, "run");
  ASSERT_EQ(kinds(late), V{"start"});
  EXPECT_EQ(late[0].id, "job0");
}

TEST(Journal, RotatesPastItsSizeAndReadersReadEveryPartInOrder) {
  TempDir d;
  std::string path = d.path() + "/p.events.jsonl";
  Journal j(path, 300);  // bytes: a couple of lines
  State st;
  j.catch_up(st, nullptr);
  for (int i = 0; i < 12; ++i) {
    st.set("j" + std::to_string(i), running(100 + i, 0));
    j.record(st, 100 + i, "run");
  }
  EXPECT_TRUE(fs::exists(path + ".1"));
  EXPECT_TRUE(fs::exists(path + ".2"));
  auto all = read_events(path, nullptr);
  ASSERT_EQ(all.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(all[i].id, "j" + std::to_string(i));
  // A restarted run sees every part: nothing is logged again.
  Journal again(path, 300);
  again.catch_up(st, nullptr);
  EXPECT_TRUE(again.record(st, 200, "run").empty());
}

TEST(Hooks, NamesBeforeAColonFilterAndAnythingElseIsTheCommand) {
  auto h = parse_hook("failed,timeout:notify.sh \"$GPUQ_JOB_ID\"", nullptr);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->command, "notify.sh \"$GPUQ_JOB_ID\"");
  EXPECT_EQ(h->only, (V{"failed", "timeout"}));
  auto url = parse_hook("curl -d @- https://chat.example/hook", nullptr);
  ASSERT_TRUE(url);
  EXPECT_TRUE(url->only.empty());
  EXPECT_EQ(url->command, "curl -d @- https://chat.example/hook");
  std::string problem;
  EXPECT_FALSE(parse_hook("fialed:x", &problem));
  EXPECT_THAT(problem, HasSubstr("\"fialed\" is not an event kind"));
  EXPECT_FALSE(parse_hook("end:", &problem));

  Event end;
  end.kind = "end";
  end.outcome = "failed";
  EXPECT_TRUE(hook_wants(*h, end));
  end.outcome = "done";
  EXPECT_FALSE(hook_wants(*h, end));
  Event timeout;
  timeout.kind = "timeout";
  EXPECT_TRUE(hook_wants(*h, timeout));
  end.outcome = "timeout";  // the end after a timeout: the hook runs once, for the timeout event
  EXPECT_FALSE(hook_wants(*h, end));
}

namespace {

Attempt done_run(const std::string& id, double hours, long long attempt = 1) {
  Attempt a;
  a.id = id;
  a.attempt = attempt;
  a.start = 1000;
  a.end = 1000 + hours * 3600;
  a.outcome = "done";
  return a;
}

}  // namespace

TEST(Estimates, MedianRatioPerPrefixFromDoneRunsOnly) {
  Plan plan = plan_of(R"([
    {"id": "train_a", "script": "x.sh", "gpus": 1, "est_hours": 2},
    {"id": "train_b", "script": "x.sh", "gpus": 1, "est_hours": 4},
    {"id": "train_c", "script": "x.sh", "gpus": 1, "est_hours": 1},
    {"id": "train_d", "script": "x.sh", "gpus": 1, "est_hours": 10},
    {"id": "eval_a", "script": "x.sh", "gpus": 1, "est_hours": 1},
    {"id": "eval_b", "script": "x.sh", "gpus": 1, "est_hours": 0.5}
  ])");
  std::vector<Attempt> runs{done_run("train_a", 3), done_run("train_b", 6), done_run("train_c", 2),
                            done_run("eval_a", 0.5), done_run("gone_x", 9)};
  Attempt failed = done_run("train_c", 0.1, 2);
  failed.outcome = "failed";  // a failed run says nothing of how long the job takes
  runs.push_back(failed);
  auto learned = learn_estimates(runs, plan);
  ASSERT_EQ(learned.size(), 2u);
  EXPECT_EQ(learned[0].prefix, "eval_");
  EXPECT_EQ(learned[0].runs, 1u);
  EXPECT_EQ(learned[1].prefix, "train_");
  EXPECT_EQ(learned[1].runs, 3u);
  EXPECT_DOUBLE_EQ(learned[1].median, 1.5);  // 3/2, 6/4, 2/1 -> 1.5, 1.5, 2
  EXPECT_DOUBLE_EQ(learned[1].low, 1.5);
  EXPECT_DOUBLE_EQ(learned[1].high, 2);
  EXPECT_DOUBLE_EQ(learned[1].median_hours, 3);

  State st;
  st.set("train_a", ended(running(1, 0), Status::Done, 0, 2));
  auto used = apply_learned(plan, st, learned);
  ASSERT_EQ(used.size(), 1u) << "eval_ has one run, under the 3 needed";
  EXPECT_DOUBLE_EQ(plan.find("train_d")->est_hours, 15);
  EXPECT_DOUBLE_EQ(plan.find("train_a")->est_hours, 2) << "a job that ran keeps its estimate";
  EXPECT_DOUBLE_EQ(plan.find("eval_b")->est_hours, 0.5);

  // train_d's 10 h (now 15 after learning, but validate reads the plan as written) is
  // over 3x the 3 h median: warned. train_b's 4 h is not.
  Plan written = plan_of(R"([{"id": "train_d", "script": "x.sh", "gpus": 1, "est_hours": 10},
                             {"id": "train_b", "script": "x.sh", "gpus": 1, "est_hours": 4}])");
  auto warnings = estimate_warnings(written, State{}, learned);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].job, "train_d");
  EXPECT_THAT(warnings[0].text, HasSubstr("3.3x the median run time of the 3 train_* runs"));
}

TEST(Estimates, AttemptsArePutTogetherFromStartsAndEnds) {
  std::vector<Event> es;
  auto ev = [&](double t, const char* kind, const char* id, long long attempt) {
    Event e;
    e.t = t;
    e.kind = kind;
    e.id = id;
    e.attempt = attempt;
    return e;
  };
  es.push_back(ev(10, "start", "a", 1));
  es.push_back(ev(11, "start", "b", 1));
  es.push_back(ev(20, "kill", "a", 1));
  Event end = ev(20, "end", "a", 1);
  end.outcome = "killed";
  end.exit = -15;
  es.push_back(end);
  es.push_back(ev(30, "retry", "a", 2));
  es.push_back(ev(40, "start", "a", 2));
  auto att = attempts_of(es);
  ASSERT_EQ(att.size(), 3u);
  EXPECT_EQ(att[0].id, "a");
  EXPECT_EQ(att[0].outcome, "killed");
  EXPECT_EQ(att[0].causes, V{"kill"});
  EXPECT_EQ(att[0].end, 20);
  EXPECT_EQ(att[1].id, "b");
  EXPECT_FALSE(att[1].outcome) << "still running";
  EXPECT_EQ(att[2].attempt, 2);
  EXPECT_EQ(att[2].start, 40);
}

// Real processes: run logs every start and end, the control commands their own events,
// and the hooks run with the event in their environment and on stdin.
TEST(EventLogRun, RunAndControlCommandsLogAndHooksSeeEachEvent) {
  TempDir d;
  std::map<std::string, std::string> env = fake_nvidia_smi(d, idle_gpus(2));
  env["GPUQ_EVENTS_COPY"] = d.path() + "/copy.jsonl";
  d.write("ok.sh", "exit 0\n");
  d.write("bad.sh", "exit 3\n");
  d.write("gate.sh", "while [ ! -e go ]; do sleep 0.02; done\n");
  d.write("plan.json", R"([
    {"id": "ok", "script": "ok.sh", "gpus": 1, "est_hours": 0.1},
    {"id": "bad", "script": "bad.sh", "gpus": 1, "est_hours": 0.1, "deps": ["ok"]},
    {"id": "slow", "script": "gate.sh", "gpus": 1, "est_hours": 0.1}
  ])");
  d.write("hook.sh", "read -r line; echo \"$GPUQ_EVENT $GPUQ_JOB_ID ${GPUQ_OUTCOME:-} ${GPUQ_EXIT:-} $line\" >> hooks.txt\n");
  auto run = start_gpuq({"run", "--plan", "plan.json", "--gpus", "0,1", "--poll", "1", "--max-retries", "0",
                         "--on-event", "bash hook.sh", "--on-event", "failed:exit 7", "--on-event", "start:sleep 30",
                         "--on-event", std::string(EXAMPLES) + "/hooks/append.sh", "--hook-timeout", "1"},
                        d.path(), env);
  ASSERT_TRUE(eventually([&] { return d.read("plan.state.json").find("\"bad\"") != std::string::npos &&
                                      json::parse(d.read("plan.state.json"))["bad"]["status"] == "failed"; }));
  ASSERT_TRUE(eventually([&] { return json::parse(d.read("plan.state.json"))["slow"]["status"] == "running"; }));
  auto k = run_gpuq({"kill", "--plan", "plan.json", "slow"}, d.path(), env);
  ASSERT_EQ(k.status, 0) << k.out << k.err;
  auto r = run->wait(kPatience);
  ASSERT_EQ(r.status, 3) << r.out << r.err;  // 3: a job did not end done

  auto events = read_events(d.path() + "/plan.events.jsonl", nullptr);
  std::map<std::string, V> per_job;
  for (const Event& e : events) per_job[e.id].push_back(e.kind + (e.outcome ? ":" + *e.outcome : "") + "/" + e.by);
  EXPECT_EQ(per_job["ok"], (V{"start/run", "end:done/run"}));
  EXPECT_EQ(per_job["bad"], (V{"start/run", "end:failed/run"}));
  EXPECT_EQ(per_job["slow"], (V{"start/run", "kill/kill", "end:killed/kill"}));

  // The hook that logs each event saw all 7, with their variables and the JSON line on stdin.
  ASSERT_TRUE(eventually([&] { return lines_of(d.path() + "/hooks.txt").size() >= 7; }));
  auto hooks = lines_of(d.path() + "/hooks.txt");
  EXPECT_EQ(hooks.size(), 7u);
  std::string all;
  for (auto& l : hooks) all += l + "\n";
  EXPECT_THAT(all, HasSubstr("end bad failed 3 {"));
  EXPECT_THAT(all, HasSubstr("kill slow"));
  EXPECT_THAT(all, HasSubstr("\"event\":\"end\",\"id\":\"bad\""));
  // The example hook copies each event's line from stdin: the copy is the log.
  ASSERT_TRUE(eventually([&] { return lines_of(d.path() + "/copy.jsonl").size() >= 7; }));
  auto copy = lines_of(d.path() + "/copy.jsonl");
  auto log = lines_of(d.path() + "/plan.events.jsonl");
  std::sort(copy.begin(), copy.end());
  std::sort(log.begin(), log.end());
  EXPECT_EQ(copy, log);
  // A failing hook, and one past its timeout, are each said once per event kind.
  EXPECT_THAT(r.out, HasSubstr("hook 2 (failed:exit 7) failed (exit 7) for the end event of bad"));
  EXPECT_THAT(r.out, HasSubstr("hook 3 (start:sleep 30) ran past --hook-timeout 1 s"));
  size_t first = r.out.find("hook 3 (");
  EXPECT_EQ(r.out.find("hook 3 (", first + 1), std::string::npos) << r.out;

  // history: one row per attempt, how each ended.
  auto h = run_gpuq({"history", "--plan", "plan.json"}, d.path(), env);
  ASSERT_EQ(h.status, 0) << h.err;
  EXPECT_THAT(h.out, HasSubstr("failed (exit 3)"));
  EXPECT_THAT(h.out, HasSubstr("killed (exit -15)"));
  auto hj = json::parse(run_gpuq({"history", "--plan", "plan.json", "--json", "--job", "slow"}, d.path(), env).out);
  ASSERT_EQ(hj.size(), 1u);
  EXPECT_EQ(hj[0]["outcome"], "killed");
  EXPECT_EQ(hj[0]["causes"], json::array({"kill"}));
}

// Issue 25, point 5: a hook gets the events logged while no run was going (a retry from the
// shell), each exactly once across runs; a hook new to the plan does not get the log's past.
TEST(EventLogRun, HooksGetEventsMadeWhileNoRunWasGoingOnceAcrossRuns) {
  TempDir d;
  std::map<std::string, std::string> env = fake_nvidia_smi(d, idle_gpus(2));
  d.write("ok.sh", "exit 0\n");
  d.write("bad.sh", "exit 3\n");
  d.write("plan.json", R"([
    {"id": "ok", "script": "ok.sh", "gpus": 1, "est_hours": 0.1},
    {"id": "broken", "script": "bad.sh", "gpus": 1, "est_hours": 0.1}
  ])");
  d.write("hook.sh", "read -r line; echo \"$line\" >> hooks.jsonl\n");
  d.write("hook2.sh", "read -r line; echo \"$line\" >> hooks2.jsonl\n");
  auto sorted = [&](const std::string& name) {
    auto l = lines_of(d.path() + "/" + name);
    std::sort(l.begin(), l.end());
    return l;
  };
  std::vector<std::string> run_args{"run", "--plan", "plan.json", "--gpus", "0,1", "--poll", "1",
                                    "--max-retries", "0", "--on-event", "bash hook.sh"};
  auto r1 = run_gpuq(run_args, d.path(), env);
  ASSERT_EQ(r1.status, 3) << r1.out << r1.err;
  ASSERT_EQ(lines_of(d.path() + "/plan.events.jsonl").size(), 4u);  // two starts, two ends
  EXPECT_EQ(sorted("hooks.jsonl"), sorted("plan.events.jsonl"));

  // No run going: the retry is logged, and no hook runs for it yet.
  auto retry = run_gpuq({"retry", "--plan", "plan.json", "broken"}, d.path(), env);
  ASSERT_EQ(retry.status, 0) << retry.out << retry.err;
  ASSERT_EQ(lines_of(d.path() + "/plan.events.jsonl").size(), 5u);
  d.write("bad.sh", "exit 0\n");

  auto r2 = run_gpuq(run_args, d.path(), env);
  ASSERT_EQ(r2.status, 0) << r2.out << r2.err;
  auto log = sorted("plan.events.jsonl");
  ASSERT_EQ(log.size(), 7u);  // + the retry, the new attempt's start and end
  EXPECT_EQ(sorted("hooks.jsonl"), log) << "each event once, the retry made while no run was going too";

  // A third run (nothing to do) gives none again; a hook new to the plan starts from now.
  auto more = run_args;
  more.insert(more.end(), {"--on-event", "bash hook2.sh"});
  auto r3 = run_gpuq(more, d.path(), env);
  ASSERT_EQ(r3.status, 0) << r3.out << r3.err;
  EXPECT_EQ(sorted("hooks.jsonl"), sorted("plan.events.jsonl"));
  EXPECT_TRUE(lines_of(d.path() + "/hooks2.jsonl").empty());
  auto marks = json::parse(d.read("plan.hooks.json"));
  EXPECT_EQ(marks["bash hook.sh"]["events"], 7);
  EXPECT_EQ(marks["bash hook2.sh"]["events"], 7);
}

// Where a hook goes on from: its mark when the log still has its last event there; the place
// of that event when the numbers moved (an old part of the log removed); else after the events
// no later than it.
TEST(Hooks, GoOnFromTheirLastEventWhereverTheLogHasIt) {
  auto ev = [](double t, const std::string& kind, const std::string& id) {
    Event e = plan_event(kind, t, "run");
    e.id = id;
    e.attempt = 1;
    return e;
  };
  std::vector<Event> past{ev(1, "start", "a"), ev(2, "end", "a"), ev(3, "retry", "b"), ev(4, "start", "b")};
  EXPECT_EQ(resume_from(past, {2, past[1]}), 2);
  EXPECT_EQ(resume_from(past, {3, past[1]}), 2) << "found where it is now";
  EXPECT_EQ(resume_from(past, {9, past[3]}), 4);
  EXPECT_EQ(resume_from(past, {2, ev(2.5, "hold", "c")}), 2) << "gone: after those dated no later";
  EXPECT_EQ(resume_from(past, {0, std::nullopt}), 0);
  EXPECT_EQ(resume_from(past, {12, std::nullopt}), 4) << "never past the end";

  std::map<std::string, HookMark> marks{{"bash hook.sh", {2, past[1]}}, {"end:notify", {0, std::nullopt}}};
  std::string problem;
  auto back = parse_hook_marks(hook_marks_text(marks), "p.hooks.json", &problem);
  EXPECT_EQ(problem, "");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back["bash hook.sh"].events, 2);
  EXPECT_EQ(back["bash hook.sh"].last, past[1]);
  EXPECT_FALSE(back["end:notify"].last);
  parse_hook_marks("{\"h\": {\"events\": 2,}\n", "p.hooks.json", &problem);
  EXPECT_THAT(problem, HasSubstr("p.hooks.json: line 1"));
  EXPECT_THAT(problem, HasSubstr("not valid JSON"));
  problem.clear();
  auto some = parse_hook_marks(R"({"h": {"events": -1}, "g": {"events": 3}})", "p.hooks.json", &problem);
  EXPECT_EQ(problem, "p.hooks.json: hook \"h\": \"events\" is not a whole number >= 0");
  EXPECT_EQ(some.size(), 1u);
}

TEST(EventLogRun, ABadOnEventIsRefusedBeforeAnythingStarts) {
  TempDir d;
  d.write("ok.sh", "exit 0\n");
  d.write("plan.json", R"([{"id": "ok", "script": "ok.sh", "gpus": 1, "est_hours": 0.1}])");
  auto r = run_gpuq({"run", "--plan", "plan.json", "--on-event", "fail:echo"}, d.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("\"fail\" is not an event kind"));
  EXPECT_FALSE(fs::exists(d.path() + "/plan.state.json"));
}

// Issue 25, point 7: with every train_ job done, --learned-estimates said "no id prefix has 3
// done runs" while history --estimates showed train_ with 10. It says what is true.
TEST(EventLog, LearnedEstimatesSayWhyNothingWasScaled) {
  Learned train{"train_", 10, 1.25, 1, 2, 5}, eval{"eval_", 2, 0.5, 0.5, 0.5, 1};
  EXPECT_EQ(learned_text({train, eval}, {}), "learned train_* x1.25 (10 runs), but no pending job has that prefix; "
                                             "est_hours as written");
  EXPECT_EQ(learned_text({eval}, {}), "no id prefix has 3 done runs in the event log yet; est_hours as written");
  EXPECT_EQ(learned_text({train, eval}, {train}), "pending train_* x1.25 (10 runs)");
  EXPECT_THAT(learned_text({train, eval}, {}, 2), HasSubstr("but no pending job has one of these prefixes"));
  // From the plan: every train_ job done, so none is scaled.
  Plan plan = plan_of(R"([{"id": "train_a", "script": "x.sh", "est_hours": 1},
                          {"id": "train_b", "script": "x.sh", "est_hours": 1},
                          {"id": "train_c", "script": "x.sh", "est_hours": 2}])");
  std::vector<Attempt> runs{done_run("train_a", 2), done_run("train_b", 2), done_run("train_c", 4)};
  State st;
  for (const char* id : {"train_a", "train_b", "train_c"}) st.set(id, ended(running(1, 0), Status::Done, 0, 2));
  auto learned = learn_estimates(runs, plan);
  auto used = apply_learned(plan, st, learned);
  EXPECT_THAT(learned_text(learned, used), HasSubstr("learned train_* x2.00 (3 runs), but no pending job"));
}

TEST(EventLogRun, HistoryEstimatesAndLearnedPredictionsFromAFixtureLog) {
  TempDir d;
  d.write("x.sh", "exit 0\n");
  d.write("plan.json", R"([
    {"id": "train_a", "script": "x.sh", "gpus": 1, "est_hours": 1},
    {"id": "train_b", "script": "x.sh", "gpus": 1, "est_hours": 1},
    {"id": "train_c", "script": "x.sh", "gpus": 1, "est_hours": 2},
    {"id": "train_new", "script": "x.sh", "gpus": 1, "est_hours": 2},
    {"id": "train_huge", "script": "x.sh", "gpus": 1, "est_hours": 40}
  ])");
  // Three done runs: 2 h for est 1, 2 h for est 1, 4 h for est 2: all 2x.
  std::string log;
  double t = 1764500000;
  for (auto [id, hours] : std::vector<std::pair<std::string, double>>{{"train_a", 2}, {"train_b", 2}, {"train_c", 4}}) {
    Event s;
    s.t = t;
    s.kind = "start";
    s.id = id;
    s.by = "run";
    Event e = s;
    e.kind = "end";
    e.t = t + hours * 3600;
    e.outcome = "done";
    e.exit = 0;
    log += event_line(s) + "\n" + event_line(e) + "\n";
  }
  d.write("plan.events.jsonl", log);
  auto est = run_gpuq({"history", "--plan", "plan.json", "--estimates"}, d.path());
  ASSERT_EQ(est.status, 0) << est.err;
  EXPECT_THAT(est.out, HasSubstr("train_"));
  EXPECT_THAT(est.out, HasSubstr("2.00x"));
  // Spans as people read them (issue 51, item 10): "ran 4.0h", a short one in minutes or seconds.
  EXPECT_THAT(est.out, HasSubstr("train_c (attempt 1): ran 4.0h, est_hours 2 (2.0h): 2.00x")) << est.out;
  auto sim = run_gpuq({"simulate", "--plan", "plan.json", "--json"}, d.path());
  auto learned = run_gpuq({"simulate", "--plan", "plan.json", "--json", "--learned-estimates"}, d.path());
  ASSERT_EQ(learned.status, 0) << learned.err;
  EXPECT_THAT(learned.err, HasSubstr("train_* x2.00 (3 runs)"));
  // Five 1-GPU jobs on 8 GPUs run side by side: the plan takes its longest job, 40 h, then 80 h.
  EXPECT_DOUBLE_EQ(json::parse(sim.out)["makespan_hours"].get<double>(), 40);
  EXPECT_DOUBLE_EQ(json::parse(learned.out)["makespan_hours"].get<double>(), 80);
  auto v = run_gpuq({"validate", "--plan", "plan.json"}, d.path());
  EXPECT_THAT(v.out, HasSubstr("job 'train_huge': est_hours 40 is 20.0x the median run time of the 3 train_* runs"));
  EXPECT_THAT(v.out, Not(HasSubstr("job 'train_new'")));
}

// A plan folder whose event log has three attempts: "old" ended 3 days before `now`, "recent"
// an hour before, "now" still running (started 10 minutes before).
static void three_attempts_ending_at_three_ages(TempDir& d, double now) {
  d.write("x.sh", "exit 0\n");
  d.write("plan.json", R"([{"id": "old", "script": "x.sh"}, {"id": "recent", "script": "x.sh"},
                           {"id": "now", "script": "x.sh"}])");
  std::string log;
  auto attempt = [&](const std::string& id, double start, std::optional<double> end) {
    Event s;
    s.t = start;
    s.kind = "start";
    s.id = id;
    s.by = "run";
    log += event_line(s) + "\n";
    if (!end) return;
    Event e = s;
    e.kind = "end";
    e.t = *end;
    e.outcome = "done";
    e.exit = 0;
    log += event_line(e) + "\n";
  };
  attempt("old", now - 4 * 86400, now - 3 * 86400);
  attempt("recent", now - 7200, now - 3600);
  attempt("now", now - 600, std::nullopt);
  d.write("plan.events.jsonl", log);
}

// history --since (issue 31: an untested flag): an attempt counts by its end (a running one by
// now); every form of the time is taken, and a word that is no time is refused naming the flag.
TEST(EventLogRun, HistorySinceKeepsTheAttemptsEndedSinceInEachFormAndRefusesAnythingElse) {
  TempDir d;
  double now = static_cast<double>(std::time(nullptr));
  three_attempts_ending_at_three_ages(d, now);
  auto ids = [&](const std::string& since) {
    auto h = run_gpuq({"history", "--plan", "plan.json", "--json", "--since", since}, d.path());
    EXPECT_EQ(h.status, 0) << since << ": " << h.err;
    std::set<std::string> out;
    for (const auto& a : json::parse(h.out.empty() ? "[]" : h.out)) out.insert(a["id"].get<std::string>());
    return out;
  };
  EXPECT_EQ(ids("2d"), (std::set<std::string>{"recent", "now"}));
  EXPECT_EQ(ids("30m"), (std::set<std::string>{"now"}));
  EXPECT_EQ(ids("5d"), (std::set<std::string>{"old", "recent", "now"}));
  EXPECT_EQ(ids(std::to_string(static_cast<long long>(now - 2 * 3600))), (std::set<std::string>{"recent", "now"}));
  auto bad = run_gpuq({"history", "--plan", "plan.json", "--since", "yesterday"}, d.path());
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.err, HasSubstr("--since yesterday: not a time"));
}

// history --since, the rest of its forms (issue 31): a date, or a date and a time (minutes or
// seconds, after a space or a T), is the command's local time (TZ): the same words are an
// instant 9 h later 9 h west of UTC; a number of seconds ("s") or a fraction of a unit counts
// back from now; and whatever is no time (a unit it does not know, a negative age, a small
// bare number, a month 13, words after the time, infinity) is refused naming the flag, with
// nothing printed.
TEST(EventLogRun, HistorySinceReadsDatesAsLocalTimeAndRefusesWhatIsNoTime) {
  TempDir d;
  double now = static_cast<double>(std::time(nullptr));
  three_attempts_ending_at_three_ages(d, now);
  auto ids = [&](const std::string& since, const std::string& tz = "UTC") {
    auto h = run_gpuq({"history", "--plan", "plan.json", "--json", "--since", since}, d.path(), {{"TZ", tz}});
    EXPECT_EQ(h.status, 0) << since << ": " << h.err;
    std::set<std::string> out;
    for (const auto& a : json::parse(h.out.empty() ? "[]" : h.out)) out.insert(a["id"].get<std::string>());
    return out;
  };
  // The UTC wall-clock text of `t`, written with `format`.
  auto utc = [](double t, const char* format) {
    std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, format, &tm);
    return std::string(buf);
  };
  using Ids = std::set<std::string>;
  for (const char* format : {"%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"}) {
    SCOPED_TRACE(format);
    EXPECT_EQ(ids(utc(now - 7200, format)), (Ids{"recent", "now"}));  // two hours ago, in UTC
    std::string half_hour_ago = utc(now - 1800, format);
    EXPECT_EQ(ids(half_hour_ago), Ids{"now"});
    // The same words 9 h east of UTC were 9 h earlier; 9 h west, 9 h later (after now: nothing).
    EXPECT_EQ(ids(half_hour_ago, "EAST-9"), (Ids{"recent", "now"}));
    EXPECT_EQ(ids(half_hour_ago, "WEST+9"), Ids{});
  }
  // A date alone is its midnight: two days ago, after the end of old and before recent's.
  EXPECT_EQ(ids(utc(now - 2 * 86400, "%Y-%m-%d")), (Ids{"recent", "now"}));
  EXPECT_EQ(ids(utc(now - 5 * 86400, "%Y-%m-%d")), (Ids{"old", "recent", "now"}));
  EXPECT_EQ(ids("1.5h"), (Ids{"recent", "now"}));
  EXPECT_EQ(ids("0.5h"), Ids{"now"});
  EXPECT_EQ(ids("5400s"), (Ids{"recent", "now"}));
  EXPECT_EQ(ids("1800s"), Ids{"now"});
  EXPECT_EQ(ids("3.5d"), (Ids{"old", "recent", "now"}));
  for (std::string bad : {"6x", "2 d", "-2h", "5", "2026-13-01", "2026-12-01 14:00 tomorrow", "inf", "infh", "nanh",
                          "1e400h", "14:00"}) {
    auto h = run_gpuq({"history", "--plan", "plan.json", "--since", bad}, d.path(), {{"TZ", "UTC"}});
    EXPECT_EQ(h.status, 2) << bad << ": " << h.out;
    EXPECT_THAT(h.err, HasSubstr("gpuq history: --since " + bad + ": not a time")) << bad;
    EXPECT_EQ(h.out, "") << bad;
  }
}

// Twenty events at once and a hook that takes a second: at most 8 hooks run at a time (the rest
// wait their turn, none is dropped), each event reaches the hook once, and run does not wait
// for them to start its jobs.
TEST(Hooks, MoreThanEightAtOnceWaitTheirTurnAndEachRunsOnce) {
  TempDir d;
  std::map<std::string, std::string> env = fake_nvidia_smi(d, idle_gpus(1));
  d.write("job.sh", "true\n");
  std::string jobs;
  for (int i = 0; i < 20; ++i)
    jobs += fmt::format(R"({}{{"id": "j{}", "script": "job.sh", "gpus": 0, "est_hours": 0.01}})", i ? "," : "", i);
  d.write("plan.json", "[" + jobs + "]");
  d.write("hook.sh", "echo \"$GPUQ_JOB_ID $EPOCHREALTIME\" >> began\nsleep 1\necho \"$GPUQ_JOB_ID $EPOCHREALTIME\" >> ended\n");
  Output o = run_gpuq({"run", "--plan", "plan.json", "--poll", "1", "--on-event", "end:bash hook.sh"}, d.path(), env);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  // run waits for its hooks before it exits (or they go on): give the last ones their second.
  ASSERT_TRUE(eventually([&] { return lines_of(d.path() + "/ended").size() >= 20; })) << d.read("ended");
  std::map<std::string, std::pair<double, double>> span;  // per job: its hook's start and end
  std::map<std::string, int> began;
  auto read_times = [&](const std::string& file, bool start) {
    for (const std::string& l : lines_of(d.path() + "/" + file)) {
      std::istringstream in(l);
      std::string id;
      double t = 0;
      in >> id >> t;
      (start ? span[id].first : span[id].second) = t;
      began[id] += start;
    }
  };
  read_times("began", true);
  read_times("ended", false);
  ASSERT_EQ(began.size(), 20u) << d.read("began");
  for (auto& [id, n] : began) EXPECT_EQ(n, 1) << id;
  // The most hooks running at one instant: at a hook's start, those begun and not yet ended.
  size_t most = 0;
  for (auto& [id, s] : span) {
    size_t at = 0;
    for (auto& [other, t] : span) at += t.first <= s.first && s.first < t.second;
    most = std::max(most, at);
  }
  EXPECT_LE(most, 8u);
  EXPECT_GE(most, 2u) << "the hooks ran one after another";
}
