#include "gpuq/live/probe.h"

#include "gpuq/live/proc.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>
#include <vector>

extern char** environ;

namespace gpuq {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

bool parse_int(const std::string& s, long long* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

GpuReading parse_gpu_csv(const std::string& csv) {
  GpuReading r;
  std::map<int, long long> used;
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    if (trim(line).empty()) continue;
    std::vector<std::string> cols;
    for (size_t from = 0;;) {
      size_t comma = line.find(',', from);
      cols.push_back(trim(line.substr(from, comma == std::string::npos ? std::string::npos : comma - from)));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
    long long idx = 0, mib = 0, pct = 0, ecc = 0;
    // [N/A], [Not Supported]: that GPU cannot say (its utilization; ECC off or absent).
    auto na = [&](size_t k) { return cols.size() > k && !cols[k].empty() && cols[k][0] == '['; };
    bool util = cols.size() >= 3 && !na(2) && parse_int(cols[2], &pct) && pct >= 0 && pct <= 100;
    bool has_ecc = cols.size() == 4 && !na(3) && parse_int(cols[3], &ecc) && ecc >= 0;
    if (cols.size() < 2 || cols.size() > 4 || (cols.size() >= 3 && !util && !na(2)) ||
        (cols.size() == 4 && !has_ecc && !na(3)) || !parse_int(cols[0], &idx) || !parse_int(cols[1], &mib) ||
        idx < 0 || idx > 63) {
      r.problem = fmt::format("unexpected line from nvidia-smi: '{}'", trim(line).substr(0, 80));
      r.util_pct.clear();
      r.ecc_uncorrected.clear();
      return r;
    }
    used[static_cast<int>(idx)] = mib;
    if (util) r.util_pct[static_cast<int>(idx)] = static_cast<int>(pct);
    if (has_ecc) r.ecc_uncorrected[static_cast<int>(idx)] = static_cast<unsigned long long>(ecc);
  }
  if (used.empty()) {
    r.problem = "nvidia-smi printed no GPU";
    r.util_pct.clear();
    r.ecc_uncorrected.clear();
    return r;
  }
  r.used_mib = std::move(used);
  return r;
}

namespace {

// Runs `args` (args[0] found on PATH) with its stdout into `out`; "" when it exited 0, else
// what went wrong. Its own process group, killed at the timeout. The caller may be the
// background probe's thread: posix_spawn and the calls here are thread-safe, and the run
// loop's reap_children may collect the child first (then waitpid says ECHILD, its exit
// status is unknown, and the output alone decides).
std::string run_capture(const std::vector<std::string>& args, double timeout_s, std::string* out) {
  const std::string& command = args[0];
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return std::string("pipe2: ") + std::strerror(errno);
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  pid_t pid = 0;
  int rc = spawn_process(&pid, command.c_str(), true, {devnull, pipefd[1], devnull}, POSIX_SPAWN_SETPGROUP, args);
  ::close(pipefd[1]);
  ::close(devnull);
  if (rc != 0) {
    ::close(pipefd[0]);
    return fmt::format("cannot run {}: {}", command, std::strerror(rc));
  }
  double deadline = monotonic_now() + timeout_s;
  bool timed_out = false;
  while (true) {
    double left = deadline - monotonic_now();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipefd[0], POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = ::read(pipefd[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    out->append(buf, static_cast<size_t>(got));
    if (out->size() > (1 << 20)) break;
  }
  ::close(pipefd[0]);
  if (timed_out) ::killpg(pid, SIGKILL);
  int st = 0;
  int w;
  while ((w = ::waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
  }
  if (timed_out) return fmt::format("{} did not answer within {} s", command, timeout_s);
  if (w < 0) return "";  // reaped by the run loop (ECHILD): the output decides
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return WIFEXITED(st) ? fmt::format("{} exited with status {}", command, WEXITSTATUS(st))
                         : fmt::format("{} was killed by signal {}", command, WTERMSIG(st));
  return "";
}

}  // namespace

GpuReading probe_gpus(const std::string& command, double timeout_s) {
  std::string out;
  std::string problem =
      run_capture({command, "--query-gpu=index,memory.used,utilization.gpu,ecc.errors.uncorrected.volatile.total",
                   "--format=csv,noheader,nounits"},
                  timeout_s, &out);
  GpuReading r;
  if (problem.empty()) r = parse_gpu_csv(out);
  else r.problem = problem;
  r.source = "nvidia-smi";
  r.faults_seen = "uncorrectable ECC errors, a GPU gone from its list";
  return r;
}

std::optional<Topology> probe_topology_smi(const std::string& command, double timeout_s, std::string* problem) {
  std::string out;
  *problem = run_capture({command, "topo", "-m"}, timeout_s, &out);
  if (!problem->empty()) return std::nullopt;
  std::string err;
  std::optional<Topology> t = parse_topo_matrix(out, &err);
  if (!t) *problem = fmt::format("{} topo -m: {}", command, err);
  return t;
}

}  // namespace gpuq
