// The plan file as text: `gpuq add` appends a job to it and keeps the rest byte for byte.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpuq {

/// `text` (a plan: a list of jobs, or an object whose last "jobs" member is one) with
/// `job` (one JSON object) appended to the job list, before its closing bracket, on a
/// line of its own indented as the list's first job when the list is laid out one job a
/// line; every other byte kept. nullopt, with `problem` set, when no job list is found.
std::optional<std::string> append_job_text(std::string_view text, std::string_view job, std::string* problem);

}  // namespace gpuq
