// One job of a plan: its fields checked, its matrix expanded into the sweep's points.
#include "plan_read.h"

#include "gpuq/core/limits.h"

#include <algorithm>
#include <charconv>

namespace gpuq::plan_read {

namespace {

// The members of a job that gpuq reads, each the last of its name. Others are kept aside
// (`unknown`): a near miss of a known name is an error, the rest notes the plan may carry.
struct JobFields {
  enum Name { kId, kScript, kGpus, kPriority, kEstHours, kDeps, kProducedBy, kProducedAt, kFirstLook,
              kTimeLimit, kWarnSignal, kRetryOnTimeout, kQuietMinutes, kOnQuiet, kArgs, kEnv, kMatrix, kCount };
  element at[kCount];
  bool given[kCount] = {};
  std::vector<std::string_view> unknown;

  explicit JobFields(simdjson::dom::object job) {
    for (auto [key, value] : job) {
      int n = key == "id" ? kId : key == "script" ? kScript : key == "gpus" ? kGpus : key == "priority" ? kPriority
            : key == "est_hours" ? kEstHours : key == "deps" ? kDeps : key == "produced_by" ? kProducedBy
            : key == "produced_at_frac" ? kProducedAt : key == "first_look_frac" ? kFirstLook
            : key == "time_limit_hours" ? kTimeLimit : key == "warn_signal" ? kWarnSignal
            : key == "retry_on_timeout" ? kRetryOnTimeout : key == "quiet_minutes" ? kQuietMinutes
            : key == "on_quiet" ? kOnQuiet : key == "args" ? kArgs : key == "env" ? kEnv
            : key == "matrix" ? kMatrix : kCount;
      if (n == kCount) {
        unknown.push_back(key);
        continue;
      }
      at[n] = value;
      given[n] = true;
    }
  }
  const element* find(Name n) const { return given[n] ? &at[n] : nullptr; }
  // Present and not null (for the fields where null means absent).
  const element* find_set(Name n) const { return given[n] && !at[n].is_null() ? &at[n] : nullptr; }
};


// The job's id, indexed at position i when it is good and new (a sweep's id is not a job's: its
// points are indexed instead, `index` false).
void read_id(Build& b, const JobFields& f, Job& job, size_t i, bool index = true) {
  const element* id = f.find(JobFields::kId);
  if (!id) {
    b.add(b.where(i), "has no \"id\"");
  } else if (!id->is_string()) {
    b.add(b.where(i), fmt::format("\"id\" must be a string, not {} ({})", type_name(*id), show(*id)));
  } else if (!valid_job_id(std::string_view(*id))) {
    b.add(b.where(i), fmt::format("id {} cannot be a file name: use only letters, digits, '.', '_', '-', "
                                  "not starting with '.' (it names logs/ID.log)",
                                  show(*id)));
  } else {
    job.id = std::string_view(*id);
    if (!index) return;
    auto id_of = [&](size_t k) -> const std::string& { return b.plan.jobs[k].id; };
    size_t first = b.plan.index.find_or_insert(job.id, i, id_of);  // indexed here unless a duplicate
    if (first != IdIndex::npos)
      b.add(fmt::format("job '{}'", job.id), fmt::format("duplicate id (job #{} and job #{})", b.position(first), b.position(i)));
  }
}

// The numbers of a job before its deps; `w` names it.
template <typename Where>
void read_numbers(Build& b, const JobFields& f, Job& job, const Where& w) {
  if (const element* v = f.find(JobFields::kGpus)) {
    if (auto p = check_number(*v, true, true); !p.empty())
      b.add(w(), "\"gpus\" " + p);
    else if (v->type() == element_type::UINT64 || int64_t(*v) > 64)
      b.add(w(), fmt::format("\"gpus\" is {}, more than any node has", show(*v)));
    else
      job.gpus = static_cast<int>(int64_t(*v));
  }
  if (const element* v = f.find(JobFields::kPriority)) {
    if (auto p = check_number(*v, false, false); !p.empty())
      b.add(w(), "\"priority\" " + p);
    else
      job.priority = json_as_double(*v);
  }
  if (const element* v = f.find(JobFields::kEstHours)) {
    if (auto p = check_number(*v, false, true); !p.empty()) {
      b.add(w(), "\"est_hours\" " + p);
    } else {
      job.est_hours = json_as_double(*v);
      job.est_given = true;
    }
  }
}

// The numbers of a job after its deps.
template <typename Where>
void read_fractions(Build& b, const JobFields& f, Job& job, const Where& w) {
  if (const element* v = f.find(JobFields::kProducedAt)) {
    if (auto p = check_number(*v, false, true); !p.empty())
      b.add(w(), "\"produced_at_frac\" " + p);
    else
      job.produced_at_frac = json_as_double(*v);
  }
  if (const element* v = f.find_set(JobFields::kFirstLook)) {
    if (auto p = check_number(*v, false, true); !p.empty())
      b.add(w(), "\"first_look_frac\" " + p);
    else
      job.first_look_frac = json_as_double(*v);
  }
}

// The time limit fields (limits.h); null is absent.
template <typename Where>
void read_limits(Build& b, const JobFields& f, Job& job, const Where& w) {
  if (const element* v = f.find_set(JobFields::kTimeLimit)) {
    if (auto p = check_number(*v, false, true); !p.empty())
      b.add(w(), "\"time_limit_hours\" " + p);
    else if (json_as_double(*v) <= 0)
      b.add(w(), "\"time_limit_hours\" must be more than 0 (leave it out for no limit)");
    else
      job.time_limit_hours = json_as_double(*v);
  }
  if (const element* v = f.find_set(JobFields::kWarnSignal)) {
    if (!v->is_string()) {
      b.add(w(), fmt::format("\"warn_signal\" must be a string like \"USR1@90\", not {} ({})", type_name(*v),
                             show(*v)));
    } else {
      auto spec = parse_warn_signal(std::string_view(*v));
      if (auto* problem = std::get_if<std::string>(&spec))
        b.add(w(), "\"warn_signal\" " + *problem);
      else
        job.warn_signal = std::get<WarnSpec>(spec);
    }
  }
  if (const element* v = f.find_set(JobFields::kRetryOnTimeout)) {
    if (!v->is_bool())
      b.add(w(), fmt::format("\"retry_on_timeout\" must be true or false, not {} ({})", type_name(*v), show(*v)));
    else
      job.retry_on_timeout = bool(*v);
  }
  if (const element* v = f.find_set(JobFields::kQuietMinutes)) {
    if (auto p = check_number(*v, false, true); !p.empty())
      b.add(w(), "\"quiet_minutes\" " + p);
    else if (json_as_double(*v) <= 0)
      b.add(w(), "\"quiet_minutes\" must be more than 0 (leave it out for no watchdog)");
    else
      job.quiet_minutes = json_as_double(*v);
  }
  if (const element* v = f.find_set(JobFields::kOnQuiet)) {
    std::string_view what = v->is_string() ? std::string_view(*v) : std::string_view();
    if (what != "warn" && what != "kill")
      b.add(w(), fmt::format("\"on_quiet\" must be \"warn\" or \"kill\", not {}", show(*v)));
    else
      job.kill_on_quiet = what == "kill";
  }
}

// A variable name of the environment: a letter or '_', then letters, digits, '_'.
bool env_name(std::string_view k) {
  if (k.empty() || (k[0] >= '0' && k[0] <= '9')) return false;
  for (char c : k)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// A value of "env" or "matrix" as text: a string as written; a number in its shortest
// form, with a short exponent (1e-4, not 0.0001 or 1e-04); nothing for other types.
std::optional<std::string> value_text(element v) {
  if (v.is_string()) return std::string(std::string_view(v));
  if (json_is_integer(v)) return to_nlohmann(v).dump();
  if (!json_is_number(v)) return std::nullopt;
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, json_as_double(v));
  std::string t(buf, ec == std::errc() ? end : buf);
  if (auto e = t.find('e'); e != std::string::npos) {
    std::string mant = t.substr(0, e), exp = t.substr(e + 1);
    bool neg = !exp.empty() && exp[0] == '-';
    if (!exp.empty() && (exp[0] == '-' || exp[0] == '+')) exp.erase(0, 1);
    while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
    t = mant + "e" + (neg ? "-" : "") + exp;
  }
  return t;
}

// "args" and "env".
template <typename Where>
void read_args_env(Build& b, const JobFields& f, Job& job, const Where& w) {
  if (const element* v = f.find_set(JobFields::kArgs)) {
    if (!v->is_array()) {
      b.add(w(), fmt::format("\"args\" must be a list of strings, not {} ({})", type_name(*v), show(*v)));
    } else {
      size_t k = 0;
      for (element a : simdjson::dom::array(*v)) {
        if (!a.is_string())
          b.add(w(), fmt::format("args[{}] must be a string, not {} ({})", k, type_name(a), show(a)));
        else
          job.args.emplace_back(std::string_view(a));
        ++k;
      }
    }
  }
  if (const element* v = f.find_set(JobFields::kEnv)) {
    if (!v->is_object()) {
      b.add(w(), fmt::format("\"env\" must be an object of variables, e.g. {{\"SEED\": \"1\"}}, not {} ({})",
                             type_name(*v), show(*v)));
    } else {
      for (auto [key, value] : simdjson::dom::object(*v)) {
        std::optional<std::string> text = value_text(value);
        if (!env_name(key))
          b.add(w(), fmt::format("env: \"{}\" is not a variable name (letters, digits, '_', not starting with a digit)",
                                 std::string(key)));
        else if (!text)
          b.add(w(), fmt::format("env \"{}\" must be a string or a number, not {} ({})", std::string(key),
                                 type_name(value), show(value)));
        else
          job.env.emplace_back(std::string(key), *text);
      }
    }
  }
}

// A job's "matrix": its keys and each key's values as text, or nullopt (with the problem added).
using Matrix = std::vector<std::pair<std::string, std::vector<std::string>>>;
template <typename Where>
std::optional<Matrix> read_matrix(Build& b, element v, const Where& w) {
  constexpr size_t kMaxPoints = 10000;
  const char* example = "e.g. {\"lr\": [1e-4, 3e-4], \"wd\": [0, 0.1]}";
  if (!v.is_object()) {
    b.add(w(), fmt::format("\"matrix\" must be an object of lists, {}, not {} ({})", example, type_name(v), show(v)));
    return std::nullopt;
  }
  Matrix m;
  size_t points = 1;
  bool ok = true;
  for (auto [key, values] : simdjson::dom::object(v)) {
    std::string k(key);
    if (!env_name(k)) {
      b.add(w(), fmt::format("matrix key \"{}\" must be a variable name (letters, digits, '_', not starting with a "
                             "digit): each point gets it in its environment",
                             k));
      ok = false;
      continue;
    }
    if (!values.is_array() || simdjson::dom::array(values).size() == 0) {
      b.add(w(), fmt::format("matrix \"{}\" must be a non-empty list of values, not {}", k, show(values)));
      ok = false;
      continue;
    }
    std::vector<std::string> texts;
    for (element x : simdjson::dom::array(values)) {
      std::optional<std::string> t = value_text(x);
      if (!t) {
        b.add(w(), fmt::format("matrix \"{}\": {} is not a string or a number", k, show(x)));
        ok = false;
      } else {
        texts.push_back(std::move(*t));
      }
    }
    points *= std::max<size_t>(texts.size(), 1);
    if (points > kMaxPoints) {
      b.add(w(), fmt::format("\"matrix\" makes more than {} jobs", kMaxPoints));
      return std::nullopt;
    }
    m.emplace_back(std::move(k), std::move(texts));
  }
  if (m.empty() && ok) b.add(w(), fmt::format("\"matrix\" is empty: give each swept variable its values, {}", example));
  if (!ok || m.empty()) return std::nullopt;
  return m;
}

// `text` with every {KEY} of the point replaced by its value.
std::string fill_in(std::string text, const std::vector<std::pair<std::string, std::string>>& point) {
  for (const auto& [k, v] : point) {
    std::string key = "{" + k + "}";
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + v.size()))
      text.replace(at, key.size(), v);
  }
  return text;
}

// The job read, expanded into one job per point of its matrix: `base` is at position i of the plan.
void expand_sweep(Build& b, Job base, const Matrix& m, size_t i) {
  size_t first = b.plan.jobs.size();
  std::vector<size_t> at(m.size(), 0);  // the point: an index into each key's values, the first key slowest
  auto id_of = [&](size_t k) -> const std::string& { return b.plan.jobs[k].id; };
  while (true) {
    std::vector<std::pair<std::string, std::string>> point;
    std::string id = base.id;
    for (size_t k = 0; k < m.size(); ++k) {
      point.emplace_back(m[k].first, m[k].second[at[k]]);
      id += "_" + m[k].first + "=" + m[k].second[at[k]];
    }
    size_t pos = b.plan.jobs.size();
    if (pos != i) {
      std::optional<std::string> producer = b.raw_producer[i];  // a copy: push_back may move the vector
      b.raw_producer.push_back(std::move(producer));
    }
    Job job = base;
    job.id = id;
    for (std::string& a : job.args) a = fill_in(a, point);
    for (auto& [k, v] : job.env) v = fill_in(v, point);
    for (auto& [k, v] : point) {
      auto same = std::find_if(job.env.begin(), job.env.end(), [&](const auto& e) { return e.first == k; });
      if (same != job.env.end()) same->second = v;
      else job.env.emplace_back(k, v);
    }
    if (!valid_job_id(id)) {
      b.add(fmt::format("job '{}'", base.id),
            fmt::format("its matrix makes the id \"{}\", which cannot be a file name: use values of letters, "
                        "digits, '.', '_', '-'",
                        id));
      job.id.clear();
    } else if (size_t dup = b.plan.index.find_or_insert(job.id, pos, id_of); dup != IdIndex::npos) {
      b.add(fmt::format("job '{}'", job.id), fmt::format("duplicate id (job #{} and a point of the sweep '{}')",
                                                        b.position(dup), base.id));
    }
    b.plan.jobs.push_back(std::move(job));
    size_t k = m.size();
    while (k > 0 && ++at[k - 1] == m[k - 1].second.size()) at[--k] = 0;
    if (k == 0) break;
  }
  b.plan.sweeps.push_back({base.id, first, b.plan.jobs.size() - first});
}

// A member of a job that gpuq does not read: a typo of a field the job does not give is an
// error (`"dep"` would silently drop the job's deps); anything else is a note, which only
// `validate` mentions.
template <typename Where>
void read_unknown(Build& b, const JobFields& f, std::string_view key, const std::string& id, const Where& w) {
  auto near = nearest_name(key, kJobFieldNames);
  if (near) {
    size_t n = static_cast<size_t>(std::find(kJobFieldNames.begin(), kJobFieldNames.end(), *near) -
                                   kJobFieldNames.begin());
    if (!f.given[n]) {
      b.add(w(), fmt::format("\"{}\" is not a field of a job; did you mean \"{}\"?", key, *near));
      return;
    }
  }
  auto it = b.notes.find(key);
  if (it == b.notes.end()) it = b.notes.emplace(std::string(key), Build::Note{}).first;
  if (it->second.jobs++ < 3) it->second.some += (it->second.some.empty() ? "" : ", ") + (id.empty() ? "?" : id);
}

// One element of the job list, checked and added to the plan (a bad one too, so
// that positions stay right).
void read_job(Build& b, element jj) {
  size_t i = b.plan.jobs.size();
  Job job;
  b.raw_producer.emplace_back();
  if (jj.type() != element_type::OBJECT) {
    b.add(b.where(i), "must be an object, not " + type_name(jj));
    b.plan.jobs.push_back(std::move(job));
    return;
  }
  JobFields f{simdjson::dom::object(jj)};
  const element* matrix = f.find_set(JobFields::kMatrix);
  read_id(b, f, job, i, !matrix);
  // Formatted only when there is something to say: most jobs have nothing.
  auto w = [&] { return job.id.empty() ? fmt::format("job #{}", b.position(i)) : fmt::format("job '{}'", job.id); };
  for (std::string_view key : f.unknown) read_unknown(b, f, key, job.id, w);
  const element* script = f.find(JobFields::kScript);
  if (!script)
    b.add(w(), "has no \"script\"");
  else if (!script->is_string())
    b.add(w(), fmt::format("\"script\" must be a string, not {}", type_name(*script)));
  else if (std::string_view(*script).empty())
    b.add(w(), "\"script\" is empty");
  else
    job.script = std::string_view(*script);
  read_numbers(b, f, job, w);
  if (const element* v = f.find(JobFields::kDeps)) {
    if (!v->is_array()) {
      b.add(w(), fmt::format("\"deps\" must be a list of strings, not {} ({})", type_name(*v), show(*v)));
    } else {
      size_t k = 0;
      for (element d : simdjson::dom::array(*v)) {
        if (!d.is_string())
          b.add(w(), fmt::format("deps[{}] must be a string, not {} ({})", k, type_name(d), show(d)));
        else
          job.deps.push_back(parse_dep(std::string_view(d)));
        ++k;
      }
    }
  }
  if (const element* v = f.find_set(JobFields::kProducedBy)) {
    if (!v->is_string())
      b.add(w(), fmt::format("\"produced_by\" must be a job id, not {}", type_name(*v)));
    else
      b.raw_producer[i] = std::string(std::string_view(*v));
  }
  read_fractions(b, f, job, w);
  read_limits(b, f, job, w);
  read_args_env(b, f, job, w);
  if (job.gpus > static_cast<int>(b.node_gpus.size()))
    b.add(w(), fmt::format("needs {} GPUs but --gpus gives {} ({})", job.gpus, b.node_gpus.size(),
                           py_list(b.node_gpus)));
  if (matrix && !job.id.empty()) {
    if (std::optional<Matrix> m = read_matrix(b, *matrix, w)) return expand_sweep(b, std::move(job), *m, i);
    // A bad matrix: the job stands as one job, so that deps on it do not add errors of their own.
    auto id_of = [&](size_t k) -> const std::string& { return b.plan.jobs[k].id; };
    if (size_t first = b.plan.index.find_or_insert(job.id, i, id_of); first != IdIndex::npos)
      b.add(w(), fmt::format("duplicate id (job #{} and job #{})", b.position(first), b.position(i)));
  }
  b.plan.jobs.push_back(std::move(job));
}

}  // namespace

void read_jobs(Build& b, simdjson::dom::array jobs) {
  b.plan.jobs.reserve(b.plan.jobs.size() + jobs.size());
  b.raw_producer.reserve(b.plan.jobs.size() + jobs.size());
  b.plan.index.reserve(b.plan.jobs.size() + jobs.size());
  for (element jj : jobs) read_job(b, jj);
}

}  // namespace gpuq::plan_read
