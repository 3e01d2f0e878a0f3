// The node misbehaving under a real `gpuq run`, each fault made for real: a tmpfs that fills
// (the plan's folder, its logs/ alone, its event log alone), no process left (prlimit on the
// run, as a Unix user of its own: root is never held by RLIMIT_NPROC), no file descriptor left
// (prlimit), the wall clock stepped an hour either way (Debian's libfaketime, the monotonic clock
// left true), `run` stopped with SIGSTOP, and the plan's folder turned read-only (a read-only
// bind mount over it). Each test checks the same four things: no job ran twice and none was
// lost (markers written outside the faulty folder), the state file parsed at every instant it
// was looked at while the fault lasted, and a line of the run named the fault and the file.
//
// These need root (tests and CI run as root): a fault that cannot be made fails the test.
#include <pwd.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gpuq::test;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

constexpr int kJobs = 40;

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// A tmpfs of `size` at `dir` (made), unmounted with the object.
struct Tmpfs {
  std::string dir;
  bool ok = false;
  Tmpfs(std::string at, const std::string& size) : dir(std::move(at)) {
    fs::create_directories(dir);
    ok = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0777").c_str()) == 0;
  }
  ~Tmpfs() {
    if (ok) ::umount2(dir.c_str(), MNT_DETACH);
  }
  // Writes filler until the disk is full (to the last byte: small writes at the end).
  void fill() const {
    int fd = ::open((dir + "/filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0) << dir;
    std::string block(65536, 'x');
    for (size_t size : {size_t{65536}, size_t{4096}, size_t{1}})
      while (::write(fd, block.data(), size) == static_cast<ssize_t>(size)) {
      }
    ::close(fd);
  }
  void unfill() const { fs::remove(dir + "/filler"); }
};

#define NEED(cond, what) \
  if (!(cond)) FAIL() << what << ": the fault tests make real faults and need root (CI runs as root)"

// The CPU seconds (user + system) process `pid` has used so far.
double cpu_seconds_of(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  std::stringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int k = 3; k <= 15 && rest >> field; ++k)
    if (k >= 14) ticks += std::stod(field);  // utime, stime
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The state file as it is now: true when it is absent or parses whole.
bool state_parses(const std::string& path) {
  std::ifstream f(path);
  if (!f) return true;
  std::stringstream ss;
  ss << f.rdbuf();
  return !nlohmann::json::parse(ss.str(), nullptr, false).is_discarded();
}

// Reads the state file every few milliseconds while it lives; counts the looks that did not parse.
struct StateWatch {
  std::string path;
  std::atomic<bool> stop{false};
  std::atomic<int> looks{0}, bad{0};
  std::thread t;
  explicit StateWatch(std::string p) : path(std::move(p)) {
    t = std::thread([this] {
      while (!stop) {
        ++looks;
        if (!state_parses(path)) ++bad;
        sleep_s(0.005);
      }
    });
  }
  ~StateWatch() {
    stop = true;
    t.join();
  }
};

// A plan of kJobs one-GPU jobs in `dir`: each appends its id to markers/ID (outside the faulty
// folder: what ran, and how often), then sleeps.
struct FaultPlan {
  TempDir root;  // outside every faulty folder
  std::string dir, markers;
  std::map<std::string, std::string> env;
  explicit FaultPlan(const std::string& sub = "plan") {
    ::chmod(root.path().c_str(), 0755);
    dir = root.path() + "/" + sub;
    markers = root.path() + "/markers";
    fs::create_directories(dir);
    fs::create_directories(markers);
    ::chmod(markers.c_str(), 0777);
    env = fake_nvidia_smi(root, idle_gpus(8));
    // A node of its own (the user's own node directory, under its own XDG_STATE_HOME: no shared
    // node's window): the rounds of a test run side by side, each its own scenario.
    env["XDG_STATE_HOME"] = root.path() + "/state";
    ::chmod((root.path() + "/smi.txt").c_str(), 0644);
  }
  // nvidia-smi says every GPU is busy computing (90 %), with no memory in use.
  void set_busy() const {
    std::string smi;
    for (int g = 0; g < 8; ++g) smi += std::to_string(g) + ", 0, 90\n";
    root.write("smi.txt", smi);
  }
  // Writes the plan and its script into dir (after any mount over it).
  void write(int jobs = kJobs, const std::string& sleep = "0.4") const {
    nlohmann::json plan = nlohmann::json::array();
    for (int i = 0; i < jobs; ++i) plan.push_back({{"id", "j" + std::to_string(i)}, {"script", "job.sh"}, {"gpus", 1}});
    std::ofstream(dir + "/plan.json") << plan.dump();
    std::ofstream(dir + "/job.sh") << "echo \"$GPUQ_JOB_ID\" >> " << markers << "/$GPUQ_JOB_ID\nsleep " << sleep << "\n";
  }
  std::vector<std::string> run_argv() const {
    return {gpuq_binary(), "run", "--plan", "plan.json", "--poll", "0.1", "--retry-after", "0"};
  }
  std::unique_ptr<Background> start(std::vector<std::string> argv = {}) const {
    if (argv.empty()) argv = run_argv();
    return std::make_unique<Background>(argv, dir, env);
  }
  // Each job ran exactly once; the failures name the jobs that did not.
  void ran_once_each(int jobs = kJobs) const {
    for (int i = 0; i < jobs; ++i) {
      std::string id = "j" + std::to_string(i);
      EXPECT_EQ(lines_of(markers + "/" + id).size(), 1u) << id << " ran this many times (0: lost)";
    }
  }
  // Every job of the plan is done in the state.
  void all_done(int jobs = kJobs) const {
    std::ifstream f(dir + "/plan.state.json");
    nlohmann::json s = nlohmann::json::parse(f, nullptr, false);
    ASSERT_FALSE(s.is_discarded());
    for (int i = 0; i < jobs; ++i) {
      std::string id = "j" + std::to_string(i);
      EXPECT_EQ(s.value(id, nlohmann::json::object()).value("status", ""), "done") << id;
    }
  }
};

std::string fmt_two(double a, double b) {
  std::ostringstream o;
  o << "fill after " << a << " s, kill -9 " << b << " s later";
  return o.str();
}

// Where the full disk is.
enum class Full { PlanFolder, Logs, EventLog };

// The issue's scenario, once: the run started, the disk filled at a seeded moment, the run
// killed with SIGKILL at another while the disk is full, the filler removed, the run started
// again to the end.
void full_disk_round(Full where, double fill_s, double kill_s, int round) {
  SCOPED_TRACE("round " + std::to_string(round));
  FaultPlan p;
  std::unique_ptr<Tmpfs> plan_fs, logs_fs, events_fs;
  const Tmpfs* full = nullptr;
  std::string named;  // the file the run must name
  if (where == Full::PlanFolder) {
    plan_fs = std::make_unique<Tmpfs>(p.dir, "3m");
    full = plan_fs.get();
    named = "plan.state.json";
  } else if (where == Full::Logs) {
    logs_fs = std::make_unique<Tmpfs>(p.dir + "/logs", "1m");
    full = logs_fs.get();
    named = p.dir + "/logs/";
  } else {
    // The event log alone: its file bind-mounted from a small disk of its own.
    events_fs = std::make_unique<Tmpfs>(p.root.path() + "/events", "256k");
    full = events_fs.get();
    std::ofstream(events_fs->dir + "/plan.events.jsonl").close();
    std::ofstream(p.dir + "/plan.events.jsonl").close();
    bool bound = ::mount((events_fs->dir + "/plan.events.jsonl").c_str(), (p.dir + "/plan.events.jsonl").c_str(),
                         nullptr, MS_BIND, nullptr) == 0;
    NEED(bound, "bind-mounting the event log");
    named = "plan.events.jsonl";
  }
  NEED(full->ok, "mounting a tmpfs");
  p.write();
  SCOPED_TRACE(fmt_two(fill_s, kill_s));
  size_t said_before = 0;  // what the first run had said when the disk filled
  std::unique_ptr<Background> first = p.start();
  // The moments count from its first start (a sanitized gpuq on a busy machine takes a while to get there).
  auto started = [&] { return first->out().find("start j") != std::string::npos; };
  eventually([&] { return started() || !first->running(); });
  ASSERT_TRUE(started()) << "the first run started no job" << (first->running() ? " in time" : ", and ended")
                         << "\nstdout:\n" << first->out() << "\nstderr:\n" << first->err();
  // Named while it lasted, wherever a write met it: a job that ended after the fill is an end
  // to save, an event to log and, jobs being left, a launch to make. (The event log's last page
  // of the tmpfs takes a few more lines after the fill: 20 ends and their starts are past it.)
  auto must_have_named = [&](const std::string& said) {
    size_t ends_after = count_of(said.substr(std::min(said_before, said.size())), "done j");
    return ends_after >= (where == Full::EventLog ? 20u : 1u) && count_of(said, "done j") < static_cast<size_t>(kJobs);
  };
  const std::string full_said = " is full (No space left on device)";
  sleep_s(fill_s);
  {
    StateWatch watch(p.dir + "/plan.state.json");
    full->fill();
    said_before = first->out().size();
    sleep_s(kill_s);
    // A full logs folder meets the launch that follows an end, a tick after it is printed: a kill
    // in between leaves nothing to name (a CI run under ASan was killed there). The kill waits
    // for the message then, a few seconds at most: one that never comes fails below.
    if (must_have_named(first->out()))
      eventually([&] { return first->out().find(full_said) != std::string::npos; }, 5);
    first->signal(SIGKILL);
    first->wait(kPatience);
    EXPECT_EQ(watch.bad, 0) << "of " << watch.looks << " looks at the state while the disk was full";
  }
  std::string said = first->out();
  full->unfill();
  Output second = p.start()->wait(kPatience);
  if (where == Full::EventLog) ::umount2((p.dir + "/plan.events.jsonl").c_str(), MNT_DETACH);
  EXPECT_EQ(second.status, 0) << second.out << second.err;
  EXPECT_THAT(second.out, HasSubstr("all jobs finished: 40 done")) << second.out;
  p.ran_once_each();
  p.all_done();
  if (must_have_named(said)) {
    EXPECT_THAT(said, HasSubstr(full_said)) << said;
    EXPECT_THAT(said, HasSubstr(named)) << said;
  }
}

void full_disk_rounds(Full where, uint64_t fallback_seed) {
  uint64_t seed = test_seed(fallback_seed);
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> fill_at(0.3, 1.5), kill_after(0.5, 3.5);
  std::vector<std::pair<double, double>> moments;
  for (int round = 0; round < 10; ++round) {
    double f = fill_at(rng);
    moments.emplace_back(f, kill_after(rng));
  }
  // Five rounds at a time, each on disks of its own: the rounds wait far more than they compute.
  for (int wave = 0; wave < 10; wave += 5) {
    std::vector<std::thread> rounds;
    for (int round = wave; round < wave + 5; ++round)
      rounds.emplace_back([&, round] { full_disk_round(where, moments[round].first, moments[round].second, round); });
    for (std::thread& t : rounds) t.join();
  }
}

}  // namespace

TEST(Faults, AFullPlanFolderRunsNoJobTwiceAcrossAKill) { full_disk_rounds(Full::PlanFolder, 41); }

TEST(Faults, AFullLogsFolderRunsNoJobTwiceAcrossAKill) { full_disk_rounds(Full::Logs, 4141); }

TEST(Faults, AFullEventLogRunsNoJobTwiceAcrossAKill) { full_disk_rounds(Full::EventLog, 414141); }

namespace {

std::optional<std::pair<uid_t, gid_t>> fault_user() {
  const char* name = "gpuqfault";
  if (!getpwnam(name)) run({"useradd", "-M", "-N", "-s", "/bin/sh", name});
  struct passwd* pw = getpwnam(name);
  if (!pw) return std::nullopt;
  return std::pair{pw->pw_uid, pw->pw_gid};
}

// A fault that lasts `hold` seconds once the run has started a few jobs: `make` begins it,
// `end` ends it. Returns what the run printed; checks the four things.
void fault_during_run(FaultPlan& p, std::vector<std::string> argv, const std::function<void(int pid)>& make,
                      const std::function<void(int pid)>& end, double hold, const std::vector<std::string>& named) {
  std::unique_ptr<Background> run = p.start(std::move(argv));
  ASSERT_TRUE(eventually([&] { return count_of(run->out(), "start j") >= 8; })) << run->out() << run->err();
  {
    StateWatch watch(p.dir + "/plan.state.json");
    make(run->pid());
    sleep_s(hold);
    end(run->pid());
    EXPECT_EQ(watch.bad, 0) << "of " << watch.looks << " looks at the state during the fault";
  }
  Output o = run->wait(kPatience);
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("all jobs finished: 40 done")) << o.out << o.err;
  for (const std::string& n : named) EXPECT_THAT(o.out, HasSubstr(n)) << o.out;
  p.ran_once_each();
  p.all_done();
}

// prlimit on `pid`, run as `as` (setpriv's words for the process's own user; none: as root). A
// process of another user takes a new limit only from its own user, or from one with
// CAP_SYS_RESOURCE (which a container may not give root).
void prlimit(int pid, const std::string& what, const std::vector<std::string>& as = {}) {
  std::vector<std::string> argv = as;
  for (const std::string& a : {std::string("prlimit"), std::string("--pid"), std::to_string(pid), what}) argv.push_back(a);
  Output o = run(argv);
  ASSERT_EQ(o.status, 0) << o.err;
}

// The soft and hard values of a limit of process `pid` as /proc/PID/limits gives them ("Max processes").
std::pair<std::string, std::string> limit_of(int pid, const std::string& name) {
  for (const std::string& l : lines_of("/proc/" + std::to_string(pid) + "/limits"))
    if (l.rfind(name, 0) == 0) {
      std::istringstream in(l.substr(name.size()));
      std::string soft, hard;
      in >> soft >> hard;
      return {soft, hard};
    }
  ADD_FAILURE() << "no " << name << " in /proc/" << pid << "/limits";
  return {};
}

}  // namespace

// No process can be made (the user's RLIMIT_NPROC reached): the jobs wait, none fails for it,
// and they start when processes can be made again.
TEST(Faults, NoProcessLeftMakesJobsWaitNotFail) {
  NEED(geteuid() == 0, "running as root");
  auto user = fault_user();
  NEED(user, "useradd gpuqfault");
  FaultPlan p;
  p.write();
  for (const auto& e : fs::recursive_directory_iterator(p.root.path()))
    EXPECT_EQ(::chown(e.path().c_str(), user->first, user->second), 0);
  ASSERT_EQ(::chown(p.root.path().c_str(), user->first, user->second), 0);
  const std::vector<std::string> as{"setpriv", "--reuid=" + std::to_string(user->first),
                                    "--regid=" + std::to_string(user->second), "--clear-groups", "--"};
  std::vector<std::string> argv = as;
  for (const std::string& a : p.run_argv()) argv.push_back(a);
  argv.push_back("--max-retries");
  argv.push_back("0");  // a failed job would show at once, not hide in a retry
  // The soft limit only: raising a hard limit again takes CAP_SYS_RESOURCE, which a container may lack.
  std::string soft;
  fault_during_run(
      p, argv,
      [&](int pid) {
        soft = limit_of(pid, "Max processes").first;
        prlimit(pid, "--nproc=1:", as);
      },
      [&](int pid) { prlimit(pid, "--nproc=" + soft + ":", as); }, 2.0,
      {"no process can be made (Resource temporarily unavailable): no job starts until it passes",
       "jobs start again"});
}

// No file descriptor left (RLIMIT_NOFILE at what the run has open): the same.
TEST(Faults, NoFileDescriptorLeftMakesJobsWaitNotFail) {
  NEED(geteuid() == 0, "running as root");
  FaultPlan p;
  p.write();
  std::vector<std::string> argv = p.run_argv();
  argv.push_back("--max-retries");
  argv.push_back("0");
  // Under UBSan: its vptr check cannot look a type up in a process with no descriptor left (nor
  // match a suppression, which needs the symbolizer), and takes a sound object for a bad one (an
  // exception being made); the run goes on past such a report, which goes to its stderr.
  p.env["UBSAN_OPTIONS"] = "print_stacktrace=0:halt_on_error=0";
  std::string soft;
  fault_during_run(
      p, argv,
      [&](int pid) {
        size_t open = 0;
        for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) (void)e, ++open;
        soft = limit_of(pid, "Max open files").first;
        prlimit(pid, "--nofile=" + std::to_string(open + 2) + ":");  // the lock and a read, not a launch
      },
      [&](int pid) { prlimit(pid, "--nofile=" + soft + ":"); }, 2.0, {"Too many open files"});
}

// The plan's folder turns read-only (a read-only bind mount over it) for a while: as a full disk.
TEST(Faults, AReadOnlyFolderRunsNoJobTwice) {
  NEED(geteuid() == 0, "running as root");
  FaultPlan p;
  p.write();
  // The plan named by its absolute path: the run's own folder (its cwd) is under the bind.
  std::vector<std::string> argv = p.run_argv();
  argv[3] = p.dir + "/plan.json";
  fault_during_run(
      p, argv,
      [&](int) {
        NEED(::mount(p.dir.c_str(), p.dir.c_str(), nullptr, MS_BIND, nullptr) == 0, "bind-mounting the folder");
        // EBUSY while a file opened through the new bind is open for writing (run saves, a
        // job's log opens): tried again until it is between two such writes.
        NEED(eventually([&] { return ::mount(nullptr, p.dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY,
                                             nullptr) == 0; },
                        10),
             "remounting it read-only");
      },
      [&](int) { ::umount2(p.dir.c_str(), MNT_DETACH); }, 2.0,
      {"plan.state.json is read-only (Read-only file system): no job starts until the state can be saved",
       "the state is saved again"});
}

namespace {

constexpr const char* kFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

// A plan whose wall clock steps by `step` seconds under a real run (libfaketime, the monotonic
// clock left true): a long job with a time limit and a hang watchdog it is far from, and a job
// that fails once and is retried after --retry-after 4. Neither is stopped, and the retry comes
// on time, whichever way the clock stepped; the times written stay wall-clock (the new clock).
void clock_step(const std::string& step) {
  NEED(access(kFaketime, R_OK) == 0, std::string(kFaketime) + " (Debian's faketime package, tools/deps.sh)");
  FaultPlan p;
  std::string m = p.markers;
  std::ofstream(p.dir + "/plan.json") << R"({"jobs": [
    {"id": "long", "script": "long.sh", "gpus": 1, "time_limit_hours": 0.01, "quiet_minutes": 0.5,
     "on_quiet": "kill", "est_hours": 0.004},
    {"id": "flaky", "script": "flaky.sh", "gpus": 1, "est_hours": 0.001}]})";
  std::ofstream(p.dir + "/long.sh") << "echo long >> " << m << "/long\nsleep 12\n";
  std::ofstream(p.dir + "/flaky.sh") << "echo flaky >> " << m << "/flaky\ncut -d' ' -f1 /proc/uptime >> " << m
                                     << "/flaky.up\n[ $(wc -l < " << m << "/flaky) -ge 2 ]\n";
  std::string offset = p.root.path() + "/offset";
  std::ofstream(offset) << "+0\n";
  std::map<std::string, std::string> env = p.env;
  env["LD_PRELOAD"] = kFaketime;
  env["FAKETIME_TIMESTAMP_FILE"] = offset;
  env["FAKETIME_NO_CACHE"] = "1";
  env["DONT_FAKE_MONOTONIC"] = "1";
  env["ASAN_OPTIONS"] = "verify_asan_link_order=0:detect_leaks=0";  // a sanitized gpuq beside a preload
  Background run({gpuq_binary(), "run", "--plan", "plan.json", "--retry-after", "4", "--max-retries", "1"}, p.dir,
                 env);
  ASSERT_TRUE(eventually([&] { return run.out().find("failed flaky") != std::string::npos; })) << run.out();
  sleep_s(1);
  std::ofstream(offset) << step << "\n";
  Output o = run.wait(60);
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("all jobs finished: 2 done")) << o.out;
  EXPECT_THAT(o.out, HasSubstr("the wall clock jumped " + std::string(step[0] == '-' ? "-" : "+") + "1.0h (against "
                               "the monotonic clock)"))
      << o.out;
  EXPECT_EQ(lines_of(m + "/long").size(), 1u);
  std::vector<std::string> up = lines_of(m + "/flaky.up");
  ASSERT_EQ(up.size(), 2u) << o.out;
  double delay = std::stod(up[1]) - std::stod(up[0]);
  EXPECT_GE(delay, 3.5) << "the retry came early";
  EXPECT_LE(delay, 15) << "the retry came late";
  // The start written is on the stepped clock.
  std::ifstream f(p.dir + "/plan.state.json");
  nlohmann::json s = nlohmann::json::parse(f);
  double start = s["long"]["start"].get<double>(), real = static_cast<double>(std::time(nullptr));
  if (step[0] == '-')
    EXPECT_LT(start, real - 3000);
  else
    EXPECT_GT(start, real + 3000);
}

}  // namespace

TEST(Faults, TheWallClockSteppingAnHourForwardKillsAndRetriesNothingEarly) { clock_step("+3600"); }

TEST(Faults, TheWallClockSteppingAnHourBackKillsAndRetriesNothingLate) { clock_step("-3600"); }

// `run` stopped (SIGSTOP) for longer than a job's quiet limit, then continued: the time nobody
// looked is not counted as the job's silence (its GPU busy, its log silent); nothing starts twice.
TEST(Faults, ARunStoppedAndContinuedCountsNoTimeItDidNotLookAt) {
  FaultPlan p;
  p.set_busy();
  std::ofstream(p.dir + "/plan.json") << R"({"jobs": [
    {"id": "train", "script": "train.sh", "gpus": 1, "quiet_minutes": 0.15, "on_quiet": "kill", "est_hours": 0.005},
    {"id": "after", "script": "after.sh", "gpus": 1, "deps": ["train"], "est_hours": 0.001}]})";
  std::ofstream(p.dir + "/train.sh") << "echo train >> " << p.markers << "/train\nsleep 16\n";
  std::ofstream(p.dir + "/after.sh") << "echo after >> " << p.markers << "/after\n";
  Background run({gpuq_binary(), "run", "--plan", "plan.json", "--poll", "1"}, p.dir, p.env);
  ASSERT_TRUE(eventually([&] { return run.out().find("start train") != std::string::npos; })) << run.out();
  sleep_s(1);
  run.signal(SIGSTOP);
  sleep_s(12);  // past the quiet limit (9 s): the job's log silent all along, its GPU busy
  run.signal(SIGCONT);
  Output o = run.wait(60);
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("all jobs finished: 2 done")) << o.out;
  EXPECT_THAT(o.out, HasSubstr("this run did not look for")) << o.out;
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("hung"))) << o.out;
  EXPECT_EQ(lines_of(p.markers + "/train").size(), 1u);
  EXPECT_EQ(lines_of(p.markers + "/after").size(), 1u);
}

// The fourth trial (issue 51): an attempt's end is when its script ended, not when `run` noticed.
// `run` stopped (SIGSTOP) while the job ends, continued 6 s later: the state's end, history's
// duration and the line say the job's own end (its exit file's time), not the late look.
TEST(Faults, AJobThatEndsWhileRunIsStoppedEndsWhenItEnded) {
  FaultPlan p;
  std::ofstream(p.dir + "/plan.json") << R"({"jobs": [{"id": "j0", "script": "j.sh", "gpus": 1, "est_hours": 0.001}]})";
  std::ofstream(p.dir + "/j.sh") << "date +%s.%N > " << p.markers << "/began\nsleep 2\ndate +%s.%N > " << p.markers
                                 << "/ended\n";
  Background run({gpuq_binary(), "run", "--plan", "plan.json", "--poll", "1"}, p.dir, p.env);
  ASSERT_TRUE(eventually([&] { return run.out().find("start j0") != std::string::npos; })) << run.out();
  run.signal(SIGSTOP);
  ASSERT_TRUE(eventually([&] { return !lines_of(p.markers + "/ended").empty(); }, 30));
  sleep_s(6);  // the job has ended; nobody looks
  run.signal(SIGCONT);
  Output o = run.wait(60);
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  double began = std::stod(lines_of(p.markers + "/began").at(0)), ended = std::stod(lines_of(p.markers + "/ended").at(0));
  std::ifstream in(p.dir + "/plan.state.json");
  nlohmann::json state = nlohmann::json::parse(in);
  double start = state["j0"]["start"].get<double>(), end = state["j0"]["end"].get<double>();
  EXPECT_NEAR(end, ended, 0.5) << "the end is the job's, not run's look 6 s later";
  EXPECT_NEAR(end - start, ended - began, 0.7) << o.out;
  EXPECT_THAT(o.out, ::testing::ContainsRegex("done j0 \\(it ended at [0-9:]+\\)")) << o.out;
}

// A power cut (issue 50): run and its job die at once, no code written (the wrapper dies too), and
// the machine boots again. Run on the same boot, the job is one gone without an exit code (failed:
// --max-retries 0); an empty exit file (a write a power cut undid) is no exit 1. Run after a boot
// (/proc/stat's btime, in a mount namespace of its own, says the machine booted after the job
// started), the node's restart is no failure of the job: it waits again, no retry spent, and runs.
TEST(Faults, AJobCutByTheNodesRestartRunsAgainWithNoRetrySpent) {
  NEED(geteuid() == 0, "mounting over /proc/stat in a mount namespace");
  for (bool rebooted : {false, true}) {
    SCOPED_TRACE(rebooted ? "after a boot" : "on the same boot");
    FaultPlan p;
    std::ofstream(p.dir + "/plan.json") << R"({"jobs": [{"id": "train", "script": "t.sh", "gpus": 1}]})";
    // Its first run is long (the cut comes during it); its second is short.
    std::ofstream(p.dir + "/t.sh") << "m=" << p.markers << "/train\nn=$(cat \"$m\" 2>/dev/null | wc -l)\n"
                                   << "echo ran >> \"$m\"\n[ \"$n\" -ge 1 ] || sleep 60\n";
    std::vector<std::string> argv = p.run_argv();
    argv.insert(argv.end(), {"--max-retries", "0"});
    {
      Background run(argv, p.dir, p.env);
      ASSERT_TRUE(eventually([&] { return lines_of(p.markers + "/train").size() == 1; })) << run.out() << run.err();
      run.signal(SIGKILL);
      run.wait(kPatience);
    }
    std::ifstream in(p.dir + "/plan.state.json");
    long long group = nlohmann::json::parse(in)["train"].value("pid", 0LL);
    ASSERT_GT(group, 0);
    ::kill(static_cast<pid_t>(-group), SIGKILL);  // the cut: its wrapper and script, at once
    ASSERT_TRUE(eventually([&] { return !pid_alive(group); }));
    std::ofstream(p.dir + "/logs/train.exit").close();  // its code's write, undone: an empty file
    sleep_s(2.5);  // btime is whole seconds, and gpuq allows it one: the boot comes clearly after the start
    if (rebooted) {
      // The machine booted now (after the job's start): btime in a copy of /proc/stat.
      std::ifstream stat_in("/proc/stat");
      std::string line, fake;
      while (std::getline(stat_in, line))
        fake += (line.rfind("btime ", 0) == 0 ? "btime " + std::to_string(std::time(nullptr)) : line) + "\n";
      std::ofstream(p.root.path() + "/stat") << fake;
      argv.insert(argv.begin(), {"unshare", "-m", "--", "sh", "-c", "mount --bind \"$0\" /proc/stat && exec \"$@\"",
                                 p.root.path() + "/stat"});
    }
    Output o = Background(argv, p.dir, p.env).wait(kPatience);
    nlohmann::json after = nlohmann::json::parse(std::ifstream(p.dir + "/plan.state.json"));
    if (!rebooted) {
      EXPECT_EQ(o.status, 3) << o.out << o.err;
      EXPECT_THAT(o.out, HasSubstr("failed train (its process is gone without an exit code)")) << o.out;
      EXPECT_THAT(o.out, ::testing::Not(HasSubstr("exit 1"))) << o.out;
      EXPECT_EQ(after["train"]["status"], "failed");
      EXPECT_EQ(lines_of(p.markers + "/train").size(), 1u);
    } else {
      EXPECT_EQ(o.status, 0) << o.out << o.err;
      EXPECT_THAT(o.out, HasSubstr("requeued train: the node restarted while it ran (its attempt began before this "
                                   "boot); it waits again, not counted against max_retries"))
          << o.out;
      EXPECT_EQ(after["train"]["status"], "done");
      EXPECT_EQ(after["train"].value("attempts", 0), 0) << "no retry spent";
      EXPECT_EQ(lines_of(p.markers + "/train").size(), 2u) << "run again once";
      // The history: attempt 1 ended with the node (no start left without an end), attempt 2 ran.
      std::vector<std::string> seen;
      for (const std::string& line : lines_of(p.dir + "/plan.events.jsonl")) {
        nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
        if (e.is_object() && e.value("id", "") == "train")
          seen.push_back(e.value("event", "") + "/" + e.value("outcome", "") + "/" + std::to_string(e.value("attempt", 0)));
      }
      EXPECT_EQ(seen, (std::vector<std::string>{"start//1", "end/node restarted/1", "start//2", "end/done/2"}));
    }
  }
}

// status during a full disk or on a read-only folder (issue 51, item 5): the ready jobs would read
// "ready: starts at the next tick" while run can start none; status says why, from the disk itself.
TEST(Faults, StatusSaysWhyNothingStartsWhileTheStatesDiskIsFull) {
  NEED(geteuid() == 0, "mounting a tmpfs");
  FaultPlan p;
  Tmpfs disk(p.dir, "1m");
  NEED(disk.ok, "mounting a tmpfs");
  p.write(2);
  std::vector<std::string> status{gpuq_binary(), "status", "--plan", "plan.json"};
  Output free_disk = Background(status, p.dir, p.env).wait(kPatience);
  EXPECT_EQ(free_disk.status, 0) << free_disk.err;
  EXPECT_THAT(free_disk.err, ::testing::Not(HasSubstr("starts no job"))) << free_disk.err;
  disk.fill();
  Output full = Background(status, p.dir, p.env).wait(kPatience);
  EXPECT_EQ(full.status, 0) << full.err;
  EXPECT_THAT(full.err, ::testing::ContainsRegex("warning: the disk holding plan.state.json is full \\([0-9]+ bytes "
                                                 "free, a state takes [0-9]+\\): `gpuq run` starts no job until the "
                                                 "state can be saved"))
      << full.err;
  disk.unfill();
  ASSERT_EQ(::mount(nullptr, p.dir.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0) << std::strerror(errno);
  Output ro = Background(status, p.dir, p.env).wait(kPatience);
  ::mount(nullptr, p.dir.c_str(), nullptr, MS_REMOUNT, nullptr);
  EXPECT_THAT(ro.err, HasSubstr("warning: the folder of plan.state.json is read-only: `gpuq run` starts no job"))
      << ro.err;
}

// `gpuq kill` while the plan's disk is full: it killed the job, then could not save, and said
// so; `run` then found the job gone with no word of why ("failed j0 (its process is gone without
// an exit code)") and retried it: the user's kill undone, the job run twice. A stop is sent only
// once the state that records it is saved (issue 49's effects): the kill says it did nothing, the
// job runs on, and a kill once the disk has room stops it for good.
TEST(Faults, AKillWhoseRecordCannotBeSavedStopsNothing) {
  NEED(geteuid() == 0, "mounting a tmpfs");
  FaultPlan p;
  Tmpfs disk(p.dir, "2m");
  NEED(disk.ok, "mounting a tmpfs");
  std::ofstream(p.dir + "/plan.json") << R"([{"id": "j0", "script": "job.sh", "gpus": 1, "max_retries": 2}])";
  std::ofstream(p.dir + "/job.sh") << "echo \"$GPUQ_JOB_ID\" >> " << p.markers << "/$GPUQ_JOB_ID\nsleep 60\n";
  std::unique_ptr<Background> run = p.start();
  ASSERT_TRUE(eventually([&] { return run->out().find("start j0") != std::string::npos; })) << run->out() << run->err();
  disk.fill();
  const std::vector<std::string> kill{gpuq_binary(), "kill", "j0", "--plan", "plan.json"};
  Output refused = Background(kill, p.dir, p.env).wait(kPatience);
  EXPECT_EQ(refused.status, 1) << refused.out << refused.err;
  EXPECT_THAT(refused.err, ::testing::ContainsRegex("gpuq kill: cannot write plan\\.state\\.json[^ ]*: No space left on "
                                                    "device: the state is as it was and no job was signalled"))
      << refused.err;
  sleep_s(1.5);  // run's ticks, every 0.1 s: the job must still be running
  EXPECT_EQ(count_of(run->out(), "failed j0"), 0u) << run->out();
  disk.unfill();
  Output killed = Background(kill, p.dir, p.env).wait(kPatience);
  EXPECT_EQ(killed.status, 0) << killed.out << killed.err;
  EXPECT_THAT(killed.out, HasSubstr("killed j0: sent SIGTERM to process group")) << killed.out;
  Output rest = run->wait(kPatience);
  EXPECT_EQ(rest.status, 3) << rest.out << rest.err;
  EXPECT_THAT(rest.out, HasSubstr("1 failed (j0: killed)")) << rest.out;
  p.ran_once_each(1);
}

// Issue 51, item 8: run restarted while the plan's disk is full found two jobs ended and said
// `done k0` and `done k1` twice: once in the tick whose save first failed, and again in the next,
// which starts from the state on disk and sees the same ends. Each end is said once until a save
// succeeds, and the jobs' ends are saved (and each said once) when the disk has room again.
TEST(Faults, AnEndSeenWhileTheStateCannotBeSavedIsSaidOnce) {
  NEED(geteuid() == 0, "mounting a tmpfs");
  FaultPlan p;
  Tmpfs disk(p.dir, "2m");
  NEED(disk.ok, "mounting a tmpfs");
  Tmpfs logs(p.dir + "/logs", "1m");  // the logs keep room: the wrappers write the exit codes
  NEED(logs.ok, "mounting a tmpfs");
  p.write(0);
  std::ofstream(p.dir + "/plan.json") << R"([{"id": "j0", "script": "job.sh", "gpus": 1},
    {"id": "j1", "script": "job.sh", "gpus": 1}, {"id": "j2", "script": "job.sh", "gpus": 1, "deps": ["j0"]}])";
  std::ofstream(p.dir + "/job.sh") << "echo \"$GPUQ_JOB_ID\" >> " << p.markers << "/$GPUQ_JOB_ID\nsleep 1\n";
  std::unique_ptr<Background> first = p.start();
  ASSERT_TRUE(eventually([&] { return count_of(first->out(), "start j") == 2; })) << first->out() << first->err();
  first->signal(SIGKILL);
  first->wait(kPatience);
  disk.fill();
  ASSERT_TRUE(eventually([&] { return fs::exists(p.dir + "/logs/j0.exit") && fs::exists(p.dir + "/logs/j1.exit"); }));
  // --poll 5: what wakes it while the disk is full is the fault's own retry (every 2 s), or a loop.
  std::unique_ptr<Background> second =
      p.start({gpuq_binary(), "run", "--plan", "plan.json", "--poll", "5", "--retry-after", "0"});
  // Its ends seen, its save refused, and two more looks (a full disk is looked at again every 2 s).
  ASSERT_TRUE(eventually([&] { return second->out().find(" is full (No space left on device)") != std::string::npos; }))
      << second->out() << second->err();
  // While the ends cannot be saved, run waits for the disk, not in a loop: a job whose process is
  // gone woke it once (its pidfd, or none to be had), not at every wait (the leftover runs of a
  // CI's tests, their folders removed, spun at 70 % of a core for half an hour).
  double cpu_before = cpu_seconds_of(second->pid());
  sleep_s(4.5);
  double cpu_while_full = cpu_seconds_of(second->pid()) - cpu_before;
  EXPECT_LT(cpu_while_full, 1.0) << "CPU seconds run used in 4.5 s of a full disk";
  std::string while_full = second->out();
  EXPECT_EQ(count_of(while_full, "done j0"), 1u) << while_full;
  EXPECT_EQ(count_of(while_full, "done j1"), 1u) << while_full;
  EXPECT_EQ(count_of(while_full, "start j2"), 0u) << "nothing starts unsaved\n" << while_full;
  disk.unfill();
  Output rest = second->wait(kPatience);
  EXPECT_EQ(rest.status, 0) << rest.out << rest.err;
  EXPECT_EQ(count_of(rest.out, "done j0"), 1u) << rest.out;
  EXPECT_EQ(count_of(rest.out, "done j1"), 1u) << rest.out;
  EXPECT_THAT(rest.out, HasSubstr("the state is saved again: jobs start again")) << rest.out;
  EXPECT_THAT(rest.out, HasSubstr("all jobs finished: 3 done")) << rest.out;
  p.ran_once_each(3);
}

// Every write can fail, PLAN.predictions.jsonl's too (what `run` predicted, for history
// --accuracy): it was appended with fopen and fwrite and their errors unread, so a full disk
// was never said and could leave a line cut short. Its file, bind-mounted from a small disk that
// is full: the problem is said once, with the file and the error, the jobs go on, and once the
// disk has room again that is said too; every line the file holds is whole.
TEST(Faults, APredictionsFileThatCannotBeWrittenIsSaidOnceAndLeftWhole) {
  NEED(geteuid() == 0, "mounting a tmpfs");
  FaultPlan p;
  Tmpfs disk(p.root.path() + "/predictions", "64k");
  NEED(disk.ok, "mounting a tmpfs");
  const std::string on_disk = disk.dir + "/plan.predictions.jsonl", file = p.dir + "/plan.predictions.jsonl";
  std::ofstream(on_disk).close();
  std::ofstream(file).close();
  NEED(::mount(on_disk.c_str(), file.c_str(), nullptr, MS_BIND, nullptr) == 0, "bind-mounting the predictions file");
  struct Unbind {
    std::string at;
    ~Unbind() { ::umount2(at.c_str(), MNT_DETACH); }
  } unbind{file};
  // A chain long enough for a second prediction (one every 5 s at most) after the disk has room.
  std::ofstream(p.dir + "/plan.json") << R"([{"id": "j0", "script": "job.sh", "gpus": 1},
    {"id": "j1", "script": "job.sh", "gpus": 1, "deps": ["j0"]}, {"id": "j2", "script": "job.sh", "gpus": 1, "deps": ["j1"]}])";
  std::ofstream(p.dir + "/job.sh") << "echo \"$GPUQ_JOB_ID\" >> " << p.markers << "/$GPUQ_JOB_ID\nsleep 2.5\n";
  disk.fill();
  std::unique_ptr<Background> run = p.start();
  const std::string said = "the run's predictions are not recorded";
  ASSERT_TRUE(eventually([&] { return run->out().find(said) != std::string::npos; })) << run->out() << run->err();
  EXPECT_THAT(run->out(), HasSubstr("the disk holding plan.predictions.jsonl is full (No space left on device): " + said))
      << run->out();
  disk.unfill();
  Output rest = run->wait(kPatience);
  EXPECT_EQ(rest.status, 0) << rest.out << rest.err;
  EXPECT_EQ(count_of(rest.out, said), 1u) << rest.out;
  EXPECT_THAT(rest.out, HasSubstr("the predictions file is written again: plan.predictions.jsonl")) << rest.out;
  EXPECT_THAT(rest.out, HasSubstr("all jobs finished: 3 done")) << rest.out;
  std::vector<std::string> lines = lines_of(file);
  EXPECT_FALSE(lines.empty()) << "no prediction recorded once the disk had room";
  for (const std::string& line : lines)
    EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded()) << "a line cut short: " << line;
  p.ran_once_each(3);
}
