// The readers and the writer of plans and state files: the JSON is read as
// nlohmann/json (and the original's Python) read it, what gpuq writes reads
// back the same, and the direct writer writes what nlohmann/json's dump wrote.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "gpuq/core/plan.h"
#include "gpuq/live/queue.h"
#include "gpuq/core/state.h"
#include "test_util.h"
#include "gpuq/live/state_codec.h"

namespace gpuq {
namespace {

using ojson = nlohmann::ordered_json;

// The writer gpuq used before the direct one: a value per entry, dumped by nlohmann/json.
std::string reference_dump(const State& state) {
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
    if (s.warn_sent) e["warn_sent"] = *s.warn_sent;
    if (s.requeue) e["requeue"] = *s.requeue;
    if (s.removed) e["removed"] = *s.removed;
    if (s.outcome) e["outcome"] = *s.outcome;
    if (s.reason) e["reason"] = *s.reason;
    if (s.log_size) e["log_size"] = *s.log_size;
    if (s.log_grew) e["log_grew"] = *s.log_grew;
    if (s.gpus_busy) e["gpus_busy"] = *s.gpus_busy;
    if (s.gpus_read) e["gpus_read"] = *s.gpus_read;
    if (s.hung_noted) e["hung_noted"] = *s.hung_noted;
    if (s.queue_id) e["slurm_id"] = *s.queue_id;
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

struct Gen {
  std::mt19937_64 rng;
  explicit Gen(uint64_t seed) : rng(seed) {}
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
  bool coin(int percent = 50) { return below(100) < static_cast<size_t>(percent); }
  template <typename T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }

  double real() {
    static const std::vector<double> special{0.0, -0.0, 1.0, 0.1, 1e16, 1e15, 1.5e-7, 1e-5, 123456789.125,
                                             1764000000.123456, -2.5, 1e300, 5e-324};
    if (coin(40)) return pick(special);
    return std::uniform_real_distribution<double>(-1e6, 1e10)(rng);
  }
  std::string text() {
    static const std::vector<std::string> parts{"a", "job_1", "x.y-z", "\"", "\\", "/", "\n", "\t", "\x01", "\x1f",
                                                "\x7f", "é", "日本", "😀", " ", "{", "]", ":", ","};
    std::string s;
    for (size_t k = below(5); k > 0; --k) s += pick(parts);
    return s;
  }
  ojson value(int depth = 0) {
    switch (below(depth > 2 ? 5 : 7)) {
      case 0: return nullptr;
      case 1: return coin();
      case 2: return static_cast<long long>(below(2000)) - 1000;
      case 3: return real();
      case 4: return text();
      case 5: {
        ojson a = ojson::array();
        for (size_t k = below(3); k > 0; --k) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        ojson o = ojson::object();
        for (size_t k = below(3); k > 0; --k) o[text()] = value(depth + 1);
        return o;
      }
    }
  }

  State state() {
    State st;
    for (size_t n = below(12); n > 0; --n) {
      JobState s;
      s.status = static_cast<Status>(below(6));
      if (coin()) {
        std::vector<int> g;
        for (size_t k = below(4); k > 0; --k) g.push_back(static_cast<int>(below(64)));
        s.gpus = g;
      }
      if (coin() || s.status == Status::Running) s.pid = coin(90) ? static_cast<long long>(below(4000000)) : -5;
      if (coin()) s.start = real();
      if (coin()) s.end = real();
      if (coin()) s.exit = static_cast<long long>(below(300)) - 20;
      if (coin()) s.attempts = static_cast<long long>(below(5));
      if (coin(30)) s.pid_start = coin() ? below(1u << 30) : std::numeric_limits<unsigned long long>::max();
      if (coin(20)) s.kill_sent = real();
      if (coin(20)) s.warn_sent = real();
      if (coin(20)) s.outcome = coin() ? std::string("timeout") : text();
      if (coin(20)) s.requeue = real();
      if (coin(20)) s.removed = real();
      if (coin(20)) s.reason = text();
      if (coin(20)) s.log_size = static_cast<long long>(below(1u << 30));
      if (coin(20)) s.log_grew = real();
      if (coin(20)) s.gpus_busy = real();
      if (coin(20)) s.gpus_read = real();
      if (coin(20)) s.hung_noted = real();
      if (coin(10)) s.queue_id = static_cast<long long>(below(1u << 30));
      for (size_t k = coin(30) ? below(3) + 1 : 0; k > 0; --k) {
        std::string key = "x" + text();
        s.extra[key] = value();
      }
      st.set(coin(80) ? fmt::format("job_{}", below(20)) : text(), std::move(s));
    }
    return st;
  }

  // One random edit of a text, biased to the characters JSON cares about.
  std::string mutate(std::string t) {
    static const std::vector<std::string> bits{"\"", ",", ":", "{", "}", "[", "]", "null", "-", "1e999", "0.5",
                                               "\\u0041", "\\", "\xff", "\xc3", "true", " ", "18446744073709551616",
                                               "\"status\": \"done\", ", "\"gpus\": 2, ", "\"id\": \"a\", "};
    for (size_t n = below(3) + 1; n > 0 && !t.empty(); --n) {
      size_t at = below(t.size());
      switch (below(3)) {
        case 0: t.erase(at, below(4) + 1); break;
        case 1: t.insert(at, pick(bits)); break;
        default: t.replace(at, 1, pick(bits)); break;
      }
    }
    return t;
  }
};


TEST(Codec, DirectStateWriterWritesWhatNlohmannDumpWrote) {
  const uint64_t seed = test::test_seed(1);
  SCOPED_TRACE(test::seed_note(seed));
  Gen g(seed);
  for (int i = 0; i < 3000; ++i) {
    State st = g.state();
    ASSERT_EQ(dump_state(st), reference_dump(st)) << "case " << i;
  }
}

// What gpuq writes it reads back as it was; an edited text loads or is refused with
// the file named, never half read.
TEST(Codec, StateReaderReadsBackWhatTheWriterWrote) {
  const uint64_t seed = test::test_seed(2);
  SCOPED_TRACE(test::seed_note(seed));
  Gen g(seed);
  int loaded = 0, refused = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = dump_state(g.state());
    if (i % 2 == 0) {
      StateLoad l = parse_state(text, "s.json");
      ASSERT_TRUE(l.state) << l.error << "\n" << text;
      ASSERT_EQ(dump_state(*l.state), text);
      continue;
    }
    text = g.mutate(text);
    StateLoad l = parse_state(text, "s.json");
    if (l.state) {
      ++loaded;
      std::string once = dump_state(*l.state);
      StateLoad again = parse_state(once, "s.json");
      ASSERT_TRUE(again.state) << again.error << "\n" << once;
      EXPECT_EQ(dump_state(*again.state), once);
    } else {
      ++refused;
      EXPECT_EQ(l.error.rfind("s.json: ", 0), 0u) << l.error;
    }
  }
  EXPECT_GT(loaded, 100);  // both outcomes are exercised
  EXPECT_GT(refused, 500);
}

TEST(Codec, StateReaderKeepsUnknownFieldsAndLastOfDuplicateEntries) {
  std::string text = R"({"a": {"status": "done", "note": {"k": [1, 2.5, null]}, "z": null},
                         "b": {"status": "pending"}, "a": {"status": "failed", "exit": 3}})";
  StateLoad l = parse_state(text, "s.json");
  ASSERT_TRUE(l.state) << l.error;
  ASSERT_EQ(l.state->entries().size(), 2u);
  EXPECT_EQ(l.state->entries()[0].first, "a");  // where it first appeared, as a Python dict keeps it
  EXPECT_EQ(l.state->find("a")->status, Status::Failed);
  EXPECT_EQ(l.state->find("a")->exit, 3);
  EXPECT_TRUE(l.state->find("a")->extra.is_null());
  StateLoad one = parse_state(R"({"a": {"status": "done", "note": {"k": [1, 2.5, null]}, "z": null}})", "s.json");
  ASSERT_TRUE(one.state);
  EXPECT_EQ(one.state->find("a")->extra.dump(), R"({"note":{"k":[1,2.5,null]},"z":null})");
}

TEST(Codec, StateDuplicateFieldIsReadAsNlohmannReadsIt) {
  // The last value wins, even a null one: the fast reader leaves such entries to the full parser.
  StateLoad l = parse_state(R"({"a": {"status": "done", "pid": 5, "pid": null}})", "s.json");
  ASSERT_TRUE(l.state) << l.error;
  EXPECT_FALSE(l.state->find("a")->pid.has_value());
}

// A plan, written so that it can be compared field by field.
std::string describe(const PlanLoad& l) {
  std::string s;
  for (const auto& e : l.errors) s += "error " + e + "\n";
  for (const auto& w : l.warnings) s += "warning " + w + "\n";
  if (!l.plan) return s;
  for (const Job& j : l.plan->jobs) {
    s += fmt::format("{} {} {} {} {} {} {} {} {}", j.id, j.script, j.gpus, j.priority, j.est_hours, j.est_given,
                     j.produced_by ? static_cast<long>(*j.produced_by) : -1L, j.produced_at_frac,
                     j.first_look_frac ? fmt::format("{}", *j.first_look_frac) : "none");
    for (const Dep& d : j.deps) s += fmt::format(" dep({},{},{})", static_cast<int>(d.kind), d.target, d.job);
    s += "\n";
  }
  for (const Reservation& r : l.plan->reservations)
    s += fmt::format("res {} [{}] [{}]\n", r.gpus, fmt::join(r.gpu_list, ","), fmt::join(r.jobs, ","));
  return s;
}

// Members gpuq does not read, however big, change nothing of what it reads and reports.
TEST(Codec, PlanReaderIgnoresUnreadMembersAndStillReportsEverything) {
  std::string many = "[";
  for (int k = 0; k < 60000; ++k) many += std::string(k ? ", " : "") + R"({"x": [{"y": 1}]})";
  many += "]";
  std::string text = R"({"about": )" + many + R"(, "jobs": [{"id": "a", "script": "s", "gpus": "two", "extra": )" + many +
                     R"(}, {"id": "b", "script": "s", "deps": [{"not": "a string"}], "note": )" + many +
                     R"(}], "reservations": [{"gpus": [0], "jobs": ["b", 7]}]})";
  PlanLoad l = parse_plan(text, "p.json", {0, 1});
  std::vector<std::string> expected{
      R"(p.json: job 'a': "gpus" must be a whole number, not a string ("two"))",
      R"(p.json: job 'b': deps[0] must be a string, not an object ({"not":"a string"}))",
      R"(p.json: reservation #1: job 7 is not in the plan)"};
  EXPECT_EQ(l.errors, expected);
}

// A repeated member keeps its last value, as Python's json and nlohmann/json keep it; every
// "jobs" list of a plan object is read (gpuq has always read such plans so).
TEST(Codec, PlanRepeatedMembersKeepTheirLastValue) {
  PlanLoad l = parse_plan(R"([{"id": "a", "script": "s", "gpus": "x", "gpus": 2}])", "p.json", {0, 1});
  ASSERT_TRUE(l.plan) << describe(l);
  EXPECT_EQ(l.plan->jobs[0].gpus, 2);
  l = parse_plan(R"([{"id": "a", "script": "s", "deps": ["b"], "deps": []}, {"id": "b", "script": "s"}])", "p.json", {0, 1});
  ASSERT_TRUE(l.plan) << describe(l);
  EXPECT_TRUE(l.plan->jobs[0].deps.empty());
  l = parse_plan(R"({"jobs": [{"id": "a", "script": "s"}], "jobs": [{"id": "b", "script": "s"}]})", "p.json", {0, 1});
  ASSERT_TRUE(l.plan) << describe(l);
  ASSERT_EQ(l.plan->jobs.size(), 2u);
  EXPECT_EQ(l.plan->jobs[1].id, "b");
  l = parse_plan(R"({"jobs": 5, "jobs": [{"id": "a", "script": "s"}]})", "p.json", {0, 1});
  ASSERT_TRUE(l.plan) << describe(l);
  EXPECT_EQ(l.plan->jobs.size(), 1u);
  l = parse_plan(R"({"jobs": [{"id": "a", "script": "s", "gpus": "x"}], "jobs": 5})", "p.json", {0, 1});
  EXPECT_EQ(l.errors, (std::vector<std::string>{R"(p.json: job 'a': "gpus" must be a whole number, not a string ("x"))",
                                                R"(p.json: "jobs": must be a list of jobs, not a number)"}));
  l = parse_plan(R"({"jobs": [{"id": "a", "script": "s"}], "reservations": 3, "reservations": null})", "p.json", {0, 1});
  ASSERT_TRUE(l.plan) << describe(l);
  EXPECT_TRUE(l.plan->reservations.empty());
  // A value quoted in a message: its object keys sorted, a repeated key's last value.
  EXPECT_EQ(parse_plan(R"([{"id": "a", "script": "s", "deps": [{"z": 1, "a": [1.5, true, null], "z": 2}]}])", "p.json",
                       {0}).errors,
            std::vector<std::string>{
                R"(p.json: job 'a': deps[0] must be a string, not an object ({"a":[1.5,true,null],"z":2}))"});
}

// The oddities of JSON that a user could meet, read as gpuq has always read them.
TEST(Codec, PlanJsonIsReadAsItAlwaysWas) {
  auto errors = [](const std::string& text) { return parse_plan(text, "p.json", {0, 1, 2, 3}).errors; };
  auto one = [](const std::string& e) { return std::vector<std::string>{e}; };
  auto job = [](const std::string& text) {
    PlanLoad l = parse_plan(text, "p.json", {0, 1, 2, 3});
    EXPECT_TRUE(l.plan) << text << "\n" << describe(l);
    return l.plan ? l.plan->jobs.at(0) : Job{};
  };
  // A byte order mark is skipped; \u escapes are read.
  EXPECT_EQ(job("\xEF\xBB\xBF" R"([{"id": "a", "script": "s"}])").id, "a");
  Job u = job(R"([{"id": "\u0061b", "script": "s\u00e9"}])");
  EXPECT_EQ(u.id, "ab");
  EXPECT_EQ(u.script, "s\xC3\xA9");
  // Integers past 64 bits are fractional numbers; floats are never whole numbers, even 2.0.
  EXPECT_EQ(errors(R"([{"id": "a", "script": "s", "gpus": 18446744073709551616}])"),
            one(R"(p.json: job 'a': "gpus" must be a whole number, not a fractional number (1.8446744073709552e+19))"));
  EXPECT_EQ(errors(R"([{"id": "a", "script": "s", "gpus": 2.0}])"),
            one(R"(p.json: job 'a': "gpus" must be a whole number, not a fractional number (2.0))"));
  EXPECT_EQ(errors(R"([{"id": "a", "script": "s", "gpus": 1e0}])"),
            one(R"(p.json: job 'a': "gpus" must be a whole number, not a fractional number (1.0))"));
  EXPECT_EQ(errors(R"([{"id": "a", "script": "s", "gpus": 18446744073709551615}])"),
            one(R"(p.json: job 'a': "gpus" is 18446744073709551615, more than any node has)"));
  EXPECT_EQ(job(R"([{"id": "a", "script": "s", "gpus": -0}])").gpus, 0);
  EXPECT_EQ(job(R"([{"id": "a", "script": "s", "priority": 123456789012345678901234567890}])").priority, 1.2345678901234568e29);
  EXPECT_EQ(job(R"([{"id": "a", "script": "s", "priority": -9223372036854775809}])").priority, -9223372036854775808.0);
  EXPECT_EQ(job(R"([{"id": "a", "script": "s", "x": [123456789012345678901234567890]}])").id, "a");
  EXPECT_EQ(job(R"([{"id": "a", "script": "s", "est_hours": 1e-400}])").est_hours, 0.0);
  // Numbers past a double, broken strings, trailing text, nothing at all: refused with the place.
  EXPECT_EQ(errors(R"([{"id": "a", "script": "s", "est_hours": 1e400}])"),
            one("p.json: top level: invalid JSON: number overflow parsing '1e400'"));
  EXPECT_EQ(errors(R"([{"id": "a", "script": "\ud800"}])"),
            one(R"(p.json: line 1, column 24: invalid JSON: syntax error while parsing value - invalid string: )"
                R"(surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF; last read: '"\ud800"')"));
  EXPECT_EQ(errors(R"([{"id": "a", "script": "s"}] x)"),
            one(R"(p.json: line 1, column 30: invalid JSON: syntax error while parsing value - invalid literal; )"
                R"(last read: '"s"}] x'; expected end of input)"));
  // A NUL byte ends the text (as it ended it for nlohmann/json): what follows is not read.
  EXPECT_EQ(job(std::string(R"([{"id": "a", "script": "s"}])") + '\0' + "{x").id, "a");
  EXPECT_EQ(errors(""), one("p.json: line 1, column 1: the file is empty"));
  // Deep nesting is read up to a depth no plan comes near, and refused past it.
  std::string deep = std::string(5000, '[') + std::string(5000, ']');
  EXPECT_EQ(job(R"([{"id": "a", "script": "s", "x": )" + deep + "}]").id, "a");
  deep = std::string(20000, '[') + std::string(20000, ']');
  EXPECT_EQ(errors(R"([{"id": "a", "script": "s", "x": )" + deep + "}]"),
            one("p.json: top level: invalid JSON: The JSON document was too deep (too many nested objects and arrays)"));
}

TEST(Codec, PlanReservationMessagesQuoteWhatIsWritten) {
  PlanLoad l = parse_plan(R"({"jobs": [{"id": "a", "script": "s"}], "reservations": [{"gpus": [0, 1.5, -1, 64, 9,
      18446744073709551615, "x"], "jobs": ["a", 7, "zz", null]}, 3, {"gpus": 1}]})", "p.json", {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(l.errors, (std::vector<std::string>{
                          "p.json: reservation #1: GPU 1.5 is not a GPU id",
                          "p.json: reservation #1: GPU -1 is not a GPU id (0..63)",
                          "p.json: reservation #1: GPU 64 is not a GPU id (0..63)",
                          "p.json: reservation #1: GPU 18446744073709551615 is not a GPU id (0..63)",
                          "p.json: reservation #1: GPU \"x\" is not a GPU id",
                          "p.json: reservation #1: job 7 is not in the plan",
                          "p.json: reservation #1: job \"zz\" is not in the plan",
                          "p.json: reservation #1: job null is not in the plan",
                          "p.json: reservation #2: must be an object with \"gpus\" and \"jobs\", not a number",
                          "p.json: reservation #3: needs \"gpus\", a list of GPU ids",
                          "p.json: reservation #3: needs \"jobs\", a list of job ids"}));
}

// The state's JSON oddities: a byte order mark, integers past 64 bits (fractional, and
// written back as such), and a repeated field's last value.
TEST(Codec, StateJsonIsReadAsItAlwaysWas) {
  StateLoad l = parse_state("\xEF\xBB\xBF" R"({"a": {"status": "done"}})", "s.json");
  ASSERT_TRUE(l.state) << l.error;
  EXPECT_EQ(l.state->find("a")->status, Status::Done);
  l = parse_state(R"({"a": {"status": "done", "start": 123456789012345678901234567890, "x": 18446744073709551616}})",
                  "s.json");
  ASSERT_TRUE(l.state) << l.error;
  EXPECT_EQ(dump_state(*l.state),
            "{\n \"a\": {\n  \"status\": \"done\",\n  \"start\": 1.2345678901234568e+29,\n"
            "  \"x\": 1.8446744073709552e+19\n }\n}\n");
  l = parse_state(R"({"a": {"status": "done", "gpus": [{"x": 1, "b": 2}]}})", "s.json");
  EXPECT_EQ(l.error, R"(s.json: job 'a': "gpus" holds {"x":1,"b":2}, not a GPU id)");
  l = parse_state(R"({"a": {"status": "done", "pid": 1.0}})", "s.json");
  EXPECT_EQ(l.error, R"(s.json: job 'a': "pid" must be a whole number, not a number)");
  l = parse_state(R"({"a": {"status": "done", "pid_start": -1}})", "s.json");
  EXPECT_EQ(l.error, R"(s.json: job 'a': "pid_start" must be a whole number, not a number)");
  l = parse_state("[1]", "s.json");
  EXPECT_EQ(l.error, "s.json: the state is an object keyed by job id, not a list");
  l = parse_state(R"({"a": {"status": "done"}} x)", "s.json");
  EXPECT_EQ(l.error, "s.json: line 1, column 27: not valid JSON (syntax error while parsing value - invalid literal; "
                     "last read: '\"done\"}} x'; expected end of input)");
}

TEST(StateByPosition, FollowsNewEntriesAndOtherPlans) {
  Plan plan = *parse_plan(R"([{"id": "a", "script": "s"}, {"id": "b", "script": "s"}, {"id": "c", "script": "s"}])",
                          "p.json", {0}).plan;
  State st = *parse_state(R"({"b": {"status": "done"}, "x": {"status": "failed"}})", "s.json").state;
  EXPECT_EQ(st.of(plan, 0), nullptr);
  EXPECT_EQ(st.of(plan, 1), st.find("b"));
  EXPECT_EQ(st.status_of(plan, 2), Status::Pending);
  // A new entry by position is found by id, and the other positions stay right.
  JobState held;
  held.status = Status::Held;
  st.set(plan, 0, held);
  EXPECT_EQ(st.find("a")->status, Status::Held);
  EXPECT_EQ(st.of(plan, 1), st.find("b"));
  // A new entry by id is found by position.
  st.at("c").status = Status::Running;
  EXPECT_EQ(st.status_of(plan, 2), Status::Running);
  // Another plan with the jobs in another order gets its own positions; a copy keeps working.
  Plan other = *parse_plan(R"([{"id": "c", "script": "s"}, {"id": "x", "script": "s"}, {"id": "a", "script": "s"}])",
                           "q.json", {0}).plan;
  State copy = st;
  EXPECT_EQ(copy.status_of(other, 0), Status::Running);
  EXPECT_EQ(copy.status_of(other, 1), Status::Failed);
  EXPECT_EQ(copy.status_of(other, 2), Status::Held);
  EXPECT_EQ(copy.status_of(plan, 1), Status::Done);
  EXPECT_EQ(copy.of(plan, 1), copy.find("b"));  // the copy's own entry, not the original's
  EXPECT_NE(copy.of(plan, 1), st.of(plan, 1));
}

// The binding of state entries to plan positions, both ways round (fewer entries than
// jobs, or not), against a lookup by id: entries in plan order, shuffled, with gaps and
// with ids the plan does not have.
TEST(StateByPosition, AgreesWithLookupByIdOnRandomStates) {
  const uint64_t seed = test::test_seed(11);
  SCOPED_TRACE(test::seed_note(seed));
  Gen g(seed);
  for (int round = 0; round < 300; ++round) {
    size_t n = g.below(60) + 1;
    std::string plan_text = "[";
    for (size_t k = 0; k < n; ++k) plan_text += fmt::format(R"({}{{"id": "j{}", "script": "s"}})", k ? "," : "", k);
    plan_text += "]";
    Plan plan = *parse_plan(plan_text, "p.json", {0}).plan;
    std::vector<std::string> ids;
    for (size_t k = 0; k < n; ++k)
      if (g.coin(round % 2 ? 90 : 40)) ids.push_back(fmt::format("j{}", k));
    for (size_t k = 0; k < g.below(4); ++k) ids.push_back(fmt::format("gone{}", k));
    if (g.coin(30)) std::shuffle(ids.begin(), ids.end(), g.rng);
    else if (g.coin(30) && ids.size() > 2) std::swap(ids[0], ids[ids.size() - 1]);
    std::string state_text = "{";
    for (size_t k = 0; k < ids.size(); ++k) state_text += fmt::format(R"({}"{}": {{"status": "done"}})", k ? "," : "", ids[k]);
    state_text += "}";
    State st = *parse_state(state_text, "s.json").state;
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(st.of(plan, i), st.find(plan.jobs[i].id)) << round << " job " << i << " " << state_text;
  }
}

}  // namespace
}  // namespace gpuq
