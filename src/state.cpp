#include "gpuq/state.h"

#include <fmt/format.h>

#include "gpuq/json_error.h"

namespace gpuq {

using ojson = nlohmann::ordered_json;

namespace {
constexpr const char* kNames[] = {"pending", "running", "done", "failed", "blocked", "held"};
}

const char* status_name(Status s) { return kNames[static_cast<int>(s)]; }

std::optional<Status> parse_status(std::string_view name) {
  for (int i = 0; i < 6; ++i)
    if (name == kNames[i]) return static_cast<Status>(i);
  return std::nullopt;
}

const JobState* State::find(const std::string& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

JobState* State::find(const std::string& id) {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

JobState& State::at(const std::string& id) {
  auto it = index_.find(id);
  if (it != index_.end()) return entries_[it->second].second;
  index_.emplace(id, entries_.size());
  entries_.push_back({id, JobState{}});
  return entries_.back().second;
}

void State::set(const std::string& id, JobState s) { at(id) = std::move(s); }

Status State::status_of(const std::string& id) const {
  const JobState* s = find(id);
  return s ? s->status : Status::Pending;
}

namespace {

std::string kind(const ojson& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "a number";
}

}  // namespace

namespace {

struct EntryError {
  std::string what;
};

// One entry of the state, or EntryError.
JobState decode_entry(const std::string& id, const ojson& v) {
  auto bad = [&](const std::string& what) { return EntryError{fmt::format("job '{}': {}", id, what)}; };
  if (!v.is_object()) throw bad("the entry must be an object, not " + kind(v));
  JobState s;
  for (auto& [key, val] : v.items()) {
    if (key == "status") {
      if (!val.is_string()) throw bad("\"status\" must be a string, not " + kind(val));
      auto st = parse_status(val.get<std::string>());
      if (!st)
        throw bad(fmt::format("unknown status \"{}\" (expected pending, running, done, failed, blocked or held)",
                              val.get<std::string>()));
      s.status = *st;
    } else if (val.is_null() && key != "status") {
      if (key != "gpus" && key != "pid" && key != "exit" && key != "attempts" && key != "start" && key != "end" &&
          key != "kill_sent" && key != "pid_start")
        s.extra[key] = val;
    } else if (key == "gpus") {
      if (!val.is_array()) throw bad("\"gpus\" must be a list of GPU ids, not " + kind(val));
      std::vector<int> g;
      for (const auto& x : val) {
        if (!x.is_number_integer() || x.get<long long>() < 0 || x.get<long long>() > 63)
          throw bad(fmt::format("\"gpus\" holds {}, not a GPU id", x.dump()));
        g.push_back(x.get<int>());
      }
      s.gpus = std::move(g);
    } else if (key == "pid" || key == "exit" || key == "attempts") {
      if (!val.is_number_integer()) throw bad(fmt::format("\"{}\" must be a whole number, not {}", key, kind(val)));
      (key == "pid" ? s.pid : key == "exit" ? s.exit : s.attempts) = val.get<long long>();
    } else if (key == "start" || key == "end" || key == "kill_sent") {
      if (!val.is_number()) throw bad(fmt::format("\"{}\" must be a number (unix seconds), not {}", key, kind(val)));
      (key == "start" ? s.start : key == "end" ? s.end : s.kill_sent) = val.get<double>();
    } else if (key == "pid_start") {
      if (!val.is_number_unsigned()) throw bad("\"pid_start\" must be a whole number, not " + kind(val));
      s.pid_start = val.get<unsigned long long>();
    } else {
      s.extra[key] = val;
    }
  }
  if (!v.contains("status")) throw bad("the entry has no \"status\"");
  if (s.status == Status::Running && !s.pid) throw bad("a running entry needs a \"pid\"");
  return s;
}

}  // namespace

StateLoad parse_state(std::string_view text, const std::string& file) {
  StateLoad out;
  State state;
  // Entries are decoded as they are parsed and dropped from the document: an object
  // of 100,000 entries is never built (ordered_json's lookups would make that quadratic).
  bool top_object = false;
  std::string key;
  ojson::parser_callback_t cb = [&](int depth, ojson::parse_event_t event, ojson& parsed) {
    using E = ojson::parse_event_t;
    if (depth == 0 && event == E::object_start) top_object = true;
    if (!top_object) return true;
    if (depth == 1 && event == E::key) key = parsed.get<std::string>();
    if (depth == 1 && (event == E::object_end || event == E::array_end || event == E::value)) {
      state.set(key, decode_entry(key, parsed));
      return false;
    }
    return true;
  };
  ojson doc;
  try {
    doc = ojson::parse(text.begin(), text.end(), cb);
  } catch (const EntryError& e) {
    out.error = fmt::format("{}: {}", file, e.what);
    return out;
  } catch (const ojson::exception& e) {
    JsonErrorPlace place = describe_json_error(text, e);
    out.error = place.why == "the file is empty" ? fmt::format("{}: the file is empty", file)
                                                 : fmt::format("{}: {}: not valid JSON ({})", file, place.where, place.why);
    return out;
  }
  if (!doc.is_object()) {
    out.error = fmt::format("{}: the state is an object keyed by job id, not {}", file, kind(doc));
    return out;
  }
  out.state = std::move(state);
  return out;
}

std::string dump_state(const State& state) {
  // The original's layout (json.dumps(state, indent=1)), written entry by entry.
  std::string out = "{";
  bool first = true;
  for (const auto& [id, s] : state.entries()) {
    ojson e = ojson::object();
    e["status"] = status_name(s.status);
    if (s.gpus) e["gpus"] = *s.gpus;
    if (s.pid) e["pid"] = *s.pid;
    if (s.start) e["start"] = *s.start;
    if (s.end) e["end"] = *s.end;
    if (s.exit) e["exit"] = *s.exit;
    if (s.attempts) e["attempts"] = *s.attempts;
    if (s.pid_start) e["pid_start"] = *s.pid_start;
    if (s.kill_sent) e["kill_sent"] = *s.kill_sent;
    for (auto& [k, v] : s.extra.items()) e[k] = v;
    out += first ? "\n " : ",\n ";
    first = false;
    out += ojson(id).dump();
    out += ": ";
    for (char ch : e.dump(1)) {
      out += ch;
      if (ch == '\n') out += ' ';
    }
  }
  out += first ? "}\n" : "\n}\n";
  return out;
}

}  // namespace gpuq
