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

#include <nlohmann/json.hpp>

#include "gpuq/core/json_error.h"
#include "gpuq/live/plan_edit.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/store.h"

namespace gpuq {

namespace {

const std::vector<std::string>& outcome_names() {
  static const std::vector<std::string> names{"done", "failed", "killed", "lost", "hung", "unstartable", "requeued",
                                              "preempted", "unknown"};
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

std::string hook_marks_path_for(const std::string& state_path) {
  const std::string suffix = ".state.json";
  if (state_path.size() >= suffix.size() && state_path.compare(state_path.size() - suffix.size(), suffix.size(), suffix) == 0)
    return state_path.substr(0, state_path.size() - suffix.size()) + ".hooks.json";
  return state_path + ".hooks.json";
}

long long resume_from(const std::vector<Event>& past, const HookMark& mark) {
  auto size = static_cast<long long>(past.size());
  if (!mark.last) return std::clamp(mark.events, 0LL, size);
  if (mark.events >= 1 && mark.events <= size && past[static_cast<size_t>(mark.events - 1)] == *mark.last)
    return mark.events;
  for (long long k = size; k >= 1; --k)
    if (past[static_cast<size_t>(k - 1)] == *mark.last) return k;
  long long after = 0;  // `last` is gone: go on after the events dated no later than it
  for (long long k = 1; k <= size; ++k)
    if (past[static_cast<size_t>(k - 1)].t <= mark.last->t) after = k;
  return after;
}

std::map<std::string, HookMark> parse_hook_marks(const std::string& text, const std::string& file,
                                                 std::string* problem) {
  std::map<std::string, HookMark> out;
  auto say = [&](const std::string& what) {
    if (problem && problem->empty()) *problem = fmt::format("{}: {}", file, what);
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    JsonErrorPlace at = describe_json_error(text, e);
    say(fmt::format("{}: not valid JSON ({})", at.where, at.why));
    return out;
  }
  if (!j.is_object()) {
    say("not a JSON object of hooks");
    return out;
  }
  for (auto& [hook, v] : j.items()) {
    if (!v.is_object() || !v.contains("events") || !v["events"].is_number_integer() ||
        v["events"].get<long long>() < 0) {
      say(fmt::format("hook \"{}\": \"events\" is not a whole number >= 0", hook));
      continue;
    }
    HookMark m;
    m.events = v["events"].get<long long>();
    if (v.contains("last")) {
      std::string why;
      std::optional<Event> e = v["last"].is_string() ? parse_event(v["last"].get<std::string>(), &why) : std::nullopt;
      if (!e) {
        say(fmt::format("hook \"{}\": \"last\" is not an event line{}", hook, why.empty() ? "" : " (" + why + ")"));
        continue;
      }
      m.last = std::move(*e);
    }
    out[hook] = std::move(m);
  }
  return out;
}

std::string hook_marks_text(const std::map<std::string, HookMark>& marks) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [hook, m] : marks) {
    nlohmann::ordered_json v;
    v["events"] = m.events;
    if (m.last) v["last"] = event_line(*m.last);
    j[hook] = std::move(v);
  }
  return j.dump(1) + "\n";
}

HookRunner::HookRunner(std::vector<HookSpec> hooks, Options opt, std::function<void(const std::string&)> say)
    : hooks_(std::move(hooks)), opt_(std::move(opt)), say_(std::move(say)), given_(hooks_.size()), kept_(hooks_.size()) {}

HookRunner::~HookRunner() {
  for (Running& r : running_) ::close(r.status_fd);
}

void HookRunner::begin(const std::vector<Event>& past) {
  auto count = static_cast<long long>(past.size());
  std::map<std::string, HookMark> marks;
  if (!opt_.marks.empty()) {
    try {
      if (std::optional<std::string> text = read_file(opt_.marks, true)) {
        std::string problem;
        marks = parse_hook_marks(*text, opt_.marks, &problem);
        if (!problem.empty())
          say_(fmt::format("{}; the hooks it names no longer go on from where they were", problem));
      }
    } catch (const StoreError& e) {
      say_(fmt::format("{}; the hooks go on from now", e.what()));
    }
  }
  for (size_t h = 0; h < hooks_.size(); ++h) {
    auto it = marks.find(hooks_[h].text);
    if (it != marks.end()) {
      long long from = resume_from(past, it->second);
      given_[h] = {from, from ? std::optional<Event>(past[static_cast<size_t>(from - 1)]) : std::nullopt};
    } else {  // new to this plan: from now on
      given_[h] = {count, count ? std::optional<Event>(past.back()) : std::nullopt};
    }
  }
  for (const HookSpec& hook : hooks_) marks.erase(hook.text);
  others_marks_ = std::move(marks);
  begun_ = true;
  fire(past, count);
}

void HookRunner::fire(const std::vector<Event>& events, long long last) {
  long long first = last - static_cast<long long>(events.size()) + 1;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    long long number = last > 0 ? first + static_cast<long long>(i) : 0;
    for (size_t h = 0; h < hooks_.size(); ++h) {
      if (number > 0 && number <= given_[h].events) continue;  // given before (an earlier run, or begin)
      HookMark before = given_[h];
      if (number > 0) given_[h] = {number, e};
      if (!hook_wants(hooks_[h], e)) continue;
      if (running_.size() < opt_.max_running && queue_.empty())
        spawn(h, e);
      else if (queue_.size() < 100000)
        queue_.push_back({h, e, number, std::move(before)});
      else
        report(h, e.kind, e.id, "was not run: over 100000 hooks wait their turn");
    }
  }
  save_marks();
}

// Each hook's mark: the last event given to it, or the one before the first still waiting
// its turn (a run that ends or dies before starting it leaves it to the next run).
void HookRunner::save_marks() {
  if (opt_.marks.empty() || !begun_) return;
  std::vector<HookMark> marks = given_;
  std::vector<bool> waiting(hooks_.size());
  for (const Waiting& w : queue_)
    if (w.number > 0 && !waiting[w.hook]) {
      waiting[w.hook] = true;
      marks[w.hook] = w.before;
    }
  bool same = true;
  for (size_t h = 0; h < hooks_.size() && same; ++h)
    same = marks[h].events == kept_[h].events && marks[h].last == kept_[h].last;
  if (same && saved_once_) return;
  std::map<std::string, HookMark> all = others_marks_;
  for (size_t h = 0; h < hooks_.size(); ++h) all[hooks_[h].text] = marks[h];
  try {
    replace_file_durably(opt_.marks, hook_marks_text(all));
    kept_ = std::move(marks);
    saved_once_ = true;
    marks_problem_.clear();
  } catch (const StoreError& e) {
    if (marks_problem_ != e.what())
      say_(fmt::format("cannot note how far the hooks got ({}); a restart of run may give them some events again",
                       e.what()));
    marks_problem_ = e.what();
  }
}

void HookRunner::spawn(size_t h, const Event& e) {
  const HookSpec& hook = hooks_[h];
  std::map<std::string, std::string> env = environment();
  for (const char* k : {"GPUQ_EVENT", "GPUQ_JOB_ID", "GPUQ_ATTEMPT", "GPUQ_TIME", "GPUQ_GPUS", "GPUQ_PID",
                        "GPUQ_OUTCOME", "GPUQ_EXIT", "GPUQ_SECONDS", "GPUQ_LOG", "GPUQ_PLAN", "GPUQ_BY", "GPUQ_DETAIL"})
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
  if (e.detail) env["GPUQ_DETAIL"] = *e.detail;  // reload: what changed; eta: "the plan now ends at ..."
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
  bool started = false;
  while (!queue_.empty() && running_.size() < opt_.max_running) {
    Waiting w = std::move(queue_.front());
    queue_.pop_front();
    spawn(w.hook, w.event);
    started = true;
  }
  if (started) save_marks();
}

void HookRunner::drain(double seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (busy() && std::chrono::steady_clock::now() < until) {
    poll();
    if (busy()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace gpuq
