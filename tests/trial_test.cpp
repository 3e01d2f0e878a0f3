// What a new user's trial of the look and the new `add` flags found (real gpuq commands): a
// restart that a failed job's missing script kept from running the rest, `add` taking a job that
// can never start, `add --dry-run` of a sweep, a paused plan's what-if, a run whose run file an
// earlier run left, and `status --watch --json` as a stream.
#include <fmt/format.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace gpuq::test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// A job failed for good because its script was missing (or held) does not keep a restarted run
// from starting the rest: run only checks the scripts of the jobs it may start.
TEST(Trial, ARestartRunsTheRestWhenAFailedJobsScriptIsMissing) {
  PlanFolder p(2);
  p.d.write("ok.sh", "true\n");
  p.plan(R"([{"id": "gone", "script": "nosuch.sh", "gpus": 1}, {"id": "held", "script": "nosuch.sh", "gpus": 1},
             {"id": "ok", "script": "ok.sh", "gpus": 1}])");
  p.d.write("plan.state.json", R"({"gone": {"status": "failed", "exit": 127, "end": 1700000000, "outcome": "unstartable",
                                   "reason": "its script nosuch.sh is missing"},
                                   "held": {"status": "held"}})");
  auto r = p.background({"run", "--gpus", "0,1", "--poll", "0.2", "--node-dir", "off"});  // the held job keeps it going
  ASSERT_TRUE(eventually([&] { return p.status_of("ok") == "done"; })) << r->out() << r->err();
  EXPECT_THAT(r->err(), Not(HasSubstr("nothing started")));
  EXPECT_EQ(p.status_of("gone"), "failed");
  EXPECT_EQ(p.status_of("held"), "held");
  r->signal(SIGTERM);
  r->wait(kPatience);
}

// add refuses a script that is not there (unless the job waits on a job that may make it), and a
// job more GiB than any GPU takes: each would never run; the plan is left byte for byte.
TEST(Trial, AddRefusesAJobThatCouldNeverRun) {
  PlanFolder p(2);
  p.d.write("job.sh", "true\n");
  const std::string text = R"([{"id": "a", "script": "job.sh", "gpus": 1}])";
  p.plan(text);
  Output missing = p.gpuq({"add", "--id", "m", "--", "jbo.sh"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_THAT(missing.err, HasSubstr("m not added"));
  EXPECT_THAT(missing.err, HasSubstr("jbo.sh"));
  Output big = p.gpuq({"add", "--id", "big", "--gpu-mem-gib", "200", "--", "job.sh"});
  EXPECT_EQ(big.status, 2);
  EXPECT_THAT(big.err, HasSubstr("needs 200 GiB on a GPU, more than any takes"));
  Output twice = p.gpuq({"add", "--id", "sw", "--matrix", "lr=1,2", "--matrix", "lr=3", "--", "job.sh"});
  EXPECT_EQ(twice.status, 2);
  EXPECT_THAT(twice.err, HasSubstr("--matrix gives lr twice"));
  EXPECT_EQ(p.d.read("plan.json"), text);
  // A job that waits on a job of the plan may have its script written by it: taken.
  Output later = p.gpuq({"add", "--id", "made", "--deps", "a", "--", "made_by_a.sh"});
  EXPECT_EQ(later.status, 0) << later.err;
}

// add --dry-run of a sweep says when its first point would start (not "never"), and on a paused
// plan says it is paused.
TEST(Trial, AddDryRunOfASweepSaysWhenItsPointsStartAndAPauseIsSaid) {
  PlanFolder p(2);
  p.d.write("job.sh", "true\n");
  p.plan(R"([{"id": "a", "script": "job.sh", "gpus": 1, "est_hours": 1}])");
  Output sweep = p.gpuq({"add", "--dry-run", "--id", "sw", "--gpus", "1", "--est-hours", "0.5", "--matrix",
                         "lr=1e-4,3e-4", "--", "job.sh"});
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  EXPECT_THAT(sweep.out, HasSubstr("its 2 points would start from ~"));
  EXPECT_THAT(sweep.out, Not(HasSubstr("never")));
  ASSERT_EQ(p.gpuq({"pause"}).status, 0);
  Output paused = p.gpuq({"add", "--dry-run", "--id", "b", "--", "job.sh"});
  ASSERT_EQ(paused.status, 0) << paused.err;
  EXPECT_THAT(paused.out, HasSubstr("the plan is paused"));
}

// A run holds the plan's lock while its run file is an earlier run's (it could not write its own:
// a full disk): status names the run of the lock, and says the file is not its.
TEST(Trial, StatusNamesTheRunOfTheLockWhenTheRunFileIsAnEarlierRuns) {
  PlanFolder p(2);
  p.d.write("job.sh", "true\n");
  p.plan(R"([{"id": "a", "script": "job.sh", "gpus": 1}])");
  ASSERT_EQ(p.gpuq({"run", "--node-dir", "off"}).status, 0);  // leaves plan.run.json, of a pid now gone
  std::string lock = p.d.path() + "/plan.run.lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // this test is "the run" now
  std::string me = std::to_string(::getpid()) + "\n";
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  ASSERT_EQ(::pwrite(fd, me.data(), me.size(), 0), static_cast<ssize_t>(me.size()));
  Output s = p.gpuq({"status"});
  ::close(fd);
  EXPECT_THAT(s.out, HasSubstr(fmt::format("`gpuq run` (pid {}", ::getpid()))) << s.out;
  EXPECT_THAT(s.out, HasSubstr("is running this plan; its run file is an earlier run's")) << s.out;
}

// status --watch --json: a stream of JSON objects, one a redraw, with nothing between them.
TEST(Trial, StatusWatchJsonIsAStreamOfObjects) {
  PlanFolder p(2);
  p.d.write("job.sh", "true\n");
  p.plan(R"([{"id": "a", "script": "job.sh", "gpus": 1}])");
  auto w = p.background({"status", "--json", "--watch", "0.2"});
  ASSERT_TRUE(eventually([&] { return w->out().find("\"jobs\"", w->out().find("\"jobs\"") + 1) != std::string::npos; }));
  w->signal(SIGTERM);
  Output o = w->wait(kPatience);
  std::istringstream in(o.out);
  int objects = 0;
  while (in >> std::ws && in.peek() != EOF) {
    json j;
    ASSERT_NO_THROW(in >> j) << o.out;
    EXPECT_TRUE(j.contains("jobs"));
    ++objects;
  }
  EXPECT_GE(objects, 2);
  Output zero = p.gpuq({"status", "--watch", "0"});
  EXPECT_EQ(zero.status, 2);
  EXPECT_THAT(zero.err, HasSubstr("--watch: must be seconds above 0"));
}

// --pairs naming GPUs the node does not have: a pair that would never be used is refused by name.
TEST(Trial, PairsOfGpusTheNodeDoesNotHaveAreRefused) {
  PlanFolder p(8);
  p.d.write("job.sh", "true\n");
  p.plan(R"([{"id": "a", "script": "job.sh", "gpus": 2}])");
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"status", "--pairs", "0-9"}, {"simulate", "--pairs", "0-9"}, {"run", "--gpus", "0-3", "--pairs", "4-5"}}) {
    Output o = p.gpuq(cmd);
    EXPECT_EQ(o.status, 2) << cmd[0] << o.out << o.err;
    EXPECT_THAT(o.err, HasSubstr("of this node")) << cmd[0];
  }
  EXPECT_FALSE(p.has_state()) << "run started nothing";
}

}  // namespace
}  // namespace gpuq::test
