// Job words of a command line as the plan's jobs.
#include "gpuq/core/job_words.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "gpuq/core/suggest.h"

namespace gpuq {

std::string number_text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string t(buf, ec == std::errc() ? end : buf);
  if (auto e = t.find('e'); e != std::string::npos) {
    std::string mant = t.substr(0, e), exp = t.substr(e + 1);
    bool neg = !exp.empty() && exp[0] == '-';
    if (!exp.empty() && (exp[0] == '-' || exp[0] == '+')) exp.erase(0, 1);
    while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
    t = mant + "e" + (neg ? "-" : "") + exp;
  }
  return t;
}

std::string with_sweep_numbers(std::string_view id) {
  std::string out;
  size_t at = 0;
  while (at < id.size()) {
    size_t eq = id.find('=', at);
    if (eq == std::string_view::npos) break;
    size_t end = id.find('_', eq + 1);
    if (end == std::string_view::npos) end = id.size();
    out.append(id.substr(at, eq + 1 - at));
    std::string value(id.substr(eq + 1, end - eq - 1));
    bool numeric = !value.empty() && value.find_first_of("0123456789") != std::string::npos &&
                   value.find_first_not_of("0123456789.eE+-") == std::string::npos;
    char* stop = nullptr;
    double v = numeric ? std::strtod(value.c_str(), &stop) : 0;
    out += numeric && stop && *stop == '\0' ? number_text(v) : value;
    at = end;
  }
  out.append(id.substr(std::min(at, id.size())));
  return out;
}

namespace {

std::string listed(const Plan& plan, const Sweep& sw) {
  return few_of(sw.count, 5, [&](size_t k) { return plan.jobs[sw.first + k].id; });
}

}  // namespace

JobWords resolve_job_words(const Plan& plan, const std::vector<std::string>& words) {
  JobWords out;
  auto take = [&](const std::string& id) {
    if (std::find(out.ids.begin(), out.ids.end(), id) == out.ids.end()) out.ids.push_back(id);
  };
  for (const std::string& w : words) {
    if (plan.find(w)) {
      take(w);
      continue;
    }
    auto sw = std::find_if(plan.sweeps.begin(), plan.sweeps.end(), [&](const Sweep& s) { return s.id == w; });
    if (sw != plan.sweeps.end()) {
      out.notes.push_back(fmt::format("{} is a sweep: acting on its {} point{}: {}", w, sw->count,
                                      sw->count == 1 ? "" : "s", listed(plan, *sw)));
      for (size_t k = sw->first; k < sw->first + sw->count; ++k) take(plan.jobs[k].id);
      continue;
    }
    // A sweep point with a number written another way (1e-3 for the id's 0.001).
    if (w.find('=') != std::string::npos && !plan.sweeps.empty()) {
      std::string same = with_sweep_numbers(w);
      const Job* found = nullptr;
      for (const Sweep& s : plan.sweeps)
        for (size_t k = s.first; k < s.first + s.count && !found; ++k)
          if (with_sweep_numbers(plan.jobs[k].id) == same) found = &plan.jobs[k];
      if (found) {
        out.notes.push_back(fmt::format("{} is {} (its sweep writes each number in its shortest form)", w, found->id));
        take(found->id);
        continue;
      }
    }
    take(w);
  }
  return out;
}

std::string job_suggestion(const Plan& plan, std::string_view word) {
  std::vector<std::string_view> ids;
  ids.reserve(plan.jobs.size() + plan.sweeps.size());
  for (const Job& j : plan.jobs) ids.push_back(j.id);
  for (const Sweep& s : plan.sweeps) ids.push_back(s.id);
  return did_you_mean(word, ids);
}

std::string few_of(size_t n, size_t shown, const std::function<std::string(size_t)>& item) {
  std::string out;
  for (size_t k = 0; k < n && k < shown; ++k) out += (k ? ", " : "") + item(k);
  if (n > shown) out += fmt::format(" and {} more", n - shown);
  return out;
}

std::string few_of(const std::vector<std::string>& items, size_t shown) {
  return few_of(items.size(), shown, [&](size_t k) { return items[k]; });
}

}  // namespace gpuq
