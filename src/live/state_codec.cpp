// The state file's codec: simdjson reads it, the original's layout is written.
#include "gpuq/live/state_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "gpuq/core/json_read.h"

namespace gpuq {

using ojson = nlohmann::ordered_json;

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

struct EntryError {
  std::string what;
};

using Members = std::vector<std::pair<std::string_view, element>>;

// The members of an entry into `out`, each name once with its last value, where the name
// first appeared (as nlohmann/json's ordered_json and Python's dict keep a repeated name).
void members(simdjson::dom::object o, Members& out) {
  out.clear();
  for (simdjson::dom::key_value_pair m : o) {
    auto same = std::find_if(out.begin(), out.end(), [&](const auto& seen) { return seen.first == m.key; });
    if (same != out.end())
      same->second = m.value;
    else
      out.emplace_back(m.key, m.value);
  }
}

long long as_integer(element v) {
  return v.type() == element_type::INT64 ? int64_t(v) : static_cast<long long>(uint64_t(v));
}

// The fields gpuq knows besides "status"; null in one of them is as good as absent.
bool known_field(std::string_view key) {
  return key == "gpus" || key == "pid" || key == "exit" || key == "attempts" || key == "start" || key == "end" ||
         key == "kill_sent" || key == "pid_start" || key == "warn_sent" || key == "outcome" || key == "log_size" ||
         key == "log_grew" || key == "gpus_busy" || key == "gpus_read" || key == "hung_noted" || key == "reason" ||
         key == "requeue" || key == "removed" || key == "slurm_id";
}

// One field of an entry into `s`, or EntryError (`bad` words it).
template <typename Bad>
void decode_field(std::string_view key, element val, JobState& s, const Bad& bad) {
  const char* kind = json_kind(val, false);
  if (key == "status") {
    if (!val.is_string()) throw bad(fmt::format("\"status\" must be a string, not {}", kind));
    auto st = parse_status(std::string_view(val));
    if (!st)
      throw bad(fmt::format("unknown status \"{}\" (expected pending, running, done, failed, blocked or held)",
                            std::string_view(val)));
    s.status = *st;
  } else if (val.is_null() && known_field(key)) {
    // absent
  } else if (key == "gpus") {
    if (!val.is_array()) throw bad(fmt::format("\"gpus\" must be a list of GPU ids, not {}", kind));
    std::vector<int> g;
    for (element x : simdjson::dom::array(val)) {
      if (!json_is_integer(x) || as_integer(x) < 0 || as_integer(x) > 63)
        throw bad(fmt::format("\"gpus\" holds {}, not a GPU id", to_ordered_json(x).dump()));
      g.push_back(static_cast<int>(as_integer(x)));
    }
    s.gpus = std::move(g);
  } else if (key == "pid" || key == "exit" || key == "attempts" || key == "slurm_id") {
    if (!json_is_integer(val)) throw bad(fmt::format("\"{}\" must be a whole number, not {}", key, kind));
    (key == "pid" ? s.pid : key == "exit" ? s.exit : key == "slurm_id" ? s.slurm_id : s.attempts) = as_integer(val);
  } else if (key == "start" || key == "end" || key == "kill_sent" || key == "warn_sent" || key == "log_grew" ||
             key == "gpus_busy" || key == "gpus_read" || key == "hung_noted" || key == "requeue" ||
             key == "removed") {
    if (!json_is_number(val))
      throw bad(fmt::format("\"{}\" must be a number (unix seconds), not {}", key, kind));
    (key == "start"       ? s.start
     : key == "end"       ? s.end
     : key == "kill_sent" ? s.kill_sent
     : key == "warn_sent" ? s.warn_sent
     : key == "log_grew"  ? s.log_grew
     : key == "gpus_busy" ? s.gpus_busy
     : key == "gpus_read" ? s.gpus_read
     : key == "requeue"   ? s.requeue
     : key == "removed"   ? s.removed
                          : s.hung_noted) = json_as_double(val);
  } else if (key == "log_size") {
    if (!json_is_integer(val) || as_integer(val) < 0)
      throw bad(fmt::format("\"log_size\" must be a whole number of bytes, not {}", kind));
    s.log_size = as_integer(val);
  } else if (key == "outcome" || key == "reason") {
    if (!val.is_string()) throw bad(fmt::format("\"{}\" must be a string, not {}", key, kind));
    (key == "outcome" ? s.outcome : s.reason) = std::string(std::string_view(val));
  } else if (key == "pid_start") {
    bool whole = val.type() == element_type::UINT64 || (val.type() == element_type::INT64 && int64_t(val) >= 0);
    if (!whole) throw bad(fmt::format("\"pid_start\" must be a whole number, not {}", kind));
    s.pid_start = val.type() == element_type::UINT64 ? uint64_t(val) : static_cast<uint64_t>(int64_t(val));
  } else {
    s.extra[std::string(key)] = to_ordered_json(val);  // kept as found, written back
  }
}

// One entry of the state, or EntryError. `scratch` holds its members.
JobState decode_entry(std::string_view id, element v, Members& scratch) {
  auto bad = [&](const std::string& what) { return EntryError{fmt::format("job '{}': {}", id, what)}; };
  if (!v.is_object()) throw bad(fmt::format("the entry must be an object, not {}", json_kind(v, false)));
  JobState s;
  bool has_status = false;
  members(simdjson::dom::object(v), scratch);
  for (const auto& [key, val] : scratch) {
    decode_field(key, val, s, bad);
    has_status = has_status || key == "status";
  }
  if (!has_status) throw bad("the entry has no \"status\"");
  if (s.status == Status::Running && !s.pid) throw bad("a running entry needs a \"pid\"");
  return s;
}

}  // namespace

StateLoad parse_state(std::string_view text, const std::string& file) {
  StateLoad out;
  // One parser per thread, kept: `run` reads the state at every tick, into the same buffers.
  thread_local simdjson::dom::parser parser;
  JsonText json = parse_json(parser, text);
  if (!json.ok()) {
    out.error = json.why == "the file is empty" ? fmt::format("{}: the file is empty", file)
                                                : fmt::format("{}: {}: not valid JSON ({})", file, json.where, json.why);
    return out;
  }
  if (!json.root.is_object()) {
    out.error = fmt::format("{}: the state is an object keyed by job id, not {}", file, json_kind(json.root, false));
    return out;
  }
  simdjson::dom::object entries(json.root);
  State state;
  state.reserve(entries.size());
  Members scratch;
  try {
    for (auto [id, entry] : entries) state.set(std::string(id), decode_entry(id, entry, scratch));
  } catch (const EntryError& e) {
    out.error = fmt::format("{}: {}", file, e.what);
    return out;
  }
  out.state = std::move(state);
  return out;
}

namespace {

// A string as nlohmann/json's dump writes it.
void put_string(std::string& out, std::string_view v) {
  bool plain = true;
  for (char ch : v) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7F || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (!plain) {
    out += ojson(std::string(v)).dump();
    return;
  }
  out += '"';
  out += v;
  out += '"';
}

// The doubles of a state as nlohmann/json's dump writes them (the codec test compares
// dump_state with it), in the order dump_state writes them: one dump of a list of them
// all, through its public API, is one serializer instead of one per number.
class DoubleTexts {
 public:
  explicit DoubleTexts(const State& state) {
    nlohmann::json list = nlohmann::json::array();
    auto& values = list.get_ref<nlohmann::json::array_t&>();
    values.reserve(state.entries().size() * 2);
    for (const auto& [id, s] : state.entries())
      for (const auto* d : {&s.start, &s.end, &s.kill_sent, &s.warn_sent, &s.requeue, &s.removed, &s.log_grew,
                            &s.gpus_busy, &s.gpus_read, &s.hung_noted})
        if (*d) values.emplace_back(**d);
    text_ = list.dump();  // "[1.0,2.5,null]": NaN and infinities are null, as dump writes them
  }
  /// Appends the next double's text to `out`.
  void put_next(std::string& out) {
    size_t end = text_.find_first_of(",]", pos_);
    out.append(text_, pos_, end - pos_);
    pos_ = end + 1;
  }

 private:
  std::string text_;
  size_t pos_ = 1;
};

template <typename T>
void put_integer(std::string& out, T v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace

std::string dump_state(const State& state) {
  // The original's layout (json.dumps(state, indent=1)): what nlohmann/json's
  // dump(1) writes, entry by entry, written here directly rather than through a
  // value per entry (the codec test compares the two).
  DoubleTexts doubles(state);
  std::string out = "{";
  out.reserve(state.entries().size() * 140 + 4);
  bool first = true;
  for (const auto& [id, s] : state.entries()) {
    out += first ? "\n " : ",\n ";
    first = false;
    put_string(out, id);
    out += ": {\n  \"status\": \"";
    out += status_name(s.status);
    out += '"';
    auto field = [&](const char* name) {
      out += ",\n  \"";
      out += name;
      out += "\": ";
    };
    if (s.gpus) {
      field("gpus");
      if (s.gpus->empty()) {
        out += "[]";
      } else {
        out += "[\n   ";
        for (size_t k = 0; k < s.gpus->size(); ++k) {
          if (k) out += ",\n   ";
          put_integer(out, (*s.gpus)[k]);
        }
        out += "\n  ]";
      }
    }
    if (s.pid) field("pid"), put_integer(out, *s.pid);
    if (s.start) field("start"), doubles.put_next(out);
    if (s.end) field("end"), doubles.put_next(out);
    if (s.exit) field("exit"), put_integer(out, *s.exit);
    if (s.attempts) field("attempts"), put_integer(out, *s.attempts);
    if (s.pid_start) field("pid_start"), put_integer(out, *s.pid_start);
    if (s.kill_sent) field("kill_sent"), doubles.put_next(out);
    if (s.warn_sent) field("warn_sent"), doubles.put_next(out);
    if (s.requeue) field("requeue"), doubles.put_next(out);
    if (s.removed) field("removed"), doubles.put_next(out);
    if (s.outcome) field("outcome"), put_string(out, *s.outcome);
    if (s.reason) field("reason"), put_string(out, *s.reason);
    if (s.log_size) field("log_size"), put_integer(out, *s.log_size);
    if (s.log_grew) field("log_grew"), doubles.put_next(out);
    if (s.gpus_busy) field("gpus_busy"), doubles.put_next(out);
    if (s.gpus_read) field("gpus_read"), doubles.put_next(out);
    if (s.hung_noted) field("hung_noted"), doubles.put_next(out);
    if (s.slurm_id) field("slurm_id"), put_integer(out, *s.slurm_id);
    for (auto& [k, v] : s.extra.items()) {
      out += ",\n  ";
      put_string(out, k);
      out += ": ";
      for (char ch : v.dump(1)) {
        out += ch;
        if (ch == '\n') out += "  ";
      }
    }
    out += "\n }";
  }
  out += first ? "}\n" : "\n}\n";
  return out;
}

}  // namespace gpuq
