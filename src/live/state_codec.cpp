// The state file's codec: simdjson reads it, the original's layout is written. An
// entry's fields are read and written by walking their table (core/state_fields.h).
#include "gpuq/live/state_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "gpuq/core/json_read.h"
#include "gpuq/core/state_fields.h"

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

// One member of an entry into `s`, or EntryError (`bad` words it): a field of the table
// (state_fields.h), checked as its kind says, or an unknown one, kept as found in
// `extra`. Returns the field's row, or null for an unknown one.
template <typename Bad>
const StateField* decode_field(std::string_view key, element val, JobState& s, const Bad& bad) {
  const StateField* f = find_state_field(key);
  if (!f) {
    s.extra[std::string(key)] = to_ordered_json(val);  // kept as found, written back
    return f;
  }
  auto kind = [&] { return json_kind(val, false); };
  if (f->kind == StateKind::Status) {
    if (!val.is_string()) throw bad(fmt::format("\"{}\" must be a string, not {}", key, kind()));
    auto st = parse_status(std::string_view(val));
    if (!st)
      throw bad(fmt::format("unknown status \"{}\" (expected pending, running, done, failed, blocked or held)",
                            std::string_view(val)));
    s.*state_member<Status>(*f) = *st;
    return f;
  }
  if (val.is_null()) return f;  // null in a field gpuq knows is as good as absent
  switch (f->kind) {
    case StateKind::Status:
      break;  // read above
    case StateKind::GpuList: {
      if (!val.is_array()) throw bad(fmt::format("\"{}\" must be a list of GPU ids, not {}", key, kind()));
      std::vector<int> g;
      for (element x : simdjson::dom::array(val)) {
        if (!json_is_integer(x) || as_integer(x) < 0 || as_integer(x) > 63)
          throw bad(fmt::format("\"{}\" holds {}, not a GPU id", key, to_ordered_json(x).dump()));
        g.push_back(static_cast<int>(as_integer(x)));
      }
      s.*state_member<std::optional<std::vector<int>>>(*f) = std::move(g);
      break;
    }
    case StateKind::Integer:
      if (!json_is_integer(val)) throw bad(fmt::format("\"{}\" must be a whole number, not {}", key, kind()));
      s.*state_member<std::optional<long long>>(*f) = as_integer(val);
      break;
    case StateKind::Bytes:
      if (!json_is_integer(val) || as_integer(val) < 0)
        throw bad(fmt::format("\"{}\" must be a whole number of bytes, not {}", key, kind()));
      s.*state_member<std::optional<long long>>(*f) = as_integer(val);
      break;
    case StateKind::Unsigned: {
      bool whole = val.type() == element_type::UINT64 || (val.type() == element_type::INT64 && int64_t(val) >= 0);
      if (!whole) throw bad(fmt::format("\"{}\" must be a whole number, not {}", key, kind()));
      s.*state_member<std::optional<unsigned long long>>(*f) =
          val.type() == element_type::UINT64 ? uint64_t(val) : static_cast<uint64_t>(int64_t(val));
      break;
    }
    case StateKind::UnixSeconds:
      if (!json_is_number(val))
        throw bad(fmt::format("\"{}\" must be a number (unix seconds), not {}", key, kind()));
      s.*state_member<std::optional<double>>(*f) = json_as_double(val);
      break;
    case StateKind::Fraction:
      if (!json_is_number(val) || !(json_as_double(val) >= 0 && json_as_double(val) <= 1))
        throw bad(fmt::format("\"{}\" must be a number from 0 to 1, not {}", key, json_is_number(val) ? to_ordered_json(val).dump() : kind()));
      s.*state_member<std::optional<double>>(*f) = json_as_double(val);
      break;
    case StateKind::Text:
      if (!val.is_string()) throw bad(fmt::format("\"{}\" must be a string, not {}", key, kind()));
      s.*state_member<std::optional<std::string>>(*f) = std::string(std::string_view(val));
      break;
    case StateKind::Flag:
      if (!val.is_bool()) throw bad(fmt::format("\"{}\" must be true or false, not {}", key, kind()));
      s.*state_member<std::optional<bool>>(*f) = bool(val);
      break;
  }
  return f;
}

// One entry of the state, or EntryError. `scratch` holds its members.
JobState decode_entry(std::string_view id, element v, Members& scratch) {
  auto bad = [&](const std::string& what) { return EntryError{fmt::format("job '{}': {}", id, what)}; };
  if (!v.is_object()) throw bad(fmt::format("the entry must be an object, not {}", json_kind(v, false)));
  JobState s;
  bool has_status = false;
  members(simdjson::dom::object(v), scratch);
  for (const auto& [key, val] : scratch) {
    const StateField* f = decode_field(key, val, s, bad);
    has_status = has_status || (f && f->kind == StateKind::Status);
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
    for (const auto& [id, s] : state.entries()) {
#pragma GCC unroll 32  // each row a constant: only the times' members are looked at
      for (const StateField& f : kStateFields)
        if (f.kind == StateKind::UnixSeconds || f.kind == StateKind::Fraction)
          if (const std::optional<double>& d = s.*state_member<std::optional<double>>(f)) values.emplace_back(*d);
    }
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

// A list of GPU ids as nlohmann/json's dump(1) writes it inside an entry.
void put_gpus(std::string& out, const std::vector<int>& gpus) {
  if (gpus.empty()) {
    out += "[]";
    return;
  }
  out += "[\n   ";
  for (size_t k = 0; k < gpus.size(); ++k) {
    if (k) out += ",\n   ";
    put_integer(out, gpus[k]);
  }
  out += "\n  ]";
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
    out += ": {";
    const char* separator = "\n  \"";  // before the first field; ",\n  \"" before the others
    auto field = [&](std::string_view name) {
      out += separator;
      separator = ",\n  \"";
      out += name;
      out += "\": ";
    };
    // Unrolled, each row is a constant, and the switch and its member fold away: the code a
    // hand-written line per field would give.
#pragma GCC unroll 32
    for (const StateField& f : kStateFields) {
      switch (f.kind) {
        case StateKind::Status:
          field(f.name);
          out += '"';
          out += status_name(s.*state_member<Status>(f));
          out += '"';
          break;
        case StateKind::GpuList:
          if (const auto& gpus = s.*state_member<std::optional<std::vector<int>>>(f)) {
            field(f.name);
            put_gpus(out, *gpus);
          }
          break;
        case StateKind::Integer:
        case StateKind::Bytes:
          if (const auto& v = s.*state_member<std::optional<long long>>(f)) field(f.name), put_integer(out, *v);
          break;
        case StateKind::Unsigned:
          if (const auto& v = s.*state_member<std::optional<unsigned long long>>(f)) field(f.name), put_integer(out, *v);
          break;
        case StateKind::UnixSeconds:
        case StateKind::Fraction:
          if (s.*state_member<std::optional<double>>(f)) field(f.name), doubles.put_next(out);
          break;
        case StateKind::Text:
          if (const auto& v = s.*state_member<std::optional<std::string>>(f)) field(f.name), put_string(out, *v);
          break;
        case StateKind::Flag:
          if (const auto& v = s.*state_member<std::optional<bool>>(f)) field(f.name), out += *v ? "true" : "false";
          break;
      }
    }
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
