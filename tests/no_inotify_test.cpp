// `run` where inotify cannot be had (issue 31: the fallback was never run): the built gpuq with
// inotify_init1 failing (EMFILE, a preloaded no_inotify.cpp). run says so once, and what
// inotify would have woken it for, an edit of the plan, is taken at the next --poll tick.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gpuq::test;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

// `base` with inotify taken away from gpuq. ASan (a sanitized build) must not insist on being
// the first library loaded: the preloaded one is.
std::map<std::string, std::string> without_inotify(std::map<std::string, std::string> base) {
  base["LD_PRELOAD"] = NO_INOTIFY;
  const char* asan = std::getenv("ASAN_OPTIONS");
  base["ASAN_OPTIONS"] = std::string(asan ? asan : "") + (asan && *asan ? ":" : "") + "verify_asan_link_order=0";
  return base;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// An editor's rename-over of the plan while a job runs: with inotify, run wakes at once; without
// it, at the next tick of --poll 1, so the new job runs within seconds; with --poll 3600 it
// would wait an hour. The one line on stderr says why it waits for --poll.
TEST(RunWithoutInotify, SaysSoAndTakesAnEditedPlanAtTheNextPoll) {
  PlanFolder f(2);
  f.d.write("slow.sh", "echo started >> trace\nfor i in $(seq 600); do [ -e go ] && exit 0; sleep 0.05; done\n");
  f.d.write("quick.sh", "echo \"$GPUQ_JOB_ID\" >> ran.txt\n");
  f.d.write("plan.json", R"([{"id": "a", "script": "slow.sh", "gpus": 1}])");
  auto r = start_gpuq({"run", "--plan", "plan.json", "--poll", "1", "--gpus", "0,1"}, f.d.path(), without_inotify(f.env));
  struct Go {
    const TempDir& d;
    ~Go() { d.write("go", ""); }
  } go{f.d};
  ASSERT_TRUE(eventually([&] { return f.d.read("trace") == "started\n"; })) << r->out() << r->err();
  EXPECT_EQ(count_of(r->err(), "inotify_init1"), 1u) << r->err();
  EXPECT_THAT(r->err(), HasSubstr("gpuq run: inotify_init1 (plan edits and control commands wait for --poll, file: "
                                  "deps are looked for every 5 s): Too many open files\n"));
  f.d.write(".plan.json.tmp", R"([{"id": "a", "script": "slow.sh", "gpus": 1},
                                   {"id": "b", "script": "quick.sh", "gpus": 1}])");
  auto t0 = std::chrono::steady_clock::now();
  fs::rename(f.d.path() + "/.plan.json.tmp", f.d.path() + "/plan.json");
  ASSERT_TRUE(eventually([&] { return f.d.read("ran.txt") == "b\n"; })) << r->out() << r->err();
  // A tick of 1 s, the reload's settling and the job's start, on a busy machine: far below the hour
  // a missed edit would take, and below the 20 s of the default --poll.
  EXPECT_LT(seconds_since(t0), 15) << r->out();
  EXPECT_THAT(r->out(), HasSubstr("plan reloaded: +1 job (b)"));
  f.d.write("go", "");
  Output o = r->wait(kPatience);
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("all jobs finished"));
}

// Issue 51, item 22: a CI run under load waited 205 s for a job whose file: dep had been made,
// with --poll 3600; without inotify (a user's 128 inotify instances used up) such a job waited
// for --poll, an hour here. A file no watch covers is looked for every 5 s, whatever --poll: in
// a folder that exists, and in one made later with the file.
TEST(RunWithoutInotify, AFileDepIsLookedForEveryFewSecondsWhateverThePoll) {
  PlanFolder f(2);
  f.d.write("job.sh", "echo \"$GPUQ_JOB_ID $EPOCHREALTIME\" >> ran.txt\n");
  f.d.write("ckpt/.keep", "");
  f.d.write("plan.json", R"([{"id": "eval", "script": "job.sh", "gpus": 1, "deps": ["file:ckpt/READY"]},
                             {"id": "late", "script": "job.sh", "gpus": 1, "deps": ["file:later/READY"]}])");
  auto r = start_gpuq({"run", "--plan", "plan.json", "--poll", "3600", "--gpus", "0,1"}, f.d.path(), without_inotify(f.env));
  ASSERT_TRUE(eventually([&] { return fs::exists(f.d.path() + "/plan.state.json"); })) << r->out() << r->err();
  for (const char* path : {"ckpt/READY", "later/READY"}) {
    auto t0 = std::chrono::steady_clock::now();
    f.d.write(path, "");
    std::string id = path[0] == 'c' ? "eval" : "late";
    ASSERT_TRUE(eventually([&] { return f.d.read("ran.txt").find(id + " ") != std::string::npos; }, 60))
        << r->out() << r->err();
    // 5 s between looks, and the job's start on a busy machine: far below the hour of --poll.
    EXPECT_LT(seconds_since(t0), 12) << path;
  }
  Output o = r->wait(kPatience);
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("all jobs finished: 2 done"));
}
