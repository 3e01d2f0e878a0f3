#include "gpuq/core/json_error.h"

#include <cctype>

namespace gpuq {

namespace {

// nlohmann reports the offset just past the offending token: step back to its start.
size_t token_start(std::string_view text, size_t last) {
  if (last >= text.size()) return text.size();
  if (text[last] == '"' && last > 0) {
    size_t i = last;
    while (i > 0) {
      --i;
      if (text[i] == '"') {
        size_t bs = 0;
        for (size_t k = i; k > 0 && text[k - 1] == '\\'; --k) ++bs;
        if (bs % 2 == 0) return i;
      }
    }
    return last;
  }
  auto word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '+'; };
  if (!word(text[last])) return last;
  size_t i = last;
  while (i > 0 && word(text[i - 1])) --i;
  return i;
}

// The text after nlohmann's "[json.exception...] " prefix and its own "parse error at ...: ".
std::string reason(const std::string& what) {
  std::string msg = what;
  auto bracket = msg.find("] ");
  if (bracket != std::string::npos) msg = msg.substr(bracket + 2);
  if (msg.rfind("parse error", 0) == 0) {
    auto colon = msg.find(": ");
    if (colon != std::string::npos) msg = msg.substr(colon + 2);
  }
  return msg;
}

}  // namespace

JsonErrorPlace describe_json_error(std::string_view text, const nlohmann::json::exception& e) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return {"line 1, column 1", "the file is empty"};
  const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e);
  if (!pe) return {"top level", reason(e.what())};
  size_t at = token_start(text, pe->byte == 0 ? 0 : pe->byte - 1);
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {"line " + std::to_string(line) + ", column " + std::to_string(col), reason(e.what())};
}

}  // namespace gpuq
