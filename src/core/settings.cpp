#include "gpuq/core/settings.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "gpuq/core/gpu_health.h"
#include "gpuq/core/gpus.h"
#include "gpuq/core/suggest.h"
#include "gpuq/core/topology.h"

namespace gpuq {

namespace {

using K = SettingKind;

// "a string", "a list", ...: as the plan loader names a JSON value's kind.
const char* kind_of(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::array: return "a list";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::number_float: return "a fractional number";
    default: return "a number";
  }
}

// A value as messages quote it: compact, cut at 40 characters.
std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

std::string not_a(const char* what, const nlohmann::json& v) {
  return fmt::format("must be {}, not {} ({})", what, kind_of(v), shown(v));
}

std::string read_number(const SettingSpec& spec, const nlohmann::json& v, double& out) {
  if (!v.is_number()) return not_a("a number", v);
  double x = v.get<double>();
  if (!std::isfinite(x)) return not_a("a finite number", v);
  if (spec.kind == K::Positive && x <= 0) return fmt::format("must be more than 0 (got {})", shown(v));
  if (spec.kind == K::Percent && x >= 100) return fmt::format("must be below 100 (got {})", shown(v));
  if (x < 0) return fmt::format("must not be negative (got {})", shown(v));
  out = x;
  return "";
}

std::string read_whole(const SettingSpec& spec, const nlohmann::json& v, long long& out) {
  if (!v.is_number_integer()) return not_a("a whole number", v);
  if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(INT64_MAX))
    return fmt::format("is too large (got {})", shown(v));
  long long x = v.get<long long>();
  if (spec.kind == K::Count && x < 0) return fmt::format("must not be negative (got {})", shown(v));
  out = x;
  return "";
}

std::string read_text(const SettingSpec& spec, const nlohmann::json& v, std::string& out) {
  switch (spec.kind) {
    case K::Gpus: {
      std::string text;
      if (v.is_array()) {
        for (const auto& g : v) {
          if (!g.is_number_integer()) return fmt::format("GPU {} is not a GPU id", shown(g));
          text += (text.empty() ? "" : ",") + g.dump();
        }
        if (text.empty()) return "must name at least one GPU";
      } else if (v.is_string()) {
        text = v.get<std::string>();
      } else {
        return not_a("GPU ids (\"0-3\", \"0,1,2,3\" or [0, 1, 2, 3])", v);
      }
      std::string err;
      if (!parse_gpu_list(text, &err)) {  // its words name --gpus: here the setting is named already
        for (auto [from, to] : {std::pair{"in --gpus '", "in '"}, std::pair{" in --gpus is", " is"}})
          if (size_t at = err.find(from); at != std::string::npos) err.replace(at, std::strlen(from), to);
        return err;
      }
      out = text;
      return "";
    }
    case K::Choice: {
      if (v.is_boolean() && (spec.choices == "true|false" || spec.choices == "false|true")) {  // a switch, as JSON has it
        out = v.get<bool>() ? "true" : "false";
        return "";
      }
      if (!v.is_string()) return not_a("a string", v);
      std::string s = v.get<std::string>();
      std::string_view rest = spec.choices;
      std::vector<std::string_view> names;
      while (!rest.empty()) {
        size_t bar = rest.find('|');
        names.push_back(rest.substr(0, bar));
        rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
      }
      for (std::string_view n : names)
        if (n == s) {
          out = s;
          return "";
        }
      std::string list;
      for (std::string_view n : names) list += fmt::format("{}{}", list.empty() ? "" : ", ", n);
      return fmt::format("must be one of {}, not {}{}", list, shown(v), did_you_mean(s, names));
    }
    case K::Codes: {  // Xid codes: kept as "48,79", in order
      std::string text;
      if (v.is_array()) {
        for (const auto& c : v) {
          if (!c.is_number_integer()) return fmt::format("{} is not an Xid code (a whole number from 1 to 999)", shown(c));
          text += (text.empty() ? "" : ",") + c.dump();
        }
      } else if (v.is_string()) {
        text = v.get<std::string>();
      } else {
        return not_a("Xid codes ([48, 79] or \"48,79\")", v);
      }
      std::string err;
      std::optional<std::set<unsigned>> codes = parse_xid_list(text, &err);
      if (!codes) return err;
      out.clear();
      for (unsigned c : *codes) out += fmt::format("{}{}", out.empty() ? "" : ",", c);
      return "";
    }
    case K::Pairs: {
      if (!v.is_string()) return not_a("a string (auto, original, or pairs such as \"0-2,1-3\")", v);
      std::string err;
      if (!parse_pairs(v.get<std::string>(), &err)) return err;
      out = v.get<std::string>();
      return "";
    }
    default:
      if (!v.is_string()) return not_a(spec.kind == K::Folder ? "a folder's path (a string)" : "a string", v);
      if (v.get<std::string>().empty()) return "must not be empty";
      out = v.get<std::string>();
      return "";
  }
}

std::string read_names(const nlohmann::json& v, std::vector<std::string>& out) {
  if (v.is_string()) {
    if (v.get<std::string>().empty()) return "must not be empty";
    out = {v.get<std::string>()};
    return "";
  }
  if (!v.is_array()) return not_a("a list of strings", v);
  std::vector<std::string> names;
  for (const auto& x : v) {
    if (!x.is_string() || x.get<std::string>().empty())
      return fmt::format("must be a list of non-empty strings; {} is not one", shown(x));
    names.push_back(x.get<std::string>());
  }
  out = std::move(names);
  return "";
}

Settings table_defaults() {
  Settings s{std::monostate{}};
  for (const SettingSpec& spec : kSettingTable) {
    nlohmann::json d = nlohmann::json::parse(spec.default_json);
    if (d == "") continue;  // unset (a plan cannot give ""): the member stays empty
    if (!read_setting(spec, d, s).empty()) std::abort();  // the table's own default: settings_test reads each
  }
  return s;
}

}  // namespace

Settings::Settings() {
  static const Settings defaults = table_defaults();
  *this = defaults;
}

std::span<const SettingSpec, kSettingCount> settings_table() { return kSettingTable; }

const SettingSpec* find_setting(std::string_view name) {
  for (const SettingSpec& spec : kSettingTable)
    if (spec.name == name) return &spec;
  return nullptr;
}

size_t setting_index(const SettingSpec& spec) { return static_cast<size_t>(&spec - kSettingTable.data()); }

const char* source_name(SettingSource s) {
  switch (s) {
    case SettingSource::Default: return "default";
    case SettingSource::Plan: return "plan";
    case SettingSource::Run: return "run";
    case SettingSource::Env: return "env";
    case SettingSource::Flag: return "flag";
  }
  return "?";
}

bool GivenSettings::any() const {
  for (bool g : given)
    if (g) return true;
  return false;
}

std::string read_setting(const SettingSpec& spec, const nlohmann::json& value, Settings& into) {
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::remove_reference_t<decltype(into.*member)>;
        if constexpr (std::is_same_v<T, double>) return read_number(spec, value, into.*member);
        if constexpr (std::is_same_v<T, long long>) return read_whole(spec, value, into.*member);
        if constexpr (std::is_same_v<T, std::string>) return read_text(spec, value, into.*member);
        if constexpr (std::is_same_v<T, std::vector<std::string>>) return read_names(value, into.*member);
      },
      spec.member);
}

std::string read_named_setting(std::string_view name, const nlohmann::json& value, GivenSettings& into) {
  const SettingSpec* spec = find_setting(name);
  if (!spec) {
    std::vector<std::string_view> names;
    for (const SettingSpec& s : kSettingTable) names.push_back(s.name);
    std::string near = did_you_mean(name, names);
    return fmt::format("\"{}\" is not a setting{}", name, near.empty() ? " (`gpuq settings` lists them)" : near);
  }
  if (std::string why = read_setting(*spec, value, into.values); !why.empty())
    return fmt::format("\"{}\": {}", name, why);
  into.given[setting_index(*spec)] = true;
  return "";
}

std::vector<std::string> read_settings(const nlohmann::json& object, GivenSettings& into) {
  if (!object.is_object()) return {not_a("an object of settings (\"gpus\", \"max_retries\", ...)", object)};
  std::vector<std::string> problems;
  for (const auto& [key, value] : object.items())
    if (std::string problem = read_named_setting(key, value, into); !problem.empty()) problems.push_back(problem);
  return problems;
}

nlohmann::json setting_json(const SettingSpec& spec, const Settings& s) {
  return std::visit([&](auto member) { return nlohmann::json(s.*member); }, spec.member);
}

nlohmann::ordered_json settings_json(const Settings& s) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const SettingSpec& spec : kSettingTable) out[std::string(spec.name)] = nlohmann::ordered_json(setting_json(spec, s));
  return out;
}

std::string setting_text(const SettingSpec& spec, const Settings& s) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& v = s.*member;
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) return fmt::format("{:g}", v);
        if constexpr (std::is_same_v<T, long long>) return fmt::format("{}", v);
        if constexpr (std::is_same_v<T, std::string>) return v.empty() ? std::string(spec.unset) : v;
        if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string out;
          for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
          return out.empty() ? std::string("none") : out;
        }
      },
      spec.member);
}

bool same_setting(const SettingSpec& spec, const Settings& a, const Settings& b) {
  if (spec.kind == K::Gpus) {  // "0-3" and "0,1,2,3" are the same GPUs
    std::string err;
    auto x = parse_gpu_list(a.gpus, &err), y = parse_gpu_list(b.gpus, &err);
    if (x && y) return *x == *y;
  }
  return std::visit([&](auto member) { return a.*member == b.*member; }, spec.member);
}

void copy_setting(const SettingSpec& spec, const Settings& from, Settings& to) {
  std::visit([&](auto member) { to.*member = from.*member; }, spec.member);
}

std::string set_setting_text(const SettingSpec& spec, std::string_view text, Settings& into) {
  nlohmann::json v = std::string(text);
  if (spec.kind == K::Number || spec.kind == K::Positive || spec.kind == K::Percent || spec.kind == K::Count ||
      spec.kind == K::Whole) {
    std::string s(text);
    char* end = nullptr;
    double x = std::strtod(s.c_str(), &end);
    if (s.empty() || *end)
      return fmt::format("must be {}, not \"{}\"",
                         spec.kind == K::Count || spec.kind == K::Whole ? "a whole number" : "a number", s);
    bool whole = s.find_first_of(".eE") == std::string::npos;
    // A whole number stays one, so that a message quotes it as given ("got 0", not "got 0.0").
    v = whole && std::fabs(x) < 9e18 ? nlohmann::json(std::strtoll(s.c_str(), nullptr, 10)) : nlohmann::json(x);
  }
  return read_setting(spec, v, into);
}

}  // namespace gpuq
