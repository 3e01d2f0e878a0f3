// The fields of a plan's job, declared once: one row per field, with how the plan
// loader reads it, how an edit of the plan compares it, and what doc/plan-file.md says of
// it. The loader, its "did you mean" suggestions, the plan diff and doc/plan-file.md's
// field tables (checked by tests/job_fields_test.cpp) all walk this table.
//
// Adding a field to a job: a member of `Job` (plan.h), a row in src/core/job_fields.cpp
// with the function that reads it, and the row's line in doc/plan-file.md's table.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>
#include <span>
#include <string_view>

#include "gpuq/core/plan.h"

namespace simdjson::dom {
class element;
}

namespace gpuq {

namespace plan_read {
struct JobReader;  // one job being read by the plan loader (src/core/plan_read.h)
}

/// Whether a job must give a field, and what null means in it.
enum class Presence {
  Required,  ///< a job without it is refused (`has no "NAME"`); null is a wrong value
  Optional,  ///< may be left out (the default holds); null is a wrong value
  Nullable,  ///< may be left out or null, which is the same
};

/// One field of a job, as the plan spells it.
struct JobField {
  std::string_view name;  ///< as the plan spells it
  Presence presence;
  /// Reads the field's value (given, and not null where null is absent) into the job
  /// being read, or adds the loader's error, worded with the row's name.
  void (*read)(plan_read::JobReader& job, const JobField& self, const simdjson::dom::element& value);
  /// True when the field is the same in job `a` of plan `pa` and job `b` of plan `pb`
  /// (ids stand for positions). Null for a field that is not compared by itself:
  /// "matrix", whose points are compared as jobs.
  bool (*same)(const Plan& pa, const Job& a, const Plan& pb, const Job& b);
  // The README's columns for it, as written there (Markdown):
  std::string_view type;           ///< "number ≥ 0"
  std::string_view default_value;  ///< "1.0", "none", "(required)"
  std::string_view doc;            ///< one line: what it means
};

/// Every field of a job, in the order the loader reads them (which orders its
/// messages) and the suggestions break ties in.
std::span<const JobField> job_fields();

/// The row named `name`, or null.
const JobField* find_job_field(std::string_view name);

/// A name another scheduler (Slurm, SGE, CI files, task runners) gives one of gpuq's fields.
/// A job that spells a field so is refused, with "did you mean FIELD": gpuq would otherwise
/// ignore it, and `"depends_on": ["a"]` would start the job beside `a`.
struct JobFieldAlias {
  std::string_view name;   ///< as other schedulers spell it, lower case, `_` between words
  std::string_view field;  ///< gpuq's field (a row of job_fields())
};

/// Every alias, beside the table of fields (src/core/job_fields.cpp).
std::span<const JobFieldAlias> job_field_aliases();

/// The alias `name` is, or null: compared without case, `-` and ` ` taken for `_`
/// ("Depends-On" is "depends_on"). A field's own name is never an alias.
const JobFieldAlias* find_job_field_alias(std::string_view name);

/// The value of `field` as `gpuq add --FIELD WORD ...` gives it, as JSON text for the plan: a
/// list field takes each word as a string; "env" takes KEY=VALUE words, "matrix" KEY=V1,V2,...
/// (each value a number or true/false where it reads as one, else a string); the other fields
/// take one word, a number or true/false where the field's type is one and the word reads as
/// one, else a string (the loader then says what is wrong with it, as it says it of a plan).
/// Nullopt, with `problem`, for a word an object field cannot take (no `=`).
std::optional<std::string> job_field_json(const JobField& field, const std::vector<std::string>& words,
                                          std::string* problem);

/// A field's name as a flag spells it: "gpu_mem_gib" -> "gpu-mem-gib".
std::string dashed_name(std::string_view name);

/// The most rows the table may have (the loader keeps a job's values in arrays of it).
inline constexpr size_t kMaxJobFields = 64;

}  // namespace gpuq
