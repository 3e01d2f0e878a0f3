// Where and why a JSON text failed to parse, for messages that name the place.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace gpuq {

/// "line L, column C" of the token nlohmann/json stopped at, and the reason
/// in words ("the file is empty" for blank text).
struct JsonErrorPlace {
  std::string where;
  std::string why;
};

/// Describes a parse failure of `text`; `e` is what nlohmann/json threw.
JsonErrorPlace describe_json_error(std::string_view text, const nlohmann::json::exception& e);

}  // namespace gpuq
