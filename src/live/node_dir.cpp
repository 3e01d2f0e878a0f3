// The node directory: the users' files read and checked, the node lock, this run's entry.
#include "gpuq/live/node_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gpuq/core/local_time.h"
#include "gpuq/core/suggest.h"
#include "gpuq/live/commands.h"
#include "gpuq/live/proc.h"

namespace gpuq {

namespace {

constexpr off_t kMaxUserFile = 4 << 20;

std::optional<uid_t> uid_of(const std::string& name) {
  struct passwd* pw = getpwnam(name.c_str());
  if (!pw) return std::nullopt;
  return pw->pw_uid;
}

std::string name_of(uid_t uid) {
  struct passwd* pw = getpwuid(uid);
  return pw ? std::string(pw->pw_name) : fmt::format("uid {}", uid);
}

// The text of DIR/NAME as a file `owner` owns (`who`: how the owner is named in `why`) and no one
// else may write (its owner is the proof of who wrote it), or why not.
std::optional<std::string> read_owned(const std::string& path, uid_t owner, const char* who, std::string* why) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why = errno == ELOOP ? "it is a symbolic link" : fmt::format("open: {}", std::strerror(errno));
    return std::nullopt;
  }
  struct stat st{};
  std::string text;
  if (fstat(fd, &st) != 0) {
    *why = fmt::format("fstat: {}", std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    *why = "it is not a regular file";
  } else if (st.st_uid != owner) {
    *why = fmt::format("it is owned by {}, not by {}", name_of(st.st_uid), who);
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    *why = fmt::format("others than its owner may write it (mode {:o}; chmod go-w)", st.st_mode & 07777);
  } else if (st.st_size > kMaxUserFile) {
    *why = fmt::format("it is {} bytes, more than a user file can be", st.st_size);
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    ssize_t n = read(fd, text.data(), text.size());
    if (n < 0) *why = fmt::format("read: {}", std::strerror(errno));
    else text.resize(static_cast<size_t>(n));
  }
  close(fd);
  if (!why->empty()) return std::nullopt;
  return text;
}

std::string group_name(gid_t gid) {
  struct group* g = getgrgid(gid);
  return g ? std::string(g->gr_name) : fmt::format("{}", gid);
}

bool alive(long long pid, unsigned long long start) {
  if (pid <= 1) return false;
  return process_alive(pid, start ? std::optional<unsigned long long>(start) : std::nullopt);
}

// The node config: DIR/node.json, else /etc/gpuq/node.json; a file root owns. One that cannot
// be used is named, and the node's defaults are used.
NodeConfig read_config(const std::string& dir, std::vector<std::string>& notes) {
  std::string path = dir + "/node.json", why;
  if (access(path.c_str(), F_OK) != 0) path = kEtcNodeConfig;
  if (access(path.c_str(), F_OK) != 0) return {};
  std::optional<std::string> text = read_owned(path, uid_t{0}, "root", &why);
  std::optional<NodeConfig> c;
  if (text) c = read_node_config(*text, &why);
  if (!c) {
    notes.push_back(fmt::format("{} refused: {}; the node's defaults are used", path, why));
    return {};
  }
  // The node's people, for a typo's "did you mean": users with a home under /home or a login
  // shell, not system accounts ("dan" is not a typo of "man", issue 51).
  std::vector<std::string> known;
  auto person = [](const struct passwd* pw) {
    std::string_view home = pw->pw_dir ? pw->pw_dir : "", shell = pw->pw_shell ? pw->pw_shell : "";
    bool no_login = shell.empty() || shell.ends_with("/nologin") || shell.ends_with("/false") || shell == "/bin/sync";
    return home.starts_with("/home/") || (!no_login && pw->pw_uid >= 1000);
  };
  for (const auto& [name, limits] : c->users)
    if (!uid_of(name)) {
      if (known.empty()) {
        setpwent();
        while (struct passwd* pw = getpwent())
          if (person(pw)) known.emplace_back(pw->pw_name);
        endpwent();
      }
      std::vector<std::string_view> names(known.begin(), known.end());
      notes.push_back(fmt::format("{}: \"users\".\"{}\": no user {} on this node{}", path, name, name,
                                  did_you_mean(name, names)));
    }
  return *c;
}

// Writes `text` as DIR/USER.json: a temporary file synced, then renamed over it. The problem, or "".
std::string write_user_file(const std::string& dir, const std::string& user, const std::string& text) {
  std::string path = dir + "/" + user + ".json";
  std::string tmp = fmt::format("{}/.{}.json.{}.tmp", dir, user, getpid());
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  std::string err;
  if (fd < 0) return fmt::format("open({}) failed: {}", tmp, std::strerror(errno));
  fchmod(fd, 0644);
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    err = fmt::format("write({}) failed: {}", tmp, std::strerror(errno));
  // Synced before the rename: after a power cut the file is this version or the last, never an
  // empty or cut one that would leave the user's runs and usage uncounted. (The folder is not
  // synced: the last version, come back, is a whole one.)
  else if (fdatasync(fd) != 0)
    err = fmt::format("fdatasync({}) failed: {}", tmp, std::strerror(errno));
  close(fd);
  if (err.empty() && rename(tmp.c_str(), path.c_str()) != 0)
    err = fmt::format("rename({}, {}) failed: {}", tmp, path, std::strerror(errno));
  if (!err.empty()) unlink(tmp.c_str());
  return err;
}

// Takes the node lock of `dir` (waiting up to `timeout` s): its descriptor. Throws NodeError.
int take_node_lock(const std::string& dir, double timeout) {
  std::string lock = dir + "/.lock";
  int fd = open(lock.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
  if (fd < 0) throw NodeError(fmt::format("open({}) failed: {}", lock, std::strerror(errno)));
  struct stat st{};
  if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 0777) != 0666) fchmod(fd, 0666);
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int err = errno;
      close(fd);
      throw NodeError(fmt::format("flock({}) failed: {}", lock, std::strerror(err)));
    }
    if (std::chrono::steady_clock::now() > until) {
      close(fd);
      throw NodeError(fmt::format("the node lock {} was held for more than {:g} s", lock, timeout));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fd;
}

}  // namespace

std::map<int, GpuDrain> write_drain(const std::string& dir, GpuMask node, GpuDrain record) {
  int fd = take_node_lock(dir, 30);
  std::map<int, GpuDrain> before;
  std::string err;
  try {
    NodeView v = read_node_dir(dir, node);
    before = node_drained(v.users);
    std::string me = name_of(geteuid());
    NodeUser mine{me, 0, record.at, {}, {}};
    for (const NodeUser& u : v.users)
      if (u.name == me) mine = u;
    // A file of this user's that was refused is not written over: its runs and usage would be lost.
    std::string path = dir + "/" + me + ".json";
    if (std::none_of(v.users.begin(), v.users.end(), [&](const NodeUser& u) { return u.name == me; }) &&
        access(path.c_str(), F_OK) == 0)
      for (const std::string& n : v.notes)
        if (n.starts_with(path)) err = fmt::format("{} (it is left as it is: fix or remove it first)", n);
    record.by = me;
    if (err.empty()) {
      set_drain_record(mine.drains, std::move(record));
      err = write_user_file(dir, me, write_node_user(mine));
    }
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  if (!err.empty()) throw NodeError(err);
  return before;
}

std::map<int, GpuDrain> read_drained(const std::string& dir, GpuMask node) {
  if (dir.empty()) return {};
  try {
    return node_drained(read_node_dir(dir, node).users);
  } catch (const NodeError&) {
    return {};
  }
}

int drain_gpu(const PlanSetup& s, int g, bool drain, std::string why, const SayLine& out, const SayLine& err) {
  const char* cmd = drain ? "drain" : "undrain";
  std::string problem;
  std::optional<std::vector<int>> ids = parse_gpu_list(s.gpus, &problem);
  if (!ids) {
    err(fmt::format("gpuq {}: {}", cmd, problem));
    return 2;
  }
  std::string dir = choose_node_dir(s.node_dir);
  const GpuMask all = ~GpuMask{0};
  std::map<int, GpuDrain> before = read_drained(dir, all);
  // A GPU drained already may be undrained whatever --gpus says (a 16-GPU node, no plan given).
  if (std::find(ids->begin(), ids->end(), g) == ids->end() && (drain || !before.count(g))) {
    err(fmt::format("gpuq {}: GPU {} is not one of this node's GPUs ({}; --gpus or the plan's \"gpus\" say which)", cmd,
                    g, s.gpus));
    return 2;
  }
  while (!why.empty() && std::isspace(static_cast<unsigned char>(why.back()))) why.pop_back();
  if (drain && why.empty()) {
    err("gpuq drain: --why TEXT is needed: every user of the node sees it (\"fan failing\", \"Xid 79 twice today\")");
    return 2;
  }
  if (dir.empty()) {
    err(fmt::format("gpuq {}: no node directory (--node-dir off, or none can be made): a drain is kept there, where "
                    "every run on the node reads it",
                    cmd));
    return 2;
  }
  if (std::string p = node_dir_problem(dir); !p.empty()) {
    err(fmt::format("gpuq {}: {}", cmd, p));
    return 1;
  }
  const double now = unix_now();
  if (!drain && !before.count(g)) {
    err(fmt::format("gpuq undrain: GPU {} is not drained (nothing changed; `gpuq gpus` shows the drained ones)", g));
    return 1;
  }
  try {
    before = write_drain(dir, all, GpuDrain{g, drain, now, why, {}, false});
  } catch (const std::exception& e) {  // the lock, a read, the write (a full disk), a --why not UTF-8
    err(fmt::format("gpuq {}: {}; nothing changed", cmd, e.what()));
    return 1;
  }
  auto was = before.find(g);
  std::string earlier = was == before.end() ? "" : drain_text(was->second, local_time(was->second.at, now));
  if (!drain) {
    out(fmt::format("GPU {} undrained (it was: {}): jobs may start on it again, from each run's next tick", g, earlier));
    return 0;
  }
  if (!earlier.empty()) out(fmt::format("GPU {} was drained already ({}); the reason is now yours", g, earlier));
  out(fmt::format("GPU {} drained: {}. No new job starts on it in any user's run on this node ({}); jobs running on it "
                  "go on. `gpuq undrain {}` gives it back.",
                  g, why, dir, g));
  return 0;
}

void NodeShare::drain(GpuDrain record) {
  record.by = me_;
  drained_[record.gpu] = record;
  to_drain_.push_back(std::move(record));
}

std::string choose_node_dir(const std::string& flag) {
  std::string dir = flag;
  if (dir.empty())
    if (const char* env = std::getenv("GPUQ_NODE_DIR")) dir = env;
  if (dir == "off") return "";
  if (!dir.empty()) return dir;
  struct stat st{};
  if (stat(kDefaultNodeDir, &st) == 0 && S_ISDIR(st.st_mode) && access(kDefaultNodeDir, W_OK | X_OK) == 0)
    return kDefaultNodeDir;
  // No shared one: the user's own, so that two plans of theirs do not both take GPUs 0 and 1.
  std::string own = own_node_dir();
  if (own.empty()) return "";
  for (size_t at = 1; at <= own.size(); ++at)
    if (at == own.size() || own[at] == '/') ::mkdir(own.substr(0, at).c_str(), 0700);  // EEXIST: there already
  if (stat(own.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || access(own.c_str(), W_OK | X_OK) != 0) return "";
  return own;
}

std::string own_node_dir() {
  std::string state;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && x[0] == '/') {
    state = x;
  } else {
    const char* home = std::getenv("HOME");
    if (!home || !*home)
      if (struct passwd* pw = getpwuid(geteuid())) home = pw->pw_dir;
    if (!home || !*home) return "";
    state = std::string(home) + "/.local/state";
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) std::strcpy(host, "localhost");
  std::string name = host;
  std::replace(name.begin(), name.end(), '/', '_');
  while (state.size() > 1 && state.back() == '/') state.pop_back();
  return state + "/gpuq/node-" + name;
}

std::string node_user_me() { return name_of(geteuid()); }

std::string node_dir_problem(const std::string& dir) {
  if (dir.empty()) return "";
  struct stat st{};
  if (stat(dir.c_str(), &st) != 0)
    return fmt::format("the node directory {}: {} (the admin makes it: install -d -m 3775 -g gpuq {}; "
                       "--node-dir off runs alone)",
                       dir, std::strerror(errno), dir);
  if (!S_ISDIR(st.st_mode)) return fmt::format("the node directory {} is not a folder", dir);
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    std::string why = std::strerror(errno);
    if (st.st_gid == 0)
      return fmt::format("the node directory {}: you may not write there ({}; the admin gives it to a group of the "
                         "node's users: chgrp gpuq {} && chmod 3775 {}; --node-dir off runs alone)",
                         dir, why, dir, dir);
    return fmt::format("the node directory {}: you may not write there ({}; the admin adds you to its group: "
                       "usermod -aG {} $USER, then log in again; --node-dir off runs alone)",
                       dir, why, group_name(st.st_gid));
  }
  return "";
}

NodeView read_node_dir(const std::string& dir, GpuMask node, std::string_view own_user, std::string_view own_plan) {
  NodeView v;
  v.config = read_config(dir, v.notes);
  DIR* d = opendir(dir.c_str());
  if (!d) throw NodeError(fmt::format("opendir({}) failed: {}", dir, std::strerror(errno)));
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n[0] != '.' && n.ends_with(".json") && n != "node.json") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& file : names) {
    std::string user = file.substr(0, file.size() - 5), why;
    std::optional<uid_t> uid = uid_of(user);
    if (!uid) {
      v.notes.push_back(fmt::format("{}/{} refused: no user {} on this node", dir, file, user));
      continue;
    }
    std::optional<std::string> text = read_owned(dir + "/" + file, *uid, "the user it is named after", &why);
    std::vector<std::string> refused;
    std::optional<NodeUser> u;
    if (text) u = read_node_user(*text, user, node, &why, &refused);
    if (!u) {
      v.notes.push_back(fmt::format("{}/{} refused: {}; {}'s runs are not counted", dir, file, why, user));
      continue;
    }
    for (std::string& r : refused) v.notes.push_back(std::move(r));
    for (NodeRun& r : u->runs) {
      bool run_alive = alive(r.pid, r.pid_start);
      r.gone = !run_alive;
      if (!run_alive) r.wants.clear();
      std::erase_if(r.holds, [&](const NodeHold& h) {
        if (h.pid ? alive(h.pid, h.pid_start) : run_alive) return false;
        if (!run_alive && !(user == own_user && r.plan == own_plan))
          v.notes.push_back(fmt::format("{}'s claim for {} (GPUs {}) reaped: its process {} has ended", user, h.id,
                                        py_list(h.gpus), h.pid));
        return true;
      });
    }
    v.users.push_back(std::move(*u));
  }
  return v;
}

NodeShare::NodeShare(std::string dir, std::string plan, GpuMask node, Placement placement, double backfill_max_hours)
    : dir_(std::move(dir)), plan_(std::move(plan)), me_(name_of(geteuid())), node_(node),
      placement_(std::move(placement)), backfill_(backfill_max_hours) {}

NodeShare::~NodeShare() {
  leave();
}

void NodeShare::leave() {
  if (lock_fd_ >= 0) close(lock_fd_);  // closing lets the flock go
  lock_fd_ = -1;
}

// The user's usage raised to `usage` GPU-hours now where the file charges less (decayed); said
// with `source` (what charges it) when given.
void NodeShare::raise_usage(NodeUser& me, double usage, double now, const char* source, const Say& say) {
  double filed = decayed_usage(me.usage_gpu_hours, me.usage_at, now, config_.half_life_days);
  if (!(usage > filed + 0.005)) return;
  if (source)
    say(fmt::format("{}'s usage in {}/{}.json is {:.2f} GPU-hours, less than {} ({:.2f}): {:.2f} is counted", me_,
                    dir_, me_, filed, source, usage, usage));
  me.usage_gpu_hours = usage;
  me.usage_at = now;
}

// This run's entry in the user's file as read: the file's, or what the run last wrote where the
// file lost it, or a new one.
std::vector<NodeRun>::iterator NodeShare::own_entry(NodeUser& me, double now, const Say& say) {
  if (past_) {  // the plan's event log, once: the usage is at least what its attempts charge
    raise_usage(me, usage_of_attempts(*past_, now, config_.half_life_days), now, "this plan's event log charges", say);
    past_.reset();
  }
  auto it = std::find_if(me.runs.begin(), me.runs.end(), [&](const NodeRun& r) { return r.plan == plan_; });
  if (it != me.runs.end()) return it;
  if (!written_) {
    me.runs.push_back(NodeRun{plan_, getpid(), 0, now, now, {}, {}});
    return std::prev(me.runs.end());
  }
  // The file lost this run's entry since the run wrote it (removed by hand, refused): what the
  // run wrote is put back (its holds whose processes live, its user's usage), so that the
  // decision keeps its GPUs and its user's cap. Other users' runs did not see them meanwhile.
  NodeRun back = written_->run;
  std::erase_if(back.holds, [](const NodeHold& h) { return !alive(h.pid, h.pid_start); });
  raise_usage(me, decayed_usage(written_->usage, written_->usage_at, now, config_.half_life_days), now, nullptr,
                  say);  // said below
  std::string held;
  for (const NodeHold& h : back.holds) held += fmt::format("{}{} on GPUs {}", held.empty() ? "" : ", ", h.id, py_list(h.gpus));
  say(fmt::format("{}/{}.json lost this run's entry since its write at {}: written again{}", dir_, me_,
                  clock_stamp(written_->run.updated),
                  held.empty() ? "" : fmt::format(", with {} (until now other users' runs could start jobs on "
                                                  "those GPUs)", held)));
  me.runs.push_back(std::move(back));
  return std::prev(me.runs.end());
}

// The node's decision (decide_node) over every user's holds and wants: this run's preemptions,
// a line for each of its wants the cap keeps from ever starting, and the GPUs left to it.
GpuMask NodeShare::decide(const std::vector<NodeUser>& users, GpuMask free, double now, const Say& say) {
  const std::pair<std::string_view, std::string_view> own{me_, plan_};
  others_packed_ = packed_gib_on(users, &own);
  NodeDecision d = decide_node(users, free, node_, now, config_, backfill_, &placement_, room_, host_);
  preempts_.clear();
  for (const NodePreempt& p : d.preempts) {
    const NodeUser& u = users[p.user];
    if (u.name != me_ || u.runs[p.run].plan != plan_) continue;
    const NodeUser& w = users[p.want.user];
    preempts_.push_back({u.runs[p.run].holds[p.hold].id,
                         fmt::format("{}'s {}", w.name, w.runs[p.want.run].wants[p.want.want].id)});
  }
  for (const NodeSlot& s : d.never) {
    const NodeUser& u = users[s.user];
    const NodeWant& w = u.runs[s.run].wants[s.want];
    if (u.name != me_ || u.runs[s.run].plan != plan_) continue;
    std::string line = fmt::format("{} needs {} GPUs, more than the node config's cap for {} ({}): it cannot start "
                                   "on this node",
                                   w.id, w.gpus, me_, config_.limits_of(me_).max_gpus.value_or(0));
    if (told_.fresh(line)) say(line);
  }
  return node_ & ~gpus_for(d, users, me_, plan_);
}

NodeView NodeShare::read(double timeout) {
  leave();
  lock_fd_ = take_node_lock(dir_, timeout);
  try {
    return read_node_dir(dir_, node_, me_, plan_);
  } catch (const NodeError&) {
    leave();
    throw;
  }
}

GpuMask NodeShare::enter(NodeView v, double now, const std::vector<NodeWant>& wants, GpuMask free, const Say& say,
                         const std::vector<NodeHold>* holds) {
  if (lock_fd_ < 0) throw NodeError("a decision without the node lock");
  for (const std::string& n : v.notes)
    if (told_.fresh(n)) say(n);
  config_ = v.config;
  drained_ = node_drained(v.users, &undrains_);
  for (const GpuDrain& d : to_drain_) drained_[d.gpu] = d;  // not written yet: this run's own
  // This user's file as read (a new one if it was refused or missing), with this run's wants now.
  mine_.reset();
  for (const NodeUser& u : v.users)
    if (u.name == me_) mine_ = u;
  if (!mine_) {
    v.users.push_back(NodeUser{me_, 0, now, {}});
    mine_ = v.users.back();
  }
  NodeUser* me = nullptr;
  for (NodeUser& u : v.users)
    if (u.name == me_) me = &u;
  auto it = own_entry(*me, now, say);
  // This run's holds as the run has them now: the file's, read above, drop a job whose process
  // has ended (it is reaped at this tick's end): its GPUs, still busy to the run and left out of
  // `free`, would be neither free nor held, and a preemption would stop one job more for them.
  if (holds) it->holds = *holds;
  mine_ = *me;
  it->wants = wants;
  others_files_.clear();
  for (const NodeUser& u : v.users)
    if (u.name != me_) others_files_.push_back(dir_ + "/" + u.name + ".json");
  // Cores and host memory are not decided node-wide: taken as they are held, from the first look
  // (a job without GPUs starts before the first decision, as it needs none of the GPUs it gives).
  {
    const std::pair<std::string_view, std::string_view> own{me_, plan_};
    others_host_ = host_taken_on(v.users, &own);
  }
  // The first looks, for the node config's window_seconds, only make this run's wants known: runs
  // started within it then meet at their first decision, rather than the first to lock taking the
  // node (the first look alone, with a window of 0).
  if (!arrived_) arrived_ = now;
  deciding_at_.reset();
  if (!own_ && !first_ && now < *arrived_ + config_.window_seconds) deciding_at_ = *arrived_ + config_.window_seconds;
  if (first_ && !own_ && config_.window_seconds > 0 && !wants.empty())
    say(fmt::format("the first decision waits {:g} s for the runs that start with this one (the node config's "
                    "\"window_seconds\")",
                    config_.window_seconds));
  if (first_) {
    first_ = false;
    if (!own_ && config_.window_seconds > 0) deciding_at_ = *arrived_ + config_.window_seconds;
    return node_;
  }
  if (deciding_at_) return node_;
  return decide(v.users, free, now, say);
}

void NodeShare::publish(double now, std::vector<NodeHold> holds, std::vector<NodeWant> wants,
                        std::vector<IdleHolder> idle) {
  if (lock_fd_ < 0 || !mine_) throw NodeError("publish without the node lock");
  NodeUser& me = *mine_;
  auto it = std::find_if(me.runs.begin(), me.runs.end(), [&](const NodeRun& r) { return r.plan == plan_; });
  if (it == me.runs.end()) {
    me.runs.push_back(NodeRun{plan_, 0, 0, now, now, {}, {}, {}});
    it = std::prev(me.runs.end());
  }
  it->pid = getpid();
  it->pid_start = process_start_time(getpid()).value_or(0);
  it->updated = now;
  // Usage first, of the holds this run published last: a job that ended since is charged up to
  // now (the file as read left it out, its process gone), not dropped with its last interval.
  if (published_) it->holds = *published_;
  account_usage(me, *it, now, config_.half_life_days);
  it->holds = std::move(holds);
  it->wants = std::move(wants);
  it->idle_holders = std::move(idle);
  published_ = it->holds;
  Written written{*it, me.usage_gpu_hours, me.usage_at};
  // Runs of this user that ended and hold nothing are forgotten.
  std::erase_if(me.runs, [&](const NodeRun& r) { return r.plan != plan_ && r.holds.empty() && !alive(r.pid, r.pid_start); });
  for (const GpuDrain& d : to_drain_) set_drain_record(me.drains, d);  // kept until written
  std::string err = write_user_file(dir_, me_, write_node_user(me));
  leave();
  if (!err.empty()) throw NodeError(err);
  to_drain_.clear();
  written_ = std::move(written);
}

}  // namespace gpuq
