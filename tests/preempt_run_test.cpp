// Preemption with real `gpuq run`s and real bash jobs: a preemptible training that checkpoints
// a counter gives its GPUs to an urgent job added with `gpuq add --priority 1`, and resumes from
// its checkpoint; a job that is not preemptible is never stopped; an exit 0 on the signal is
// done; `gpuq preempt` by hand, and its --dry-run that changes nothing.
#include <signal.h>

#include <nlohmann/json.hpp>

#include "gpuq/core/events.h"
#include "gpuq/live/journal.h"
#include "gpuq/live/proc.h"
#include "test_util.h"

namespace gpuq::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A training that counts to `steps` (0.2 s a step), its count its checkpoint, kept in its
// GPUQ_CHECKPOINT_DIR (the plan's folder when it has none); on SIGTERM it saves and exits 143. Every step is a line of work.log
// (outside the plan's files): a step run twice is work lost.
constexpr const char* kTraining =
    "c=\"${GPUQ_CHECKPOINT_DIR:-.}/count\"\n"  // a job that is not preemptible has no checkpoint folder
    "n=$(cat \"$c\" 2>/dev/null || echo 0)\n"
    "echo \"attempt $GPUQ_ATTEMPT preemptions $GPUQ_PREEMPTIONS from $n\" >> attempts.log\n"
    "trap 'exit 143' TERM\n"
    "while [ \"$n\" -lt \"$1\" ]; do sleep 0.2 & wait $!; n=$((n+1)); echo \"$n\" >> work.log; "
    "echo \"$n\" > \"$c.tmp\" && mv \"$c.tmp\" \"$c\"; done\n";

struct Node4 : PlanFolder {
  Node4() : PlanFolder(4) {
    d.write("long.sh", kTraining);
    d.write("urgent.sh", "echo \"$CUDA_VISIBLE_DEVICES\" > urgent.gpus\nsleep 1\n");
  }
  std::vector<Attempt> attempts() const {
    return attempts_of(read_events(d.path() + "/plan.events.jsonl", nullptr));
  }
};

// The issue's run: the urgent job starts within the grace and a tick, the long job resumes from
// its checkpoint losing at most one step, ends done, and run exits 0.
TEST(PreemptRun, AnUrgentJobPreemptsACheckpointingTrainingWhichResumesAndEndsDone) {
  Node4 n;
  n.plan(R"({"settings": {"preempt_min_minutes": 0, "preempt_grace": 10},
             "jobs": [{"id": "long", "script": "long.sh", "args": ["25"], "gpus": 4, "preemptible": true,
                       "est_hours": 0.0014}]})");
  auto run = n.background({"run", "--gpus", "0-3", "--poll", "0.5", "--node-dir", "off"});
  ASSERT_TRUE(eventually([&] { return lines_of(n.d.path() + "/work.log").size() >= 5; })) << run->out();
  Output add = n.gpuq({"add", "--id", "urgent", "--gpus", "2", "--priority", "1", "--est-hours", "0.0003", "--",
                       "urgent.sh"});
  ASSERT_EQ(add.status, 0) << add.err;
  double added = unix_now();
  Output r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("preempt long for urgent"));
  EXPECT_THAT(r.out, HasSubstr("preempted long: it ended (exit 143) after its signal"));
  std::vector<Attempt> a = n.attempts();
  std::vector<Attempt> long_a, urgent_a;
  for (const Attempt& x : a) (x.id == "long" ? long_a : urgent_a).push_back(x);
  ASSERT_EQ(long_a.size(), 2u) << r.out;
  ASSERT_EQ(urgent_a.size(), 1u) << r.out;
  EXPECT_EQ(long_a[0].outcome, "preempted");
  EXPECT_EQ(long_a[1].outcome, "done");
  EXPECT_EQ(urgent_a[0].outcome, "done");
  EXPECT_LE(*urgent_a[0].start - added, 10 + 2) << "within preempt_grace and a tick";
  EXPECT_LE(*long_a[0].end, *urgent_a[0].start + 0.01) << "the urgent job ran on the GPUs the long one gave up";
  EXPECT_GE(*long_a[1].start, *urgent_a[0].end - 0.01) << "the long one resumed once the urgent one was done";
  // Every step once, but the one cut short: at most one checkpoint interval of work lost.
  std::vector<std::string> steps = lines_of(n.d.path() + "/work.log");
  EXPECT_GE(steps.size(), 25u);
  EXPECT_LE(steps.size(), 26u) << "more than one step ran twice";
  EXPECT_EQ(steps.back(), "25");
  std::vector<std::string> att = lines_of(n.d.path() + "/attempts.log");
  ASSERT_EQ(att.size(), 2u);
  EXPECT_THAT(att[0], HasSubstr("attempt 1 preemptions 0 from 0"));
  EXPECT_THAT(att[1], HasSubstr("attempt 2 preemptions 1 from"));
  EXPECT_THAT(att[1], Not(HasSubstr("from 0")));
  // history shows the preempted attempt.
  Output h = n.gpuq({"history"});
  EXPECT_THAT(h.out, ::testing::ContainsRegex("long +1 .* preempted"));
}

// Not preemptible: the urgent job waits for the long one, which is never stopped.
TEST(PreemptRun, AJobThatIsNotPreemptibleIsNeverStopped) {
  Node4 n;
  n.plan(R"({"settings": {"preempt_min_minutes": 0, "preempt_grace": 10},
             "jobs": [{"id": "long", "script": "long.sh", "args": ["10"], "gpus": 4, "est_hours": 0.0006}]})");
  auto run = n.background({"run", "--gpus", "0-3", "--poll", "0.5", "--node-dir", "off"});
  ASSERT_TRUE(eventually([&] { return lines_of(n.d.path() + "/work.log").size() >= 2; })) << run->out();
  ASSERT_EQ(n.gpuq({"add", "--id", "urgent", "--gpus", "2", "--priority", "1", "--", "urgent.sh"}).status, 0);
  Output r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("preempt")));
  EXPECT_EQ(lines_of(n.d.path() + "/attempts.log").size(), 1u);
  EXPECT_EQ(lines_of(n.d.path() + "/work.log").size(), 10u);
}

// GPUQ_CHECKPOINT_DIR (issue 51, item 15): a preemptible job's own folder, made for it; unset (not
// empty) for any other job, so that a script's "${GPUQ_CHECKPOINT_DIR:-...}" takes its fallback.
TEST(PreemptRun, OnlyAPreemptibleJobHasACheckpointFolder) {
  PlanFolder f(2);
  f.d.write("env.sh", "echo \"${GPUQ_CHECKPOINT_DIR-unset}\" > \"$GPUQ_JOB_ID.dir\"\n");
  f.plan(R"([{"id": "plain", "script": "env.sh", "gpus": 1},
             {"id": "pre", "script": "env.sh", "gpus": 1, "preemptible": true}])");
  Output r = f.gpuq({"run", "--gpus", "0-1", "--node-dir", "off"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(lines_of(f.d.path() + "/plain.dir"), std::vector<std::string>{"unset"});
  std::vector<std::string> pre = lines_of(f.d.path() + "/pre.dir");
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_THAT(pre[0], ::testing::EndsWith("/plan.checkpoints/pre"));
  EXPECT_TRUE(std::filesystem::is_directory(pre[0])) << pre[0];
}

// A job that exits 0 on the signal is done and not run again; `gpuq preempt` by hand, whose
// --dry-run changes nothing.
TEST(PreemptRun, ByHandWithItsDryRunAndAnExitZeroOnTheSignalIsDone) {
  Node4 n;
  n.d.write("quits.sh", "trap 'echo saved; exit 0' TERM\nwhile true; do sleep 0.1 & wait $!; done\n");
  n.plan(R"({"settings": {"preemptible": true, "preempt_grace": 10},
             "jobs": [{"id": "q", "script": "quits.sh", "gpus": 1}]})");
  auto run = n.background({"run", "--gpus", "0-3", "--poll", "0.5", "--node-dir", "off"});
  ASSERT_TRUE(eventually([&] { return n.status_of("q") == "running"; })) << run->out();
  std::string before = n.d.read("plan.state.json");
  Output dry = n.gpuq({"preempt", "--dry-run", "q"});
  EXPECT_EQ(dry.status, 0) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("q not preempted (nothing sent); it would get SIGTERM to process group"));
  EXPECT_EQ(n.d.read("plan.state.json"), before) << "a dry run changes nothing";
  EXPECT_EQ(n.status_of("q"), "running");
  Output p = n.gpuq({"preempt", "q"});
  EXPECT_EQ(p.status, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("preempted q: SIGTERM to process group"));
  Output r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("done q (it finished on its preemption signal)"));
  // The run's pane says it too, as it says a kill from another shell (issue 51, item 12).
  EXPECT_THAT(r.out, HasSubstr("gpuq preempt q from another shell: its preemption signal sent; SIGKILL after "
                               "--preempt-grace 10 s"));
  EXPECT_EQ(n.status_of("q"), "done");
  // A job that is not preemptible is refused by name.
  PlanFolder m(1);
  m.d.write("s.sh", "sleep 30\n");
  m.plan(R"([{"id": "s", "script": "s.sh", "gpus": 1}])");
  auto r2 = m.background({"run", "--gpus", "0", "--poll", "0.5", "--node-dir", "off"});
  ASSERT_TRUE(eventually([&] { return m.status_of("s") == "running"; })) << r2->out() << r2->err();
  Output no = m.gpuq({"preempt", "s"});
  EXPECT_EQ(no.status, 1);
  EXPECT_THAT(no.out, HasSubstr("not preempted: s is not preemptible"));
  m.gpuq({"kill", "s"});
  r2->wait(kPatience);
}

// simulate and status predict a preemption as the plan's settings allow it, and say it: the
// urgent job's start by preempting the long one, which resumes with what is left of its estimate.
TEST(PreemptRun, SimulateAndStatusPredictThePreemptionAndSayIt) {
  PlanFolder p(4);
  p.d.write("j.sh", "true\n");
  p.plan(R"({"settings": {"preempt_min_minutes": 0},
             "jobs": [{"id": "long", "script": "j.sh", "gpus": 4, "preemptible": true, "est_hours": 2},
                      {"id": "gate", "script": "j.sh", "gpus": 0, "est_hours": 1, "priority": 60},
                      {"id": "urgent", "script": "j.sh", "gpus": 2, "priority": 1, "est_hours": 0.5,
                       "deps": ["gate"]}]})");
  Output sim = p.gpuq({"simulate", "--json", "--gpus", "0-3"});
  ASSERT_EQ(sim.status, 0) << sim.err;
  nlohmann::json j = nlohmann::json::parse(sim.out);
  std::vector<std::pair<double, double>> long_rows;
  for (const auto& a : j["attempts"])
    if (a["id"] == "long") long_rows.push_back({a["start"].get<double>(), a["end"].get<double>()});
  ASSERT_EQ(long_rows.size(), 2u) << sim.out;
  EXPECT_NEAR(long_rows[0].second, 1, 1e-6);
  EXPECT_NEAR(long_rows[1].first, 1.5, 1e-6);
  EXPECT_NEAR(long_rows[1].second, 2.5, 1e-6);
  Output text = p.gpuq({"simulate", "--gpus", "0-3"});
  EXPECT_THAT(text.err, HasSubstr("long is preempted at 1.00h for urgent (it ran 1.00h); it resumes at 1.50h"));
  Output st = p.gpuq({"status", "--gpus", "0-3"});
  EXPECT_THAT(st.out, ::testing::ContainsRegex("urgent +pending .*by preempting long \\(ran 1\\.0h; resumes ~"))
      << st.out;
  // Not preemptible by the settings (the job's own field unset): the urgent job waits.
  p.plan(R"({"jobs": [{"id": "long", "script": "j.sh", "gpus": 4, "est_hours": 2},
                      {"id": "gate", "script": "j.sh", "gpus": 0, "est_hours": 1, "priority": 60},
                      {"id": "urgent", "script": "j.sh", "gpus": 2, "priority": 1, "est_hours": 0.5,
                       "deps": ["gate"]}]})");
  Output calm = p.gpuq({"simulate", "--gpus", "0-3", "--preempt-min-minutes", "0"});
  EXPECT_THAT(calm.err, Not(HasSubstr("preempted")));
  Output all = p.gpuq({"simulate", "--gpus", "0-3", "--preempt-min-minutes", "0", "--preemptible", "true"});
  EXPECT_THAT(all.err, HasSubstr("long is preempted at 1.00h for urgent"));
}

}  // namespace
}  // namespace gpuq::test
