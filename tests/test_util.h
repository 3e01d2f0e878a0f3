// Helpers shared by the tests: inline plans, temporary folders, running the binary.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq::test {

/// Parses an inline plan for an 8-GPU node; fails the test if it is rejected.
Plan plan_of(const std::string& json, const std::vector<int>& gpus = {0, 1, 2, 3, 4, 5, 6, 7});

/// A running entry of process group 1000, started at 0 on `gpus`: what `run` records of a start.
inline JobState running_entry(std::vector<int> gpus) {
  JobState s;
  s.status = Status::Running;
  s.pid = 1000;
  s.start = 0;
  s.gpus = std::move(gpus);
  return s;
}

/// Errors of an inline plan that must be rejected (empty if it was accepted).
std::vector<std::string> errors_of(const std::string& json, const std::vector<int>& gpus = {0, 1, 2, 3, 4, 5, 6, 7});

/// A fresh folder under $TMPDIR, removed with the object.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  /// Writes `text` to path()/name (creating folders) and returns the full path.
  std::string write(const std::string& name, const std::string& text, int mode = 0644) const;
  /// The text of path()/name ("" if missing).
  std::string read(const std::string& name) const;

 private:
  std::string path_;
};

/// What a finished command printed and returned.
struct Output {
  int status = -1;  ///< exit status, or 128+signal
  std::string out;
  std::string err;
};

/// Runs `argv` in `cwd` with extra environment variables, waits for it, captures output.
Output run(const std::vector<std::string>& argv, const std::string& cwd = ".",
           const std::map<std::string, std::string>& env = {});

/// Runs the built gpuq binary with `args`.
Output run_gpuq(const std::vector<std::string>& args, const std::string& cwd = ".",
            const std::map<std::string, std::string>& env = {});

/// Path of the built gpuq binary ($GPUQ_TEST_BINARY when set: to see a test fail on an older build).
std::string gpuq_binary();

}  // namespace gpuq::test

namespace gpuq::test {

/// A command running in the background (e.g. `gpuq run`), output to files.
class Background {
 public:
  Background(const std::vector<std::string>& argv, const std::string& cwd,
             const std::map<std::string, std::string>& env = {});
  ~Background();  ///< SIGKILLs it if still running
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  int pid() const { return pid_; }
  void signal(int sig) const;
  /// Waits up to `timeout_s` for it to exit; status -1 if it did not.
  Output wait(double timeout_s);
  std::string out() const;  ///< stdout so far
  std::string err() const;  ///< stderr so far
  bool running();

 private:
  int pid_ = -1;
  bool reaped_ = false;
  int status_ = -1;
  TempDir io_;
};

/// How long a test waits for something that surely happens (a process to exit, a line
/// to appear) when a timeout is the only signal: enough for a sanitizer build on two
/// busy cores. Waits return as soon as the thing happens; only a failing test waits this long.
constexpr double kPatience = 180;

/// Built with AddressSanitizer (GCC's and clang's macros): gpuq takes several times the CPU.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

/// The suite's one wait: polls `cond` every 20 ms until it holds or `timeout_s` seconds of the
/// clock have passed (not loop turns: a slow `cond` does not stretch it); returns its last value.
bool eventually(const std::function<bool()>& cond, double timeout_s = kPatience);

/// The seed of a random test: $GPUQ_TEST_SEED when set (a number; "random" for a new
/// one each run, printed at once), else `fallback`, so that the suite is the same each run.
uint64_t test_seed(uint64_t fallback);

/// "seed N; replay: GPUQ_TEST_SEED=N gpuq_tests --gtest_filter=THIS.TEST", for
/// SCOPED_TRACE(seed_note(seed)): every failure of the test then names its seed.
std::string seed_note(uint64_t seed);

/// Starts `gpuq ARGS` in the background.
std::unique_ptr<Background> start_gpuq(const std::vector<std::string>& args, const std::string& cwd,
                                       const std::map<std::string, std::string>& env = {});

/// Lines of a file (empty if missing).
std::vector<std::string> lines_of(const std::string& path);

/// True when a process with this pid exists and is not a zombie.
bool pid_alive(long long pid);

/// How many times `what` occurs in `text` (overlapping ones too).
size_t count_of(const std::string& text, const std::string& what);

/// "0, 0\n1, 0\n...": `gpus` idle GPUs as `nvidia-smi --query-gpu=index,memory.used` prints them.
std::string idle_gpus(int gpus);

/// A fake nvidia-smi in `d` that prints d/smi.txt, written here as `smi` (rewrite the file to
/// change what the node reports); returns the environment that makes gpuq use it.
std::map<std::string, std::string> fake_nvidia_smi(const TempDir& d, const std::string& smi);

/// A folder for real runs of the built binary: a fake nvidia-smi (see fake_nvidia_smi) and
/// the environment that makes gpuq use it. The suite's one such fixture: a test file that needs
/// more (job scripts, its own run flags) derives from it rather than keeping its own copy.
struct PlanFolder {
  TempDir d;
  std::map<std::string, std::string> env;
  /// `gpus` idle GPUs.
  explicit PlanFolder(int gpus) : env(fake_nvidia_smi(d, idle_gpus(gpus))) {}
  /// nvidia-smi prints `smi` (e.g. "0, 30000\n1, 5\n": GPUs with memory in use).
  explicit PlanFolder(const std::string& smi) : env(fake_nvidia_smi(d, smi)) {}
  /// From now on nvidia-smi prints `smi`.
  void set_smi(const std::string& smi) const { d.write("smi.txt", smi); }
  /// Writes the plan file `name`.
  void plan(const std::string& text, const std::string& name = "plan.json") const { d.write(name, text); }
  /// `gpuq ARGS` in the folder, with --plan `plan` after the command.
  Output gpuq(std::vector<std::string> args, const std::string& plan = "plan.json") const;
  /// `gpuq ARGS` started in the background in the folder, with --plan `plan` after the command.
  std::unique_ptr<Background> background(std::vector<std::string> args, const std::string& plan = "plan.json") const;
  /// The state file as JSON (an empty object while there is none).
  nlohmann::json state(const std::string& name = "plan.state.json") const;
  /// Whether the state file exists (gpuq has written it: e.g. run has made its first tick).
  bool has_state(const std::string& name = "plan.state.json") const;
  /// What job `id`'s state entry says ("running", "done", ...). A job with no entry, or no
  /// state file at all, is "pending": what gpuq itself shows for it. To tell "no state file
  /// yet" apart, use has_state().
  std::string status_of(const std::string& id, const std::string& name = "plan.state.json") const;
  /// SIGKILL to the process group of each job the state records: what a test left running.
  void kill_jobs() const;
};

}  // namespace gpuq::test
