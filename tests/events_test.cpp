// run wakes on events, not on its timer: each test runs with --poll 3600, so anything
// that happens within seconds happened because of an event.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gpuq/live/slurm.h"
#include "gpuq/live/waker.h"
#include "test_util.h"

using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;

namespace {

// "At once": well under run's --poll of an hour and under the 5 s between looks for a file no
// watch covers (kUnwatchedFileLook), so that a wake by a timer fails; tens of milliseconds on an
// idle machine, with room for a sanitizer build on two busy cores.
constexpr double kAtOnce = 4;

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void expect_soon(double from, double to, const std::string& what) {
  EXPECT_GE(to, 0) << what << ": it never happened";
  EXPECT_LT(to - from, kAtOnce) << what << ": " << (to - from) << " s";
  std::printf("%s: %.3f s\n", what.c_str(), to - from);
}

struct Slow : PlanFolder {
  Slow() : PlanFolder(1) {
    // With GATE set, a job goes on only once the test has made that file.
    d.write("job.sh", "echo \"$GPUQ_JOB_ID\" >> started\necho \"$GPUQ_JOB_ID start $EPOCHREALTIME\" >> times\n"
                      "if [ -n \"$GATE\" ]; then while [ ! -e \"$GATE\" ]; do sleep 0.01; done; else sleep 0.3; fi\n"
                      "echo \"$GPUQ_JOB_ID end $EPOCHREALTIME\" >> times\n");
  }
  // When job `id` started or ended (`what`), by its own clock line (unix seconds); -1 if it did not.
  double at(const std::string& id, const std::string& what) const {
    std::istringstream in(d.read("times"));
    for (std::string who, w, t; in >> who >> w >> t;)
      if (who == id && w == what) return std::stod(t);
    return -1;
  }
  // Alone on its GPUs (--node-dir off): a run sharing a node looks at it every second while its
  // first decision waits for the runs that start with it, which would wake it without an event.
  std::unique_ptr<Background> run() const {
    return background({"run", "--poll", "3600", "--node-dir", "off"});
  }
  // With `run` going and `id` pending for want of the file `path` alone (in a folder that
  // exists), creating the file must start the job at once, and the plan then ends. Whenever
  // the file comes (before run watches the folder or after), run must see it.
  void file_appears_and_starts(Background& run, const std::string& id, const std::string& path) const {
    EXPECT_TRUE(has_state());
    EXPECT_EQ(status_of(id), "pending");
    double made = now();
    d.write(path, "");
    auto r = run.wait(kPatience);
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(status_of(id), "done");
    expect_soon(made, at(id, "start"), "the file made to " + id + "'s start");
  }
};

}  // namespace

TEST(Events, AJobThatExitsWakesRunAtOnce) {
  Slow q;
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 1},
                             {"id": "b", "script": "job.sh", "gpus": 1, "deps": ["a"]}])");
  auto run = q.run();
  auto r = run->wait(kPatience);  // with only the timer, b would start an hour after a ends
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("all jobs finished"));
  EXPECT_EQ(lines_of(q.d.path() + "/started"), (std::vector<std::string>{"a", "b"}));
  expect_soon(q.at("a", "end"), q.at("b", "start"), "a's end to b's start");
}

TEST(Events, AnAdoptedJobThatExitsWakesRunAtOnce) {
  Slow q;
  q.env["GATE"] = "gate";
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 1},
                             {"id": "b", "script": "job.sh", "gpus": 1, "deps": ["a"]}])");
  auto first = q.run();
  ASSERT_TRUE(eventually([&] { return q.status_of("a") == "running"; }));
  first->signal(SIGTERM);  // a keeps running; the next run adopts it (it is not that run's child)
  EXPECT_EQ(first->wait(kPatience).status, 0);
  auto state_inode = [&] {
    struct stat st;
    return ::stat((q.d.path() + "/plan.state.json").c_str(), &st) == 0 ? st.st_ino : 0;
  };
  const ino_t before = state_inode();
  auto second = q.run();
  // Once the second run has saved its first tick it has adopted a; then a ends.
  ASSERT_TRUE(eventually([&] { return state_inode() != before; }));
  q.d.write("gate", "");
  auto r = second->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out;
  expect_soon(q.at("a", "end"), q.at("b", "start"), "the adopted a's end to b's start");
  EXPECT_THAT(r.out, HasSubstr("done a"));
  EXPECT_THAT(r.out, HasSubstr("all jobs finished"));
}

TEST(Events, ARetryFromAnotherShellIsActedOnAtOnce) {
  Slow q;
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 1}, {"id": "b", "script": "job.sh", "gpus": 1}])");
  ASSERT_EQ(run_gpuq({"hold", "--plan", "plan.json", "b"}, q.d.path(), q.env).status, 0);
  auto run = q.run();
  ASSERT_TRUE(eventually([&] { return q.status_of("a") == "done"; }));
  EXPECT_EQ(q.status_of("b"), "held");
  double asked = now();
  ASSERT_EQ(run_gpuq({"retry", "--plan", "plan.json", "b"}, q.d.path(), q.env).status, 0);
  auto r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(q.status_of("b"), "done");
  expect_soon(asked, q.at("b", "start"), "gpuq retry b to b's start");
}

TEST(Events, AFileDepCreatedInAnExistingFolderStartsItsJobAtOnce) {
  Slow q;
  q.d.write("ckpt/.keep", "");
  q.d.write("plan.json", R"([{"id": "eval", "script": "job.sh", "gpus": 1, "deps": ["file:ckpt/READY"]}])");
  auto run = q.run();
  // run has made its first tick (has written the state file)
  ASSERT_TRUE(eventually([&] { return q.has_state() && q.status_of("eval") == "pending"; }));
  q.file_appears_and_starts(*run, "eval", "ckpt/READY");
}

TEST(Events, AFileDepOfAJobWhoseOtherDepJustFinishedStartsItAtOnce) {
  // run watches folders only for jobs that wait for files alone; once `train` is done,
  // `eval` is one of them, and the file's arrival must still wake run.
  Slow q;
  q.d.write("ckpt/.keep", "");
  q.d.write("plan.json", R"([{"id": "train", "script": "job.sh", "gpus": 1},
    {"id": "eval", "script": "job.sh", "gpus": 1, "deps": ["train", "file:ckpt/READY"]}])");
  auto run = q.run();
  ASSERT_TRUE(eventually([&] { return q.status_of("train") == "done"; }));
  q.file_appears_and_starts(*run, "eval", "ckpt/READY");
}

// A job's end wakes one wait, not every wait after it. A run whose tick could not record the end
// (its folder removed, its state's disk full) watches the same job again, and its pidfd stays
// readable: each wait returned at once, and the leftover runs of a CI's tests, their folders
// removed, spun at 70 % of a core for half an hour.
TEST(Waker, AJobsEndWakesOneWaitNotEvery) {
  TempDir d;
  gpuq::PosixWaker waker(d.path() + "/plan.state.json");
  pid_t child = fork();
  if (child == 0) _exit(0);
  auto waited = [&](double timeout) {
    auto t0 = std::chrono::steady_clock::now();
    waker.wait(timeout);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  waker.watch_jobs({{child, "a"}});
  EXPECT_LT(waited(5), 2.0) << "its end woke no wait";
  waker.watch_jobs({{child, "a"}});  // still running in the state: the tick could not save its end
  EXPECT_GE(waited(0.5), 0.45) << "the same end woke a second wait";
  EXPECT_GE(waited(0.5), 0.45) << "the same end woke a third wait";
  waker.watch_jobs({});  // recorded: watched no more
  waitpid(child, nullptr, WNOHANG);
}

// A job's exit code in place wakes the wait at once, while its wrapper still syncs it and exits
// (write_exit_code): a chain's next job starts without waiting for either. Another file made in
// the logs folder (the CPU time, the next attempt's room) wakes nothing, and a job no longer
// watched wakes nothing when its code lands.
TEST(Waker, AnExitCodeInPlaceWakesTheWaitBeforeTheWrapperIsGone) {
  TempDir d;
  d.write("logs/.keep", "");
  gpuq::PosixWaker waker(d.path() + "/plan.state.json", {}, [&](const std::string& id) { return d.path() + "/logs/" + id + ".exit"; });
  pid_t child = fork();
  if (child == 0) {
    ::pause();
    _exit(0);
  }
  auto waited = [&](double timeout, const std::function<void()>& meanwhile) {
    auto t0 = std::chrono::steady_clock::now();
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      meanwhile();
    });
    waker.wait(timeout);
    t.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  waker.watch_jobs({{child, "train"}});
  waker.watch_files({});
  EXPECT_GE(waited(0.6, [&] { d.write("logs/train.cpu", "1.5\n"); }), 0.55) << "the CPU time's file woke the wait";
  d.write("logs/train.exit.new", "0\n");
  EXPECT_LT(waited(5, [&] { std::filesystem::rename(d.path() + "/logs/train.exit.new", d.path() + "/logs/train.exit"); }), 2.0)
      << "the exit code in place woke no wait (its wrapper still lives)";
  waker.watch_jobs({});
  waker.watch_files({});
  std::filesystem::remove(d.path() + "/logs/train.exit");
  d.write("logs/train.exit.new", "0\n");
  EXPECT_GE(waited(0.6, [&] { std::filesystem::rename(d.path() + "/logs/train.exit.new", d.path() + "/logs/train.exit"); }), 0.55)
      << "the exit code of a job no longer watched woke the wait";
  ::kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

// Under Slurm a job's group is its Slurm id, no pid of this machine: SlurmWaker watches its exit
// file alone. No pidfd is asked for the id (a pid that does not exist would make the first wait
// return at once, and one that does would be some other process), and the exit code's rename
// wakes the wait.
TEST(Waker, ASlurmJobIsWatchedByItsExitFileNotItsIdAsAPid) {
  TempDir d;
  d.write("logs/.keep", "");
  gpuq::PosixWaker local(d.path() + "/plan.state.json", {}, [&](const std::string& id) { return d.path() + "/logs/" + id + ".exit"; });
  gpuq::SlurmWaker waker(local);
  auto waited = [&](double timeout, const std::function<void()>& meanwhile) {
    auto t0 = std::chrono::steady_clock::now();
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      meanwhile();
    });
    waker.wait(timeout);
    t.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  waker.watch_jobs({{999999999, "a"}});  // a Slurm id no process has here
  waker.watch_files({});
  EXPECT_GE(waited(0.6, [] {}), 0.55) << "the Slurm id was taken for a pid (gone: the wait returned at once)";
  d.write("logs/a.exit.tmp", "0\n");
  EXPECT_LT(waited(5, [&] { std::filesystem::rename(d.path() + "/logs/a.exit.tmp", d.path() + "/logs/a.exit"); }), 2.0)
      << "the Slurm job's exit code woke no wait";
}
