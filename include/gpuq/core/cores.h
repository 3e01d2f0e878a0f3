// Which cores a job is pinned to (issue 45): a choice of plain data, made by `run` at each
// launch from the node's cores and those its running jobs hold.
#pragma once

#include <vector>

namespace gpuq {

/// `n` cores of `node` for a new job, given the cores each running job holds (`held`): the
/// first run of `n` free consecutive cores, else the free cores lowest first; where fewer than
/// `n` are free (node_cpus more than the cores there are), those shared by the fewest jobs, then
/// the lowest. Sorted; empty when `node` is. Each is at most once; at most `node.size()` of them.
std::vector<int> choose_cores(const std::vector<int>& node, const std::vector<std::vector<int>>& held, int n);

}  // namespace gpuq
