// Reading JSON for the plan and state loaders. simdjson parses and checks the
// whole text; a text it refuses is read again by nlohmann/json only to word the
// error with its line and column, as gpuq has always worded it.
#pragma once

#include <simdjson.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace gpuq {

/// A parsed text, or where and why it is not JSON.
struct JsonText {
  simdjson::dom::element root;  ///< valid while the parser lives, when `why` is empty
  std::string where;            ///< "line L, column C", or "top level" when no place can be named
  std::string why;              ///< the reason; "the file is empty" for blank text
  bool ok() const { return why.empty(); }
};

/// Parses `text` with `parser`, reading it as nlohmann/json does: a UTF-8 byte
/// order mark is skipped, and an integer too large for 64 bits is a fractional
/// number (a double). `padded`: SIMDJSON_PADDING bytes past the end of `text`
/// may be read (else simdjson copies the text).
JsonText parse_json(simdjson::dom::parser& parser, std::string_view text, bool padded = false);

/// "null", "a boolean", "a string", "a list", "an object", "a number" (and, with
/// `tell_fractions`, "a fractional number" for one with a fraction or exponent).
const char* json_kind(simdjson::dom::element v, bool tell_fractions);

/// A whole number (simdjson's int64 or uint64; an integer past 64 bits is fractional).
inline bool json_is_integer(simdjson::dom::element v) {
  return v.type() == simdjson::dom::element_type::INT64 || v.type() == simdjson::dom::element_type::UINT64;
}
inline bool json_is_number(simdjson::dom::element v) {
  return json_is_integer(v) || v.type() == simdjson::dom::element_type::DOUBLE;
}
/// A number as a double (as nlohmann/json's get<double>() gives it).
inline double json_as_double(simdjson::dom::element v) {
  switch (v.type()) {
    case simdjson::dom::element_type::INT64: return static_cast<double>(int64_t(v));
    case simdjson::dom::element_type::UINT64: return static_cast<double>(uint64_t(v));
    default: return double(v);
  }
}

/// The value as nlohmann/json would hold it had it parsed the text (a repeated
/// key keeps its last value; non-negative integers are unsigned).
nlohmann::json to_nlohmann(simdjson::dom::element v);
nlohmann::ordered_json to_ordered_json(simdjson::dom::element v);

}  // namespace gpuq
