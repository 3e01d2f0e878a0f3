#include "gpuq/core/local_time.h"

#include <fmt/format.h>

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
  if (std::isfinite(v) && std::fabs(v) >= 1e12) return fmt::format("{:{}.{}e}", v, width, precision);
  return fmt::format("{:{}.{}f}", v, width, precision);
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
