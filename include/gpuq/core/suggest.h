// "did you mean ...?": the known name nearest a mistyped one (fields, dep ids, flags).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuq {

/// Edits (insert, delete, replace, swap of two neighbours) from `a` to `b`, ignoring case.
size_t edit_distance(std::string_view a, std::string_view b);

/// The most edits a word of this length may be from a name to count as a typo of it:
/// 1 up to 4 characters, else 2.
size_t typo_distance(std::string_view word);

/// The candidate nearest `word` within typo_distance(word) (the first of equals), or nullopt.
/// `word` itself, if among the candidates, is not suggested.
std::optional<std::string> nearest_name(std::string_view word, const std::vector<std::string_view>& candidates);

/// `; did you mean "X"?` for nearest_name, or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace gpuq
