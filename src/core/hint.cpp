// Command hints that act on the plan they were printed for.
#include "gpuq/core/hint.h"

#include <algorithm>

namespace gpuq {

namespace {
std::string& flags_store() {
  static std::string flags;
  return flags;
}
}  // namespace

void set_hint_flags(std::string flags) { flags_store() = std::move(flags); }

const std::string& hint_flags() { return flags_store(); }

std::string shell_word(std::string_view word) {
  auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_-./=:,+@%").find(c) != std::string_view::npos;
  };
  if (!word.empty() && std::all_of(word.begin(), word.end(), plain)) return std::string(word);
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {
template <class Words>
std::string hint_of(std::string_view command, const Words& args) {
  std::string out = "`gpuq ";
  out += command;
  if (!hint_flags().empty()) out += " " + hint_flags();
  for (std::string_view a : args) out += " " + shell_word(a);
  return out + "`";
}
}  // namespace

std::string hint(std::string_view command, std::initializer_list<std::string_view> args) {
  return hint_of(command, args);
}

std::string hint(std::string_view command, const std::vector<std::string>& args) { return hint_of(command, args); }

}  // namespace gpuq
