// Phase timings for the benchmarks: with GPUQ_PHASES=1 in the environment,
// each phase("name") prints to stderr the milliseconds since the previous one;
// with GPUQ_PHASES=/a/file, appends them to that file instead (`gpuq top` owns
// the terminal's stderr). Without it, a phase costs one test of a flag.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace gpuq {

inline void phase(const char* name) {
  using clock = std::chrono::steady_clock;
  static const char* const to = std::getenv("GPUQ_PHASES");
  static std::FILE* const out = !to ? nullptr : to[0] == '/' ? std::fopen(to, "a") : stderr;
  static clock::time_point last = clock::now();
  if (!out) return;
  clock::time_point now = clock::now();
  std::fprintf(out, "gpuq phase %-16s %8.1f ms\n", name, std::chrono::duration<double, std::milli>(now - last).count());
  std::fflush(out);
  last = now;
}

}  // namespace gpuq
