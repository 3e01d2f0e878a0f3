// The live queue's options. The rules are in rules.h, `run`'s loop in
// run_loop.h, the control commands and refresh in control.h.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpuq/control.h"
#include "gpuq/plan.h"
#include "gpuq/rules.h"
#include "gpuq/schedule.h"
#include "gpuq/state.h"
#include "gpuq/store.h"

namespace gpuq {

/// `run`'s flags, with the original's defaults (the rules' among them).
struct RunOptions : Policy {
  double poll = 20;
  long long max_used_mib = 1024;
  double kill_grace = 30;
  std::string nvidia_smi = "nvidia-smi";
  double nvidia_smi_timeout = 30;
};

}  // namespace gpuq
