// The Gantt charts (views/svg.h): every bar has a hover title and a label that is whole
// where there is room, the axis prints clean numbers, and status draws every attempt.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <random>
#include <regex>

#include "gpuq/core/rules.h"
#include "gpuq/core/life.h"
#include "gpuq/core/state.h"
#include "gpuq/views/svg.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::HasSubstr;

namespace {

/// The text of every element `tag` in `svg`, in order.
std::vector<std::string> texts_of(const std::string& svg, const std::string& tag) {
  std::vector<std::string> out;
  std::regex re("<" + tag + "[^>]*>([^<]*)</" + tag + ">");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

/// The tick labels of the time axis ("2h", "-0.5h").
std::vector<std::string> ticks_of(const std::string& svg) {
  std::vector<std::string> out;
  std::regex re("text-anchor=\"middle\">([^<]*h)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

}  // namespace

TEST(Svg, AShortBarKeepsItsWholeLabelWhereItsRowIsFreeAfterOrBeforeIt) {
  Plan plan = plan_of(R"([{"id": "eval_arm_a_final", "script": "s.sh", "gpus": 1, "est_hours": 0.2},
                          {"id": "train", "script": "s.sh", "gpus": 1, "est_hours": 5},
                          {"id": "report", "script": "s.sh", "gpus": 0, "est_hours": 0.1}])");
  // 0.2 h of a 10 h chart is about 26 px, room for 3 characters inside; the row is free
  // until 5 h. The report ends at the chart's right edge, after a free row.
  std::string svg = gantt_svg(plan, {{0, "predicted", 0, 0.2, {0}}, {1, "predicted", 5, 10, {0}},
                                     {2, "predicted", 9.9, 10, {}}}, {0}, {}, "t");
  std::vector<std::string> labels = texts_of(svg, "text");
  EXPECT_THAT(labels, ::testing::Contains("eval_arm_a_final")) << svg;
  EXPECT_THAT(labels, ::testing::Contains("report")) << svg;
}

TEST(Svg, EveryBarHasATitleNamingItsJobEvenWhenItsLabelIsCutShort) {
  Plan plan = plan_of(R"([{"id": "sweep_lr_1e-4", "script": "s.sh", "gpus": 1, "est_hours": 0.2},
                          {"id": "sweep_lr_2e-4", "script": "s.sh", "gpus": 1, "est_hours": 0.2},
                          {"id": "train", "script": "s.sh", "gpus": 2, "est_hours": 9.6}])");
  std::vector<Bar> bars = {{0, "done", 0, 0.2, {0}}, {1, "failed", 0.2, 0.4, {0}}, {2, "predicted", 0.4, 10, {0, 1}}};
  std::string svg = gantt_svg(plan, bars, {0, 1}, {}, "t");
  std::vector<std::string> titles = texts_of(svg, "title");
  ASSERT_EQ(titles.size(), 4u);  // the 2-GPU bar on each of its rows
  for (size_t k = 0; k < titles.size(); ++k) {
    const Bar& b = bars[std::min<size_t>(k, 2)];
    EXPECT_EQ(titles[k].rfind(plan.jobs[b.job].id + " (" + b.status + ")", 0), 0u) << titles[k];
  }
  for (const std::string& label : texts_of(svg, "text")) {
    if (label.rfind("sweep", 0) != 0) continue;
    // No room after the first sweep bar: cut short, and said so with "~".
    EXPECT_TRUE(label == "sweep_lr_2e-4" || label.back() == '~') << label;
  }
}

TEST(Svg, TheAxisPrintsWholeMultiplesOfItsStepAndZeroAsZero) {
  Plan plan = plan_of(R"([{"id": "a", "script": "s.sh", "gpus": 1, "est_hours": 1}])");
  // status draws the past at negative hours: from -0.7 h, adding the step 0.1 seven times
  // is not 0 in floating point.
  std::string svg = gantt_svg(plan, {{0, "done", -0.7, 0.5, {0}}}, {0}, 0.0, "t");
  std::vector<std::string> ticks = ticks_of(svg);
  ASSERT_FALSE(ticks.empty());
  EXPECT_THAT(ticks, ::testing::Contains("0.0h")) << svg;
  for (const std::string& t : ticks) EXPECT_TRUE(std::regex_match(t, std::regex("-?[0-9]+(\\.[0-9])?h"))) << t;
}

TEST(Svg, AxisTicksAreEvenlySpacedCleanNumbersForAnySpan) {
  const uint64_t seed = test_seed(18);
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Plan plan = plan_of(R"([{"id": "a", "script": "s.sh", "gpus": 1, "est_hours": 1}])");
  for (int trial = 0; trial < 200; ++trial) {
    double t0 = -std::exp(std::uniform_real_distribution<double>(-4, 6)(rng));
    double t1 = std::exp(std::uniform_real_distribution<double>(-4, 6)(rng));
    std::string svg = gantt_svg(plan, {{0, "done", t0, t1, {0}}}, {0}, 0.0, "t");
    std::vector<std::string> ticks = ticks_of(svg);
    ASSERT_GE(ticks.size(), 2u) << t0 << " " << t1;
    ASSERT_LE(ticks.size(), 13u) << t0 << " " << t1;
    std::vector<double> v;
    for (const std::string& t : ticks) {
      ASSERT_TRUE(std::regex_match(t, std::regex("-?[0-9]+(\\.[0-9]+)?h"))) << t << " in " << t0 << " " << t1;
      ASSERT_NE(t.rfind("-0h", 0), 0u) << t;
      v.push_back(std::stod(t));
    }
    for (size_t k = 2; k < v.size(); ++k) EXPECT_NEAR(v[k] - v[k - 1], v[1] - v[0], 1e-9) << t0 << " " << t1;
    EXPECT_LE(v.front(), 0.0);
    EXPECT_GE(v.back(), 0.0);  // now (0) lies inside the axis: a tick on each side or on it
  }
}

TEST(Svg, StatusDrawsAKilledEarlierAttemptBesideTheRetry) {
  TempDir d;
  d.write("job.sh", "true\n");
  d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 1, "est_hours": 1}])");
  double now = static_cast<double>(time(nullptr));
  d.write("plan.state.json",
          fmt::format(R"({{"a": {{"status": "failed", "gpus": [0], "start": {}, "end": {}, "exit": -15}}}})",
                      now - 7200, now - 3600));
  std::map<std::string, std::string> env = {{"GPUQ_NVIDIA_SMI", "/nonexistent/nvidia-smi"}};
  Output r = run_gpuq({"retry", "--plan", "plan.json", "a"}, d.path(), env);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(d.read("plan.state.json"), HasSubstr("\"earlier_attempts\""));
  r = run_gpuq({"status", "--plan", "plan.json", "--gpus", "0", "--svg", "s.svg"}, d.path(), env);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string svg = d.read("s.svg");
  EXPECT_EQ(count_of(svg, "<title>a (failed): -2.00h -> -1.00h"), 1u) << svg;  // the killed attempt
  EXPECT_EQ(count_of(svg, "<title>a (predicted)"), 1u) << svg;             // the retry
}

TEST(EarlierAttempts, TheAutomaticRetryKeepsTheFailedRunAndEveryOneBefore) {
  Plan plan = plan_of(R"([{"id": "a", "script": "s.sh", "gpus": 1, "est_hours": 1}])");
  State state;
  JobState run;
  run.status = Status::Failed;
  run.gpus = std::vector<int>{3};
  run.start = 100;
  for (int k = 0; k < 25; ++k) {  // 25 failed runs, each retried automatically
    run.end = *run.start + 10;
    run.exit = k;
    JobState failed = run;
    failed.extra = state.of(plan, 0) ? state.of(plan, 0)->extra : nlohmann::ordered_json();
    state.set(plan, 0, failed);
    write_life(*state.of(plan, 0), Waiting{k + 1}, Cause::AutoRetry);  // as the engine's retry writes it
    run.start = *run.start + 100;
  }
  std::vector<EarlierAttempt> kept = earlier_attempts(*state.of(plan, 0));
  ASSERT_EQ(kept.size(), kKeptAttempts);
  EXPECT_EQ(kept.back().exit, 24);  // the newest last
  EXPECT_EQ(kept.front().exit, static_cast<long long>(25 - kKeptAttempts));
  EXPECT_EQ(kept.back().start, 100 + 24 * 100);
  EXPECT_EQ(kept.back().end, 100 + 24 * 100 + 10);
  EXPECT_EQ(kept.back().gpus, std::vector<int>{3});
  EXPECT_EQ(state.of(plan, 0)->status, Status::Pending);
}

TEST(EarlierAttempts, AnEntryThatNeverRanAddsNone) {
  JobState pending, next;
  keep_attempts(pending, next);
  EXPECT_TRUE(earlier_attempts(next).empty());
  EXPECT_TRUE(next.extra.is_null());  // nothing written for the original to carry
}

TEST(Svg, AGpuThatHoldsSeveralJobsAtOnceDrawsThemStackedInItsRow) {
  Plan plan = plan_of(R"([{"id": "a", "script": "s.sh", "gpu_mem_gib": 20, "est_hours": 2},
                          {"id": "b", "script": "s.sh", "gpu_mem_gib": 20, "est_hours": 1},
                          {"id": "c", "script": "s.sh", "gpu_mem_gib": 20, "est_hours": 1},
                          {"id": "d", "script": "s.sh", "gpus": 1, "est_hours": 2}])");
  // a, b on GPU 0 together, then c beside a where b was; d alone on GPU 1.
  std::string svg = gantt_svg(plan, {{0, "predicted", 0, 2, {0}}, {1, "predicted", 0, 1, {0}},
                                     {2, "predicted", 1, 2, {0}}, {3, "predicted", 0, 2, {1}}}, {0, 1}, {}, "t");
  std::regex shared("<title>(\\w) \\(predicted\\)[^<]*\\(shared\\)</title><rect x=\"[0-9.]+\" y=\"([0-9.]+)\" "
                    "width=\"[0-9.]+\" height=\"([0-9.]+)\"");
  std::map<std::string, std::pair<double, double>> at;  // id -> (y, height)
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), shared); it != std::sregex_iterator(); ++it)
    at[(*it)[1]] = {std::stod((*it)[2]), std::stod((*it)[3])};
  ASSERT_EQ(at.size(), 3u) << svg;
  EXPECT_EQ(at["a"].second * 2, 20) << "two lanes share the 20 px of a row's bar";
  EXPECT_NE(at["a"].first, at["b"].first) << "a and b overlap: stacked";
  EXPECT_EQ(at["b"].first, at["c"].first) << "c takes the lane b left";
  EXPECT_THAT(svg, ::testing::Not(HasSubstr("d (predicted): 0.00h -> 2.00h, GPUs [1] (shared)")));
  EXPECT_THAT(svg, HasSubstr("d (predicted): 0.00h -> 2.00h, GPUs [1]</title>"));
}

// Issue 43, point 10: the bars of a shared GPU's lanes had no label (only a hover title): each
// has its id in a font its lane takes, whole where it fits, else cut short with a "~".
TEST(Svg, ThePackedBarsOfASharedGpuAreLabelledInTheirLanes) {
  Plan plan = plan_of(R"([{"id": "sweep_lr_0.1", "script": "s.sh", "gpu_mem_gib": 20, "est_hours": 2},
                          {"id": "sweep_lr_0.01", "script": "s.sh", "gpu_mem_gib": 20, "est_hours": 2},
                          {"id": "a_long_name_in_a_short_bar", "script": "s.sh", "gpu_mem_gib": 20, "est_hours": 1}])");
  std::string svg = gantt_svg(plan, {{0, "predicted", 0, 2, {0}}, {1, "done", 0, 1.95, {0}}, {2, "predicted", 1.95, 2, {0}}},
                              {0}, {}, "t");
  std::vector<std::string> texts = texts_of(svg, "text");
  EXPECT_THAT(texts, ::testing::Contains("sweep_lr_0.1")) << svg;
  EXPECT_THAT(texts, ::testing::Contains("sweep_lr_0.01"));
  // 0.05 h of 2 h is 32 px: a few letters, and the rest in its title.
  auto cut = std::find_if(texts.begin(), texts.end(), [](const std::string& t) { return t.rfind("a_l", 0) == 0; });
  ASSERT_NE(cut, texts.end()) << svg;
  EXPECT_EQ(cut->back(), '~');
  EXPECT_LT(cut->size(), std::string("a_long_name_in_a_short_bar").size());
  EXPECT_THAT(svg, HasSubstr("font-size=\"9\" fill=\"white\">sweep_lr_0.01<")) << "two lanes of 10 px: 9 px letters";
}
