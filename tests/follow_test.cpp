// `gpuq logs`: the tail of a log, and `-f` following it until the job ends. Every test
// that races a job against the follower makes the job wait for a file the test creates
// once the follower is surely following: none depends on a sleep being long enough.
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "gpuq/live/follow.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

/// What the FILE* a function printed to holds, through open_memstream.
class Captured {
 public:
  Captured() : f_(open_memstream(&buf_, &size_)) {}
  ~Captured() {
    std::fclose(f_);
    std::free(buf_);
  }
  Captured(const Captured&) = delete;
  Captured& operator=(const Captured&) = delete;
  std::FILE* file() const { return f_; }
  std::string text() {
    std::fflush(f_);
    return std::string(buf_, size_);
  }

 private:
  char* buf_ = nullptr;
  size_t size_ = 0;
  std::FILE* f_;
};

/// The tail as `gpuq logs` has always cut it (whole text held in memory); lines <= 0: all of it.
std::string reference_tail(const std::string& all, long lines) {
  if (lines <= 0) return all;
  size_t pos = all.size();
  long n = 0;
  if (!all.empty() && all.back() == '\n') --pos;
  while (pos > 0 && n < lines) {
    if (all[pos - 1] == '\n' && ++n == lines) break;
    --pos;
  }
  return all.substr(pos);
}

/// True while `pid` sleeps in poll(2): a follower that has printed the tail, looked at the
/// state and the log once, and now waits for inotify.
bool waiting_in_poll(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/syscall");
  long nr = -1;
  if (!(f >> nr)) return false;  // "running", or gone
#ifdef SYS_poll
  if (nr == SYS_poll) return true;
#endif
  return nr == SYS_ppoll;
}

/// A plan folder with a fake nvidia-smi; `gpuq` runs a command on plan.json in it.
struct Queue : PlanFolder {
  Queue() : PlanFolder(1) {
    // Past kPatience: a follower that missed an event is not saved by its safety net.
    env["GPUQ_FOLLOW_SAFETY_NET_S"] = "3600";
  }
  /// One 0-GPU job `talk` running `script`.
  void plan(const std::string& script) const {
    d.write("talk.sh", script);
    d.write("plan.json", R"([{"id": "talk", "script": "talk.sh", "gpus": 0}])");
  }
  std::unique_ptr<Background> start(std::vector<std::string> args) const {
    args.insert(args.begin() + 1, {"--plan", "plan.json"});
    return start_gpuq(args, d.path(), env);
  }
  bool log_has(const std::string& text) const { return d.read("logs/talk.log").find(text) != std::string::npos; }
};

/// A script line that waits until the test creates the file `name` in the job's folder.
std::string wait_for(const std::string& name) { return "while [ ! -e " + name + " ]; do sleep 0.05; done\n"; }

}  // namespace

TEST(LogTail, CutsWhereTheWholeTextWasCutReadingBackInBlocks) {
  const uint64_t seed = test_seed(7);
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir d;
  const std::string path = d.path() + "/a.log";
  for (int round = 0; round < 400; ++round) {
    std::string text;
    size_t len = rng() % (round % 10 == 0 ? 200000 : 300);
    for (size_t k = 0; k < len; ++k) text += "ab\n\n x"[rng() % 6];
    long lines = static_cast<long>(rng() % 12) - 1;
    size_t block = std::vector<size_t>{1, 2, 5, 64, 65536}[rng() % 5];
    d.write("a.log", text);
    Captured out;
    auto cursor = print_tail(path, lines, out.file(), block);
    ASSERT_TRUE(cursor);
    ASSERT_EQ(out.text(), reference_tail(text, lines)) << "round " << round << ", " << lines << " lines, block "
                                                       << block << ", text of " << text.size() << " bytes";
    EXPECT_EQ(cursor->offset, text.size());
  }
  Captured none;
  EXPECT_FALSE(print_tail(d.path() + "/missing.log", 5, none.file()));
  EXPECT_EQ(none.text(), "");
}

TEST(LogTail, AppendedTextTruncationAndANewFile) {
  TempDir d;
  const std::string path = d.path() + "/a.log";
  LogCursor cursor;
  Captured out;
  EXPECT_EQ(print_appended(path, cursor, out.file()), 0u);  // not there yet
  d.write("a.log", "one\ntwo\n");
  EXPECT_EQ(print_appended(path, cursor, out.file()), 8u);
  std::ofstream(path, std::ios::app) << "three\n";
  EXPECT_EQ(print_appended(path, cursor, out.file()), 6u);
  EXPECT_EQ(print_appended(path, cursor, out.file()), 0u);
  EXPECT_EQ(out.text(), "one\ntwo\nthree\n");
  // Truncated (shorter than what was printed): printed again from its start.
  std::ofstream(path, std::ios::trunc) << "new\n";
  EXPECT_EQ(print_appended(path, cursor, out.file()), 4u);
  EXPECT_EQ(out.text(), "one\ntwo\nthree\nnew\n");
  // Replaced by another file as long as what was printed: that file from its start.
  d.write("b.log", "0123456789abcdef\n");
  fs::rename(d.path() + "/b.log", path);
  print_appended(path, cursor, out.file());
  EXPECT_EQ(out.text(), "one\ntwo\nthree\nnew\n0123456789abcdef\n");
  EXPECT_EQ(cursor.offset, 17u);
  // A symbolic link is refused, naming it.
  fs::remove(path);
  fs::create_symlink(d.path() + "/elsewhere", path);
  try {
    print_appended(path, cursor, out.file());
    ADD_FAILURE() << "a symbolic link was followed";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + " is a symbolic link; refusing to follow it"));
  }
}

TEST(Logs, TailWithoutFollow) {
  Queue q;
  q.plan("true\n");
  auto none = q.gpuq({"logs", "talk"});
  EXPECT_EQ(none.status, 1);
  EXPECT_EQ(none.out, "");
  EXPECT_THAT(none.err, HasSubstr("gpuq logs: talk has no log yet (logs/talk.log does not exist): it has not started"));
  auto nobody = q.gpuq({"logs", "nobody"});
  EXPECT_EQ(nobody.status, 2);
  EXPECT_THAT(nobody.err, HasSubstr("gpuq logs: no job nobody in plan.json"));
  q.d.write("logs/talk.log", "a\nb\nc\nlast, unfinished");
  EXPECT_EQ(q.gpuq({"logs", "talk", "-n", "2"}).out, "c\nlast, unfinished");
  EXPECT_EQ(q.gpuq({"logs", "talk"}).out, "a\nb\nc\nlast, unfinished");
  // -n 0 is the whole log, as --help and the README say (it used to print nothing).
  auto all = q.gpuq({"logs", "talk", "-n", "0"});
  EXPECT_EQ(all.status, 0);
  EXPECT_EQ(all.out, "a\nb\nc\nlast, unfinished");
}

TEST(Logs, TailAndFollow) {
  Queue q;
  q.plan("for i in $(seq 1 30); do echo line $i; done\n" + wait_for("go") + "echo last words\n" + wait_for("end"));
  auto run = q.start({"run", "--poll", "1"});
  ASSERT_TRUE(eventually([&] { return q.log_has("line 30\n"); }, kPatience));
  auto follow = q.start({"logs", "talk", "-n", "2", "-f"});
  // The tail is printed once the follower watches the log: what comes after cannot be missed.
  ASSERT_TRUE(eventually([&] { return follow->out() == "line 29\nline 30\n"; }, kPatience)) << follow->out();
  q.d.write("go", "");
  // While the job waits for `end` nothing but the log changes: only its inotify event wakes the follower.
  ASSERT_TRUE(eventually([&] { return follow->out() == "line 29\nline 30\nlast words\n"; }, kPatience))
      << follow->out();
  q.d.write("end", "");
  auto r = follow->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "line 29\nline 30\nlast words\n");
  EXPECT_EQ(r.err, "gpuq logs: talk is done (exit 0)\n");
  EXPECT_EQ(run->wait(kPatience).status, 0);
  EXPECT_EQ(q.gpuq({"logs", "talk", "-n", "1"}).out, "last words\n");
  // A job that is done: the tail, then how it ended.
  auto done = q.gpuq({"logs", "talk", "-n", "1", "-f"});
  EXPECT_EQ(done.status, 0);
  EXPECT_EQ(done.out, "last words\n");
  EXPECT_EQ(done.err, "gpuq logs: talk is done (exit 0)\n");
}

TEST(Logs, FollowOfAPendingJobPrintsItsLogFromItsStart) {
  Queue q;
  q.plan("for i in $(seq 1 30); do echo line $i; done\n");
  // No state, no logs/ folder: the job is pending; the follower waits for its log.
  auto follow = q.start({"logs", "talk", "-f"});
  ASSERT_TRUE(eventually([&] { return waiting_in_poll(follow->pid()); }, kPatience));
  EXPECT_FALSE(fs::exists(q.d.path() + "/logs"));
  auto run = q.start({"run", "--poll", "1"});
  auto r = follow->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.err;
  std::string all;
  for (int i = 1; i <= 30; ++i) all += "line " + std::to_string(i) + "\n";
  // Every line, not the last 20: it followed from the log's creation (gpuq's line for the attempt first).
  EXPECT_THAT(r.out, ::testing::StartsWith("== gpuq: attempt 1 on GPUs [] at "));
  EXPECT_EQ(r.out.substr(r.out.find('\n') + 1), all);
  EXPECT_EQ(r.err, "gpuq logs: talk has not started yet (pending); waiting for it to start (Ctrl-C to stop)\n"
                   "gpuq logs: talk is done (exit 0)\n");
  EXPECT_EQ(run->wait(kPatience).status, 0);
}

TEST(Logs, FollowKeepsUpWithALogGrowingFast) {
  Queue q;
  q.plan("echo start\n" + wait_for("go") + "seq 1 200000\necho end\n" + wait_for("stop"));
  auto run = q.start({"run", "--poll", "1"});
  ASSERT_TRUE(eventually([&] { return q.log_has("start\n"); }, kPatience));
  auto follow = q.start({"logs", "talk", "-n", "1", "-f"});
  ASSERT_TRUE(eventually([&] { return follow->out() == "start\n"; }, kPatience)) << follow->out();
  q.d.write("go", "");
  std::string expected = "start\n";
  for (int i = 1; i <= 200000; ++i) expected += std::to_string(i) + "\n";
  expected += "end\n";
  // All of it while the job still runs (it waits for `stop`): followed as written, not read at the end.
  ASSERT_TRUE(eventually([&] { return follow->out().size() >= expected.size(); }, kPatience));
  q.d.write("stop", "");
  auto r = follow->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.size(), expected.size());
  EXPECT_TRUE(r.out == expected) << "the followed text differs from what the job wrote";
  EXPECT_EQ(r.err, "gpuq logs: talk is done (exit 0)\n");
  EXPECT_EQ(run->wait(kPatience).status, 0);
}

TEST(Logs, FollowEndsWhenTheJobIsKilled) {
  Queue q;
  q.plan("echo started\nsleep 300\n");
  auto run = q.start({"run", "--poll", "1", "--max-retries", "0"});
  ASSERT_TRUE(eventually([&] { return q.log_has("started\n"); }, kPatience));
  auto follow = q.start({"logs", "talk", "-n", "1", "-f"});  // the last line, not gpuq's line before it
  ASSERT_TRUE(eventually([&] { return follow->out() == "started\n"; }, kPatience)) << follow->out();
  auto kill = q.gpuq({"kill", "talk"});
  ASSERT_EQ(kill.status, 0) << kill.err;
  auto r = follow->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "started\n");
  EXPECT_EQ(r.err, "gpuq logs: talk is failed: killed by gpuq kill (exit -15)\n");
  EXPECT_EQ(run->wait(kPatience).status, 3);  // 3: a job did not end done
}

TEST(Logs, FollowEndsWhenTheJobFails) {
  Queue q;
  q.plan("echo trying\n" + wait_for("go") + "echo giving up\nexit 3\n");
  auto run = q.start({"run", "--poll", "1", "--max-retries", "0"});
  ASSERT_TRUE(eventually([&] { return q.log_has("trying\n"); }, kPatience));
  auto follow = q.start({"logs", "talk", "-n", "1", "-f"});  // the last line, not gpuq's line before it
  ASSERT_TRUE(eventually([&] { return follow->out() == "trying\n"; }, kPatience)) << follow->out();
  q.d.write("go", "");
  auto r = follow->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "trying\ngiving up\n");
  EXPECT_EQ(r.err, "gpuq logs: talk is failed (exit 3)\n");
  EXPECT_EQ(run->wait(kPatience).status, 3);  // 3: a job did not end done
}

// A failure the run retries by itself is not the end: the follower says so and prints the
// next attempt too (a new user missed attempt 2's output: logs -f ended at the failure).
TEST(Logs, FollowGoesOnIntoAnAutomaticRetry) {
  Queue q;
  q.plan("echo \"try $GPUQ_ATTEMPT\"\n" + wait_for("go$GPUQ_ATTEMPT") + "[ \"$GPUQ_ATTEMPT\" = 2 ] && echo fine && exit 0\nexit 3\n");
  auto run = q.start({"run", "--poll", "1", "--max-retries", "1", "--retry-after", "0"});
  ASSERT_TRUE(eventually([&] { return q.log_has("try 1\n"); }, kPatience));
  auto follow = q.start({"logs", "talk", "-n", "1", "-f"});
  ASSERT_TRUE(eventually([&] { return follow->out() == "try 1\n"; }, kPatience)) << follow->out();
  q.d.write("go1", "");
  ASSERT_TRUE(eventually([&] { return follow->out().find("try 2\n") != std::string::npos; }, kPatience))
      << follow->out() << follow->err();
  q.d.write("go2", "");
  auto r = follow->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("try 1\n"));
  EXPECT_THAT(r.out, HasSubstr("try 2\nfine\n"));
  EXPECT_THAT(r.err, HasSubstr("gpuq logs: talk failed (exit 3); `gpuq run` retries it (automatic retry 1 of 1): "
                               "following on\n"));
  EXPECT_THAT(r.err, HasSubstr("gpuq logs: talk is done (exit 0)\n"));
  EXPECT_EQ(run->wait(kPatience).status, 0);
}

TEST(Logs, FollowEndsWhenAPendingJobIsHeld) {
  Queue q;
  q.plan("true\n");
  auto follow = q.start({"logs", "talk", "-f"});
  ASSERT_TRUE(eventually([&] { return waiting_in_poll(follow->pid()); }, kPatience));
  ASSERT_EQ(q.gpuq({"hold", "talk"}).status, 0);  // replaces the state file: the follower wakes
  auto r = follow->wait(kPatience);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gpuq logs: talk has not started yet (pending); waiting for it to start (Ctrl-C to stop)\n"
                   "gpuq logs: talk is held\n");
}

TEST(Logs, FollowEndsWhenTheProcessVanishesWithoutAnyFileChanging) {
  // No `run`, no exit file: only the safety net's look at the process sees the end.
  Queue q;
  q.plan("true\n");
  q.env["GPUQ_FOLLOW_SAFETY_NET_S"] = "0.2";
  Background job({"sleep", "3600"}, q.d.path());
  q.d.write("logs/talk.log", "working\n");
  // Started now, on this boot (one started before the machine booted ended with the node: it
  // would be waiting again, issue 50).
  q.d.write("plan.state.json", R"({"talk": {"status": "running", "pid": )" + std::to_string(job.pid()) +
                                   R"(, "gpus": [], "start": )" + std::to_string(std::time(nullptr)) + "}}");
  auto follow = q.start({"logs", "talk", "-f"});
  ASSERT_TRUE(eventually([&] { return follow->out() == "working\n"; }, kPatience)) << follow->out();
  job.signal(SIGKILL);
  job.wait(kPatience);
  auto r = follow->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "working\n");
  EXPECT_EQ(r.err, "gpuq logs: talk is failed: its process vanished without an exit code, or it could not start\n");
}

// How a job ended, for the outcomes the watchdog and an impossible start leave.
TEST(Logs, FollowSaysAJobWasStoppedAsHungOrCouldNotStart) {
  Queue q;
  q.plan("echo hi\n");
  q.d.write("logs/talk.log", "hi\n");
  q.d.write("plan.state.json", R"({"talk": {"status": "failed", "exit": -15, "start": 1, "end": 2, "outcome": "hung"}})");
  auto hung = q.gpuq({"logs", "talk", "-f"});
  EXPECT_EQ(hung.err, "gpuq logs: talk is failed: stopped by the hang watchdog (exit -15)\n");
  q.d.write("plan.state.json",
            R"({"talk": {"status": "failed", "exit": 127, "end": 2, "outcome": "unstartable", "reason": "its log is a symbolic link"}})");
  auto cannot = q.gpuq({"logs", "talk", "-f"});
  EXPECT_EQ(cannot.err, "gpuq logs: talk is failed: could not start: its log is a symbolic link\n");
}
