// The rest of the box as this machine has it (issue 45): the cores gpuq may use and its memory,
// read here so that the core gets numbers (Policy::node_cpus, node_mem_gib).
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <string>
#include <vector>

#include "gpuq/core/cores.h"  // parse_core_list, core_list_text

namespace gpuq {

/// The cores this process may run on (sched_getaffinity), in increasing order; [0, n) from
/// sysconf where that fails.
std::vector<int> usable_cores();

/// GiB of memory of this machine (MemTotal of /proc/meminfo), or 0 when it cannot be read.
double machine_mem_gib();

}  // namespace gpuq
