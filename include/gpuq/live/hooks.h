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
#include <map>
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

/// Where a hook's delivery stands: the number of the last event of the log (counting from 1,
/// all parts oldest first) it was given or passed over, and that event (to find it again).
struct HookMark {
  long long events = 0;
  std::optional<Event> last;
};

/// Where to go on from `mark` in `past` (every event of the log, oldest first): its number
/// when the event there is still its `last`; else the place of `last` found elsewhere (an older
/// part of the log removed by hand: the numbers moved), the last of equal events; else, `last`
/// gone, after every event dated no later than it. Never past the log's end.
long long resume_from(const std::vector<Event>& past, const HookMark& mark);

/// The marks file of a plan whose state file is `state_path` (plan.state.json -> plan.hooks.json).
std::string hook_marks_path_for(const std::string& state_path);

/// The marks file PLAN.hooks.json: {"HOOK TEXT": {"events": N, "last": EVENT LINE}, ...}.
/// Parses `text`; a problem (naming `file`, the place and what is wrong) leaves `problem` set
/// and returns the marks that could be read.
std::map<std::string, HookMark> parse_hook_marks(const std::string& text, const std::string& file,
                                                 std::string* problem);
std::string hook_marks_text(const std::map<std::string, HookMark>& marks);

/// Runs the hooks of `run`.
class HookRunner {
 public:
  struct Options {
    double timeout_s = 60;
    std::string output;     ///< where their output goes (appended)
    std::string plan;       ///< GPUQ_PLAN
    std::string logs;       ///< the logs folder (GPUQ_LOG is LOGS/ID.log)
    size_t max_running = 8; ///< more wait their turn
    std::string marks;      ///< PLAN.hooks.json: how far each hook was given the log ("": not kept)
  };
  HookRunner(std::vector<HookSpec> hooks, Options opt, std::function<void(const std::string&)> say);
  ~HookRunner();
  HookRunner(const HookRunner&) = delete;
  HookRunner& operator=(const HookRunner&) = delete;

  bool empty() const { return hooks_.empty(); }
  /// At run's start: `past` is every event already in the log. A hook given to an earlier run
  /// gets those logged after the last it was given (events made while no run was going: a
  /// control command, the original); a hook new to the plan starts from now.
  void begin(const std::vector<Event>& past);
  /// Starts (or queues) the hooks that want these events. `last`: the number of the last of
  /// them in the log (Journal::count; 0: unnumbered, no mark kept); an event a hook was given
  /// before (its number at most the hook's mark) is not given again.
  void fire(const std::vector<Event>& events, long long last = 0);
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
  void save_marks();
  void report(size_t hook, const std::string& kind, const std::string& id, const std::string& what);

  std::vector<HookSpec> hooks_;
  Options opt_;
  std::function<void(const std::string&)> say_;
  std::vector<Running> running_;
  struct Waiting {
    size_t hook;
    Event event;
    long long number;  // in the log (0: unnumbered)
    HookMark before;   // the hook's mark before it
  };
  std::deque<Waiting> queue_;
  // Per hook: the last event numbered given to fire (run, queued or not wanted), and the
  // mark kept in the marks file (the last before any still waiting their turn).
  std::vector<HookMark> given_, kept_;
  std::map<std::string, HookMark> others_marks_;  // marks of hooks this run was not given, kept as found
  bool begun_ = false, saved_once_ = false;
  std::string marks_problem_;  // said once
  std::set<std::pair<size_t, std::string>> reported_;
};

}  // namespace gpuq
