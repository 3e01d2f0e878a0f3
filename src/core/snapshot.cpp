#include "gpuq/core/snapshot.h"

#include <fmt/format.h>

#include "gpuq/core/local_time.h"

namespace gpuq {

bool uses_snapshot(const Job& job, std::string_view setting) {
  return job.snapshot ? *job.snapshot : setting == "git";
}

bool any_snapshot(const Plan& plan, std::string_view setting) {
  for (const Job& j : plan.jobs)
    if (uses_snapshot(j, setting)) return true;
  return false;
}

std::optional<SnapshotRef> snapshot_of(const JobState& s) {
  if (!s.snapshot || s.snapshot->empty()) return std::nullopt;
  return SnapshotRef{*s.snapshot, s.snapshot_dirty.value_or(false), s.snapshot_at.value_or(0),
                     s.snapshot_repo.value_or("")};
}

void set_snapshot(JobState& s, const SnapshotRef& snap) {
  s.snapshot = snap.commit;
  s.snapshot_at = snap.at;
  s.snapshot_dirty = snap.dirty;
  s.snapshot_repo = snap.repo;
}

void clear_snapshot(JobState& s) {
  s.snapshot.reset();
  s.snapshot_at.reset();
  s.snapshot_dirty.reset();
  s.snapshot_repo.reset();
}

std::string short_commit(std::string_view commit) { return std::string(commit.substr(0, 12)); }

std::string stale_snapshot_text(double at, double now) {
  return fmt::format("runs the code of {}; the tree changed since", local_time(at, now));
}

}  // namespace gpuq
