#include "gpuq/core/local_time.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>

#include <cmath>
#include <ctime>

namespace gpuq {

std::string local_time(double t, double now) {
  constexpr double kYear9999 = 253402300799;  // 9999-12-31 23:59:59 UTC
  if (!std::isfinite(t) || std::fabs(t) > kYear9999 || !std::isfinite(now) || std::fabs(now) > kYear9999)
    return "after the year 9999";
  time_t secs = static_cast<time_t>(std::llround(t)), today = static_cast<time_t>(std::llround(now));
  tm local, here;
  localtime_r(&secs, &local);
  localtime_r(&today, &here);
  char buf[64];
  bool same_day = local.tm_yday == here.tm_yday && local.tm_year == here.tm_year;
  const char* form = same_day ? "%H:%M" : "%a %H:%M";
  if (std::fabs(t - now) > 6 * 86400) form = local.tm_year == here.tm_year ? "%a %d %b %H:%M" : "%a %d %b %Y %H:%M";
  strftime(buf, sizeof buf, form, &local);
  return buf;
}

std::string fixed(double v, int width, int precision) {
  std::string out;
  append_fixed(out, v, width, precision);
  return out;
}

// std::to_chars rounds as printf does (exactly, ties by the binary value), as fmt's
// "{:.Pf}" does; it costs about a third of fmt's parse-and-format per number, and
// simulate's timeline prints two per job: format_timeline took 40 % of
// `simulate --all` on 100,000 jobs (callgrind, 582 M of 1,439 M instructions).
void append_fixed(std::string& out, double v, int width, int precision) {
  if (!std::isfinite(v) || std::fabs(v) >= 1e12 || precision < 0 || precision > 17) {
    if (std::isfinite(v) && std::fabs(v) >= 1e12)
      fmt::format_to(std::back_inserter(out), "{:{}.{}e}", v, width, precision);
    else
      fmt::format_to(std::back_inserter(out), "{:{}.{}f}", v, width, precision);
    return;
  }
  char buf[40];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, precision);
  if (ec != std::errc()) {
    fmt::format_to(std::back_inserter(out), "{:{}.{}f}", v, width, precision);
    return;
  }
  ptrdiff_t n = end - buf;
  if (n < width) out.append(static_cast<size_t>(width - n), ' ');
  out.append(buf, static_cast<size_t>(n));
}

std::string duration_text(double seconds) {
  seconds = std::max(0.0, seconds);
  if (seconds < 59.5) return fmt::format("{:.0f} s", seconds);
  if (seconds < 3600) return fmt::format("{:.0f} min", seconds / 60);
  return fixed(seconds / 3600, 0, 1) + "h";
}

std::string hours_text(double hours) {
  if (hours < 0.1) return duration_text(hours * 3600);
  return fmt::format("{:.2f}h", hours);
}

std::string clock_stamp(double t) {
  time_t secs = static_cast<time_t>(t);
  tm local;
  localtime_r(&secs, &local);
  char buf[16];
  strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return fmt::format("[{}]", buf);
}

}  // namespace gpuq
