// The snapshot port: git behind a small interface. A snapshot is the working tree of the
// plan's workdir recorded as a commit (HEAD plus every uncommitted and untracked, not ignored
// change) without touching the user's index, branch or stash; jobs run from a read-only
// checkout of it (PLAN.snapshots/COMMIT12/), one per snapshot, removed when no job that is
// not finished needs it. The core sees only the entry's SnapshotRef (core/snapshot.h).
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuq/core/snapshot.h"
#include "gpuq/live/store.h"

namespace gpuq {

/// A snapshot that could not be taken or checked out: the words say why (one line).
struct SnapshotError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Takes snapshots and checks them out.
class Snapshots {
 public:
  virtual ~Snapshots() = default;
  /// The top folder of the git repository `workdir` is in, or "" with the reason in `why`.
  virtual std::string repo_of(const std::string& workdir, std::string* why) = 0;
  /// Records `workdir`'s repository as it is on disk now (a commit kept by the ref
  /// refs/gpuq/snapshots/COMMIT); the same tree on the same HEAD gives the same commit.
  /// Throws SnapshotError.
  virtual SnapshotRef take(const std::string& workdir, double now) = 0;
  /// Writes the snapshot's files into the folder `dir` (absent before). `like`: the read-only
  /// checkout of another snapshot (its folder, named by the commit's first 12 digits), whose
  /// files the snapshot did not change it may share (hard links) instead of writing them again;
  /// "" for none. Throws SnapshotError.
  virtual void check_out(const SnapshotRef& snap, const std::string& dir, const std::string& like = "") = 0;
  /// True when the repository's tree on disk is no longer the snapshot's; nullopt when it
  /// cannot tell (the repository is gone).
  virtual std::optional<bool> changed_since(const SnapshotRef& snap) = 0;
  /// Every path of the snapshot `commit` (a full or short hash) of `repo` (files, links,
  /// submodules; '/'-separated, relative): what its checkout held when made. nullopt when it
  /// cannot tell (the repository or the commit is gone).
  virtual std::optional<std::set<std::string>> paths_of(const std::string& repo, const std::string& commit) = 0;
  /// Deletes the refs refs/gpuq/snapshots/COMMIT of `repo` that this queue's snapshots made (take
  /// names the queue in the commit) and whose commit is not in `keep` (full hashes): git gc may then
  /// drop those commits. Refs of other queues, and of snapshots that name none, are left. Returns
  /// the commits whose ref it deleted.
  virtual std::vector<std::string> drop_refs(const std::string& repo, const std::set<std::string>& keep) = 0;
};

/// The Snapshots of this machine: the `git` command (found on PATH), run with the user's
/// hooks, fsmonitor and automatic gc off, and gpuq's own author, on a temporary copy of the
/// index (so only changed files are hashed again, and the user's index is never written).
class GitSnapshots : public Snapshots {
 public:
  /// `left_out`: paths (files, or folders) never put in a snapshot: gpuq's own files beside the
  /// plan (its_own_files), which change as the queue runs, and the checkouts themselves.
  /// `queue`: the state file of the queue the snapshots are for, named in each commit's message
  /// (drop_refs deletes only refs of its own queue; "": none named, and none dropped).
  explicit GitSnapshots(std::vector<std::string> left_out = {}, std::string queue = "")
      : left_out_(std::move(left_out)), queue_(std::move(queue)) {}
  std::string repo_of(const std::string& workdir, std::string* why) override;
  SnapshotRef take(const std::string& workdir, double now) override;
  void check_out(const SnapshotRef& snap, const std::string& dir, const std::string& like = "") override;
  std::optional<bool> changed_since(const SnapshotRef& snap) override;
  std::optional<std::set<std::string>> paths_of(const std::string& repo, const std::string& commit) override;
  std::vector<std::string> drop_refs(const std::string& repo, const std::set<std::string>& keep) override;

 private:
  std::string tree_now(const std::string& top);
  std::vector<std::string> left_out_;
  std::string queue_;
};

/// gpuq's own files of a plan, which a snapshot leaves out: the state, its lock, PLAN.run.json and
/// the other PLAN.* files gpuq writes, the event log (and its older parts), logs/ and the checkouts.
std::vector<std::string> its_own_files(const PlanPaths& paths);

/// The folder of the checkouts of a plan's snapshots: PLAN.snapshots beside the state file.
std::string snapshots_root(const std::string& state_path);

/// The checkout of `snap` under `root` (root/COMMIT12), made (read-only) when it is not there
/// yet: checked out into a temporary folder, then renamed into place. Returns its path.
/// Throws SnapshotError.
std::string ensure_checkout(Snapshots& snapshots, const std::string& root, const SnapshotRef& snap);

/// Files jobs wrote into a checkout (as root, which read-only modes do not stop), moved out of it
/// before it was removed: a user's output is never deleted.
struct KeptWrites {
  std::string checkout;            ///< the checkout's name (COMMIT12)
  std::string folder;              ///< where the files are now: ROOT/kept/COMMIT12 (or COMMIT12.2, ...)
  std::vector<std::string> files;  ///< their paths in the checkout (and in `folder`), sorted
  bool whole = false;              ///< some could not be moved: the checkout is left, whole, at `folder`
};

/// Removes every checkout under `root` whose commit is not in `keep` (full hashes); the names
/// of those removed. What jobs wrote into one first goes to ROOT/kept/ (one KeptWrites each, in
/// `kept`): files not in its commit (`snapshots`' paths_of in `repo`) and files changed since it
/// was made, less the caches Python writes beside the code (__pycache__). Without `snapshots`,
/// or where the commit's paths are unknown, the files changed since the checkout was made.
std::vector<std::string> prune_checkouts(const std::string& root, const std::set<std::string>& keep,
                                         Snapshots* snapshots = nullptr, const std::string& repo = "",
                                         std::vector<KeptWrites>* kept = nullptr);

/// The folder under a snapshots root where prune_checkouts keeps what jobs wrote into checkouts.
inline constexpr const char* kKeptFolder = "kept";

/// Where a job of `workdir` runs in the checkout `dir` of a snapshot of `repo`: the same folder
/// relative to the repository's top.
std::string folder_in_checkout(const std::string& dir, const std::string& repo, const std::string& workdir);

}  // namespace gpuq
