#include "gpuq/core/limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "gpuq/core/rules.h"

namespace gpuq {

namespace {

// The POSIX signal names a warning may use (the live side maps them to numbers).
constexpr std::array<std::string_view, 30> kSignalNames = {
    "HUP",  "INT",  "QUIT", "ILL",  "TRAP", "ABRT", "BUS",  "FPE",  "KILL",   "USR1",
    "SEGV", "USR2", "PIPE", "ALRM", "TERM", "CHLD", "CONT", "STOP", "TSTP",   "TTIN",
    "TTOU", "URG",  "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR",  "SYS"};

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return u;
}

}  // namespace

WarnSpec SignalSpec::warn() const {
  WarnSpec w;
  if (name) w.name = kSignalNames[name - 1];
  w.number = number;
  w.shell_only = shell_only;
  return w;
}

std::string SignalSpec::text() const {
  return fmt::format("{}{}", shell_only ? "B:" : "", name ? std::string(kSignalNames[name - 1]) : std::to_string(number));
}

std::variant<SignalSpec, std::string> parse_signal(std::string_view text) {
  const std::string form = "expected [B:]SIGNAL, e.g. \"USR1\", or \"B:USR1\" for the script's bash only";
  std::string_view sig = text;
  SignalSpec out;
  if (sig.size() >= 2 && (sig[0] == 'B' || sig[0] == 'b') && sig[1] == ':') {
    out.shell_only = true;
    sig.remove_prefix(2);
  }
  if (!sig.empty() && sig.find_first_not_of("0123456789") == std::string_view::npos) {
    int n = 0;
    auto r = std::from_chars(sig.data(), sig.data() + sig.size(), n);
    if (r.ec != std::errc() || n < 1 || n > 64) return fmt::format("\"{}\": signal number {} is not 1-64", text, sig);
    out.number = static_cast<uint8_t>(n);
    return out;
  }
  std::string name = upper(sig);
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  auto it = std::find(kSignalNames.begin(), kSignalNames.end(), name);
  if (it == kSignalNames.end()) return fmt::format("\"{}\": unknown signal \"{}\" ({})", text, sig, form);
  out.name = static_cast<uint8_t>(it - kSignalNames.begin() + 1);
  return out;
}

std::string WarnSpec::text() const {
  return fmt::format("{}{}@{}", shell_only ? "B:" : "", name.empty() ? std::to_string(number) : name, seconds);
}

std::variant<WarnSpec, std::string> parse_warn_signal(std::string_view text) {
  const std::string form = "expected [B:]SIGNAL@SECONDS, e.g. \"USR1@90\", or \"B:USR1@90\" for the script's bash only";
  size_t at = text.find('@');
  if (at == std::string_view::npos) return fmt::format("\"{}\" has no '@' ({})", text, form);
  std::string_view sig = text.substr(0, at), secs = text.substr(at + 1);
  WarnSpec w;
  if (sig.size() >= 2 && (sig[0] == 'B' || sig[0] == 'b') && sig[1] == ':') {
    w.shell_only = true;
    sig.remove_prefix(2);
  }
  if (!sig.empty() && sig.find_first_not_of("0123456789") == std::string_view::npos) {
    auto r = std::from_chars(sig.data(), sig.data() + sig.size(), w.number);
    if (r.ec != std::errc() || w.number < 1 || w.number > 64)
      return fmt::format("\"{}\": signal number {} is not 1-64", text, sig);
  } else {
    std::string name = upper(sig);
    if (name.rfind("SIG", 0) == 0) name = name.substr(3);
    if (std::find(kSignalNames.begin(), kSignalNames.end(), name) == kSignalNames.end())
      return fmt::format("\"{}\": unknown signal \"{}\" ({})", text, sig, form);
    w.name = name;
  }
  auto r = std::from_chars(secs.data(), secs.data() + secs.size(), w.seconds);
  if (secs.empty() || r.ec != std::errc() || r.ptr != secs.data() + secs.size() || !std::isfinite(w.seconds) ||
      w.seconds < 0)
    return fmt::format("\"{}\": \"{}\" is not a number of seconds ({})", text, secs, form);
  return w;
}

std::optional<double> limit_hours(const Job& job, double factor) {
  if (job.time_limit_hours) return job.time_limit_hours;
  if (factor > 0) return factor * job.est_hours;
  return std::nullopt;
}

double run_hours(const Job& job, double factor) {
  auto limit = limit_hours(job, factor);
  return limit ? std::min(job.est_hours, *limit) : job.est_hours;
}

std::optional<double> deadline(const Job& job, const JobState& s, double factor) {
  auto limit = limit_hours(job, factor);
  if (!limit || !s.start) return std::nullopt;
  return *s.start + *limit * 3600;
}

LimitCheck check_limit(const Job& job, const JobState& s, double factor, double now) {
  LimitCheck c;
  auto end = deadline(job, s, factor);
  if (s.status != Status::Running || !end) return c;
  if (now >= *end) {
    c.act = LimitCheck::Act::Timeout;
    return c;
  }
  c.next_in = *end - now;
  if (job.warn_signal && !s.warn_sent) {
    double warn_at = *end - job.warn_signal->seconds;
    if (now >= warn_at)
      c.act = LimitCheck::Act::Warn;
    else
      c.next_in = warn_at - now;
  }
  return c;
}

long long timeout_exit(const Job& job) { return job.retry_on_timeout ? kTimeoutRetryExit : kKilledExit; }

void write_stop(JobState& s, const Job& job, Outcome outcome, Cause cause, double at) {
  Ended e;
  e.attempts = s.attempts_or0();
  e.outcome = outcome;
  e.exit = timeout_exit(job);
  e.end = at;
  e.start = s.start;
  write_life(s, e, cause);
}

bool timed_out(const JobState& s) { return s.outcome && *s.outcome == kTimeoutOutcome; }

}  // namespace gpuq
