// `gpuq status`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <set>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <chrono>
#include <future>
#include <system_error>
#include <thread>
#include <tuple>

#include <sys/stat.h>
#include <unistd.h>
#include <unordered_set>


#include "gpuq/live/phase.h"
#include "gpuq/live/node_dir.h"
#include "gpuq/live/proc.h"
#include "gpuq/views/node_text.h"
#include "gpuq/live/async.h"
#include "gpuq/live/launcher.h"
#include "gpuq/live/local_files.h"
#include "gpuq/live/plan_edit.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/gpu_use.h"
#include "gpuq/core/life.h"
#include "gpuq/core/limits.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/plan.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/run_info.h"
#include "gpuq/live/slurm.h"
#include "gpuq/live/store.h"
#include "gpuq/views/json.h"
#include "gpuq/views/svg.h"
#include "gpuq/views/text.h"

#include "gpuq/core/snapshot.h"
#include "gpuq/live/snapshots.h"

#include "cli.h"
#include "gpuq/core/hint.h"

namespace gpuq::cli {

namespace {

/// The jobs waiting to run whose snapshot (the code they run) is older than the tree on disk:
/// a line per snapshot, naming them. No git is run when no waiting job has a snapshot.
std::string stale_snapshot_notes(const Plan& plan, const State& state, double now, const PlanPaths& paths,
                                 std::set<std::string>& stale) {
  std::map<std::string, std::pair<SnapshotRef, std::vector<std::string>>> waiting;  // commit -> it, its jobs
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobState* s = state.of(plan, i);  // by the plan's slots: no hash of each id (15 M instructions on 100k jobs)
    if (!s || !s->snapshot || !(s->status == Status::Pending || s->status == Status::Held || s->status == Status::Blocked))
      continue;
    if (std::optional<SnapshotRef> snap = snapshot_of(*s)) {
      auto& [ref, ids] = waiting[snap->commit];
      if (ids.empty() || snap->at < ref.at) ref = *snap;
      ids.push_back(plan.jobs[i].id);
    }
  }
  if (waiting.empty()) return "";
  GitSnapshots git(its_own_files(paths));
  std::string out;
  for (const auto& [commit, it] : waiting) {
    const auto& [ref, ids] = it;
    std::string names;
    for (size_t k = 0; k < ids.size() && k < 10; ++k) names += (k ? ", " : "") + ids[k];
    if (ids.size() > 10) names += fmt::format(" and {} more", ids.size() - 10);
    if (!git.changed_since(ref).value_or(false)) continue;
    stale.insert(commit);
    out += fmt::format("{}: {} (snapshot {})\n", names, stale_snapshot_text(ref.at, now), short_commit(commit));
  }
  return out;
}


/// The Gantt bars of a live queue: what ran (hours before now, every attempt) and what is predicted.
std::vector<Bar> live_bars(const Plan& plan, const State& state, const Outlook& o) {
  std::vector<Bar> bars;
  std::vector<char> predicted(plan.jobs.size(), 0);
  for (const SimRow& r : o.sim.rows) {
    const JobState* s = state.of(plan, r.job);
    bool running = s && s->status == Status::Running;
    bars.push_back({r.job, running ? "running" : "predicted", r.start, r.end, r.gpus});
    predicted[r.job] = 1;
  }
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobState* s = state.of(plan, i);
    if (!s) continue;
    for (const EarlierAttempt& a : earlier_attempts(*s))  // each attempt a retry or a restart replaced
      bars.push_back({i, a.exit == 0 ? "done" : "failed", (a.start - o.now) / 3600, (a.end - o.now) / 3600, a.gpus});
    if (predicted[i] || !s->start || !s->end) continue;
    if (s->status != Status::Done && s->status != Status::Failed) continue;
    bars.push_back({i, status_name(s->status), (*s->start - o.now) / 3600, (*s->end - o.now) / 3600,
                    s->gpus.value_or(std::vector<int>{})});
  }
  // A job removed from the plan while it ran still holds its GPUs: up to now, under its own id.
  for (const auto& [id, s] : state.entries())
    if (s.status == Status::Running && s.start && s.gpus && !plan.find(id))
      bars.push_back({0, "running", std::min(0.0, (*s.start - o.now) / 3600), 0.0, *s.gpus, 0,
                      id + " (not in the plan)"});
  return bars;
}

/// What status knows of the plan's `gpuq run`, and the ids of the plan it loaded when the
/// plan on disk is another (nullopt when it is the same, or unknown).
struct RunLook {
  RunSeen seen;
  std::optional<std::unordered_set<std::string>> loaded_ids;
};

RunLook look_at_run(const Flags& f, const PlanPaths& paths, const std::vector<int>& gpus) {
  RunLook l;
  l.seen.paused_since = paused_since(paths);
  RunPresence p = run_presence(paths);
  l.seen.running = p.running;
  if (p.info) {
    l.seen.pid = p.info->pid;
    l.seen.host = p.info->host;
    l.seen.started = p.info->started;
    l.seen.last_tick = p.info->tick;
    l.seen.ended = p.info->ended;
    l.seen.plan_loaded_at = p.info->loaded_at.value_or(p.info->loaded.mtime);
  } else if (!p.lock_pid.empty()) {
    char* end = nullptr;
    long long pid = std::strtoll(p.lock_pid.c_str(), &end, 10);
    if (end && !*end && pid > 0) l.seen.pid = pid;
  }
  if (!p.running || !p.info || p.info->loaded.hash.empty()) return l;
  // Size and time first: the whole text is hashed only when one of them moved.
  struct stat st {};
  if (::stat(paths.plan.c_str(), &st) != 0) return l;
  double mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
  if (static_cast<long long>(st.st_size) == p.info->loaded.size && mtime == p.info->loaded.mtime) return l;
  auto now = stamp_plan(paths.plan);
  if (!now || now->hash == p.info->loaded.hash) return l;
  l.seen.plan_changed = true;
  // run reloads a valid edit at once: one it keeps running without has problems (run --slurm's
  // own too: a reservation of GPU ids, said on stderr as run says it).
  l.seen.slurm = p.info->slurm;
  if (PlanLoad disk = load_plan(paths.plan, gpus); !disk.plan) {
    l.seen.plan_problems = disk.errors.size();
  } else if (std::string why = p.info->slurm ? slurm_plan_problem(*disk.plan, cluster_shards(f)) : ""; !why.empty()) {
    l.seen.plan_problems = 1;
    fmt::print(stderr, "{}: run --slurm: {}\n", paths.plan, why);
  }
  PlanLoad loaded = load_plan(paths.run_plan, gpus);
  if (loaded.plan) {
    l.loaded_ids.emplace();
    for (const Job& j : loaded.plan->jobs) l.loaded_ids->insert(j.id);
  }
  return l;
}

/// The lines about the plan's `gpuq run`, before the outlook.
std::string run_lines(const Flags& f, const RunSeen& r, double now) {
  std::string who = r.pid ? fmt::format("pid {}{}", *r.pid, r.host.empty() ? "" : " on " + r.host) : "pid ?";
  std::string paused = r.paused_since ? fmt::format("paused since {}: no new job starts until {} (running jobs go on)\n",
                                                    local_time(*r.paused_since, now), hint("resume"))
                                      : "";
  if (!r.running) {
    std::string last;
    if (r.pid && (r.ended || r.last_tick))
      last = fmt::format(" (the last one, {}, {} at {})", who, r.ended ? "ended" : "stopped ticking",
                         local_time(r.ended ? *r.ended : *r.last_tick, now));
    return paused + fmt::format("no `gpuq run` is running this plan{}: nothing starts until {} is started\n", last,
                                hint("run"));
  }
  std::string out = paused + fmt::format("`gpuq run` ({}) is running this plan", who);
  if (r.last_tick)
    out += fmt::format("; its last tick {} ({:.0f} s ago)", clock_stamp(*r.last_tick), std::max(0.0, now - *r.last_tick));
  out += "\n";
  std::string loaded_at = r.plan_loaded_at ? local_time(*r.plan_loaded_at, now) : "?";
  if (r.plan_problems)
    out += fmt::format("the plan on disk has {} problem{}; still running the version loaded at {} ({} lists them; "
                       "fix the file and run reloads it)\n",
                       *r.plan_problems, *r.plan_problems == 1 ? "" : "s", loaded_at,
                       hint(r.slurm ? "validate --slurm" : "validate"));
  else if (r.plan_changed)
    out += fmt::format("`gpuq run` is using the plan as loaded at {}; {} changed since and is reloaded at run's "
                       "next tick\n",
                       loaded_at, f.plan);
  return out;
}

/// The reasons as they are for the run that is (or is not) going: none starts anything, and
/// a run on an older plan does not know the jobs added since.
void reasons_for_run(const Plan& plan, const RunLook& run, Outlook& o) {
  o.run.known = true;
  o.run.running = run.seen.running;
  o.run.plan_loaded_at = run.seen.plan_loaded_at;
  if (!run.seen.running || !run.loaded_ids) return;
  for (JobView& v : o.jobs)
    if (v.status == "pending" && !run.loaded_ids->count(plan.jobs[v.job].id)) v.not_in_run_plan = true;
}

/// refresh(); for a plan run with --slurm, through squeue, and the text of what Slurm says
/// of each job in its queue ("" for a plan run on this machine); `reasons`: Slurm's pending
/// reason of each job it has not started.
std::string slurm_refresh(const PlanPaths& paths, State& state, double now,
                          std::map<std::string, std::string>& reasons) {
  if (!state_in_slurm(state)) {
    PosixLauncher local(paths);
    refresh_alone(local, state, now);
    return "";
  }
  static const Plan none;
  SlurmLauncher slurm(none, paths, SlurmOptions{});
  refresh_alone(slurm, state, now);
  std::string out = "\nIn Slurm (run --slurm):\n";
  for (const auto& [id, s] : state.entries()) {
    if (!s.queue_id || (s.status != Status::Running && s.status != Status::Held)) continue;
    std::optional<QueueJob> v = slurm.view(s);
    if (v && v->state == "PENDING" && !v->reason.empty() && v->reason != "None") reasons[id] = v->reason;
    out += fmt::format("  {:<24} Slurm job {:<8} {:<10} {}\n", id, *s.queue_id, v ? v->state : "?",
                       v && !v->reason.empty() && v->reason != "None" ? "reason: " + v->reason : "");
  }
  return out;
}

/// A reading of the GPUs and, for --pairs auto, their topology.
struct Probed {
  GpuReading reading;
  std::optional<Topology> topology;
};

int status_once(const Flags& f, const Plan& given, const std::vector<int>& gpus, State state,
                std::optional<Probed> probed = std::nullopt) {
  PlanPaths paths = plan_paths(f);
  std::optional<Plan> learned;  // --learned-estimates: a copy with the estimates learned
  if (f.learned_estimates) learn_into(f, learned.emplace(given), state);
  const Plan& plan = learned ? *learned : given;
  warn_unknown_entries(plan, paths, state);
  double now = unix_now();
  std::map<std::string, std::string> slurm_reasons;
  // A running job past its time limit whose process is gone was stopped there by run, which
  // has not saved that yet (status read the state between run's SIGTERM and its save): it
  // ended as the timeout run is writing, not as a job lost (which would be retried).
  std::vector<std::pair<std::string, double>> past_limit;  // id, when its limit fell
  for (const auto& [id, s] : state.entries())
    if (s.status == Status::Running && s.start && !s.queue_id)
      if (const Job* j = plan.find(id))
        if (std::optional<double> lim = limit_hours(*j, f.time_limit_factor); lim && now >= *s.start + *lim * 3600)
          past_limit.push_back({id, *s.start + *lim * 3600});
  std::string slurm = slurm_refresh(paths, state, now, slurm_reasons);  // in memory only: status changes nothing (fix 13)
  for (const auto& [id, at] : past_limit)
    if (JobState* s = state.find(id); s && s->status != Status::Running) {
      Ended end;
      end.attempts = s->attempts_or0();
      end.outcome = Outcome::Timeout;
      end.exit = timeout_exit(*plan.find(id));
      end.end = at;
      end.start = s->start;
      write_life(*s, end, Cause::Limit);
    }
  phase("refresh");
  RunOptions opt = run_options(f, gpus);
  std::string pairs_err;
  std::optional<Placement> placement = parse_pairs(f.pairs.empty() ? "auto" : f.pairs, &pairs_err);
  if (!placement) {
    fmt::print(stderr, "gpuq status: {}\n", pairs_err);
    return kExitBadInput;
  }
  opt.placement = std::move(*placement);
  opt.paused = paused_since(paths).has_value();  // the prediction starts nothing new (outlook.h)
  if (opt.placement.kind == Placement::Kind::Auto) {
    std::optional<Topology> t = probed ? probed->topology : probe_of(opt)->topology();
    opt.placement.topology = t.value_or(Topology{});
  }
  // Text without --all shows the first rows only: only they need their reasons worked out.
  std::map<int, std::string> others;
  std::vector<double> mem_other;  // jobs that pack: GiB per GPU beyond their declared, as run's next tick sees it
  std::string over;               // packed jobs using more than they declared
  if (packs(plan, opt)) {
    GpuReading none;
    const GpuReading& r = probed ? probed->reading : none;
    opt.gpu_mem_total = gpu_totals_gib(r);
    MemoryUse use = memory_use(r, state, GpuRules{opt.max_used_mib, opt.ignore_process}, [&](const std::string& id) {
      const Job* j = plan.find(id);
      return j ? opt.packed_gib(*j) : 0.0;
    });
    mem_other = std::move(use.other);
    for (const MemoryUse::Over& x : use.over)
      over += fmt::format("{} uses {:.1f} GiB on GPU {}, declared {:g} (gpu_mem_gib): nothing more is placed on GPU {} "
                          "while it does\n",
                          x.id, x.used_gib, x.gpu, x.declared_gib, x.gpu);
  }
  GpuMask free = free_now(state, opt, probed ? std::optional<GpuReading>(std::move(probed->reading)) : std::nullopt,
                          &others);
  name_removed_holders(plan, state, others);
  name_ending_holders(state, others);
  NodeLook node = node_look(f, paths, gpus, now, &others);
  opt.max_gpus = node.cap;
  OnNode on_node{node.held, {}};
  for (const auto& [id, w] : node.waits)
    if (const Job* j = plan.find(id); j && w.kind == NodeWhy::Kind::Later)
      on_node.not_before.push_back({static_cast<size_t>(j - plan.jobs.data()), w.start});
  Outlook o = make_outlook(plan, state, opt, now, free, LocalFiles(workdir_of(f, plan.workdir).path),
                           f.json || f.all ? std::nullopt : std::optional<size_t>(kOutlookRows), others,
                           std::move(mem_other), on_node);
  for (const auto& [id, w] : node.waits)
    if (const Job* j = plan.find(id)) o.node_reasons[static_cast<size_t>(j - plan.jobs.data())] = w;
  RunLook run = look_at_run(f, paths, gpus);
  reasons_for_run(plan, run, o);
  for (JobView& v : o.jobs)
    if (auto r = slurm_reasons.find(plan.jobs[v.job].id); v.queued && r != slurm_reasons.end())
      o.queue_reasons[v.job] = r->second;
  phase("outlook");
  if (!f.svg.empty() &&
      !write_output(f.svg, gantt_svg(plan, live_bars(plan, state, o), gpus, 0.0, "gpuq status: " + f.plan)))
    return kExitFailure;
  std::string notes = over + stale_snapshot_notes(plan, state, now, paths, o.stale_snapshots);
  for (const std::string& line : settings_notes(f, "auto")) notes += line + "\n";
  std::string out = f.json ? outlook_json(plan, state, f.plan, o, run.seen, settings_sources_json(f))
                           : format_status(plan, state, now, f.all) + format_stale(plan, state, f.plan) + "\n" +
                                 run_lines(f, run.seen, now) + node.line + notes +
                                 format_outlook(plan, state, o, f.all) + slurm;
  phase("format");
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  keep_until_exit(std::move(o));
  keep_until_exit(std::move(state));
  return 0;
}

/// The GPU probe (--gpu-probe: NVML, or nvidia-smi, which takes 0.1 to 0.5 s on a real node,
/// or hangs until its timeout), and for --pairs auto the topology, asked on a thread of its
/// own while this one loads the plan and the state. The thread is detached:
/// a command that fails before it needs the reading exits without waiting for it. It uses
/// nothing but its copy of the command (no object that exit destroys). Where no thread can
/// be had, nvidia-smi is asked when the reading is wanted.
std::future<Probed> probe_meanwhile(const RunOptions& opt, bool topology) {
  auto ask = [opt, topology] {
    std::unique_ptr<GpuProbe> probe = probe_of(opt);
    Probed out{probe->read(), std::nullopt};
    if (topology) out.topology = probe->topology();
    return out;
  };
  std::packaged_task<Probed()> task(ask);
  std::future<Probed> reading = task.get_future();
  try {
    std::thread(std::move(task)).detach();
  } catch (const std::system_error&) {
    return std::async(std::launch::deferred, ask);
  }
  return reading;
}

/// When the plan file last changed (size, mtime, inode): a change means it is read again.
using PlanStamp = std::tuple<long long, long long, long long, unsigned long long>;
PlanStamp plan_stamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
          static_cast<long long>(st.st_mtim.tv_nsec), static_cast<unsigned long long>(st.st_ino)};
}

}  // namespace

/// The plan on disk has problems (load_command printed them): while a `gpuq run` goes on
/// with the version it loaded (PLAN.run.plan.json), status shows that one, and says so.
std::optional<Loaded> plan_run_goes_on_with(const Flags& f) {
  auto gpus = node_gpus(f);
  PlanPaths paths = plan_paths(f);
  if (!gpus || !run_presence(paths).running) return std::nullopt;
  PlanLoad kept = load_plan(paths.run_plan, *gpus);
  if (!kept.plan) return std::nullopt;
  return Loaded{std::move(*gpus), std::move(*kept.plan)};
}

// status --node: the node directory's users, their running and waiting jobs.
int cmd_status_node(Flags& f) {
  // The node of the plan's run (--plan, $GPUQ_PLAN or ./plan.json, when there is one), unless named.
  Flags g = f;
  g.plan = plan_in_reach(f);
  std::string dir = node_dir_for(f, g.plan.empty() ? std::nullopt : read_run_info(plan_paths(g)));
  if (dir.empty()) {
    fmt::print(stderr, "gpuq status --node: no node directory (--node-dir DIR, $GPUQ_NODE_DIR, or {} when it exists "
                       "and you may write there)\n", kDefaultNodeDir);
    return kExitBadInput;
  }
  if (std::error_code ec; !std::filesystem::is_directory(dir, ec)) {  // as simulate --node says it
    fmt::print(stderr, "gpuq status --node: the node directory {}: {}\n", dir,
               std::filesystem::exists(dir, ec) ? "not a folder" : "no such folder");
    return kExitBadInput;
  }
  try {
    std::string err;
    std::optional<std::vector<int>> ids = parse_gpu_list(f.gpus.empty() ? "0-7" : f.gpus, &err);
    if (!ids) throw std::runtime_error("--gpus: " + err);
    GpuMask node = mask_of(*ids);
    NodeView v = read_node_dir(dir, node);
    fmt::print("{}", node_text(dir, v.users, v.notes, node, unix_now(), v.config, f.backfill_max_hours,
                               node_room(f, *ids)));
    // Readable but not usable by this user: their runs would start nothing; say so here too.
    if (std::string why = node_dir_problem(dir); !why.empty())
      fmt::print("you: your runs cannot share this node: {}\n", why);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuq status --node: {}\n", e.what());
    return kExitFailure;
  }
}

int cmd_status(Flags& f) {
  if (f.status_node) return cmd_status_node(f);
  huge_page_heap();
  phase("start");
  // The state is read on a second core while this one reads the plan (bench/run.sh
  // measured the difference). It touches nothing but its copy of the paths; its errors
  // wait for the plan's (get() rethrows them), so a bad plan is still reported first
  // and alone, and a damaged state is reported by main (exit 1).
  std::future<State> state;
  std::future<Probed> probe;
  const Flags given = f;  // the flags and variables alone (--watch takes the settings again at each redraw)
  auto probe_asked = [](const Flags& x) {
    return std::tuple(x.gpu_probe, run_options(x, {}).nvidia_smi, x.pairs.empty() || x.pairs == "auto");
  };
  if (f.watch <= 0) {
    probe = probe_meanwhile(run_options(f, {}), f.pairs.empty() || f.pairs == "auto");
    state = on_another_core([paths = plan_paths(f)] { return read_state(paths); });
  }
  auto loaded = load_command(f);
  if (!loaded) loaded = plan_run_goes_on_with(f);  // an edit with errors: the run's own version
  // An edit run --slurm refused (a reservation of GPU ids): the run's own version too.
  if (loaded && !slurm_plan_problem(loaded->plan, std::nullopt).empty()) {
    std::optional<RunInfo> info = read_run_info(plan_paths(f));
    if (info && info->slurm)
      if (auto kept = plan_run_goes_on_with(f)) loaded = std::move(kept);
  } else if (loaded && std::any_of(loaded->plan.jobs.begin(), loaded->plan.jobs.end(),
                                   [](const Job& j) { return j.gpu_mem_gib && j.gpus > 0; })) {  // packed jobs: refused where the cluster has no shards
    std::optional<RunInfo> info = read_run_info(plan_paths(f));
    if (info && info->slurm && !slurm_plan_problem(loaded->plan, cluster_shards(f)).empty())
      if (auto kept = plan_run_goes_on_with(f)) loaded = std::move(kept);
  }
  if (!loaded) return kExitBadInput;
  const std::vector<int>* gpus = &loaded->gpus;
  const Plan* plan = &loaded->plan;
  warn_state_beside_link(f.plan);
  phase("load plan");
  if (f.watch <= 0) {
    // The settings (the plan's, the run's) may name another state folder or GPU probe than
    // the ones asked before the plan was read: those are asked again.
    if (paths_for(f.plan, f.state_dir).state != paths_for(given.plan, given.state_dir).state) {
      try {
        state.get();
      } catch (const std::exception&) {  // not this plan's state
      }
      state = std::async(std::launch::deferred, [paths = plan_paths(f)] { return read_state(paths); });
    }
    State s = state.get();
    phase("read state (the rest of it)");
    std::optional<Probed> probed = probe.get();
    if (probe_asked(f) != probe_asked(given)) probed.reset();
    int rc = status_once(f, *plan, *gpus, std::move(s), std::move(probed));
    keep_until_exit(std::move(*loaded));
    return rc;
  }
  // Redraw until Ctrl-C, for a tmux pane. Into a pipe or a file (not a terminal) each
  // redraw is appended as plain text, without the codes that clear a screen.
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  std::optional<Plan> reloaded;
  PlanStamp seen = plan_stamp(f.plan);
  std::vector<int> gpus_now = *gpus;
  while (true) {
    // The settings again: a `gpuq run` may have started or stopped since the last redraw.
    Flags now_f = given;
    take_settings(now_f, plan->settings);
    if (auto ids = node_gpus(now_f); ids && *ids != gpus_now) {
      gpus_now = *ids;
      seen = {};  // the plan is checked again against these GPUs
    }
    // The plan edited since the last redraw is read again (an edit with errors keeps the last good plan, and says so).
    std::string plan_note;
    if (PlanStamp now_stamp = plan_stamp(f.plan); now_stamp != seen) {
      seen = now_stamp;
      PlanLoad again = load_plan(f.plan, gpus_now);
      if (again.plan) {
        reloaded = std::move(again.plan);
        plan = &*reloaded;
      } else {
        plan_note = fmt::format("the plan {} was edited and is not valid ({} problem{}, first: {}); showing it as "
                                "it was before the edit\n\n",
                                f.plan, again.errors.size(), again.errors.size() == 1 ? "" : "s",
                                again.errors.empty() ? "?" : again.errors[0]);
      }
    }
    if (terminal) std::fputs("\x1b[H\x1b[2J", stdout);
    fmt::print("gpuq status --plan {}   (every {:g} s; Ctrl-C to stop)   {}\n\n", f.plan, f.watch,
               clock_stamp(unix_now()));
    std::fputs(plan_note.c_str(), stdout);
    try {
      status_once(now_f, *plan, gpus_now, read_state(plan_paths(now_f)));
    } catch (const StoreError& e) {
      fmt::print("gpuq: {}\n", e.what());
    }
    if (!terminal) std::fputs("\n", stdout);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(f.watch * 1000)));
  }
}

void add_status_command(CLI::App& app, Flags& f, Action& action) {
  auto* status = app.add_subcommand(
      "status", "show each job's status, why jobs wait, and when each job and the plan are predicted to finish");
  add_flags(status, f, {kGpus, kPoll, kAll, kBackfill, kRetries, kRetryAfter, kMaxUsed});
  add_time_limit_factor(status, f);
  add_gpu_memory(status, f);
  add_quiet_minutes(status, f);
  status->add_flag("--node", f.status_node, "every user's running and waiting jobs on the shared node (--node-dir)");
  status->add_option("--node-dir", f.node_dir, "the node directory (default: $GPUQ_NODE_DIR, else /var/lib/gpuq)")
      ->type_name("DIR");
  status->add_flag("--json", f.json, "print one JSON object (schema in doc/commands.md) instead of text");
  status->add_option("--svg", f.svg, "also write a Gantt chart of what ran and what is predicted to FILE")
      ->type_name(kFileType);
  status->add_option("--watch", f.watch, "redraw every S seconds until Ctrl-C (for a tmux pane)")
      ->expected(0, 1)
      ->default_str("5");
  setting_flag(f, status->add_option("--nvidia-smi", f.nvidia_smi,
                                     "the nvidia-smi command (default: $GPUQ_NVIDIA_SMI, else nvidia-smi)"));
  add_gpu_flags(status, f, "auto");
  add_learned_estimates(status, f);
  status->callback([&] {
    f.reads_run_settings = true;
    action = [&] { return cmd_status(f); };
  });
}

}  // namespace gpuq::cli
