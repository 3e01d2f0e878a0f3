#include "gpuq/live/snapshots.h"
#include "gpuq/live/store.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <set>
#include <filesystem>
#include <vector>

#include "gpuq/live/hooks.h"
#include "gpuq/live/journal.h"
#include "gpuq/live/proc.h"

namespace gpuq {

namespace fs = std::filesystem;

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// git in `repo`, with nothing of the user's that could run or change anything: no hooks, no
// fsmonitor daemon, no automatic gc or maintenance, no optional locks; gpuq's own author. Every
// object and ref it writes is synced before it is named (core.fsync=committed, git 2.36 on; an
// older git ignores it): by default git leaves loose objects unsynced, and a power cut left one
// torn under its final name, which git then trusts, so every later snapshot that needed it failed
// "corrupt loose object" (tests/crash/power-cut, scenario b).
// Checkouts write files on one worker per core (checkout.workers=0): on 4,000 files of 512 MB,
// `checkout-index -a` took 0.50, 0.88 and 1.15 s so against 0.80, 1.54 and 1.76 s on one
// worker, interleaved, on the 2-core machine (issue 30's closing note).
CommandResult git(const std::string& repo, std::vector<std::string> args, Env env = {}) {
  std::vector<std::string> argv{"git",        "-C", repo, "-c", "core.hooksPath=/dev/null", "-c",
                                "core.fsmonitor=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
                                "-c", "checkout.workers=0", "-c", "core.fsync=committed"};
  argv.insert(argv.end(), args.begin(), args.end());
  env.push_back({"GIT_OPTIONAL_LOCKS", "0"});
  env.push_back({"GIT_TERMINAL_PROMPT", "0"});
  for (const char* who : {"AUTHOR", "COMMITTER"}) {
    env.push_back({fmt::format("GIT_{}_NAME", who), "gpuq"});
    env.push_back({fmt::format("GIT_{}_EMAIL", who), "gpuq@localhost"});
  }
  return run_command(argv, env);
}

std::string first_line(const std::string& text) {
  std::string t = text.substr(0, text.find('\n'));
  while (!t.empty() && (t.back() == '\r' || t.back() == ' ')) t.pop_back();
  return t;
}

// What git said of a failure, whole: its lines joined (the path it names is often on the second),
// less its "hint:" lines, which tell git's own way out.
std::string git_words(const std::string& text) {
  std::string out, line;
  for (size_t at = 0; at <= text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    line = first_line(text.substr(at, nl - at));
    at = nl + 1;
    size_t lead = line.find_first_not_of(" \t");
    if (lead == std::string::npos || line.rfind("hint:", 0) == 0) continue;
    out += (out.empty() ? "" : " ") + line.substr(lead);
  }
  return out;
}

// The output of a git command that must succeed, its first line; SnapshotError naming `what` and
// all git said otherwise.
std::string must(const CommandResult& r, const std::string& what) {
  if (r.status != 0) {
    std::string why = git_words(r.err.empty() ? r.out : r.err);
    throw SnapshotError(fmt::format("{}: {}", what, why.empty() ? fmt::format("git exited {}", r.status) : why));
  }
  return first_line(r.out);
}

// The line of a snapshot's message that names its queue (GitSnapshots::queue_).
const std::string kQueueLine = "gpuq-queue: ";

// A temporary index file: a path no other call of this process or another uses.
std::string temp_index(const std::string& folder) {
  static std::atomic<unsigned> counter{0};
  return fmt::format("{}/gpuq-index-{}-{}", folder, ::getpid(), counter++);
}

// Removes a file when it goes out of scope (and its lock, were git killed mid-write).
struct Removed {
  std::string path;
  ~Removed() {
    std::error_code ec;
    fs::remove(path, ec);
    fs::remove(path + ".lock", ec);
  }
};

}  // namespace

// The tree of `top`'s working tree as `git add -A` would commit it (less what is left out),
// through a copy of the user's index (its stat cache: only changed files are hashed again).
std::string GitSnapshots::tree_now(const std::string& top) {
  std::string git_dir = must(git(top, {"rev-parse", "--absolute-git-dir"}), "git rev-parse");
  Removed index{temp_index(git_dir)};
  std::error_code ec;
  if (fs::exists(git_dir + "/index", ec)) {
    fs::copy_file(git_dir + "/index", index.path, fs::copy_options::overwrite_existing, ec);
    if (ec) throw SnapshotError(fmt::format("cannot copy {}/index: {}", git_dir, ec.message()));
    // With the index's own time: git takes an entry changed in the same tick as the index was
    // written for "racily clean" and hashes the file again. A copy dated now would hide that,
    // and a file edited just after `git add` would be snapshotted as the index has it.
    fs::last_write_time(index.path, fs::last_write_time(git_dir + "/index", ec), ec);
    if (ec) throw SnapshotError(fmt::format("cannot date the copy of {}/index: {}", git_dir, ec.message()));
  }
  Env env{{"GIT_INDEX_FILE", index.path}};
  std::vector<std::string> args{"add", "-A", "--", "."};
  fs::path real_top = fs::weakly_canonical(top, ec);
  // gpuq's own files, left out by exclude pathspecs, but only those the repository does not ignore
  // already: git (2.39) refuses an `add` whose pathspec names an ignored path that exists, and
  // `add -A` leaves an ignored one out anyway. A `.gitignore` listing logs/ or *.state.json is
  // what anyone keeping gpuq's files out of git writes.
  std::vector<std::pair<std::string, bool>> own;  // path from the top, a pattern (PLAN.events.jsonl.N)
  std::vector<std::string> check{"check-ignore", "--"};
  for (const std::string& p : left_out_) {
    bool pattern = p.ends_with("*");  // the event log's older parts: PLAN.events.jsonl.N
    std::string path = pattern ? p.substr(0, p.size() - 1) : p;
    fs::path rel = fs::weakly_canonical(fs::absolute(path, ec), ec).lexically_relative(real_top);
    if (rel.empty() || rel.string().starts_with("..") || rel == ".") continue;  // outside the repository
    own.emplace_back(rel.string(), pattern);
    if (!pattern) check.push_back(rel.string());
    else  // its parts as they are: one ignored stands for all (they share a name)
      for (const auto& e : fs::directory_iterator((real_top / rel).parent_path(), ec))
        if (e.path().filename().string().rfind(rel.filename().string(), 0) == 0)
          check.push_back((rel.parent_path() / e.path().filename()).string());
  }
  std::set<std::string> ignored;
  if (!own.empty()) {
    CommandResult r = git(top, check, env);  // exit 1: none of them is ignored
    if (r.status != 0 && r.status != 1)
      throw SnapshotError(fmt::format("git check-ignore in {}: {}", top, git_words(r.err)));
    for (size_t at = 0; at < r.out.size();) {
      size_t nl = r.out.find('\n', at);
      if (nl == std::string::npos) nl = r.out.size();
      ignored.insert(r.out.substr(at, nl - at));
      at = nl + 1;
    }
  }
  for (const auto& [rel, pattern] : own) {
    bool skip = ignored.count(rel) > 0;
    if (pattern)
      for (const std::string& i : ignored) skip = skip || i.rfind(rel, 0) == 0;
    if (!skip) args.push_back((pattern ? ":(exclude)" : ":(exclude,literal)") + rel + (pattern ? "*" : ""));
  }
  must(git(top, args, env), fmt::format("git add -A in {}", top));
  return must(git(top, {"write-tree"}, env), "git write-tree");
}

namespace {

// Makes every file and folder under `dir` (and `dir`) read-only (`writable`: writable by its owner again).
void set_writable(const std::string& dir, bool writable) {
  std::error_code ec;
  std::vector<fs::path> folders{dir};
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    fs::file_status st = it->symlink_status(ec);
    if (fs::is_symlink(st)) continue;
    if (fs::is_directory(st))
      folders.push_back(it->path());
    else
      fs::permissions(it->path(), writable ? fs::perms::owner_write : fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                      writable ? fs::perm_options::add : fs::perm_options::remove, ec);
  }
  // Folders last when made read-only (their files first), first when made writable (before the walk above
  // could need them: remove_all does the walk then).
  for (auto f = folders.rbegin(); f != folders.rend(); ++f)
    fs::permissions(*f, writable ? fs::perms::owner_write : fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                    writable ? fs::perm_options::add : fs::perm_options::remove, ec);
}

// Removes a checkout (read-only: made writable first).
void remove_checkout(const std::string& dir) {
  std::error_code ec;
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_directory(ec) && !it->is_symlink(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  }
  fs::remove_all(dir, ec);
}

}  // namespace

std::vector<std::string> its_own_files(const PlanPaths& paths) {
  std::vector<std::string> out{paths.state,    paths.lock,        paths.run_lock, paths.run_info,
                               paths.run_plan, paths.paused,      paths.logs,     snapshots_root(paths.state),
                               events_path_for(paths.state), hook_marks_path_for(paths.state)};
  out.push_back(events_path_for(paths.state) + ".*");
  return out;
}

std::string GitSnapshots::repo_of(const std::string& workdir, std::string* why) {
  std::error_code ec;
  if (!fs::is_directory(workdir, ec)) {
    if (why) *why = fmt::format("the workdir {} is not a folder", workdir);
    return "";
  }
  CommandResult r = git(workdir, {"rev-parse", "--show-toplevel"});
  if (r.status != 0 || first_line(r.out).empty()) {
    if (why) {
      std::string said = first_line(r.err);
      *why = r.status < 0 ? fmt::format("git cannot be run ({})", r.err)
             : said.find("not a git repository") != std::string::npos || said.empty()
                 ? fmt::format("the workdir {} is not in a git repository (run `git init` there, or leave "
                               "\"snapshot\" out)",
                               workdir)
                 : fmt::format("git cannot read the workdir {}: {}", workdir, said);
    }
    return "";
  }
  return first_line(r.out);
}

SnapshotRef GitSnapshots::take(const std::string& workdir, double now) {
  std::string why;
  std::string top = repo_of(workdir, &why);
  if (top.empty()) throw SnapshotError(why);
  std::string tree = tree_now(top);
  // HEAD's commit, tree and date, when there is a HEAD (none in a repository without commits).
  CommandResult head = git(top, {"log", "-1", "--format=%H%n%T%n%ct", "HEAD", "--"});
  std::vector<std::string> lines;
  for (size_t at = 0; head.status == 0 && at < head.out.size();) {
    size_t nl = head.out.find('\n', at);
    lines.push_back(head.out.substr(at, nl == std::string::npos ? nl : nl - at));
    at = nl == std::string::npos ? head.out.size() : nl + 1;
  }
  bool has_head = lines.size() >= 3;
  SnapshotRef snap;
  snap.repo = top;
  snap.at = now;
  snap.dirty = !has_head || lines[1] != tree;
  // Dated as HEAD: the same tree on the same HEAD is the same commit, and so the same checkout.
  std::string date = fmt::format("{} +0000", has_head ? lines[2] : std::to_string(static_cast<long long>(now)));
  Env env{{"GIT_AUTHOR_DATE", date}, {"GIT_COMMITTER_DATE", date}};
  std::vector<std::string> args{"commit-tree", tree, "-m", "gpuq snapshot of the working tree"};
  if (!queue_.empty()) args.insert(args.end(), {"-m", kQueueLine + queue_});  // whose ref drop_refs may delete
  if (has_head) args.insert(args.end(), {"-p", lines[0]});
  snap.commit = must(git(top, args, env), "git commit-tree");
  // Kept from git gc for as long as the ref is there: `history` names it, to check the code out again.
  must(git(top, {"update-ref", "refs/gpuq/snapshots/" + snap.commit, snap.commit}), "git update-ref");
  // Its objects and ref durable before a state that names the snapshot is saved: git syncs none of
  // them by default, and after a power cut a job would find its snapshot gone ("failed to unpack
  // tree object") and fail every retry (the power-cut test, scenario b).
  sync_filesystem_of(top);
  return snap;
}

namespace {

// The paths (relative, '/'-separated) whose entry differs between two trees, from
// `git diff-tree -r -z`: each record is ":MODE MODE SHA SHA STATUS\0PATH\0". `gone`: those the
// second tree lacks (status D).
std::set<std::string> changed_paths(const std::string& diff, std::set<std::string>& gone) {
  std::set<std::string> out;
  for (size_t at = 0; at < diff.size();) {
    size_t meta_end = diff.find('\0', at);
    if (meta_end == std::string::npos) break;
    size_t path_end = diff.find('\0', meta_end + 1);
    if (path_end == std::string::npos) path_end = diff.size();
    std::string path = diff.substr(meta_end + 1, path_end - meta_end - 1);
    (meta_end > at && diff[meta_end - 1] == 'D' ? gone : out).insert(path);
    at = path_end + 1;
  }
  return out;
}

// Makes `dir` a copy of the checkout `like` by hard links, less the paths in `skip`: folders
// are made (writable, to be written in), files linked, symbolic links made again. False, with
// `dir` left to be removed, where a link cannot be made (another file system, too many links).
bool link_copy(const fs::path& like, const fs::path& dir, const std::set<std::string>& skip) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return false;
  for (auto it = fs::recursive_directory_iterator(like, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::string rel = it->path().lexically_relative(like).generic_string();
    fs::file_status st = it->symlink_status(ec);
    if (ec) return false;
    fs::path to = dir / rel;
    if (fs::is_directory(st)) {
      fs::create_directory(to, ec);
    } else if (skip.count(rel)) {
      continue;
    } else if (fs::is_symlink(st)) {
      fs::create_symlink(fs::read_symlink(it->path(), ec), to, ec);
    } else {
      fs::create_hard_link(it->path(), to, ec);
    }
    if (ec) return false;
  }
  return !ec;
}

}  // namespace

void GitSnapshots::check_out(const SnapshotRef& snap, const std::string& dir, const std::string& like) {
  std::error_code ec;
  Removed index{dir + ".index"};
  Env env{{"GIT_INDEX_FILE", index.path}};
  must(git(snap.repo, {"read-tree", snap.commit}, env),
       fmt::format("git read-tree {} in {}", short_commit(snap.commit), snap.repo));
  std::string prefix = fs::absolute(dir).lexically_normal().string();
  if (prefix.back() != '/') prefix += '/';
  // Sharing the files another snapshot's checkout holds that this one did not change: only the
  // changed ones are written (a snapshot of a 1 GB tree with a few files edited costs what they
  // do). Where that cannot be done (the other commit is unknown here, a link fails), all are.
  if (!like.empty()) {
    std::string base = fs::path(like).filename().string();
    CommandResult diff = git(snap.repo, {"diff-tree", "-r", "-z", "--no-renames", base + "^{tree}", snap.commit + "^{tree}"});
    if (diff.status == 0) {
      std::set<std::string> gone, changed = changed_paths(diff.out, gone);
      std::set<std::string> skip = changed;
      skip.insert(gone.begin(), gone.end());
      if (link_copy(like, dir, skip)) {
        // git keeps no empty folder: one whose files are all gone is gone too.
        for (const std::string& p : gone)
          for (fs::path f = (fs::path(dir) / p).parent_path(); f != fs::path(dir) && fs::is_empty(f, ec) && !ec;
               f = f.parent_path())
            fs::remove(f, ec);
        std::vector<std::string> args{"checkout-index", "-f", "--prefix=" + prefix, "--"};
        size_t fixed = args.size();
        for (auto p = changed.begin(); p != changed.end();) {  // a few hundred paths a command
          args.push_back(*p++);
          if (args.size() - fixed == 500 || p == changed.end()) {
            must(git(snap.repo, args, env), fmt::format("git checkout-index of {}", short_commit(snap.commit)));
            args.resize(fixed);
          }
        }
        return;
      }
    }
    remove_checkout(dir);
  }
  fs::create_directories(dir, ec);
  if (ec) throw SnapshotError(fmt::format("cannot create {}: {}", dir, ec.message()));
  must(git(snap.repo, {"checkout-index", "-a", "-f", "--prefix=" + prefix}, env),
       fmt::format("git checkout-index of {}", short_commit(snap.commit)));
}

std::optional<bool> GitSnapshots::changed_since(const SnapshotRef& snap) {
  try {
    std::string was = must(git(snap.repo, {"rev-parse", "--verify", "-q", snap.commit + "^{tree}"}), "git rev-parse");
    return tree_now(snap.repo) != was;
  } catch (const SnapshotError&) {
    return std::nullopt;
  }
}

std::optional<std::set<std::string>> GitSnapshots::paths_of(const std::string& repo, const std::string& commit) {
  CommandResult r = git(repo, {"ls-tree", "-r", "-z", "--full-tree", "--name-only", commit + "^{tree}", "--"});
  if (r.status != 0) return std::nullopt;
  std::set<std::string> out;
  for (size_t at = 0; at < r.out.size();) {
    size_t end = r.out.find('\0', at);
    if (end == std::string::npos) end = r.out.size();
    if (end > at) out.insert(r.out.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::vector<std::string> GitSnapshots::drop_refs(const std::string& repo, const std::set<std::string>& keep) {
  std::vector<std::string> dropped;
  if (queue_.empty()) return dropped;
  CommandResult r =
      git(repo, {"for-each-ref", "--format=%(refname)%09%(objectname)%09%(contents:body)%00", "refs/gpuq/snapshots/"});
  if (r.status != 0) return dropped;
  for (size_t at = 0; at < r.out.size();) {
    size_t end = r.out.find('\0', at);
    if (end == std::string::npos) break;
    std::string rec = r.out.substr(at, end - at);
    at = end + 1;
    while (!rec.empty() && rec[0] == '\n') rec.erase(0, 1);
    size_t t1 = rec.find('\t'), t2 = t1 == std::string::npos ? t1 : rec.find('\t', t1 + 1);
    if (t2 == std::string::npos) continue;
    std::string ref = rec.substr(0, t1), commit = rec.substr(t1 + 1, t2 - t1 - 1), body = "\n" + rec.substr(t2 + 1);
    // Its own queue's line, whole: another queue's path may begin with this one's.
    std::string line = "\n" + kQueueLine + queue_;
    size_t found = body.find(line);
    bool ours = found != std::string::npos &&
                (found + line.size() == body.size() || body[found + line.size()] == '\n');
    if (!ours || keep.count(commit) || ref != "refs/gpuq/snapshots/" + commit) continue;
    // Only while it still names that commit (another run of the queue may not have moved it: it
    // cannot, a ref names its commit; the old value makes the deletion exact all the same).
    if (git(repo, {"update-ref", "-d", ref, commit}).status == 0) dropped.push_back(commit);
  }
  return dropped;
}

std::string snapshots_root(const std::string& state_path) {
  const std::string suffix = ".state.json";
  std::string base = state_path.size() > suffix.size() && state_path.ends_with(suffix)
                         ? state_path.substr(0, state_path.size() - suffix.size())
                         : state_path;
  std::error_code ec;
  fs::path root = fs::absolute(base + ".snapshots", ec);  // jobs run in it, from another folder
  return ec ? base + ".snapshots" : root.lexically_normal().string();
}

namespace {

// The stamp beside the checkout `name` (COMMIT12) under `root`: its time is when it was made.
std::string made_stamp(const std::string& root, const std::string& name) { return root + "/." + name + ".made"; }

}  // namespace

std::string ensure_checkout(Snapshots& snapshots, const std::string& root, const SnapshotRef& snap) {
  std::string dir = root + "/" + short_commit(snap.commit);
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return dir;
  fs::create_directories(root, ec);
  if (ec) throw SnapshotError(fmt::format("cannot create {}: {}", root, ec.message()));
  std::string tmp = fmt::format("{}/.{}.tmp-{}", root, short_commit(snap.commit), ::getpid());
  if (fs::exists(tmp, ec)) remove_checkout(tmp);
  // The newest checkout there: the snapshot before this one, most likely, and the closest to it.
  std::string like;
  fs::file_time_type newest;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::error_code ec2;
    if (e.path().filename().string().starts_with(".") || !e.is_directory(ec2) || e.is_symlink(ec2)) continue;
    fs::file_time_type t = e.last_write_time(ec2);
    if (!ec2 && (like.empty() || t > newest)) like = e.path().string(), newest = t;
  }
  try {
    snapshots.check_out(snap, tmp, like);
  } catch (...) {
    remove_checkout(tmp);
    throw;
  }
  set_writable(tmp, false);
  // Its files whole on disk before the name says it is there: after a power cut a checkout renamed
  // into place with its files' writes lost would run cut or empty scripts.
  sync_filesystem_of(tmp);
  fs::rename(tmp, dir, ec);
  if (ec) {
    remove_checkout(tmp);
    if (!fs::is_directory(dir)) throw SnapshotError(fmt::format("cannot rename {} to {}: {}", tmp, dir, ec.message()));
    return dir;
  }
  sync_folder_of(dir);
  // When it was made, beside it: a file of the checkout changed later was written by a job.
  std::ofstream(made_stamp(root, short_commit(snap.commit)));
  return dir;
}

namespace {

// When a file was last written (its own, not a link's target), to the nanosecond; nullopt when lstat fails.
std::optional<std::pair<long long, long long>> written_at(const fs::path& p) {
  struct stat st;
  if (::lstat(p.c_str(), &st) != 0) return std::nullopt;
  return std::pair<long long, long long>{st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

// What jobs wrote into the checkout `dir`: paths (relative, sorted) of the files that are not
// among `paths` (the commit's, when known) and of those changed after `made` (when known);
// every file when neither is known. Python's caches (__pycache__) are not outputs.
std::vector<std::string> written_in(const fs::path& dir, const std::optional<std::set<std::string>>& paths,
                                    const std::optional<std::pair<long long, long long>>& made) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    fs::file_status st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_directory(st)) {
      if (it->path().filename() == "__pycache__") it.disable_recursion_pending();
      continue;
    }
    std::string rel = it->path().lexically_relative(dir).generic_string();
    bool written = paths ? !paths->count(rel) : !made;
    if (!written && made) {
      auto at = written_at(it->path());
      written = !at || *at > *made;
    }
    if (written) out.push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Moves `files` of the checkout `dir` into a new folder under root/kept; false (some left where
// they are) where one cannot be moved.
bool keep_writes(const fs::path& dir, const std::string& root, const std::string& name, KeptWrites& k) {
  std::error_code ec;
  fs::path kept = fs::path(root) / kKeptFolder / name;
  for (int n = 2; fs::exists(kept, ec); ++n) kept = fs::path(root) / kKeptFolder / fmt::format("{}.{}", name, n);
  k.folder = kept.string();
  bool all = true;
  for (const std::string& rel : k.files) {
    fs::path to = kept / rel;
    fs::create_directories(to.parent_path(), ec);
    fs::permissions((dir / rel).parent_path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::rename(dir / rel, to, ec);
    all = all && !ec;
  }
  return all;
}

}  // namespace

std::vector<std::string> prune_checkouts(const std::string& root, const std::set<std::string>& keep,
                                         Snapshots* snapshots, const std::string& repo,
                                         std::vector<KeptWrites>* kept) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return removed;
  std::set<std::string> kept_names;
  for (const std::string& c : keep) kept_names.insert(short_commit(c));
  std::vector<fs::path> gone;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::string name = e.path().filename().string();
    if (name == kKeptFolder) continue;
    // A checkout's stamp (".COMMIT12.made") goes with it, below; one whose checkout is gone, now.
    if (name.starts_with(".") && name.ends_with(".made")) {
      if (!fs::exists(fs::path(root) / name.substr(1, name.size() - 6), ec)) fs::remove(e.path(), ec);
      continue;
    }
    if (!kept_names.count(name)) gone.push_back(e.path());
  }
  for (const fs::path& p : gone) {
    std::string name = p.filename().string();
    if (!name.starts_with(".")) {
      std::optional<std::pair<long long, long long>> made = written_at(made_stamp(root, name));
      std::optional<std::set<std::string>> paths;
      if (snapshots && !repo.empty()) paths = snapshots->paths_of(repo, name);
      KeptWrites k{name, "", written_in(p, paths, made)};
      if (!k.files.empty()) {
        bool moved = keep_writes(p, root, name, k);
        if (!moved) k.folder = p.string(), k.whole = true;  // what could not be moved is still in it
        if (kept) kept->push_back(k);
        if (!moved) continue;
      }
    }
    remove_checkout(p.string());
    if (!name.starts_with(".")) {
      fs::remove(made_stamp(root, name), ec);
      removed.push_back(name);
    }
  }
  return removed;
}

std::string folder_in_checkout(const std::string& dir, const std::string& repo, const std::string& workdir) {
  std::error_code ec;
  fs::path top = fs::weakly_canonical(repo, ec), wd = fs::weakly_canonical(workdir, ec);
  fs::path rel = wd.lexically_relative(top);
  if (rel.empty() || rel == "." || rel.string().starts_with("..")) return dir;
  return (fs::path(dir) / rel).lexically_normal().string();
}

}  // namespace gpuq
