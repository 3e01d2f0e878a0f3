#include "gpuq/live/store.h"
#include "gpuq/live/state_codec.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "gpuq/core/local_time.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/run_info.h"

namespace gpuq {

namespace fs = std::filesystem;

namespace {

std::string with_suffix(const fs::path& p, const std::string& suffix) {
  std::string name = p.filename().string();
  auto dot = name.rfind('.');
  if (dot != std::string::npos && dot != 0 && dot + 1 < name.size()) name = name.substr(0, dot);
  return (p.parent_path() / (name + suffix)).string();
}

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  int e = errno;
  // A plan in a folder gpuq cannot write to (a read-only mount, someone else's folder): say how to go on.
  std::string hint = e == EROFS || e == EACCES || e == EPERM
                         ? "; keep the state, locks and logs in a folder you can write with --state-dir DIR (or "
                           "GPUQ_STATE_DIR)"
                         : "";
  throw StoreError(fmt::format("{} {}: {}{}", what, path, std::strerror(e), hint), path, e);
}


}  // namespace

std::string fault_words(const std::string& file, int err) {
  std::string f = file;
  size_t tmp = f.rfind(".tmp.");
  if (tmp != std::string::npos && tmp + 5 < f.size() &&
      f.find_first_not_of("0123456789", tmp + 5) == std::string::npos)
    f.resize(tmp);
  std::string why = std::strerror(err);
  switch (err) {
    case ENOSPC: return fmt::format("the disk holding {} is full ({})", f, why);
    case EDQUOT: return fmt::format("the disk quota of {} is used up ({})", f, why);
    case EROFS: return fmt::format("the folder of {} is read-only ({})", f, why);
    case EMFILE:
    case ENFILE: return fmt::format("no file descriptor is left to open {} ({})", f, why);
    case EAGAIN: return fmt::format("no process can be made ({})", why);
    case ENOMEM: return fmt::format("no memory is left ({})", why);
    default: return fmt::format("cannot write {} ({})", f, why);
  }
}

bool fault_passes(int e) {
  return e == EAGAIN || e == ENOMEM || e == EMFILE || e == ENFILE || e == EINTR || e == ENOSPC || e == EDQUOT ||
         e == EBUSY || e == EROFS;
}

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", path);
    }
    off += static_cast<size_t>(n);
  }
}

PlanPaths paths_for(const std::string& plan, const std::string& state_dir) {
  PlanPaths p;
  fs::path pp(plan);
  p.plan = plan;
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(pp, ec))) {
    fs::path real = fs::canonical(pp, ec);  // a link to nothing keeps the path as given
    if (!ec) {
      p.state_beside_link = with_suffix(pp, ".state.json");
      pp = real;
    }
  }
  // With a state folder the files keep their names, in that folder.
  fs::path named = state_dir.empty() ? pp : fs::path(state_dir) / pp.filename();
  if (!state_dir.empty()) p.state_beside_link.clear();
  p.state = with_suffix(named, ".state.json");
  p.lock = with_suffix(named, ".lock");
  p.run_lock = with_suffix(named, ".run.lock");
  p.run_info = with_suffix(named, ".run.json");
  p.run_plan = with_suffix(named, ".run.plan.json");
  p.paused = with_suffix(named, ".paused");
  p.checkpoints_root = with_suffix(named, ".checkpoints");
  fs::path dir = named.parent_path();
  p.logs = (dir.empty() ? fs::path("logs") : dir / "logs").string();
  return p;
}

std::string state_beside_link_problem(const PlanPaths& paths) {
  if (paths.state_beside_link.empty()) return "";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(paths.state_beside_link, ec))) return "";
  if (fs::equivalent(paths.state_beside_link, paths.state, ec) && !ec) return "";
  return fmt::format("{} is a symbolic link, so gpuq keeps the plan's state beside the file it points to ({}); the "
                     "state {} beside the link is not used. If it is this plan's (written by the original, or an "
                     "earlier gpuq, run through the link), stop that run and move it (and the link's logs/) beside "
                     "the plan file; else remove it",
                     paths.plan, paths.state, paths.state_beside_link);
}

StateLock::StateLock(const PlanPaths& paths) {
  fd_ = ::open(paths.lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  // On a read-only folder an existing lock file can still be locked (the save will then fail and say so).
  if (fd_ < 0 && (errno == EROFS || errno == EACCES)) {
    int why = errno;
    fd_ = ::open(paths.lock.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    // No lock file to fall back on: the cause is the folder (read-only), not the missing file.
    if (fd_ < 0 && errno == ENOENT) {
      errno = why;
      fail("cannot create the lock file", paths.lock);
    }
  }
  if (fd_ < 0) {
    if (errno == ELOOP)
      throw StoreError(fmt::format("the lock file {} is a symbolic link; refusing to use it", paths.lock),
                       StoreError::Kind::Content);
    fail("cannot open the lock file", paths.lock);
  }
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(fd_);
      fail("cannot lock", paths.lock);
    }
  }
}

StateLock::~StateLock() {
  if (fd_ >= 0) ::close(fd_);
}

RunGuard::RunGuard(const PlanPaths& paths) {
  // Read-only: a file held open for writing for days would keep its file system from being remounted.
  fd_ = ::open(paths.run_lock.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    if (errno == ELOOP)
      throw StoreError(fmt::format("{} is a symbolic link; refusing to use it", paths.run_lock), StoreError::Kind::Content);
    fail("cannot open", paths.run_lock);
  }
  // A run killed with SIGKILL can leave the lock held for a moment after it is gone: a job it was
  // spawning (posix_spawn's child, between clone and exec) holds a copy of the descriptor until its
  // exec closes it. So while the pid that took the lock is dead, the holder is such a child, and we
  // wait for it, up to kLockGrace. A live holder is refused at once.
  constexpr auto kLockGrace = std::chrono::seconds(5);
  const auto deadline = std::chrono::steady_clock::now() + kLockGrace;
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int e = errno;
      ::close(fd_);
      fd_ = -1;
      errno = e;
      fail("cannot lock", paths.run_lock);
    }
    char buf[32] = {0};
    ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    long long holder = 0;
    auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), holder);
    bool parsed = ec == std::errc() && end == pid.data() + pid.size() && holder > 0;
    // An empty file: the holder has locked it and is about to write its pid; wait for that too.
    bool dead = (parsed && !process_alive(holder, std::nullopt)) || pid.empty();
    if (dead && std::chrono::steady_clock::now() < deadline) {
      ::usleep(10000);
      continue;
    }
    ::close(fd_);
    fd_ = -1;
    if (dead && parsed)
      throw StoreError(fmt::format("{} is locked by a process other than the `gpuq run` that took it (pid {}, which "
                                   "has exited), and was not let go in {} s. Find the holder with `fuser {}`",
                                   paths.run_lock, pid, kLockGrace.count(), paths.run_lock),
                       StoreError::Kind::Content);
    std::string_view shown = pid.empty() ? std::string_view("?") : std::string_view(pid);
    // Name the first run as it was started: it may have been given another path to the same plan file.
    std::string first;
    if (auto info = read_run_info(paths); info && std::to_string(info->pid) == pid)
      first = fmt::format(", started as `gpuq run --plan {}` on {} at {}", info->plan, info->host,
                          local_time(info->started, info->started));
    throw StoreError(fmt::format("another `gpuq run` (pid {}{}) is already running {}; two queues would fight over "
                                 "the same GPUs. Stop it first (Ctrl-C or kill {}); its jobs keep running and this "
                                 "run will adopt them",
                                 shown, first, paths.plan, shown),
                     StoreError::Kind::Content);
  }
  // The pid, through a second descriptor: closing it leaves the flock (held by fd_) in place.
  std::string me = std::to_string(::getpid()) + "\n";
  int w = ::open(paths.run_lock.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
  if (w >= 0) {
    ssize_t n = ::write(w, me.data(), me.size());
    (void)n;
    ::close(w);
  }
}

RunGuard::~RunGuard() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> read_file(const std::string& path, bool nofollow) {
  // O_NONBLOCK: a FIFO in a file's place must not wait for a writer (it is refused below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    if (errno == ELOOP && nofollow)
      throw StoreError(fmt::format("{} is a symbolic link; refusing to follow it", path), StoreError::Kind::Content);
    fail("cannot open", path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) st.st_size = 0;
  else if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw StoreError(fmt::format("{} is {}, not a file gpuq can read", path,
                                 S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO" : "not a regular file"),
                     StoreError::Kind::Content);
  }
  // Straight into one buffer of the file's size (a byte more, to see the end at once):
  // no second copy. A file that grows meanwhile is read to its end all the same.
  std::string out;
  out.resize(st.st_size > 0 ? static_cast<size_t>(st.st_size) + 1 : 65536);
  size_t len = 0;
  while (true) {
    if (len == out.size()) out.resize(out.size() * 2);
    ssize_t n = ::read(fd, out.data() + len, out.size() - len);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      errno = e;
      fail("cannot read", path);
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(len);
  return out;
}

State read_state(const PlanPaths& paths) {
  auto text = read_file(paths.state, true);
  if (!text) return State{};
  StateLoad load = parse_state(*text, paths.state);
  if (!load.state) {
    std::string bak = paths.state + ".bak";
    std::string hint = fs::exists(bak) ? fmt::format("; the previous good state is {}", bak) : std::string();
    throw StoreError(fmt::format("{}{}. gpuq will not overwrite it: repair it, or move it aside to start from an "
                                 "empty state",
                                 load.error, hint),
                     StoreError::Kind::Content);
  }
  return std::move(*load.state);
}

void sync_folder_of(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void sync_filesystem_of(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::syncfs(fd);
    ::close(fd);
  }
}

void write_state(const PlanPaths& paths, const State& state, bool defer_folder_sync) {
  std::string data = dump_state(state);
  std::string tmp = fmt::format("{}.tmp.{}", paths.state, ::getpid());
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", tmp);
  try {
    write_all(fd, data, tmp);
    if (::fsync(fd) != 0) fail("cannot fsync", tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  // Keep the state being replaced: a hard link costs nothing and is replaced atomically too.
  std::string bak = paths.state + ".bak";
  struct stat st;
  if (::lstat(paths.state.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    std::string baktmp = bak + ".tmp";
    ::unlink(baktmp.c_str());
    if (::link(paths.state.c_str(), baktmp.c_str()) == 0) {
      if (::rename(baktmp.c_str(), bak.c_str()) != 0) ::unlink(baktmp.c_str());
    }
  }
  if (::rename(tmp.c_str(), paths.state.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    errno = e;
    fail("cannot replace", paths.state);
  }
  if (!defer_folder_sync) sync_folder_of(paths.state);
}

}  // namespace gpuq

namespace gpuq {

void FileStore::lock() { lock_ = std::make_unique<StateLock>(paths_); }

void FileStore::unlock() { lock_.reset(); }

State FileStore::read() { return read_state(paths_); }

void FileStore::write(const State& state, bool defer_sync) {
  written_.reset();
  write_state(paths_, state, defer_sync);
  written_ = identity();
}

void FileStore::sync() { sync_folder_of(paths_.state); }

bool FileStore::unchanged_since_write() { return written_ && identity() == written_; }

std::optional<FileStore::FileId> FileStore::identity() const {
  struct stat st;
  if (::lstat(paths_.state.c_str(), &st) != 0) return std::nullopt;
  return FileId{static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_size),
                  static_cast<long long>(st.st_mtim.tv_sec), static_cast<long long>(st.st_mtim.tv_nsec)};
}

}  // namespace gpuq
