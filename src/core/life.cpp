#include "gpuq/core/life.h"

#include "gpuq/core/host_mem.h"
#include "gpuq/core/limits.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/watchdog.h"

namespace gpuq {

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::Done: return "done";
    case Outcome::Failed: return "failed";
    case Outcome::Killed: return "killed";
    case Outcome::Lost: return "lost";
    case Outcome::Timeout: return "timeout";
    case Outcome::Hung: return "hung";
    case Outcome::Idle: return kIdleOutcome;
    case Outcome::Unstartable: return "unstartable";
    case Outcome::OverMemory: return kOverMemoryOutcome;
    case Outcome::OomGpu: return kOomGpuOutcome;
    case Outcome::OomHost: return kOomHostOutcome;
  }
  return "failed";
}

Ended ended_by_exit(long long code, double at, std::optional<double> start, long long attempts) {
  Ended e;
  e.attempts = attempts;
  e.outcome = code == 0 ? Outcome::Done : Outcome::Failed;
  e.exit = code;
  e.end = at;
  e.start = start;
  return e;
}

Ended ended_lost(double at, std::optional<double> start, long long attempts) {
  Ended e;
  e.attempts = attempts;
  e.outcome = Outcome::Lost;
  e.exit = kLostExit;
  e.end = at;
  e.start = start;
  return e;
}

Status status_of(const Life& l) {
  switch (kind_of(l)) {
    case LifeKind::Waiting: return Status::Pending;
    case LifeKind::Held: return Status::Held;
    case LifeKind::Blocked: return Status::Blocked;
    case LifeKind::Queued:
    case LifeKind::Running: return Status::Running;
    case LifeKind::Ended: return std::get<Ended>(l).outcome == Outcome::Done ? Status::Done : Status::Failed;
  }
  return Status::Pending;
}

bool is_done(const Life& l) {
  const Ended* e = std::get_if<Ended>(&l);
  return e && e->outcome == Outcome::Done;
}

bool blocks_dependents(const Life& l) {
  const Ended* e = std::get_if<Ended>(&l);
  return (e && e->outcome != Outcome::Done) || kind_of(l) == LifeKind::Blocked;
}

bool leaves_reservation(const Life& l) { return kind_of(l) == LifeKind::Ended || kind_of(l) == LifeKind::Blocked; }

// Over memory is one outcome whoever caught it (run's sampling, with a timeout's exit code, or the
// kernel in the job's cgroup, exit 137): never retried automatically, as the same allocation fails
// again; on_oom is the way to run it again, resized (issue 51).
bool auto_retryable(const Ended& e) {
  return e.outcome != Outcome::Done && e.exit != kKilledExit && e.outcome != Outcome::Unstartable &&
         e.outcome != Outcome::OverMemory;
}

bool finished(const Life& l, long long max_retries) {
  if (kind_of(l) == LifeKind::Blocked) return true;
  const Ended* e = std::get_if<Ended>(&l);
  if (!e) return false;
  return e->outcome == Outcome::Done || !auto_retryable(*e) || e->attempts >= max_retries;
}

bool will_retry(const Ended& e, long long max_retries) {
  return auto_retryable(e) && e.attempts < max_retries && e.end.has_value();
}

namespace {

// The outcome an ended entry records: gpuq's field "outcome" where it says timeout, hung,
// unstartable or out of memory, else the exit code (the original's convention).
Outcome ended_outcome(const JobState& s) {
  if (s.status == Status::Done) return Outcome::Done;
  if (s.outcome) {
    if (*s.outcome == kTimeoutOutcome) return Outcome::Timeout;
    if (*s.outcome == kHungOutcome) return Outcome::Hung;
    if (*s.outcome == kIdleOutcome) return Outcome::Idle;
    if (*s.outcome == kUnstartableOutcome) return Outcome::Unstartable;
    if (*s.outcome == kOverMemoryOutcome) return Outcome::OverMemory;
    if (*s.outcome == kOomGpuOutcome) return Outcome::OomGpu;
    if (*s.outcome == kOomHostOutcome) return Outcome::OomHost;
  }
  long long exit = s.exit.value_or(kLostExit);
  if (exit == kKilledExit) return Outcome::Killed;
  if (exit == kLostExit) return Outcome::Lost;
  return Outcome::Failed;
}

}  // namespace

long long oom_retries_of(const Life& l) {
  if (const Waiting* w = std::get_if<Waiting>(&l)) return w->oom_retries;
  if (const Queued* q = std::get_if<Queued>(&l)) return q->oom_retries;
  if (const Running* r = std::get_if<Running>(&l)) return r->oom_retries;
  if (const Ended* d = std::get_if<Ended>(&l)) return d->oom_retries;
  return 0;
}

Life life_of(const JobState* s, bool has_handle, double now) {
  if (!s) return Waiting{};
  long long attempts = s->attempts_or0();
  switch (s->status) {
    case Status::Pending: return Waiting{attempts, std::nullopt, s->oom_retries.value_or(0)};
    case Status::Held: return Held{attempts, has_handle};
    case Status::Blocked: return Blocked{};
    case Status::Running:
      if (has_handle && !s->start) return Queued{attempts, s->oom_retries.value_or(0)};
      return Running{attempts, s->start.value_or(now), s->gpus.value_or(std::vector<int>{}), 0, s->requeue, s->preempt,
                     s->oom_retries.value_or(0)};
    case Status::Done:
    case Status::Failed: {
      Ended e;
      e.attempts = attempts;
      e.outcome = ended_outcome(*s);
      e.exit = s->exit.value_or(s->status == Status::Done ? 0 : kLostExit);
      e.end = s->end;
      e.start = s->start;
      e.oom_retries = s->oom_retries.value_or(0);
      return e;
    }
  }
  return Waiting{};
}

namespace {

// A new entry for the job's next attempt (or its release, hold or block): the earlier run kept
// in gpuq's list of earlier attempts, "removed" and the snapshot kept, the rest
// dropped as the original drops it when it replaces an entry.
// Its attempt number goes on from prev's: the next one once prev's attempt ran or ended
// (`same_attempt`: a record of prev's own attempt, as a launch that failed).
JobState fresh_from(const JobState& prev, Status st, bool same_attempt = false) {
  JobState next;
  next.status = st;
  next.removed = prev.removed;
  next.snapshot = prev.snapshot;  // the code it runs: the snapshot taken when it was loaded (snapshot.h)
  next.snapshot_at = prev.snapshot_at;
  next.snapshot_dirty = prev.snapshot_dirty;
  next.snapshot_repo = prev.snapshot_repo;
  bool over = !same_attempt && (prev.start || prev.status == Status::Done || prev.status == Status::Failed);
  next.attempt = attempt_of(prev) + (over ? 1 : 0);
  next.preemptions = prev.preemptions;  // GPUQ_PREEMPTIONS: kept across attempts, retries too
  next.cgroup = prev.cgroup;            // until run has removed it (the attempt's processes gone)
  keep_attempts(prev, next);
  return next;
}

// The number is written only where `attempts` does not give it (the original's entries stay as
// they were).
void settle_attempt(JobState& e) {
  if (e.attempt && *e.attempt == e.attempts_or0() + 1) e.attempt.reset();
}

void write_life_in(JobState& e, const Life& l, Cause cause);

const char* outcome_field(Outcome o) {
  switch (o) {
    case Outcome::Timeout: return kTimeoutOutcome;
    case Outcome::Hung: return kHungOutcome;
    case Outcome::Idle: return kIdleOutcome;
    case Outcome::Unstartable: return kUnstartableOutcome;
    case Outcome::OverMemory: return kOverMemoryOutcome;
    case Outcome::OomGpu: return kOomGpuOutcome;
    case Outcome::OomHost: return kOomHostOutcome;
    default: return nullptr;
  }
}

}  // namespace

void write_life(JobState& e, const Life& l, Cause cause) {
  write_life_in(e, l, cause);
  settle_attempt(e);
}

namespace {

void write_life_in(JobState& e, const Life& l, Cause cause) {
  switch (kind_of(l)) {
    case LifeKind::Waiting: {
      const auto& w = std::get<Waiting>(l);
      if (cause == Cause::Unblock) {  // the original only flips the status of a blocked entry
        e.status = Status::Pending;
        return;
      }
      bool preempted = cause == Cause::Preempted || cause == Cause::Checkpointed;
      if ((preempted || cause == Cause::NodeRestarted || cause == Cause::GpuFault) && w.ended) {  // the attempt's record keeps when it ended
        e.end = w.ended;
        if (preempted && !e.preempt) e.preempt = w.ended;  // and that it was preempted
      }
      JobState next = fresh_from(e, Status::Pending, cause == Cause::Abort);  // an aborted launch never ran
      // The original writes the attempts with an automatic retry; a release by hand starts over.
      // A preemption spends none.
      if (cause == Cause::AutoRetry || cause == Cause::Abort || cause == Cause::Requeued || cause == Cause::OomRetry ||
          cause == Cause::NodeRestarted || cause == Cause::GpuFault || preempted)
        next.attempts = w.attempts;
      if (w.oom_retries > 0) next.oom_retries = w.oom_retries;
      if (preempted) next.preemptions = e.preemptions.value_or(0) + 1;
      e = std::move(next);
      return;
    }
    case LifeKind::Held: {
      const auto& h = std::get<Held>(l);
      if (h.in_queue) {  // still in the batch queue, held there: the same submission
        e.status = Status::Held;
        e.start.reset();
        return;
      }
      e = fresh_from(e, Status::Held);
      return;
    }
    case LifeKind::Blocked:
      e = fresh_from(e, Status::Blocked);
      return;
    case LifeKind::Queued: {
      const auto& q = std::get<Queued>(l);
      if (cause == Cause::Start) e = fresh_from(e, Status::Running);  // the handle is the caller's to add
      e.status = Status::Running;
      e.attempts = q.attempts;
      if (q.oom_retries > 0) e.oom_retries = q.oom_retries;
      e.start.reset();
      e.gpus = std::vector<int>{};
      return;
    }
    case LifeKind::Running: {
      const auto& r = std::get<Running>(l);
      if (cause == Cause::Start) {
        e = fresh_from(e, Status::Running);
        e.gpus = r.gpus;
        e.attempts = r.attempts;
        if (r.oom_retries > 0) e.oom_retries = r.oom_retries;
      }
      e.status = Status::Running;
      e.start = r.start;
      e.requeue = r.requeue;
      e.preempt = r.preempt;
      return;
    }
    case LifeKind::Ended: {
      const auto& d = std::get<Ended>(l);
      if (cause == Cause::LaunchFail) {  // never ran: a record of its own
        JobState next = fresh_from(e, Status::Failed, true);
        next.attempts = d.attempts;
        e = std::move(next);
      }
      e.status = d.outcome == Outcome::Done ? Status::Done : Status::Failed;
      e.exit = d.exit;
      e.end = d.end;
      if (const char* o = outcome_field(d.outcome)) e.outcome = o;
      return;
    }
  }
}

}  // namespace

}  // namespace gpuq
