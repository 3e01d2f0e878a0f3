// Issue 29: a running job's progress (its GPUQ_PROGRESS file, else a progress bar at the end of
// its log) sets its remaining time, which `status` and every later job's predicted start follow;
// and the `eta` event when the plan's predicted finish slips.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "gpuq/core/accuracy.h"
#include "gpuq/core/events.h"
#include "gpuq/core/progress.h"
#include "test_util.h"

namespace gpuq {
namespace {

using test::Output;
using test::PlanFolder;
using json = nlohmann::json;

// ---- the pure rules, on inline data ----

TEST(ProgressText, AFractionACountOrAPercent) {
  EXPECT_DOUBLE_EQ(*parse_progress_text("0.42\n"), 0.42);
  EXPECT_DOUBLE_EQ(*parse_progress_text(" 420/1000 "), 0.42);
  EXPECT_DOUBLE_EQ(*parse_progress_text("42%"), 0.42);
  EXPECT_DOUBLE_EQ(*parse_progress_text("1"), 1.0);
  for (const char* bad : {"", "  ", "1.5", "-0.1", "1001/1000", "3/0", "abc", "0.4x", "101%"})
    EXPECT_FALSE(parse_progress_text(bad).has_value()) << bad;
}

TEST(ProgressInLog, TheLastBarOfTheTailCounts) {
  // tqdm: \r-separated updates on one line; the count wins over the percent.
  std::string tqdm = "loading data\nepoch 1/3:  10%|#         | 100/1000 [00:01<00:09, 99.0it/s]"
                     "\repoch 1/3:  42%|####      | 420/1000 [00:04<00:06, 99.0it/s]";
  EXPECT_DOUBLE_EQ(*progress_in_log(tqdm), 0.42);
  // A percent alone.
  EXPECT_DOUBLE_EQ(*progress_in_log("step\r 17%|##\r 18%|##"), 0.18);
  // The bar before a later line without one still counts.
  EXPECT_DOUBLE_EQ(*progress_in_log("\r 5/10 [00:05]\nsaving checkpoint to /tmp/x\n"), 0.5);
  // No bar: dates, paths and rates are no progress.
  EXPECT_FALSE(progress_in_log("2026/12/02 started\nreading data/train 3.5/4 it/s\n").has_value());
  EXPECT_FALSE(progress_in_log("").has_value());
}

TEST(ProgressInLog, AnEarlierAttemptsBarAndAWriteCutShortDoNotCount) {
  std::string log = " 47/100 [00:47]\n== gpuq: attempt 2 on GPUs [0] at 2026-12-02 10:00:00\nstarting\n";
  EXPECT_FALSE(progress_in_log(log).has_value());
  EXPECT_DOUBLE_EQ(*progress_in_log(log + "\r 3/100 [00:03]"), 0.03);
  // "42/100" may be the start of "42/1000": a count touching the end is left for the next look.
  EXPECT_DOUBLE_EQ(*progress_in_log("\r 41/1000 [00:41]\r 42/100"), 0.041);
}

TEST(ProgressRule, NoRateBeforeTwoReadingsThatMovedTwoPercent) {
  ProgressSpan one{{100, 0.5}, {100, 0.5}};
  EXPECT_FALSE(finish_from_progress(one, 0, 50, 100).has_value());
  ProgressSpan small{{100, 0.10}, {110, 0.115}};
  EXPECT_FALSE(finish_from_progress(small, 0, 50, 110).has_value());
}

TEST(ProgressRule, TheRateCarriedToTheEndOnceTrustedWhole) {
  // 10 % to 40 % in 30 s: 1 % a second, 60 s to go from its last reading at 130.
  ProgressSpan span{{100, 0.10}, {130, 0.40}};
  auto f = finish_from_progress(span, 90, 10, 135);
  ASSERT_TRUE(f.has_value());
  EXPECT_DOUBLE_EQ(f->weight, 1);
  EXPECT_NEAR(f->end, 190, 1e-9);
}

TEST(ProgressRule, BlendedWithTheEstimateEarlyOn) {
  // 5 % moved (half of kProgressFullMove): half the rate's end (100 + 0.95 / 0.005 = 290),
  // half the estimate's (start 0 + 1000 s).
  ProgressSpan span{{90, 0.0}, {100, 0.05}};
  auto f = finish_from_progress(span, 0, 1000, 100);
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->weight, 0.5, 1e-9);
  EXPECT_NEAR(f->end, 0.5 * 290 + 0.5 * 1000, 1e-6);
  // An estimate already past counts as now; and the end is never before now.
  auto late = finish_from_progress(span, 0, 10, 100);
  EXPECT_NEAR(late->end, 0.5 * 290 + 0.5 * 100, 1e-6);
  ProgressSpan done{{0, 0.0}, {50, 1.0}};
  EXPECT_DOUBLE_EQ(finish_from_progress(done, 0, 10, 80)->end, 80);
}

// Over random jobs that progress at a steady rate, read at random moments: once the rule
// trusts the rate whole, it predicts the end within the reading's rounding.
TEST(ProgressRule, ASteadyJobsEndIsFoundFromAnyTwoReadings) {
  uint64_t seed = test::test_seed(29);
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (int k = 0; k < 1000; ++k) {
    double start = 1e9 + u(rng) * 1e6, took = 10 + u(rng) * 1e5, est = took * (0.1 + 3 * u(rng));
    double a = u(rng) * 0.5, b = a + kProgressFullMove + u(rng) * (1 - a - kProgressFullMove);
    ProgressSpan span{{start + a * took, a}, {start + b * took, b}};
    double now = span.last.at + u(rng) * (1 - b) * took;
    auto f = finish_from_progress(span, start, est, now);
    ASSERT_TRUE(f.has_value());
    EXPECT_NEAR(f->end, std::max(now, start + took), 1e-6 * took) << k;
  }
}

TEST(ProgressRule, ReadingsKeepTheFirstAndTheLatestThatMoved) {
  JobState s;
  EXPECT_TRUE(note_progress(s, 0.0, 100));
  EXPECT_FALSE(note_progress(s, 0.0, 105));  // no move: its time stays when it moved
  EXPECT_TRUE(note_progress(s, 0.3, 110));
  EXPECT_EQ(s.progress_first_at, 100);
  EXPECT_EQ(s.progress_at, 110);
  EXPECT_EQ(s.progress, 0.3);
  EXPECT_TRUE(note_progress(s, 0.1, 120));  // a bar that started over: measured from there
  EXPECT_EQ(s.progress_first, 0.1);
  EXPECT_EQ(s.progress_first_at, 120);
}

TEST(EtaRule, ASlipPastBothThresholds) {
  // 10 % of 2 h left is 12 min, more than 10 min: a move of 11 min is no slip, 13 min is.
  EXPECT_FALSE(finish_slipped(7200, 7200 + 660, 0, 10, 10));
  EXPECT_TRUE(finish_slipped(7200, 7200 + 780, 0, 10, 10));
  EXPECT_TRUE(finish_slipped(7200, 7200 - 780, 0, 10, 10));
  // Near the end the minutes hold: 10 % of 10 min is 1 min, but 10 min is asked.
  EXPECT_FALSE(finish_slipped(600, 600 + 300, 0, 10, 10));
  EXPECT_EQ(shift_text(7200), "+2.0 h");
  EXPECT_EQ(shift_text(-720), "-12 min");
  EXPECT_EQ(shift_text(17), "+17 s");
}

// ---- real runs ----

// The runs' scale: a 5-s estimate, 15 s of work, status at second 5; twice that under the
// sanitizers, whose every process start costs a tenth of a second (prediction_test.cpp).
constexpr int kScale = test::kSanitized ? 2 : 1;
constexpr double kEst = 5.0 * kScale / 3600;  // est_hours: 5 s (10 s sanitized)
const std::string kTenth = std::to_string(100000 * kScale);  // a step, in microseconds
// 15 s of work, reported in tenths of a second as they pass: the job's progress is steady in
// wall time however busy the machine is (a loop of 150 steps of 0.1 s stretches when the test
// machine is loaded, and then no rate could say when it ends).
const std::string kTqdmJob =
    "s=${EPOCHREALTIME/./}\n"
    "while :; do k=$(( (${EPOCHREALTIME/./} - s) / " + kTenth + " )); [ $k -ge 150 ] && break\n"
    "  printf '\\rtrain: %3d%%|#| %d/150 [00:00<00:00]' $((k*2/3)) $k >&2; sleep 0.1; done\n"
    "printf '\\rtrain: 100%%|#| 150/150 [00:15<00:00]\\n' >&2\n";
const std::string kFileJob =
    "s=${EPOCHREALTIME/./}\n"
    "while :; do k=$(( (${EPOCHREALTIME/./} - s) / " + kTenth + " )); [ $k -ge 150 ] && break\n"
    "  echo \"$k/150\" > \"$GPUQ_PROGRESS.tmp\"; mv \"$GPUQ_PROGRESS.tmp\" \"$GPUQ_PROGRESS\"; sleep 0.1; done\n";
const std::string kQuietJob = std::string("for i in $(seq 0 150); do echo 'working'; sleep ") + (kScale == 1 ? "0.1" : "0.2") + "; done\n";

std::string two_jobs(double est, const std::string& extra = "") {
  return fmt::format(R"({{"jobs": [{{"id": "a", "script": "a.sh", "est_hours": {}{}}},
                                  {{"id": "b", "script": "b.sh", "est_hours": {}, "deps": ["a"]}}]}})",
                     est, extra, est);
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Looked {
  json sim;           // simulate --from-state --json then
  double sim_at = 0;  // when it was asked
  json status;        // status --json at ~5 s
  std::string text;   // status's text then
  double a_end = 0, b_start = 0;  // what happened
};

// Runs the plan (a: `job`, b after a), asks status 5 s after a started (a third of its work), waits for the end.
Looked run_and_ask(PlanFolder& f, const std::string& job, const std::string& plan,
                 std::vector<std::string> run_flags = {}) {
  Looked seen;
  f.d.write("plan.json", plan);
  f.d.write("a.sh", job);
  f.d.write("b.sh", "sleep 1\n");
  std::vector<std::string> args{"run", "--plan", "plan.json", "--gpus", "0", "--poll", "0.5"};
  args.insert(args.end(), run_flags.begin(), run_flags.end());
  auto run = test::start_gpuq(args, f.d.path(), f.env);
  double a_start = 0;
  EXPECT_TRUE(test::eventually([&] {
    json st = f.state();
    if (!st.contains("a") || !st["a"].contains("start")) return false;
    a_start = st["a"]["start"].get<double>();
    return true;
  }));
  double wait = a_start + 5 * kScale - std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  Output s = f.gpuq({"status", "--json"});
  EXPECT_EQ(s.status, 0) << s.err;
  seen.status = json::parse(s.out);
  seen.text = f.gpuq({"status"}).out;
  seen.sim_at = unix_now();
  Output sim = f.gpuq({"simulate", "--from-state", "--json"});
  EXPECT_EQ(sim.status, 0) << sim.err;
  seen.sim = json::parse(sim.out);
  Output r = run->wait(test::kPatience);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  json st = f.state();
  seen.a_end = st["a"]["end"].get<double>();
  seen.b_start = st["b"]["start"].get<double>();
  return seen;
}

json job_of(const json& status, const std::string& id) {
  for (const json& j : status["jobs"])
    if (j["id"] == id) return j;
  return json();
}

// The acceptance check of issue 29 (at half its scale): estimated at 5 s, running 15 s; status at second 5 puts its
// end within 10 % of the real end, and its dependent's start with it.
void expect_tracks(const Looked& s) {
  json a = job_of(s.status, "a"), b = job_of(s.status, "b");
  ASSERT_EQ(a["status"], "running") << s.status.dump(1);
  EXPECT_EQ(a["finish_source"], "progress") << s.status.dump(1);
  ASSERT_TRUE(a["progress"].is_number()) << s.status.dump(1);
  EXPECT_NEAR(a["progress"].get<double>(), 0.33, 0.1);
  double run_for = s.a_end - a["start"].get<double>();
  EXPECT_NEAR(a["predicted_finish"].get<double>(), s.a_end, 0.1 * run_for) << s.status.dump(1);
  EXPECT_NEAR(b["predicted_start"].get<double>(), s.b_start, 0.1 * run_for) << s.status.dump(1);
  // The predicted column says when, the why column how far (not run together: issue 51, item 11).
  EXPECT_THAT(s.text, ::testing::ContainsRegex("ends ~[0-9:]+ +[0-9]+ % done, its end from its progress")) << s.text;
  // simulate --from-state predicts the same (its times are hours from when it was asked).
  bool found = false;
  for (const json& at : s.sim["attempts"])
    if (at["id"] == "b") {
      found = true;
      EXPECT_NEAR(s.sim_at + at["start"].get<double>() * 3600, s.b_start, 0.1 * run_for) << s.sim.dump(1);
    }
  EXPECT_TRUE(found) << s.sim.dump(1);
}

TEST(ProgressRun, ATqdmBarInTheLogSetsTheEndAndTheDependentsStart) {
  PlanFolder f(1);
  Looked s = run_and_ask(f, kTqdmJob, two_jobs(kEst));
  expect_tracks(s);
}

TEST(ProgressRun, TheGpuqProgressFileSetsTheEndToo) {
  PlanFolder f(1);
  // The log's bar is turned off: only the file can say.
  Looked s = run_and_ask(f, kFileJob, two_jobs(kEst, R"(, "progress_from_log": false)"));
  expect_tracks(s);
}

TEST(ProgressRun, WithoutProgressTheEstimateStands) {
  PlanFolder f(1);
  Looked s = run_and_ask(f, kQuietJob, two_jobs(kEst));
  json a = job_of(s.status, "a");
  EXPECT_EQ(a["finish_source"], "estimate") << s.status.dump(1);
  EXPECT_TRUE(a["progress"].is_null()) << s.status.dump(1);
  // Past its 5 s estimate: predicted to end at once, as before progress was read.
  EXPECT_NEAR(a["predicted_finish"].get<double>(), s.status["now"].get<double>(), 1) << s.status.dump(1);
  EXPECT_EQ(s.text.find("% done"), std::string::npos) << s.text;
}

TEST(ProgressRun, TheSettingTurnsTheLogsBarOff) {
  PlanFolder f(1);
  Looked s = run_and_ask(f, kTqdmJob, two_jobs(kEst), {"--progress-from-log", "false"});
  json a = job_of(s.status, "a");
  EXPECT_EQ(a["finish_source"], "estimate") << s.status.dump(1);
  EXPECT_TRUE(a["progress"].is_null()) << s.status.dump(1);
}

// The plan predicted to end 10 s after a starts ends about 6 s later: one eta event per slip
// reaches the hook, with its words, and each one told moved past the thresholds.
TEST(ProgressRun, AnEtaEventReachesTheHookOncePerSlip) {
  PlanFolder f(1);
  f.d.write("plan.json", two_jobs(kEst));
  f.d.write("a.sh", kTqdmJob);
  f.d.write("b.sh", "sleep 1\n");
  auto run = test::start_gpuq({"run", "--plan", "plan.json", "--gpus", "0", "--poll", "0.5", "--eta-slip-minutes",
                               "0.05", "--on-event", "eta:echo \"$GPUQ_DETAIL\" >> hook.txt"},
                              f.d.path(), f.env);
  Output r = run->wait(test::kPatience);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::vector<Event> etas;
  for (const std::string& line : test::lines_of(f.d.path() + "/plan.events.jsonl"))
    if (auto e = parse_event(line, nullptr); e && e->kind == "eta") etas.push_back(*e);
  ASSERT_FALSE(etas.empty()) << r.out;
  std::vector<std::string> heard = test::lines_of(f.d.path() + "/hook.txt");
  ASSERT_EQ(heard.size(), etas.size()) << r.out;
  for (size_t k = 0; k < etas.size(); ++k) {
    EXPECT_EQ(heard[k], *etas[k].detail);
    ASSERT_TRUE(etas[k].finish && etas[k].was);
    EXPECT_GT(std::fabs(*etas[k].finish - *etas[k].was), 3) << heard[k];
  }
  EXPECT_NE(heard[0].find("the plan now ends at "), std::string::npos) << heard[0];
  EXPECT_NE(heard[0].find("(+"), std::string::npos) << heard[0];
  EXPECT_NE(heard[0].find("a is slower than its estimate"), std::string::npos) << heard[0];
}


// ---- history --accuracy, on a fixture with known numbers ----

namespace accuracy_fixture {

// prep 1 h, train 2 h (estimated 1 h), eval 0.5 h, one after the other from t0.
constexpr double t0 = 1000000;
const char* kEvents =
    R"({"t": 1000000, "event": "start", "id": "prep", "attempt": 1, "gpus": [0], "by": "run"}
{"t": 1003600, "event": "end", "id": "prep", "attempt": 1, "outcome": "done", "exit": 0, "start": 1000000, "by": "run"}
{"t": 1003600, "event": "start", "id": "train", "attempt": 1, "gpus": [0], "by": "run"}
{"t": 1010800, "event": "end", "id": "train", "attempt": 1, "outcome": "done", "exit": 0, "start": 1003600, "by": "run"}
{"t": 1010800, "event": "start", "id": "eval", "attempt": 1, "gpus": [0], "by": "run"}
{"t": 1012600, "event": "end", "id": "eval", "attempt": 1, "outcome": "done", "exit": 0, "start": 1010800, "by": "run"}
)";
// At t0 the estimates say train at +1 h, eval at +2 h, the end at +2.5 h. Half an hour into
// train its progress says it takes 2 h: eval at +3 h, the end at +3.5 h (what happened).
const char* kPredictions =
    R"({"t": 1000000, "finish": {"estimate": 1009000}, "starts": {"estimate": {"train": 1003600, "eval": 1007200}}}
{"t": 1005400, "finish": {"estimate": 1009000, "progress": 1012600}, "starts": {"estimate": {"eval": 1007200}, "progress": {"eval": 1010800}}}
not a prediction
)";

std::vector<PredictionRecord> records() {
  std::vector<PredictionRecord> out;
  std::string text = kPredictions;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
    if (auto r = parse_prediction_line(text.substr(at, nl - at))) out.push_back(*r);
  return out;
}

std::vector<Attempt> attempts() {
  std::vector<Event> events;
  std::string text = kEvents;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
    events.push_back(*parse_event(text.substr(at, nl - at), nullptr));
  return attempts_of(events);
}

}  // namespace accuracy_fixture

TEST(Accuracy, APredictionLineReadsBack) {
  PredictionRecord r;
  r.t = 1000.5;
  r.finish["estimate"] = 5000;
  r.starts["progress"]["b"] = 4000;
  EXPECT_EQ(parse_prediction_line(prediction_line(r)), r);
  EXPECT_FALSE(parse_prediction_line("{\"finish\": {}}").has_value());
}

TEST(Accuracy, StartsAreScoredByHowFarAheadTheyWerePredicted) {
  using namespace accuracy_fixture;
  std::vector<PredictionRecord> rs = records();
  ASSERT_EQ(rs.size(), 2u);
  Accuracy a = score_predictions(rs, attempts());
  ASSERT_TRUE(a.finished.has_value());
  EXPECT_EQ(*a.finished, t0 + 3.5 * 3600);
  ASSERT_EQ(a.finish.size(), 2u);
  EXPECT_EQ(a.finish[1].finish.at("progress"), t0 + 3.5 * 3600);
  ASSERT_EQ(a.horizons.size(), 3u);
  // An hour ahead: train's start at t0, exact from both.
  EXPECT_EQ(a.horizons[0].error.at("estimate"), (std::pair<double, size_t>{0, 1}));
  EXPECT_EQ(a.horizons[0].error.at("progress"), (std::pair<double, size_t>{0, 1}));
  // 1 h - 1 day ahead: eval's start, 1 h early by the estimates both times; progress (at t0 the
  // same as the estimates) exact at t0 + 1.5 h: median of 1 h and 0.
  EXPECT_EQ(a.horizons[1].error.at("estimate"), (std::pair<double, size_t>{3600, 2}));
  EXPECT_EQ(a.horizons[1].error.at("progress"), (std::pair<double, size_t>{1800, 2}));
  EXPECT_EQ(a.horizons[1].error.count("learned"), 0u);  // nothing learned: not scored
  EXPECT_TRUE(a.horizons[2].error.empty());
}

TEST(Accuracy, HistoryAccuracyPrintsTheFixturesNumbers) {
  using namespace accuracy_fixture;
  test::TempDir d;
  d.write("plan.json", R"([{"id": "prep", "script": "job.sh", "est_hours": 1},
                           {"id": "train", "script": "job.sh", "est_hours": 1, "deps": ["prep"]},
                           {"id": "eval", "script": "job.sh", "est_hours": 0.5, "deps": ["train"]}])");
  d.write("job.sh", "true\n");
  d.write("plan.events.jsonl", kEvents);
  d.write("plan.predictions.jsonl", kPredictions);
  Output j = test::run_gpuq({"history", "--plan", "plan.json", "--accuracy", "--json"}, d.path());
  ASSERT_EQ(j.status, 0) << j.err;
  json out = json::parse(j.out);
  EXPECT_EQ(out["finished"], t0 + 3.5 * 3600);
  EXPECT_EQ(out["finish"].size(), 2u);
  EXPECT_EQ(out["starts"][1]["horizon"], "1 h to 1 day ahead");
  EXPECT_EQ(out["starts"][1]["estimate"]["median_abs_error_s"], 3600);
  EXPECT_EQ(out["starts"][1]["progress"]["median_abs_error_s"], 1800);
  Output text = test::run_gpuq({"history", "--plan", "plan.json", "--accuracy"}, d.path(), {{"TZ", "UTC"}});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("the plan finished at"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(-60 min)"), std::string::npos) << text.out;  // the estimates' finish, 1 h early
  EXPECT_NE(text.out.find("(+0 s)"), std::string::npos) << text.out;     // progress's, right
  EXPECT_NE(text.out.find("1 h to 1 day ahead   60 min (2)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("30 min (2)"), std::string::npos) << text.out;
}

// ---- add --dry-run ----

// A 2 h job of higher priority on a node of one GPU goes first: a and b each start 2 h later,
// and the plan ends 2 h later; the plan file is not touched.
TEST(AddDryRun, SaysHowEachOtherJobsStartMoves) {
  test::TempDir d;
  const std::string plan = R"([{"id": "a", "script": "job.sh", "est_hours": 1},
 {"id": "b", "script": "job.sh", "est_hours": 1}])";
  d.write("plan.json", plan);
  d.write("job.sh", "true\n");
  Output o = test::run_gpuq({"add", "--plan", "plan.json", "--dry-run", "--node-gpus", "0", "--id", "c", "--priority",
                             "10", "--est-hours", "2", "--", "job.sh"},
                            d.path());
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(d.read("plan.json"), plan);
  EXPECT_NE(o.out.find("c not added (nothing written); it would start ~"), std::string::npos) << o.out;
  EXPECT_EQ(test::count_of(o.out, "(+2.0 h)"), 3u) << o.out;  // a, b and the finish
  EXPECT_NE(o.out.find("the plan's predicted finish: "), std::string::npos) << o.out;
  // A job that moves nobody: low priority, after the rest.
  Output none = test::run_gpuq({"add", "--plan", "plan.json", "--dry-run", "--node-gpus", "0", "--id", "z",
                                "--priority", "90", "--", "job.sh"},
                               d.path());
  ASSERT_EQ(none.status, 0) << none.err;
  EXPECT_NE(none.out.find("no other job's predicted start moves"), std::string::npos) << none.out;
}

}  // namespace
}  // namespace gpuq
