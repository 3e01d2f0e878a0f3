#include "gpuq/live/plan_watch.h"

#include <sys/stat.h>

#include <functional>
#include <string_view>

#include "gpuq/live/store.h"

namespace gpuq {

namespace {

size_t hash_of(const std::string& text) { return std::hash<std::string_view>{}(text); }

}  // namespace

PlanFile::PlanFile(std::string path, std::vector<int> node_gpus, const std::string& loaded_text, double settle_s)
    : path_(std::move(path)), gpus_(std::move(node_gpus)), settle_s_(settle_s), taken_(hash_of(loaded_text)) {
  seen_ = stat_now();
}

PlanFile::FileId PlanFile::stat_now() const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return {};
  return {static_cast<long long>(st.st_size), st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
          st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec, static_cast<unsigned long long>(st.st_ino)};
}

PlanLook PlanFile::look(double now) {
  PlanLook l;
  FileId id = stat_now();
  // The same file, not touched in the last second: the same text (a write within the
  // clock's granularity of the last look could keep the times; those are read again).
  double changed_at = static_cast<double>(std::max(id.mtime_ns, id.ctime_ns)) / 1e9;
  if (id == seen_ && !pending_ && now - changed_at > 1) return l;
  std::string text;
  std::vector<std::string> errors;
  try {
    if (std::string why = plan_file_problem(path_); !why.empty()) {
      errors.push_back(why);
    } else if (auto t = read_file(path_)) {
      text = std::move(*t);
    } else {
      errors.push_back(path_ + ": the file is gone");
    }
  } catch (const StoreError& e) {
    errors.push_back(e.what());
  }
  size_t h = hash_of(text);
  // The version in use again after a broken one was said: taken again, so that run says so
  // (as it does for any valid edit), every time.
  if (errors.empty() && ((h == taken_ && !reported_) || h == reported_)) {
    seen_ = id;
    pending_.reset();
    if (now - changed_at <= 1) l.recheck_in = 1;
    return l;
  }
  if (errors.empty()) {
    PlanLoad load = parse_plan(text, path_, gpus_);
    if (load.plan && adapt)
      if (std::string why = adapt(*load.plan); !why.empty()) {
        load.plan.reset();
        load.errors.push_back(path_ + ": " + why);
      }
    if (load.plan) {
      seen_ = id;
      taken_ = h;
      pending_.reset();
      reported_.reset();
      l.kind = PlanLook::Kind::Loaded;
      l.plan = std::move(load.plan);
      l.text = std::move(text);
      l.unknown_fields = std::move(load.unknown_fields);
      l.recheck_in = settle_s_;  // a second write right behind this one (same size, same clock tick)
      return l;
    }
    errors = std::move(load.errors);
  }
  if (pending_ != h) {
    pending_ = h;
    pending_since_ = now;
  }
  if (now - pending_since_ < settle_s_) {
    l.kind = PlanLook::Kind::Settling;
    l.recheck_in = pending_since_ + settle_s_ - now;
    return l;
  }
  seen_ = id;
  pending_.reset();
  reported_ = h;
  l.kind = PlanLook::Kind::Broken;
  l.errors = std::move(errors);
  return l;
}

}  // namespace gpuq
