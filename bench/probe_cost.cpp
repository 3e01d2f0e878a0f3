// The cost of one GPU reading: NVML (a library, here the tests' fake libnvidia-ml.so.1 or a
// real one) against nvidia-smi (a process per reading), as `run` pays it per refresh.
// usage: bench_probe NVML_LIB NVIDIA_SMI [N]   (GPUQ_FAKE_NVML names the fake's JSON)
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "gpuq/live/nvml.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/proc.h"

using namespace gpuq;

namespace {

template <class F>
void time_it(const char* what, int n, F read) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    double t = monotonic_now();
    GpuReading r = read();
    ms.push_back((monotonic_now() - t) * 1000);
    if (!r.used_mib) {
      fmt::print("  {}: no reading: {}\n", what, r.problem);
      return;
    }
  }
  std::sort(ms.begin(), ms.end());
  fmt::print("  {:<44} median {:8.3f} ms, 90th percentile {:8.3f} ms ({} readings)\n", what, ms[ms.size() / 2],
             ms[ms.size() * 9 / 10], n);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: bench_probe NVML_LIB NVIDIA_SMI [N]\n");
    return 2;
  }
  int n = argc > 3 ? std::atoi(argv[3]) : 50;
  NvmlProbe nvml(argv[1]);
  if (nvml.ok()) time_it("NVML (init once, handles kept)", n * 10, [&] { return nvml.read(); });
  else fmt::print("  NVML: {}\n", nvml.problem());
  time_it(fmt::format("nvidia-smi ({})", argv[2]).c_str(), n, [&] { return probe_gpus(argv[2], 30); });
  // What a tick pays with the background reader: the latest reading, copied.
  BackgroundProbe bg(std::make_unique<NvidiaSmiProbe>(argv[2], 30), 1.0);
  bg.read();
  time_it("a tick's read() of the background reader", n * 10, [&] { return bg.read(); });
  return 0;
}
