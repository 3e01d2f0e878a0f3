// The fast readers and writer of plans and state files against nlohmann/json:
// whatever the fast path accepts must load exactly as the full parser loads it,
// and the direct writer must write what nlohmann/json's dump wrote.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "gpuq/json_fast.h"
#include "gpuq/plan.h"
#include "gpuq/plan_cache.h"
#include "gpuq/queue.h"
#include "gpuq/state.h"
#include "test_util.h"

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

std::string show(const StateLoad& l) { return l.state ? dump_state(*l.state) : "error: " + l.error; }

TEST(Codec, DirectStateWriterWritesWhatNlohmannDumpWrote) {
  const uint64_t seed = test::test_seed(1);
  SCOPED_TRACE(test::seed_note(seed));
  Gen g(seed);
  for (int i = 0; i < 3000; ++i) {
    State st = g.state();
    ASSERT_EQ(dump_state(st), reference_dump(st)) << "case " << i;
  }
}

TEST(Codec, StateFastReaderAgreesWithTheFullParser) {
  const uint64_t seed = test::test_seed(2);
  SCOPED_TRACE(test::seed_note(seed));
  Gen g(seed);
  int loaded = 0, fast_taken = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = dump_state(g.state());
    if (i % 2) text = g.mutate(text);
    StateLoad fast = parse_state(text, "s.json", true), full = parse_state(text, "s.json", false);
    ASSERT_EQ(show(fast), show(full)) << "case " << i << ":\n" << text;
    if (full.state) ++loaded;
    if (fast.fast_path) ++fast_taken;
    EXPECT_FALSE(full.fast_path);
    // Unedited texts that load go the fast way, unless they have \u escapes.
    if (i % 2 == 0 && full.state && text.find("\\u") == std::string::npos) {
      EXPECT_TRUE(fast.fast_path) << text;
    }
  }
  // The comparison means something only if many cases load, and the fast reader took many of them
  // (ids with control characters are written with \u escapes, which it leaves to the full parser).
  EXPECT_GT(loaded, 1500);
  EXPECT_GT(fast_taken, 1000);
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

std::string random_plan(Gen& g) {
  size_t n = g.below(8) + 1;
  ojson jobs = ojson::array();
  auto id = [&](size_t k) { return fmt::format("j{}", k); };
  for (size_t k = 0; k < n; ++k) {
    ojson j = ojson::object();
    std::vector<std::function<void()>> fields{
        [&] { j["id"] = g.coin(98) ? ojson(id(k)) : g.value(); },
        [&] { j["script"] = g.coin(98) ? ojson("run.sh") : g.value(); },
        [&] { j["gpus"] = g.coin(97) ? ojson(g.below(4)) : g.value(); },
        [&] { j["priority"] = g.coin(97) ? ojson(g.real()) : g.value(); },
        [&] { j["est_hours"] = g.coin(97) ? ojson(std::fabs(g.real())) : g.value(); },
        [&] {
          ojson d = ojson::array();
          for (size_t m = 0; m < k; ++m)
            if (g.coin(40)) d.push_back(g.pick(std::vector<std::string>{"", "after:", "file:"}) + id(m));
          j["deps"] = g.coin(98) ? d : g.value();
        },
        [&] {
          if (k) j["produced_by"] = g.coin(97) ? ojson(id(g.below(k))) : g.value();
        },
        [&] { j["produced_at_frac"] = g.coin(97) ? ojson(0.5) : g.value(); },
        [&] { j["first_look_frac"] = g.coin(97) ? ojson(0.25) : g.value(); },
        [&] { j["x" + g.text()] = g.value(); },
    };
    for (auto& f : fields)
      if (g.coin(60)) f();
    if (g.coin(97)) j["id"] = id(k), j["script"] = "run.sh";
    jobs.push_back(j);
  }
  if (g.coin(40)) return jobs.dump(g.coin() ? -1 : 1);
  ojson top = ojson::object();
  if (g.coin(10)) top["note"] = g.value();
  top["jobs"] = jobs;
  if (g.coin(50)) {
    ojson r = ojson::array();
    r.push_back({{"gpus", {6, 7}}, {"jobs", {id(0)}}});
    top["reservations"] = g.coin(90) ? r : g.value();
  }
  return top.dump(g.coin() ? -1 : 1);
}

TEST(Codec, PlanFastReaderAgreesWithTheFullParser) {
  const uint64_t seed = test::test_seed(3);
  SCOPED_TRACE(test::seed_note(seed));
  Gen g(seed);
  int loaded = 0, fast_taken = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = random_plan(g);
    if (i % 3 == 2) text = g.mutate(text);
    std::vector<int> gpus{0, 1, 2, 3, 4, 5, 6, 7};
    if (g.coin(10)) gpus = {0, 1};
    PlanLoad fast = parse_plan(text, "p.json", gpus, true), full = parse_plan(text, "p.json", gpus, false);
    ASSERT_EQ(describe(fast), describe(full)) << "case " << i << ":\n" << text;
    if (full.plan) ++loaded;
    if (fast.fast_path && full.plan) ++fast_taken;
    EXPECT_FALSE(full.fast_path);
    // Unedited plans that load go the fast way, unless they have \u escapes (control characters in unknown fields).
    if (i % 3 != 2 && full.plan && text.find("\\u") == std::string::npos) {
      EXPECT_TRUE(fast.fast_path) << text;
    }
  }
  // Many load, and the fast reader took most of those (it leaves oddities like \u escapes to the full parser).
  EXPECT_GT(loaded, 1200);
  EXPECT_GT(fast_taken, 700);
}

// Plans past kPlanSplitBytes are read on two threads, the second from a guessed job
// boundary past the middle. A guess inside a string or a nested value must be ignored,
// and a problem in either half must still reach the full parser.
TEST(Codec, PlanReadOnTwoThreadsAgreesWithTheFullParser) {
  struct Case {
    std::string name;
    bool loads, split;  // split: the second thread's jobs were taken
  };
  // A job of the big plan; `pad` makes the plan long with few jobs.
  auto job = [](size_t k, const std::string& extra = "") {
    return fmt::format(R"({{"id": "j{}", "script": "run.sh", "gpus": {}, "priority": {}, "est_hours": {}, "deps": [{}]{}}})",
                       k, k % 3, k % 7, 0.5 + k % 4, k > 3 ? fmt::format(R"("j{}", "after:j{}", "file:out/j{}")", k - 1, k - 3, k - 2) : "",
                       extra);
  };
  const size_t n = 600;
  const std::string pad(size_t{6} << 10, 'p');
  auto plan_text = [&](const std::function<std::string(size_t)>& extra, bool object, const std::string& tail) {
    std::string t = object ? "{\"jobs\": [\n" : "[\n";
    for (size_t k = 0; k < n; ++k) t += (k ? ",\n " : " ") + job(k, extra(k));
    t += "\n]";
    if (object) t += tail + "}";
    return t;
  };
  auto padded = [&](size_t) { return ", \"pad\": \"" + pad + "\""; };
  // Strings that look like job boundaries all along: the first "}," past the middle is in one.
  std::string ghost;
  while (ghost.size() < pad.size()) ghost += R"(}, {\"id\": \"ghost\", \"script\": \"s\"}])";
  auto ghostly = [&](size_t) { return ", \"note\": \"" + ghost + "\""; };
  std::string nested_value = "[";
  for (int k = 0; k < 200; ++k)
    nested_value += std::string(k ? ", " : "") + (k % 2 ? R"({"id": "g", "script": "s"})" : R"({"a": 1, "b": [{"c": 2}, {"d": 3}]})");
  nested_value += "]";
  auto nested = [&](size_t) { return ", \"extra\": " + nested_value; };

  std::vector<std::pair<Case, std::string>> cases{
      {{"clean list", true, true}, plan_text(padded, false, "")},
      {{"clean object with reservations after", true, true},
       plan_text(padded, true, R"(, "reservations": [{"gpus": [6, 7], "jobs": ["j590", "j3"]}])")},
      // Wrong guesses: the second thread fails, or reads ghost jobs up to a nested ']', and is ignored.
      {{"boundaries inside strings", true, false}, plan_text(ghostly, false, "")},
      {{"boundaries inside nested values", true, false}, plan_text(nested, false, "")},
      {{"a duplicate id in the second half", false, false},
       plan_text([&](size_t k) { return padded(k) + (k == 550 ? R"(, "id": "j5")" : ""); }, false, "")},
      {{"a wrong type in the second half", false, false},
       plan_text([&](size_t k) { return padded(k) + (k == 500 ? R"(, "gpuz": 1, "priority": "high")" : ""); }, false, "")},
      {{"a \\u escape in the second half (fast reader refuses)", true, false},
       plan_text([&](size_t k) { return padded(k) + (k == 520 ? R"(, "note": "\u00e9")" : ""); }, false, "")},
      {{"an unknown producer in the second half (found after both halves)", false, true},
       plan_text([&](size_t k) { return padded(k) + (k == 580 ? R"(, "produced_by": "nobody")" : ""); }, false, "")},
  };
  // The whole text before the list: a big unknown member full of objects, so the guess falls in it.
  {
    std::string t = "{\"about\": [";
    // (Few big objects: nlohmann's callback parser is quadratic in the length of a kept list of objects.)
    for (size_t k = 0; k < 2000; ++k) t += std::string(k ? ", " : "") + R"({"x": ")" + pad.substr(0, 1100) + "\"}";
    t += "], \"jobs\": [" + job(0) + ", " + job(1) + "]}";
    cases.push_back({{"the guess falls before the list", true, false}, t});
  }
  for (const auto& [c, text] : cases) {
    ASSERT_GE(text.size(), kPlanSplitBytes) << c.name;
    std::vector<int> gpus{0, 1, 2, 3, 4, 5, 6, 7};
    PlanLoad fast = parse_plan(text, "p.json", gpus, true), full = parse_plan(text, "p.json", gpus, false);
    EXPECT_EQ(describe(fast), describe(full)) << c.name;
    EXPECT_EQ(fast.plan.has_value(), c.loads) << c.name << "\n" << describe(full).substr(0, 500);
    EXPECT_EQ(fast.split, c.split) << c.name;
    EXPECT_FALSE(full.split);
    if (c.split) {
      EXPECT_TRUE(fast.fast_path) << c.name;
    }
  }
}

// Members gpuq does not read are dropped as the full parser meets them (kept, long lists of
// objects in them made it quadratic: 8 s for 100,000). What it reads is unchanged.
TEST(Codec, FullParserDropsUnreadMembersAndStillReportsEverything) {
  std::string many = "[";
  for (int k = 0; k < 60000; ++k) many += std::string(k ? ", " : "") + R"({"x": [{"y": 1}]})";
  many += "]";
  std::string text = R"({"about": )" + many + R"(, "jobs": [{"id": "a", "script": "s", "gpus": "two", "extra": )" + many +
                     R"(}, {"id": "b", "script": "s", "deps": [{"not": "a string"}], "note": )" + many +
                     R"(}], "reservations": [{"gpus": [0], "jobs": ["b", 7]}]})";
  PlanLoad l = parse_plan(text, "p.json", {0, 1});
  EXPECT_FALSE(l.fast_path);
  std::vector<std::string> expected{
      R"(p.json: job 'a': "gpus" must be a whole number, not a string ("two"))",
      R"(p.json: job 'b': deps[0] must be a string, not an object ({"not":"a string"}))",
      R"(p.json: reservation #1: job 7 is not in the plan)"};
  EXPECT_EQ(l.errors, expected);
}

// What a plan's cache must give back: the load as parse_plan made it, ranks, index and all.
std::string describe_whole(const PlanLoad& l) {
  std::string s = describe(l);
  if (!l.plan) return s;
  const Plan& p = *l.plan;
  s += fmt::format("ranks {} / {}\n", fmt::join(p.by_rank, ","), fmt::join(p.rank_of, ","));
  for (size_t i = 0; i < p.jobs.size(); ++i) {
    s += fmt::format("res_of {} [{}] ", i, fmt::join(p.reservations_of[i], ","));
    s += p.find(p.jobs[i].id) == &p.jobs[i] ? "indexed\n" : "NOT INDEXED\n";
  }
  return s;
}

TEST(PlanCache, GivesBackExactlyWhatTheParserMade) {
  const uint64_t seed = test::test_seed(5);
  SCOPED_TRACE(test::seed_note(seed));
  Gen g(seed);
  std::vector<int> gpus{0, 1, 2, 3, 4, 5, 6, 7};
  int checked = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string text = random_plan(g);
    PlanLoad load = parse_plan(text, "p.json", gpus);
    if (!load.plan) continue;
    ++checked;
    std::string blob = encode_plan_cache(load, text, gpus);
    auto back = decode_plan_cache(blob, text, gpus);
    ASSERT_TRUE(back) << text;
    ASSERT_EQ(describe_whole(*back), describe_whole(load)) << text;
  }
  EXPECT_GT(checked, 500);
  // A plan with warnings and reservations (GPUs 8 and 9 are not among --gpus).
  std::string text = R"({"jobs": [{"id": "a", "script": "s", "gpus": 2, "priority": 3}, {"id": "b", "script": "s",
      "deps": ["a", "after:a", "file:~/x"], "produced_by": "a", "first_look_frac": 0.5}],
      "reservations": [{"gpus": [6, 7, 8, 9], "jobs": ["b"]}, {"gpus": [0], "jobs": ["a", "b"]}]})";
  PlanLoad load = parse_plan(text, "p.json", gpus);
  ASSERT_TRUE(load.plan);
  ASSERT_EQ(load.warnings.size(), 1u);
  auto back = decode_plan_cache(encode_plan_cache(load, text, gpus), text, gpus);
  ASSERT_TRUE(back);
  EXPECT_EQ(describe_whole(*back), describe_whole(load));
  EXPECT_EQ(back->warnings, load.warnings);
}

TEST(PlanCache, IsRefusedForAnotherTextOtherGpusOrAnyDamage) {
  std::vector<int> gpus{0, 1, 2, 3, 4, 5, 6, 7};
  std::string text = R"([{"id": "a", "script": "s", "gpus": 2, "priority": 3}, {"id": "b", "script": "s", "deps": ["a"]}])";
  PlanLoad load = parse_plan(text, "p.json", gpus);
  ASSERT_TRUE(load.plan);
  std::string blob = encode_plan_cache(load, text, gpus);
  ASSERT_TRUE(decode_plan_cache(blob, text, gpus));
  // The same length, one character changed (a priority 3 -> 4): another plan.
  std::string edited = text;
  edited[edited.find("\"priority\": 3") + 12] = '4';
  ASSERT_EQ(edited.size(), text.size());
  EXPECT_FALSE(decode_plan_cache(blob, edited, gpus));
  EXPECT_FALSE(decode_plan_cache(blob, text, {0, 1, 2, 3}));
  EXPECT_FALSE(decode_plan_cache(blob, text, {0, 1, 2, 3, 4, 5, 6, 8}));
  // Every truncation, and every byte flipped in turn: refused, never a crash or a wrong plan.
  for (size_t k = 0; k < blob.size(); ++k) EXPECT_FALSE(decode_plan_cache(blob.substr(0, k), text, gpus)) << k;
  for (size_t k = 0; k < blob.size(); ++k) {
    std::string bad = blob;
    bad[k] = static_cast<char>(bad[k] ^ 0x10);
    EXPECT_FALSE(decode_plan_cache(bad, text, gpus)) << k;
  }
  EXPECT_FALSE(decode_plan_cache(blob + "x", text, gpus));
  EXPECT_FALSE(decode_plan_cache("", text, gpus));
  // Damage that the checksum cannot see (it is recomputed here): the bounds checks hold, and
  // whatever comes back is a plan whose references stay inside it (ASan runs this in CI).
  int taken = 0;
  for (size_t k = 0; k + 8 < blob.size(); ++k) {
    for (unsigned char flip : {0x01, 0x80, 0xff}) {
      std::string bad = blob.substr(0, blob.size() - 8);
      bad[k] = static_cast<char>(bad[k] ^ flip);
      uint64_t sum = text_hash(bad);
      bad.append(reinterpret_cast<const char*>(&sum), 8);
      auto got = decode_plan_cache(bad, text, gpus);
      if (!got) continue;
      ++taken;
      const Plan& p = *got->plan;
      ASSERT_EQ(p.rank_of.size(), p.jobs.size());
      for (size_t i = 0; i < p.jobs.size(); ++i) {
        EXPECT_EQ(p.find(p.jobs[i].id), &p.jobs[i]);
        EXPECT_EQ(p.by_rank[p.rank_of[i]], i);
        for (const Dep& d : p.jobs[i].deps) EXPECT_TRUE(d.kind == Dep::Kind::File || d.job < p.jobs.size());
        EXPECT_TRUE(!p.jobs[i].produced_by || *p.jobs[i].produced_by < p.jobs.size());
      }
    }
  }
  EXPECT_GT(taken, 0);  // some figures (a priority, an estimate) can change and still make a plan
}

TEST(Codec, PlanDuplicateFieldsAndJobsKeysReadAsNlohmannReadsThem) {
  for (std::string text : {R"([{"id": "a", "script": "s", "gpus": "x", "gpus": 2}])",
                           R"([{"id": "a", "script": "s", "deps": ["b"], "deps": []}, {"id": "b", "script": "s"}])",
                           R"({"jobs": [{"id": "a", "script": "s"}], "jobs": [{"id": "b", "script": "s"}]})",
                           R"({"jobs": [{"id": "a", "script": "s"}], "reservations": 3, "reservations": null})"}) {
    PlanLoad fast = parse_plan(text, "p.json", {0, 1}, true), full = parse_plan(text, "p.json", {0, 1}, false);
    EXPECT_EQ(describe(fast), describe(full)) << text;
  }
  PlanLoad l = parse_plan(R"([{"id": "a", "script": "s", "gpus": "x", "gpus": 2}])", "p.json", {0, 1});
  ASSERT_TRUE(l.plan);
  EXPECT_EQ(l.plan->jobs[0].gpus, 2);
}

TEST(Codec, FastReaderRefusesWhatItCannotReadExactly) {
  auto refuses = [](std::string_view text) {
    FastJson r(text);
    try {
      r.skip_value();
      r.finish();
      return false;
    } catch (const FastJsonFail&) {
      return true;
    }
  };
  EXPECT_FALSE(refuses(R"({"a": [1, -0, 2.5e3, "x\n\"y", true, false, null, {}, []]})"));
  EXPECT_FALSE(refuses("\"\xc3\xa9\xf0\x9f\x98\x80\""));  // é and an emoji, well formed
  EXPECT_TRUE(refuses(R"("\u0041")"));                     // escapes of code points: the full parser
  EXPECT_TRUE(refuses("\"\xc3\""));                        // a cut UTF-8 sequence
  EXPECT_TRUE(refuses("\"\xed\xa0\x80\""));                // an encoded surrogate
  EXPECT_TRUE(refuses("\"\xc0\xaf\""));                    // an overlong encoding
  EXPECT_TRUE(refuses("18446744073709551616"));            // past uint64: nlohmann reads it as a double
  EXPECT_TRUE(refuses("01"));
  EXPECT_TRUE(refuses("1."));
  EXPECT_TRUE(refuses("[1,]"));
  EXPECT_TRUE(refuses("{\"a\" 1}"));
  EXPECT_TRUE(refuses("\xef\xbb\xbf{}"));  // a byte order mark
  EXPECT_TRUE(refuses("{} x"));
  EXPECT_TRUE(refuses(std::string(100000, '[')));  // deep nesting: refused, not a stack overflow
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
