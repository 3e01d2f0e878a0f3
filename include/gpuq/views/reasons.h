// The engine's reasons (engine.h's Why, as data) in words: why a job waits (`status`), and
// why a prediction never starts one (`simulate`, `status`).
#pragma once

#ifdef GPUQ_CORE
#error "the core does not include views: it returns data, views print it"
#endif

#include <string>

#include "gpuq/core/outlook.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"
#include "gpuq/core/validate.h"

namespace gpuq {

/// Why job `v` of the outlook waits, as `status` says it ("" when it does not wait).
std::string why_text(const Plan& plan, const State& state, const Outlook& o, const JobView& v);
/// why_text without what the prediction says of preemptions.
std::string why_text_of(const Plan& plan, const State& state, const Outlook& o, const JobView& v);

/// A finding of `validate` in words: its text, or for a job that can never start, why (and the fix).
std::string finding_text(const Plan& plan, const Policy& p, const Finding& f);

}  // namespace gpuq
