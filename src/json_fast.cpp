#include "gpuq/json_fast.h"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <vector>

namespace gpuq {

namespace {

// Length of the well-formed UTF-8 sequence at p (RFC 3629, as nlohmann/json
// checks it), or 0.
size_t utf8_length(const unsigned char* p, const unsigned char* end) {
  auto cont = [&](size_t k, unsigned char lo, unsigned char hi) {
    return p + k < end && p[k] >= lo && p[k] <= hi;
  };
  unsigned char c = p[0];
  if (c >= 0xC2 && c <= 0xDF) return cont(1, 0x80, 0xBF) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0, 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

bool digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::string_view FastJson::string(std::string& scratch) {
  if (peek() != '"') throw FastJsonFail{};
  ++p_;
  const char* start = p_;
  bool escaped = false;
  while (true) {
    // Eight plain bytes at a time: none is '"', '\\', a control character or non-ASCII.
    while (end_ - p_ >= 8) {
      std::uint64_t x;
      std::memcpy(&x, p_, 8);
      constexpr std::uint64_t ones = 0x0101010101010101, highs = 0x8080808080808080;
      auto zero_byte = [&](std::uint64_t v) { return (v - ones) & ~v & highs; };
      if (zero_byte(x ^ (ones * '"')) | zero_byte(x ^ (ones * '\\')) | ((x - ones * 0x20) & ~x & highs) | (x & highs))
        break;
      p_ += 8;
    }
    if (p_ >= end_) throw FastJsonFail{};
    auto c = static_cast<unsigned char>(*p_);
    if (c == '"') break;
    if (c < 0x20) throw FastJsonFail{};
    if (c == '\\') {
      escaped = true;
      if (p_ + 1 >= end_) throw FastJsonFail{};
      char e = p_[1];
      if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't')
        throw FastJsonFail{};  // \u and anything else: the full parser
      p_ += 2;
    } else if (c >= 0x80) {
      size_t n = utf8_length(reinterpret_cast<const unsigned char*>(p_), reinterpret_cast<const unsigned char*>(end_));
      if (!n) throw FastJsonFail{};
      p_ += n;
    } else {
      ++p_;
    }
  }
  std::string_view raw(start, static_cast<size_t>(p_ - start));
  ++p_;
  if (!escaped) return raw;
  scratch.clear();
  for (size_t k = 0; k < raw.size(); ++k) {
    if (raw[k] != '\\') {
      scratch += raw[k];
      continue;
    }
    switch (raw[++k]) {
      case 'b': scratch += '\b'; break;
      case 'f': scratch += '\f'; break;
      case 'n': scratch += '\n'; break;
      case 'r': scratch += '\r'; break;
      case 't': scratch += '\t'; break;
      default: scratch += raw[k];  // " \ /
    }
  }
  return scratch;
}

FastNumber FastJson::number() {
  ws();
  const char* start = p_;
  const char* q = p_;
  if (q < end_ && *q == '-') ++q;
  if (q >= end_ || !digit(*q)) throw FastJsonFail{};
  if (*q == '0') {
    ++q;
  } else {
    while (q < end_ && digit(*q)) ++q;
  }
  bool integer = true;
  if (q < end_ && *q == '.') {
    integer = false;
    ++q;
    if (q >= end_ || !digit(*q)) throw FastJsonFail{};
    while (q < end_ && digit(*q)) ++q;
  }
  if (q < end_ && (*q == 'e' || *q == 'E')) {
    integer = false;
    ++q;
    if (q < end_ && (*q == '+' || *q == '-')) ++q;
    if (q >= end_ || !digit(*q)) throw FastJsonFail{};
    while (q < end_ && digit(*q)) ++q;
  }
  FastNumber n;
  std::from_chars_result r;
  if (integer && *start == '-') {
    n.kind = FastNumber::Kind::Int;
    r = std::from_chars(start, q, n.i);
  } else if (integer) {
    n.kind = FastNumber::Kind::Uint;
    r = std::from_chars(start, q, n.u);
  } else {
    n.kind = FastNumber::Kind::Float;
    r = std::from_chars(start, q, n.d);
  }
  // Out of range (nlohmann/json reads such integers as floats; huge floats are errors): the full parser.
  if (r.ec != std::errc() || r.ptr != q) throw FastJsonFail{};
  p_ = q;
  return n;
}

void FastJson::null() {
  ws();
  if (end_ - p_ < 4 || std::string_view(p_, 4) != "null") throw FastJsonFail{};
  p_ += 4;
}

std::string_view FastJson::skip_value() {
  ws();
  const char* start = p_;
  std::vector<char> open;  // the containers we are in: '{' or '['
  std::string scratch;
  // Iterative, so that deep nesting cannot overflow the stack.
  while (true) {
    char c = peek();
    if (c == '{' || c == '[') {
      ++p_;
      char close = c == '{' ? '}' : ']';
      if (consume(close)) {
        // empty container: a complete value
      } else {
        open.push_back(c);
        if (c == '{') {
          string(scratch);
          expect(':');
        }
        continue;
      }
    } else if (c == '"') {
      string(scratch);
    } else if (c == 't' || c == 'f' || c == 'n') {
      std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
        throw FastJsonFail{};
      p_ += word.size();
    } else {
      number();
    }
    // A value ended: close containers, or go on to the next member.
    while (true) {
      if (open.empty()) return std::string_view(start, static_cast<size_t>(p_ - start));
      char in = open.back();
      if (consume(',')) {
        if (in == '{') {
          string(scratch);
          expect(':');
        }
        break;
      }
      expect(in == '{' ? '}' : ']');
      open.pop_back();
    }
  }
}

}  // namespace gpuq
