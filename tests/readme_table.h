// The rows of the Markdown tables of the docs (doc/*.md), for tests that hold a table of
// the code and the docs' table of it to each other.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpuq::test {

/// The cells of a Markdown table row ("| a | b |" gives {"a", "b"}), trimmed.
inline std::vector<std::string> table_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t k = 1; k < line.size(); ++k) {
    if (line[k] != '|') {
      cell += line[k];
      continue;
    }
    size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
    cells.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
    cell.clear();
  }
  return cells;
}

/// The rows (cells) of every table in the section of the Markdown file `path` headed
/// `heading` (the exact heading line, up to the next heading of any level) whose header
/// row is `header`. A file that cannot be read gives no rows (the caller's count fails).
inline std::vector<std::vector<std::string>> readme_rows(const std::string& path, const std::string& heading,
                                                         const std::vector<std::string>& header) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  bool in_section = false, in_table = false, in_code = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) in_code = !in_code;  // a '#' in a code block starts no heading
    if (in_code) continue;
    if (line.rfind("#", 0) == 0) {
      in_section = line == heading;
      in_table = false;
      continue;
    }
    if (!in_section) continue;
    if (line.rfind("|", 0) != 0) {
      in_table = false;
      continue;
    }
    std::vector<std::string> cells = table_cells(line);
    if (!in_table) {
      in_table = cells == header;  // a table of the kind asked for: read its rows
      continue;
    }
    if (line.rfind("|---", 0) != 0) rows.push_back(cells);
  }
  return rows;
}

/// "`name`" without its backticks.
inline std::string unquoted(std::string s) {
  if (s.size() >= 2 && s.front() == '`' && s.back() == '`') s = s.substr(1, s.size() - 2);
  return s;
}

}  // namespace gpuq::test
