#include "gpuq/core/json_read.h"

#include "gpuq/core/json_error.h"

#include <charconv>
#include <cstdint>
#include <optional>

namespace gpuq {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// Deeper texts are refused (nlohmann/json takes any depth); the values gpuq copies
// out of a text (unknown state fields, values quoted in messages) are copied by recursion.
constexpr size_t kMaxDepth = 10000;

// Reads the text with nlohmann/json, which keeps nothing, to word its first error.
struct ErrorWording : nlohmann::json_sax<nlohmann::json> {
  std::string_view text;
  std::optional<JsonErrorPlace> place;
  explicit ErrorWording(std::string_view t) : text(t) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
    place = describe_json_error(text, e);
    return false;
  }
};

// What nlohmann/json reads of a text that it takes and simdjson refuses: the text up to
// its first NUL byte (nlohmann's end of input), with each integer literal that does not
// fit 64 bits made fractional ("1" + 20 zeros + ".0"), as nlohmann reads such a number.
simdjson::padded_string as_nlohmann_reads(std::string_view text) {
  text = text.substr(0, text.find('\0'));
  std::string out;
  size_t i = 0, copied = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      ++i;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) {
      ++i;
      continue;
    }
    size_t start = i;
    bool integer = true;
    while (i < text.size() && std::string_view("0123456789+-.eE").find(text[i]) != std::string_view::npos) {
      integer = integer && text[i] != '.' && text[i] != 'e' && text[i] != 'E';
      ++i;
    }
    if (!integer) continue;
    std::string_view token = text.substr(start, i - start);
    std::errc ec;
    if (token[0] == '-') {
      int64_t v;
      ec = std::from_chars(token.data(), token.data() + token.size(), v).ec;
    } else {
      uint64_t v;
      ec = std::from_chars(token.data(), token.data() + token.size(), v).ec;
    }
    if (ec != std::errc::result_out_of_range) continue;
    out.append(text.substr(copied, i - copied));
    out += ".0";
    copied = i;
  }
  out.append(text.substr(copied));
  return simdjson::padded_string(out);
}

simdjson::error_code parse_into(simdjson::dom::parser& parser, std::string_view text, bool padded, element& root) {
  // A parser that has read a text as long (the state, read each tick of run) keeps its buffers.
  if (parser.capacity() < text.size() || parser.max_depth() != kMaxDepth)
    if (auto e = parser.allocate(std::max(text.size(), size_t{64}), kMaxDepth)) return e;
  return parser.parse(text.data(), text.size(), !padded).get(root);
}

template <typename J>
J convert(element v) {
  switch (v.type()) {
    case element_type::NULL_VALUE: return nullptr;
    case element_type::BOOL: return bool(v);
    case element_type::STRING: return std::string(std::string_view(v));
    case element_type::DOUBLE: return double(v);
    case element_type::UINT64: return uint64_t(v);
    case element_type::INT64: {
      int64_t i = int64_t(v);
      return i >= 0 ? J(static_cast<uint64_t>(i)) : J(i);
    }
    case element_type::ARRAY: {
      J a = J::array();
      for (element x : simdjson::dom::array(v)) a.push_back(convert<J>(x));
      return a;
    }
    case element_type::OBJECT: {
      J o = J::object();
      for (auto [k, x] : simdjson::dom::object(v)) o[std::string(k)] = convert<J>(x);
      return o;
    }
  }
  return nullptr;
}

}  // namespace

JsonText parse_json(simdjson::dom::parser& parser, std::string_view text, bool padded) {
  JsonText out;
  constexpr std::string_view bom = "\xEF\xBB\xBF";
  std::string_view body = text.substr(0, 3) == bom ? text.substr(3) : text;
  auto err = parse_into(parser, body, padded, out.root);
  if (!err) return out;
  ErrorWording wording(text);
  nlohmann::json::sax_parse(text.begin(), text.end(), &wording);
  if (wording.place) {
    out.where = wording.place->where;
    out.why = wording.place->why;
    return out;
  }
  // nlohmann/json takes the text: read what it reads. Only a text simdjson still
  // refuses (nested deeper than kMaxDepth) is refused, with simdjson's reason.
  simdjson::padded_string same = as_nlohmann_reads(body);
  err = parse_into(parser, same, true, out.root);
  if (!err) return out;
  out.where = "top level";
  out.why = simdjson::error_message(err);
  return out;
}

const char* json_kind(element v, bool tell_fractions) {
  switch (v.type()) {
    case element_type::NULL_VALUE: return "null";
    case element_type::BOOL: return "a boolean";
    case element_type::STRING: return "a string";
    case element_type::ARRAY: return "a list";
    case element_type::OBJECT: return "an object";
    case element_type::DOUBLE: return tell_fractions ? "a fractional number" : "a number";
    default: return "a number";
  }
}

nlohmann::json to_nlohmann(element v) { return convert<nlohmann::json>(v); }
nlohmann::ordered_json to_ordered_json(element v) { return convert<nlohmann::ordered_json>(v); }

}  // namespace gpuq
