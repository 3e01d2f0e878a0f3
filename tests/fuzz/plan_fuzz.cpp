// libFuzzer target: the plan loader, and the simulator on every plan it accepts.
// A text is either a plan or a list of problems, each naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpuq/core/plan.h"
#include "gpuq/core/simulate.h"
#include "gpuq/views/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  gpuq::PlanLoad load = gpuq::parse_plan(text, "fuzz.json", {0, 1, 2, 3, 4, 5, 6, 7});
  if (load.plan.has_value() == !load.errors.empty()) std::abort();
  for (const std::string& e : load.errors)
    if (e.rfind("fuzz.json: ", 0) != 0) std::abort();
  if (load.plan && load.plan->jobs.size() <= 200) {
    gpuq::Simulation sim = gpuq::simulate(*load.plan, {});
    gpuq::SimOptions opt;
    (void)gpuq::format_timeline(*load.plan, sim, opt, true);
    if (!sim.stuck.empty()) (void)gpuq::format_stuck(*load.plan, sim);
  }
  return 0;
}
