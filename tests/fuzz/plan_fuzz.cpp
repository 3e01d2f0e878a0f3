// libFuzzer target: the plan loader, and the simulator on every plan it accepts.
// The fast reader must load every plan exactly as nlohmann/json alone does.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gpuq/plan.h"
#include "gpuq/simulate.h"

namespace {

bool same(const gpuq::PlanLoad& a, const gpuq::PlanLoad& b) {
  if (a.errors != b.errors || a.warnings != b.warnings || a.plan.has_value() != b.plan.has_value()) return false;
  if (!a.plan) return true;
  const auto &x = *a.plan, &y = *b.plan;
  if (x.jobs.size() != y.jobs.size() || x.reservations.size() != y.reservations.size()) return false;
  for (size_t i = 0; i < x.jobs.size(); ++i) {
    const gpuq::Job &p = x.jobs[i], &q = y.jobs[i];
    if (p.id != q.id || p.script != q.script || p.gpus != q.gpus || p.est_given != q.est_given ||
        p.produced_by != q.produced_by || p.deps.size() != q.deps.size() ||
        std::memcmp(&p.priority, &q.priority, sizeof(double)) != 0 ||
        std::memcmp(&p.est_hours, &q.est_hours, sizeof(double)) != 0 ||
        std::memcmp(&p.produced_at_frac, &q.produced_at_frac, sizeof(double)) != 0 ||
        p.first_look_frac.has_value() != q.first_look_frac.has_value() ||
        (p.first_look_frac && std::memcmp(&*p.first_look_frac, &*q.first_look_frac, sizeof(double)) != 0))
      return false;
    for (size_t k = 0; k < p.deps.size(); ++k)
      if (p.deps[k].kind != q.deps[k].kind || p.deps[k].target != q.deps[k].target || p.deps[k].job != q.deps[k].job)
        return false;
  }
  for (size_t r = 0; r < x.reservations.size(); ++r)
    if (x.reservations[r].gpus != y.reservations[r].gpus || x.reservations[r].jobs != y.reservations[r].jobs)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  gpuq::PlanLoad load = gpuq::parse_plan(text, "fuzz.json", {0, 1, 2, 3, 4, 5, 6, 7});
  if (!same(load, gpuq::parse_plan(text, "fuzz.json", {0, 1, 2, 3, 4, 5, 6, 7}, false))) std::abort();
  if (load.plan && load.plan->jobs.size() <= 200) {
    gpuq::Simulation sim = gpuq::simulate(*load.plan, {});
    gpuq::SimOptions opt;
    (void)gpuq::format_timeline(*load.plan, sim, opt, true);
    if (!sim.stuck.empty()) (void)gpuq::format_stuck(*load.plan, sim);
  }
  return 0;
}
