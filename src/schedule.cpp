#include "gpuq/schedule.h"

#include <algorithm>
#include <limits>

namespace gpuq {

bool ready_before(const Plan& plan, size_t a, size_t b) {
  double pa = plan.jobs[a].priority, pb = plan.jobs[b].priority;
  if (pa != pb) return pa < pb;
  return a < b;
}

void sort_ready(const Plan& plan, std::vector<size_t>& jobs) {
  std::sort(jobs.begin(), jobs.end(), [&](size_t a, size_t b) { return ready_before(plan, a, b); });
}

GpuMask reserved_gpus(const Plan& plan, size_t job, const std::vector<bool>& open) {
  GpuMask closed = 0;
  const auto& mine = plan.reservations_of[job];
  for (size_t r = 0; r < plan.reservations.size(); ++r) {
    if (!open[r]) continue;
    if (std::find(mine.begin(), mine.end(), r) != mine.end()) continue;
    closed |= plan.reservations[r].gpus;
  }
  return closed;
}

namespace {

PassResult one_pass(const Plan& plan, const PassInput& in, double limit) {
  PassResult out;
  GpuMask free = in.free;
  const bool any_reservation = !plan.reservations.empty();
  for (size_t j : in.ready) {
    const Job& job = plan.jobs[j];
    if (out.waiting_head && job.est_hours > limit) {
      out.held.push_back({j, Held::Why::Backfill, 0, 0, *out.waiting_head});
      continue;
    }
    GpuMask closed = any_reservation ? reserved_gpus(plan, j, in.open) : 0;
    auto gpus = pick_gpus(job.gpus, free & ~closed);
    if (!gpus) {
      if (job.gpus > 0 && plan.reservations_of[j].empty() && !out.waiting_head) out.waiting_head = j;
      out.held.push_back({j, Held::Why::Gpus, count(free & ~closed), free & closed, 0});
      continue;
    }
    free &= ~mask_of(*gpus);
    out.starts.push_back({j, std::move(*gpus)});
  }
  return out;
}

}  // namespace

PassResult schedule_pass(const Plan& plan, const PassInput& in) {
  PassResult out = one_pass(plan, in, in.backfill_max_hours);
  if (!out.starts.empty() || !in.nothing_running || !out.waiting_head) return out;
  size_t head = *out.waiting_head;
  GpuMask usable = in.node & ~reserved_gpus(plan, head, in.open);
  if (pick_gpus(plan.jobs[head].gpus, usable)) return out;  // it will fit once GPUs free up
  // The limit can only be waited out by GPUs that will never free up: lift it. If even that
  // starts nothing, its reasons (GPUs, not the limit) are the true ones.
  PassResult unlimited = one_pass(plan, in, std::numeric_limits<double>::infinity());
  unlimited.stall_broken = !unlimited.starts.empty();
  unlimited.waiting_head = head;
  return unlimited;
}

}  // namespace gpuq
