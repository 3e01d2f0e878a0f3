#include "gpuq/plan.h"
#include "gpuq/async.h"

#include "gpuq/json_error.h"
#include "gpuq/json_fast.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gpuq {

using nlohmann::json;

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
  // plan.jobs missed the cache at every step (12 ms of the load at 100,000 jobs).
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
              c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

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

// The fields of a job that gpuq reads (the full parser drops the others as it meets them).
bool known_job_key(std::string_view k) {
  for (std::string_view known : {"id", "script", "gpus", "priority", "est_hours", "deps", "produced_by",
                                 "produced_at_frac", "first_look_frac"})
    if (k == known) return true;
  return false;
}

// One job of the fast path, read into `job` and `producer` (its raw produced_by).
void read_job_fast(FastJson& r, std::string& scratch, size_t node_size, Job& job,
                   std::optional<std::string>& producer) {
  auto fail = [] { throw FastJsonFail{}; };
  auto non_negative = [&](const FastNumber& n) {
    if (n.as_double() < 0) fail();
    return n.as_double();
  };
  KeysSeen seen;
  r.object(scratch, [&](std::string_view key) {
    if (key == "id") {
      seen.once(1);
      std::string_view id = r.string(scratch);
      if (!valid_job_id(id)) fail();
      job.id = id;
    } else if (key == "script") {
      seen.once(2);
      std::string_view v = r.string(scratch);
      if (v.empty()) fail();
      job.script = v;
    } else if (key == "gpus") {
      seen.once(4);
      FastNumber n = r.number();
      if (!n.integer() || n.as_double() < 0 || n.as_double() > 64) fail();
      job.gpus = static_cast<int>(n.as_double());
    } else if (key == "priority") {
      seen.once(8);
      job.priority = r.number().as_double();
    } else if (key == "est_hours") {
      seen.once(16);
      job.est_hours = non_negative(r.number());
      job.est_given = true;
    } else if (key == "deps") {
      seen.once(32);
      r.array([&] { job.deps.push_back(parse_dep(r.string(scratch))); });
    } else if (key == "produced_by") {
      seen.once(64);
      if (r.peek() == 'n')
        r.null();
      else
        producer = std::string(r.string(scratch));
    } else if (key == "produced_at_frac") {
      seen.once(128);
      job.produced_at_frac = non_negative(r.number());
    } else if (key == "first_look_frac") {
      seen.once(256);
      if (r.peek() == 'n')
        r.null();
      else
        job.first_look_frac = non_negative(r.number());
    } else {
      r.skip_value();
    }
  });
  if (!seen.has(1) || !seen.has(2) || job.gpus > static_cast<int>(node_size)) fail();
}

// The jobs of the second half of the list, read on another core: from `from`, which
// should be the '{' of a job, to the ']' that closes the list.
struct JobsPart {
  std::vector<Job> jobs;
  std::vector<std::optional<std::string>> producers;
  const char* end = nullptr;  ///< just past the closing ']'
};

JobsPart read_jobs_part(std::string_view text, const char* from, size_t node_size) {
  JobsPart part;
  FastJson r(text);
  r.seek(from);
  std::string scratch;
  size_t expect = static_cast<size_t>(text.data() + text.size() - from) / 100 + 16;
  part.jobs.reserve(expect);
  part.producers.reserve(expect);
  do {
    part.jobs.emplace_back();
    part.producers.emplace_back();
    read_job_fast(r, scratch, node_size, part.jobs.back(), part.producers.back());
  } while (r.consume(','));
  r.expect(']');
  part.end = r.pos();
  return part;
}

// A place to cut a long list of jobs in two: the '{' of an element that follows
// "}," past the middle of the text. It is only a guess (the bytes could lie inside a
// string); the reader of the first half takes the second half's jobs only if it meets
// an element starting exactly there, which makes the guess right.
const char* split_point(std::string_view text) {
  size_t k = text.find("},", text.size() / 2);
  while (k != std::string_view::npos) {
    size_t q = k + 2;
    while (q < text.size() && (text[q] == ' ' || text[q] == '\n' || text[q] == '\r' || text[q] == '\t')) ++q;
    if (q < text.size() && text[q] == '{') return text.data() + q;
    k = text.find("},", k + 2);
  }
  return nullptr;
}

// The fast path: reads the jobs straight from the text with FastJson. It takes
// only plans with nothing to report; at the first problem or anything unusual it
// throws FastJsonFail and parse_plan reads the text again with nlohmann/json,
// which finds every problem and words it. Both readers fill the same fields.
void read_jobs_fast(std::string_view text, const std::vector<int>& node_gpus, Plan& plan,
                    std::vector<std::optional<std::string>>& raw_producer, json& reservations, bool& split_used) {
  FastJson r(text);
  std::string scratch;
  auto fail = [] { throw FastJsonFail{}; };
  auto id_of = [&](size_t k) -> const std::string& { return plan.jobs[k].id; };
  auto add = [&](Job&& job, std::optional<std::string>&& producer) {
    size_t i = plan.jobs.size();
    if (plan.index.find_or_insert(job.id, i, id_of) != IdIndex::npos) fail();  // a duplicate
    plan.jobs.push_back(std::move(job));
    raw_producer.push_back(std::move(producer));
  };
  // A long plan: the second half is read on another core while this one reads the first.
  const char* split = text.size() >= kPlanSplitBytes ? split_point(text) : nullptr;
  std::future<JobsPart> second;
  if (split) second = on_another_core([text, split, size = node_gpus.size()] { return read_jobs_part(text, split, size); });
  auto read_jobs = [&] {
    r.expect('[');
    if (r.consume(']')) return;
    do {
      if (split && r.peek() == '{' && r.pos() == split) {
        JobsPart part = second.get();  // its FastJsonFail is this text's
        for (size_t k = 0; k < part.jobs.size(); ++k) add(std::move(part.jobs[k]), std::move(part.producers[k]));
        r.seek(part.end);
        split = nullptr;
        split_used = true;
        return;
      }
      Job job;
      std::optional<std::string> producer;
      read_job_fast(r, scratch, node_gpus.size(), job, producer);
      add(std::move(job), std::move(producer));
    } while (r.consume(','));
    r.expect(']');
  };

  if (r.peek() == '[') {
    read_jobs();
  } else {
    KeysSeen seen;
    r.object(scratch, [&](std::string_view key) {
      if (key == "jobs") {
        seen.once(1);
        read_jobs();
      } else if (key == "reservations") {
        seen.once(2);
        try {
          reservations = json::parse(r.skip_value());
        } catch (const json::exception&) {
          fail();
        }
      } else {
        r.skip_value();
      }
    });
    if (!seen.has(1) || !(reservations.is_null() || reservations.is_array())) fail();
  }
  r.finish();
}

}  // namespace

PlanLoad parse_plan(std::string_view text, const std::string& file, const std::vector<int>& node_gpus, bool fast) {
  PlanLoad out;
  Checker c{file, out.errors};
  Plan plan;
  // A job takes 100+ bytes of JSON: room for them all at once, no moves as they arrive.
  size_t expect_jobs = text.size() / 100 + 16;
  plan.index.reserve(expect_jobs);
  plan.jobs.reserve(expect_jobs);
  // produced_by kept until every id is known (deps keep their target, and find their job then too).
  std::vector<std::optional<std::string>> raw_producer;
  raw_producer.reserve(expect_jobs);
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
    raw_producer.emplace_back();
    bool index_it = false;
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
      if (const Job* first = plan.find(job.id))
        c.add(fmt::format("job '{}'", job.id),
              fmt::format("duplicate id (job #{} and job #{})", first - plan.jobs.data() + 1, i + 1));
      else
        index_it = true;
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
            job.deps.push_back(parse_dep(d.get<std::string>()));
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
    if (index_it) plan.index.insert(plan.jobs.back().id, i);
  };

  json doc, res_fast;
  const json* res_json = nullptr;
  try {
    if (!fast) throw FastJsonFail{};
    read_jobs_fast(text, node_gpus, plan, raw_producer, res_fast, out.split);
    if (res_fast.is_array()) res_json = &res_fast;
    out.fast_path = true;
  } catch (const FastJsonFail&) {
    fast = false;
    out.split = false;
  }
  if (!fast) {
    // Start again with the full parser, which reports every problem.
    plan = Plan();
    plan.index.reserve(expect_jobs);
    plan.jobs.reserve(expect_jobs);
    raw_producer.clear();
    bool top_is_array = false, top_is_object = false, in_jobs = false;
    std::string top_key, job_key;
    json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
      using E = json::parse_event_t;
      if (depth == 0 && event == E::array_start) top_is_array = in_jobs = true;
      if (depth == 0 && event == E::object_start) top_is_object = true;
      if (depth == 1 && event == E::key && top_is_object) top_key = parsed.get<std::string>();
      if (depth == 1 && event == E::array_start && top_is_object && top_key == "jobs") in_jobs = true;
      int job_depth = top_is_array ? 1 : 2;
      if (in_jobs && depth == job_depth + 1 && event == E::key) job_key = parsed.get<std::string>();
      // What nobody reads (a member of the plan or of a job with a name gpuq does not know)
      // is dropped piece by piece as it is parsed. Kept, a list of objects in it cost
      // nlohmann/json's callback parser a scan of the whole list at the end of each object:
      // 8 s for 100,000 of them.
      bool unread = (top_is_object && !in_jobs && depth >= 2 && top_key != "jobs" && top_key != "reservations") ||
                    (in_jobs && depth >= job_depth + 2 && !known_job_key(job_key));
      if (unread && (event == E::object_end || event == E::array_end || event == E::value)) return false;
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
  }

  // Deps and producers, now that every id is known.
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    Job& job = plan.jobs[i];
    size_t kept = 0;
    for (Dep& dep : job.deps) {
      if (dep.kind == Dep::Kind::File) {
        if (dep.target.empty()) {
          c.add(where(i), fmt::format("dep \"{}\" names no path", dep_text(dep)));
          continue;
        }
      } else {
        const Job* target = plan.find(dep.target);
        if (!target) {
          c.add(where(i), fmt::format("dep \"{}\" names no job of the plan", dep_text(dep)));
          continue;
        }
        dep.job = static_cast<size_t>(target - plan.jobs.data());
      }
      if (&job.deps[kept] != &dep) job.deps[kept] = std::move(dep);
      ++kept;
    }
    job.deps.resize(kept);
    if (raw_producer[i]) {
      const Job* p = plan.find(*raw_producer[i]);
      if (!p)
        c.add(where(i), fmt::format("\"produced_by\" names \"{}\", no job of the plan", *raw_producer[i]));
      else if (p == &job)
        c.add(where(i), "\"produced_by\" names the job itself: it would wait for its own output");
      else
        job.produced_by = static_cast<size_t>(p - plan.jobs.data());
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
          const Job* member = x.is_string() ? plan.find(x.get<std::string>()) : nullptr;
          if (!member) {
            c.add(rw, fmt::format("job {} is not in the plan", show(x)));
          } else {
            size_t m = static_cast<size_t>(member - plan.jobs.data());
            res.jobs.push_back(m);
            plan.reservations_of[m].push_back(r);
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
          c.add(fmt::format("job '{}'", plan.jobs[w].id), "dependency cycle: " + path);
          ++cycles;
        }
      }
    }
  }

  if (out.errors.empty()) {
    rank_jobs(plan);
    out.plan = std::move(plan);
  }
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
