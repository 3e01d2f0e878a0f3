// The est_hours simulator: an event loop of named steps over the same pass as `run`.
#include "gpuq/core/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <span>

#include "gpuq/core/schedule.h"

namespace gpuq {

namespace {

constexpr double kEps = 1e-9;  // the original's tolerance on times
constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr uint32_t kNone = UINT32_MAX;

template <class T>
using MinHeap = std::priority_queue<T, std::vector<T>, std::greater<T>>;

std::string job_list(const Plan& plan, const std::vector<size_t>& jobs) {
  std::string s;
  for (size_t j : jobs) s += (s.empty() ? "" : ", ") + plan.jobs[j].id;
  return s;
}

// Lists of jobs per job in two flat arrays (compressed rows).
class JobLists {
 public:
  explicit JobLists(size_t n) : first_(n + 2, 0) {}
  /// First pass: count an item for `j`; then fill() once; then add() the items in the same order.
  void count(size_t j) { ++first_[j + 2]; }
  void fill() {
    for (size_t j = 2; j < first_.size(); ++j) first_[j] += first_[j - 1];
    items_.resize(first_.back());
  }
  void add(size_t j, size_t item) { items_[first_[j + 1]++] = static_cast<uint32_t>(item); }
  std::span<const uint32_t> operator[](size_t j) const {
    return {items_.data() + first_[j], items_.data() + first_[j + 1]};
  }

 private:
  std::vector<uint32_t> first_;  // after fill and add: items of j are [first_[j], first_[j + 1])
  std::vector<uint32_t> items_;
};

// The simulation of one plan: the world it predicts, and the steps that move it on.
class Simulator {
 public:
  Simulator(const Plan& plan, const SimOptions& opt, const SimStart* from);
  Simulation run();

 private:
  using Kind = SimStart::Kind;
  struct Packed {  // what the loop reads of a job at every event, packed together
    double est_hours;
    double produced_at_frac;
    uint32_t producer;  // kNone when no job produces its files
    uint8_t file_dep;   // it has a file: dep
    uint8_t times_out;  // its estimate is over its limit and it is not retried: it fails at the limit
  };

  void index_deps();
  void take_live_state();
  void deps_done(size_t j);
  void passes_at_instant();
  void start(Start& s);
  double next_event() ;
  void finish_due();
  void retries_due();
  void unblock();
  void tell_after_dependents(size_t j);
  void block_dependents(size_t j);
  void explain_stuck();
  std::string why_stuck(size_t j) const;
  const PassInput& pass_input(bool explain);
  void free_now();
  // Where in gpu_free_at_ GPU g of node k is.
  size_t slot(int node, int g) const { return static_cast<size_t>(node) * (kMaxGpuId + 1) + static_cast<size_t>(g); }

  Kind kind(size_t j) const { return from_ ? from_->kind[j] : Kind::Pending; }
  double produced_at(size_t j) const {
    uint32_t src = pk_[j].producer;
    return start_[src] + pk_[j].produced_at_frac * pk_[src].est_hours;
  }
  double file_time(size_t j) const;
  bool file_never(size_t j) const;
  bool waits_for_producer(size_t j) const {
    return pk_[j].producer != kNone && pk_[j].file_dep && !(from_ && from_->files_present[j]);
  }
  bool files_ok(size_t j, double t) const {
    if (!waits_for_producer(j)) return !file_never(j);
    return !file_never(j) && started_[pk_[j].producer] && !(file_time(j) > t + kEps);
  }
  void leave_reservations(size_t j, int by) {
    if (!plan_.reservations.empty())
      for (size_t r : plan_.reservations_of[j]) res_unfinished_[r] -= by;
  }

  const Plan& plan_;
  const SimOptions& opt_;
  const SimStart* from_;
  const size_t n_;
  Simulation sim_;
  double t_ = 0;
  size_t pending_;
  std::vector<Packed> pk_;
  std::vector<uint32_t> unmet_;  // job deps (done: and after:) not yet met
  JobLists plain_dependents_, after_dependents_, produced_for_;
  std::vector<double> start_, end_;
  std::vector<char> started_, done_, waits_producer_, awaits_retry_;
  std::vector<char> awaits_unblock_;  // Kind::Blocked, until the first retry
  std::vector<char> blocked_;         // blocked by a dep predicted to time out (block_dependents)
  std::vector<char> after_met_;       // its after: dependents were told it finished
  bool unblocked_ = false;            // a retry has made every blocked job pending
  std::vector<long> res_unfinished_;
  std::vector<double> gpu_free_at_;               // per node and GPU id (slot)
  std::vector<GpuMask> free_;                     // per node: the GPUs free now (free_now)
  ReadySet ready_;
  MinHeap<std::pair<double, size_t>> file_wait_;  // (when its files appear, job)
  MinHeap<std::pair<double, size_t>> running_;    // (end, job): jobs ending together all finish at once
  MinHeap<std::pair<double, size_t>> produce_;    // (time a pending job's file appears, job)
  MinHeap<std::pair<double, size_t>> retry_;      // (time a failed job is retried, job)
  double busy_until_ = 0;                         // from_->busy are free from then
  PassResult last_;
  PassInput in_;
};

Simulator::Simulator(const Plan& plan, const SimOptions& opt, const SimStart* from)
    : plan_(plan),
      opt_(opt),
      from_(from),
      n_(plan.jobs.size()),
      pending_(n_),
      pk_(n_),
      unmet_(n_, 0),
      plain_dependents_(n_),
      after_dependents_(n_),
      produced_for_(n_),
      start_(n_, 0),
      end_(n_, 0),
      started_(n_, 0),
      done_(n_, 0),
      waits_producer_(n_, 0),
      awaits_retry_(n_, 0),
      awaits_unblock_(n_, 0),
      blocked_(n_, 0),
      after_met_(n_, 0),
      res_unfinished_(plan.reservations.size()),
      gpu_free_at_(static_cast<size_t>(kMaxGpuId + 1) * static_cast<size_t>(std::max(opt.nodes, 1)), 0.0),
      free_(static_cast<size_t>(std::max(opt.nodes, 1)), 0),
      ready_(plan, opt.backfill_max_hours) {
  sim_.rows.reserve(n_);  // a row per job that runs: no copies as it grows
  for (size_t r = 0; r < plan.reservations.size(); ++r)
    res_unfinished_[r] = static_cast<long>(plan.reservations[r].jobs.size());
  in_.node = mask_of(opt.node_gpus);
  in_.placement = &opt.placement;
  index_deps();
}

// Each job's deps turned around (who waits for it), and the packed fields.
void Simulator::index_deps() {
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t j = 0; j < n_; ++j) {
      const Job& job = plan_.jobs[j];
      for (const Dep& d : job.deps) {
        if (d.kind == Dep::Kind::File) {
          pk_[j].file_dep = 1;
          continue;
        }
        JobLists& list = d.kind == Dep::Kind::After ? after_dependents_ : plain_dependents_;
        if (pass == 0) {
          ++unmet_[j];
          list.count(d.job);
        } else {
          list.add(d.job, j);
        }
      }
      if (const auto& p = job.produced_by) pass == 0 ? produced_for_.count(*p) : produced_for_.add(*p, j);
      if (pass == 0) {
        pk_[j].est_hours = run_hours(job, opt_.time_limit_factor);  // est_hours, cut at its time limit
        pk_[j].times_out = pk_[j].est_hours < job.est_hours && !job.retry_on_timeout;
        pk_[j].produced_at_frac = job.produced_at_frac;
        pk_[j].producer = job.produced_by ? static_cast<uint32_t>(*job.produced_by) : kNone;
      }
    }
    if (pass == 0) {
      plain_dependents_.fill();
      produced_for_.fill();
      after_dependents_.fill();
    }
  }
}

// When job j's files appear: when its producer reaches produced_at_frac of its run. From a
// live state a file missing now appears no sooner than kSoon, and one its running producer
// should already have written, when the producer ends.
double Simulator::file_time(size_t j) const {
  double at = produced_at(j);
  if (!from_) return at;
  if (at <= 0 && kind(pk_[j].producer) == Kind::Running) at = end_[pk_[j].producer];
  return std::max(at, kSoon);
}

// Live: a missing file appears only through a producer that has yet to reach it.
bool Simulator::file_never(size_t j) const {
  if (!from_ || from_->files_present[j] || !pk_[j].file_dep) return false;
  uint32_t src = pk_[j].producer;
  if (src == kNone) return true;
  Kind k = kind(src);
  return k == Kind::Done || k == Kind::Finished || k == Kind::Held;
}

// The live state: jobs done, finished or held are out; running ones hold their GPUs; failed
// ones to be retried wait for their retry, out of their reservations until then.
void Simulator::take_live_state() {
  for (size_t j = 0; j < n_; ++j) {
    Kind k = kind(j);
    if (k == Kind::Pending) continue;
    if (k == Kind::Retry) {
      awaits_retry_[j] = 1;
      leave_reservations(j, 1);
      if (from_->retry_in[j] < kNever) retry_.push({std::max(from_->retry_in[j], kSoon), j});
      continue;
    }
    if (k == Kind::Blocked) {
      awaits_unblock_[j] = 1;
      leave_reservations(j, 1);
      tell_after_dependents(j);
      continue;
    }
    started_[j] = 1;
    --pending_;
    if (k == Kind::Running) {
      start_[j] = -from_->elapsed[j];
      end_[j] = std::max(pk_[j].est_hours - from_->elapsed[j], kSoon);
      for (int g : from_->gpus[j]) gpu_free_at_[g] = end_[j];
      running_.push({end_[j], j});
      sim_.rows.push_back({j, start_[j], end_[j], from_->gpus[j]});
    } else if (k == Kind::Done || k == Kind::Finished) {
      done_[j] = 1;
      if (k == Kind::Done)
        for (size_t d : plain_dependents_[j]) --unmet_[d];
      tell_after_dependents(j);
      leave_reservations(j, 1);
    }
  }
  for (int g : ids_of(from_->busy))
    if (g <= kMaxGpuId) gpu_free_at_[g] = std::max(gpu_free_at_[g], from_->busy_hours);
  if (from_->busy) busy_until_ = from_->busy_hours;
}

// A job whose job deps are met is ready once its file: deps exist: at once when no job of
// the plan produces them, else when its producer reaches produced_at_frac of its run.
void Simulator::deps_done(size_t j) {
  if (file_never(j) || awaits_retry_[j] || awaits_unblock_[j] || blocked_[j]) return;
  if (!waits_for_producer(j))
    ready_.insert(j);
  else if (started_[pk_[j].producer])
    file_wait_.push({file_time(j), j});
  else
    waits_producer_[j] = 1;
}

const PassInput& Simulator::pass_input(bool explain) {
  in_.free = free_[0];
  if (free_.size() > 1) in_.nodes = free_;
  in_.open.resize(plan_.reservations.size());
  for (size_t r = 0; r < plan_.reservations.size(); ++r) in_.open[r] = res_unfinished_[r] > 0;
  // Now, as the next tick sees it: any running entry of the state counts.
  in_.nothing_running = running_.empty() && !(from_ && t_ < kSoon && from_->any_running);
  in_.explain = explain;
  return in_;
}

void Simulator::free_now() {
  for (size_t k = 0; k < free_.size(); ++k) {
    GpuMask free = 0;
    for (int g : opt_.node_gpus)
      if (gpu_free_at_[slot(static_cast<int>(k), g)] <= t_ + kEps) free |= GpuMask{1} << g;
    free_[k] = free;
  }
}

void Simulator::start(Start& s) {
  size_t j = s.job;
  start_[j] = t_;
  // From a live state a job takes some time, however short its estimate: one started now
  // does not end before the next tick.
  end_[j] = t_ + (from_ ? std::max(pk_[j].est_hours, kSoon) : pk_[j].est_hours);
  started_[j] = 1;
  for (int g : s.gpus) gpu_free_at_[slot(s.node, g)] = end_[j];
  running_.push({end_[j], j});
  ready_.erase(j);
  --pending_;
  for (size_t k : produced_for_[j]) {
    if (waits_producer_[k]) file_wait_.push({file_time(k), k});
    waits_producer_[k] = 0;
    if (!started_[k]) produce_.push({file_time(k), k});
  }
  sim_.rows.push_back({j, start_[j], end_[j], std::move(s.gpus), s.node});
}

// Passes at this instant until one starts nothing. After a pass that started jobs, another
// with no job newly ready would start none: a job it passed over did not fit with more GPUs
// free, or was held by the backfill limit behind a head that still waits (and nothing ends,
// so no reservation opens).
void Simulator::passes_at_instant() {
  free_now();
  bool progressed = true, first = true;
  while (progressed) {
    progressed = false;
    bool newly_ready = false;
    while (!file_wait_.empty() && !(file_wait_.top().first > t_ + kEps)) {
      ready_.insert(file_wait_.top().second);
      file_wait_.pop();
      newly_ready = true;
    }
    if (!first && !newly_ready) break;
    first = false;
    schedule_pass(plan_, ready_, pass_input(false), last_);  // into last_: its lists' room is kept
    if (last_.stall_broken)
      sim_.notes.push_back(fmt::format(
          "at {:.2f}h nothing could start: {} waits for GPUs that reservations close to it, and the jobs of "
          "those reservations are longer than --backfill-max-hours {}; started them without the limit",
          t_, plan_.jobs[*last_.waiting_head].id, opt_.backfill_max_hours));
    for (Start& s : last_.starts) {
      free_[s.node] &= ~mask_of(s.gpus);
      start(s);
      progressed = true;
    }
  }
}

// The time of the next event, or kNever when nothing is left to happen. Running jobs end,
// files appear (only while something runs, as the original), retries fall due, GPUs busy
// now become free.
double Simulator::next_event() {
  double nxt = running_.empty() ? kNever : running_.top().first;
  if (!running_.empty()) {
    while (!produce_.empty() && (started_[produce_.top().second] || produce_.top().first <= t_ + kEps)) produce_.pop();
    if (!produce_.empty() && produce_.top().first < nxt) nxt = produce_.top().first;
    if (!(nxt > t_ + kEps)) nxt = running_.top().first;
  }
  if (!retry_.empty()) nxt = std::min(nxt, retry_.top().first);
  if (busy_until_ > t_ + kEps) nxt = std::min(nxt, busy_until_);
  return nxt;
}

// Jobs ending now: their dependents and reservations.
void Simulator::finish_due() {
  while (!running_.empty() && running_.top().first <= t_ + kEps) {
    size_t j = running_.top().second;
    running_.pop();
    done_[j] = 1;
    if (pk_[j].times_out)
      block_dependents(j);
    else
      for (size_t k : plain_dependents_[j])
        if (--unmet_[k] == 0 && !started_[k]) deps_done(k);
    if (!after_met_[j]) {
      after_met_[j] = 1;
      for (size_t k : after_dependents_[j])
        if (--unmet_[k] == 0 && !started_[k]) deps_done(k);
    }
    leave_reservations(j, 1);
  }
}

// At the start: job j counts as finished for its after: dependents (done, or finished as run
// counts it), once.
void Simulator::tell_after_dependents(size_t j) {
  if (after_met_[j]) return;
  after_met_[j] = 1;
  for (size_t d : after_dependents_[j]) --unmet_[d];
}

// Job j failed for good (it timed out): its plain dependents, and theirs, are blocked, as
// `run` blocks them; a blocked job counts as finished for its after: dependents.
void Simulator::block_dependents(size_t j) {
  std::vector<std::pair<size_t, size_t>> stack{{j, j}};  // (failed or blocked job, the one that timed out)
  while (!stack.empty()) {
    auto [f, root] = stack.back();
    stack.pop_back();
    for (size_t k : plain_dependents_[f]) {
      if (started_[k] || blocked_[k]) continue;
      blocked_[k] = 1;  // out of the running: never started, never pending again
      --pending_;
      ready_.erase(k);
      leave_reservations(k, 1);
      const Job& r = plan_.jobs[root];
      sim_.blocked.push_back({k, fmt::format("{} is predicted to time out (est_hours {} over its limit {}h, no "
                                             "retry_on_timeout), so it never runs",
                                             r.id, r.est_hours, pk_[root].est_hours)});
      if (!after_met_[k]) {
        after_met_[k] = 1;
        for (size_t d : after_dependents_[k])
          if (--unmet_[d] == 0 && !started_[d]) deps_done(d);
      }
      stack.push_back({k, root});
    }
  }
}

// Failed jobs whose automatic retry falls due now: pending again, back in their reservations.
void Simulator::retries_due() {
  while (!retry_.empty() && retry_.top().first <= t_ + kEps) {
    size_t j = retry_.top().second;
    retry_.pop();
    awaits_retry_[j] = 0;
    leave_reservations(j, -1);
    if (unmet_[j] == 0) deps_done(j);
    if (!unblocked_) unblock();
  }
}

// The first retry makes every blocked job pending (those that revive: see SimStart::Kind::Blocked).
void Simulator::unblock() {
  unblocked_ = true;
  for (size_t j = 0; j < n_; ++j) {
    if (!awaits_unblock_[j]) continue;
    awaits_unblock_[j] = 0;
    leave_reservations(j, -1);
    if (unmet_[j] == 0) deps_done(j);
  }
}

Simulation Simulator::run() {
  if (from_) take_live_state();
  for (size_t j = 0; j < n_; ++j)
    if (unmet_[j] == 0 && !started_[j]) deps_done(j);
  for (size_t j = 0; j < n_; ++j)  // producers already running: their files appear on schedule
    if (started_[j] && kind(j) == Kind::Running)
      for (size_t k : produced_for_[j])
        if (!started_[k]) produce_.push({file_time(k), k});
  while (pending_ || !running_.empty()) {
    passes_at_instant();
    double nxt = next_event();
    if (nxt == kNever) {
      if (pending_) explain_stuck();
      break;
    }
    t_ = nxt;
    finish_due();
    retries_due();
  }
  return std::move(sim_);
}

void Simulator::explain_stuck() {
  sim_.stuck_at = t_;
  free_now();
  last_ = schedule_pass(plan_, ready_, pass_input(true));
  for (size_t j = 0; j < n_; ++j)
    if (!started_[j] && !blocked_[j]) sim_.stuck.push_back({j, why_stuck(j)});
}

std::string Simulator::why_stuck(size_t j) const {
  const Job& job = plan_.jobs[j];
  if (awaits_retry_[j]) return "failed; no automatic retry will come (its entry has no end time)";
  if (awaits_unblock_[j]) return "blocked, and no automatic retry will come to release it";
  if (unmet_[j]) {
    std::vector<size_t> waits;
    for (const Dep& d : job.deps)
      if (d.kind != Dep::Kind::File && !done_[d.job]) waits.push_back(d.job);
    return "waits for " + job_list(plan_, waits) + ", which never ran";
  }
  if (file_never(j) && !job.produced_by)
    return "waits for a file: dep that does not exist, and no job of the plan produces it";
  if (file_never(j))
    return fmt::format("waits for a file: dep that does not exist, and {} (its producer) will not run again",
                       plan_.jobs[*job.produced_by].id);
  if (!files_ok(j, t_))
    return fmt::format("waits for the file: dep that {} produces, and {} never ran", plan_.jobs[*job.produced_by].id,
                       plan_.jobs[*job.produced_by].id);
  auto h = std::find_if(last_.held.begin(), last_.held.end(), [&](const Held& x) { return x.job == j; });
  if (h != last_.held.end() && h->why == Held::Why::Backfill)
    return fmt::format("est_hours {} is over --backfill-max-hours {} while {} waits for GPUs", job.est_hours,
                       opt_.backfill_max_hours, plan_.jobs[h->head].id);
  std::vector<bool> open(plan_.reservations.size());
  for (size_t r = 0; r < open.size(); ++r) open[r] = res_unfinished_[r] > 0;
  std::string why = fmt::format("needs {} GPUs, {} of {} are open to it", job.gpus,
                                count(in_.node & ~reserved_gpus(plan_, j, open)), count(in_.node));
  if (free_.size() > 1) why = fmt::format("needs {} GPUs, and a job runs on one node of {} GPUs", job.gpus,
                                          count(in_.node));
  const auto& mine = plan_.reservations_of[j];
  for (size_t r = 0; r < plan_.reservations.size(); ++r) {
    if (!open[r] || std::find(mine.begin(), mine.end(), r) != mine.end()) continue;
    std::vector<size_t> waiting;
    for (size_t m : plan_.reservations[r].jobs)
      if (!done_[m]) waiting.push_back(m);
    why += fmt::format("; reservation #{} closes GPUs {} until {} {}", r + 1, py_list(plan_.reservations[r].gpu_list),
                       job_list(plan_, waiting), waiting.size() == 1 ? "finishes" : "finish");
  }
  return why;
}

}  // namespace

Simulation simulate(const Plan& plan, const SimOptions& opt, const SimStart* from) {
  return Simulator(plan, opt, from).run();
}

}  // namespace gpuq
