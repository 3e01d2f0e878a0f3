// The state store: flock, atomic replace (where a plan's files live: paths.h).
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "gpuq/live/paths.h"
#include "gpuq/live/ports.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// An error of the OS or of a file's content, with the file named.
struct StoreError : std::runtime_error {
  /// Io: a system call failed (no space, read-only, permissions): worth retrying.
  /// Content: a file holds something gpuq cannot use: retrying will not help.
  enum class Kind { Io, Content };
  explicit StoreError(const std::string& what, Kind k = Kind::Io) : std::runtime_error(what), kind(k) {}
  StoreError(const std::string& what, std::string path, int error)
      : std::runtime_error(what), kind(Kind::Io), file(std::move(path)), err(error) {}
  Kind kind;
  std::string file;  ///< the file the failed call was on ("" where none is known)
  int err = 0;       ///< its errno (0 where none is known)
};

/// What a failed write says of the node, for the lines of `run`: "the disk holding FILE is full
/// (No space left on device)", "FILE's folder is read-only (...)", "no file descriptor is left
/// (...)", or "cannot write FILE (...)". A temporary file's name (".tmp.PID") is named by the
/// file it stands for.
std::string fault_words(const std::string& file, int err);

/// True for the causes that pass once someone frees what ran out or puts the folder back: a full
/// disk or quota, a read-only file system, no process, memory or file descriptor left.
bool fault_passes(int err);

/// An exclusive flock on PLAN.lock, held for one read-modify-write of the state.
/// The lock file is opened without following symlinks and never truncated.
class StateLock {
 public:
  explicit StateLock(const PlanPaths& paths);
  ~StateLock();
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  int fd_ = -1;
};

/// Held by one `gpuq run` for its life, so that a second one on the same plan is refused.
/// The file (PLAN.run.lock) holds the holder's pid.
class RunGuard {
 public:
  /// Takes the guard, or throws StoreError (Content) naming the pid that holds it.
  explicit RunGuard(const PlanPaths& paths);
  ~RunGuard();
  RunGuard(const RunGuard&) = delete;
  RunGuard& operator=(const RunGuard&) = delete;

 private:
  int fd_ = -1;
};

/// Writes all of `data` to `fd` (retrying short writes and EINTR), or throws
/// StoreError naming `path`.
void write_all(int fd, const std::string& data, const std::string& path);

/// Reads the state: empty when the file does not exist; StoreError (naming the
/// file and the place) when it cannot be read or decoded.
State read_state(const PlanPaths& paths);

/// Replaces the state file: writes a temporary file beside it, fsyncs it,
/// renames it over the old one, fsyncs the folder. Keeps the previous state as
/// PLAN.state.json.bak. Throws StoreError, leaving the old file intact.
/// With `defer_folder_sync`, the caller calls sync_folder_of(paths.state) itself: `run`
/// releases the jobs it just started first, since a power cut kills them anyway.
void write_state(const PlanPaths& paths, const State& state, bool defer_folder_sync = false);

/// fsyncs the folder `path` is in: the creates, renames and removals made in it survive a power
/// cut from now on. Best effort (a folder that cannot be opened is left as it is).
void sync_folder_of(const std::string& path);

/// syncfs(2) of the filesystem the folder `dir` is on: every file and folder written there, by
/// gpuq or by a command it ran (git), survives a power cut from now on. For writes of many files
/// (a snapshot's objects, its checkout) made once per plan load, not per job. Best effort.
void sync_filesystem_of(const std::string& dir);

/// The whole content of a file, or nullopt if it does not exist; StoreError on
/// other failures. Symlinks are not followed when `nofollow`.
std::optional<std::string> read_file(const std::string& path, bool nofollow = false);

/// The Store of this machine: PLAN.state.json under the flock of PLAN.lock
/// (read_state, write_state). unchanged_since_write() compares the file's
/// inode, size and mtime with those right after this store's last write: a
/// control command or the original replaces the file, which changes the inode.
class FileStore : public Store {
 public:
  explicit FileStore(PlanPaths paths) : paths_(std::move(paths)) {}
  void lock() override;
  void unlock() override;
  State read() override;
  void write(const State& state, bool defer_sync) override;
  void sync() override;
  bool unchanged_since_write() override;

 private:
  struct FileId {
    unsigned long long ino = 0;
    long long size = 0, mtime_s = 0, mtime_ns = 0;
    bool operator==(const FileId&) const = default;
  };
  std::optional<FileId> identity() const;

  PlanPaths paths_;
  std::unique_ptr<StateLock> lock_;
  std::optional<FileId> written_;
};

}  // namespace gpuq
