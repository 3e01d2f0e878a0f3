// Snapshots of the code a job runs (issue 30): the field and the setting, what the state and the
// event log keep of a snapshot, git's side on real repositories (the user's index, branch, stash
// and untracked files untouched), and real runs: a queued job runs the code loaded, a job added
// after an edit the new code, across a restart too, and `history` names each one's commit.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpuq/core/events.h"
#include "gpuq/core/life.h"
#include "gpuq/core/snapshot.h"
#include "gpuq/live/snapshots.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::ElementsAre;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

// git in `dir` (a test's own repository: its own author, no global config of the machine's).
std::string git_in(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"};
  argv.insert(argv.end(), args.begin(), args.end());
  Output o = run(argv, dir);
  EXPECT_EQ(o.status, 0) << "git " << args[0] << ": " << o.err;
  return o.out;
}

// Everything of the user's repository a snapshot must leave as it was.
struct RepoLook {
  std::string porcelain, stash, head, branch, index;
  bool operator==(const RepoLook&) const = default;
};

RepoLook look_at(const std::string& repo) {
  std::string index;
  {
    std::ifstream in(repo + "/.git/index", std::ios::binary);
    index.assign(std::istreambuf_iterator<char>(in), {});
  }
  return {git_in(repo, {"--no-optional-locks", "status", "--porcelain", "--untracked-files=all"}), git_in(repo, {"stash", "list"}),
          git_in(repo, {"rev-parse", "HEAD"}), git_in(repo, {"symbolic-ref", "HEAD"}), index};
}

// A repository with a bit of everything: a commit, a stash, a staged change, an unstaged one, an
// untracked file and an ignored one. train.py is committed and unchanged.
void make_repo(const TempDir& d, const std::string& repo) {
  d.write(repo + "/train.py", "print('v1')\n");
  d.write(repo + "/job.sh",
          "while [ ! -e \"$GPUQ_WORKDIR/../go\" ]; do sleep 0.05; done\n"
          "cat train.py > \"$GPUQ_WORKDIR/../ran-$GPUQ_JOB_ID.txt\"\n");
  d.write(repo + "/gate.sh", "while [ ! -e \"$GPUQ_WORKDIR/../go\" ]; do sleep 0.05; done\n");
  d.write(repo + "/.gitignore", "*.ckpt\n");
  d.write(repo + "/staged.txt", "one\n");
  d.write(repo + "/unstaged.txt", "one\n");
  std::string r = d.path() + "/" + repo;
  git_in(r, {"init", "-q"});
  git_in(r, {"add", "-A"});
  git_in(r, {"commit", "-qm", "first"});
  d.write(repo + "/unstaged.txt", "stashed\n");
  git_in(r, {"stash", "-q"});
  d.write(repo + "/staged.txt", "two\n");
  git_in(r, {"add", "staged.txt"});
  d.write(repo + "/unstaged.txt", "two\n");
  d.write(repo + "/untracked.txt", "new\n");
  d.write(repo + "/model.ckpt", "weights\n");
}

// The files of a commit.
std::string files_of(const std::string& repo, const std::string& commit) {
  return git_in(repo, {"ls-tree", "-r", "--name-only", commit});
}

// A plan beside the repository (its state and logs outside it), run from a snapshot of it.
struct Beside : PlanFolder {
  std::string repo;
  Beside() : PlanFolder(1), repo(d.path() + "/repo") {
    make_repo(d, "repo");
    d.write("plan.json", R"({"workdir": "repo", "settings": {"snapshot": "git"}, "jobs": [
      {"id": "gate", "script": "gate.sh", "gpus": 0},
      {"id": "old", "script": "job.sh", "gpus": 0, "deps": ["gate"]}]})");
  }
  std::unique_ptr<Background> start() const {
    return start_gpuq({"run", "--plan", "plan.json", "--gpus", "0", "--max-retries", "0"}, d.path(), env);
  }
  std::string snapshot_of(const std::string& id) const {
    json s = state();
    return s.contains(id) && s[id].contains("snapshot") ? s[id]["snapshot"].get<std::string>() : "";
  }
  bool running(const std::string& id) const {
    json s = state();
    return s.contains(id) && s[id]["status"] == "running";
  }
};

}  // namespace

// ---- The field, the setting, the state and the event log (pure).

TEST(SnapshotPlan, TheFieldTakesGitOrOffAndAJobsOwnComesBeforeTheSetting) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "snapshot": "git"}, {"id": "b", "script": "b.sh", "snapshot": "off"},
                       {"id": "c", "script": "c.sh"}])");
  EXPECT_TRUE(uses_snapshot(p.jobs[0], "off"));
  EXPECT_FALSE(uses_snapshot(p.jobs[1], "git"));
  EXPECT_TRUE(uses_snapshot(p.jobs[2], "git"));
  EXPECT_FALSE(uses_snapshot(p.jobs[2], "off"));
  EXPECT_FALSE(any_snapshot(plan_of(R"([{"id": "a", "script": "a.sh"}])"), "off"));
  EXPECT_THAT(errors_of(R"([{"id": "a", "script": "a.sh", "snapshot": "yes"}])"),
              ElementsAre(HasSubstr(R"("snapshot" must be "git" or "off", not "yes")")));
  EXPECT_THAT(errors_of(R"({"settings": {"snapshot": true}, "jobs": [{"id": "a", "script": "a.sh"}]})"),
              ElementsAre(HasSubstr("\"snapshot\": must be a string")));
  EXPECT_THAT(errors_of(R"({"settings": {"snapshot": "gti"}, "jobs": [{"id": "a", "script": "a.sh"}]})"),
              ElementsAre(HasSubstr("must be one of off, git, not \"gti\"")));
  EXPECT_EQ(plan_of(R"({"settings": {"snapshot": "git"}, "jobs": [{"id": "a", "script": "a.sh"}]})").settings.values.snapshot,
            "git");
}

TEST(SnapshotState, EachNewAttemptKeepsTheSnapshotAndItsStartEventNamesIt) {
  JobState s;
  SnapshotRef snap{"0123456789abcdef0123456789abcdef01234567", true, 1764000000, "/r"};
  set_snapshot(s, snap);
  JobState run = s;
  write_life(run, Running{0, 1764000100, {0}, 0, std::nullopt}, Cause::Start);
  EXPECT_EQ(snapshot_of(run), snap);
  Change c{0, LifeKind::Waiting, Running{0, 1764000100, {0}, 0, std::nullopt}, Cause::Start};
  std::vector<Event> ev = events_of("a", c, s, run, 1764000100, "run");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].snapshot, snap.commit);
  EXPECT_EQ(ev[0].snapshot_dirty, true);
  EXPECT_EQ(ev[0].repo, "/r");
  std::string line = event_line(ev[0]);
  EXPECT_THAT(line, HasSubstr(R"("snapshot":"0123456789abcdef0123456789abcdef01234567","snapshot_dirty":true,"repo":"/r")"));
  std::optional<Event> back = parse_event(line, nullptr);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, ev[0]);
  std::vector<Attempt> a = attempts_of({*back});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].snapshot, snap.commit);
  // A failure, then the automatic retry: still the same snapshot.
  write_life(run, Ended{0, Outcome::Failed, 1, 1764000200, 1764000100}, Cause::Exit);
  write_life(run, Waiting{1}, Cause::AutoRetry);
  EXPECT_EQ(snapshot_of(run), snap);
  // A job without one logs none.
  JobState plain;
  write_life(plain, Running{0, 1, {0}, 0, std::nullopt}, Cause::Start);
  EXPECT_THAT(event_line(events_of("b", c, JobState{}, plain, 1, "run")[0]), Not(HasSubstr("snapshot")));
  EXPECT_THAT(stale_snapshot_text(1764000000, 1764000060),
              ::testing::MatchesRegex("runs the code of [0-9][0-9]:[0-9][0-9]; the tree changed since"));
}

// ---- git's side, on real repositories.

TEST(SnapshotGit, ASnapshotTakesEveryChangeNotIgnoredAndLeavesTheUsersRepositoryAlone) {
  TempDir d;
  make_repo(d, "repo");
  std::string repo = d.path() + "/repo";
  RepoLook before = look_at(repo);
  GitSnapshots git({repo + "/plan.state.json", repo + "/logs"});
  d.write("repo/plan.state.json", "{}\n");
  d.write("repo/logs/a.log", "x\n");
  SnapshotRef s = git.take(repo + "/", 1764000000);
  EXPECT_EQ(s.repo, fs::canonical(repo).string());
  EXPECT_TRUE(s.dirty);
  EXPECT_EQ(s.commit.size(), 40u);
  EXPECT_EQ(git_in(repo, {"rev-parse", "refs/gpuq/snapshots/" + s.commit}), s.commit + "\n");
  EXPECT_EQ(git_in(repo, {"rev-parse", s.commit + "^"}), before.head);  // on top of HEAD
  std::string files = files_of(repo, s.commit);
  EXPECT_THAT(files, HasSubstr("untracked.txt"));
  EXPECT_THAT(files, Not(HasSubstr("model.ckpt")));        // ignored
  EXPECT_THAT(files, Not(HasSubstr("plan.state.json")));   // gpuq's own
  EXPECT_THAT(files, Not(HasSubstr("logs/")));
  // The working tree, not the index: unstaged.txt was rewritten, same size, in the tick `git add`
  // wrote the index ("racily clean"): the copy of the index must keep its time for git to see it.
  EXPECT_EQ(git_in(repo, {"show", s.commit + ":unstaged.txt"}), "two\n");
  EXPECT_EQ(git_in(repo, {"show", s.commit + ":staged.txt"}), "two\n");
  fs::remove(repo + "/plan.state.json");
  fs::remove_all(repo + "/logs");
  EXPECT_EQ(look_at(repo), before);
  // The same tree on the same HEAD is the same commit; a change is another, and says so.
  std::string again = git.take(repo, 1764000500).commit;
  EXPECT_EQ(again, s.commit);
  EXPECT_EQ(git.changed_since(s), false);
  d.write("repo/train.py", "print('v2')\n");
  EXPECT_EQ(git.changed_since(s), true);
  EXPECT_NE(git.take(repo, 1764000600).commit, s.commit);
  // A clean tree is no dirty snapshot.
  TempDir c;
  c.write("r/a.txt", "a\n");
  git_in(c.path() + "/r", {"init", "-q"});
  git_in(c.path() + "/r", {"add", "-A"});
  git_in(c.path() + "/r", {"commit", "-qm", "a"});
  EXPECT_FALSE(git.take(c.path() + "/r", 1).dirty);
}

TEST(SnapshotGit, ARepositoryWithoutCommitsAndAFolderThatIsNoneOfOne) {
  TempDir d;
  d.write("r/sub/a.txt", "a\n");
  git_in(d.path() + "/r", {"init", "-q"});
  GitSnapshots git;
  SnapshotRef s = git.take(d.path() + "/r/sub", 1764000000);
  EXPECT_TRUE(s.dirty);
  EXPECT_EQ(git_in(d.path() + "/r", {"show", s.commit + ":sub/a.txt"}), "a\n");
  EXPECT_FALSE(fs::exists(d.path() + "/r/.git/index"));  // still no index of the user's
  d.write("plain/a.txt", "a\n");
  std::string why;
  EXPECT_EQ(git.repo_of(d.path() + "/plain", &why), "");
  EXPECT_THAT(why, HasSubstr("is not in a git repository"));
  EXPECT_THROW(git.take(d.path() + "/plain", 1), SnapshotError);
}

TEST(SnapshotGit, OneReadOnlyCheckoutPerSnapshotRemovedWhenNoJobNeedsIt) {
  TempDir d;
  make_repo(d, "repo");
  std::string repo = d.path() + "/repo";
  GitSnapshots git;
  SnapshotRef s = git.take(repo, 1);
  std::string root = d.path() + "/plan.snapshots";
  std::string dir = ensure_checkout(git, root, s);
  EXPECT_EQ(dir, root + "/" + short_commit(s.commit));
  EXPECT_EQ(d.read("plan.snapshots/" + short_commit(s.commit) + "/untracked.txt"), "new\n");
  struct stat st;
  ASSERT_EQ(::stat((dir + "/train.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u) << "the checkout is read-only";
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u);
  // The second job of the snapshot: the same folder, not checked out again.
  fs::file_time_type made = fs::last_write_time(dir + "/train.py");
  EXPECT_EQ(ensure_checkout(git, root, s), dir);
  EXPECT_EQ(fs::last_write_time(dir + "/train.py"), made);
  EXPECT_EQ(folder_in_checkout(dir, repo, repo + "/sub"), dir + "/sub");
  EXPECT_THAT(prune_checkouts(root, {s.commit}), ::testing::IsEmpty());
  EXPECT_TRUE(fs::exists(dir));
  EXPECT_THAT(prune_checkouts(root, {}), ElementsAre(short_commit(s.commit)));
  EXPECT_FALSE(fs::exists(dir));
}

// Issue 43, point 2: what a job wrote into its checkout (as root, whom read-only modes do not stop)
// was deleted with it. Files not in the commit and files changed since the checkout was made are
// moved to ROOT/kept/COMMIT12 first; Python's caches are not outputs; a checkout nothing wrote
// into leaves nothing behind.
TEST(SnapshotGit, WhatAJobWroteIntoACheckoutIsMovedOutBeforeItIsRemoved) {
  TempDir d;
  make_repo(d, "repo");
  std::string repo = d.path() + "/repo";
  GitSnapshots git;
  std::string root = d.path() + "/plan.snapshots";
  SnapshotRef s = git.take(repo, 1);
  std::string dir = ensure_checkout(git, root, s);
  std::string name = short_commit(s.commit);
  if (::geteuid() != 0)  // what root may do anyway: its owner makes it writable
    for (const char* p : {"", "/train.py"}) fs::permissions(dir + p, fs::perms::owner_write, fs::perm_options::add);
  // A job writes after its checkout is made, not within the file system's clock tick of the
  // checkout's stamp: a file written in that tick has the stamp's time, and reads as not changed
  // (the full suite failed once so, under load).
  usleep(20000);
  d.write("plan.snapshots/" + name + "/checkpoints/a.pt", "weights\n");
  d.write("plan.snapshots/" + name + "/train.py", "print('changed')\n");
  d.write("plan.snapshots/" + name + "/__pycache__/train.cpython-311.pyc", "cache");
  std::vector<KeptWrites> kept;
  EXPECT_THAT(prune_checkouts(root, {}, &git, repo, &kept), ElementsAre(name));
  EXPECT_FALSE(fs::exists(dir));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].checkout, name);
  EXPECT_EQ(kept[0].folder, root + "/kept/" + name);
  EXPECT_FALSE(kept[0].whole);
  EXPECT_THAT(kept[0].files, ElementsAre("checkpoints/a.pt", "train.py"));
  EXPECT_EQ(d.read("plan.snapshots/kept/" + name + "/checkpoints/a.pt"), "weights\n");
  EXPECT_EQ(d.read("plan.snapshots/kept/" + name + "/train.py"), "print('changed')\n");
  // The same snapshot checked out again, written again: a folder of its own, the first kept.
  dir = ensure_checkout(git, root, s);
  if (::geteuid() != 0) fs::permissions(dir, fs::perms::owner_write, fs::perm_options::add);
  d.write("plan.snapshots/" + name + "/out.txt", "2\n");
  kept.clear();
  EXPECT_THAT(prune_checkouts(root, {}, &git, repo, &kept), ElementsAre(name));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].folder, root + "/kept/" + name + ".2");
  EXPECT_EQ(d.read("plan.snapshots/kept/" + name + ".2/out.txt"), "2\n");
  EXPECT_EQ(d.read("plan.snapshots/kept/" + name + "/checkpoints/a.pt"), "weights\n");
  // Nothing written: nothing kept, and the stamp of when it was made goes with it.
  dir = ensure_checkout(git, root, s);
  kept.clear();
  EXPECT_THAT(prune_checkouts(root, {}, &git, repo, &kept), ElementsAre(name));
  EXPECT_TRUE(kept.empty());
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(root)) left.push_back(e.path().filename().string());
  EXPECT_THAT(left, ElementsAre("kept"));
}

// Issue 43, point 10: refs/gpuq/snapshots/* piled up for ever. A queue's refs that neither its state
// nor its event log names go; other queues' refs, and refs that name no queue, stay.
TEST(SnapshotGit, DropRefsDeletesOnlyTheQueuesOwnRefsThatNothingNames) {
  TempDir d;
  make_repo(d, "repo");
  std::string repo = d.path() + "/repo";
  GitSnapshots mine({}, "/q/plan.state.json"), longer({}, "/q/plan.state.json2"), none;
  SnapshotRef a1 = mine.take(repo, 1);
  d.write("repo/train.py", "print('v2')\n");
  SnapshotRef a2 = mine.take(repo, 2);
  SnapshotRef other = longer.take(repo, 2);
  SnapshotRef untagged = none.take(repo, 2);
  EXPECT_NE(a2.commit, other.commit) << "each queue's snapshot is its own commit";
  EXPECT_NE(a2.commit, untagged.commit);
  EXPECT_THAT(none.drop_refs(repo, {}), ::testing::IsEmpty()) << "a queue with no name drops nothing";
  EXPECT_THAT(mine.drop_refs(repo, {a2.commit}), ElementsAre(a1.commit));
  std::string refs = git_in(repo, {"for-each-ref", "--format=%(objectname)", "refs/gpuq/snapshots/"});
  EXPECT_THAT(refs, Not(HasSubstr(a1.commit)));
  for (const SnapshotRef* s : {&a2, &other, &untagged}) EXPECT_THAT(refs, HasSubstr(s->commit));
  EXPECT_THAT(mine.drop_refs(repo, {a2.commit}), ::testing::IsEmpty());
}

// What a checkout holds: each path, its kind, its executable bit, and its bytes or link target.
std::map<std::string, std::string> tree_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string rel = e.path().lexically_relative(dir).generic_string();
    if (e.is_symlink()) out[rel] = "link " + fs::read_symlink(e.path()).string();
    else if (e.is_directory()) out[rel] = "folder";
    else {
      std::ifstream in(e.path(), std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      bool x = (fs::status(e.path()).permissions() & fs::perms::owner_exec) != fs::perms::none;
      out[rel] = (x ? "exec " : "file ") + bytes;
    }
  }
  return out;
}

ino_t inode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

// The next snapshot's checkout shares the files the previous one holds that it did not change
// (hard links): only the changed ones are written. It holds exactly what a checkout of its own
// would: changed, added, removed files, a mode changed, a link changed, a folder gone.
TEST(SnapshotGit, TheNextCheckoutSharesTheUnchangedFilesOfThePreviousOne) {
  TempDir d;
  make_repo(d, "repo");
  std::string repo = d.path() + "/repo";
  d.write("repo/sub/keep.txt", "keep\n");
  d.write("repo/sub/gone.txt", "gone\n");
  d.write("repo/old/only.txt", "only\n");
  d.write("repo/run.sh", "echo run\n");
  fs::create_symlink("train.py", repo + "/link");
  GitSnapshots git;
  std::string root = d.path() + "/plan.snapshots";
  SnapshotRef s1 = git.take(repo, 1);
  std::string dir1 = ensure_checkout(git, root, s1);
  d.write("repo/train.py", "print('v2')\n");
  fs::remove(repo + "/sub/gone.txt");
  fs::remove_all(repo + "/old");
  d.write("repo/new/added.txt", "added\n");
  fs::permissions(repo + "/run.sh", fs::perms::owner_exec, fs::perm_options::add);
  fs::remove(repo + "/link");
  fs::create_symlink("sub/keep.txt", repo + "/link");
  SnapshotRef s2 = git.take(repo, 2);
  ASSERT_NE(s1.commit, s2.commit);
  std::string dir2 = ensure_checkout(git, root, s2);
  std::string own = d.path() + "/own";
  git.check_out(s2, own);  // the same snapshot, checked out whole
  EXPECT_EQ(tree_of(dir2), tree_of(own));
  EXPECT_EQ(tree_of(dir2)["train.py"], "file print('v2')\n");
  EXPECT_EQ(tree_of(dir2)["run.sh"], "exec echo run\n");
  EXPECT_FALSE(fs::exists(dir2 + "/old"));
  EXPECT_EQ(inode_of(dir2 + "/sub/keep.txt"), inode_of(dir1 + "/sub/keep.txt"));
  EXPECT_EQ(inode_of(dir2 + "/staged.txt"), inode_of(dir1 + "/staged.txt"));
  EXPECT_NE(inode_of(dir2 + "/train.py"), inode_of(dir1 + "/train.py"));
  EXPECT_NE(inode_of(dir2 + "/run.sh"), inode_of(dir1 + "/run.sh"));  // a shared inode would change both modes
  EXPECT_EQ(tree_of(dir1)["run.sh"], "file echo run\n");
  EXPECT_EQ(tree_of(dir1)["train.py"], "file print('v1')\n");
  struct stat st;
  ASSERT_EQ(::stat((dir2 + "/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u) << "the checkout is read-only";
  // The first checkout gone (no job needs it), the second is whole.
  EXPECT_THAT(prune_checkouts(root, {s2.commit}), ElementsAre(short_commit(s1.commit)));
  EXPECT_EQ(tree_of(dir2), tree_of(own));
}

// ---- Real runs.

// The issue's test: run loads the plan; train.py is edited while `old` waits; `new` is added after
// the edit. `old` runs the code loaded, `new` the code edited, `history` gives each one's commit,
// `status` says the waiting job's code is older than the tree, and the user's index, branch, stash
// and untracked files are as they were.
TEST(SnapshotRun, AQueuedJobRunsTheCodeLoadedAndAJobAddedAfterAnEditTheNewCode) {
  Beside q;
  RepoLook before = look_at(q.repo);
  auto r = q.start();
  ASSERT_TRUE(eventually([&] { return q.running("gate") && !q.snapshot_of("old").empty(); }, kPatience)) << r->out();
  EXPECT_EQ(look_at(q.repo), before);
  std::string old_commit = q.snapshot_of("old");
  EXPECT_THAT(r->out(), HasSubstr("snapshot " + short_commit(old_commit) + " of " + fs::canonical(q.repo).string() +
                                  " (with uncommitted changes) for 2 jobs: gate, old"));
  q.d.write("repo/train.py", "print('v2')\n");
  RepoLook edited = look_at(q.repo);
  EXPECT_THAT(edited.porcelain, HasSubstr(" M train.py"));
  Output st = q.gpuq({"status", "--gpus", "0"});
  EXPECT_THAT(st.out, HasSubstr("old: runs the code of "));
  EXPECT_THAT(st.out, HasSubstr("; the tree changed since (snapshot " + short_commit(old_commit) + ")"));
  json sj = json::parse(q.gpuq({"status", "--json", "--gpus", "0"}).out);
  size_t seen = 0;
  for (const json& j : sj["jobs"])
    if (j["id"] == "old" && ++seen) {
      EXPECT_EQ(j["snapshot"]["commit"], old_commit);
      EXPECT_EQ(j["snapshot"]["tree_changed"], true);
      EXPECT_EQ(j["snapshot"]["dirty"], true);
    }
  EXPECT_EQ(seen, 1u) << sj.dump(1);
  Output add = q.gpuq({"add", "--id", "new", "--gpus", "0", "--deps", "gate", "--", "job.sh"});
  ASSERT_EQ(add.status, 0) << add.err;
  std::string new_commit = q.snapshot_of("new");
  ASSERT_FALSE(new_commit.empty());
  EXPECT_NE(new_commit, old_commit);
  EXPECT_THAT(add.out, HasSubstr("added new (snapshot " + short_commit(new_commit) + ", with uncommitted changes)"));
  ASSERT_TRUE(eventually([&] { return r->out().find("plan reloaded: +1 job (new)") != std::string::npos; }, kPatience))
      << r->out();
  q.d.write("go", "");
  Output end = r->wait(kPatience);
  EXPECT_EQ(end.status, 0) << r->out() << r->err();
  EXPECT_EQ(q.d.read("ran-old.txt"), "print('v1')\n");
  EXPECT_EQ(q.d.read("ran-new.txt"), "print('v2')\n");
  // What ran, recorded: each attempt's commit, and what checks it out again.
  json h = json::parse(q.gpuq({"history", "--json"}).out);
  std::map<std::string, json> by_id;
  for (const json& a : h) by_id[a["id"]] = a;
  ASSERT_TRUE(by_id["old"].contains("snapshot")) << h.dump(1);
  EXPECT_EQ(by_id["old"]["snapshot"]["commit"], old_commit);
  EXPECT_EQ(by_id["new"]["snapshot"]["commit"], new_commit);
  EXPECT_EQ(by_id["new"]["snapshot"]["dirty"], true);
  EXPECT_EQ(by_id["new"]["snapshot"]["repo"], fs::canonical(q.repo).string());
  EXPECT_EQ(git_in(by_id["old"]["snapshot"]["repo"], {"show", old_commit + ":train.py"}), "print('v1')\n");
  EXPECT_EQ(git_in(by_id["new"]["snapshot"]["repo"], {"show", new_commit + ":train.py"}), "print('v2')\n");
  json one = json::parse(q.gpuq({"history", "--job", "new", "--json"}).out);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0]["snapshot"]["ref"], "refs/gpuq/snapshots/" + new_commit);
  EXPECT_THAT(q.gpuq({"history"}).out, HasSubstr("code " + short_commit(old_commit) + " (uncommitted changes)"));
  // The user's repository: as edited, nothing else.
  EXPECT_EQ(look_at(q.repo), edited);
  EXPECT_EQ(edited.index, before.index);
  EXPECT_EQ(edited.stash, before.stash);
  EXPECT_EQ(edited.head, before.head);
  EXPECT_EQ(edited.branch, before.branch);
  // Every job ended: no checkout is left.
  EXPECT_TRUE(fs::is_empty(q.d.path() + "/plan.snapshots")) << r->out();
}

// A restart of run does not snapshot a queued job's code again: it runs what the first run loaded.
TEST(SnapshotRun, ARestartedRunKeepsTheSnapshotOfAQueuedJob) {
  Beside q;
  auto r = q.start();
  ASSERT_TRUE(eventually([&] { return q.running("gate") && !q.snapshot_of("old").empty(); }, kPatience)) << r->out();
  std::string commit = q.snapshot_of("old");
  r->signal(SIGTERM);
  ASSERT_EQ(r->wait(kPatience).status, 0) << r->out() << r->err();
  q.d.write("repo/train.py", "print('v2')\n");
  auto again = q.start();
  ASSERT_TRUE(eventually([&] { return again->out().find("adopted 1 running job") != std::string::npos; }, kPatience))
      << again->out();
  EXPECT_THAT(again->out(), Not(HasSubstr("snapshot ")));
  q.d.write("go", "");
  ASSERT_EQ(again->wait(kPatience).status, 0) << again->out() << again->err();
  EXPECT_EQ(q.d.read("ran-old.txt"), "print('v1')\n");
  EXPECT_EQ(q.snapshot_of("old"), commit);
}

// A job edited in the plan while no run went on is loaded anew by the next run: the code as it is then.
TEST(SnapshotRun, AJobEditedBetweenTwoRunsTakesTheCodeOfTheRestart) {
  Beside q;
  auto r = q.start();
  ASSERT_TRUE(eventually([&] { return q.running("gate") && !q.snapshot_of("old").empty(); }, kPatience)) << r->out();
  std::string commit = q.snapshot_of("old");
  r->signal(SIGTERM);
  ASSERT_EQ(r->wait(kPatience).status, 0) << r->out() << r->err();
  q.d.write("repo/train.py", "print('v2')\n");
  q.d.write("plan.json", R"({"workdir": "repo", "settings": {"snapshot": "git"}, "jobs": [
      {"id": "gate", "script": "gate.sh", "gpus": 0},
      {"id": "old", "script": "job.sh", "gpus": 0, "deps": ["gate"], "env": {"EDITED": "1"}}]})");
  auto again = q.start();
  ASSERT_TRUE(eventually([&] { return again->out().find("for 1 job: old") != std::string::npos; }, kPatience))
      << again->out();
  // Said during the tick, saved at its end.
  EXPECT_TRUE(eventually([&] { return q.snapshot_of("old") != commit; }, kPatience));
  q.d.write("go", "");
  ASSERT_EQ(again->wait(kPatience).status, 0) << again->out() << again->err();
  EXPECT_EQ(q.d.read("ran-old.txt"), "print('v2')\n");
}

// Issue 43, point 2, as the issue ran it: as root, a job writing checkpoints/a.pt relative to its
// working folder writes into its snapshot's checkout; run said `done n`, then removed the checkout
// and the file with it. The file is kept, and run names it and where it is.
TEST(SnapshotRun, AnOutputAJobWroteIntoItsCheckoutIsKeptAndNamed) {
  PlanFolder q(1);
  const std::string& r = q.d.path();
  q.d.write(".gitignore", "logs/\n*.state.json\n*.events.jsonl\n");
  q.d.write("train.py", "print('v1')\n");
  // Not root: the job makes its folder writable first, as its owner may (root needs not).
  q.d.write("job.sh", std::string(::geteuid() == 0 ? "" : "chmod u+w .\n") +
                          "mkdir -p checkpoints && echo weights > checkpoints/a.pt\n");
  q.plan(R"({"settings": {"snapshot": "git"}, "jobs": [{"id": "n", "script": "job.sh", "gpus": 0}]})");
  git_in(r, {"init", "-q"});
  git_in(r, {"add", "-A"});
  git_in(r, {"commit", "-qm", "first"});
  Output run = q.gpuq({"run", "--gpus", "0", "--max-retries", "0"});
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  std::string commit = q.state()["n"]["snapshot"].get<std::string>();
  std::string kept = fs::canonical(r).string() + "/plan.snapshots/kept/" + short_commit(commit);
  EXPECT_EQ(q.d.read("plan.snapshots/kept/" + short_commit(commit) + "/checkpoints/a.pt"), "weights\n") << run.out;
  size_t said = run.out.find("jobs wrote into the checkout of snapshot " + short_commit(commit) +
                             ": checkpoints/a.pt; kept in ");
  EXPECT_NE(said, std::string::npos) << run.out;
  EXPECT_THAT(run.out, HasSubstr("/plan.snapshots/kept/" + short_commit(commit) + " (outputs belong under $GPUQ_WORKDIR"));
  EXPECT_LT(said, run.out.find("removed the checkout of snapshot " + short_commit(commit))) << run.out;
  EXPECT_FALSE(fs::exists(r + "/plan.snapshots/" + short_commit(commit)));
}

// Issue 43, point 10, in a real run: a job edited twice while it waits took three snapshots; the
// middle one no attempt ran, and its ref goes once the run ends. The refs of what ran stay (history
// checks them out again), and so do refs gpuq's other queues or older versions made.
TEST(SnapshotRun, TheRefOfASnapshotNoAttemptRanIsDeletedWhenItsCheckoutsGo) {
  PlanFolder q(1);
  const std::string& r = q.d.path();
  q.d.write(".gitignore", "logs/\n*.state.json\n*.events.jsonl\n*.lock\n*.run.json\n*.run.plan.json\n");
  q.d.write("gate.sh", "while [ ! -e \"$GPUQ_WORKDIR/go\" ]; do sleep 0.05; done\n");
  q.d.write("job.sh", "true\n");
  auto plan = [&](int edit) {
    q.plan(fmt::format(R"({{"settings": {{"snapshot": "git"}}, "jobs": [{{"id": "gate", "script": "gate.sh", "gpus": 0}},
        {{"id": "b", "script": "job.sh", "gpus": 0, "deps": ["gate"], "env": {{"EDIT": "{}"}}}}]}})", edit));
  };
  plan(0);
  git_in(r, {"init", "-q"});
  git_in(r, {"add", "-A"});
  git_in(r, {"commit", "-qm", "first"});
  std::string older = GitSnapshots().take(r, 1).commit;  // as `gpuq add` or an older gpuq made it: no queue named
  auto run = q.background({"run", "--gpus", "0", "--max-retries", "0", "--poll", "0.2"});
  ASSERT_TRUE(eventually([&] { return q.status_of("gate") == "running"; }, kPatience)) << run->out();
  std::string first = q.state()["b"]["snapshot"].get<std::string>();
  std::vector<std::string> taken{first};
  for (int edit : {1, 2}) {
    plan(edit);
    ASSERT_TRUE(eventually([&] {
      json s = q.state();
      return s["b"].contains("snapshot") && s["b"]["snapshot"] != taken.back();
    }, kPatience)) << run->out();
    taken.push_back(q.state()["b"]["snapshot"].get<std::string>());
  }
  q.d.write("go", "");
  Output end = run->wait(kPatience);
  ASSERT_EQ(end.status, 0) << run->out() << run->err();
  std::string refs = git_in(r, {"for-each-ref", "--format=%(objectname)", "refs/gpuq/snapshots/"});
  EXPECT_THAT(refs, HasSubstr(first)) << "gate ran it";
  EXPECT_THAT(refs, Not(HasSubstr(taken[1]))) << "no attempt ran it:\n" << run->out();
  EXPECT_THAT(refs, HasSubstr(taken[2])) << "b ran it";
  EXPECT_THAT(refs, HasSubstr(older));
  EXPECT_THAT(run->out(), HasSubstr("deleted the ref of snapshot " + short_commit(taken[1]) +
                                    " (refs/gpuq/snapshots/): no job and no attempt in the event log runs it"));
  EXPECT_EQ(git_in(r, {"cat-file", "-t", taken[1]}), "commit\n") << "git gc's to drop, not gpuq";
}

// A workdir in no git repository: run refuses in one line, validate says it, both naming the
// plan file and the job.
TEST(SnapshotRun, AWorkdirInNoRepositoryIsRefusedByRunAndNamedByValidate) {
  PlanFolder q(1);
  q.d.write("a.sh", "true\n");
  q.d.write("plan.json", R"([{"id": "a", "script": "a.sh", "gpus": 0, "snapshot": "git"}])");
  Output run = q.gpuq({"run", "--gpus", "0"});
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("gpuq run: plan.json: job \"a\" asks for \"snapshot\": \"git\", but the workdir "));
  EXPECT_THAT(run.err, HasSubstr("is not in a git repository"));
  EXPECT_EQ(count_of(run.err, "\n"), 1u) << run.err;
  EXPECT_FALSE(fs::exists(q.d.path() + "/plan.state.json"));
  Output v = q.gpuq({"validate", "--gpus", "0"});
  EXPECT_EQ(v.status, 2);
  EXPECT_THAT(v.out, HasSubstr("error: plan.json: job \"a\" asks for \"snapshot\": \"git\", but the workdir "));
  // The setting, not a job's field, is named as such.
  q.d.write("plan.json", R"({"settings": {"snapshot": "git"}, "jobs": [{"id": "a", "script": "a.sh", "gpus": 0}]})");
  EXPECT_THAT(q.gpuq({"run", "--gpus", "0"}).err,
              HasSubstr("plan.json: \"settings\" give \"snapshot\": \"git\", but the workdir "));
  Output add = q.gpuq({"add", "--id", "b", "--gpus", "0", "--", "a.sh"});
  EXPECT_EQ(add.status, 2);
  EXPECT_THAT(add.err, HasSubstr("b not added"));
  EXPECT_THAT(q.d.read("plan.json"), Not(HasSubstr("\"b\"")));
}

// Without the setting nothing changes: the job runs in the workdir, with no snapshot anywhere.
TEST(SnapshotRun, APlanWithoutTheSettingRunsInTheWorkdirAsBefore) {
  PlanFolder q(1);
  q.d.write("a.sh", "pwd > where.txt; echo \"[${GPUQ_WORKDIR-unset}]\" >> where.txt\n");
  q.d.write("plan.json", R"([{"id": "a", "script": "a.sh", "gpus": 0}])");
  git_in(q.d.path(), {"init", "-q"});
  Output run = q.gpuq({"run", "--gpus", "0"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(q.d.read("where.txt"), fs::canonical(q.d.path()).string() + "\n[unset]\n");
  EXPECT_FALSE(fs::exists(q.d.path() + "/plan.snapshots"));
  EXPECT_EQ(git_in(q.d.path(), {"for-each-ref", "refs/gpuq"}), "");
  EXPECT_THAT(q.state()["a"].dump(), Not(HasSubstr("snapshot")));
}

// A plan kept in its own repository, whose .gitignore keeps gpuq's files out of git as anyone
// would write it: snapshots are taken at the start and mid-run (once logs/ exists, by `add`),
// and every job runs from its snapshot (git 2.39 refused the add of an ignored path by name).
TEST(SnapshotRun, APlanInARepositoryWhoseGitignoreIgnoresGpuqsFilesRunsEndToEnd) {
  PlanFolder q(1);
  const std::string& r = q.d.path();
  q.d.write(".gitignore", "logs/\n*.state.json\n*.state.json.bak\n*.events.jsonl\n*.lock\n*.run.json\n"
                          "*.run.plan.json\n__pycache__/\n*.ckpt\n");
  q.d.write("train.py", "print('v1')\n");
  q.d.write("job.sh", "cat train.py >> \"$GPUQ_WORKDIR/ran-$GPUQ_JOB_ID.txt\"\n");
  q.plan(R"({"settings": {"snapshot": "git"}, "jobs": [{"id": "a", "script": "job.sh", "gpus": 0}]})");
  git_in(r, {"init", "-q"});
  git_in(r, {"add", "-A"});
  git_in(r, {"commit", "-qm", "first"});
  Output v = q.gpuq({"validate"});
  EXPECT_EQ(v.status, 0) << v.out << v.err;
  Output first = q.gpuq({"run", "--gpus", "0", "--max-retries", "0"});
  EXPECT_EQ(first.status, 0) << first.out << first.err;
  EXPECT_THAT(first.out, HasSubstr("all jobs finished: 1 done"));
  ASSERT_TRUE(fs::is_directory(r + "/logs"));
  q.d.write("train.py", "print('v2')\n");
  Output add = q.gpuq({"add", "--id", "b", "--gpus", "0", "--", "job.sh"});
  EXPECT_EQ(add.status, 0) << add.out << add.err;
  Output second = q.gpuq({"run", "--gpus", "0", "--max-retries", "0"});
  EXPECT_EQ(second.status, 0) << second.out << second.err;
  EXPECT_THAT(second.out, HasSubstr("all jobs finished: 2 done"));
  EXPECT_EQ(q.d.read("ran-a.txt"), "print('v1')\n");
  EXPECT_EQ(q.d.read("ran-b.txt"), "print('v2')\n");
  // gpuq's own files are in no snapshot, ignored or not (PLAN.snapshots/ is not ignored here).
  json s = json::parse(q.d.read("plan.state.json"));
  std::string files = files_of(r, s["b"]["snapshot"].get<std::string>());
  EXPECT_THAT(files, Not(HasSubstr("logs/")));
  EXPECT_THAT(files, Not(HasSubstr("plan.state.json")));
  EXPECT_THAT(files, Not(HasSubstr("plan.snapshots")));
  EXPECT_THAT(files, HasSubstr("train.py"));
}
