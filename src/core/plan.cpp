#include "gpuq/core/plan.h"
#include "gpuq/core/settings.h"

#include "plan_read.h"
#include "plan_settings.h"
#include "gpuq/core/json_error.h"
#include "gpuq/core/json_read.h"
#include "gpuq/core/limits.h"
#include "gpuq/core/suggest.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <charconv>
#include <unordered_map>

namespace gpuq {

using simdjson::dom::element;
using simdjson::dom::element_type;

bool Job::has_file_dep() const {
  for (const Dep& d : deps)
    if (d.kind == Dep::Kind::File) return true;
  return false;
}

uint64_t new_plan_serial() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

void rank_jobs(Plan& plan) {
  size_t n = plan.jobs.size();
  // By priority, ties by position. The keys sit beside the positions: comparing through
  // plan.jobs misses the cache at every step.
  std::vector<std::pair<double, uint32_t>> keyed(n);
  for (size_t i = 0; i < n; ++i) keyed[i] = {plan.jobs[i].priority, static_cast<uint32_t>(i)};
  std::sort(keyed.begin(), keyed.end());  // (priority, position): the same order as a stable sort by priority
  plan.by_rank.resize(n);
  for (size_t r = 0; r < n; ++r) plan.by_rank[r] = keyed[r].second;
  plan.rank_of.resize(n);
  for (size_t r = 0; r < n; ++r) plan.rank_of[plan.by_rank[r]] = static_cast<uint32_t>(r);
}

const Job* Plan::find(std::string_view id) const {
  size_t p = index.find(id, [&](size_t k) -> const std::string& { return jobs[k].id; });
  return p == IdIndex::npos ? nullptr : &jobs[p];
}

bool valid_job_id(std::string_view id) {
  if (id.empty() || id.size() > 200 || id.front() == '.') return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-' || c == '=';
    if (!ok) return false;
  }
  return true;
}

namespace plan_read {

// A dep as written ("ID", "after:ID", "file:PATH"); its job is found once every id is known.
Dep parse_dep(std::string_view d) {
  Dep dep;
  if (d.substr(0, 5) == "file:") {
    dep.kind = Dep::Kind::File;
    dep.target = d.substr(5);
  } else if (d.substr(0, 6) == "after:") {
    dep.kind = Dep::Kind::After;
    dep.target = d.substr(6);
  } else {
    dep.kind = Dep::Kind::Done;
    dep.target = d;
  }
  return dep;
}

// The dep as the plan wrote it.
std::string dep_text(const Dep& d) {
  return (d.kind == Dep::Kind::File ? "file:" : d.kind == Dep::Kind::After ? "after:" : "") + d.target;
}

std::string type_name(element v) { return json_kind(v, true); }

// A value as messages quote it: nlohmann/json's compact form, cut at 40 characters.
std::string show(element v) {
  std::string s = to_nlohmann(v).dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// Returns the problem with a numeric field, or "".
std::string check_number(element v, bool integer, bool non_negative) {
  if (!json_is_number(v) || (integer && !json_is_integer(v)))
    return fmt::format("must be {}, not {} ({})", integer ? "a whole number" : "a number", type_name(v), show(v));
  if (non_negative && json_as_double(v) < 0) return fmt::format("must not be negative (got {})", show(v));
  return "";
}

// The last member named `name` of an object (a repeated name keeps its last value, as
// Python's json and nlohmann/json keep it), or nothing.
std::optional<element> member(simdjson::dom::object o, std::string_view name) {
  std::optional<element> found;
  for (auto [key, value] : o)
    if (key == name) found = value;
  return found;
}

}  // namespace plan_read

using namespace plan_read;

namespace {

// The top level: a list of jobs, or an object with "jobs" (and "reservations",
// "workdir", "settings"). False when its shape is wrong (then nothing else is checked).
// Every "jobs" list of an object is read, and the last "jobs" must be a list, as gpuq has
// always read such a plan. The settings are read first: they may choose the node's GPUs.
bool read_top(Build& b, element root, std::optional<simdjson::dom::array>& reservations, std::vector<int>& node,
              const ChooseGpus& choose) {
  if (root.is_array()) {
    node = choose(b.plan.settings);
    read_jobs(b, simdjson::dom::array(root));
    return true;
  }
  if (!root.is_object()) {
    b.add("top level", "a plan is a list of jobs or an object with \"jobs\", not " + type_name(root));
    return false;
  }
  std::optional<element> jobs, res, settings, workdir;
  std::vector<simdjson::dom::array> job_lists;
  std::vector<std::pair<std::string_view, element>> unknown;
  for (auto [key, value] : simdjson::dom::object(root)) {
    if (key == "jobs") {
      jobs = value;
      if (value.is_array()) job_lists.push_back(simdjson::dom::array(value));
    } else if (key == "reservations") {
      res = value;
    } else if (key == "settings") {
      settings = value;
    } else if (key == "workdir") {
      workdir = value;
      if (!value.is_string() || std::string_view(value).empty())
        b.add("\"workdir\"", "must be a folder's path (a string), not " + show(value));
      else
        b.plan.workdir = std::string(std::string_view(value));
    } else {
      unknown.emplace_back(key, value);
    }
  }
  read_plan_settings(b.file, settings, b.plan, b.out.errors);
  node = choose(b.plan.settings);
  for (simdjson::dom::array list : job_lists) read_jobs(b, list);
  for (auto [key, value] : unknown) {
    // A setting written beside "jobs" rather than in "settings": ignored, it would leave the
    // plan running with the default silently (max_retries 2 for 0, every GPU for "0-3").
    if (find_setting(key)) {
      b.add("top level", fmt::format("\"{}\" is a setting, which gpuq reads in \"settings\"; did you mean "
                                     "\"settings\": {{\"{}\": {}}}?",
                                     key, key, show(value)));
      continue;
    }
    auto near = nearest_name(key, {"jobs", "reservations", "workdir", "settings"});
    auto taken = [&](std::string_view name) {
      return name == "jobs" ? jobs.has_value() : name == "reservations" ? res.has_value()
             : name == "settings"                                   ? settings.has_value()
                                                                    : workdir.has_value();
    };
    if (near && !taken(*near)) {
      b.add("top level", fmt::format("\"{}\" is not a field of a plan; did you mean \"{}\"?{}", key, *near,
                                     *near == "jobs" ? " (an object plan needs a \"jobs\" list)" : ""));
      if (*near == "jobs") return false;
    }
    else
      b.out.unknown_fields.push_back(
          fmt::format("{}: top level: \"{}\" is not a field gpuq reads; it is ignored", b.file, key));
  }
  if (!jobs) {
    b.add("top level", "an object plan needs a \"jobs\" list");
    return false;
  }
  if (!jobs->is_array()) {
    b.add("\"jobs\"", "must be a list of jobs, not " + type_name(*jobs));
    return false;
  }
  if (res && !res->is_null()) {
    if (!res->is_array())
      b.add("\"reservations\"", "must be a list, not " + type_name(*res));
    else
      reservations = simdjson::dom::array(*res);
  }
  return true;
}

// Deps and producers, now that every id is known.
void link_jobs(Build& b) {
  Plan& plan = b.plan;
  // A sweep's id names its points; it names no job itself.
  std::unordered_map<std::string, size_t> sweep_of;
  for (size_t k = 0; k < plan.sweeps.size(); ++k) {
    const Sweep& sw = plan.sweeps[k];
    if (const Job* same = plan.find(sw.id))
      b.add(fmt::format("job '{}'", sw.id), fmt::format("is the id of a sweep (a job with a \"matrix\") and of job #{}",
                                                       b.position(static_cast<size_t>(same - plan.jobs.data()))));
    else if (!sweep_of.emplace(sw.id, k).second)
      b.add(fmt::format("job '{}'", sw.id), "two sweeps (jobs with a \"matrix\") have this id");
  }
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    Job& job = plan.jobs[i];
    std::vector<Dep> points;  // deps on a sweep: one on each of its points
    size_t kept = 0;
    for (Dep& dep : job.deps) {
      if (dep.kind == Dep::Kind::File) {
        if (dep.target.empty()) {
          b.add(b.where(i), fmt::format("dep \"{}\" names no path", dep_text(dep)));
          continue;
        }
      } else {
        const Job* target = plan.find(dep.target);
        if (!target && !sweep_of.empty()) {
          if (auto sw = sweep_of.find(dep.target); sw != sweep_of.end()) {
            const Sweep& sweep = plan.sweeps[sw->second];
            for (size_t p = sweep.first; p < sweep.first + sweep.count; ++p)
              points.push_back(Dep{dep.kind, plan.jobs[p].id, p});
            continue;
          }
        }
        if (!target) {
          b.add(b.where(i), fmt::format("dep \"{}\" names no job of the plan{}", dep_text(dep), b.suggest_id(dep.target)));
          continue;
        }
        dep.job = static_cast<size_t>(target - plan.jobs.data());
      }
      if (&job.deps[kept] != &dep) job.deps[kept] = std::move(dep);
      ++kept;
    }
    job.deps.resize(kept);
    for (Dep& d : points) job.deps.push_back(std::move(d));
    if (b.raw_producer[i]) {
      const Job* p = plan.find(*b.raw_producer[i]);
      if (!p)
        b.add(b.where(i), fmt::format("\"produced_by\" names \"{}\", no job of the plan{}", *b.raw_producer[i],
                                      sweep_of.count(*b.raw_producer[i]) ? " (it is a sweep: name one of its points)"
                                                                         : b.suggest_id(*b.raw_producer[i])));
      else if (p == &job)
        b.add(b.where(i), "\"produced_by\" names the job itself: it would wait for its own output");
      else
        job.produced_by = static_cast<size_t>(p - plan.jobs.data());
    }
  }
}

// One reservation's GPUs, into `res` (those outside --gpus into `outside`).
void read_reservation_gpus(Build& b, const std::string& rw, std::optional<element> g, GpuMask node, Reservation& res,
                           std::vector<int>& outside) {
  if (!g || !g->is_array()) {
    b.add(rw, "needs \"gpus\", a list of GPU ids");
    return;
  }
  for (element x : simdjson::dom::array(*g)) {
    if (!json_is_integer(x)) {
      b.add(rw, fmt::format("GPU {} is not a GPU id", show(x)));
    } else if (x.type() == element_type::UINT64 || int64_t(x) < 0 || int64_t(x) > kMaxGpuId) {
      b.add(rw, fmt::format("GPU {} is not a GPU id (0..{})", show(x), kMaxGpuId));
    } else if (int id = static_cast<int>(int64_t(x)); !(node & (GpuMask{1} << id))) {
      outside.push_back(id);
    } else {
      res.gpus |= GpuMask{1} << id;
      res.gpu_list.push_back(id);
    }
  }
}

void read_reservations(Build& b, simdjson::dom::array list) {
  GpuMask node = mask_of(b.node_gpus);
  size_t r = 0;
  for (element rj : list) {
    std::string rw = fmt::format("reservation #{}", r + 1);
    if (!rj.is_object()) {
      b.add(rw, "must be an object with \"gpus\" and \"jobs\", not " + type_name(rj));
      ++r;
      continue;
    }
    Reservation res;
    std::vector<int> outside;
    read_reservation_gpus(b, rw, member(simdjson::dom::object(rj), "gpus"), node, res, outside);
    if (std::optional<element> sr = member(simdjson::dom::object(rj), "slurm_reservation")) {
      if (!sr->is_string() || std::string_view(*sr).empty())
        b.add(rw, "\"slurm_reservation\" must be the name of a Slurm reservation, not " + show(*sr));
      else
        res.queue_reservation = std::string(std::string_view(*sr));
    }
    std::optional<element> js = member(simdjson::dom::object(rj), "jobs");
    if (!js || !js->is_array()) {
      b.add(rw, "needs \"jobs\", a list of job ids");
    } else {
      for (element x : simdjson::dom::array(*js)) {
        const Job* m = x.is_string() ? b.plan.find(std::string_view(x)) : nullptr;
        // A sweep's id: every point of it.
        auto sweep = !m && x.is_string()
                         ? std::find_if(b.plan.sweeps.begin(), b.plan.sweeps.end(),
                                        [&](const Sweep& sw) { return sw.id == std::string_view(x); })
                         : b.plan.sweeps.end();
        if (sweep != b.plan.sweeps.end()) {
          for (size_t k = sweep->first; k < sweep->first + sweep->count; ++k) {
            res.jobs.push_back(k);
            b.plan.reservations_of[k].push_back(r);
          }
        } else if (!m) {
          b.add(rw, fmt::format("job {} is not in the plan{}", show(x),
                                x.is_string() ? b.suggest_id(std::string_view(x)) : std::string()));
        } else {
          size_t k = static_cast<size_t>(m - b.plan.jobs.data());
          res.jobs.push_back(k);
          b.plan.reservations_of[k].push_back(r);
        }
      }
    }
    // A plan written for the whole node may be run on part of it: such GPUs do not exist here.
    if (!outside.empty())
      b.out.warnings.push_back(fmt::format("{}: {}: GPUs {} are not among --gpus {}; the reservation ignores them",
                                           b.file, rw, py_list(outside), py_list(b.node_gpus)));
    b.plan.reservations.push_back(std::move(res));
    ++r;
  }
}

// Cycles through deps (and produced_by, for jobs that wait on files): at most 20 reported.
void find_cycles(Build& b) {
  const Plan& plan = b.plan;
  size_t n = plan.jobs.size();
  // The edges of job v, by number: its deps on jobs, then its producer if it waits on files.
  auto edge = [&](size_t v, size_t e, size_t& to) {
    const Job& j = plan.jobs[v];
    for (; e < j.deps.size(); ++e)
      if (j.deps[e].kind != Dep::Kind::File) {
        to = j.deps[e].job;
        return e + 1;
      }
    if (e == j.deps.size() && j.produced_by && j.has_file_dep()) {
      to = *j.produced_by;
      return e + 1;
    }
    return size_t{0};  // no more
  };
  std::vector<char> color(n, 0);  // 0 new, 1 on stack, 2 done
  std::vector<std::pair<size_t, size_t>> stack;  // (node, next edge)
  int cycles = 0;
  for (size_t root = 0; root < n && cycles < 20; ++root) {
    if (color[root]) continue;
    stack.push_back({root, 0});
    color[root] = 1;
    while (!stack.empty()) {
      auto& [v, e] = stack.back();
      size_t w = 0, next = edge(v, e, w);
      if (!next) {
        color[v] = 2;
        stack.pop_back();
        continue;
      }
      e = next;
      if (color[w] == 0) {
        color[w] = 1;
        stack.push_back({w, 0});
      } else if (color[w] == 1 && cycles < 20) {
        std::string path;
        size_t k = stack.size();
        while (stack[k - 1].first != w) --k;
        for (size_t s = k - 1; s < stack.size(); ++s) path += plan.jobs[stack[s].first].id + " -> ";
        path += plan.jobs[w].id;
        b.add(fmt::format("job '{}'", plan.jobs[w].id), "dependency cycle: " + path);
        ++cycles;
      }
    }
  }
}

// `owner`, when given, holds the text: it is freed once parsed (the parser holds copies of
// its strings), so that a long plan's text and its parsed form are not kept together for long.
PlanLoad parse_plan_text(std::string_view text, bool padded, const std::string& file, const ChooseGpus& choose,
                         std::unique_ptr<char[]>* owner = nullptr) {
  PlanLoad out;
  std::vector<int> node;  // chosen once the settings are read
  Build b{file, node, out, Plan(), {}};
  {
    simdjson::dom::parser parser;  // the parsed text, freed once the plan is built from it
    JsonText json = parse_json(parser, text, padded);
    if (owner) owner->reset();
    if (!json.ok()) {
      b.add(json.where, json.why == "the file is empty" ? json.why : "invalid JSON: " + json.why);
      return out;
    }
    std::optional<simdjson::dom::array> reservations;
    if (!read_top(b, json.root, reservations, node, choose)) {
      if (!b.plan.jobs.empty()) out.partial = std::move(b.plan);
      return out;
    }
    for (const auto& [name, note] : b.notes)
      out.unknown_fields.push_back(fmt::format("{}: \"{}\" in {} job(s) ({}{}) is not a field gpuq reads; it is ignored",
                                               file, name, note.jobs, note.some, note.jobs > 3 ? ", ..." : ""));
    link_jobs(b);
    b.plan.reservations_of.assign(b.plan.jobs.size(), {});
    if (reservations) read_reservations(b, *reservations);
  }
  // Cycles are looked for whatever else is wrong (a dep that names no job was dropped by
  // link_jobs, so every edge left is sound): one round of validate shows every problem.
  find_cycles(b);
  if (out.errors.empty()) {
    rank_jobs(b.plan);
    out.plan = std::move(b.plan);
  } else {
    // For validate's file checks: a job whose producer could not be found may still get its files from it.
    for (size_t i = 0; i < b.plan.jobs.size(); ++i)
      if (b.raw_producer[i] && !b.plan.jobs[i].produced_by)
        std::erase_if(b.plan.jobs[i].deps, [](const Dep& d) { return d.kind == Dep::Kind::File; });
    out.partial = std::move(b.plan);
  }
  return out;
}

}  // namespace

namespace {

// The GPUs given, whatever the plan's settings say.
ChooseGpus these_gpus(const std::vector<int>& node_gpus) {
  return [&node_gpus](const GivenSettings&) { return node_gpus; };
}

}  // namespace

PlanLoad parse_plan(std::string_view text, const std::string& file, const std::vector<int>& node_gpus) {
  return parse_plan_text(text, false, file, these_gpus(node_gpus));
}

PlanLoad parse_plan_choosing_gpus(std::string_view text, const std::string& file, const ChooseGpus& choose) {
  return parse_plan_text(text, false, file, choose);
}

std::string plan_file_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);  // follows symbolic links, as reading does
  if (ec && st.type() != fs::file_type::not_found) return fmt::format("cannot read the plan: {}", ec.message());
  switch (st.type()) {
    case fs::file_type::not_found:
      return fs::is_symlink(fs::symlink_status(path, ec)) ? "is a symbolic link to nothing (its target is missing)"
                                                          : "";  // the reader says so, with errno's words
    case fs::file_type::regular:
      break;
    case fs::file_type::directory:
      return "is a folder, not a plan file";
    case fs::file_type::fifo:
      return "is a FIFO (a named pipe), not a plan file";
    case fs::file_type::character:
    case fs::file_type::block:
      return "is a device, not a plan file";
    case fs::file_type::socket:
      return "is a socket, not a plan file";
    default:
      return "is not a regular file";
  }
  uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > kMaxPlanBytes)
    return fmt::format("is {:.1f} GiB: more than the {} GiB a plan may have (is it the right file?)",
                       static_cast<double>(size) / (1 << 30), kMaxPlanBytes >> 30);
  return "";
}

PlanLoad load_plan(const std::string& path, const std::vector<int>& node_gpus) {
  return load_plan_choosing_gpus(path, these_gpus(node_gpus));
}

PlanLoad load_plan_choosing_gpus(const std::string& path, const ChooseGpus& choose) {
  // A folder, a FIFO or a device would be read as garbage, wait for a writer, or never end.
  if (std::string problem = plan_file_problem(path); !problem.empty()) {
    PlanLoad out;
    out.errors.push_back(fmt::format("{}: {}", path, problem));
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    PlanLoad out;
    out.errors.push_back(fmt::format("{}: cannot read the plan: {}", path, std::strerror(errno)));
    return out;
  }
  // One buffer of the file's size, with the padding simdjson reads past the end: no copy of it.
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  in.seekg(0, std::ios::beg);
  size_t n = size > 0 ? static_cast<size_t>(size) : 0;
  std::unique_ptr<char[]> buffer(new char[n + simdjson::SIMDJSON_PADDING]);
  in.read(buffer.get(), static_cast<std::streamsize>(n));
  n = static_cast<size_t>(in.gcount());
  std::memset(buffer.get() + n, 0, simdjson::SIMDJSON_PADDING);
  return parse_plan_text(std::string_view(buffer.get(), n), true, path, choose, &buffer);
}

}  // namespace gpuq
