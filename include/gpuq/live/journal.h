// The event log beside the plan, PLAN.events.jsonl (events.h says what is in it):
// appended with O_APPEND and fsynced, never rewritten. A line cut short by a crash
// is skipped with a warning, and the next append starts on a line of its own.
// Past --events-max-mb, `run` renames the log to PLAN.events.jsonl.1 (.2, ... : the
// higher, the newer) and starts a new one; readers read them all, oldest first.
//
// Exactly once: every writer appends only after its state write succeeded, and
// logs what changed between the log's last word on each job and the state. A crash
// between the two is made good by the next writer's comparison; nothing is logged
// twice, because the comparison starts from what the log already says.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpuq/core/events.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// The path of the event log of a plan whose state file is `state_path`
/// (plan.state.json -> plan.events.jsonl).
std::string events_path_for(const std::string& state_path);
/// PLAN.predictions.jsonl beside it: what `run` predicted, for `history --accuracy` (accuracy.h).
std::string predictions_path_for(const std::string& state_path);

/// Every event in the log and its rotated parts, oldest first. Lines that are not
/// events (a torn last line) are skipped, each with a warning naming file and line.
std::vector<Event> read_events(const std::string& path, std::vector<std::string>* warnings);

/// Appends the events (one line each) and fsyncs; throws StoreError naming the file.
void append_events(const std::string& path, const std::vector<Event>& events);

/// Appends `lines` (each ending in a newline) to the log at `path` (`what` names it in errors: "the
/// event log"): on a line of their own (a line a crash cut short stays one), whole or not at all
/// (what a full disk took part of is cut back: no cut line for a reader, no line twice when the
/// append is made again), fsynced when `sync`. StoreError names the file and the error.
void append_lines(const std::string& path, const std::string& lines, std::string_view what, bool sync);

/// The event log as `run` writes it: what the log last said of each job, kept in step
/// with the lines others append (the control commands).
class Journal {
 public:
  /// `max_bytes`: rotate past this size (0: never).
  Journal(std::string path, double max_bytes);

  /// Reads the log under the state's lock, before anything changes the state `state`;
  /// the first call reads every part of the log, later ones what others appended since.
  /// With no log yet, `state` is where logging begins (its past is not logged).
  /// Returns the events others appended (for the hooks); the first call puts every event
  /// already in the log in `past` (when given). `now`, when given, is the caller's clock at the
  /// state's read: a log made now begins then (its mtime), not at the file's own later time.
  std::vector<Event> catch_up(const State& state, std::vector<std::string>* warnings,
                              std::vector<Event>* past = nullptr, std::optional<double> now = std::nullopt);

  /// How many events the log holds (all its parts) as far as it has been read or written:
  /// the number of the last one, counting from 1 (the hooks' marks count the same way).
  long long count() const { return count_; }

  /// Appends `made` (the events of the writer's own changes, from the engine: events_of), then
  /// whatever else differs between the log's view and `state` (a write of others that logged
  /// nothing, a crash between a save and its append: events_between), done by `by` at `now`;
  /// returns them all. Throws StoreError (the view is then unchanged: the caller keeps `made`
  /// to give again). The jobs in `not_yet` are left out of the comparison (their entries are
  /// launches of another run not let run yet: their start is logged once they are, never if not).
  std::vector<Event> record(const State& state, double now, std::string_view by, std::vector<Event> made = {},
                            const std::map<std::string, double>& not_yet = {});

  /// Appends one of the plan's own events (reload, pause, resume: job_event is false), as
  /// record does: throws StoreError naming the file. True when the line is taken as read
  /// (the caller fires the hooks for it); false when the next catch_up returns it.
  bool append_plan_event(const Event& e);

  const std::string& path() const { return path_; }

 private:
  void apply(const Event& e);
  void rotate_if_big();

  std::string path_;
  double max_bytes_;
  // When the log began (its first event): a job the log has no word of that started
  // before then ran before logging began, and is not logged now.
  std::optional<double> begin_;
  bool loaded_ = false;
  long long offset_ = 0;             // how far the log has been read (or written)
  long long count_ = 0;              // the events up to there
  unsigned long long inode_ = 0;
  std::vector<std::pair<std::string, Seen>> view_;  // in the state's order, mostly
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace gpuq
