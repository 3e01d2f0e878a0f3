// Which cores a job is pinned to (issue 45): a choice of plain data, made by `run` at each
// launch from the node's cores, those its running jobs hold, and those near the job's GPUs.
#pragma once

#include <string>
#include <vector>

namespace gpuq {

/// `n` cores of `node` for a new job, given the cores each running job holds (`held`) and those
/// it is best placed on (`near`: the NUMA node of its GPUs; empty: no preference). First the free
/// cores of `near` that are in `node`: a run of `n` consecutive ones, else the lowest; where fewer
/// than `n` of them are free, all of those and the rest from the other cores by the rule without a
/// preference: the first run of free consecutive cores, else the free cores lowest first; where
/// too few are free (node_cpus more than the cores there are), those shared by the fewest jobs,
/// then the lowest. Sorted; empty when `node` is. Each is at most once; at most `node.size()`.
std::vector<int> choose_cores(const std::vector<int>& node, const std::vector<std::vector<int>>& held, int n,
                              const std::vector<int>& near = {});

/// The cores a Linux cpu list names ("0-3,8", as /proc/self/status's Cpus_allowed_list and
/// `nvidia-smi topo -m`'s CPU Affinity write them), in its order; empty for a text that is not one.
/// (Core ids above kMaxCoreId make the whole text none.)
std::vector<int> parse_core_list(const std::string& text);
inline constexpr int kMaxCoreId = 1 << 16;

/// "0-3,8,10-11": a list of cores as /proc/self/status's Cpus_allowed_list writes it.
std::string core_list_text(const std::vector<int>& cores);

}  // namespace gpuq
