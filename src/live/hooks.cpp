#include "gpuq/live/hooks.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <thread>

#include "gpuq/live/proc.h"

namespace gpuq {

namespace {

const std::vector<std::string>& outcome_names() {
  static const std::vector<std::string> names{"done", "failed", "killed", "lost", "hung", "unstartable", "requeued",
                                              "unknown"};
  return names;
}

bool known_name(const std::string& n) {
  const auto& k = event_kinds();
  const auto& o = outcome_names();
  return std::find(k.begin(), k.end(), n) != k.end() || std::find(o.begin(), o.end(), n) != o.end();
}

}  // namespace

std::optional<HookSpec> parse_hook(const std::string& text, std::string* problem) {
  HookSpec h;
  h.text = text;
  h.command = text;
  // `names:CMD` when what comes before the first ':' is a list of lowercase names
  // (a URL or a command with a colon elsewhere is a plain CMD).
  size_t colon = text.find(':');
  if (colon != std::string::npos && colon > 0 &&
      text.find_first_not_of("abcdefghijklmnopqrstuvwxyz_,", 0) == colon) {
    std::vector<std::string> names;
    size_t pos = 0;
    std::string list = text.substr(0, colon);
    while (pos <= list.size()) {
      size_t comma = list.find(',', pos);
      if (comma == std::string::npos) comma = list.size();
      names.push_back(list.substr(pos, comma - pos));
      pos = comma + 1;
    }
    for (const std::string& n : names) {
      if (!known_name(n)) {
        std::string kinds;
        for (const auto& k : event_kinds()) kinds += k + ", ";
        for (const auto& o : outcome_names()) kinds += o + (o == "unknown" ? "" : ", ");
        if (problem)
          *problem = fmt::format("--on-event '{}': \"{}\" is not an event kind or outcome (one of: {})", text, n, kinds);
        return std::nullopt;
      }
    }
    h.only = std::move(names);
    h.command = text.substr(colon + 1);
  }
  if (h.command.find_first_not_of(" \t") == std::string::npos) {
    if (problem) *problem = fmt::format("--on-event '{}': no command", text);
    return std::nullopt;
  }
  return h;
}

bool hook_wants(const HookSpec& h, const Event& e) {
  if (h.only.empty()) return true;
  const auto& kinds = event_kinds();
  for (const std::string& n : h.only) {
    if (n == e.kind) return true;
    // An outcome name (not also a kind, as timeout is) picks the ends with that outcome.
    if (e.kind == "end" && e.outcome == n && std::find(kinds.begin(), kinds.end(), n) == kinds.end()) return true;
  }
  return false;
}

HookRunner::HookRunner(std::vector<HookSpec> hooks, Options opt, std::function<void(const std::string&)> say)
    : hooks_(std::move(hooks)), opt_(std::move(opt)), say_(std::move(say)) {}

HookRunner::~HookRunner() {
  for (Running& r : running_) ::close(r.status_fd);
}

void HookRunner::fire(const std::vector<Event>& events) {
  for (const Event& e : events)
    for (size_t h = 0; h < hooks_.size(); ++h)
      if (hook_wants(hooks_[h], e)) {
        if (running_.size() < opt_.max_running && queue_.empty())
          spawn(h, e);
        else if (queue_.size() < 100000)
          queue_.emplace_back(h, e);
        else
          report(h, e.kind, e.id, "was not run: over 100000 hooks wait their turn");
      }
}

void HookRunner::spawn(size_t h, const Event& e) {
  const HookSpec& hook = hooks_[h];
  std::map<std::string, std::string> env = environment();
  for (const char* k : {"GPUQ_EVENT", "GPUQ_JOB_ID", "GPUQ_ATTEMPT", "GPUQ_TIME", "GPUQ_GPUS", "GPUQ_PID",
                        "GPUQ_OUTCOME", "GPUQ_EXIT", "GPUQ_SECONDS", "GPUQ_LOG", "GPUQ_PLAN", "GPUQ_BY"})
    env.erase(k);
  env["GPUQ_EVENT"] = e.kind;
  env["GPUQ_JOB_ID"] = e.id;
  env["GPUQ_ATTEMPT"] = std::to_string(e.attempt);
  env["GPUQ_TIME"] = fmt::format("{}", e.t);
  env["GPUQ_BY"] = e.by;
  env["GPUQ_PLAN"] = opt_.plan;
  env["GPUQ_LOG"] = opt_.logs + "/" + e.id + ".log";
  if (e.gpus) {
    std::string g;
    for (size_t i = 0; i < e.gpus->size(); ++i) g += (i ? "," : "") + std::to_string((*e.gpus)[i]);
    env["GPUQ_GPUS"] = g;
  }
  if (e.pid) env["GPUQ_PID"] = std::to_string(*e.pid);
  if (e.outcome) env["GPUQ_OUTCOME"] = *e.outcome;
  if (e.exit) env["GPUQ_EXIT"] = std::to_string(*e.exit);
  if (e.seconds) env["GPUQ_SECONDS"] = fmt::format("{:.3f}", *e.seconds);
  std::vector<std::string> env_strings = environment_strings(env);

  int in[2], status[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return report(h, e.kind, e.id, fmt::format("was not run: pipe: {}", std::strerror(errno)));
  if (::pipe2(status, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return report(h, e.kind, e.id, fmt::format("was not run: pipe: {}", std::strerror(errno)));
  }
  int out = ::open(opt_.output.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (out < 0) out = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  // bash runs `timeout` (a process group of its own, killed whole at the limit) and
  // writes the hook's exit status to fd 3, which gpuq reads at a later tick.
  std::vector<std::string> args{"bash", "-c", "timeout -k 5 \"$1\" bash -c \"$2\" gpuq-hook; echo $? >&3",
                                "gpuq-hook", fmt::format("{:g}", opt_.timeout_s), hook.command};
  pid_t pid = 0;
  int rc = spawn_process(&pid, "bash", true, {in[0], out, out, status[1]}, POSIX_SPAWN_SETSID, args, &env_strings);
  ::close(in[0]);
  ::close(status[1]);
  if (out >= 0) ::close(out);
  if (rc != 0) {
    ::close(in[1]);
    ::close(status[0]);
    return report(h, e.kind, e.id, fmt::format("was not run: posix_spawn(bash): {}", std::strerror(rc)));
  }
  // The event as one line on stdin (far less than a pipe holds, so this never waits).
  std::string line = event_line(e) + "\n";
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  ssize_t ignored = ::write(in[1], line.data(), line.size());
  (void)ignored;
  ::close(in[1]);
  ::fcntl(status[0], F_SETFL, O_NONBLOCK);
  running_.push_back({h, e.kind, e.id, status[0], {}});
}

void HookRunner::report(size_t h, const std::string& kind, const std::string& id, const std::string& what) {
  if (!reported_.insert({h, kind}).second) return;
  say_(fmt::format("hook {} ({}) {} for the {} event of {}; its output is in {}; later failures of this hook on {} "
                   "events are not reported",
                   h + 1, hooks_[h].text, what, kind, id, opt_.output, kind));
}

void HookRunner::poll() {
  for (size_t i = 0; i < running_.size();) {
    Running& r = running_[i];
    char buf[64];
    ssize_t n;
    bool ended = false;
    while ((n = ::read(r.status_fd, buf, sizeof buf)) > 0) r.got.append(buf, static_cast<size_t>(n));
    if (n == 0) ended = true;
    if (n < 0 && errno != EAGAIN && errno != EINTR) ended = true;
    if (!ended) {
      ++i;
      continue;
    }
    ::close(r.status_fd);
    std::string got = r.got;
    while (!got.empty() && (got.back() == '\n' || got.back() == ' ')) got.pop_back();
    if (got.empty())
      report(r.hook, r.kind, r.id, "ended without an exit status (killed?)");
    else if (got == "124" || got == "137")
      report(r.hook, r.kind, r.id, fmt::format("ran past --hook-timeout {:g} s and was stopped", opt_.timeout_s));
    else if (got != "0")
      report(r.hook, r.kind, r.id, fmt::format("failed (exit {})", got));
    running_.erase(running_.begin() + static_cast<long>(i));
  }
  while (!queue_.empty() && running_.size() < opt_.max_running) {
    auto [h, e] = std::move(queue_.front());
    queue_.pop_front();
    spawn(h, e);
  }
}

void HookRunner::drain(double seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (busy() && std::chrono::steady_clock::now() < until) {
    poll();
    if (busy()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace gpuq
