// `gpuq run`'s steps for jobs that run from a snapshot of their code (the `snapshot` setting):
// take one per load, check it out at a launch, remove the checkouts no job needs any more.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <set>

#include "gpuq/core/job_words.h"
#include "gpuq/core/snapshot.h"
#include "gpuq/live/run_loop.h"
#include "run_tick.h"

namespace gpuq {

namespace {

// Whether a job waiting (or held, or blocked) may run again: it needs its snapshot.
bool waits_to_run(Status s) { return s == Status::Pending || s == Status::Held || s == Status::Blocked; }

}  // namespace

// One snapshot per load, for the jobs that use one and are not running or finished: those that
// have none yet (new, or the first run) and those the reload changed. A queued job keeps the
// snapshot it was loaded with, across reloads that leave it alone and restarts of `run`.
void RunLoop::take_snapshots(Tick& t) {
  if (!snap_.store || !snap_.due) return;
  snap_.due = false;
  std::vector<size_t> need;
  for (size_t i = 0; i < plan_.jobs.size(); ++i) {
    const Job& j = plan_.jobs[i];
    if (!uses_snapshot(j, snap_.setting)) continue;
    const JobState* s = q_->state().of(plan_, i);
    if (s && !waits_to_run(s->status)) continue;
    if (!s || !s->snapshot || snap_.changed.count(j.id)) need.push_back(i);
  }
  snap_.changed.clear();
  if (need.empty()) return;
  std::vector<std::string> ids;
  for (size_t i : need) ids.push_back(plan_.jobs[i].id);
  SnapshotRef snap;
  try {
    snap = snap_.store->take(snap_.workdir, t.now);
  } catch (const SnapshotError& e) {
    // Their launch tries again, and fails them if it cannot either.
    say(t, fmt::format("cannot take a snapshot of {} for {}: {}", snap_.workdir, id_list(ids), e.what()));
    return;
  }
  for (size_t i : need) set_snapshot(q_->entry(i), snap);
  say(t, fmt::format("snapshot {} of {}{} for {} job{}: {}", short_commit(snap.commit), snap.repo,
                         snap.dirty ? " (with uncommitted changes)" : "", need.size(), need.size() == 1 ? "" : "s",
                         id_list(ids)));
}

// The job runs in the checkout of its snapshot (made at the first launch of each snapshot),
// in the workdir's folder there, told the real workdir in GPUQ_WORKDIR. A job without a
// snapshot (its load could not take one) gets one now; one that cannot be taken fails it.
namespace {

// A snapshot that git could not make or check out for want of room or of a writable folder waits,
// as a launch short of them does (CannotStartNow): git names the cause only in its words.
[[noreturn]] void snapshot_failed(const std::string& what, const std::string& where, bool for_good) {
  int err = what.find(std::strerror(ENOSPC)) != std::string::npos   ? ENOSPC
            : what.find(std::strerror(EDQUOT)) != std::string::npos ? EDQUOT
            : what.find(std::strerror(EROFS)) != std::string::npos  ? EROFS
                                                                    : 0;
  if (err) throw CannotStartNow(what, where, err);
  if (for_good) throw CannotStart(what);
  throw std::runtime_error(what);
}

}  // namespace

void RunLoop::prepare_snapshot(Tick& t, size_t i, LaunchSpec& spec) {
  JobState& e = q_->entry(i);
  std::optional<SnapshotRef> snap = snapshot_of(e);
  if (!snap) {
    try {
      snap = snap_.store->take(snap_.workdir, t.now);
    } catch (const SnapshotError& x) {
      snapshot_failed(fmt::format("it asks for \"snapshot\": \"git\", and none can be taken: {}", x.what()),
                      snap_.workdir, true);
    }
    set_snapshot(e, *snap);
  }
  std::string dir;
  try {
    dir = ensure_checkout(*snap_.store, snap_.root, *snap);
  } catch (const SnapshotError& x) {
    snapshot_failed(fmt::format("cannot check out its snapshot {}: {}", short_commit(snap->commit), x.what()),
                    snap_.root, false);
  }
  spec.cwd = folder_in_checkout(dir, snap->repo, snap_.workdir);
  std::error_code ec;
  if (!std::filesystem::is_directory(spec.cwd, ec))
    throw CannotStart(fmt::format("its workdir {} is not in its snapshot {} (git tracks no file in it)", snap_.workdir,
                                  short_commit(snap->commit)));
  spec.env.insert(spec.env.begin(), {{"GPUQ_WORKDIR", snap_.workdir}, {"GPUQ_SNAPSHOT", snap->commit}});
}

// A checkout stays while a job that is not finished (or will be retried) has its snapshot.
void RunLoop::prune_snapshots(Tick& t) {
  std::error_code ec;
  if (!snap_.store || !std::filesystem::is_directory(snap_.root, ec)) return;  // no checkout: nothing to look at
  std::set<std::string> keep;
  for (const auto& [id, s] : q_->state().entries()) {
    if (!s.snapshot) continue;
    bool needed = waits_to_run(s.status) || s.status == Status::Running;
    if (!needed && s.status == Status::Failed)
      if (const Job* j = plan_.find(id)) {
        const Life& life = q_->engine().life(static_cast<size_t>(j - plan_.jobs.data()));
        if (const Ended* d = std::get_if<Ended>(&life))
          needed = will_retry(*d, j->max_retries.value_or(opt_.max_retries));
      }
    if (needed) keep.insert(*s.snapshot);
  }
  std::string repo;  // the workdir's repository, as the snapshots of the state name it
  std::set<std::string> repos, named;
  for (const auto& [id, s] : q_->state().entries()) {
    if (s.snapshot) named.insert(*s.snapshot);
    if (s.snapshot_repo) repos.insert(*s.snapshot_repo), repo = *s.snapshot_repo;
  }
  std::vector<KeptWrites> kept;
  std::vector<std::string> gone = prune_checkouts(snap_.root, keep, snap_.store, repo, &kept);
  // A user's output is never deleted: what a job wrote into its checkout (as root, whom its
  // read-only modes do not stop) was moved out first, and is named.
  for (const KeptWrites& k : kept) {
    if (k.whole && !told_.fresh("kept whole:" + k.checkout)) continue;  // each tick tries again; said once
    std::string files = few_of(k.files, 5);
    say(t, fmt::format("jobs wrote into the checkout of snapshot {}: {}; {} {} (outputs belong under "
                           "$GPUQ_WORKDIR, the real workdir: a checkout is removed once no job needs it)",
                           k.checkout, files, k.whole ? "not all could be moved: the checkout is left whole at" : "kept in",
                           k.folder));
  }
  if (gone.empty()) return;
  say(t, fmt::format("removed the checkout{} of snapshot{} {}: no job waiting or running needs {}",
                         gone.size() == 1 ? "" : "s", gone.size() == 1 ? "" : "s", id_list(gone),
                         gone.size() == 1 ? "it" : "them"));
  // The refs that keep this queue's snapshots from git gc, where neither the state nor the event
  // log (what `history` shows, and checks out again) names their commit any more: those of
  // snapshots taken for jobs that changed again before they ran. Not without the event log.
  if (!log_.journal) return;
  std::vector<std::string> warnings;
  for (const Event& e : read_events(log_.journal->path(), &warnings))
    if (e.snapshot) named.insert(*e.snapshot);
  if (!warnings.empty()) return;  // a torn line may have named one
  std::vector<std::string> dropped;
  for (const std::string& r : repos)
    for (std::string& c : snap_.store->drop_refs(r, named)) dropped.push_back(short_commit(c));
  if (!dropped.empty())
    say(t, fmt::format("deleted the ref{} of snapshot{} {} (refs/gpuq/snapshots/): no job and no attempt in the "
                           "event log runs {}, and git gc may drop {}",
                           dropped.size() == 1 ? "" : "s", dropped.size() == 1 ? "" : "s", id_list(dropped),
                           dropped.size() == 1 ? "it" : "them", dropped.size() == 1 ? "it" : "them"));
}

}  // namespace gpuq
