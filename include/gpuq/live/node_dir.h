// The node directory: several users' runs on one node share its GPUs through it, without a
// daemon. Each user has one file there, DIR/USER.json, that only they write (the file's owner
// is the proof of whose it is); a node lock (flock on DIR/.lock) makes each run's look, decision
// and publication one step.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuq/core/events.h"
#include "gpuq/core/node.h"
#include "gpuq/core/notices.h"

namespace gpuq {

/// The node directory cannot be used (its lock, a read, a write): what, on what, and why.
struct NodeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The default node directory, created by the Debian package for group gpuq.
inline constexpr const char* kDefaultNodeDir = "/var/lib/gpuq";
/// The node config when the node directory has no node.json (core/node.h NodeConfig).
inline constexpr const char* kEtcNodeConfig = "/etc/gpuq/node.json";

/// The node directory to use: `flag` (--node-dir) if given, else $GPUQ_NODE_DIR, else
/// /var/lib/gpuq when it exists and this user may write there, else this user's own
/// (own_node_dir, made when missing), so that their runs on this machine never start two jobs
/// on one GPU; "" when none ("off" given either way, or no own one can be made): the run is alone.
std::string choose_node_dir(const std::string& flag);

/// The node directory of this user alone, where no shared one is set up: their runs on this
/// machine share its GPUs through it. $XDG_STATE_HOME (else ~/.local/state) /gpuq/node-HOST: the
/// machine's name in it, since a home folder is often shared by several machines. Made (0700) by
/// choose_node_dir; "" when this user has no home folder.
std::string own_node_dir();

/// The name this process's user has in the node directory (their file is NAME.json).
std::string node_user_me();

/// Why the node directory `dir` (chosen by choose_node_dir; "" is none) cannot be used by this
/// user: missing, not a folder, or not theirs to write, each with what to do; "" when it can.
/// A run with a node directory it cannot use would start no GPU job at all.
std::string node_dir_problem(const std::string& dir);

/// What the node directory holds, read and checked: every user's file that could be used, and
/// a line for each file or claim refused or reaped.
struct NodeView {
  std::vector<NodeUser> users;       ///< in name order; claims of ended processes left out
  std::vector<std::string> notes;    ///< "bo.json refused: ...", "bo's claim for X reaped: ..."
  NodeConfig config;
};

/// Reads DIR's user files: each opened without following links, a regular file owned by the
/// user it is named after, of at most 4 MiB, read as a user file (node.h) against `node`.
/// Runs whose process has ended lose their wants; holds whose process has ended are left out
/// (a claim of a run that ended is reaped with a line). Never throws for one file.
/// The claims of `own_user`'s run of `own_plan` (the reading run's own entry) are reaped without a
/// line: that run sees its own jobs end (a restarted run read its old entry's ended jobs as news).
NodeView read_node_dir(const std::string& dir, GpuMask node, std::string_view own_user = {},
                       std::string_view own_plan = {});

/// A run's share of the node: the node lock, the decision, and its entry in its user's file.
class NodeShare {
 public:
  using Say = std::function<void(const std::string&)>;
  /// `plan`: the plan's absolute path (its run's key in the user's file).
  NodeShare(std::string dir, std::string plan, GpuMask node, Placement placement, double backfill_max_hours);
  ~NodeShare();

  /// Takes the node lock (waiting up to `timeout` seconds), reads the node and decides. Returns
  /// the GPUs this run may not start on now: every GPU but those the decision gives its `wants`
  /// (at the first call, every GPU: its wants are published first, so that runs started
  /// together share from the start).
  /// `holds`, when given, are this run's holds now (its running jobs, those that have ended but
  /// are not yet reaped too): the decision counts them rather than those its last publish wrote.
  /// Throws NodeError (the lock not taken: the caller starts no job on a GPU).
  GpuMask enter(double now, const std::vector<NodeWant>& wants, GpuMask free, const Say& say, double timeout = 30,
                const std::vector<NodeHold>* holds = nullptr) {
    return enter(read(timeout), now, wants, free, say, holds);
  }

  /// enter's two halves (run's node_enter stamps its tick from after a wait for the lock, between
  /// them): `read` takes the node lock (waiting up to `timeout` seconds; NodeError when it cannot,
  /// or the folder cannot be read, the lock not kept) and reads every user's file, as a look's
  /// read_node (read.h) reads them without the lock; the lock is kept until publish or leave.
  /// `enter(view, ...)` decides on what it read.
  NodeView read(double timeout = 30);
  GpuMask enter(NodeView v, double now, const std::vector<NodeWant>& wants, GpuMask free, const Say& say,
                const std::vector<NodeHold>* holds = nullptr);

  /// Writes this run's entry (its holds and its wants now) into its user's file, with its usage
  /// accounted, then lets the node lock go. Throws NodeError when the file cannot be written.
  /// `idle`: the processes of no gpuq job this run sees idle on GPUs (reported to every reader).
  void publish(double now, std::vector<NodeHold> holds, std::vector<NodeWant> wants, std::vector<IdleHolder> idle = {});

  /// The plan's attempts as its event log tells them: at the first enter, the user's usage is at
  /// least what they charge (usage_of_attempts), so that a node file lost or removed does not
  /// start the user again from nothing. Said when it raises the usage.
  void charge_at_least(std::vector<Attempt> past) { past_ = std::move(past); }

  /// Lets the node lock go (without publishing).
  void leave();

  /// Several jobs on one GPU: the GiB each GPU offers packed jobs (the run's Policy::gpu_room per
  /// GPU id), for the decisions from now on. None given: wants that pack take GPUs whole.
  void set_room(NodeRoom room) { room_ = std::move(room); }
  /// The node's cores and host memory for jobs (the run's node_cpus and node_mem_gib): the decision
  /// starts a want only where what it needs of them fits beside every run's holds, and preempts for
  /// it only what lets it start. Not given: decided on GPUs alone.
  void set_host(HostRoom host) { host_ = host; }
  /// This user's cap in the node config (max_gpus), as the last enter read it.
  std::optional<int> cap() const { return config_.limits_of(me_).max_gpus; }
  /// The node directory is this user's own (own_node_dir): the first enter decides at once. (On a
  /// shared node the enters of the node config's window_seconds from the first only make the run's
  /// wants known, so that users' runs started together are decided together.)
  void decide_at_first_look() { first_ = false, own_ = true; }
  /// While the run's wants wait for runs that may start with it (the window): when its first
  /// decision comes. None once it has decided.
  std::optional<double> deciding_at() const { return deciding_at_; }
  /// The GiB other runs' packed holds declared on each GPU (by GPU id), as the last enter read
  /// them: on a GPU given to this run's packed jobs, its engine's room is less by at least that.
  const std::vector<double>& others_packed() const { return others_packed_; }
  /// The cores and host memory other runs' jobs hold, as the last enter read them: this run's
  /// engine counts them taken, and pins its jobs apart from their cores.
  const HostTaken& others_host() const { return others_host_; }

  /// This run's holds the last decision preempts for another user's want: (the job's id, whose
  /// want: "bo's eval"). The run stops each (its own preemption), and publishes it `preempting`.
  const std::vector<std::pair<std::string, std::string>>& preempts() const { return preempts_; }

  const std::string& dir() const { return dir_; }
  /// The GPUs drained on the node, as the last enter read every user's records (node_drained),
  /// with this run's own records since (drain()). The decision gives none of them a job.
  const std::map<int, GpuDrain>& drained() const { return drained_; }
  /// The GPUs whose newest record, as the last enter read them, is an undrain, with it.
  const std::map<int, GpuDrain>& undrains() const { return undrains_; }
  /// A drain record of this run's (a fault it read): written with its next publish, into this
  /// user's file, where every run reads it; drained() has it at once.
  void drain(GpuDrain record);
  /// The other users' files the last enter read: a run whose jobs wait for GPUs wakes when one is
  /// replaced (their run published: a job of theirs ended, or their wants changed).
  const std::vector<std::string>& others_files() const { return others_files_; }

 private:
  void raise_usage(NodeUser& me, double usage, double now, const char* source, const Say& say);
  std::vector<NodeRun>::iterator own_entry(NodeUser& me, double now, const Say& say);
  GpuMask decide(const std::vector<NodeUser>& users, GpuMask free, double now, const Say& say);

  std::string dir_, plan_, me_;
  GpuMask node_;
  Placement placement_;
  double backfill_;
  int lock_fd_ = -1;
  Notices told_;                     // the notes said (once each)
  std::optional<NodeUser> mine_;     // this user's file as read at enter
  NodeConfig config_;
  std::vector<std::string> others_files_;
  HostTaken others_host_;
  HostRoom host_ = kHostUncounted;
  std::optional<std::vector<NodeHold>> published_;  // this run's holds as it last wrote them
  std::vector<std::pair<std::string, std::string>> preempts_;  // preempts()
  bool first_ = true;
  bool own_ = false;                   // decide_at_first_look
  std::optional<double> arrived_;      // the first enter's now
  std::optional<double> deciding_at_;  // while in the window: arrived_ + window_seconds
  std::optional<std::vector<Attempt>> past_;  // charge_at_least's, until the first enter takes it
  struct Written {
    NodeRun run;                   // this run's entry as it last wrote it
    double usage = 0, usage_at = 0;  // and its user's usage then
  };
  std::optional<Written> written_;  // what enter puts back when the file lost the entry
  NodeRoom room_;
  std::vector<double> others_packed_;
  std::map<int, GpuDrain> drained_;   // drained()
  std::map<int, GpuDrain> undrains_;  // undrains()
  std::vector<GpuDrain> to_drain_;    // drain()'s records not yet written
};

/// Sets this user's drain record of a GPU in the node directory `dir` (gpuq drain, undrain): under
/// the node lock, in their file (made if missing), written whole or not at all. Returns the
/// node's drained GPUs as they were before it (to say what it changed). Throws NodeError.
std::map<int, GpuDrain> write_drain(const std::string& dir, GpuMask node, GpuDrain record);

/// The node's drained GPUs as the files of `dir` say now (read without the lock: each file is
/// replaced whole). None where `dir` is "" or cannot be read.
std::map<int, GpuDrain> read_drained(const std::string& dir, GpuMask node);

}  // namespace gpuq
