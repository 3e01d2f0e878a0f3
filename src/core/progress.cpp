#include "gpuq/core/progress.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace gpuq {

namespace {

bool digit(char c) { return c >= '0' && c <= '9'; }
bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<double> number(std::string_view s) {
  if (s.empty()) return std::nullopt;
  double x = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(x)) return std::nullopt;
  return x;
}

std::optional<double> count_fraction(double k, double n) {
  if (!(n > 0) || k < 0 || k > n) return std::nullopt;
  return k / n;
}

// The last "k/N" in `piece` whose numbers are whole and stand alone (no digit, '/' or '.'
// around them: "2024/12/05" and "1.5/2" are no counts), and not touching the piece's end when
// `open_end` (a write may be cut short there).
std::optional<double> last_count(std::string_view piece, bool open_end) {
  for (size_t slash = piece.rfind('/'); slash != std::string_view::npos && slash > 0;
       slash = piece.rfind('/', slash - 1)) {
    size_t a = slash, b = slash + 1;
    while (a > 0 && digit(piece[a - 1])) --a;
    while (b < piece.size() && digit(piece[b])) ++b;
    if (a == slash || b == slash + 1) continue;
    if (a > 0 && (piece[a - 1] == '/' || piece[a - 1] == '.')) continue;
    if (b == piece.size() ? open_end : (piece[b] == '/' || piece[b] == '.')) continue;
    auto k = number(piece.substr(a, slash - a)), n = number(piece.substr(slash + 1, b - slash - 1));
    if (k && n)
      if (auto f = count_fraction(*k, *n)) return f;
  }
  return std::nullopt;
}

// The last "NN%" or "NN.N%" (0-100) of `piece`.
std::optional<double> last_percent(std::string_view piece) {
  for (size_t pct = piece.rfind('%'); pct != std::string_view::npos && pct > 0; pct = piece.rfind('%', pct - 1)) {
    size_t a = pct;
    while (a > 0 && (digit(piece[a - 1]) || piece[a - 1] == '.')) --a;
    if (a == pct || !digit(piece[a])) continue;
    auto x = number(piece.substr(a, pct - a));
    if (x && *x <= 100) return *x / 100;
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> parse_progress_text(std::string_view text) {
  std::string_view s = trimmed(text);
  if (s.empty()) return std::nullopt;
  if (s.back() == '%') {
    auto x = number(trimmed(s.substr(0, s.size() - 1)));
    if (!x || *x < 0 || *x > 100) return std::nullopt;
    return *x / 100;
  }
  if (size_t slash = s.find('/'); slash != std::string_view::npos) {
    auto k = number(trimmed(s.substr(0, slash))), n = number(trimmed(s.substr(slash + 1)));
    if (!k || !n) return std::nullopt;
    return count_fraction(*k, *n);
  }
  auto x = number(s);
  if (!x || *x < 0 || *x > 1) return std::nullopt;
  return *x;
}

std::optional<double> progress_in_log(std::string_view tail) {
  constexpr std::string_view kHeader = "== gpuq: attempt ";
  if (size_t h = tail.rfind(kHeader); h != std::string_view::npos) {
    size_t eol = tail.find('\n', h);
    tail = eol == std::string_view::npos ? std::string_view() : tail.substr(eol + 1);
  }
  size_t end = tail.size();
  bool open_end = true;  // the last piece may be a write cut short
  while (end > 0) {
    size_t cut = tail.find_last_of("\r\n", end - 1);
    size_t begin = cut == std::string_view::npos ? 0 : cut + 1;
    std::string_view piece = tail.substr(begin, end - begin);
    if (auto f = last_count(piece, open_end)) return f;
    if (auto f = last_percent(piece)) return f;
    if (cut == std::string_view::npos) break;
    end = cut;
    open_end = false;
  }
  return std::nullopt;
}

std::optional<ProgressSpan> progress_span(const JobState& s) {
  if (!s.progress || !s.progress_at) return std::nullopt;
  ProgressSpan span;
  span.last = {*s.progress_at, *s.progress};
  span.first = {s.progress_first_at.value_or(*s.progress_at), s.progress_first.value_or(*s.progress)};
  return span;
}

bool note_progress(JobState& s, double fraction, double at) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  if (s.progress && *s.progress == fraction) return false;
  // The first reading, or a bar that started over (a new one, or the job's own restart):
  // the rate is measured from here.
  if (!s.progress || fraction < *s.progress) {
    s.progress_first = fraction;
    s.progress_first_at = at;
  } else if (s.progress_at && at < *s.progress_at) {
    at = *s.progress_at;  // never back in time
  }
  s.progress = fraction;
  s.progress_at = at;
  return true;
}

std::optional<ProgressFinish> finish_from_progress(const ProgressSpan& span, double start, double est_seconds,
                                                   double now) {
  double moved = span.last.fraction - span.first.fraction, took = span.last.at - span.first.at;
  if (!(took > 0) || moved < kProgressMinMove - 1e-12) return std::nullopt;
  double rate = moved / took;  // fraction per second
  double by_rate = span.last.at + (1 - span.last.fraction) / rate;
  double by_estimate = std::max(start + est_seconds, now);
  double w = std::min(1.0, moved / kProgressFullMove);
  ProgressFinish f;
  f.weight = w;
  f.end = std::max(now, w * by_rate + (1 - w) * by_estimate);
  return f;
}

std::optional<ProgressFinish> finish_from_entry(const Job& job, const JobState& s, double now) {
  if (s.status != Status::Running || !s.start) return std::nullopt;
  std::optional<ProgressSpan> span = progress_span(s);
  if (!span) return std::nullopt;
  return finish_from_progress(*span, *s.start, job.est_hours * 3600, now);
}

bool finish_slipped(double was, double now_finish, double now, double percent, double minutes) {
  double left = std::max(0.0, was - now);
  return std::fabs(now_finish - was) > std::max(percent / 100 * left, minutes * 60);
}

std::string shift_text(double seconds) {
  const char* sign = seconds < 0 ? "-" : "+";
  double a = std::fabs(seconds);
  if (a < 90) return fmt::format("{}{:.0f} s", sign, a);
  if (a < 5400) return fmt::format("{}{:.0f} min", sign, a / 60);
  return fmt::format("{}{:.1f} h", sign, a / 3600);
}

bool progress_from_log(const Job& j, std::string_view setting) {
  return j.progress_from_log.value_or(setting != "false");
}

}  // namespace gpuq
