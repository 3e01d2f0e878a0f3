#include "gpuq/core/local_time.h"

#include <fmt/format.h>

#include <cmath>
#include <ctime>

namespace gpuq {

std::string local_time(double t, double now) {
  time_t secs = static_cast<time_t>(std::llround(t)), today = static_cast<time_t>(std::llround(now));
  tm local, here;
  localtime_r(&secs, &local);
  localtime_r(&today, &here);
  char buf[32];
  bool same_day = local.tm_yday == here.tm_yday && local.tm_year == here.tm_year;
  strftime(buf, sizeof buf, same_day ? "%H:%M" : "%a %H:%M", &local);
  return buf;
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
