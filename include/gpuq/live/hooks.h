// `run --on-event CMD`: a command of the user's run for each event of the log
// (journal.h), with the event in GPUQ_* variables and as one JSON line on stdin. Each
// runs under bash in a session of its own, within `timeout` (coreutils: a process group
// of its own, SIGTERM at the limit, SIGKILL 5 s later), its output appended to
// logs/gpuq-hooks.log. Starting one never waits for it: its exit status comes back
// through a pipe that a later tick reads, and a failure is said once per hook and kind.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpuq/core/events.h"

namespace gpuq {

/// One --on-event: `CMD`, or `kind,kind:CMD` to run it for those only. A name is an
/// event kind (start, end, retry, kill, hold, timeout) or an end's outcome
/// (done, failed, killed, lost, unknown).
struct HookSpec {
  std::string command;
  std::vector<std::string> only;  ///< empty: every event
  std::string text;               ///< as given
};

/// Parses one --on-event; nullopt with `problem` set when it names an unknown kind.
std::optional<HookSpec> parse_hook(const std::string& text, std::string* problem);

/// Whether the hook runs for `e`.
bool hook_wants(const HookSpec& h, const Event& e);

/// Runs the hooks of `run`.
class HookRunner {
 public:
  struct Options {
    double timeout_s = 60;
    std::string output;     ///< where their output goes (appended)
    std::string plan;       ///< GPUQ_PLAN
    std::string logs;       ///< the logs folder (GPUQ_LOG is LOGS/ID.log)
    size_t max_running = 8; ///< more wait their turn
  };
  HookRunner(std::vector<HookSpec> hooks, Options opt, std::function<void(const std::string&)> say);
  ~HookRunner();
  HookRunner(const HookRunner&) = delete;
  HookRunner& operator=(const HookRunner&) = delete;

  bool empty() const { return hooks_.empty(); }
  /// Starts (or queues) the hooks that want these events.
  void fire(const std::vector<Event>& events);
  /// Collects the ended hooks, says their failures, starts queued ones.
  void poll();
  /// Hooks running or waiting: the loop looks again soon.
  bool busy() const { return !running_.empty() || !queue_.empty(); }
  size_t running_count() const { return running_.size(); }
  size_t waiting_count() const { return queue_.size(); }
  /// Waits up to `seconds` for the running hooks (run's end), then leaves them be.
  void drain(double seconds);

 private:
  struct Running {
    size_t hook;
    std::string kind, id;
    int status_fd;
    std::string got;
  };
  void spawn(size_t hook, const Event& e);
  void report(size_t hook, const std::string& kind, const std::string& id, const std::string& what);

  std::vector<HookSpec> hooks_;
  Options opt_;
  std::function<void(const std::string&)> say_;
  std::vector<Running> running_;
  std::deque<std::pair<size_t, Event>> queue_;
  std::set<std::pair<size_t, std::string>> reported_;
};

}  // namespace gpuq
