// The job ids a command line can take, in the order a shell should offer them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// Whether `command` (kill, retry, hold, logs) has work to do on a job of status `st`:
/// kill a running job; retry a failed, blocked or held one; hold a pending, failed or
/// blocked one; logs of a job that has run (running, done, failed).
bool acts_on(std::string_view command, Status st);

/// One id to offer, with its status (shells that show descriptions print it).
struct JobChoice {
  std::string id;
  Status status;
};

/// The plan's job ids that start with `prefix`: first those `command` acts on, then the
/// rest, each group in plan order.
std::vector<JobChoice> job_choices(const Plan& plan, const State& state, std::string_view command,
                                   std::string_view prefix);

}  // namespace gpuq
