#include "gpuq/core/accuracy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpuq {

// Written piece by piece: an ordered_json object finds each new key by a linear search, so one
// line of a 100,000-job plan's starts took 6 s of run's tick (perf: memcmp under ordered_map's
// operator[]); the maps are sorted and unique already. The same bytes as ordered_json's dump.
std::string prediction_line(const PredictionRecord& r) {
  auto text = [](const auto& v) { return nlohmann::json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
  std::string out = "{\"t\":" + text(std::round(r.t * 1000) / 1000) + ",\"finish\":{";
  bool first = true;
  for (const auto& [src, f] : r.finish) {
    out += (first ? "" : ",") + text(src) + ":" + std::to_string(std::llround(f));
    first = false;
  }
  out += "},\"starts\":{";
  first = true;
  for (const auto& [src, jobs] : r.starts) {
    out += (first ? "" : ",") + text(src) + ":{";
    first = false;
    bool first_job = true;
    for (const auto& [id, s] : jobs) {
      out += (first_job ? "" : ",") + text(id) + ":" + std::to_string(std::llround(s));
      first_job = false;
    }
    out += "}";
  }
  out += "}}";
  return out;
}

std::optional<PredictionRecord> parse_prediction_line(std::string_view line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("t") || !j["t"].is_number()) return std::nullopt;
  PredictionRecord r;
  r.t = j["t"].get<double>();
  if (j.contains("finish") && j["finish"].is_object())
    for (const auto& [src, f] : j["finish"].items())
      if (f.is_number()) r.finish[src] = f.get<double>();
  if (j.contains("starts") && j["starts"].is_object())
    for (const auto& [src, jobs] : j["starts"].items()) {
      if (!jobs.is_object()) continue;
      auto& into = r.starts[src];
      for (const auto& [id, s] : jobs.items())
        if (s.is_number()) into[id] = s.get<double>();
    }
  return r;
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

Accuracy score_predictions(const std::vector<PredictionRecord>& records, const std::vector<Attempt>& attempts) {
  Accuracy a;
  // Each job's attempt starts, in order; the plan's end.
  std::map<std::string, std::vector<double>> started;
  bool open = false;
  double last_end = -std::numeric_limits<double>::infinity();
  for (const Attempt& at : attempts) {
    if (at.start) started[at.id].push_back(*at.start);
    if (!at.end) open = true;
    else last_end = std::max(last_end, *at.end);
  }
  for (auto& [id, s] : started) std::sort(s.begin(), s.end());
  if (!open && !attempts.empty()) a.finished = last_end;

  const double h = 3600;
  a.horizons = {{"up to 1 h ahead", 0, h, {}}, {"1 h to 1 day ahead", h, 24 * h, {}},
                {"over 1 day ahead", 24 * h, std::numeric_limits<double>::infinity(), {}}};
  std::vector<std::map<std::string, std::vector<double>>> errors(a.horizons.size());
  constexpr double kSlack = 1;  // a record made in the same second as a start speaks of the next
  for (const PredictionRecord& r : records) {
    a.finish.push_back({r.t, r.finish});
    const auto* base = r.starts.count("estimate") ? &r.starts.at("estimate") : nullptr;
    for (const char* src : kPredictionSources) {
      auto it = r.starts.find(src);
      // No progress recorded: no job had any, and it predicted what the estimates did. No
      // learned estimates: there were none to learn from, and that source is not scored.
      const std::map<std::string, double>* jobs =
          it != r.starts.end() ? &it->second : std::string_view(src) == "progress" ? base : nullptr;
      if (!jobs) continue;
      for (const auto& [id, predicted] : *jobs) {
        auto s = started.find(id);
        if (s == started.end()) continue;
        auto real = std::lower_bound(s->second.begin(), s->second.end(), r.t - kSlack);
        if (real == s->second.end()) continue;
        double ahead = *real - r.t;
        for (size_t k = 0; k < a.horizons.size(); ++k)
          if (ahead > a.horizons[k].from - kSlack && ahead <= a.horizons[k].to) {
            errors[k][src].push_back(std::fabs(predicted - *real));
            break;
          }
      }
    }
  }
  for (size_t k = 0; k < a.horizons.size(); ++k)
    for (auto& [src, e] : errors[k]) a.horizons[k].error[src] = {median(e), e.size()};
  return a;
}

}  // namespace gpuq
