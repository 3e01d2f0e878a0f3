// The rest of the box as this machine has it: its cores and memory.
#include "gpuq/live/host.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

namespace gpuq {

std::vector<int> usable_cores() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  if (out.empty()) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (int c = 0; c < std::max(1L, n); ++c) out.push_back(c);
  }
  return out;
}

double machine_mem_gib() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  long long kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    // To a tenth of a GiB, down: the node's memory for jobs is derived from it and read by people
    // ("the node has 19.5 for jobs", not 19.5403: issue 51, item 18).
    if (key == "MemTotal:") return std::floor(static_cast<double>(kib) / (1024.0 * 1024.0) * 10) / 10;
  }
  return 0;
}


}  // namespace gpuq
