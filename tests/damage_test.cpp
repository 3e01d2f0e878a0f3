// Damaged files and hostile paths: each gets its message and exit status, and no file is changed.
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

struct Dir : PlanFolder {
  Dir() : PlanFolder(1) {
    d.write("job.sh", "echo ran >> ran.txt\n");
    d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 0}, {"id": "b", "script": "job.sh", "gpus": 0}])");
  }
};

struct Damage {
  const char* name;
  const char* content;
  const char* message;
};

}  // namespace

TEST(Damage, EachDamagedStateFileIsNamedExplainedAndLeftAlone) {
  const Damage cases[] = {
      {"empty", "", "plan.state.json: the file is empty"},
      {"truncated", "{\n \"a\": {\n  \"status\": \"do", "plan.state.json: line 3, column"},
      {"not JSON", "this is not json\n", "plan.state.json: line 1, column 1: not valid JSON"},
      {"wrong shape", "[1, 2, 3]\n", "the state is an object keyed by job id, not a list"},
      {"entry of the wrong shape", "{\"a\": 5}\n", "job 'a': the entry must be an object, not a number"},
      {"unknown status", "{\"a\": {\"status\": \"exploded\"}}\n", "job 'a': unknown status \"exploded\""},
      {"wrong field type", "{\"a\": {\"status\": \"done\", \"exit\": \"zero\"}}\n", "\"exit\" must be a whole number"},
      {"running without pid", "{\"a\": {\"status\": \"running\"}}\n", "a running entry needs a \"pid\""},
  };
  for (const Damage& c : cases) {
    Dir q;
    q.d.write("plan.state.json", c.content);
    for (auto args : std::vector<std::vector<std::string>>{
             {"run", "--poll", "1"}, {"status"}, {"retry", "a"}, {"hold", "b"}, {"kill", "a"}}) {
      auto r = q.gpuq(args);
      EXPECT_EQ(r.status, 1) << c.name << ": " << args[0];
      EXPECT_THAT(r.err, HasSubstr(c.message)) << c.name << ": " << args[0];
      EXPECT_THAT(r.err, HasSubstr("will not overwrite it")) << c.name;
      EXPECT_EQ(q.d.read("plan.state.json"), c.content) << c.name << ": " << args[0] << " changed the file";
    }
    EXPECT_FALSE(fs::exists(q.d.path() + "/ran.txt")) << c.name << ": a job ran";
  }
}

TEST(Damage, MessagePointsAtTheBackupOfTheLastGoodState) {
  Dir q;
  ASSERT_EQ(q.gpuq({"hold", "a"}).status, 0);
  ASSERT_EQ(q.gpuq({"hold", "b"}).status, 0);  // the second save keeps the first as .bak
  std::string good = q.d.read("plan.state.json.bak");
  EXPECT_EQ(json::parse(good)["a"]["status"], "held");
  q.d.write("plan.state.json", "{garbage");
  auto r = q.gpuq({"status"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("the previous good state is plan.state.json.bak"));
  EXPECT_EQ(q.d.read("plan.state.json.bak"), good);
}

TEST(Damage, EntriesOfJobsNoLongerInThePlanAreWarnedAboutAndKept) {
  Dir q;
  q.d.write("plan.state.json", R"({"renamed_job": {"status": "done", "exit": 0}})");
  auto r = q.gpuq({"run", "--poll", "1"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.err, HasSubstr("names 1 job(s) that are not in plan.json: renamed_job (done)"));
  EXPECT_EQ(q.state()["renamed_job"]["status"], "done");
}

TEST(Damage, GarbageInAnExitFileFailsThatJobWithAClearLine) {
  Dir q;
  Background proc({"true"}, q.d.path());
  ASSERT_EQ(proc.wait(kPatience).status, 0);  // a pid that ended
  q.d.write("logs/a.exit", "seven\n");
  q.d.write("plan.state.json", R"({"a": {"status": "running", "pid": )" + std::to_string(proc.pid()) +
                                   R"(, "gpus": [], "start": 1.0}})");
  auto r = q.gpuq({"run", "--poll", "1", "--max-retries", "0"});
  EXPECT_EQ(r.status, 3);  // 3: a job did not end done
  EXPECT_THAT(r.out, HasSubstr("failed a (exit 1): logs/a.exit holds 'seven', not an exit code"));
  EXPECT_EQ(q.state()["a"]["status"], "failed");
}

TEST(Damage, PlanEditedIntoNonsenseWhileRunningDoesNotDisturbTheRun) {
  Dir q;
  q.d.write("slow.sh", "while [ ! -e go ]; do sleep 0.05; done\n");  // runs until the plan is broken
  q.d.write("plan.json", R"([{"id": "a", "script": "slow.sh", "gpus": 0}, {"id": "b", "script": "job.sh", "gpus": 0, "deps": ["a"]}])");
  auto run = start_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, q.d.path(), q.env);
  ASSERT_TRUE(eventually([&] { return q.d.read("plan.state.json").find("running") != std::string::npos; }, kPatience));
  q.d.write("plan.json", "[{\"id\": ");
  q.d.write("go", "");
  auto r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("all jobs finished"));  // run read the plan once, at its start
  EXPECT_EQ(q.d.read("ran.txt"), "ran\n");             // b, started after the plan was broken
  // Any new command names the broken plan.
  auto s = q.gpuq({"status"});
  EXPECT_EQ(s.status, 2);
  EXPECT_THAT(s.err, HasSubstr("plan.json: line 1, column 9: invalid JSON"));
}

TEST(Hostile, LockFileSymlinkIsRefusedAndItsTargetUntouched) {
  Dir q;
  q.d.write("victim.txt", "precious\n");
  fs::create_symlink(q.d.path() + "/victim.txt", q.d.path() + "/plan.lock");
  for (auto args : std::vector<std::vector<std::string>>{{"run", "--poll", "1"}, {"hold", "a"}}) {
    auto r = q.gpuq(args);
    EXPECT_EQ(r.status, 1) << args[0];
    EXPECT_THAT(r.err, HasSubstr("the lock file plan.lock is a symbolic link; refusing to use it"));
  }
  EXPECT_EQ(q.d.read("victim.txt"), "precious\n");
}

TEST(Hostile, StateFileSymlinkIsRefused) {
  Dir q;
  q.d.write("victim.json", "{}\n");
  fs::create_symlink(q.d.path() + "/victim.json", q.d.path() + "/plan.state.json");
  auto r = q.gpuq({"hold", "a"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("plan.state.json is a symbolic link; refusing to follow it"));
  EXPECT_EQ(q.d.read("victim.json"), "{}\n");
}

TEST(Hostile, LogFileSymlinkFailsThatJobNotItsTarget) {
  Dir q;
  q.d.write("victim.txt", "precious\n");
  fs::create_directories(q.d.path() + "/logs");
  fs::create_symlink(q.d.path() + "/victim.txt", q.d.path() + "/logs/a.log");
  auto r = q.gpuq({"run", "--poll", "1", "--max-retries", "0"});
  EXPECT_EQ(r.status, 3);  // 3: a job did not end done
  // Named by its whole path, as the launcher names each of a job's files.
  EXPECT_THAT(r.out, HasSubstr("cannot start a: its log " + q.d.path() + "/logs/a.log is a symbolic link"));
  EXPECT_EQ(q.d.read("victim.txt"), "precious\n");
  json s = q.state();
  EXPECT_EQ(s["a"]["status"], "failed");
  EXPECT_EQ(s["b"]["status"], "done");
}

TEST(Hostile, FilesAreCreatedWithSensibleModes) {
  Dir q;
  struct Umask {  // this process's umask for this test only
    mode_t before = ::umask(022);
    ~Umask() { ::umask(before); }
  } umask_022;
  ASSERT_EQ(q.gpuq({"run", "--poll", "1"}).status, 0);
  for (const char* f : {"plan.state.json", "plan.lock", "logs/a.log", "logs/a.exit"}) {
    struct stat st;
    ASSERT_EQ(::lstat((q.d.path() + "/" + f).c_str(), &st), 0) << f;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << f;
    EXPECT_EQ(st.st_mode & 0777, 0644u) << f;
  }
}

namespace {

/// A small tmpfs for the plan's folder, with logs/ on a second, roomy one, so that
/// filling the first fails only the state's save. Skips the test where mounting is not allowed.
struct SmallDisk {
  TempDir d;
  std::string top, logs;
  bool mounted = false, logs_mounted = false;
  SmallDisk() {
    top = d.path() + "/fs";
    logs = top + "/logs";
    fs::create_directories(top);
    mounted = ::mount("tmpfs", top.c_str(), "tmpfs", 0, "size=256k,mode=0755") == 0;
    if (!mounted) return;
    fs::create_directories(logs);
    logs_mounted = ::mount("tmpfs", logs.c_str(), "tmpfs", 0, "size=4m,mode=0755") == 0;
  }
  ~SmallDisk() {
    if (logs_mounted) ::umount2(logs.c_str(), MNT_DETACH);
    if (mounted) ::umount2(top.c_str(), MNT_DETACH);
  }
  /// Writes filler until the small disk is full.
  void fill() const {
    std::ofstream f(top + "/filler", std::ios::binary);
    std::string block(4096, 'x');
    for (int i = 0; i < 1024 && f.write(block.data(), block.size()); ++i) f.flush();
  }
};

}  // namespace

TEST(DiskFull, FailedSaveKeepsThePreviousStateAndIsRetriedNextTick) {
  SmallDisk disk;
  if (!disk.mounted || !disk.logs_mounted) GTEST_SKIP() << "mounting a tmpfs needs root (CAP_SYS_ADMIN)";
  TempDir scripts;
  scripts.write("nvidia-smi", "#!/bin/sh\necho '0, 0'\n", 0755);
  // Each job runs until the test creates its go file: none ends before the disk is full.
  auto until = [&](const std::string& go) { return "while [ ! -e " + scripts.path() + "/" + go + " ]; do sleep 0.05; done\n"; };
  scripts.write("quick.sh", until("quick.go"));
  scripts.write("long.sh", "echo $$ > " + scripts.path() + "/long.pid.tmp && mv " + scripts.path() + "/long.pid.tmp " +
                               scripts.path() + "/long.pid\n" + until("long.go"));
  std::ofstream(disk.top + "/plan.json")
      << R"([{"id": "quick", "script": ")" << scripts.path() << R"(/quick.sh", "gpus": 0},
            {"id": "long", "script": ")" << scripts.path() << R"(/long.sh", "gpus": 0}])";
  auto run = start_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, disk.top,
                        {{"GPUQ_NVIDIA_SMI", scripts.path() + "/nvidia-smi"}});
  auto state_text = [&] {
    std::ifstream f(disk.top + "/plan.state.json");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  ASSERT_TRUE(eventually([&] {
    json s = json::parse(state_text(), nullptr, false);
    return !s.is_discarded() && s.value("quick", json::object()).value("status", "") == "running" &&
           s.value("long", json::object()).value("status", "") == "running";
  }, kPatience)) << state_text();
  ASSERT_TRUE(eventually([&] { return fs::exists(scripts.path() + "/long.pid"); }, kPatience));
  disk.fill();
  std::string before = state_text();
  // quick ends; its save fails for want of space.
  std::ofstream(scripts.path() + "/quick.go").close();
  ASSERT_TRUE(eventually([&] { return run->out().find("no job starts until the state can be saved") != std::string::npos; }, kPatience))
      << run->out();
  EXPECT_THAT(run->out(), HasSubstr("No space left on device"));
  EXPECT_EQ(state_text(), before);  // the previous state is intact
  long long long_pid = std::stoll(lines_of(scripts.path() + "/long.pid").at(0));
  EXPECT_TRUE(pid_alive(long_pid));  // running jobs are not disturbed
  fs::remove(disk.top + "/filler");
  ASSERT_TRUE(eventually([&] { return run->out().find("the state is saved again") != std::string::npos; }, kPatience))
      << run->out();
  EXPECT_EQ(json::parse(state_text())["quick"]["status"], "done");
  std::ofstream(scripts.path() + "/long.go").close();
  auto r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(json::parse(state_text())["long"]["status"], "done");
}

TEST(DiskFull, ReadOnlyFolderIsReportedAndTheQueueCarriesOnWhenWritable) {
  SmallDisk disk;
  if (!disk.mounted || !disk.logs_mounted) GTEST_SKIP() << "mounting a tmpfs needs root (CAP_SYS_ADMIN)";
  TempDir scripts;
  scripts.write("nvidia-smi", "#!/bin/sh\necho '0, 0'\n", 0755);
  // Runs until the test creates go: it cannot end (and run save its end) before the folder is read-only.
  scripts.write("quick.sh", "while [ ! -e " + scripts.path() + "/go ]; do sleep 0.05; done\n");
  std::ofstream(disk.top + "/plan.json") << R"([{"id": "quick", "script": ")" << scripts.path()
                                          << R"(/quick.sh", "gpus": 0}])";
  auto run = start_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, disk.top,
                        {{"GPUQ_NVIDIA_SMI", scripts.path() + "/nvidia-smi"}});
  ASSERT_TRUE(eventually([&] { return fs::exists(disk.top + "/plan.state.json"); }, kPatience));
  // EBUSY while run has a file of the folder open for writing (a save, the event log, the run
  // file between two ticks): tried again until it is between writes.
  ASSERT_TRUE(eventually([&] { return ::mount(nullptr, disk.top.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0; },
                         kPatience))
      << std::strerror(errno);
  std::ofstream(scripts.path() + "/go").close();
  // The state's save met the read-only folder (the run file's may come first, and alone it
  // would let the folder be writable again before quick's end is saved).
  ASSERT_TRUE(eventually([&] { return run->out().find("no job starts until the state can be saved") != std::string::npos; },
                         kPatience))
      << run->out();
  EXPECT_THAT(run->out(), HasSubstr("the folder of plan.state.json is read-only (Read-only file system)"));
  ASSERT_EQ(::mount(nullptr, disk.top.c_str(), nullptr, MS_REMOUNT, "size=256k"), 0);
  auto r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("the state is saved again"));
  EXPECT_THAT(r.out, HasSubstr("all jobs finished"));
}
