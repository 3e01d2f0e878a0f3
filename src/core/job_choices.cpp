// The job ids a command line can take, in the order a shell should offer them.
#include "gpuq/core/job_choices.h"

namespace gpuq {

bool acts_on(std::string_view command, Status st) {
  if (command == "kill") return st == Status::Running;
  if (command == "retry") return st == Status::Failed || st == Status::Blocked || st == Status::Held;
  if (command == "hold") return st == Status::Pending || st == Status::Failed || st == Status::Blocked;
  if (command == "logs") return st == Status::Running || st == Status::Done || st == Status::Failed;
  return false;
}

std::vector<JobChoice> job_choices(const Plan& plan, const State& state, std::string_view command,
                                   std::string_view prefix) {
  std::vector<JobChoice> first, rest;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const std::string& id = plan.jobs[i].id;
    if (id.compare(0, prefix.size(), prefix) != 0) continue;
    Status st = state.status_of(plan, i);
    (acts_on(command, st) ? first : rest).push_back({id, st});
  }
  first.insert(first.end(), rest.begin(), rest.end());
  return first;
}

}  // namespace gpuq
