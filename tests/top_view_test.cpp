// `gpuq top`'s screen as data (views/top.h), from inline plans and states: what it lists, in
// which order, how it fits a terminal's size. The terminal itself is tested in tmux
// (tests/top/top-tmux).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include <unistd.h>

#include "gpuq/core/outlook.h"
#include "gpuq/live/look.h"
#include "gpuq/live/state_codec.h"
#include "gpuq/views/top.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;

namespace {

std::string text_of(const ScreenLine& l) {
  std::string s;
  for (const Span& x : l) s += x.text;
  return s;
}

// A plan of four jobs at `now`: `run` running on GPUs 0-1 since 600 s ago, `next` waiting for
// it, `wide` waiting for GPUs, `old` done an hour ago and `new` failed a minute ago.
struct World {
  Plan plan = plan_of(R"({"jobs": [
    {"id": "old", "script": "s", "gpus": 1, "est_hours": 1},
    {"id": "run", "script": "s", "gpus": 2, "est_hours": 1},
    {"id": "next", "script": "s", "gpus": 1, "est_hours": 1, "deps": ["run"]},
    {"id": "wide", "script": "s", "gpus": 8, "est_hours": 2},
    {"id": "new", "script": "s", "gpus": 1, "est_hours": 1}]})");
  double now = 100000;
  State state = *parse_state(fmt::format(R"({{
    "old": {{"status": "done", "exit": 0, "start": {}, "end": {}, "gpus": [2], "attempts": 1}},
    "run": {{"status": "running", "start": {}, "gpus": [0, 1], "pid": 4242, "attempts": 0}},
    "new": {{"status": "failed", "exit": 3, "start": {}, "end": {}, "gpus": [3], "attempts": 3}}}})",
                                          now - 7200, now - 3600, now - 600, now - 200, now - 60), "s").state;
  Outlook o;
  RunSeen run;
  GpuReading reading;
  std::map<int, std::string> others;
  World() {
    Policy p;
    p.max_retries = 0;
    const FileTable files([](const std::string&) { return true; });
    o = make_outlook(plan, state, p, now, 0xfc, files);
    run.running = true;
    run.pid = 77;
    run.last_tick = now - 2;
    reading.used_mib = std::map<int, long long>{{0, 40000}, {1, 40000}, {5, 30000}};
    reading.total_mib = {{0, 81920}, {1, 81920}};
    reading.util_pct = {{0, 97}, {1, 95}};
    others[5] = "GPU 5 busy: 30000 MiB in use by another process";
  }
  TopInput input() const {
    TopInput in;
    in.plan_arg = "plan.json";
    in.plan = &plan;
    in.state = &state;
    in.outlook = &o;
    in.run = &run;
    in.now = now;
    in.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
    in.reading = &reading;
    in.others = &others;
    return in;
  }
};

}  // namespace

TEST(TopView, RunningJobsFirstThenWaitingByStartThenTheLatestEnds) {
  World w;
  TopUi ui;
  std::vector<std::string> ids;
  for (const TopRow& r : top_rows(w.input(), ui)) ids.push_back(r.id);
  // next waits for run (ends in 50 min), wide for every GPU (after run): next starts first.
  EXPECT_EQ(ids, (std::vector<std::string>{"run", "next", "wide", "new", "old"}));
}

TEST(TopView, EveryScreenFitsItsTerminal) {
  World w;
  for (auto [cols, rows] : {std::pair{80, 24}, std::pair{20, 5}, std::pair{120, 40}, std::pair{200, 50}, std::pair{60, 10}}) {
    for (TopScreenKind k : {TopScreenKind::plan, TopScreenKind::node, TopScreenKind::help, TopScreenKind::log}) {
      TopUi ui;
      ui.cols = cols, ui.rows = rows, ui.screen = k;
      ui.log = std::vector<std::string>(300, std::string(500, 'x'));
      TopScreen sc = top_screen(w.input(), ui);
      ASSERT_EQ(sc.lines.size(), static_cast<size_t>(rows)) << cols << "x" << rows;
      for (const ScreenLine& l : sc.lines) EXPECT_LE(cells(text_of(l)), static_cast<size_t>(cols)) << text_of(l);
    }
  }
}

TEST(TopView, AtEightyByTwentyFourEveryJobAndEveryGpuIsShown) {
  World w;
  TopUi ui;
  TopScreen sc = top_screen(w.input(), ui);
  std::string all;
  for (const ScreenLine& l : sc.lines) all += text_of(l) + "\n";
  for (const Job& j : w.plan.jobs) EXPECT_NE(all.find(j.id), std::string::npos) << j.id << "\n" << all;
  for (int g = 0; g < 8; ++g) EXPECT_NE(all.find(fmt::format("\n{:>2} ", g)), std::string::npos) << g << "\n" << all;
  EXPECT_NE(all.find("run pid 77"), std::string::npos) << all;
  EXPECT_NE(all.find("30000 MiB in use by another process"), std::string::npos) << all;
  EXPECT_NE(all.find(" 97%"), std::string::npos) << all;  // GPU 0's utilization
}

TEST(TopView, TheProgressBarIsTheJobsOwnProgressElseItsEstimate) {
  World w;
  TopUi ui;
  ui.cols = 80;
  auto bar_of = [&](const TopScreen& sc) {
    for (const ScreenLine& l : sc.lines)
      if (text_of(l).find(" run ") != std::string::npos && text_of(l).find("running") != std::string::npos) {
        std::string t = text_of(l);
        size_t full = 0, empty = 0;
        for (size_t i = 0; i + 2 < t.size(); ++i) {
          if (t.compare(i, 3, "█") == 0) ++full;
          if (t.compare(i, 3, "░") == 0) ++empty;
        }
        return std::pair{full, empty};
      }
    return std::pair<size_t, size_t>{0, 0};
  };
  // No progress reported: 600 s of an hour's estimate, a sixth of the bar (dim, with ~).
  size_t i = 0;
  while (w.plan.jobs[w.o.jobs[i].job].id != "run") ++i;
  auto [f0, e0] = bar_of(top_screen(w.input(), ui));
  EXPECT_EQ(f0 + e0, 10u);
  EXPECT_EQ(f0, static_cast<size_t>(std::lround(600.0 / 3600 * 10)));
  w.o.jobs[i].progress = 0.7;
  auto [f1, e1] = bar_of(top_screen(w.input(), ui));
  EXPECT_EQ(f1, 7u);
  EXPECT_EQ(e1, 3u);
}

TEST(TopView, TheFilterKeepsTheIdsThatContainIt) {
  World w;
  TopUi ui;
  ui.filter = "e";
  std::vector<std::string> ids;
  for (const TopRow& r : top_rows(w.input(), ui)) ids.push_back(r.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"next", "wide", "new"}));
  ui.filter = "zzz";
  TopScreen sc = top_screen(w.input(), ui);
  bool said = false;
  for (const ScreenLine& l : sc.lines) said = said || text_of(l).find("no job's id contains \"zzz\"") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(TopView, TheSelectionIsAlwaysShown) {
  // 60 jobs on a 24-row screen: selecting the last scrolls the list to it, and the first back.
  std::string jobs;
  for (int i = 0; i < 60; ++i) jobs += fmt::format(R"({}{{"id": "j{:02}", "script": "s", "est_hours": 1}})", i ? "," : "", i);
  Plan plan = plan_of("[" + jobs + "]");
  State state;
  const FileTable files([](const std::string&) { return true; });
  Outlook o = make_outlook(plan, state, Policy{}, 1000, 0xff, files);
  TopInput in;
  in.plan = &plan, in.state = &state, in.outlook = &o, in.now = 1000, in.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  TopUi ui;
  for (const char* id : {"j59", "j00", "j30"}) {
    ui.selected = id;
    TopScreen sc = top_screen(in, ui);
    EXPECT_EQ(sc.rows[sc.selected].id, id);
    bool shown = false;
    for (const ScreenLine& l : sc.lines)
      for (const Span& s : l) shown = shown || (s.tone == Tone::chosen && s.text.rfind(id, 0) == 0);
    EXPECT_TRUE(shown) << id;
  }
}

TEST(TopView, InTheNodeViewOnlyTheUsersOwnPlansJobsTakeActions) {
  World w;
  std::vector<NodeUser> users(2);
  users[0].name = "ana";
  users[0].runs.resize(2);
  users[0].runs[0].plan = "/home/ana/plan.json";
  users[0].runs[0].holds.push_back({.id = "mine", .gpus = {0, 1}, .start = w.now - 60, .est_hours = 1});
  users[0].runs[1].plan = "/home/ana/other.json";
  users[0].runs[1].wants.push_back({.id = "elsewhere", .gpus = 2});
  users[1].name = "bo";
  users[1].runs.resize(1);
  users[1].runs[0].plan = "/home/bo/plan.json";
  users[1].runs[0].holds.push_back({.id = "theirs", .gpus = {2}, .start = w.now - 30, .est_hours = 1});
  TopInput in = w.input();
  in.node_users = &users;
  in.me = "ana";
  in.plan_path = "/home/ana/plan.json";
  TopUi ui;
  ui.screen = TopScreenKind::node;
  std::map<std::string, std::pair<std::string, bool>> seen;
  for (const TopRow& r : top_rows(in, ui)) seen[r.id] = {r.user, r.own};
  EXPECT_EQ(seen["mine"], (std::pair<std::string, bool>{"ana", true}));
  EXPECT_EQ(seen["elsewhere"], (std::pair<std::string, bool>{"ana", false}));
  EXPECT_EQ(seen["theirs"], (std::pair<std::string, bool>{"bo", false}));
}

TEST(TopView, WithoutARunTheHeaderSaysSo) {
  World w;
  w.run.running = false;
  TopUi ui;
  TopScreen sc = top_screen(w.input(), ui);
  EXPECT_NE(text_of(sc.lines[0]).find("no gpuq run is running on this plan"), std::string::npos) << text_of(sc.lines[0]);
}

// top's looks keep the plan as loaded (look.h's PlanCache) while its file is unchanged, and read
// it again once it changes: a cached plan made different on purpose is what the next look
// shows, and an edit of the file replaces it.
TEST(TopLook, ThePlanIsTakenAgainUntilItsFileChanges) {
  TempDir d;
  d.write("job.sh", "true\n", 0755);
  d.write("plan.json", R"([{"id": "a", "script": "job.sh"}])");
  PlanCache cache;
  auto look = [&] {
    PlanSetup s;
    s.plan = d.path() + "/plan.json";
    s.node_dir = "off";
    take_env(s);
    LookAsk ask;
    ask.probe = false;
    ask.node = false;
    ask.plan_cache = &cache;
    return look_at(s, ask);
  };
  Look first = look();
  ASSERT_TRUE(first.plan) << (first.report.errors.empty() ? "" : first.report.errors[0]);
  EXPECT_EQ(first.plan->jobs.size(), 1u);
  ASSERT_FALSE(cache.key.empty());
  ASSERT_TRUE(cache.report.plan);
  cache.report.plan->jobs[0].id = "from_the_cache";
  Look again = look();
  ASSERT_TRUE(again.plan);
  EXPECT_EQ(again.plan->jobs[0].id, "from_the_cache");
  // The same size, another modification time: read again.
  usleep(20000);
  d.write("plan.json", R"([{"id": "b", "script": "job.sh"}])");
  Look edited = look();
  ASSERT_TRUE(edited.plan);
  EXPECT_EQ(edited.plan->jobs[0].id, "b");
  // A plan that does not load is not kept: the next look reads the file again.
  d.write("plan.json", R"([{"id": "b", "script": "job.sh", "gpus": "two"}])");
  Look broken = look();
  EXPECT_FALSE(broken.report.errors.empty());
  EXPECT_TRUE(cache.key.empty());
}
