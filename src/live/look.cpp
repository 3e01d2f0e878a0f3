// One look at the node (look.h): the plan, the state, the run, the GPUs, the shared node, the
// backend's queue and the snapshots, gathered once for a prediction.
#include "gpuq/core/job_words.h"
#include "gpuq/live/look.h"
#include "gpuq/live/read.h"

#include <sys/statvfs.h>

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <system_error>
#include <thread>
#include <tuple>

#include "gpuq/core/hint.h"
#include "gpuq/core/life.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/snapshot.h"
#include "gpuq/live/async.h"
#include "gpuq/live/backend.h"
#include "gpuq/live/control.h"
#include "gpuq/live/local_files.h"
#include "gpuq/live/node_dir.h"
#include "gpuq/live/phase.h"
#include "gpuq/live/plan_edit.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/run_info.h"
#include "gpuq/live/snapshots.h"

namespace gpuq {

namespace fs = std::filesystem;

namespace {

/// A reading of the GPUs and, for --pairs auto, their topology.
struct Probed {
  GpuReading reading;
  std::optional<Topology> topology;
};

std::unique_ptr<GpuProbe> probe_of(const RunOptions& opt) {
  return make_probe(parse_probe_kind(opt.gpu_probe).value_or(ProbeKind::Auto), opt.nvidia_smi,
                    opt.nvidia_smi_timeout);
}

/// The GPU probe (nvidia-smi takes 0.1 to 0.5 s on a real node, or hangs until its timeout), and
/// for --pairs auto the topology, asked on a thread of its own while this one loads the plan
/// and the state. The thread is detached: a command that fails before it needs the reading exits
/// without waiting for it. It uses nothing but its copy of the options. Where no thread can be
/// had, the probe is asked when the reading is wanted.
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

/// What the probe is asked with: asked again when the settings the plan gives change it.
auto probe_asked(const PlanSetup& s, const char* pairs_default) {
  std::string pairs = s.pairs.empty() ? pairs_default : s.pairs;
  return std::tuple(s.gpu_probe, run_options(s, {}).nvidia_smi, pairs == "auto");
}

/// The plan on disk has problems: while a `gpuq run` goes on with the version it loaded
/// (PLAN.run.plan.json), that one.
std::optional<Plan> plan_run_goes_on_with(const PlanPaths& paths, const std::vector<int>& gpus) {
  if (!run_presence(paths).running) return std::nullopt;
  PlanLoad kept = load_plan(paths.run_plan, gpus);
  return std::move(kept.plan);
}

/// State entries of jobs the plan no longer has (renamed or removed jobs): a line for each one
/// still running (it holds GPUs, and only `kill` reaches it), one for the rest. Entries that a
/// running `run` marked "removed" when an edit dropped their job are expected.
}  // namespace

std::vector<std::string> unknown_entry_lines(const Plan& plan, const PlanPaths& paths, const State& state) {
  std::vector<std::string> out;
  // Usually every entry is a job of the plan: the binding of state to plan (which the
  // outlook needs anyway) says so without looking each id up again.
  size_t known = 0;
  for (size_t i = 0; i < plan.jobs.size(); ++i) known += state.of(plan, i) != nullptr;
  if (known == state.entries().size()) return out;
  std::string list;
  size_t n = 0;
  for (const auto& [id, s] : state.entries()) {
    if (plan.find(id)) continue;
    if (s.status == Status::Running) {
      out.push_back(fmt::format("note: {} runs but is no longer in {}: it keeps GPUs {} until it ends ({} stops it, "
                                "{} shows its log)",
                                id, paths.plan, s.gpus ? py_list(*s.gpus) : "[]", hint("kill", {id}), hint("logs", {id})));
      continue;
    }
    if (s.removed) continue;
    if (n++ < 10) list += (list.empty() ? "" : ", ") + id + " (" + status_name(s.status) + ")";
  }
  if (n)
    out.push_back(fmt::format("warning: {} names {} job(s) that are not in {}: {}{}. Their entries are kept as they "
                              "are, for the history; they change nothing (a job renamed in the plan starts afresh "
                              "under its new id)",
                              paths.state, n, paths.plan, list, n > 10 ? ", ..." : ""));
  return out;
}

namespace {

/// What status says holds a GPU that a running job the plan no longer has is on.
void name_removed_holders(const Plan& plan, const State& state, std::map<int, std::string>& others) {
  for (const auto& [id, s] : state.entries())
    if (s.status == Status::Running && s.gpus && !plan.find(id))
      for (int g : *s.gpus)
        others[g] = fmt::format("GPU {} busy: {} runs there, no longer in the plan ({} stops it)", g, id, hint("kill", {id}));
}

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
    std::string names = few_of(ids, 10);
    if (!git.changed_since(ref).value_or(false)) continue;
    stale.insert(commit);
    out += fmt::format("{}: {} (snapshot {})\n", names, stale_snapshot_text(ref.at, now), short_commit(commit));
  }
  return out;
}

/// What the look knows of the plan's `gpuq run`, and the ids of the plan it loaded when the
/// plan on disk is another (nullopt when it is the same, or unknown).
void look_at_run(const PlanPaths& paths, const std::vector<int>& gpus, const Backend& backend, Look& l) {
  RunSeen& seen = l.run;
  seen.paused_since = paused_since(paths);
  RunPresence p = run_presence(paths);
  seen.running = p.running;
  std::optional<long long> locker;  // the pid the run lock names
  if (!p.lock_pid.empty()) {
    char* end = nullptr;
    long long pid = std::strtoll(p.lock_pid.c_str(), &end, 10);
    if (end && !*end && pid > 0) locker = pid;
  }
  if (p.info) {
    seen.pid = p.info->pid;
    seen.host = p.info->host;
    seen.started = p.info->started;
    seen.last_tick = p.info->tick;
    seen.ended = p.info->ended;
    seen.plan_loaded_at = p.info->loaded_at.value_or(p.info->loaded.mtime);
    seen.poll = p.info->settings.values.poll;
    // A run holds the lock, and the run file is another's that has ended: this run could not write
    // it yet (a full disk, a read-only folder): the lock names the run, the file's times are not its.
    bool other = locker ? *locker != p.info->pid : !process_alive(p.info->pid, std::nullopt);
    if (p.running && other) {
      seen.file_pid = p.info->pid;
      seen.pid = locker;
      seen.started.reset();
      seen.last_tick.reset();
      seen.ended.reset();
      seen.plan_loaded_at.reset();
      return;
    }
  } else {
    seen.pid = locker;
  }
  if (!p.running || !p.info || p.info->loaded.hash.empty()) return;
  // Size and time first: the whole text is hashed only when one of them moved.
  struct stat st {};
  if (::stat(paths.plan.c_str(), &st) != 0) return;
  double mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
  if (static_cast<long long>(st.st_size) == p.info->loaded.size && mtime == p.info->loaded.mtime) return;
  auto now = stamp_plan(paths.plan);
  if (!now || now->hash == p.info->loaded.hash) return;
  seen.plan_changed = true;
  // run reloads a valid edit at once: one it keeps running without has problems (a batch
  // queue's own too: said as run says it).
  seen.slurm = backend.batch();
  if (PlanLoad disk = load_plan(paths.plan, gpus); !disk.plan) {
    seen.plan_problems = disk.errors.size();
  } else if (std::string why = backend.batch() ? backend.plan_problem(*disk.plan, true) : ""; !why.empty()) {
    seen.plan_problems = 1;
    l.warnings.push_back(fmt::format("{}: run {}: {}", paths.plan, backend.run_flag(), why));
  }
  PlanLoad loaded = load_plan(paths.run_plan, gpus);
  if (loaded.plan) {
    l.run_ids.emplace();
    for (const Job& j : loaded.plan->jobs) l.run_ids->insert(j.id);
  }
}

}  // namespace

static std::string node_dir_for(const PlanSetup& s, const PlanPaths& paths) {
  std::optional<RunInfo> info = read_run_info(paths);
  bool named = !s.node_dir.empty() || std::getenv("GPUQ_NODE_DIR");
  return named || !info || info->node_dir.empty() ? choose_node_dir(s.node_dir) : info->node_dir;
}

// The node directory a look at the plan of `paths` reads: none where its run's batch queue places
// the jobs.
static std::string look_node_dir(const PlanSetup& s, const PlanPaths& paths) {
  std::optional<RunInfo> info = read_run_info(paths);
  if (info && info->slurm) return "";
  return node_dir_for(s, paths);
}

static NodeRoom node_room(const PlanSetup& s, const std::vector<int>& gpus) {
  Policy p;
  p.gpu_mem_gib = s.gpu_mem_gib;
  p.gpu_mem_headroom = s.gpu_mem_headroom;
  p.node_gpus = gpus;
  return p.gpu_rooms();
}

// The node's cores and host memory for jobs, as a run of this setup counts them.
static HostRoom node_host_of(const PlanSetup& s, const std::vector<int>& gpus) {
  RunOptions o = run_options(s, gpus);
  return node_host_room(o.node_cpus, o.node_mem_gib);
}

// Who holds the node's GPUs, for a look at the plan `mine` of `owner` by `me`.
struct HeldBy {
  std::set<std::string> users;         // the other runs' users ("you (another plan)" for the viewer's)
  GpuMask theirs = 0, yours = 0, own = 0;  // GPUs other users' jobs hold, the viewer's other plans', the plan's run's
};

// The other runs' holds, each in look.held until its predicted end and, with `others`, in words
// for its GPUs ("ana's train (gpuq, ends ~14:30)"); a GPU packed jobs share counts once.
static HeldBy note_holds(const std::vector<NodeUser>& users, GpuMask node, const std::string& owner,
                         const std::string& mine, const std::string& me, double now, NodeLook& look,
                         std::map<int, std::string>* others) {
  HeldBy by;
  for (const NodeUser& u : users)
    for (const NodeRun& r : u.runs) {
      if (u.name == owner && r.plan == mine) {  // the plan's own run: status predicts from it; simulate replaces it
        for (const NodeHold& h : r.holds) by.own |= mask_of(h.gpus) & node;
        continue;
      }
      if (r.gone && r.holds.empty()) continue;  // a run that has ended, nothing of it left
      by.users.insert(u.name != me ? u.name : "you (another plan)");
      for (const NodeHold& h : r.holds) {
        GpuMask g = mask_of(h.gpus) & node;
        if (!g) continue;
        double end = h.start + std::max(0.0, h.est_hours) * 3600;
        look.held.push_back({g, end, u.name == me});
        (u.name == me ? by.yours : by.theirs) |= g;
        for (int id : h.gpus)
          if (others && (node >> id & 1))
            (*others)[id] = fmt::format("{} {} (gpuq, ends ~{})", u.name == me && me == owner ? "your" : u.name + "'s", h.id,
                                        local_time(std::max(end, now), now));
      }
    }
  return by;
}

// status's line on the shared node: whose runs share it, the GPUs they hold, and how the plan is
// predicted beside them.
static std::string shared_line(const std::string& dir, const HeldBy& by, bool whole, int waiting) {
  const int theirs = count(by.theirs), yours = count(by.yours & ~by.theirs), own = count(by.own);
  std::string who;
  for (const std::string& u : by.users) who += (who.empty() ? "" : ", ") + u;
  auto gpus_text = [](int n) { return fmt::format("{} GPU{}", n, n == 1 ? "" : "s"); };
  std::string held = gpus_text(theirs) + " held by other users' jobs";
  if (yours) held += ", " + gpus_text(yours) + " by your other plans'";
  if (whole && own)
    held += fmt::format("; this plan's own run (holding {}) is left out: the plan is predicted from its beginning "
                        "(--from-state: from where its run is)",
                        gpus_text(own));
  if (waiting)
    held += fmt::format("; their {} waiting job{} placed where the node's fair order starts {}", waiting,
                        waiting == 1 ? " is" : "s are", waiting == 1 ? "it" : "them");
  return fmt::format("shared node {}: {}{}; {} shows every user's jobs\n", dir,
                     who.empty() ? "" : "runs of " + who + "; ", held, hint("status --node"));
}

// The node look of the plan of `paths` on `gpus` (LookAsk::whole as there, `plan_wants` its first
// ready jobs). With `others`, each GPU another run's job holds is named there ("ana's train
// (gpuq, ends ~14:30)").
static NodeLook node_look(const PlanSetup& s, const PlanPaths& paths, const std::vector<int>& gpus, double now,
                          std::map<int, std::string>* others, bool whole, const std::vector<NodeWant>* plan_wants,
                          std::optional<NodeRead> read) {
  NodeLook look;
  if (!read) return look;
  const std::string& dir = read->dir;
  look.dir = dir;
  if (!read->view) {
    look.problem = read->problem;
    look.line = read->folder ? fmt::format("shared node {}: {}; the prediction leaves other users out\n", dir, read->problem)
                             : fmt::format("shared node {}: cannot be read ({}); the prediction leaves other users out\n",
                                           dir, read->problem);
    return look;
  }
  GpuMask node = mask_of(gpus);
  NodeView& v = *read->view;
  look.notes = v.notes;
  // Drained GPUs get no job while they are: the prediction runs on the GPUs left, and says so.
  look.drained = node_drained(v.users);
  if (GpuMask d = drained_mask(look.drained) & node) {
    look.line += drained_prediction_note(d, node) + "\n";
    for (const auto& [g, drain] : look.drained)
      if (others && (node >> g & 1)) (*others)[g] = fmt::format("GPU {} drained ({})", g, drain.why);
  }
  std::error_code ec;
  std::string mine = fs::absolute(paths.plan, ec).lexically_normal().string();
  std::string me = node_user_me();
  // The plan's owner: the user whose run runs it (another user may look at it), else the viewer.
  // The plan is predicted as its own run sees the node, whoever looks: one reason per job.
  std::string owner = me;
  for (const NodeUser& u : v.users)
    for (const NodeRun& r : u.runs)
      if (r.plan == mine && (!r.gone || owner == me)) owner = u.name;
  HeldBy by = note_holds(v.users, node, owner, mine, me, now, look, others);
  const int own = count(by.own);
  look.cap = v.config.limits_of(owner).max_gpus;
  for (const std::string& n : look.notes) look.line += "node: " + n + "\n";
  if (by.users.empty() && !look.cap) {  // alone: the plan's own prediction says it all
    if (whole && own)
      look.line += fmt::format("shared node {}: no other run; this plan's own run (holding {} GPU{}) is left out: the "
                               "plan is predicted from its beginning (--from-state: from where its run is)\n",
                               dir, own, own == 1 ? "" : "s");
    return look;
  }
  if (whole) {  // the plan from its beginning: its run as it would be now, its first ready jobs wanting
    NodeUser* self = nullptr;
    for (NodeUser& u : v.users)
      if (u.name == owner) self = &u;
    if (!self) self = &v.users.emplace_back(NodeUser{owner, 0, now, {}});
    std::erase_if(self->runs, [&](const NodeRun& r) { return r.plan == mine; });
    NodeRun r;
    r.plan = mine;
    if (plan_wants) r.wants = *plan_wants;
    self->runs.push_back(std::move(r));
  }
  // Once for the node: why each of the plan's ready jobs waits, and when the others' waiting jobs
  // are predicted to run: their GPUs are busy in the plan's prediction meanwhile.
  NodeWaits w = node_whys(v.users, node, now, v.config, s.backfill_max_hours, node_room(s, gpus), node_host_of(s, gpus));
  look.waits = waits_of(w, v.users, owner, mine);
  int waiting = 0;
  for (const NodePredicted& p : w.predicted) {
    const NodeUser& u = v.users[p.slot.user];
    if (u.name == owner && u.runs[p.slot.run].plan == mine) continue;
    look.held.push_back({mask_of(p.gpus) & node, p.end, u.name == me, p.start});
    ++waiting;
  }
  look.line += shared_line(dir, by, whole, waiting);
  return look;
}

NodeStatus node_status(const PlanSetup& s) {
  // The node of the plan's run (--plan, $GPUQ_PLAN or ./plan.json, when there is one), unless named.
  PlanSetup g = s;
  g.plan = plan_in_reach(s.plan);
  NodeStatus out;
  std::string dir = g.plan.empty() ? choose_node_dir(s.node_dir) : node_dir_for(s, plan_paths(g));
  if (dir.empty()) {
    out.problem = fmt::format("no node directory (--node-dir DIR, $GPUQ_NODE_DIR, or {} when it exists and you may "
                              "write there)",
                              kDefaultNodeDir);
    out.bad_input = true;
    return out;
  }
  try {
    std::string err;
    std::optional<std::vector<int>> ids = parse_gpu_list(s.gpus.empty() ? "0-7" : s.gpus, &err);
    if (!ids) throw std::runtime_error("--gpus: " + err);
    out.dir = dir;
    out.node = mask_of(*ids);
    ReadFrom from;  // the one read (read.h): the node directory alone
    from.clock = unix_now;
    from.node = [&] { return read_node(dir, out.node); };
    WorldRead w = read_world(from, nullptr);
    if (!w.node->view) {
      out.problem = w.node->what();  // as simulate --node says it
      out.bad_input = w.node->folder;
      return out;
    }
    NodeView& v = *w.node->view;
    out.users = std::move(v.users);
    out.notes = std::move(v.notes);
    out.config = std::move(v.config);
    out.now = w.now;
    out.backfill_max_hours = s.backfill_max_hours;
    out.room = node_room(s, *ids);
    out.host = node_host_of(s, *ids);
    out.unusable = node_dir_problem(dir);
  } catch (const std::exception& e) {
    out.problem = e.what();
  }
  return out;
}

std::string snapshot_problem(const PlanSetup& s, const Plan& plan, const Workdir& wd) {
  const Job* asks = nullptr;
  for (const Job& j : plan.jobs)
    if (uses_snapshot(j, s.snapshot) && (!asks || j.snapshot)) {
      asks = &j;
      if (j.snapshot) break;  // a job's own field names the job; else the setting is named
    }
  if (!asks) return "";
  std::string why;
  GitSnapshots snapshots;
  if (!snapshots.repo_of(absolute_workdir(wd), &why).empty()) return "";
  SettingSource from = s.source_of("snapshot");
  std::string who = asks->snapshot ? fmt::format("job \"{}\" asks for \"snapshot\": \"git\"", asks->id)
                    : from == SettingSource::Flag ? std::string("--snapshot git is given")
                    : from == SettingSource::Run  ? std::string("the running `gpuq run` takes snapshots")
                                                  : std::string("\"settings\" give \"snapshot\": \"git\"");
  return fmt::format("{}: {}, but {}", s.plan, who, why);
}

// The free GPUs as `run` would see them now: not used by a running job, not busy by the reading
// (`probed`, else the probe is asked now); with `others`, why each GPU someone else holds is busy.
// The processes of no gpuq job that the node's runs see idle on GPUs (hoarded GPUs): what their
// entries in the node directory say, or why nothing can be known of how long they sat idle.
static void idle_holders_into(GpusSeen& n, const PlanSetup& s, const std::optional<NodeRead>& read) {
  n.idle_after = s.idle_minutes * 60;
  n.idle_pct = s.idle_util_percent;
  if (!read) {
    n.idle_note = "idle GPU memory: not followed (no node directory: a gpuq run that shares one follows it)";
    n.drain_note = "drained GPUs: none known (no node directory: drains are kept there)";
    return;
  }
  const std::string& dir = read->dir;
  if (!read->view) throw NodeError(read->what());
  const NodeView& v = *read->view;
  n.drained = node_drained(v.users);
  std::vector<std::vector<IdleHolder>> seen;
  for (const NodeUser& u : v.users)
    for (const NodeRun& r : u.runs)
      if (!r.gone) seen.push_back(r.idle_holders);
  n.idle = merge_idle_holders(seen);
  if (seen.empty())
    n.idle_note = fmt::format("idle GPU memory: not followed now (no gpuq run is running on this node, {})", dir);
}

static GpuMask free_now(const State& state, const RunOptions& opt, std::optional<GpuReading> probed,
                        std::map<int, std::string>* others = nullptr) {
  GpuReading reading = probed ? std::move(*probed) : probe_of(opt)->read();
  ReadingSeen seen = see_reading(reading, state, GpuRules{opt.max_used_mib, opt.ignore_process}, mask_of(opt.node_gpus));
  if (others) *others = std::move(seen.others);
  return seen.free;
}

std::optional<GpusLook> look_at_gpus(const PlanSetup& s, std::string* problem) {
  std::string err;
  std::vector<int> ids = parse_gpu_list(s.gpus, &err).value_or(std::vector<int>{});
  RunOptions opt = run_options(s, ids);
  std::optional<Placement> placement = placement_of(s, "auto", ids, problem);
  if (!placement) return std::nullopt;
  std::unique_ptr<GpuProbe> probe = probe_of(opt);
  GpusLook out;
  GpusSeen& n = out.seen;
  // The one read (read.h): the GPUs, and the plan's state, which tells gpuq's jobs' processes from
  // others' (without one every process counts as another's).
  ReadFrom from;
  if (!s.plan.empty())
    from.state = [&]() -> std::optional<State> {
      try {
        return read_state(plan_paths(s));
      } catch (const std::exception& e) {
        out.state_problem = e.what();
        return State{};
      }
    };
  from.clock = unix_now;
  from.gpus = [&] {
    GpuReading r = probe->read();
    n.gpus = ids;  // the GPUs the reading names, else those of --gpus
    if (r.used_mib) {
      GpuMask seen = 0;
      for (auto& [g, mib] : *r.used_mib) seen |= GpuMask{1} << g;
      for (auto& [g, why] : r.lost) seen |= GpuMask{1} << g;
      n.gpus = ids_of(seen);
    }
    return r;
  };
  // The node directory's runs: the idle GPU memory they follow, the drains they keep.
  from.node = [&] { return read_node(choose_node_dir(s.node_dir), mask_of(n.gpus)); };
  WorldRead w = read_world(from, nullptr);
  n.reading = std::move(*w.gpus);
  n.placement = std::move(*placement);
  if (n.placement.kind == Placement::Kind::Auto) n.placement.topology = probe->topology().value_or(Topology{});
  n.placement_line = placement_line(n.placement, mask_of(n.gpus));
  n.foreign = foreign_processes(n.reading, w.state.value_or(State{}), GpuRules{opt.max_used_mib, opt.ignore_process});
  n.now = w.now;
  idle_holders_into(n, s, w.node);
  return out;
}

// Why `run` can start nothing now that a look can see for itself (issue 51, item 5): the state's
// folder read-only, or its disk without room for another state (run saves one before any start).
// Said where the jobs would otherwise read "ready: starts at the next tick".
static std::string state_folder_unwritable(const PlanPaths& paths) {
  std::filesystem::path dir = std::filesystem::path(paths.state).parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return "";
  std::string file = std::filesystem::path(paths.state).filename().string();
  const char* then = "`gpuq run` starts no job until the state can be saved (running jobs go on)";
  if (fs.f_flag & ST_RDONLY) return fmt::format("the folder of {} is read-only: {}", file, then);
  struct stat st {};
  double need = (::stat(paths.state.c_str(), &st) == 0 ? static_cast<double>(st.st_size) : 0) + 4096;
  double free_bytes = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
  if (free_bytes < need)
    return fmt::format("the disk holding {} is full ({:.0f} bytes free, a state takes {:.0f}): {}", file, free_bytes,
                       need - 4096, then);
  return "";
}

// The plan as the look takes it: the file's, else (an edit with errors) the version asked
// for, or the running run's own while it goes on with it (said in kept_note).
// What a plan as loaded depends on: the plan file (its device, inode, size and modification
// time), the run's file, and whether a run holds the plan (its settings come before the plan's).
static std::string plan_key(const PlanSetup& s) {
  auto stamp = [](const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::string("-");
    return fmt::format("{}:{}:{}:{}.{}", st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  };
  PlanPaths paths = paths_for(s.plan, s.state_dir);
  return stamp(s.plan) + "|" + stamp(paths.run_info) + "|" + (run_presence(paths).running ? "run" : "-");
}

static void load_look_plan(PlanSetup& s, const LookAsk& ask, Look& l) {
  PlanCache* cache = ask.plan_cache;
  // Taken before the load: a file changed during it is loaded again the next time.
  std::string key = cache ? plan_key(s) : "";
  if (cache && !cache->key.empty() && cache->key == key) {
    s = cache->setup;
    l.report = cache->report;
  } else {
    const std::string given_state_dir = s.state_dir;
    l.report = load_plan_report(s);
    // Kept only where the run's file is where the key looked (the plan's settings name no other state folder).
    if (cache) *cache = l.report.plan && s.state_dir == given_state_dir ? PlanCache{key, s, l.report} : PlanCache{};
  }
  l.paths = plan_paths(s);
  if (l.report.plan) {
    l.plan = std::move(l.report.plan);
    l.gpus = l.report.gpus;
  } else if (l.report.bad_gpus.empty() && l.report.not_a_plan.empty()) {
    // An edit with errors: the version asked for, else the run's own while a run goes on with it.
    if (std::optional<std::vector<int>> ids = gpu_ids(s, nullptr)) {
      if (ask.plan_when_broken) {
        l.plan = *ask.plan_when_broken;
        l.kept_note = "the plan file does not load; the last version that did is shown";
      } else if (ask.run_plan_when_broken && (l.plan = plan_run_goes_on_with(l.paths, *ids))) {
        l.kept_note = "the plan file does not load; the running `gpuq run` goes on with the version it loaded";
      }
      if (l.plan) l.gpus = *ids;
    }
  }
}

// The GPUs free for the plan's jobs: the reading as run's next tick reads it (gpu_use.h's
// read_gpus, the tick's own), the GPUs it makes busy and who holds them, and where jobs pack the GiB per GPU
// beyond their declared; without a probe, those the state leaves.
static void see_gpus(Look& l, const Plan& plan, std::optional<GpuReading> reading, const LookAsk& ask) {
  if (!ask.probe) {
    l.free = ask.state ? free_now(l.state, l.opt, GpuReading{}) : mask_of(l.gpus);
    return;
  }
  GpuReading none;
  const GpuReading& r = reading ? *reading : none;
  ReadingSeen seen = read_gpus(r, l.state, plan, l.opt, GpuRules{l.opt.max_used_mib, l.opt.ignore_process},
                               mask_of(l.opt.node_gpus), packs(plan, l.opt));
  if (seen.memory) {
    l.mem_other = std::move(seen.memory->other);
    l.over = std::move(seen.memory->over);
  }
  l.free = seen.free;
  l.others = std::move(seen.others);
  l.reading = std::move(reading);
  name_removed_holders(plan, l.state, l.others);
  name_ending_holders(l.state, l.others);
}

// The shared node as this plan's runs see it: every user's holds and wants, the cap, and when
// each of the plan's waiting jobs may start on it (with its jobs ready at its beginning, for
// a look from the beginning).
static void see_node(Look& l, const PlanSetup& s, const Plan& plan, const LookAsk& ask, std::optional<NodeRead> read) {
  std::vector<NodeWant> first;  // the plan's jobs ready at its beginning, in ready order
  const bool host = l.opt.counts_host(plan);
  if (ask.whole)
    for (uint32_t j : plan.by_rank) {
      const Job& job = plan.jobs[j];
      if (job.deps.empty() && job.gpus > 0)
        first.push_back(node_want(job, l.opt.packed_gib(job),
                                  host ? HostNeed{job.mem_gib, static_cast<uint16_t>(std::min(l.opt.cpus_of(job), 65535))}
                                       : HostNeed{}));
      if (first.size() == kNodeMaxWants) break;  // as many as a run publishes
    }
  l.node = node_look(s, l.paths, l.gpus, l.now, ask.probe ? &l.others : nullptr, ask.whole, &first, std::move(read));
  l.opt.max_gpus = l.node.cap;
  l.on_node.held = l.node.held;
  for (const auto& [id, w] : l.node.waits)
    if (const Job* j = plan.find(id); j && w.kind == NodeWhy::Kind::Later)
      l.on_node.not_before.push_back({static_cast<size_t>(j - plan.jobs.data()), w.start});
}

// The plan file is one the run's batch queue refuses: the version the run goes on with.
static void take_run_plan(Look& l, const Backend& backend) {
  if (std::optional<Plan> kept = plan_run_goes_on_with(l.paths, l.gpus)) {
    l.plan = std::move(kept);
    l.kept_note = fmt::format("the plan file is one run {} refuses; it goes on with the version it loaded",
                              backend.run_flag());
  }
}

// The settings as run's options: its folder, its placement (with the topology, where it places by
// it), and paused (the prediction starts nothing new: outlook.h). BadLook for a bad --pairs.
static RunOptions look_options(const PlanSetup& s, const LookAsk& ask, const Look& l, const Plan& plan,
                               const std::optional<Probed>& probed, bool paused) {
  RunOptions opt = run_options(s, l.gpus);
  opt.workdir = workdir_of(s, plan.workdir).path;
  std::string pairs_err;
  std::optional<Placement> placement = placement_of(s, ask.pairs_default, l.gpus, &pairs_err);
  if (!placement) throw BadLook(pairs_err);
  opt.placement = std::move(*placement);
  opt.paused = ask.run && paused;
  if (opt.placement.kind == Placement::Kind::Auto) {
    std::optional<Topology> t = probed ? probed->topology : probe_of(opt)->topology();
    opt.placement.topology = t.value_or(Topology{});
  }
  return opt;
}

// The state, and when it was read: the look's `now` (a job that starts while the look probes
// and loads the plan is seen as it was then, not as waiting at a later now).
using StateRead = std::pair<State, double>;
static StateRead read_at(const PlanPaths& paths) {
  State st = read_state(paths);
  return StateRead{std::move(st), unix_now()};
}

// What a look started reading before it loaded the plan, each on a core of its own.
struct Meanwhile {
  std::future<StateRead> state;
  std::future<Probed> probe;
};

// The one read (read.h), run's tick's own: the state as run's next tick will have it (the jobs
// that ended, in memory only: a look changes nothing, fix 13; seen by the launcher they run
// under, Slurm's for jobs in its queue), the GPUs as the probe read them (`probed`, with the
// topology), the pause. `given`: the flags and variables alone, before the plan's settings.
static WorldRead read_look(Look& l, const PlanSetup& s, const PlanSetup& given, const LookAsk& ask, Meanwhile& m,
                           std::optional<Probed>& probed) {
  if (ask.state && l.paths.state != paths_for(given.plan, given.state_dir).state) {
    // The settings (the plan's, the run's) may name another state folder than the one read
    // before the plan was: that one is read instead.
    try {
      m.state.get();
    } catch (const std::exception&) {  // not this plan's state
    }
    m.state = std::async(std::launch::deferred, [paths = l.paths] { return read_at(paths); });
  }
  std::optional<double> read_time;
  std::unique_ptr<Backend> seen_through;
  std::unique_ptr<Launcher> seer;
  ReadFrom from;
  // The state's read is waited for first: a damaged state is said at once, not after a slow
  // nvidia-smi (get() rethrows its error).
  std::optional<StateRead> read;
  if (ask.state) {
    read = m.state.get();
    read_time = read->second;
    phase("read state (the rest of it)");
    from.state = [&]() -> std::optional<State> { return std::move(read->first); };
  }
  from.clock = [&] { return read_time.value_or(unix_now()); };
  if (ask.state && ask.refresh)
    from.launcher = [&](const State& st) {
      static const Plan none;
      seen_through = backend_in_use(&st, nullptr);
      seer = seen_through->launcher(none, l.paths);
      return seer.get();
    };
  if (ask.probe)
    from.gpus = [&] {
      probed = m.probe.get();
      if (probe_asked(s, ask.pairs_default) != probe_asked(given, ask.pairs_default)) probed.reset();
      return probed ? probed->reading : GpuReading{};
    };
  if (ask.run) from.paused = [&] { return paused_since(l.paths); };
  // The node directory: every run on it, for the prediction beside them (simulate: its drains).
  from.node = [&] { return read_node(ask.node ? look_node_dir(s, l.paths) : node_dir_for(s, l.paths), mask_of(l.gpus)); };
  WorldRead w = read_world(from, nullptr);
  l.now = w.now;
  if (w.state) l.state = std::move(*w.state);
  if (ask.state) {  // as the state file has them (a job no longer in the plan that runs there is said so)
    for (std::string& line : unknown_entry_lines(*l.plan, l.paths, l.state)) l.warnings.push_back(std::move(line));
    if (std::string full = state_folder_unwritable(l.paths); !full.empty()) l.warnings.push_back("warning: " + full);
  }
  if (seer) {
    settle_alone(w.jobs, l.state, l.now);
    l.queue = seen_through->queue_view(*seer, l.state);
    phase("refresh");
  }
  return w;
}

Look look_at(PlanSetup& s, const LookAsk& ask) {
  Look l;
  phase("start");
  // The state is read on a second core while this one reads the plan (bench/run.sh measured the
  // difference), and the GPUs are probed on a third. The state's errors wait for the plan's
  // (get() rethrows them), so a bad plan is still reported first and alone.
  const PlanSetup given = s;  // the flags and variables alone
  Meanwhile m;
  if (ask.probe) m.probe = probe_meanwhile(run_options(s, {}), std::get<2>(probe_asked(s, ask.pairs_default)));
  if (ask.state) m.state = on_another_core([paths = plan_paths(s)] { return read_at(paths); });
  load_look_plan(s, ask, l);
  if (!l.plan) return l;
  // An edit the run's backend refused (a batch queue's): the run's own version too.
  std::optional<RunInfo> info = read_run_info(l.paths);
  std::unique_ptr<Backend> backend = backend_in_use(nullptr, info ? &*info : nullptr,
                                                    BatchAsk{{}, {}, {}, {}, 1.5, 200, s.gpu_mem_gib, s.gpu_mem_headroom});
  if (l.kept_note.empty() && backend->batch() && !backend->plan_problem(*l.plan, true).empty())
    take_run_plan(l, *backend);
  const Plan& plan = *l.plan;
  if (std::string split = state_beside_link_problem(l.paths); !split.empty()) l.warnings.push_back("warning: " + split);
  phase("load plan");
  std::optional<Probed> probed;
  WorldRead w = read_look(l, s, given, ask, m, probed);
  l.opt = look_options(s, ask, l, plan, probed, w.paused.has_value());
  see_gpus(l, plan, probed ? std::optional<GpuReading>(std::move(w.gpus)) : std::nullopt, ask);
  if (ask.node) see_node(l, s, plan, ask, std::move(w.node));
  else if (w.node && w.node->view) l.node.drained = node_drained(w.node->view->users);  // simulate: the drains alone
  // Drained GPUs get no job: the prediction runs on the GPUs left (a job running on one keeps it
  // until its predicted end; one wider than the GPUs left can never start while they are drained).
  if (GpuMask d = drained_mask(l.node.drained) & mask_of(l.opt.node_gpus)) {
    std::erase_if(l.opt.node_gpus, [&](int g) { return (d >> g & 1) != 0; });
    l.free &= ~d;
  }
  if (ask.run) look_at_run(l.paths, l.gpus, *backend, l);
  if (ask.snapshots && ask.state) l.stale_text = stale_snapshot_notes(plan, l.state, l.now, l.paths, l.stale_commits);
  l.settings_notes = settings_notes(s, ask.pairs_default);
  return l;
}

Outlook outlook_of(const Look& l, const LookAsk& ask, const Plan* learned) {
  const Plan& plan = learned ? *learned : *l.plan;
  Outlook o = make_outlook(plan, l.state, l.opt, l.now, l.free, LocalFiles(l.opt.workdir),
                           ask.rows ? std::optional<size_t>(kOutlookRows) : std::nullopt, l.others, l.mem_other,
                           l.on_node);
  for (const auto& [id, w] : l.node.waits)
    if (const Job* j = plan.find(id)) o.node_reasons[static_cast<size_t>(j - plan.jobs.data())] = w;
  // The reasons as they are for the run that is (or is not) going: none starts anything, and
  // a run on an older plan does not know the jobs added since.
  o.run.known = ask.run;
  o.run.running = l.run.running;
  o.run.plan_loaded_at = l.run.plan_loaded_at;
  if (l.run.running && l.run_ids)
    for (JobView& v : o.jobs)
      if (v.status == "pending" && !l.run_ids->count(plan.jobs[v.job].id)) v.not_in_run_plan = true;
  for (JobView& v : o.jobs)
    if (auto r = l.queue.reasons.find(plan.jobs[v.job].id); v.queued && r != l.queue.reasons.end())
      o.queue_reasons[v.job] = r->second;
  o.stale_snapshots = l.stale_commits;
  return o;
}

LiveStart live_start_of(const Look& l, const Plan& plan) {
  RunOptions ro = l.opt;
  ro.max_gpus.reset();  // the cap is the simulation's (SimOptions::max_gpus)
  return live_start(plan, l.state, ro, l.now, l.free, LocalFiles(ro.workdir), {}, OnNode{l.node.held, {}});
}

}  // namespace gpuq
