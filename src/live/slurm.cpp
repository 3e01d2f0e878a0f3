// `run --slurm`: the Launcher, GpuProbe and Waker ports over Slurm's commands.
#include "gpuq/live/slurm.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "gpuq/live/launcher.h"
#include "gpuq/live/proc.h"

extern char** environ;

namespace gpuq {

namespace {

// States after which a job never runs again (squeue shows them for MinJobAge seconds).
bool terminal(const std::string& state) {
  return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT" ||
         state == "NODE_FAIL" || state == "OUT_OF_MEMORY" || state == "BOOT_FAIL" || state == "DEADLINE" ||
         state == "PREEMPTED" || state == "SPECIAL_EXIT" || state == "REVOKED";
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string first_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string id_list(const std::vector<long long>& ids) {
  std::string out;
  for (long long id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

}  // namespace

SlurmLauncher::SlurmLauncher(const Plan& plan, PlanPaths paths, SlurmOptions opt)
    : plan_(&plan), paths_(std::move(paths)), opt_(std::move(opt)), tag_(plan_tag(paths_.plan)),
      nice_(slurm_nice(plan)) {}

void SlurmLauncher::use_plan(const Plan& plan, std::map<std::string, std::string> reservations) {
  plan_ = &plan;
  nice_ = slurm_nice(plan);
  opt_.reservations = std::move(reservations);
}

SlurmLauncher::~SlurmLauncher() {
  // Jobs submitted held and never saved: they must not run.
  if (!held_.empty()) run_command({"scancel", id_list(held_)});
}

void SlurmLauncher::take_squeue() {
  queue_.clear();
  by_name_.clear();
  std::vector<QueueJob> jobs;
  squeue_ok_ = false;
  if (json_) {
    CommandResult r = run_command({"squeue", "--me", "--json"});
    if (r.status == 0) {
      try {
        jobs = parse_squeue_json(r.out);
        squeue_ok_ = true;
      } catch (const std::runtime_error& e) {
        squeue_problem_ = e.what();
      }
    } else {
      squeue_problem_ = "squeue: " + first_line(r.err);
    }
    if (!squeue_ok_ && r.status != -1) json_ = r.err.find("json") == std::string::npos;  // no --json: use --format
  }
  if (!json_) {
    CommandResult r = run_command({"squeue", "--me", "-h", "-o", "%i|%j|%T|%r"});
    if (r.status == 0) {
      jobs = parse_squeue_lines(r.out);
      squeue_ok_ = true;
    } else {
      squeue_problem_ = "squeue: " + first_line(r.err);
    }
  }
  std::string prefix = "gpuq-" + tag_ + "-";
  for (QueueJob& j : jobs) {
    if (j.name.compare(0, prefix.size(), prefix) != 0) continue;
    if (!terminal(j.state)) by_name_[j.name] = j.id;
    queue_[j.id] = std::move(j);
  }
}

const QueueJob* SlurmLauncher::queued(long long slurm_id) const {
  auto it = queue_.find(slurm_id);
  return it == queue_.end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string, double>> SlurmLauncher::survey(const State& state, double now) {
  take_squeue();
  std::vector<std::pair<std::string, double>> started;
  std::vector<long long> to_account;
  stray_holds_.clear();
  for (const auto& [id, s] : state.entries()) {
    if (!s.queue_id) continue;
    if (s.status != Status::Running || !squeue_ok_) continue;
    const QueueJob* q = queued(*s.queue_id);
    bool pending = q && q->state == "PENDING";
    // Held but recorded running: an earlier run died between its save and its release.
    if (pending && q->reason.rfind("JobHeld", 0) == 0 && !std::count(held_.begin(), held_.end(), *s.queue_id))
      stray_holds_.push_back(*s.queue_id);
    // Started by Slurm (or already over): its start, set once, from Slurm's own where squeue gives it.
    if (!pending && !s.start) started.emplace_back(id, q && q->start && *q->start <= now ? *q->start : now);
    struct stat st;
    if ((!q || terminal(q->state)) && ::stat(paths_.exit(id).c_str(), &st) != 0) to_account.push_back(*s.queue_id);
  }
  accounted_.clear();
  if (to_account.empty() || accounting_off_) return started;
  CommandResult r = run_command({"sacct", "-j", id_list(to_account), "--json", "-X"});
  if (r.status != 0) {
    if (r.err.find("accounting storage is disabled") != std::string::npos) accounting_off_ = true;
    return started;
  }
  try {
    for (QueueJob& j : parse_sacct_json(r.out)) accounted_[j.id] = std::move(j);
  } catch (const std::runtime_error&) {
  }
  return started;
}

namespace {

// sbatch's answer: the job's id, or why there is none (QueueFull: a limit of the account's or
// QOS's on jobs submitted refused it; submitting waits).
long long submitted_id(const CommandResult& r) {
  if (r.status != 0) {
    std::string why = first_line(r.err.empty() ? r.out : r.err);
    if (why.find("AssocMaxSubmitJobLimit") != std::string::npos ||
        why.find("QOSMaxSubmitJobPerUserLimit") != std::string::npos ||
        why.find("MaxSubmitJobs") != std::string::npos)
      throw QueueFull("sbatch: " + why);
    throw std::runtime_error("sbatch: " + (why.empty() ? fmt::format("exit {}", r.status) : why));
  }
  try {
    return std::stoll(r.out.substr(0, r.out.find(';')));
  } catch (const std::exception&) {
    throw std::runtime_error("sbatch --parsable printed no job id: " + first_line(r.out));
  }
}

}  // namespace

void SlurmLauncher::mend() {
  if (!stray_holds_.empty()) run_command({"scontrol", "release", id_list(stray_holds_)});
  stray_holds_.clear();
}

Launched SlurmLauncher::launch(const LaunchSpec& spec) {
  if (!squeue_ok_)
    throw QueueFull(fmt::format("Slurm's queue cannot be read ({}); submitting waits", squeue_problem_));
  std::string name = slurm_job_name(tag_, spec.id, spec.attempt);
  auto known = by_name_.find(name);
  if (known != by_name_.end()) {
    // Submitted by a run that died before it could save the id: that one, not a second.
    long long id = known->second;
    held_.push_back(id);
    return {id, std::nullopt, id};
  }
  make_folder(paths_.logs, "the log folder");
  SlurmOptions o = opt_;
  if (!spec.cwd.empty()) o.chdir = spec.cwd;  // a snapshot's checkout (snapshots.h)
  std::string script = readable_script(spec, o.chdir);
  std::string exitf = std::filesystem::absolute(paths_.exit(spec.id)).string();
  ::unlink(exitf.c_str());
  ::unlink(paths_.cpu(spec.id).c_str());  // an earlier attempt's CPU time says nothing of this one
  std::string wrap = "exec " + shell_quote(opt_.gpuq_binary) + " " + kJobWrapperArg + " " + shell_quote(script) + " " +
                     shell_quote(exitf) + " -";
  for (const std::string& a : spec.args) wrap += " " + shell_quote(a);
  const Job* job = plan_->find(spec.id);
  size_t at = job ? static_cast<size_t>(job - plan_->jobs.data()) : 0;
  std::vector<std::string> argv{"sbatch"};
  std::string log = std::filesystem::absolute(paths_.log(spec.id)).string();
  for (std::string& a : sbatch_args(o, name, spec.width,
                                    job ? slurm_minutes(*job, opt_.time_margin) : 60, job ? nice_[at] : 0, log,
                                    reservation_of(spec.id), wrap,
                                    job && job->gpu_mem_gib ? shards_for(*job->gpu_mem_gib, opt_.shards) : 0))
    argv.push_back(std::move(a));
  std::vector<std::pair<std::string, std::string>> env{{"GPUQ_JOB_ID", spec.id},
                                                       {"GPUQ_ATTEMPT", std::to_string(spec.attempt)},
                                                       {"GPUQ_PREEMPTIONS", std::to_string(spec.preemptions)}};
  if (job) {  // its cores and host memory, where it gives them; its thread pools take its cores
    std::vector<std::string> host = slurm_host_args(*job, spec.mem_gib);
    argv.insert(argv.end() - 1, host.begin(), host.end());  // before --wrap
    if (job->cpus)
      for (const char* pool : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"})
        if (std::none_of(spec.env.begin(), spec.env.end(), [&](const auto& kv) { return kv.first == pool; }))
          env.push_back({pool, std::to_string(job->cpus)});  // the job's "env" wins
  }
  if (spec.checkpoint_dir) {
    // A preemptible job: Slurm may requeue it when the cluster preempts it (its PreemptMode
    // decides whether it does; CANCEL ignores --requeue), with its preempt_signal first where the
    // cluster sends one (PreemptParameters=send_user_signal). Its checkpoint folder is on the
    // shared file system, beside the state.
    std::vector<std::string> more{"--requeue"};
    if (job && job->preempt_signal.given()) more.push_back("--signal=" + job->preempt_signal.text());
    argv.insert(argv.end() - 1, more.begin(), more.end());  // before --wrap
    std::string dir = std::filesystem::absolute(paths_.checkpoints(spec.id)).string();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    env.push_back({"GPUQ_CHECKPOINT_DIR", dir});
  }
  for (const auto& kv : spec.env) env.push_back(kv);
  if (spec.warn_shell_only) env.push_back({kWarnShellEnv, "1"});
  long long id = 0;
  try {
    id = submitted_id(run_command(argv, env));
  } catch (const QueueFull&) {
    full_ = true;
    full_at_ = -1;
    throw;
  }
  by_name_[name] = id;
  held_.push_back(id);
  return {id, std::nullopt, id};
}

void SlurmLauncher::release(const std::vector<Launched>& jobs) {
  std::vector<long long> ids;
  for (const Launched& j : jobs) {
    ids.push_back(j.pid);
    held_.erase(std::remove(held_.begin(), held_.end(), j.pid), held_.end());
  }
  // A long list in pieces: one argument of a few KB per call.
  for (size_t k = 0; k < ids.size(); k += 500)
    run_command({"scontrol", "release",
                 id_list(std::vector<long long>(ids.begin() + k, ids.begin() + std::min(ids.size(), k + 500)))});
}

void SlurmLauncher::abandon(const Launched& job) {
  run_command({"scancel", std::to_string(job.pid)});
  held_.erase(std::remove(held_.begin(), held_.end(), job.pid), held_.end());
  for (auto it = by_name_.begin(); it != by_name_.end(); ++it)
    if (it->second == job.pid) {
      by_name_.erase(it);
      break;
    }
}

Observed SlurmLauncher::observe(const std::string& id, const JobState& s) {
  Observed o;
  if (auto text = read_file(paths_.exit(id), true)) {
    std::string t = first_line(*text);
    if (!t.empty()) {
      o.kind = Observed::Kind::Exited;
      try {
        size_t used = 0;
        o.exit = std::stoll(t, &used);
        if (used != t.size()) throw std::invalid_argument(t);
      } catch (const std::exception&) {
        o.exit = 1;
        o.note = fmt::format("{} holds \"{}\", not an exit code", paths_.exit(id), t);
      }
      o.cpu_seconds = read_cpu_seconds(paths_, id);
      // Killed by a signal while Slurm still has it (COMPLETING): its end is seen once Slurm says
      // how it ended, so that out_of_memory reads OUT_OF_MEMORY rather than a state not yet final.
      if (o.exit > 128 && squeue_ok_ && s.queue_id)
        if (const QueueJob* q = queued(*s.queue_id); q && !terminal(q->state)) return Observed{};
      return o;
    }
  }
  if (!squeue_ok_ || !s.queue_id) return o;  // nothing known: still running
  const QueueJob* q = queued(*s.queue_id);
  if (q && !terminal(q->state)) return o;
  auto acc = accounted_.find(*s.queue_id);
  if (acc != accounted_.end() && !terminal(acc->second.state) && !acc->second.state.empty()) return o;
  o.kind = Observed::Kind::Exited;
  std::string state = q ? q->state : acc != accounted_.end() ? acc->second.state : "";
  if (acc != accounted_.end() && acc->second.exit && state == "COMPLETED") {
    o.exit = *acc->second.exit;
    return o;
  }
  o.exit = kLostExit;
  o.note = state.empty() ? fmt::format("Slurm job {} left the queue without {}{}", *s.queue_id, paths_.exit(id),
                                       accounting_off_ ? " (and Slurm's accounting is off)" : "")
                         : fmt::format("Slurm job {} ended {} without {}", *s.queue_id, state, paths_.exit(id));
  return o;
}

// Slurm's own word: a job its cgroup killed for going over its --mem (its attempt's mem_gib) ends
// OUT_OF_MEMORY, in squeue (for MinJobAge seconds) or sacct.
std::optional<Outcome> SlurmLauncher::out_of_memory(const std::string& id, const JobState& s, long long exit,
                                                    std::string* why) {
  (void)id;
  if (exit == 0 || !s.queue_id) return std::nullopt;
  const QueueJob* q = queued(*s.queue_id);
  auto acc = accounted_.find(*s.queue_id);
  std::string state = q ? q->state : acc != accounted_.end() ? acc->second.state : "";
  if (state != "OUT_OF_MEMORY") return std::nullopt;
  *why = fmt::format("Slurm job {} ended OUT_OF_MEMORY: its --mem, the attempt's mem_gib, was reached", *s.queue_id);
  return Outcome::OverMemory;
}

Identity SlurmLauncher::identify(const JobState& s) {
  if (!s.queue_id) return Identity::Other;  // a local pid: never signalled through Slurm
  if (!squeue_ok_) return Identity::Same;   // not looked (a control command): scancel decides
  const QueueJob* q = queued(*s.queue_id);
  return q && !terminal(q->state) ? Identity::Same : Identity::Gone;
}

bool SlurmLauncher::signal_group(long long slurm_id, Signal sig) {
  if (squeue_ok_) {
    const QueueJob* q = queued(slurm_id);
    if (!q || terminal(q->state)) return false;
  }
  CommandResult r = sig == Signal::Kill ? run_command({"scancel", "--full", "-s", "KILL", std::to_string(slurm_id)})
                                        : run_command({"scancel", std::to_string(slurm_id)});
  if (sig == Signal::Kill && r.status != 0) r = run_command({"scancel", std::to_string(slurm_id)});
  return r.status == 0 && r.err.find("error") == std::string::npos;
}

bool SlurmLauncher::warn_group(long long slurm_id, const WarnSpec& sig) {
  std::string name = sig.name.empty() ? std::to_string(sig.number) : sig.name;
  // "B:": the batch step alone (the wrapper, which the batch script execs, passes it on to bash).
  CommandResult r = run_command({"scancel", sig.shell_only ? "--batch" : "--full", "-s", name, std::to_string(slurm_id)});
  return r.status == 0;
}

void SlurmLauncher::note_in_log(const std::string& id, const std::string& line) {
  PosixLauncher(paths_).note_in_log(id, line);
}

std::optional<long long> SlurmLauncher::log_size(const std::string& id) { return PosixLauncher(paths_).log_size(id); }

bool SlurmLauncher::group_alive(long long slurm_id) {
  if (!squeue_ok_) return true;
  const QueueJob* q = queued(slurm_id);
  return q && !terminal(q->state);
}

bool SlurmLauncher::hold(const JobState& s) {
  if (!s.queue_id) return false;
  return run_command({"scontrol", "hold", std::to_string(*s.queue_id)}).status == 0;
}

bool SlurmLauncher::release(const JobState& s) {
  if (!s.queue_id) return false;
  return run_command({"scontrol", "release", std::to_string(*s.queue_id)}).status == 0;
}

std::optional<QueueJob> SlurmLauncher::view(const JobState& s) {
  if (!s.queue_id) return std::nullopt;
  if (const QueueJob* q = queued(*s.queue_id)) return *q;
  auto acc = accounted_.find(*s.queue_id);
  if (acc != accounted_.end()) return acc->second;
  return std::nullopt;
}

long long SlurmLauncher::room(const State& state) {
  long long in_queue = 0;
  for (const auto& [id, s] : state.entries())
    if (s.queue_id && (s.status == Status::Running || s.status == Status::Held)) ++in_queue;
  if (full_) {
    if (full_at_ < 0) full_at_ = in_queue;
    if (in_queue < full_at_) full_ = false;  // some left: try again
  }
  if (full_) return 0;
  return std::max(0LL, opt_.max_queued - in_queue);
}

std::string SlurmLauncher::reservation_of(const std::string& id) const {
  auto it = opt_.reservations.find(id);
  return it == opt_.reservations.end() ? "" : it->second;
}

void SlurmWaker::watch_jobs(const std::vector<WatchedJob>& jobs) {
  std::vector<WatchedJob> files;
  for (const WatchedJob& j : jobs) files.push_back({0, j.id});
  inner_.watch_jobs(files);
}

bool state_in_slurm(const State& state) {
  for (const auto& [id, s] : state.entries())
    if (s.queue_id && (s.status == Status::Running || s.status == Status::Held)) return true;
  return false;
}

}  // namespace gpuq
