// The table of a job's fields: each row's reader (the loader's checks and words),
// its comparison for the plan diff, and its line of doc/plan-file.md.
#include "gpuq/core/job_fields.h"
#include "gpuq/core/job_words.h"

#include "plan_read.h"

#include "gpuq/core/limits.h"
#include "gpuq/core/suggest.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <limits>

namespace gpuq {

namespace plan_read {

bool env_name(std::string_view k) {
  if (k.empty() || (k[0] >= '0' && k[0] <= '9')) return false;
  for (char c : k)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

std::optional<std::string> value_text(element v) {
  if (v.is_string()) return std::string(std::string_view(v));
  if (json_is_integer(v)) return to_nlohmann(v).dump();
  if (!json_is_number(v)) return std::nullopt;
  return number_text(json_as_double(v));  // the one spelling, which a command's lookup also knows (job_words.h)
}

}  // namespace plan_read

namespace {

using namespace plan_read;

// ---- Shared checks: each adds the loader's error, naming the field, and says whether the value is good.

// A number (`non_negative`: not below 0), or nothing with the error added.
std::optional<double> number(JobReader& r, const JobField& f, element v, bool non_negative) {
  if (json_is_number(v) && !(non_negative && json_as_double(v) < 0)) return json_as_double(v);  // most values
  r.add(fmt::format("\"{}\" {}", f.name, check_number(v, false, non_negative)));
  return std::nullopt;
}

// A number more than 0; `hint` says what leaving the field out does.
std::optional<double> positive(JobReader& r, const JobField& f, element v, std::string_view hint) {
  std::optional<double> x = number(r, f, v, true);
  if (x && *x <= 0) {
    r.add(fmt::format("\"{}\" must be more than 0 (leave it out for {})", f.name, hint));
    return std::nullopt;
  }
  return x;
}

// Each string of a list, to `take`; a list of anything else is an error, as is each item
// that is no string (the others are kept).
template <typename Take>
void strings(JobReader& r, const JobField& f, element v, Take take) {
  if (!v.is_array()) {
    r.add(fmt::format("\"{}\" must be a list of strings, not {} ({})", f.name, type_name(v), show(v)));
    return;
  }
  size_t k = 0;
  for (element item : simdjson::dom::array(v)) {
    if (!item.is_string())
      r.add(fmt::format("{}[{}] must be a string, not {} ({})", f.name, k, type_name(item), show(item)));
    else
      take(std::string_view(item));
    ++k;
  }
}

// ---- The readers, one per field.

// The job's id, indexed by it when it is good and new (a sweep's points are indexed instead).
void read_id(JobReader& r, const JobField& f, const element& v) {
  if (!v.is_string()) {
    r.add(fmt::format("\"{}\" must be a string, not {} ({})", f.name, type_name(v), show(v)));
  } else if (!valid_job_id(std::string_view(v))) {
    r.add(fmt::format("id {} cannot be a file name: use only letters, digits, '.', '_', '-', "
                      "not starting with '.' (it names logs/ID.log)",
                      show(v)));
  } else {
    r.job.id = std::string_view(v);
    if (r.sweep) return;
    Build& b = r.b;
    auto id_of = [&](size_t k) -> const std::string& { return b.plan.jobs[k].id; };
    size_t first = b.plan.index.find_or_insert(r.job.id, r.i, id_of);  // indexed here unless a duplicate
    if (first != IdIndex::npos)
      r.add(fmt::format("duplicate id (job #{} and job #{})", b.position(first), b.position(r.i)));
  }
}

void read_script(JobReader& r, const JobField& f, const element& v) {
  if (!v.is_string())
    r.add(fmt::format("\"{}\" must be a string, not {}", f.name, type_name(v)));
  else if (std::string_view(v).empty())
    r.add(fmt::format("\"{}\" is empty", f.name));
  else
    r.job.script = std::string_view(v);
}

void read_gpus(JobReader& r, const JobField& f, const element& v) {
  if (!json_is_integer(v) || json_as_double(v) < 0)
    r.add(fmt::format("\"{}\" {}", f.name, check_number(v, true, true)));
  else if (v.type() == element_type::UINT64 || int64_t(v) > 64)
    r.add(fmt::format("\"{}\" is {}, more than any node has", f.name, show(v)));
  else
    r.job.gpus = static_cast<int>(int64_t(v));
}

void read_priority(JobReader& r, const JobField& f, const element& v) {
  if (auto x = number(r, f, v, false)) r.job.priority = *x;
}

void read_est_hours(JobReader& r, const JobField& f, const element& v) {
  // Given, even when refused: validate's round on a plan that is not valid then says the value's
  // problem alone, not "has no est_hours" besides.
  r.job.est_given = true;
  if (auto x = number(r, f, v, true)) r.job.est_hours = *x;
}

// Each dep as written; its job is found once every id is known (plan.cpp, link_jobs).
void read_deps(JobReader& r, const JobField& f, const element& v) {
  strings(r, f, v, [&](std::string_view d) { r.job.deps.push_back(parse_dep(d)); });
}

// The producer's id, found once every id is known (plan.cpp, link_jobs).
void read_produced_by(JobReader& r, const JobField& f, const element& v) {
  if (!v.is_string())
    r.add(fmt::format("\"{}\" must be a job id, not {}", f.name, type_name(v)));
  else
    r.b.raw_producer[r.i] = std::string(std::string_view(v));
}

void read_produced_at_frac(JobReader& r, const JobField& f, const element& v) {
  if (auto x = number(r, f, v, true)) r.job.produced_at_frac = *x;
}

void read_first_look_frac(JobReader& r, const JobField& f, const element& v) {
  if (auto x = number(r, f, v, true)) r.job.first_look_frac = *x;
}

void read_time_limit_hours(JobReader& r, const JobField& f, const element& v) {
  if (auto x = positive(r, f, v, "no limit")) r.job.time_limit_hours = *x;
}

void read_warn_signal(JobReader& r, const JobField& f, const element& v) {
  if (!v.is_string()) {
    r.add(fmt::format("\"{}\" must be a string like \"USR1@90\", not {} ({})", f.name, type_name(v), show(v)));
    return;
  }
  auto spec = parse_warn_signal(std::string_view(v));
  if (auto* problem = std::get_if<std::string>(&spec))
    r.add(fmt::format("\"{}\" {}", f.name, *problem));
  else
    r.job.warn_signal = std::get<WarnSpec>(spec);
}

// A true or false field, into the job's member M.
template <auto M>
void read_bool(JobReader& r, const JobField& f, const element& v) {
  if (!v.is_bool())
    r.add(fmt::format("\"{}\" must be true or false, not {} ({})", f.name, type_name(v), show(v)));
  else
    r.job.*M = bool(v);
}

void read_preempt_signal(JobReader& r, const JobField& f, const element& v) {
  if (!v.is_string()) {
    r.add(fmt::format("\"{}\" must be a string like \"USR1\", not {} ({})", f.name, type_name(v), show(v)));
    return;
  }
  auto spec = parse_signal(std::string_view(v));
  if (auto* problem = std::get_if<std::string>(&spec))
    r.add(fmt::format("\"{}\" {}", f.name, *problem));
  else
    r.job.preempt_signal = std::get<SignalSpec>(spec);
}

void read_max_retries(JobReader& r, const JobField& f, const element& v) {
  if (!json_is_integer(v) || json_as_double(v) < 0)
    r.add(fmt::format("\"{}\" {}", f.name, check_number(v, true, true)));
  else if (v.type() == element_type::UINT64 || int64_t(v) > 1000)
    r.add(fmt::format("\"{}\" is {}; at most 1000", f.name, show(v)));
  else
    r.job.max_retries = int64_t(v);
}

void read_gpu_mem_gib(JobReader& r, const JobField& f, const element& v) {
  std::optional<double> x = positive(r, f, v, "whole GPUs");
  if (x && r.job.gpus == 0)
    r.add(fmt::format("\"{}\" is the GiB the job needs on each of its GPUs, but it has \"gpus\": 0", f.name));
  else if (x)
    r.job.gpu_mem_gib = *x;
}

// Cores: a whole number from 1 (a job needs one to run at all).
void read_cpus(JobReader& r, const JobField& f, const element& v) {
  if (!json_is_integer(v) || json_as_double(v) < 0)
    r.add(fmt::format("\"{}\" {}", f.name, check_number(v, true, true)));
  else if (int64_t(v) == 0)
    r.add(fmt::format("\"{}\" must be at least 1 (leave it out for a share of the node's cores)", f.name));
  else if (v.type() == element_type::UINT64 || int64_t(v) > 65535)
    r.add(fmt::format("\"{}\" is {}, more than any node has", f.name, show(v)));
  else
    r.job.cpus = static_cast<uint16_t>(int64_t(v));
}

void read_mem_gib(JobReader& r, const JobField& f, const element& v) {
  std::optional<double> x = positive(r, f, v, "no host memory counted");
  if (x && *x > 1e6)
    r.add(fmt::format("\"{}\" is {}, more GiB than any node has", f.name, show(v)));
  else if (x)
    r.job.mem_gib = std::max(static_cast<float>(*x), std::numeric_limits<float>::min());
}

// {"retries": N, "mem_factor": F, "gpu_mem_factor": F, "env": {"NAME": "half" | "double" | text}}: each key checked,
// a misspelt one named with the nearest.
void read_on_oom(JobReader& r, const JobField& f, const element& v) {
  if (!v.is_object()) {
    r.add(fmt::format("\"{}\" must be an object, e.g. {{\"retries\": 2, \"mem_factor\": 1.5, \"env\": "
                      "{{\"BATCH_SIZE\": \"half\"}}}}, not {} ({})",
                      f.name, type_name(v), show(v)));
    return;
  }
  static const std::vector<std::string_view> keys{"retries", "mem_factor", "gpu_mem_factor", "env"};
  OnOom o;
  bool good = true;
  for (auto [key, value] : simdjson::dom::object(v)) {
    std::string k(key);
    auto bad = [&](const std::string& what) {
      r.add(fmt::format("{}.{} {}", f.name, k, what));
      good = false;
    };
    if (k == "retries") {
      if (!json_is_integer(value) || json_as_double(value) < 1 || json_as_double(value) > 100)
        bad(fmt::format("must be a whole number from 1 to 100, not {}", show(value)));
      else
        o.retries = static_cast<long long>(json_as_double(value));
    } else if (k == "mem_factor" || k == "gpu_mem_factor") {
      if (!json_is_number(value) || json_as_double(value) < 1 || json_as_double(value) > 100)
        bad(fmt::format("must be a number from 1 to 100 (what {} is multiplied by), not {}",
                        k == "mem_factor" ? "mem_gib" : "gpu_mem_gib", show(value)));
      else
        (k == "mem_factor" ? o.mem_factor : o.gpu_mem_factor) = json_as_double(value);
    } else if (k == "env") {
      if (!value.is_object()) {
        bad(fmt::format("must be an object of variables, e.g. {{\"BATCH_SIZE\": \"half\"}}, not {} ({})",
                        type_name(value), show(value)));
        continue;
      }
      for (auto [name, what] : simdjson::dom::object(value)) {
        std::optional<std::string> text = value_text(what);
        if (!env_name(name))
          bad(fmt::format("\"{}\" is not a variable name (letters, digits, '_', not starting with a digit)",
                          std::string(name)));
        else if (!text)
          bad(fmt::format("\"{}\" must be \"half\", \"double\", or a string or number to set, not {} ({})",
                          std::string(name), type_name(what), show(what)));
        else if (static const std::vector<std::string_view> verbs{"half", "double"};
                 what.is_string() && *text != "half" && *text != "double" && nearest_name(*text, verbs))
          // A near miss of a verb ("halve") would set the variable to the typo: refused, named.
          bad(fmt::format("\"{}\": \"{}\" is not one of on_oom's verbs (\"half\", \"double\"){}", std::string(name),
                          *text, did_you_mean(*text, verbs)));
        else
          o.env.emplace_back(std::string(name), *text);
      }
    } else {
      bad(fmt::format("is no key of on_oom (retries, mem_factor, gpu_mem_factor, env){}", did_you_mean(k, keys)));
    }
  }
  if (good) r.job.on_oom = std::move(o);
}

void read_quiet_minutes(JobReader& r, const JobField& f, const element& v) {
  if (auto x = positive(r, f, v, "no watchdog")) r.job.quiet_minutes = *x;
}

void read_on_idle(JobReader& r, const JobField& f, const element& v) {
  std::string_view what = v.is_string() ? std::string_view(v) : std::string_view();
  if (what == "warn") r.job.on_idle = IdleAction::Warn;
  else if (what == "requeue") r.job.on_idle = IdleAction::Requeue;
  else if (what == "kill") r.job.on_idle = IdleAction::Kill;
  else r.add(fmt::format("\"{}\" must be \"warn\", \"requeue\" or \"kill\", not {}", f.name, show(v)));
}

void read_on_quiet(JobReader& r, const JobField& f, const element& v) {
  std::string_view what = v.is_string() ? std::string_view(v) : std::string_view();
  if (what != "warn" && what != "kill")
    r.add(fmt::format("\"{}\" must be \"warn\" or \"kill\", not {}", f.name, show(v)));
  else
    r.job.kill_on_quiet = what == "kill";
}

void read_args(JobReader& r, const JobField& f, const element& v) {
  strings(r, f, v, [&](std::string_view a) { r.job.args.emplace_back(a); });
}

void read_env(JobReader& r, const JobField& f, const element& v) {
  if (!v.is_object()) {
    r.add(fmt::format("\"{}\" must be an object of variables, e.g. {{\"SEED\": \"1\"}}, not {} ({})", f.name,
                      type_name(v), show(v)));
    return;
  }
  for (auto [key, value] : simdjson::dom::object(v)) {
    std::optional<std::string> text = value_text(value);
    if (!env_name(key))
      r.add(fmt::format("{}: \"{}\" is not a variable name (letters, digits, '_', not starting with a digit)", f.name,
                        std::string(key)));
    else if (!text)
      r.add(fmt::format("{} \"{}\" must be a string or a number, not {} ({})", f.name, std::string(key),
                        type_name(value), show(value)));
    else
      r.job.env.emplace_back(std::string(key), *text);
  }
}

// "git" or "off": the job runs from a snapshot of the workdir, or from the workdir itself.
void read_snapshot(JobReader& r, const JobField& f, const element& v) {
  std::string_view what = v.is_string() ? std::string_view(v) : std::string_view();
  if (what != "git" && what != "off")
    r.add(fmt::format("\"{}\" must be \"git\" or \"off\", not {}", f.name, show(v)));
  else
    r.job.snapshot = what == "git";
}

// Kept until the job is whole: plan_jobs.cpp checks it and expands the job into its points.
void read_matrix(JobReader& r, const JobField&, const element& v) { r.matrix = v; }

// ---- The comparisons of the plan diff.

// The member is equal.
template <auto Member>
bool same_as(const Plan&, const Job& a, const Plan&, const Job& b) {
  return a.*Member == b.*Member;
}

// The estimate, and whether the plan gave it (status prints 0.0 otherwise).
bool same_estimate(const Plan&, const Job& a, const Plan&, const Job& b) {
  return a.est_hours == b.est_hours && a.est_given == b.est_given;
}

// The deps as written (their jobs are compared by id, not position).
bool same_deps(const Plan&, const Job& a, const Plan&, const Job& b) {
  if (a.deps.size() != b.deps.size()) return false;
  for (size_t k = 0; k < a.deps.size(); ++k)
    if (a.deps[k].kind != b.deps[k].kind || a.deps[k].target != b.deps[k].target) return false;
  return true;
}

// The producer's id.
bool same_producer(const Plan& pa, const Job& a, const Plan& pb, const Job& b) {
  auto producer = [](const Plan& p, const Job& j) { return j.produced_by ? p.jobs[*j.produced_by].id : ""; };
  return producer(pa, a) == producer(pb, b);
}

// The warning as the plan would write it ("USR1@90" and "SIGUSR1@90" are the same).
bool same_warning(const Plan&, const Job& a, const Plan&, const Job& b) {
  auto text = [](const std::optional<WarnSpec>& w) { return w ? w->text() : ""; };
  return text(a.warn_signal) == text(b.warn_signal);
}

bool same_preempt_signal(const Plan&, const Job& a, const Plan&, const Job& b) {
  return a.preempt_signal.name == b.preempt_signal.name && a.preempt_signal.number == b.preempt_signal.number &&
         a.preempt_signal.shell_only == b.preempt_signal.shell_only;
}

using P = Presence;

// The table. Its order is the order the loader reads the fields in (and so orders a job's
// messages), and the order the suggestions break ties in. The last three columns are the
// doc/plan-file.md's, word for word (tests/job_fields_test.cpp compares them).
constexpr JobField kJobFields[] = {
    {"id", P::Required, read_id, same_as<&Job::id>, "string", "(required)",
     "letters, digits, `.`, `_`, `-`, `=`; not starting with `.` (it names `logs/ID.log`)"},
    {"script", P::Required, read_script, same_as<&Job::script>, "string", "(required)",
     "run with bash; `~` and `$VARS` expanded"},
    {"gpus", P::Optional, read_gpus, same_as<&Job::gpus>, "whole number ≥ 0", "1", "GPUs the job needs"},
    {"priority", P::Optional, read_priority, same_as<&Job::priority>, "number", "50",
     "lower runs first; ties go to the job earlier in the plan"},
    {"est_hours", P::Optional, read_est_hours, same_estimate, "number ≥ 0", "1.0",
     "estimated duration, for `simulate` and the backfill rule"},
    {"deps", P::Optional, read_deps, same_deps, "list of strings", "`[]`",
     "`ID` (that job done), `after:ID` (that job finished, any outcome), `file:PATH` (the path exists)"},
    {"produced_by", P::Nullable, read_produced_by, same_producer, "job id", "none",
     "simulate: the job whose run creates this job's `file:` deps"},
    {"produced_at_frac", P::Optional, read_produced_at_frac, same_as<&Job::produced_at_frac>, "number ≥ 0", "1.0",
     "simulate: how far into `produced_by`'s run the file appears"},
    {"first_look_frac", P::Nullable, read_first_look_frac, same_as<&Job::first_look_frac>, "number ≥ 0", "none",
     "simulate: fraction of the run at which a first look is possible"},
    {"time_limit_hours", P::Nullable, read_time_limit_hours, same_as<&Job::time_limit_hours>, "number > 0", "none",
     "gpuq's own: `run` stops the job this long after its start (see Time limits under `run`)"},
    {"warn_signal", P::Nullable, read_warn_signal, same_warning, "string `[B:]SIGNAL@SECONDS`", "none",
     "gpuq's own: e.g. `\"USR1@90\"`, sent to every process of the job that many seconds before its limit; "
     "`\"B:USR1@90\"` (Slurm's form) to the script's bash only"},
    {"retry_on_timeout", P::Nullable, read_bool<&Job::retry_on_timeout>, same_as<&Job::retry_on_timeout>, "true or false",
     "false", "gpuq's own: retry a timed-out (or hung and stopped) job automatically"},
    {"max_retries", P::Nullable, read_max_retries, same_as<&Job::max_retries>, "whole number ≥ 0",
     "none (`--max-retries`)", "gpuq's own: this job's automatic retries after a failure (0: none)"},
    {"gpu_mem_gib", P::Nullable, read_gpu_mem_gib, same_as<&Job::gpu_mem_gib>, "number > 0",
     "none (whole GPUs)",
     "gpuq's own: GiB the job needs on each of its GPUs; jobs that give it share GPUs while their needs fit "
     "(see Several jobs on one GPU)"},
    {"cpus", P::Nullable, read_cpus, same_as<&Job::cpus>, "whole number ≥ 1",
     "none (a share of the node's cores)",
     "gpuq's own: cores the job needs; a job starts where they are free, pinned to them, with `OMP_NUM_THREADS` "
     "and the like set to it (see CPU cores and host memory)"},
    {"mem_gib", P::Nullable, read_mem_gib, same_as<&Job::mem_gib>, "number > 0", "none (not counted)",
     "gpuq's own: GiB of host memory the job needs; a job starts where they are free, and `run` stops it past them "
     "(see CPU cores and host memory)"},
    {"on_oom", P::Nullable, read_on_oom, same_as<&Job::on_oom>, "object", "none",
     "gpuq's own: after an out-of-memory (`over memory`, `oom (GPU)`, `oom (host)`), run the job again at once with "
     "more memory or a changed environment, e.g. `{\"retries\": 2, \"gpu_mem_factor\": 1.5, \"env\": "
     "{\"BATCH_SIZE\": \"half\"}}` (see Host memory enforced, and out of memory told apart)"},
    {"quiet_minutes", P::Nullable, read_quiet_minutes, same_as<&Job::quiet_minutes>, "number > 0",
     "none (`--quiet-minutes`)",
     "gpuq's own: the hang watchdog: log silent and GPUs idle this long marks the job `hung?` (see the hang "
     "watchdog under `run`)"},
    {"progress_from_log", P::Nullable, read_bool<&Job::progress_from_log>, same_as<&Job::progress_from_log>, "true or false",
     "none (`--progress-from-log`)",
     "gpuq's own: `false`: `run` does not look for a progress bar in the job's log (its `GPUQ_PROGRESS` file still "
     "counts; see Progress under `run`)"},
    {"on_quiet", P::Nullable, read_on_quiet, same_as<&Job::kill_on_quiet>, "`\"warn\"` or `\"kill\"`", "`\"warn\"`",
     "gpuq's own: what `run` does with a hung job: say so once, or stop it as at its time limit"},
    {"on_idle", P::Nullable, read_on_idle, same_as<&Job::on_idle>, "`\"warn\"`, `\"requeue\"` or `\"kill\"`",
     "none (`--on-idle`)",
     "gpuq's own: what `run` does when the job is idle (its GPUs idle, or holding none of its processes, for "
     "`idle_minutes`): say so once, stop it and run it again later, or stop it as failed (see GPU health)"},
    {"idle_ok", P::Nullable, read_bool<&Job::idle_ok>, same_as<&Job::idle_ok>, "true or false", "false",
     "gpuq's own: the job has phases that leave its GPUs idle (CPU-bound work it knows it has): never flagged idle"},
    {"preemptible", P::Nullable, read_bool<&Job::preemptible>, same_as<&Job::preemptible>, "true or false",
     "none (the `preemptible` setting)",
     "gpuq's own: gpuq may stop the job to give its GPUs to more urgent work, and runs it again (see Preemption)"},
    {"preempt_signal", P::Nullable, read_preempt_signal, same_preempt_signal, "string `[B:]SIGNAL`", "none (SIGTERM)",
     "gpuq's own: the signal a preemption sends, e.g. `\"USR1\"`; `\"B:USR1\"` to the script's bash only"},
    {"args", P::Nullable, read_args, same_as<&Job::args>, "list of strings", "`[]`",
     "passed to the script after its path (`\"script\": \"sweep.sh --lr 1e-4\"` names a file that does not "
     "exist; write `\"script\": \"sweep.sh\", \"args\": [\"--lr\", \"1e-4\"]`)"},
    {"env", P::Nullable, read_env, same_as<&Job::env>, "object of strings or numbers", "`{}`",
     "variables set in the job's environment"},
    {"snapshot", P::Nullable, read_snapshot, same_as<&Job::snapshot>, "`\"git\"` or `\"off\"`",
     "none (the `snapshot` setting)",
     "gpuq's own: `\"git\"` runs the job from a read-only checkout of a git snapshot of the workdir taken when "
     "the job is loaded (see Snapshots)"},
    {"matrix", P::Nullable, read_matrix, nullptr, "object of lists", "none",
     "a sweep: the job becomes one job per point of the lists' product (below)"},
};
static_assert(std::size(kJobFields) <= kMaxJobFields);

// Names other schedulers use for gpuq's fields: each is an error naming the field
// (job_fields.h). Only names that mean the field: a note a plan may carry ("name",
// "description", "owner") stays a warning.
constexpr JobFieldAlias kJobFieldAliases[] = {
    {"depends_on", "deps"},     {"depends", "deps"},          {"dependencies", "deps"},
    {"dependency", "deps"},     {"depend", "deps"},           {"needs", "deps"},
    {"after", "deps"},          {"afterok", "deps"},          {"requires", "deps"},
    {"num_gpus", "gpus"},       {"n_gpus", "gpus"},           {"ngpus", "gpus"},
    {"nb_gpus", "gpus"},        {"gpu", "gpus"},              {"gpu_count", "gpus"},
    {"gpus_per_node", "gpus"},  {"gpus_per_task", "gpus"},    {"gres", "gpus"},
    {"time_limit", "time_limit_hours"}, {"timelimit", "time_limit_hours"}, {"walltime", "time_limit_hours"},
    {"wall_time", "time_limit_hours"},  {"timeout", "time_limit_hours"},   {"max_time", "time_limit_hours"},
    {"max_hours", "time_limit_hours"}, {"time_limit_minutes", "time_limit_hours"},
    {"command", "script"},      {"cmd", "script"},            {"commands", "script"},
    {"exec", "script"},         {"executable", "script"},
    {"env_vars", "env"},        {"environment", "env"},       {"environment_variables", "env"},
    {"envs", "env"},            {"arguments", "args"},
    {"argv", "args"},           {"nice", "priority"},         {"prio", "priority"},
    {"estimate", "est_hours"},  {"est_time", "est_hours"},    {"estimated_hours", "est_hours"},
    {"retries", "max_retries"}, {"max_retry", "max_retries"}, {"retry", "max_retries"},
    {"job_id", "id"},
    {"gpu_mem", "gpu_mem_gib"}, {"gpu_memory", "gpu_mem_gib"}, {"gpu_mem_gb", "gpu_mem_gib"},
    {"vram", "gpu_mem_gib"},    {"vram_gb", "gpu_mem_gib"},
    {"cpus_per_task", "cpus"},  {"cpus_per_gpu", "cpus"},     {"ncpus", "cpus"},
    {"num_cpus", "cpus"},       {"n_cpus", "cpus"},           {"cpu", "cpus"},
    {"cores", "cpus"},          {"num_cores", "cpus"},        {"ncores", "cpus"},
    {"threads", "cpus"},        {"num_threads", "cpus"},      {"cpu_count", "cpus"},
    {"mem", "mem_gib"},         {"memory", "mem_gib"},        {"mem_gb", "mem_gib"},
    {"mem_mb", "mem_gib"},      {"memory_gb", "mem_gib"},     {"ram", "mem_gib"},
    {"ram_gb", "mem_gib"},      {"ram_gib", "mem_gib"},       {"mem_per_gpu", "mem_gib"},
    {"mem_per_cpu", "mem_gib"}, {"host_mem", "mem_gib"},      {"host_mem_gib", "mem_gib"},
};

// The names, for the suggestions (plan.h's kJobFieldNames).
std::vector<std::string_view> names() {
  std::vector<std::string_view> out;
  for (const JobField& f : kJobFields) out.push_back(f.name);
  return out;
}

}  // namespace

std::span<const JobField> job_fields() { return kJobFields; }

const JobField* find_job_field(std::string_view name) {
  for (const JobField& f : kJobFields)
    if (f.name == name) return &f;
  return nullptr;
}

std::span<const JobFieldAlias> job_field_aliases() { return kJobFieldAliases; }

const JobFieldAlias* find_job_field_alias(std::string_view name) {
  if (name.size() > 40) return nullptr;
  std::string key;
  for (char c : name) key += c == '-' || c == ' ' ? '_' : static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (const JobFieldAlias& a : kJobFieldAliases)
    if (a.name == key) return &a;
  return nullptr;
}

const std::vector<std::string_view> kJobFieldNames = names();

namespace {

// A word as JSON: a number, true or false where it reads as one, else a string.
std::string json_word(const std::string& w) {
  nlohmann::json v = nlohmann::json::parse(w, nullptr, false);
  if (!v.is_discarded() && (v.is_number() || v.is_boolean())) return v.dump();
  return nlohmann::json(w).dump();
}

}  // namespace

std::optional<std::string> job_field_json(const JobField& field, const std::vector<std::string>& words,
                                          std::string* problem) {
  auto str = [](const std::string& w) { return nlohmann::json(w).dump(); };
  std::string_view type = field.type;
  if (type.starts_with("list")) {
    std::string out = "[";
    for (size_t k = 0; k < words.size(); ++k) out += (k ? ", " : "") + str(words[k]);
    return out + "]";
  }
  if (type.starts_with("object")) {
    bool lists = type == "object of lists";
    std::string out = "{";
    for (size_t k = 0; k < words.size(); ++k) {
      size_t eq = words[k].find('=');
      if (eq == std::string::npos || eq == 0) {
        *problem = fmt::format("--{} takes KEY=VALUE{}, not \"{}\"", dashed_name(field.name),
                               lists ? ",VALUE..." : "", words[k]);
        return std::nullopt;
      }
      std::string key = words[k].substr(0, eq), value = words[k].substr(eq + 1);
      for (size_t before = 0; before < k; ++before)
        if (words[before].substr(0, words[before].find('=')) == key) {
          *problem = fmt::format("--{} gives {} twice (\"{}\" and \"{}\"); give each key once", dashed_name(field.name),
                                 key, words[before], words[k]);
          return std::nullopt;
        }
      out += (k ? ", " : "") + str(key) + ": ";
      if (!lists) {
        out += str(value);
        continue;
      }
      out += "[";
      for (size_t at = 0, n = 0;; ++n) {
        size_t comma = value.find(',', at);
        out += (n ? ", " : "") + json_word(value.substr(at, comma == std::string::npos ? comma : comma - at));
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      out += "]";
    }
    return out + "}";
  }
  const std::string& w = words.empty() ? std::string() : words.back();  // a flag given twice: the last
  bool literal = type.starts_with("number") || type.starts_with("whole number") || type == "true or false";
  return literal ? json_word(w) : str(w);
}

std::string dashed_name(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

}  // namespace gpuq
