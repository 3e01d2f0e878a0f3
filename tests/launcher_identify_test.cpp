// The recycled-pid guard of the real launcher, PosixLauncher::identify, with a real process
// (issue 31: only the fake's was tested). A state entry records a job's pid and the start
// time the kernel gave that process; a pid whose process started at another time is another
// process's (the pid was recycled) and must never be signalled as the job's.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gpuq/live/launcher.h"
#include "gpuq/live/store.h"
#include "test_util.h"

extern char** environ;

using namespace gpuq;
using namespace gpuq::test;

namespace {

// The start time of `pid` (clock ticks since boot, field 22 of /proc/PID/stat), read here on
// its own rather than through gpuq's reader; 0 if it cannot be read.
unsigned long long start_ticks(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  for (int k = 3; k <= 22 && rest >> field; ++k)
    if (k == 22) return std::stoull(field);
  return 0;
}

// A `sleep 60` child of this process, killed and reaped at the end of the test.
struct Sleeper {
  pid_t pid = -1;
  bool reaped = false;
  Sleeper() {
    char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("60"), nullptr};
    EXPECT_EQ(posix_spawnp(&pid, "sleep", nullptr, nullptr, argv, environ), 0);
  }
  void kill_it() { ::kill(pid, SIGKILL); }
  void reap() {
    int st = 0;
    if (!reaped) ::waitpid(pid, &st, 0);
    reaped = true;
  }
  ~Sleeper() {
    kill_it();
    reap();
  }
};

JobState running(long long pid, std::optional<unsigned long long> start) {
  JobState s;
  s.status = Status::Running;
  s.pid = pid;
  s.pid_start = start;
  return s;
}

}  // namespace

TEST(PosixLauncherIdentify, TheRecordedProcessIsTheSameOneWithAnotherStartTimeItIsAnothers) {
  TempDir d;
  PosixLauncher launcher(paths_for(d.path() + "/plan.json"));
  Sleeper p;
  ASSERT_GT(p.pid, 0);
  unsigned long long start = start_ticks(p.pid);
  ASSERT_GT(start, 0u) << "no start time in /proc/" << p.pid << "/stat";
  EXPECT_EQ(launcher.identify(running(p.pid, start)), Identity::Same);
  // The same pid, recorded with the start time of an earlier process that had it: recycled.
  EXPECT_EQ(launcher.identify(running(p.pid, start - 1)), Identity::Other);
  EXPECT_EQ(launcher.identify(running(p.pid, start + 100)), Identity::Other);
  // An entry of an older gpuq records no start time: the pid alone decides.
  EXPECT_EQ(launcher.identify(running(p.pid, std::nullopt)), Identity::Same);
  // No pid recorded: nothing to signal.
  EXPECT_EQ(launcher.identify(running(0, start)), Identity::Gone);
  EXPECT_EQ(launcher.identify(JobState{}), Identity::Gone);
}

TEST(PosixLauncherIdentify, AZombieIsGoneUnlessItsStartSaysItIsAnothers) {
  TempDir d;
  PosixLauncher launcher(paths_for(d.path() + "/plan.json"));
  Sleeper p;
  ASSERT_GT(p.pid, 0);
  unsigned long long start = start_ticks(p.pid);
  ASSERT_GT(start, 0u);
  p.kill_it();
  // Dead, not yet reaped: a zombie keeps its pid and start time, and runs nothing.
  ASSERT_TRUE(eventually([&] {
    std::ifstream f("/proc/" + std::to_string(p.pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return text.find(") Z ") != std::string::npos;
  }));
  EXPECT_EQ(launcher.identify(running(p.pid, start)), Identity::Gone);
  EXPECT_EQ(launcher.identify(running(p.pid, start - 1)), Identity::Other);
  p.reap();
  // Reaped: no process has the pid (until the kernel hands it out again, far later).
  EXPECT_EQ(launcher.identify(running(p.pid, start)), Identity::Gone);
}

// The wrapper writes its exit code into its room, gives the room that size, and syncs it
// (write_exit_code): a power cut before the sync can keep the size and not the code, and the
// room holds zeros (the power-cut test made them). Zeros are no code (the attempt ended unseen:
// lost, or waiting again after the node's restart), never an exit 0 that would record a job done
// whatever it exited with; in the exit file, the same. A code in either is read, blanks around it.
TEST(PosixLauncherObserve, AnExitFileOfZerosAfterAPowerCutIsNoCodeNotAnExit0) {
  TempDir d;
  PlanPaths paths = paths_for(d.path() + "/plan.json");
  PosixLauncher launcher(paths);
  JobState gone = running(0, std::nullopt);
  gone.pid = 999999999;  // no such process
  gone.start = 1.0;      // long ago: this boot, for the test's purposes, or not; either is no exit 0
  d.write("logs/a.exit", std::string("\0\0", 2));
  Observed o = launcher.observe("a", gone);
  EXPECT_NE(o.kind, Observed::Kind::Exited) << "zeros read as exit " << o.exit;
  EXPECT_EQ(o.exit, kLostExit);
  std::filesystem::remove(d.path() + "/logs/a.exit");
  d.write("logs/a.exit.new", std::string("\0\0", 2));
  o = launcher.observe("a", gone);
  EXPECT_NE(o.kind, Observed::Kind::Exited) << "zeros in the room read as exit " << o.exit;
  EXPECT_EQ(o.exit, kLostExit);
  d.write("logs/a.exit.new", " 3\n");
  o = launcher.observe("a", gone);
  EXPECT_EQ(o.kind, Observed::Kind::Exited);
  EXPECT_EQ(o.exit, 3);
  d.write("logs/a.exit", "7\n");
  o = launcher.observe("a", gone);
  EXPECT_EQ(o.kind, Observed::Kind::Exited);
  EXPECT_EQ(o.exit, 7);
}
