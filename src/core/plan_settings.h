// The plan loader's reading of "settings" (settings.h), shared by the whole load (plan.cpp)
// and the settings-only one (plan_settings.cpp). Not a public header.
#pragma once

#include <simdjson.h>

#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"

namespace gpuq::plan_read {

/// Reads the plan's "settings" object, when there is one, into plan.settings, and takes a
/// plan-level "workdir" (already in plan.workdir) as the workdir setting. Problems go to
/// `errors` as "FILE: where: problem".
void read_plan_settings(const std::string& file, std::optional<simdjson::dom::element> settings, Plan& plan,
                        std::vector<std::string>& errors);

}  // namespace gpuq::plan_read
