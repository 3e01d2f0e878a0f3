// What an edit of the plan changed, job by job: what `run` says when it reloads the plan.
#pragma once

#include <string>
#include <vector>

#include "gpuq/core/plan.h"

namespace gpuq {

/// The jobs an edit added, removed and changed (ids; added and changed in the new plan's
/// order, removed in the old one's), and whether the plan's reservations or workdir changed.
struct PlanChange {
  std::vector<std::string> added, removed, changed;
  bool reservations = false;
  bool workdir = false;
  bool empty() const { return added.empty() && removed.empty() && changed.empty() && !reservations && !workdir; }
};

/// True when job `a` of `pa` and job `b` of `pb` are the same definition: every field the
/// plan gives, each compared as its row of job_fields() says (deps and produced_by by the
/// ids they name, not by position).
bool same_job(const Plan& pa, const Job& a, const Plan& pb, const Job& b);

/// What changed from `before` to `after`.
PlanChange diff_plans(const Plan& before, const Plan& after);

/// "+2 jobs (eval_c, eval_d), 1 removed (sweep_9), 3 changed (a, b, c)", or "no job
/// changed" (up to 5 ids each, then "and N more").
std::string change_text(const PlanChange& c);

}  // namespace gpuq
