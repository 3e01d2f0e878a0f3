#include "gpuq/core/plan_text.h"

#include <vector>

namespace gpuq {

namespace {

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A scan of JSON text: the position just past the string that starts at `i` (a '"').
size_t past_string(std::string_view t, size_t i) {
  for (++i; i < t.size(); ++i) {
    if (t[i] == '\\') ++i;
    else if (t[i] == '"') return i + 1;
  }
  return std::string_view::npos;
}

// The position of the bracket that closes the list or object opening at `open`, or npos.
size_t closing(std::string_view t, size_t open) {
  int depth = 0;
  for (size_t i = open; i < t.size(); ++i) {
    char c = t[i];
    if (c == '"') {
      i = past_string(t, i);
      if (i == std::string_view::npos) return i;
      --i;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) return i;
    }
  }
  return std::string_view::npos;
}

size_t skip_space(std::string_view t, size_t i) {
  while (i < t.size() && space(t[i])) ++i;
  return i;
}

// The '[' of the job list: the top-level list, or the last "jobs" member of the top-level object.
size_t job_list(std::string_view t) {
  size_t i = skip_space(t, t.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0);
  if (i >= t.size()) return std::string_view::npos;
  if (t[i] == '[') return i;
  if (t[i] != '{') return std::string_view::npos;
  size_t found = std::string_view::npos;
  for (++i;;) {
    i = skip_space(t, i);
    if (i >= t.size() || t[i] != '"') return found;
    size_t end = past_string(t, i);
    if (end == std::string_view::npos) return found;
    std::string_view key = t.substr(i + 1, end - i - 2);
    i = skip_space(t, end);
    if (i >= t.size() || t[i] != ':') return found;
    i = skip_space(t, i + 1);
    if (i >= t.size()) return found;
    size_t value = i;
    if (t[i] == '[' || t[i] == '{') {
      i = closing(t, i);
      if (i == std::string_view::npos) return found;
      ++i;
    } else if (t[i] == '"') {
      i = past_string(t, i);
      if (i == std::string_view::npos) return found;
    } else {
      while (i < t.size() && t[i] != ',' && t[i] != '}' && !space(t[i])) ++i;
    }
    if (key == "jobs" && t[value] == '[') found = value;
    i = skip_space(t, i);
    if (i >= t.size() || t[i] != ',') return found;
    ++i;
  }
}

}  // namespace

std::optional<std::string> append_job_text(std::string_view text, std::string_view job, std::string* problem) {
  size_t open = job_list(text);
  size_t close = open == std::string_view::npos ? open : closing(text, open);
  if (close == std::string_view::npos) {
    if (problem) *problem = "no list of jobs found (a plan is a list of jobs, or an object with a \"jobs\" list)";
    return std::nullopt;
  }
  size_t last = close;  // just past the list's last element
  while (last > open + 1 && space(text[last - 1])) --last;
  size_t first = skip_space(text, open + 1);
  std::string insert;
  if (last == open + 1) {
    insert = std::string(job);  // an empty list
  } else if (text.substr(open, first - open).find('\n') != std::string_view::npos) {
    // One job a line: the new one on a line of its own, indented as the first.
    size_t line = text.rfind('\n', first - 1);
    insert = ",\n" + std::string(text.substr(line + 1, first - line - 1)) + std::string(job);
  } else {
    insert = ", " + std::string(job);
  }
  std::string out;
  out.reserve(text.size() + insert.size());
  out.append(text.substr(0, last));
  out += insert;
  out.append(text.substr(last));
  return out;
}

}  // namespace gpuq
