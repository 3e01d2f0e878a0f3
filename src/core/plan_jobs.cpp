// One job of a plan: its fields read by walking the table of them (job_fields.h), its
// matrix expanded into the sweep's points.
#include "plan_read.h"

#include "gpuq/core/job_fields.h"

#include <algorithm>
#include <bit>

namespace gpuq::plan_read {

namespace {

// A job's members, each in the slot of its row of the table (job_fields.h), the last of its
// name. Others are kept aside (`unknown`): a near miss of a known name is an error, the rest
// notes the plan may carry. One is kept for a whole list of jobs, and take() refills it.
struct JobValues {
  static_assert(kMaxJobFields <= 64, "a row is a bit of a 64-bit mask");
  std::span<const JobField> fields = job_fields();
  uint64_t given = 0;     // bit n: the job gives row n
  uint64_t required = 0;  // bit n: row n is required
  element at[kMaxJobFields];
  std::vector<std::string_view> unknown;

  JobValues() {
    for (size_t n = 0; n < fields.size(); ++n)
      if (fields[n].presence == Presence::Required) required |= uint64_t{1} << n;
  }
  // The members of `job`.
  void take(simdjson::dom::object job) {
    given = 0;
    unknown.clear();
    auto after = [&](size_t n) { return n + 1 == fields.size() ? 0 : n + 1; };  // the next row, round
    size_t next = 0;  // plans mostly write a job's fields in the table's order: look there first
    for (auto [key, value] : job) {
      size_t n = next, looked = 0;
      while (looked < fields.size() && fields[n].name != key) n = after(n), ++looked;
      if (looked == fields.size()) {
        unknown.push_back(key);
        continue;
      }
      at[n] = value;
      given |= uint64_t{1} << n;
      next = after(n);
    }
  }
  bool gives(size_t n) const { return (given >> n) & 1; }
  // The value of row n to read: given, and not null where null is absent.
  const element* find(size_t n) const {
    if (!gives(n) || (fields[n].presence == Presence::Nullable && at[n].is_null())) return nullptr;
    return &at[n];
  }
};

// The row of "matrix": a job that gives one is a sweep, expanded once the job is whole.
size_t matrix_row() {
  static const size_t row = static_cast<size_t>(find_job_field("matrix") - job_fields().data());
  return row;
}

// A job's "matrix": its keys and each key's values as text, or nullopt (with the problem added).
using Matrix = std::vector<std::pair<std::string, std::vector<std::string>>>;
template <typename Where>
std::optional<Matrix> parse_matrix(Build& b, element v, const Where& w) {
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

// A member of a job that gpuq does not read: another scheduler's name for a field
// (`"depends_on"`, job_field_aliases()) and a typo of a field the job does not give are
// errors (`"dep"` would silently drop the job's deps); anything else is a note, which every
// command that loads the plan mentions as a warning (PlanLoad::unknown_fields).
void read_unknown(JobReader& r, const JobValues& values, std::string_view key) {
  if (const JobFieldAlias* alias = find_job_field_alias(key)) {
    r.add(fmt::format("\"{}\" is not a field of a job; did you mean \"{}\"?", key, alias->field));
    return;
  }
  if (auto near = nearest_name(key, kJobFieldNames)) {
    const JobField* f = find_job_field(*near);
    if (!values.gives(static_cast<size_t>(f - values.fields.data()))) {
      r.add(fmt::format("\"{}\" is not a field of a job; did you mean \"{}\"?", key, *near));
      return;
    }
  }
  Build& b = r.b;
  auto it = b.notes.find(key);
  if (it == b.notes.end()) it = b.notes.emplace(std::string(key), Build::Note{}).first;
  const std::string& id = r.job.id;
  if (it->second.jobs++ < 3) it->second.some += (it->second.some.empty() ? "" : ", ") + (id.empty() ? "?" : id);
}

// A required field the job does not give (kept out of read_field, which is inlined).
[[gnu::noinline]] void missing(JobReader& r, const JobField& f) { r.add(fmt::format("has no \"{}\"", f.name)); }

// The field of row n: read by its row's reader, or refused when required and missing.
inline void read_field(JobReader& r, const JobValues& values, size_t n) {
  const JobField& f = values.fields[n];
  if (const element* v = values.find(n))
    f.read(r, f, *v);
  else if (f.presence == Presence::Required)
    missing(r, f);
}

// One element of the job list, checked and added to the plan (a bad one too, so
// that positions stay right).
void read_job(Build& b, JobValues& values, element jj) {
  size_t i = b.plan.jobs.size();
  Job job;
  b.raw_producer.emplace_back();
  if (jj.type() != element_type::OBJECT) {
    b.add(b.where(i), "must be an object, not " + type_name(jj));
    b.plan.jobs.push_back(std::move(job));
    return;
  }
  values.take(simdjson::dom::object(jj));
  JobReader r{b, job, i};
  r.sweep = values.find(matrix_row()) != nullptr;
  // The fields in the table's order, the first (the id) before the members gpuq does not
  // read, so that their messages name the job by its id. After it, the rows the job gives
  // and the required ones (bit n is row n).
  read_field(r, values, 0);
  for (std::string_view key : values.unknown) read_unknown(r, values, key);
  for (uint64_t rows = (values.given | values.required) & ~uint64_t{1}; rows != 0; rows &= rows - 1)
    read_field(r, values, static_cast<size_t>(std::countr_zero(rows)));
  if (job.gpus > static_cast<int>(b.node_gpus.size()))
    r.add(fmt::format("needs {} GPUs but --gpus gives {} ({})", job.gpus, b.node_gpus.size(), py_list(b.node_gpus)));
  auto w = [&] { return r.where(); };
  if (r.matrix && !job.id.empty()) {
    if (std::optional<Matrix> m = parse_matrix(b, *r.matrix, w)) return expand_sweep(b, std::move(job), *m, i);
    // A bad matrix: the job stands as one job, so that deps on it do not add errors of their own.
    auto id_of = [&](size_t k) -> const std::string& { return b.plan.jobs[k].id; };
    if (size_t first = b.plan.index.find_or_insert(job.id, i, id_of); first != IdIndex::npos)
      r.add(fmt::format("duplicate id (job #{} and job #{})", b.position(first), b.position(i)));
  }
  b.plan.jobs.push_back(std::move(job));
}

}  // namespace

void read_jobs(Build& b, simdjson::dom::array jobs) {
  b.plan.jobs.reserve(b.plan.jobs.size() + jobs.size());
  b.raw_producer.reserve(b.plan.jobs.size() + jobs.size());
  b.plan.index.reserve(b.plan.jobs.size() + jobs.size());
  JobValues values;  // one set of slots for every job of the list
  for (element jj : jobs) read_job(b, values, jj);
}

}  // namespace gpuq::plan_read
