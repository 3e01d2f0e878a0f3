#include "gpuq/plan.h"

#include "gpuq/json_error.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gpuq {

using nlohmann::json;

bool Job::has_file_dep() const {
  for (const Dep& d : deps)
    if (d.kind == Dep::Kind::File) return true;
  return false;
}

const Job* Plan::find(std::string_view id) const {
  auto it = index.find(std::string(id));
  return it == index.end() ? nullptr : &jobs[it->second];
}

bool valid_job_id(std::string_view id) {
  if (id.empty() || id.size() > 200 || id.front() == '.') return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "a list";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a fractional number";
    default: return "a number";
  }
}

std::string show(const json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

bool is_number(const json& v) { return v.is_number(); }  // booleans are not numbers in nlohmann

struct Checker {
  const std::string& file;
  std::vector<std::string>& errors;
  void add(const std::string& where, const std::string& what) { errors.push_back(fmt::format("{}: {}: {}", file, where, what)); }
};

// Returns the problem with a numeric field, or "".
std::string check_number(const json& v, bool integer, bool non_negative) {
  if (!is_number(v) || (integer && !v.is_number_integer()))
    return fmt::format("must be {}, not {} ({})", integer ? "a whole number" : "a number", type_name(v), show(v));
  if (non_negative && v.get<double>() < 0) return fmt::format("must not be negative (got {})", show(v));
  return "";
}

}  // namespace

PlanLoad parse_plan(std::string_view text, const std::string& file, const std::vector<int>& node_gpus) {
  PlanLoad out;
  Checker c{file, out.errors};
  Plan plan;
  plan.index.reserve(text.size() / 100 + 16);  // a job takes 100+ bytes of JSON: no rehashing as ids arrive
  // Raw deps and produced_by kept until every id is known.
  std::vector<std::vector<std::string>> raw_deps;
  std::vector<std::optional<std::string>> raw_producer;
  // How messages name job i: by id once it has a good one, else by position.
  auto where = [&](size_t i) {
    return plan.jobs.size() > i && !plan.jobs[i].id.empty() ? fmt::format("job '{}'", plan.jobs[i].id)
                                                           : fmt::format("job #{}", i + 1);
  };

  // Each job is checked as soon as it is parsed, then dropped from the document,
  // so a plan of a million jobs never exists twice in memory.
  auto take_job = [&](const json& jj) {
    size_t i = plan.jobs.size();
    Job job;
    raw_deps.emplace_back();
    raw_producer.emplace_back();
    if (!jj.is_object()) {
      c.add(where(i), "must be an object, not " + type_name(jj));
      plan.jobs.push_back(std::move(job));
      return;
    }
    auto id = jj.find("id");
    if (id == jj.end()) {
      c.add(where(i), "has no \"id\"");
    } else if (!id->is_string()) {
      c.add(where(i), fmt::format("\"id\" must be a string, not {} ({})", type_name(*id), show(*id)));
    } else if (!valid_job_id(id->get<std::string>())) {
      c.add(where(i), fmt::format("id {} cannot be a file name: use only letters, digits, '.', '_', '-', "
                                  "not starting with '.' (it names logs/ID.log)",
                                  show(*id)));
    } else {
      job.id = id->get<std::string>();
      auto [it, fresh] = plan.index.emplace(job.id, i);
      if (!fresh)
        c.add(fmt::format("job '{}'", job.id), fmt::format("duplicate id (job #{} and job #{})", it->second + 1, i + 1));
    }
    // Named only when there is something to say: formatting it for every job costs at 100k jobs.
    auto w = [&] { return job.id.empty() ? fmt::format("job #{}", i + 1) : fmt::format("job '{}'", job.id); };

    auto script = jj.find("script");
    if (script == jj.end())
      c.add(w(), "has no \"script\"");
    else if (!script->is_string())
      c.add(w(), fmt::format("\"script\" must be a string, not {}", type_name(*script)));
    else if (script->get<std::string>().empty())
      c.add(w(), "\"script\" is empty");
    else
      job.script = script->get<std::string>();

    if (auto v = jj.find("gpus"); v != jj.end()) {
      if (auto p = check_number(*v, true, true); !p.empty())
        c.add(w(), "\"gpus\" " + p);
      else if (v->get<long long>() > 64)
        c.add(w(), fmt::format("\"gpus\" is {}, more than any node has", show(*v)));
      else
        job.gpus = v->get<int>();
    }
    if (auto v = jj.find("priority"); v != jj.end()) {
      if (auto p = check_number(*v, false, false); !p.empty())
        c.add(w(), "\"priority\" " + p);
      else
        job.priority = v->get<double>();
    }
    if (auto v = jj.find("est_hours"); v != jj.end()) {
      if (auto p = check_number(*v, false, true); !p.empty()) {
        c.add(w(), "\"est_hours\" " + p);
      } else {
        job.est_hours = v->get<double>();
        job.est_given = true;
      }
    }
    if (auto v = jj.find("deps"); v != jj.end()) {
      if (!v->is_array()) {
        c.add(w(), fmt::format("\"deps\" must be a list of strings, not {} ({})", type_name(*v), show(*v)));
      } else {
        for (size_t k = 0; k < v->size(); ++k) {
          const json& d = (*v)[k];
          if (!d.is_string())
            c.add(w(), fmt::format("deps[{}] must be a string, not {} ({})", k, type_name(d), show(d)));
          else
            raw_deps[i].push_back(d.get<std::string>());
        }
      }
    }
    if (auto v = jj.find("produced_by"); v != jj.end() && !v->is_null()) {
      if (!v->is_string())
        c.add(w(), fmt::format("\"produced_by\" must be a job id, not {}", type_name(*v)));
      else
        raw_producer[i] = v->get<std::string>();
    }
    if (auto v = jj.find("produced_at_frac"); v != jj.end()) {
      if (auto p = check_number(*v, false, true); !p.empty())
        c.add(w(), "\"produced_at_frac\" " + p);
      else
        job.produced_at_frac = v->get<double>();
    }
    if (auto v = jj.find("first_look_frac"); v != jj.end() && !v->is_null()) {
      if (auto p = check_number(*v, false, true); !p.empty())
        c.add(w(), "\"first_look_frac\" " + p);
      else
        job.first_look_frac = v->get<double>();
    }
    if (job.gpus > static_cast<int>(node_gpus.size()))
      c.add(w(), fmt::format("needs {} GPUs but --gpus gives {} ({})", job.gpus, node_gpus.size(),
                           py_list(node_gpus)));
    plan.jobs.push_back(std::move(job));
  };

  json doc;
  bool top_is_array = false, top_is_object = false, in_jobs = false;
  std::string top_key;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (depth == 0 && event == E::array_start) top_is_array = in_jobs = true;
    if (depth == 0 && event == E::object_start) top_is_object = true;
    if (depth == 1 && event == E::key && top_is_object) top_key = parsed.get<std::string>();
    if (depth == 1 && event == E::array_start && top_is_object && top_key == "jobs") in_jobs = true;
    int job_depth = top_is_array ? 1 : 2;
    if (in_jobs && depth == job_depth &&
        (event == E::object_end || event == E::array_end || event == E::value)) {
      take_job(parsed);
      return false;  // drop it from the document
    }
    if (in_jobs && depth == job_depth - 1 && event == E::array_end) in_jobs = false;
    return true;
  };
  try {
    doc = json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    JsonErrorPlace place = describe_json_error(text, e);
    out.errors.clear();  // problems of jobs read before the syntax error would only confuse
    c.add(place.where, place.why == "the file is empty" ? place.why : "invalid JSON: " + place.why);
    return out;
  }

  const json* res_json = nullptr;
  if (doc.is_object()) {
    auto it = doc.find("jobs");
    if (it == doc.end()) {
      c.add("top level", "an object plan needs a \"jobs\" list");
      return out;
    }
    if (!it->is_array()) {
      c.add("\"jobs\"", "must be a list of jobs, not " + type_name(*it));
      return out;
    }
    auto r = doc.find("reservations");
    if (r != doc.end() && !r->is_null()) {
      if (!r->is_array())
        c.add("\"reservations\"", "must be a list, not " + type_name(*r));
      else
        res_json = &*r;
    }
  } else if (!doc.is_array()) {
    c.add("top level", "a plan is a list of jobs or an object with \"jobs\", not " + type_name(doc));
    return out;
  }

  // Deps and producers, now that every id is known.
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    Job& job = plan.jobs[i];
    for (const std::string& d : raw_deps[i]) {
      Dep dep;
      if (d.rfind("file:", 0) == 0) {
        dep.kind = Dep::Kind::File;
        dep.target = d.substr(5);
        if (dep.target.empty()) {
          c.add(where(i), fmt::format("dep \"{}\" names no path", d));
          continue;
        }
      } else {
        bool after = d.rfind("after:", 0) == 0;
        dep.kind = after ? Dep::Kind::After : Dep::Kind::Done;
        dep.target = after ? d.substr(6) : d;
        auto it = plan.index.find(dep.target);
        if (it == plan.index.end()) {
          c.add(where(i), fmt::format("dep \"{}\" names no job of the plan", d));
          continue;
        }
        dep.job = it->second;
      }
      job.deps.push_back(std::move(dep));
    }
    if (raw_producer[i]) {
      auto it = plan.index.find(*raw_producer[i]);
      if (it == plan.index.end())
        c.add(where(i), fmt::format("\"produced_by\" names \"{}\", no job of the plan", *raw_producer[i]));
      else if (it->second == i)
        c.add(where(i), "\"produced_by\" names the job itself: it would wait for its own output");
      else
        job.produced_by = it->second;
    }
  }

  // Reservations.
  plan.reservations_of.assign(plan.jobs.size(), {});
  GpuMask node = mask_of(node_gpus);
  if (res_json) {
    for (size_t r = 0; r < res_json->size(); ++r) {
      const json& rj = (*res_json)[r];
      std::string rw = fmt::format("reservation #{}", r + 1);
      if (!rj.is_object()) {
        c.add(rw, "must be an object with \"gpus\" and \"jobs\", not " + type_name(rj));
        continue;
      }
      Reservation res;
      std::vector<int> outside;
      auto g = rj.find("gpus");
      if (g == rj.end() || !g->is_array()) {
        c.add(rw, "needs \"gpus\", a list of GPU ids");
      } else {
        for (const json& x : *g) {
          if (!x.is_number_integer()) {
            c.add(rw, fmt::format("GPU {} is not a GPU id", show(x)));
          } else if (long long id = x.get<long long>(); id < 0 || id > kMaxGpuId) {
            c.add(rw, fmt::format("GPU {} is not a GPU id (0..{})", id, kMaxGpuId));
          } else if (!(node & (GpuMask{1} << id))) {
            outside.push_back(static_cast<int>(id));
          } else {
            res.gpus |= GpuMask{1} << id;
            res.gpu_list.push_back(static_cast<int>(id));
          }
        }
      }
      auto js = rj.find("jobs");
      if (js == rj.end() || !js->is_array()) {
        c.add(rw, "needs \"jobs\", a list of job ids");
      } else {
        for (const json& x : *js) {
          auto it = x.is_string() ? plan.index.find(x.get<std::string>()) : plan.index.end();
          if (it == plan.index.end()) {
            c.add(rw, fmt::format("job {} is not in the plan", show(x)));
          } else {
            res.jobs.push_back(it->second);
            plan.reservations_of[it->second].push_back(r);
          }
        }
      }
      // A plan written for the whole node may be run on part of it: such GPUs do not exist here.
      if (!outside.empty())
        out.warnings.push_back(fmt::format("{}: {}: GPUs {} are not among --gpus {}; the reservation ignores them",
                                           file, rw, py_list(outside), py_list(node_gpus)));
      plan.reservations.push_back(std::move(res));
    }
  }

  // Cycles through deps (and produced_by, for jobs that wait on files).
  if (out.errors.empty()) {
    size_t n = plan.jobs.size();
    std::vector<std::vector<size_t>> edges(n);
    for (size_t i = 0; i < n; ++i) {
      for (const Dep& d : plan.jobs[i].deps)
        if (d.kind != Dep::Kind::File) edges[i].push_back(d.job);
      if (plan.jobs[i].produced_by && plan.jobs[i].has_file_dep()) edges[i].push_back(*plan.jobs[i].produced_by);
    }
    std::vector<char> color(n, 0);  // 0 new, 1 on stack, 2 done
    std::vector<std::pair<size_t, size_t>> stack;  // (node, next edge)
    int cycles = 0;
    for (size_t root = 0; root < n && cycles < 20; ++root) {
      if (color[root]) continue;
      stack.push_back({root, 0});
      color[root] = 1;
      while (!stack.empty()) {
        auto& [v, e] = stack.back();
        if (e == edges[v].size()) {
          color[v] = 2;
          stack.pop_back();
          continue;
        }
        size_t w = edges[v][e++];
        if (color[w] == 0) {
          color[w] = 1;
          stack.push_back({w, 0});
        } else if (color[w] == 1 && cycles < 20) {
          std::string path;
          size_t k = stack.size();
          while (stack[k - 1].first != w) --k;
          for (size_t s = k - 1; s < stack.size(); ++s) path += plan.jobs[stack[s].first].id + " -> ";
          path += plan.jobs[w].id;
          c.add(fmt::format("job '{}'", plan.jobs[w].id), "dependency cycle: " + path);
          ++cycles;
        }
      }
    }
  }

  if (out.errors.empty()) out.plan = std::move(plan);
  return out;
}

PlanLoad load_plan(const std::string& path, const std::vector<int>& node_gpus) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    PlanLoad out;
    out.errors.push_back(fmt::format("{}: cannot read the plan: {}", path, std::strerror(errno)));
    return out;
  }
  // One buffer of the file's size: a plan of a million jobs is 150 MB of text.
  std::string text;
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    text.resize(static_cast<size_t>(size));
    in.read(text.data(), size);
    text.resize(static_cast<size_t>(in.gcount()));
  }
  return parse_plan(text, path, node_gpus);
}

}  // namespace gpuq
