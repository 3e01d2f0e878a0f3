// The views as SVG: a Gantt chart of what ran and what is predicted.
#pragma once

#ifdef GPUQ_CORE
#error "the core does not include views: it returns data, views print it"
#endif

#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/outlook.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// A Gantt chart: one row per GPU and rows for 0-GPU jobs, a time axis in hours,
/// jobs labelled and coloured by status (done, running, failed, predicted).
/// `bars` are (job, status, start hour, end hour, gpus); `now_h` draws a line.
struct Bar {
  size_t job;
  std::string status;
  double start, end;
  std::vector<int> gpus;
  int node = 0;  ///< with nodes > 1: the node its GPUs are on
  std::string label{};  ///< shown instead of plan.jobs[job].id when set (a job the plan no longer has)
};
/// The chart: a row per GPU of `node_gpus` (of each of `nodes` nodes: simulate --nodes), then rows for 0-GPU jobs.
std::string gantt_svg(const Plan& plan, const std::vector<Bar>& bars, const std::vector<int>& node_gpus,
                      std::optional<double> now_h, const std::string& title, int nodes = 1);

/// The Gantt bars of a live queue: what ran (hours before now, every attempt) and what is predicted.
std::vector<Bar> live_bars(const Plan& plan, const State& state, const Outlook& o);

}  // namespace gpuq
