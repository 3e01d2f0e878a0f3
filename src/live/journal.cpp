#include "gpuq/live/journal.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cmath>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "gpuq/live/store.h"

namespace gpuq {

std::string predictions_path_for(const std::string& state_path) {
  std::string events = events_path_for(state_path);
  return events.substr(0, events.size() - std::string(".events.jsonl").size()) + ".predictions.jsonl";
}

std::string events_path_for(const std::string& state_path) {
  const std::string suffix = ".state.json";
  if (state_path.size() >= suffix.size() && state_path.compare(state_path.size() - suffix.size(), suffix.size(), suffix) == 0)
    return state_path.substr(0, state_path.size() - suffix.size()) + ".events.jsonl";
  return state_path + ".events.jsonl";
}

namespace {

// The parts of the log, oldest first: PATH.1, PATH.2, ... while they exist, then PATH.
std::vector<std::string> parts_of(const std::string& path) {
  std::vector<std::string> parts;
  for (int n = 1;; ++n) {
    std::string p = fmt::format("{}.{}", path, n);
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) break;
    parts.push_back(p);
  }
  parts.push_back(path);
  return parts;
}

// The events in `text` (from `first_line` on), complete lines only; returns the bytes used.
size_t parse_lines(std::string_view text, const std::string& file, long long first_line, std::vector<Event>& out,
                   std::vector<std::string>* warnings, bool take_last_unended) {
  size_t pos = 0, used = 0;
  long long line_no = first_line;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    bool ended = nl != std::string_view::npos;
    if (!ended && !take_last_unended) break;
    std::string_view line = text.substr(pos, (ended ? nl : text.size()) - pos);
    if (!line.empty()) {
      std::string problem;
      if (auto e = parse_event(line, &problem))
        out.push_back(std::move(*e));
      else if (warnings)
        warnings->push_back(fmt::format("{} line {}: skipped: {}", file, line_no, problem));
    }
    pos = ended ? nl + 1 : text.size();
    used = pos;
    ++line_no;
  }
  return used;
}

}  // namespace

std::vector<Event> read_events(const std::string& path, std::vector<std::string>* warnings) {
  std::vector<Event> out;
  for (const std::string& part : parts_of(path)) {
    std::optional<std::string> text = read_file(part, true);
    if (text) parse_lines(*text, part, 1, out, warnings, true);
  }
  return out;
}

void append_events(const std::string& path, const std::vector<Event>& events) {
  if (events.empty()) return;
  std::string text;
  for (const Event& e : events) {
    text += event_line(e);
    text += '\n';
  }
  append_lines(path, text, "the event log", true);
}

void append_lines(const std::string& path, const std::string& lines, std::string_view what, bool sync) {
  int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);  // read: its last byte
  if (fd < 0) {
    int e = errno;
    throw StoreError(fmt::format("cannot open {} {}: {}", what, path, std::strerror(e)), path, e);
  }
  std::string text;
  // A line cut short by a crash stays a line of its own (readers skip it).
  struct stat st {};
  bool sized = ::fstat(fd, &st) == 0;
  if (sized && st.st_size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') text += '\n';
  }
  text += lines;
  try {
    write_all(fd, text, path);
  } catch (...) {
    // Cut back to what it held (a full disk took part of it).
    if (sized && ::ftruncate(fd, st.st_size) != 0) {
      // the cut line stays; readers skip a line cut short
    }
    ::close(fd);
    throw;
  }
  int synced = sync ? ::fsync(fd) : 0;
  int err = errno;
  ::close(fd);
  if (synced != 0) throw StoreError(fmt::format("cannot fsync {} {}: {}", what, path, std::strerror(err)), path, err);
}

Journal::Journal(std::string path, double max_bytes) : path_(std::move(path)), max_bytes_(max_bytes) {}

void Journal::apply(const Event& e) {
  if (!job_event(e)) return;  // the plan's own (reload, pause, resume)
  auto it = index_.find(e.id);
  if (it == index_.end()) {
    it = index_.emplace(e.id, view_.size()).first;
    view_.emplace_back(e.id, Seen{});
  }
  apply_event(e, view_[it->second].second);
}

namespace {

// Makes the empty log at `path`, its mtime when logging began: the tick's own clock where given.
// The file's own time (coarse, and taken later in the tick) may come after the start run records
// for the jobs this tick launches, and a restart would take them for jobs from before the log,
// whose start is not logged (a SIGKILL before the first append lost job0's start).
void begin_log(const std::string& path, std::optional<double> now) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (now && *now > 0) {
    struct timespec at[2];
    at[0].tv_nsec = UTIME_OMIT;
    double begin = *now - 0.001;  // below it, whatever the rounding of the read back
    at[1].tv_sec = static_cast<time_t>(std::floor(begin));
    at[1].tv_nsec = static_cast<long>((begin - std::floor(begin)) * 1e9);
    ::futimens(fd, at);
  }
  ::close(fd);
}

}  // namespace

std::vector<Event> Journal::catch_up(const State& state, std::vector<std::string>* warnings,
                                    std::vector<Event>* past, std::optional<double> now) {
  std::vector<Event> others;
  if (!loaded_) {
    loaded_ = true;
    std::vector<std::string> parts = parts_of(path_);
    bool any = false;
    for (const std::string& p : parts) {
      struct stat st {};
      any = any || ::stat(p.c_str(), &st) == 0;
    }
    if (!any) {
      // No log yet: logging begins with the state as it is, and the (empty) log is made
      // now, so that a run killed before its first append does not take a job it started
      // for one that ran before logging began (its mtime says when logging began).
      begin_log(path_, now);
      for (const auto& [id, s] : state.entries()) {
        index_.emplace(id, view_.size());
        view_.emplace_back(id, seen_of(s));
      }
      return others;
    }
    std::vector<Event> all = read_events(path_, warnings);
    count_ = static_cast<long long>(all.size());
    for (const Event& e : all) apply(e);
    for (const Event& e : all) begin_ = std::min(begin_.value_or(e.t), e.t);
    if (struct stat made {}; !begin_ && ::stat(path_.c_str(), &made) == 0)
      begin_ = static_cast<double>(made.st_mtim.tv_sec) + made.st_mtim.tv_nsec * 1e-9;
    // In the state's order, so that record() finds each job where it looks first.
    std::vector<std::pair<std::string, Seen>> ordered;
    ordered.reserve(view_.size());
    std::vector<bool> taken(view_.size());
    for (const auto& [id, s] : state.entries())
      if (auto it = index_.find(id); it != index_.end() && !taken[it->second]) {
        taken[it->second] = true;
        ordered.push_back(std::move(view_[it->second]));
      }
    for (size_t i = 0; i < view_.size(); ++i)
      if (!taken[i]) ordered.push_back(std::move(view_[i]));
    view_ = std::move(ordered);
    index_.clear();
    for (size_t i = 0; i < view_.size(); ++i) index_.emplace(view_[i].first, i);
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0) {
      offset_ = st.st_size;
      inode_ = st.st_ino;
    }
    if (past) *past = std::move(all);
    return others;
  }
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return others;
  if (st.st_ino != inode_ || st.st_size < offset_) offset_ = 0;  // a new file (or one cut down by hand)
  inode_ = st.st_ino;
  if (st.st_size == offset_) return others;
  int fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return others;
  std::string text(static_cast<size_t>(st.st_size - offset_), '\0');
  ssize_t n = ::pread(fd, text.data(), text.size(), offset_);
  ::close(fd);
  if (n <= 0) return others;
  text.resize(static_cast<size_t>(n));
  size_t used = parse_lines(text, path_, 0, others, warnings, false);
  offset_ += static_cast<long long>(used);
  count_ += static_cast<long long>(others.size());
  for (const Event& e : others) apply(e);
  return others;
}

std::vector<Event> Journal::record(const State& state, double now, std::string_view by, std::vector<Event> made,
                                   const std::map<std::string, double>& not_yet) {
  // The writer's own events first, on the view (undone if the append fails).
  std::vector<std::pair<std::string, std::optional<Seen>>> undo;
  for (const Event& e : made) {
    if (!job_event(e)) continue;
    auto it = index_.find(e.id);
    undo.emplace_back(e.id, it == index_.end() ? std::nullopt : std::optional<Seen>(view_[it->second].second));
    apply(e);
  }
  std::vector<Event> events = std::move(made);
  std::vector<std::pair<std::string, Seen>> changed;
  const auto& entries = state.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [id, s] = entries[i];
    if (!not_yet.empty() && not_yet.count(id)) continue;
    // A job the log has no word of: pending (new to the plan, or run by the original since
    // the log began), unless it started before the log began (its past is not logged).
    static const Seen kPending{};
    Seen past;
    const Seen* before = &kPending;
    if (i < view_.size() && view_[i].first == id) {
      before = &view_[i].second;
    } else if (auto it = index_.find(id); it != index_.end()) {
      before = &view_[it->second].second;
    } else if (begin_ && s.start && *s.start < *begin_) {
      past = seen_of(s);
      before = &past;
    }
    if (before && *before == seen_of(s)) continue;
    std::vector<Event> e = events_between(id, before, s, now, by);
    changed.emplace_back(id, seen_of(s));
    for (Event& x : e) events.push_back(std::move(x));
  }
  if (events.empty()) return events;
  try {
    append_events(path_, events);
  } catch (const StoreError&) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      size_t at = index_.at(it->first);
      if (it->second)
        view_[at].second = *it->second;
      else
        view_[at].second = Seen{};
    }
    throw;
  }
  for (auto& [id, seen] : changed) {
    auto it = index_.find(id);
    if (it == index_.end()) {
      index_.emplace(id, view_.size());
      view_.emplace_back(id, seen);
    } else {
      view_[it->second].second = seen;
    }
  }
  count_ += static_cast<long long>(events.size());
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    offset_ = st.st_size;
    inode_ = st.st_ino;
  }
  rotate_if_big();
  return events;
}

bool Journal::append_plan_event(const Event& e) {
  struct stat st {};
  bool read_all = ::stat(path_.c_str(), &st) == 0 && st.st_ino == inode_ && st.st_size == offset_;
  append_events(path_, {e});
  // Nothing of others' unread: our own line is not theirs to catch up with.
  if (!read_all || ::stat(path_.c_str(), &st) != 0) return false;
  offset_ = st.st_size;
  ++count_;
  return true;
}

void Journal::rotate_if_big() {
  if (max_bytes_ <= 0 || static_cast<double>(offset_) <= max_bytes_) return;
  std::vector<std::string> parts = parts_of(path_);
  std::string to = fmt::format("{}.{}", path_, parts.size());  // parts has the current file last
  if (::rename(path_.c_str(), to.c_str()) == 0) {
    offset_ = 0;
    inode_ = 0;
  }
}

}  // namespace gpuq
