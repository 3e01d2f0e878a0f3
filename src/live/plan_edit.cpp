#include "gpuq/live/plan_edit.h"
#include "gpuq/core/hint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpuq/core/local_time.h"
#include "gpuq/live/journal.h"
#include "gpuq/live/store.h"

namespace gpuq {

std::optional<double> paused_since(const PlanPaths& paths) {
  struct stat st {};
  if (::stat(paths.paused.c_str(), &st) != 0) return std::nullopt;
  double mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
  try {
    auto text = read_file(paths.paused);
    if (!text) return std::nullopt;  // resumed between the stat and the read
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.contains("since") && j["since"].is_number()) return j["since"].get<double>();
  } catch (const StoreError&) {
  }
  return mtime;
}

void replace_file_durably(const std::string& path, const std::string& text) {
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  struct stat old {};
  mode_t mode = ::stat(path.c_str(), &old) == 0 ? (old.st_mode & 07777) : 0644;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) throw StoreError(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  try {
    write_all(fd, text, tmp);
    if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0)
      throw StoreError(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw StoreError(fmt::format("cannot rename {} over {}: {}", tmp, path, std::strerror(err)));
  }
  sync_folder_of(path);
}

std::string set_paused(const PlanPaths& paths, bool on, double now) {
  FileStore store(paths);
  Store::Locked lock(store);
  std::optional<double> since = paused_since(paths);
  if (on && since) return fmt::format("already paused since {}: nothing changed", local_time(*since, now));
  if (!on && !since) return "not paused: nothing changed";
  if (on) {
    replace_file_durably(paths.paused, nlohmann::json({{"since", now}}).dump() + "\n");
  } else if (::unlink(paths.paused.c_str()) != 0 && errno != ENOENT) {
    throw StoreError(fmt::format("cannot remove {}: {}", paths.paused, std::strerror(errno)));
  }
  std::string line = on ? "paused: no new job starts until " + hint("resume") + " (running jobs go on)"
                        : fmt::format("resumed (paused since {}): jobs start again", local_time(*since, now));
  try {
    append_events(events_path_for(paths.state), {plan_event(on ? "pause" : "resume", now, on ? "pause" : "resume")});
  } catch (const StoreError& e) {
    line += fmt::format(" (not in the event log: {})", e.what());
  }
  return line;
}

}  // namespace gpuq
