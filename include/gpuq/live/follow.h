// `gpuq logs`: the end of a job's log, and following it until the job ends.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"
#include "gpuq/live/store.h"

namespace gpuq {

/// How far a log has been printed: a byte offset into one file (device and
/// inode tell a new file of the same name from the one printed so far).
struct LogCursor {
  uint64_t offset = 0;
  dev_t dev = 0;
  ino_t ino = 0;  ///< 0: no file seen yet
};

/// Prints the last `lines` lines of the log at `path` (all of it when lines <= 0;
/// a last line without its newline counts as a line), reading back from its end
/// `block` bytes at a time. Returns how far it printed, or nullopt when the log
/// does not exist. Throws StoreError when it cannot be read (a symbolic link is refused).
std::optional<LogCursor> print_tail(const std::string& path, long lines, std::FILE* out, size_t block = 65536);

/// Prints what was appended to the log since `cursor` and moves the cursor to
/// its end. A log that shrank (truncated) or was replaced by another file is
/// printed from its start; one that does not exist prints nothing. Returns the
/// bytes printed. Throws StoreError as print_tail does.
uint64_t print_appended(const std::string& path, LogCursor& cursor, std::FILE* out);

/// `gpuq logs -f`: prints the last `lines` lines of job `id`'s log, then what
/// the job appends, until the state (refreshed as `status` does) says it is
/// neither running nor pending; a log that does not exist yet is waited for.
/// Sleeps until inotify reports a change to the log, the job's exit file or
/// the state file; `safety_net_ms` is the longest sleep without one (a job
/// whose process vanished without an exit file while no `run` is going).
/// Where inotify cannot be used it says why on `err` and looks every second.
/// A job that has not started (pending, no log) is said to be waited for, on `err`, once.
/// A failed job that the `gpuq run` going on the plan retries by itself (retries left by
/// its --max-retries, or `job`'s own number when given: core's retries_of) is followed into
/// its next attempt, said once on `err`.
/// Returns the job's status at the end, and its whole entry in `last` when given;
/// StoreError when a file cannot be read.
Status follow_log(const PlanPaths& paths, const std::string& id, long lines, std::FILE* out, std::FILE* err,
                  int safety_net_ms = 5000, JobState* last = nullptr, const Job* job = nullptr);

}  // namespace gpuq
