#include "gpuq/state.h"

#include <fmt/format.h>

#include "gpuq/json_error.h"
#include "gpuq/json_fast.h"

#include <charconv>
#include <climits>
#include <cmath>

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

size_t State::position(std::string_view id) const {
  return index_.find(id, [&](size_t k) -> const std::string& { return entries_[k].first; });
}

const JobState* State::find(const std::string& id) const {
  size_t p = position(id);
  return p == IdIndex::npos ? nullptr : &entries_[p].second;
}

JobState* State::find(const std::string& id) {
  size_t p = position(id);
  return p == IdIndex::npos ? nullptr : &entries_[p].second;
}

JobState& State::at(const std::string& id) {
  size_t p = position(id);
  if (p != IdIndex::npos) return entries_[p].second;
  entries_.push_back({id, JobState{}});
  index_.insert(id, entries_.size() - 1);
  bound_ = nullptr;  // the new entry may be a job's: map them again when asked
  return entries_.back().second;
}

void State::rebind(const Plan& plan) const {
  const size_t n = plan.jobs.size();
  slot_.assign(n, -1);
  if (plan.index.size() == n && entries_.size() < n) {
    // Fewer entries than jobs (a plan part done): each entry finds its job. A state written
    // by gpuq or the original lists them mostly in plan order, so the job after the last
    // one found is tried first, and the plan's index only when that guess is wrong.
    size_t guess = 0;
    for (size_t k = 0; k < entries_.size(); ++k) {
      const std::string& id = entries_[k].first;
      const Job* j = guess < n && plan.jobs[guess].id == id ? &plan.jobs[guess] : plan.find(id);
      if (!j) continue;  // a job the plan no longer has
      size_t p = static_cast<size_t>(j - plan.jobs.data());
      slot_[p] = static_cast<long>(k);
      guess = p + 1;
    }
  } else {
    // Each job finds its entry, the same way round.
    size_t guess = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::string& id = plan.jobs[i].id;
      size_t p = guess < entries_.size() && entries_[guess].first == id ? guess : position(id);
      if (p != IdIndex::npos) {
        slot_[i] = static_cast<long>(p);
        guess = p + 1;
      }
    }
  }
  bound_ = &plan;
  bound_serial_ = plan.serial;
}

void State::set(const Plan& plan, size_t job, JobState s) {
  if (JobState* e = of(plan, job)) {
    *e = std::move(s);
    return;
  }
  const std::string& id = plan.jobs[job].id;
  entries_.push_back({id, std::move(s)});
  index_.insert(id, entries_.size() - 1);
  slot_[job] = static_cast<long>(entries_.size() - 1);  // the other slots stay right
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

// The fast path of parse_state (see gpuq/json_fast.h): it takes only states with
// nothing to report and reads them as decode_entry does. At the first problem or
// anything unusual (duplicate fields, \u escapes) it throws FastJsonFail and the
// full parser reads the text again and words the problem.
State read_state_fast(std::string_view text) {
  FastJson r(text);
  State state;
  state.reserve(text.size() / 48 + 16);  // an entry takes 48+ bytes as the state is written
  std::string key_scratch, scratch;
  auto fail = [] { throw FastJsonFail{}; };
  auto whole = [&](const FastNumber& n) {
    if (n.kind == FastNumber::Kind::Float) fail();
    if (n.kind == FastNumber::Kind::Uint && n.u > static_cast<unsigned long long>(LLONG_MAX)) fail();
    return n.kind == FastNumber::Kind::Int ? n.i : static_cast<long long>(n.u);
  };
  r.object(key_scratch, [&](std::string_view entry_id) {
    std::string id(entry_id);
    JobState s;
    KeysSeen seen;
    r.object(scratch, [&](std::string_view key) {
      if (key == "status") {
        seen.once(1);
        auto st = parse_status(r.string(scratch));
        if (!st) fail();
        s.status = *st;
        return;
      }
      int bit = key == "gpus" ? 2 : key == "pid" ? 4 : key == "exit" ? 8 : key == "attempts" ? 16 : key == "start" ? 32
              : key == "end" ? 64 : key == "kill_sent" ? 128 : key == "pid_start" ? 256 : 0;
      if (bit) {
        seen.once(bit);
        if (r.peek() == 'n') {  // a known field that is null is as good as absent
          r.null();
          return;
        }
      }
      switch (bit) {
        case 2: {
          std::vector<int> g;
          r.array([&] {
            long long x = whole(r.number());
            if (x < 0 || x > 63) fail();
            g.push_back(static_cast<int>(x));
          });
          s.gpus = std::move(g);
          break;
        }
        case 4: s.pid = whole(r.number()); break;
        case 8: s.exit = whole(r.number()); break;
        case 16: s.attempts = whole(r.number()); break;
        case 32: s.start = r.number().as_double(); break;
        case 64: s.end = r.number().as_double(); break;
        case 128: s.kill_sent = r.number().as_double(); break;
        case 256: {
          FastNumber n = r.number();
          if (n.kind != FastNumber::Kind::Uint) fail();
          s.pid_start = n.u;
          break;
        }
        default: {
          std::string k(key);
          std::string_view raw = r.skip_value();
          if (s.extra.is_object() && s.extra.contains(k)) fail();
          try {
            s.extra[k] = ojson::parse(raw);
          } catch (const ojson::exception&) {
            fail();
          }
        }
      }
    });
    if (!seen.has(1) || (s.status == Status::Running && !s.pid)) fail();
    state.set(id, std::move(s));
  });
  r.finish();
  return state;
}

}  // namespace

StateLoad parse_state(std::string_view text, const std::string& file, bool fast) {
  StateLoad out;
  try {
    if (fast) {
      out.state = read_state_fast(text);
      out.fast_path = true;
      return out;
    }
  } catch (const FastJsonFail&) {
    // read it again with the full parser, for the message
  }
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

void put_double(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";  // as nlohmann/json writes it
    return;
  }
  char buf[64];
  char* end = nlohmann::detail::to_chars(buf, buf + sizeof buf, d);
  out.append(buf, end);
}

template <typename T>
void put_integer(std::string& out, T v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace

std::string dump_state(const State& state) {
  // The original's layout (json.dumps(state, indent=1)): what nlohmann/json's
  // dump(1) writes, entry by entry, written here directly (4x faster than
  // building a value per entry; the codec test compares the two).
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
    if (s.start) field("start"), put_double(out, *s.start);
    if (s.end) field("end"), put_double(out, *s.end);
    if (s.exit) field("exit"), put_integer(out, *s.exit);
    if (s.attempts) field("attempts"), put_integer(out, *s.attempts);
    if (s.pid_start) field("pid_start"), put_integer(out, *s.pid_start);
    if (s.kill_sent) field("kill_sent"), put_double(out, *s.kill_sent);
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
