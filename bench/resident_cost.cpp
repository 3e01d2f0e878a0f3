// The cost of `run`'s host memory sampling (issue 45): one pass over /proc for the process trees of
// N jobs (a process group each, a bash with K children), as watch_memory pays it per tick while a
// job with mem_gib runs. Plans without mem_gib pay nothing (the pass is skipped).
// usage: bench_resident [JOBS=8] [CHILDREN=3] [READINGS=200]
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "gpuq/live/proc.h"

using namespace gpuq;

int main(int argc, char** argv) {
  int jobs = argc > 1 ? std::atoi(argv[1]) : 8, children = argc > 2 ? std::atoi(argv[2]) : 3;
  int n = argc > 3 ? std::atoi(argv[3]) : 200;
  std::string script;
  for (int c = 0; c < children; ++c) script += "sleep 120 & ";
  script += "wait";
  std::vector<long long> groups;
  for (int j = 0; j < jobs; ++j) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::execlp("bash", "bash", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    groups.push_back(pid);
  }
  ::usleep(300000);  // their children started
  size_t procs = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc"))
    if (std::isdigit(static_cast<unsigned char>(e.path().filename().string()[0]))) ++procs;
  std::vector<double> ms;
  size_t seen = 0;
  long long bytes = 0;
  for (int i = 0; i < n; ++i) {
    double t = monotonic_now();
    std::map<long long, ResidentTree> trees = resident_trees(groups);
    ms.push_back((monotonic_now() - t) * 1000);
    seen = 0, bytes = 0;
    for (const auto& [g, tree] : trees) seen += tree.pids.size(), bytes += tree.bytes;
  }
  for (long long g : groups) ::killpg(static_cast<pid_t>(g), SIGKILL);
  for (long long g : groups) ::waitpid(static_cast<pid_t>(g), nullptr, 0);
  std::sort(ms.begin(), ms.end());
  fmt::print("{} jobs x (bash + {} children): {} processes in their trees ({:.1f} MiB resident), {} processes on the "
             "machine\n  one sample of all their trees: median {:.3f} ms, 90th percentile {:.3f} ms ({} samples)\n",
             jobs, children, seen, static_cast<double>(bytes) / (1 << 20), procs, ms[ms.size() / 2],
             ms[ms.size() * 9 / 10], n);
  return seen == static_cast<size_t>(jobs * (children + 1)) ? 0 : 1;
}
