// The live side of host memory (host_mem.h): the resident memory of jobs' process trees from
// /proc, the kernel log from /dev/kmsg, and PosixLauncher's out-of-memory look at an attempt that
// failed (its log's tail, the kernel's OOM kills).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "gpuq/core/host_mem.h"
#include "gpuq/live/launcher.h"
#include "gpuq/live/proc.h"

namespace gpuq {

namespace {

struct ProcRow {
  long long ppid = 0, pgrp = 0, rss_pages = 0;
};

// Fields 4 (ppid), 5 (pgrp) and 24 (rss, pages) of /proc/PID/stat, read with one read(2).
bool read_row(const char* pid, ProcRow* row) {
  char path[300];  // d_name holds up to 255 bytes
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  char* p = std::strrchr(buf, ')');  // the name may hold spaces and parens
  if (!p || p[1] != ' ') return false;
  p += 2;
  // Field 3 is the state letter; then numbers, field 4 on.
  if (*p == 'Z' || *p == 'X') return false;  // a zombie holds no memory
  while (*p && *p != ' ') ++p;
  for (int field = 4; field <= 24 && *p; ++field) {
    char* end = nullptr;
    long long v = std::strtoll(p, &end, 10);
    if (end == p) return false;
    if (field == 4) row->ppid = v;
    if (field == 5) row->pgrp = v;
    if (field == 24) {
      row->rss_pages = v;
      return true;
    }
    p = end;
  }
  return false;
}

}  // namespace

std::map<long long, ResidentTree> resident_trees(const std::vector<long long>& groups) {
  std::map<long long, ResidentTree> out;
  if (groups.empty()) return out;
  std::unordered_map<long long, ProcRow> rows;
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      ProcRow row;
      if (read_row(e->d_name, &row)) rows.emplace(std::strtoll(e->d_name, nullptr, 10), row);
    }
    ::closedir(d);
  }
  for (long long g : groups) out[g];
  // Each process's tree: its group's when that is a job's, else its parent's (memoized: 0 none).
  std::unordered_map<long long, long long> owner;
  auto owner_of = [&](long long pid) {
    std::vector<long long> path;
    long long found = 0;
    for (int depth = 0; depth < 256; ++depth) {
      if (auto k = owner.find(pid); k != owner.end()) {
        found = k->second;
        break;
      }
      auto r = rows.find(pid);
      if (r == rows.end()) break;
      path.push_back(pid);
      if (out.count(r->second.pgrp)) {
        found = r->second.pgrp;
        break;
      }
      pid = r->second.ppid;
    }
    for (long long p : path) owner[p] = found;
    return found;
  };
  static const long long page = ::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096;
  for (const auto& [pid, row] : rows)
    if (long long g = owner_of(pid)) {
      ResidentTree& t = out[g];
      t.bytes += row.rss_pages * page;
      t.pids.push_back(pid);
    }
  return out;
}

std::optional<std::string> kernel_log() {
  // /dev/kmsg gives one record a read and EAGAIN at the end (O_NONBLOCK): never a wait.
  int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[8192];
  for (size_t records = 0; records < 100000; ++records) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EPIPE) continue;  // records overwritten while reading: go on
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.empty() || text.back() != '\n') text += '\n';
  }
  ::close(fd);
  return text;
}

std::map<long long, ResidentTree> PosixLauncher::resident(const std::vector<long long>& groups) {
  std::map<long long, ResidentTree> trees = resident_trees(groups);
  // Jobs no longer asked about have ended (their out_of_memory came first, in the tick's read).
  std::erase_if(tree_pids_, [&](const auto& kv) { return !trees.count(kv.first); });
  constexpr size_t kKeptPids = 4096;  // a job that starts workers again and again keeps the newest
  for (const auto& [g, t] : trees) {
    std::vector<long long>& seen = tree_pids_[g];
    for (long long p : t.pids)
      if (std::find(seen.begin(), seen.end(), p) == seen.end()) seen.push_back(p);
    if (seen.size() > kKeptPids) seen.erase(seen.begin(), seen.end() - kKeptPids);
  }
  return trees;
}

std::optional<Outcome> PosixLauncher::out_of_memory(const std::string& id, const JobState& s, long long exit,
                                                    std::string* why) {
  if (exit == 0) return std::nullopt;
  // Its cgroup's OOM killer: the job went over the limit gpuq gave it (mem_gib plus the margin).
  if (s.cgroup)
    if (std::optional<long long> kills = cgroup_oom_kills(*s.cgroup); kills && *kills > 0) {
      *why = "the kernel's OOM killer in its cgroup, whose limit is its mem_gib plus --mem-margin-percent";
      return Outcome::OverMemory;
    }
  // The log's last bytes: a CUDA out-of-memory the job printed before it failed.
  int fd = ::open(paths_.log(id).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd >= 0) {
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      off_t from = std::max<off_t>(0, st.st_size - static_cast<off_t>(kOomLogTail));
      std::string tail(static_cast<size_t>(st.st_size - from), '\0');
      ssize_t n = tail.empty() ? 0 : ::pread(fd, tail.data(), tail.size(), from);
      tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
      if (gpu_oom_in_log(tail)) {
        ::close(fd);
        return Outcome::OomGpu;
      }
    }
    ::close(fd);
  }
  // A SIGKILL gpuq did not send (gpuq's own end the job first: the engine ignores their exits):
  // the kernel's OOM killer, where its log says it killed one of the job's processes.
  if (exit != 128 + 9 || !s.pid) return std::nullopt;
  std::vector<long long> pids{*s.pid};
  if (auto it = tree_pids_.find(*s.pid); it != tree_pids_.end())
    pids.insert(pids.end(), it->second.begin(), it->second.end());
  std::optional<std::string> kmsg = kernel_log();
  if (kmsg && oom_kill_in_kernel_log(*kmsg, pids)) return Outcome::OomHost;
  return std::nullopt;
}

}  // namespace gpuq
