#include "gpuq/core/events.h"
#include "gpuq/core/hint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "gpuq/core/rules.h"

namespace gpuq {

const std::vector<std::string>& event_kinds() {
  static const std::vector<std::string> kinds{"start",  "end",   "retry",  "requeue", "kill", "hold",
                                              "timeout", "preempt", "reload", "pause", "resume", "eta", "idle",
                                              "drain",  "undrain"};
  return kinds;
}

bool job_event(const Event& e) {
  // idle: a note of the idle watch on a running job; its requeue or end comes as its own event.
  // drain, undrain: a GPU of the node (gpu_health.h), no job's.
  return e.kind != "reload" && e.kind != "pause" && e.kind != "resume" && e.kind != "eta" && e.kind != "idle" &&
         e.kind != "drain" && e.kind != "undrain";
}

Event plan_event(const std::string& kind, double t, std::string_view by, std::optional<std::string> detail) {
  Event e;
  e.t = t;
  e.kind = kind;
  e.attempt = 0;
  e.by = std::string(by);
  e.detail = std::move(detail);
  return e;
}

namespace {

// One job's event: a plan event with the job and its attempt.
Event job_event_of(const std::string& id, std::string_view by, const char* kind, double t, long long attempt) {
  Event e = plan_event(kind, t, by, std::nullopt);
  e.id = id;
  e.attempt = attempt;
  return e;
}

}  // namespace

// What an ended attempt used, from its entry, into its end event.
static void note_use(Event& e, const JobState& after) {
  e.gpu_mem_peak_mib = after.gpu_mem_peak_mib;
  e.mem_peak_mib = after.mem_peak_mib;
  e.cpu_seconds = after.cpu_seconds;
  e.energy_j = after.energy_j;
}

void note_snapshot(Event& e, const JobState& s) {
  if (!s.snapshot) return;
  e.snapshot = s.snapshot;
  e.snapshot_dirty = s.snapshot_dirty.value_or(false);
  e.repo = s.snapshot_repo;
}

// A start event with what the attempt starts with: its GPUs, its pid, its snapshot, its on_oom values.
static Event start_event(Event e, const JobState& after) {
  e.gpus = after.gpus;
  e.pid = after.pid;
  note_snapshot(e, after);
  if (after.oom_values) e.detail = "on_oom: " + *after.oom_values;
  return e;
}

Seen seen_of(const JobState& s) {
  // Blocked is pending to the log: the original makes every blocked job pending at each
  // retry and blocks them again at the next tick, which says nothing about them.
  // A job waiting in a batch queue has not started: pending to the log until the queue starts it.
  Status st = s.status == Status::Blocked || (s.status == Status::Running && s.queue_id && !s.start) ? Status::Pending : s.status;
  bool ran = st == Status::Running || st == Status::Done || st == Status::Failed;
  return {st, attempt_of(s) - 1, ran ? s.start : std::nullopt};  // the log's attempt number, less one
}

std::vector<Event> events_between(const std::string& id, const Seen* before, const JobState& after, double now,
                                  std::string_view by) {
  std::vector<Event> out;
  Seen a = seen_of(after);
  Seen b = before ? *before : Seen{};
  if (b == a) return out;
  auto make = [&](const char* kind, double t, long long attempt) { return job_event_of(id, by, kind, t, attempt); };
  // The end of an attempt as `after` records it: its cause (kill, timeout), then the end.
  auto end_of = [&](long long attempt, std::optional<double> started) {
    std::optional<Outcome> o = outcome_of(after);
    double t = after.end.value_or(now);
    if (o == Outcome::Killed) out.push_back(make("kill", t, attempt));
    if (o == Outcome::Timeout) out.push_back(make("timeout", t, attempt));
    Event e = make("end", t, attempt);
    e.outcome = o ? outcome_name(*o) : "unknown";
    e.exit = after.exit;
    e.gpus = after.gpus;
    e.started = started;
    if (started && after.end) e.seconds = *after.end - *started;
    note_use(e, after);
    out.push_back(std::move(e));
  };
  bool was_running = b.status == Status::Running;
  bool is_end = a.status == Status::Done || a.status == Status::Failed;
  bool same_run = was_running && a.start == b.start;
  // A job the log never saw is logged from its start (a run adopting it, the log begun later).
  if (!before && !(a.status == Status::Running)) return out;
  // 1. The attempt that was running ended (or, seen late, was followed by others).
  if (was_running && !(same_run && a.status == Status::Running)) {
    if (same_run && is_end) {
      end_of(b.attempts + 1, b.start);
    } else {
      Event e = make("end", now, b.attempts + 1);
      e.outcome = "unknown";  // the entry has moved on: how this attempt ended was not recorded
      e.started = b.start;
      out.push_back(std::move(e));
    }
  }
  // 2. A new attempt since: started (and maybe ended), or one that could not start.
  bool new_start = a.start && (a.status == Status::Running || is_end) && !same_run;
  bool failed_launch = is_end && !a.start && !was_running;
  bool was_over = b.status == Status::Failed || b.status == Status::Done || b.status == Status::Held;
  if ((a.status == Status::Pending && (was_over || was_running)) || ((new_start || failed_launch) && was_over))
    out.push_back(make("retry", now, a.attempts + 1));
  if (a.status == Status::Held && b.status != Status::Held) out.push_back(make("hold", now, a.attempts + 1));
  if (new_start) {
    out.push_back(start_event(make("start", *a.start, a.attempts + 1), after));
    if (is_end) end_of(a.attempts + 1, a.start);
  } else if (failed_launch) {
    end_of(a.attempts + 1, std::nullopt);
  }
  return out;
}

// The events of a job that waits again after `c`: how its attempt ended (the machine restarted,
// a preemption, a requeue, or not known), then why it waits (requeue, retry).
template <class Make>
static void waiting_events(std::vector<Event>& out, const Make& make, const Change& c, const JobState& before,
                           const JobState& after, double now) {
  // A launch cut short at its start line never ran: its start was never logged (a start is
  // logged only once the launch is released), so its abort is no event either.
  if (c.cause == Cause::Abort) return;
  if (c.cause == Cause::NodeRestarted) {  // the machine restarted under it: it runs again, no retry spent
    const Waiting& w = std::get<Waiting>(c.life);
    Event e = make("end", w.ended.value_or(now), attempt_of(before));
    e.outcome = "node restarted";
    e.gpus = before.gpus;
    e.started = before.start;
    if (before.start && w.ended) e.seconds = std::max(0.0, *w.ended - *before.start);
    e.detail = "the machine restarted while it ran (a power cut, a reboot): it runs again, no retry spent";
    out.push_back(std::move(e));
    return;
  }
  if (c.cause == Cause::Preempted || c.cause == Cause::Checkpointed) {  // it runs again: no failure, no retry
    const Waiting& w = std::get<Waiting>(c.life);
    Event e = make("end", w.ended.value_or(now), attempt_of(before));
    e.outcome = kPreemptedOutcome;
    e.gpus = before.gpus;
    e.started = before.start;
    if (before.start && w.ended) e.seconds = *w.ended - *before.start;
    if (c.cause == Cause::Checkpointed) e.detail = "it exited 85: checkpointed, to run again";
    out.push_back(std::move(e));
    return;
  }
  if (c.from == LifeKind::Running) {  // requeued (or else left running unseen): how the attempt ended is unknown
    Event e = make("end", now, attempt_of(before));
    e.outcome = c.cause == Cause::Requeued ? "requeued" : "unknown";
    e.started = before.start;
    out.push_back(std::move(e));
  }
  if (c.cause == Cause::Requeued)  // `gpuq requeue`: its own event, so the history shows why the attempt ended
    out.push_back(make("requeue", now, attempt_of(after)));
  else if (c.cause == Cause::GpuFault) {  // its failure was the GPU's: run again, no retry spent
    Event e = make("requeue", now, attempt_of(after));
    e.detail = "its attempt failed on a GPU drained for a fault: it runs again on other GPUs, not counted "
               "against max_retries";
    out.push_back(std::move(e));
  }
  else if (c.from == LifeKind::Running || c.from == LifeKind::Ended || c.from == LifeKind::Held)
    out.push_back(make("retry", now, attempt_of(after)));
}

std::vector<Event> events_of(const std::string& id, const Change& c, const JobState& before, const JobState& after,
                             double now, std::string_view by) {
  std::vector<Event> out;
  auto make = [&](const char* kind, double t, long long attempt) { return job_event_of(id, by, kind, t, attempt); };
  LifeKind to = kind_of(c.life);
  switch (to) {
    case LifeKind::Running:
      if (c.cause == Cause::Preempt) {  // it is stopping to give way: the preemption's own event
        out.push_back(make("preempt", now, attempt_of(after)));
        break;
      }
      if (c.cause != Cause::Start && c.cause != Cause::QueueStart) break;  // a requeue's mark: no event
      out.push_back(start_event(make("start", after.start.value_or(now), attempt_of(after)), after));
      break;
    case LifeKind::Ended: {
      const Ended& d = std::get<Ended>(c.life);
      double t = d.end.value_or(now);
      long long attempt = attempt_of(after);
      if (d.outcome == Outcome::Killed) out.push_back(make("kill", t, attempt));
      if (d.outcome == Outcome::Timeout) out.push_back(make("timeout", t, attempt));
      Event e = make("end", t, attempt);
      e.outcome = outcome_name(d.outcome);
      e.exit = d.exit;
      e.gpus = after.gpus;
      // A job queued in a batch queue that ends without a start seen: the log never had its start.
      bool ran = c.from == LifeKind::Running;
      e.started = ran ? before.start : std::nullopt;
      if (e.started && d.end) e.seconds = *d.end - *e.started;
      note_use(e, after);
      out.push_back(std::move(e));
      break;
    }
    case LifeKind::Waiting:
      waiting_events(out, make, c, before, after, now);
      break;
    case LifeKind::Queued:
      if (c.from == LifeKind::Held) out.push_back(make("retry", now, attempt_of(after)));
      break;
    case LifeKind::Held:
      if (c.from != LifeKind::Held) out.push_back(make("hold", now, attempt_of(after)));
      break;
    case LifeKind::Blocked: break;  // pending to the log
  }
  return out;
}

void apply_event(const Event& e, Seen& seen) {
  long long attempts = std::max(0LL, e.attempt - 1);
  if (e.kind == "start") {
    seen = {Status::Running, attempts, e.t};
  } else if (e.kind == "end" && e.outcome && *e.outcome == kPreemptedOutcome) {
    seen = {Status::Pending, attempts, std::nullopt};  // it runs again
  } else if (e.kind == "end") {
    bool done = e.outcome && *e.outcome == "done";
    seen = {done ? Status::Done : Status::Failed, attempts, e.started};
  } else if (e.kind == "retry" || e.kind == "requeue") {
    seen = {Status::Pending, attempts, std::nullopt};
  } else if (e.kind == "hold") {
    seen = {Status::Held, attempts, std::nullopt};
  }
  // kill and timeout come with their end.
}

namespace {

// An ISO 8601 UTC time with milliseconds, for people and for tools that read the log.
std::string iso_utc(double t) {
  if (!std::isfinite(t) || t < 0 || t > 253402300799.0) return "";
  auto secs = static_cast<long long>(std::floor(t));
  long long ms = std::llround((t - static_cast<double>(secs)) * 1000);
  if (ms == 1000) {
    ++secs;
    ms = 0;
  }
  // Civil from days (Howard Hinnant's algorithm): no time zone, no locale.
  long long days = secs / 86400, rem = secs % 86400;
  days += 719468;
  long long era = days / 146097, doe = days - era * 146097;
  long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  long long y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
  long long d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", y, m, d, rem / 3600, rem % 3600 / 60, rem % 60, ms);
}

}  // namespace

std::string event_line(const Event& e) {
  nlohmann::ordered_json j;
  j["t"] = e.t;
  j["time"] = iso_utc(e.t);
  j["event"] = e.kind;
  j["id"] = e.id;
  j["attempt"] = e.attempt;
  if (e.gpus) j["gpus"] = *e.gpus;
  if (e.pid) j["pid"] = *e.pid;
  if (e.outcome) j["outcome"] = *e.outcome;
  if (e.exit) j["exit"] = *e.exit;
  if (e.started) j["start"] = *e.started;
  if (e.seconds) j["seconds"] = std::round(*e.seconds * 1000) / 1000;
  if (e.gpu_mem_peak_mib) j["gpu_mem_peak_mib"] = *e.gpu_mem_peak_mib;
  if (e.mem_peak_mib) j["mem_peak_mib"] = *e.mem_peak_mib;
  if (e.cpu_seconds) j["cpu_seconds"] = *e.cpu_seconds;
  if (e.energy_j) j["energy_j"] = *e.energy_j;
  if (e.snapshot) j["snapshot"] = *e.snapshot;
  if (e.snapshot_dirty) j["snapshot_dirty"] = *e.snapshot_dirty;
  if (e.repo) j["repo"] = *e.repo;
  j["by"] = e.by;
  if (e.detail) j["detail"] = *e.detail;
  if (e.finish) j["finish"] = std::round(*e.finish * 1000) / 1000;
  if (e.was) j["was"] = std::round(*e.was * 1000) / 1000;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<Event> parse_event(std::string_view line, std::string* problem) {
  auto fail = [&](std::string what) -> std::optional<Event> {
    if (problem) *problem = std::move(what);
    return std::nullopt;
  };
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) return fail("not JSON (a line cut short by a crash?)");
  if (!j.is_object()) return fail("not a JSON object");
  Event e;
  try {
    if (!j.contains("t") || !j["t"].is_number()) return fail("no number \"t\"");
    if (!j.contains("event") || !j["event"].is_string()) return fail("no string \"event\"");
    if (!j.contains("id") || !j["id"].is_string()) return fail("no string \"id\"");
    e.t = j["t"].get<double>();
    e.kind = j["event"].get<std::string>();
    e.id = j["id"].get<std::string>();
    if (j.contains("attempt") && j["attempt"].is_number_integer()) e.attempt = j["attempt"].get<long long>();
    if (j.contains("gpus") && j["gpus"].is_array()) e.gpus = j["gpus"].get<std::vector<int>>();
    if (j.contains("pid") && j["pid"].is_number_integer()) e.pid = j["pid"].get<long long>();
    if (j.contains("outcome") && j["outcome"].is_string()) e.outcome = j["outcome"].get<std::string>();
    if (j.contains("exit") && j["exit"].is_number_integer()) e.exit = j["exit"].get<long long>();
    if (j.contains("start") && j["start"].is_number()) e.started = j["start"].get<double>();
    if (j.contains("seconds") && j["seconds"].is_number()) e.seconds = j["seconds"].get<double>();
    if (j.contains("gpu_mem_peak_mib") && j["gpu_mem_peak_mib"].is_number_integer())
      e.gpu_mem_peak_mib = j["gpu_mem_peak_mib"].get<long long>();
    if (j.contains("mem_peak_mib") && j["mem_peak_mib"].is_number_integer())
      e.mem_peak_mib = j["mem_peak_mib"].get<long long>();
    if (j.contains("cpu_seconds") && j["cpu_seconds"].is_number_integer())
      e.cpu_seconds = j["cpu_seconds"].get<long long>();
    if (j.contains("energy_j") && j["energy_j"].is_number_integer()) e.energy_j = j["energy_j"].get<long long>();
    if (j.contains("snapshot") && j["snapshot"].is_string()) e.snapshot = j["snapshot"].get<std::string>();
    if (j.contains("snapshot_dirty") && j["snapshot_dirty"].is_boolean())
      e.snapshot_dirty = j["snapshot_dirty"].get<bool>();
    if (j.contains("repo") && j["repo"].is_string()) e.repo = j["repo"].get<std::string>();
    if (j.contains("by") && j["by"].is_string()) e.by = j["by"].get<std::string>();
    if (j.contains("detail") && j["detail"].is_string()) e.detail = j["detail"].get<std::string>();
    if (j.contains("finish") && j["finish"].is_number()) e.finish = j["finish"].get<double>();
    if (j.contains("was") && j["was"].is_number()) e.was = j["was"].get<double>();
  } catch (const nlohmann::json::exception& x) {
    return fail(x.what());
  }
  return e;
}

std::vector<Attempt> attempts_of(const std::vector<Event>& events) {
  std::vector<Attempt> out;
  std::unordered_map<std::string, size_t> open;  // id -> its attempt still running in `out`
  for (const Event& e : events) {
    if (e.kind == "start") {
      Attempt a;
      a.id = e.id;
      a.attempt = e.attempt;
      a.gpus = e.gpus;
      a.start = e.t;
      a.snapshot = e.snapshot;
      a.snapshot_dirty = e.snapshot_dirty;
      a.repo = e.repo;
      if (e.detail && e.detail->starts_with("on_oom: ")) a.on_oom = e.detail->substr(8);
      open[e.id] = out.size();
      out.push_back(std::move(a));
    } else if (e.kind == "kill" || e.kind == "timeout" || e.kind == "idle") {
      auto it = open.find(e.id);
      if (it != open.end()) out[it->second].causes.push_back(e.kind);
    } else if (e.kind == "end") {
      auto it = open.find(e.id);
      Attempt* a;
      if (it != open.end()) {
        a = &out[it->second];
        open.erase(it);
      } else {
        Attempt late;  // its start never logged
        late.id = e.id;
        late.attempt = e.attempt;
        late.gpus = e.gpus;
        late.start = e.started;
        out.push_back(std::move(late));
        a = &out.back();
      }
      a->end = e.t;
      a->outcome = e.outcome.value_or("unknown");
      a->exit = e.exit;
      a->gpu_mem_peak_mib = e.gpu_mem_peak_mib;
      a->mem_peak_mib = e.mem_peak_mib;
      a->cpu_seconds = e.cpu_seconds;
      a->energy_j = e.energy_j;
    }
  }
  return out;
}

std::string estimate_prefix(std::string_view id) {
  size_t cut = id.find_first_of("_-");
  return std::string(cut == std::string_view::npos || cut == 0 ? id : id.substr(0, cut + 1));
}

std::vector<Learned> learn_estimates(const std::vector<Attempt>& attempts, const Plan& plan) {
  std::map<std::string, std::vector<double>> ratios, took, peaks, host_peaks, cpu, busy;
  for (const Attempt& a : attempts) {
    if (a.outcome != "done" || !a.start || !a.end) continue;
    const Job* j = plan.find(a.id);
    if (!j || !(j->est_hours > 0)) continue;
    double hours = (*a.end - *a.start) / 3600;
    if (!(hours >= 0)) continue;
    ratios[estimate_prefix(a.id)].push_back(hours / j->est_hours);
    took[estimate_prefix(a.id)].push_back(hours);
    if (a.gpu_mem_peak_mib) peaks[estimate_prefix(a.id)].push_back(static_cast<double>(*a.gpu_mem_peak_mib) / 1024);
    if (a.mem_peak_mib) host_peaks[estimate_prefix(a.id)].push_back(static_cast<double>(*a.mem_peak_mib) / 1024);
    if (a.cpu_seconds) {
      cpu[estimate_prefix(a.id)].push_back(static_cast<double>(*a.cpu_seconds) / 3600);
      if (hours > 0) busy[estimate_prefix(a.id)].push_back(static_cast<double>(*a.cpu_seconds) / 3600 / hours);
    }
  }
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  std::vector<Learned> out;
  for (auto& [prefix, r] : ratios) {
    double m = median(r);
    Learned l{prefix, r.size(), m, r.front(), r.back(), median(took[prefix])};
    if (std::vector<double>& p = peaks[prefix]; !p.empty()) {
      l.peak_runs = p.size();
      l.peak_gib = median(p);
      l.peak_max_gib = p.back();
    }
    if (std::vector<double>& p = host_peaks[prefix]; !p.empty()) {
      l.host_peak_runs = p.size();
      l.host_peak_gib = median(p);
      l.host_peak_max_gib = p.back();
    }
    if (std::vector<double>& c = cpu[prefix]; !c.empty()) {
      l.cpu_runs = c.size();
      l.cpu_hours = median(c);
      if (std::vector<double>& b = busy[prefix]; !b.empty()) l.cores_busy = median(b);
    }
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<EstimateWarning> memory_warnings(const Plan& plan, const State& state, const std::vector<Learned>& learned,
                                             double room, size_t min_runs) {
  std::map<std::string, const Learned*> by_prefix, host_by_prefix;
  for (const Learned& l : learned) {
    if (l.peak_runs >= min_runs) by_prefix[l.prefix] = &l;
    if (l.host_peak_runs >= min_runs) host_by_prefix[l.prefix] = &l;
  }
  std::vector<EstimateWarning> out;
  if (by_prefix.empty() && host_by_prefix.empty()) return out;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const Job& j = plan.jobs[i];
    Status st = state.status_of(plan, i);
    if (st != Status::Pending && st != Status::Held) continue;
    // Host memory: a mem_gib under what the prefix's runs held, which run would stop over memory.
    if (auto h = host_by_prefix.find(estimate_prefix(j.id)); h != host_by_prefix.end() && j.mem_gib > 0 &&
                                                             j.mem_gib < h->second->host_peak_max_gib) {
      const Learned& l = *h->second;
      out.push_back({j.id, fmt::format("mem_gib {:g} is less than the {} {}* runs in the event log held at the most "
                                       "({:.2f} GiB of host memory, median {:.2f}): run may stop it over memory; give it "
                                       "at least {:g}",
                                       j.mem_gib, l.host_peak_runs, l.prefix, l.host_peak_max_gib, l.host_peak_gib,
                                       std::ceil(l.host_peak_max_gib * 10) / 10)});
    }
    if (j.gpus == 0) continue;
    auto it = by_prefix.find(estimate_prefix(j.id));
    if (it == by_prefix.end()) continue;
    const Learned& l = *it->second;
    std::string seen = fmt::format("the {} {}* runs in the event log peaked at {:.1f} GiB on a GPU (median {:.1f})",
                                   l.peak_runs, l.prefix, l.peak_max_gib, l.peak_gib);
    if (j.gpu_mem_gib && *j.gpu_mem_gib < l.peak_max_gib) {
      out.push_back({j.id, fmt::format("gpu_mem_gib {:g} is less than {}: the jobs that share its GPU may run out of "
                                       "memory; give it at least {:g}",
                                       *j.gpu_mem_gib, seen, std::ceil(l.peak_max_gib))});
    } else if (!j.gpu_mem_gib) {
      double want = std::ceil(l.peak_max_gib * 1.1);
      int share = want > 0 ? static_cast<int>(room / want) : 0;
      if (share >= 2)
        out.push_back({j.id, fmt::format("it takes its GPUs whole, and {}: \"gpu_mem_gib\": {:g} would let {} such "
                                         "jobs share a GPU",
                                         seen, want, share)});
    }
  }
  return out;
}

std::vector<EstimateWarning> estimate_warnings(const Plan& plan, const State& state,
                                               const std::vector<Learned>& learned, double factor, size_t min_runs) {
  std::map<std::string, const Learned*> by_prefix;
  for (const Learned& l : learned)
    if (l.runs >= min_runs && l.median_hours > 0) by_prefix[l.prefix] = &l;
  std::vector<EstimateWarning> out;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const Job& j = plan.jobs[i];
    Status st = state.status_of(plan, i);
    if (st != Status::Pending && st != Status::Held) continue;
    auto it = by_prefix.find(estimate_prefix(j.id));
    if (it == by_prefix.end() || !j.est_given) continue;
    const Learned& l = *it->second;
    double r = j.est_hours / l.median_hours;
    if (r > factor || r < 1 / factor)
      out.push_back({j.id, fmt::format("est_hours {:g} is {:.1f}x the median run time of the {} {}* runs in the event "
                                       "log ({:.2f}h); {} shows them",
                                       j.est_hours, r, l.runs, l.prefix, l.median_hours, hint("history --estimates"))});
  }
  return out;
}

std::vector<Learned> apply_learned(Plan& plan, const State& state, const std::vector<Learned>& learned,
                                   size_t min_runs) {
  std::map<std::string, const Learned*> by_prefix;
  for (const Learned& l : learned)
    if (l.runs >= min_runs) by_prefix[l.prefix] = &l;
  std::map<std::string, const Learned*> used;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    if (state.status_of(plan, i) != Status::Pending) continue;
    Job& j = plan.jobs[i];
    auto it = by_prefix.find(estimate_prefix(j.id));
    if (it == by_prefix.end()) continue;
    j.est_hours *= it->second->median;
    used[it->first] = it->second;
  }
  std::vector<Learned> out;
  for (auto& [p, l] : used) out.push_back(*l);
  return out;
}

std::string learned_text(const std::vector<Learned>& learned, const std::vector<Learned>& used, size_t min_runs) {
  auto listed = [](const std::vector<const Learned*>& ls) {
    std::string list;
    for (const Learned* l : ls)
      list += fmt::format("{}{}* x{:.2f} ({} runs)", list.empty() ? "" : ", ", l->prefix, l->median, l->runs);
    return list;
  };
  std::vector<const Learned*> shown;
  for (const Learned& l : used) shown.push_back(&l);
  if (!shown.empty()) return "pending " + listed(shown);
  for (const Learned& l : learned)
    if (l.runs >= min_runs) shown.push_back(&l);
  if (shown.empty())
    return fmt::format("no id prefix has {} done runs in the event log yet; est_hours as written", min_runs);
  return fmt::format("learned {}, but no pending job has {}; est_hours as written", listed(shown),
                     shown.size() == 1 ? "that prefix" : "one of these prefixes");
}

}  // namespace gpuq
