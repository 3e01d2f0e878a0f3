// A control group per job with mem_gib: see cgroup.h.
#include "gpuq/live/cgroup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace gpuq {

namespace {

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

bool is_fs(const std::string& path, long magic) {
  struct statfs st;
  return ::statfs(path.c_str(), &st) == 0 && static_cast<long>(st.f_type) == magic;
}

std::optional<std::string> read_small(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1 << 20)) break;
  }
  ::close(fd);
  return out;
}

// Writes `text` to a cgroup file in one write (the kernel takes each write as one command): the
// errno, 0 when it took it.
int write_control(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : EIO);
  ::close(fd);
  return err;
}

bool has_word(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  for (std::string w; in >> w;)
    if (w == word) return true;
  return false;
}

// "KEY N" in a flat keyed file (memory.events, memory.oom_control).
std::optional<long long> keyed(const std::string& path, const std::string& key) {
  std::optional<std::string> text = read_small(path);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  std::string k;
  long long v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return std::nullopt;
}

std::optional<long long> number_in(const std::string& path) {
  std::optional<std::string> text = read_small(path);
  if (!text) return std::nullopt;
  try {
    return std::stoll(*text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool is_v2_group(const std::string& group) { return ::access((group + "/memory.events").c_str(), F_OK) == 0; }

// Whether this process could make `dir` (it is there and writable, or its folder is).
bool could_make(const std::string& dir) {
  if (::access(dir.c_str(), F_OK) == 0) return ::access(dir.c_str(), W_OK) == 0;
  std::string up = dir.substr(0, dir.rfind('/'));
  return ::access(up.c_str(), W_OK) == 0;
}

std::string errtext(int err) { return std::strerror(err); }

}  // namespace

Cgroups look_at_cgroups(bool make, const std::string& root) {
  Cgroups cg;
  if (is_fs(root, CGROUP2_SUPER_MAGIC)) {
    std::optional<std::string> ctl = read_small(root + "/cgroup.controllers");
    if (!ctl || !has_word(*ctl, "memory")) {
      cg.why = fmt::format("cgroup v2 at {} without the memory controller", root);
      return cg;
    }
    cg.parent = root + "/gpuq";
    if (!make) {
      if (!could_make(cg.parent)) {
        cg.why = fmt::format("cgroup v2 at {}, but {} cannot be made by this user (root may)", root, cg.parent);
        return cg;
      }
    } else {
      std::optional<std::string> sub = read_small(root + "/cgroup.subtree_control");
      if (!sub || !has_word(*sub, "memory"))
        if (int e = write_control(root + "/cgroup.subtree_control", "+memory")) {
          cg.why = fmt::format("cgroup v2 at {}, but its memory controller cannot be given to its children "
                               "({}/cgroup.subtree_control: {})",
                               root, root, errtext(e));
          return cg;
        }
      if ((::mkdir(cg.parent.c_str(), 0755) != 0 && errno != EEXIST) || ::access(cg.parent.c_str(), W_OK) != 0) {
        cg.why = fmt::format("cgroup v2 at {}, but {} cannot be made ({})", root, cg.parent, errtext(errno));
        return cg;
      }
      std::optional<std::string> mine = read_small(cg.parent + "/cgroup.subtree_control");
      if (!mine || !has_word(*mine, "memory"))
        if (int e = write_control(cg.parent + "/cgroup.subtree_control", "+memory")) {
          cg.why = fmt::format("cgroup v2 at {}, but {}/cgroup.subtree_control takes no memory controller ({})", root,
                               cg.parent, errtext(e));
          return cg;
        }
    }
    cg.kind = Cgroups::Kind::V2;
    cg.why = fmt::format("cgroup v2: a group per job with mem_gib under {} (memory.max; its peak and OOM kills read "
                         "from it; its processes killed through it)",
                         cg.parent);
    return cg;
  }
  std::string mem = root + "/memory";
  if (!is_fs(mem, CGROUP_SUPER_MAGIC) || ::access((mem + "/memory.limit_in_bytes").c_str(), F_OK) != 0) {
    cg.why = fmt::format("no cgroup memory controller at {} (neither cgroup v2 nor v1's {})", root, mem);
    return cg;
  }
  cg.parent = mem + "/gpuq";
  if (!make ? !could_make(cg.parent)
            : (::mkdir(cg.parent.c_str(), 0755) != 0 && errno != EEXIST) || ::access(cg.parent.c_str(), W_OK) != 0) {
    cg.why = fmt::format("cgroup v1 memory controller at {}, but {} cannot be made{}", mem, cg.parent,
                         make ? fmt::format(" ({})", errtext(errno)) : " by this user (root may)");
    return cg;
  }
  cg.kind = Cgroups::Kind::V1;
  cg.why = fmt::format("cgroup v1 memory controller: a group per job with mem_gib under {} (memory.limit_in_bytes; "
                       "its peak and OOM kills read from it; its processes killed through it)",
                       cg.parent);
  return cg;
}

std::string make_job_cgroup(const Cgroups& cg, const std::string& name, long long limit_bytes, long long pid) {
  if (cg.kind == Cgroups::Kind::None) throw std::runtime_error("no cgroup here: " + cg.why);
  std::string group = cg.parent + "/" + name;
  if (::mkdir(group.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error(fmt::format("mkdir {}: {}", group, errtext(errno)));
  auto step = [&](const std::string& file, const std::string& text) {
    if (int e = write_control(group + "/" + file, text)) {
      ::rmdir(group.c_str());
      throw std::runtime_error(fmt::format("{}/{}: {}", group, file, errtext(e)));
    }
  };
  step(cg.kind == Cgroups::Kind::V2 ? "memory.max" : "memory.limit_in_bytes", std::to_string(limit_bytes));
  step("cgroup.procs", std::to_string(pid));
  return group;
}

std::optional<long long> cgroup_oom_kills(const std::string& group) {
  return keyed(group + (is_v2_group(group) ? "/memory.events" : "/memory.oom_control"), "oom_kill");
}

std::optional<long long> cgroup_peak_bytes(const std::string& group) {
  return number_in(group + (is_v2_group(group) ? "/memory.peak" : "/memory.max_usage_in_bytes"));
}

bool kill_cgroup(const std::string& group) {
  if (::access(group.c_str(), F_OK) != 0) return false;
  if (::access((group + "/cgroup.kill").c_str(), F_OK) == 0 && write_control(group + "/cgroup.kill", "1") == 0)
    return true;
  if (std::optional<std::string> procs = read_small(group + "/cgroup.procs")) {
    std::istringstream in(*procs);
    for (long long pid; in >> pid;)
      if (pid > 1 && pid != ::getpid()) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
  return true;
}

bool remove_cgroup(const std::string& group) {
  if (::access(group.c_str(), F_OK) != 0) return true;
  kill_cgroup(group);
  // EBUSY: its processes still die (tried again). Any other refusal (not ours to remove, a
  // read-only hierarchy) would stay one: given up, the group left as it is.
  return ::rmdir(group.c_str()) == 0 || errno != EBUSY;
}

}  // namespace gpuq
