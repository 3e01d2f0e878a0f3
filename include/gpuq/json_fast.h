// A strict JSON reader for the fast path of the plan and state loaders.
//
// nlohmann/json builds a value for every token, which costs half a second on a
// plan of 100,000 jobs. This reader walks the text in place and hands the
// loaders strings and numbers as it meets them. It takes only what it is sure
// to read exactly as nlohmann/json does; on anything else (a syntax error, a
// \u escape, a number out of range, a byte order mark) it throws FastJsonFail,
// and the loader reads the text again with nlohmann/json, which gives the
// message with its line and column. So its answers equal nlohmann's or it gives
// none (the differential tests and fuzz targets check this).
#pragma once

#include <string>
#include <string_view>

namespace gpuq {

/// The fast reader does not take this text; use the full parser.
struct FastJsonFail {};

/// A JSON number, classified as nlohmann/json does: a literal without fraction
/// or exponent is Int when negative and Uint otherwise; anything else is Float.
struct FastNumber {
  enum class Kind { Int, Uint, Float } kind = Kind::Int;
  long long i = 0;
  unsigned long long u = 0;
  double d = 0;
  bool integer() const { return kind != Kind::Float; }
  double as_double() const {
    return kind == Kind::Int ? static_cast<double>(i) : kind == Kind::Uint ? static_cast<double>(u) : d;
  }
};

/// The known keys met in one object, one bit each. nlohmann/json keeps the last
/// of a repeated key (even a null one): such objects go to the full parser.
class KeysSeen {
 public:
  void once(unsigned bit) {
    if (seen_ & bit) throw FastJsonFail{};
    seen_ |= bit;
  }
  bool has(unsigned bit) const { return seen_ & bit; }

 private:
  unsigned seen_ = 0;
};

class FastJson {
 public:
  explicit FastJson(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  /// The next significant character (0 at the end of the text), whitespace skipped.
  char peek() {
    ws();
    return p_ < end_ ? *p_ : 0;
  }
  /// Skips whitespace and takes `c` if it comes next.
  bool consume(char c) {
    if (peek() != c) return false;
    ++p_;
    return true;
  }
  void expect(char c) {
    if (!consume(c)) throw FastJsonFail{};
  }
  /// An object: `each(key)` for each member, with the reader at the member's
  /// value. `key` may point into `scratch`: compare it before reading strings into it.
  template <typename Each>
  void object(std::string& scratch, Each&& each) {
    expect('{');
    if (consume('}')) return;
    do {
      std::string_view key = string(scratch);
      expect(':');
      each(key);
    } while (consume(','));
    expect('}');
  }
  /// A list: `each()` for each element, with the reader at it.
  template <typename Each>
  void array(Each&& each) {
    expect('[');
    if (consume(']')) return;
    do each();
    while (consume(','));
    expect(']');
  }
  /// A string; the view points into the text or into `scratch` (when it had escapes).
  std::string_view string(std::string& scratch);
  FastNumber number();
  void null();
  /// Any value, checked and skipped; returns its text.
  std::string_view skip_value();
  /// Where the reader is; seek() goes back or on to such a place in the same text.
  const char* pos() const { return p_; }
  void seek(const char* p) { p_ = p; }
  /// The whole text was one value followed by whitespace only.
  void finish() {
    if (peek() != 0) throw FastJsonFail{};
  }

 private:
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  const char* p_;
  const char* end_;
};

}  // namespace gpuq
