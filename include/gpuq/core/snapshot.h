// Snapshots of the code a job runs (the `snapshot` setting and job field, "git"): which jobs use
// one, and what a job's state entry records of its snapshot. Taking and checking out a
// snapshot is the OS's (live/snapshots.h); the core sees only "job X uses snapshot S".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// A snapshot of a workdir's code: a commit (HEAD plus every uncommitted and untracked, not
/// ignored change) in the repository `repo`, kept alive there by refs/gpuq/snapshots/COMMIT.
struct SnapshotRef {
  std::string commit;  ///< the commit's full hash
  bool dirty = false;  ///< its tree differs from HEAD's: it holds uncommitted changes
  double at = 0;       ///< when it was taken (unix seconds)
  std::string repo;    ///< the repository's top folder
  bool operator==(const SnapshotRef&) const = default;
};

/// True when `job` runs from a snapshot: its own "snapshot" field, else the setting, is "git".
bool uses_snapshot(const Job& job, std::string_view setting);

/// True when some job of `plan` runs from a snapshot.
bool any_snapshot(const Plan& plan, std::string_view setting);

/// The snapshot the entry records (its "snapshot", "snapshot_at", "snapshot_dirty" and
/// "snapshot_repo"), or none.
std::optional<SnapshotRef> snapshot_of(const JobState& s);

/// Records `snap` in the entry.
void set_snapshot(JobState& s, const SnapshotRef& snap);

/// Drops the entry's snapshot.
void clear_snapshot(JobState& s);

/// The short form of a commit people read (12 hex digits).
std::string short_commit(std::string_view commit);

/// What `status` says of a pending job whose snapshot, taken at `at`, is older than the tree:
/// "runs the code of Mon 14:02; the tree changed since".
std::string stale_snapshot_text(double at, double now);

}  // namespace gpuq
