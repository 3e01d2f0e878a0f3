// The plan loader's inner parts, shared by plan.cpp (the top level, links, reservations,
// cycles), plan_jobs.cpp (one job: the walk over its fields, its matrix and sweep) and
// job_fields.cpp (each field's reader). Not a public header.
#pragma once

#include "gpuq/core/json_error.h"
#include "gpuq/core/json_read.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/suggest.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuq::plan_read {

using simdjson::dom::element;
using simdjson::dom::element_type;

// A dep as written ("ID", "after:ID", "file:PATH"); its job is found once every id is known.
Dep parse_dep(std::string_view d);

// The dep as the plan wrote it.
std::string dep_text(const Dep& d);

std::string type_name(element v);

// A value as messages quote it: nlohmann/json's compact form, cut at 40 characters.
std::string show(element v);

// Returns the problem with a numeric field, or "".
std::string check_number(element v, bool integer, bool non_negative);

// The last member named `name` of an object (a repeated name keeps its last value, as
// Python's json and nlohmann/json keep it), or nothing.
std::optional<element> member(simdjson::dom::object o, std::string_view name);

// A plan being read: what parse_plan has so far.
struct Build {
  const std::string& file;
  const std::vector<int>& node_gpus;
  PlanLoad& out;
  Plan plan;
  // produced_by kept until every id is known (deps keep their target, and find their job then too).
  std::vector<std::optional<std::string>> raw_producer;
  // Fields gpuq does not read and that are no typo of one: name -> (jobs, first few ids).
  struct Note {
    size_t jobs = 0;
    std::string some;
  };
  std::map<std::string, Note, std::less<>> notes = {};

  void add(const std::string& where, const std::string& what) {
    out.errors.push_back(fmt::format("{}: {}: {}", file, where, what));
  }
  // `; did you mean "ID"?` for an id no job has (the first 20 such ids: each looks at every job).
  size_t suggested = 0;
  std::string suggest_id(std::string_view id) {
    if (suggested++ >= 20) return "";
    std::vector<std::string_view> ids;
    ids.reserve(plan.jobs.size());
    for (const Job& j : plan.jobs)
      if (!j.id.empty()) ids.push_back(j.id);
    return did_you_mean(id, ids);
  }
  // Where job i (an index into plan.jobs) stands in the file, from 1: a sweep's points share
  // the position of the one job that wrote them, and the jobs after it count it once.
  size_t position(size_t i) const {
    size_t extra = 0;
    for (const Sweep& sw : plan.sweeps) {
      if (sw.first > i) break;
      if (i < sw.first + sw.count) return sw.first - extra + 1;
      extra += sw.count - 1;
    }
    return i - extra + 1;
  }
  // How messages name job i: by id once it has a good one, else by position.
  std::string where(size_t i) const {
    return plan.jobs.size() > i && !plan.jobs[i].id.empty() ? fmt::format("job '{}'", plan.jobs[i].id)
                                                           : fmt::format("job #{}", position(i));
  }
};

// One job being read: the plan it joins, the job, and where it stands. The readers of
// the job's fields (job_fields.h) fill it.
struct JobReader {
  Build& b;
  Job& job;
  size_t i;            // the job's position in plan.jobs
  bool sweep = false;  // it has a "matrix": its points are indexed by id, not the job itself
  std::optional<element> matrix = {};  // the "matrix" given, expanded once the job is whole

  // How messages name the job: by id once it has a good one, else by position. Formatted
  // only when there is something to say: most jobs have nothing.
  std::string where() const {
    return job.id.empty() ? fmt::format("job #{}", b.position(i)) : fmt::format("job '{}'", job.id);
  }
  // Adds a problem of the job.
  void add(const std::string& what) { b.add(where(), what); }
};

// A variable name of the environment: a letter or '_', then letters, digits, '_'.
bool env_name(std::string_view k);

// A value of "env" or "matrix" as text: a string as written; a number in its shortest
// form, with a short exponent (1e-4, not 0.0001 or 1e-04); nothing for other types.
std::optional<std::string> value_text(element v);

// Every job of a "jobs" list, checked and added to the plan (plan_jobs.cpp).
void read_jobs(Build& b, simdjson::dom::array jobs);

}  // namespace gpuq::plan_read
