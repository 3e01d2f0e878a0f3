#include "gpuq/live/run_info.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace gpuq {

std::optional<PlanStamp> stamp_plan(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  PlanStamp s;
  s.size = static_cast<long long>(st.st_size);
  s.mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
  uint64_t h = 1469598103934665603ull;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t k = 0; k < n; ++k) h = (h ^ static_cast<unsigned char>(buf[k])) * 1099511628211ull;
  }
  ::close(fd);
  s.hash = fmt::format("{:016x}", h);
  return s;
}

namespace {

// Writes `text` to a temporary file beside `path`, syncs it and renames it over `path`; on failure
// the temporary file is removed and `problem` (when given) says which call failed and why. Synced:
// after a power cut the file is this version or an earlier one, never empty or cut (the folder is
// not synced: an earlier version come back is a whole one).
bool replace_file(const std::string& path, const std::string& text, std::string* problem = nullptr) {
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  auto failed = [&](const std::string& what) {
    if (problem) *problem = what;
    ::unlink(tmp.c_str());
    return false;
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return failed(fault_words(tmp, errno));
  try {
    write_all(fd, text, tmp);
  } catch (const StoreError& e) {
    ::close(fd);
    return failed(e.err ? fault_words(e.file, e.err) : std::string(e.what()));
  }
  if (::fdatasync(fd) != 0) {
    int e = errno;
    ::close(fd);
    return failed(fault_words(tmp, e));
  }
  if (::close(fd) != 0) return failed(fault_words(tmp, errno));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return failed(fault_words(path, errno));
  if (problem) problem->clear();
  return true;
}

}  // namespace

bool write_run_info(const PlanPaths& paths, const RunInfo& info, std::string* problem) {
  nlohmann::ordered_json j;
  j["pid"] = info.pid;
  j["host"] = info.host;
  j["plan"] = info.plan;
  j["started"] = info.started;
  j["tick"] = info.tick;
  j["ended"] = info.ended ? nlohmann::ordered_json(*info.ended) : nlohmann::ordered_json(nullptr);
  j["plan_loaded"] = {{"size", info.loaded.size}, {"mtime", info.loaded.mtime}, {"hash", info.loaded.hash}};
  if (info.loaded_at) j["plan_loaded_at"] = *info.loaded_at;
  if (info.slurm) j["slurm"] = true;
  if (!info.node_dir.empty()) j["node_dir"] = info.node_dir;
  j["gpus"] = info.gpus;
  if (info.max_retries) j["max_retries"] = *info.max_retries;
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();
  for (const SettingSpec& spec : settings_table())
    if (info.settings.given[setting_index(spec)])
      settings[std::string(spec.name)] = nlohmann::ordered_json(setting_json(spec, info.settings.values));
  if (!settings.empty()) j["settings"] = std::move(settings);
  return replace_file(paths.run_info, j.dump(1) + "\n", problem);
}

std::optional<RunInfo> read_run_info(const PlanPaths& paths) {
  try {
    auto text = read_file(paths.run_info, true);
    if (!text) return std::nullopt;
    auto j = nlohmann::json::parse(*text);
    RunInfo r;
    r.pid = j.at("pid").get<long long>();
    r.host = j.at("host").get<std::string>();
    r.plan = j.at("plan").get<std::string>();
    r.started = j.at("started").get<double>();
    r.tick = j.at("tick").get<double>();
    if (j.contains("ended") && !j["ended"].is_null()) r.ended = j["ended"].get<double>();
    const auto& l = j.at("plan_loaded");
    r.loaded = {l.at("size").get<long long>(), l.at("mtime").get<double>(), l.at("hash").get<std::string>()};
    if (j.contains("plan_loaded_at") && j["plan_loaded_at"].is_number()) r.loaded_at = j["plan_loaded_at"].get<double>();
    r.slurm = j.contains("slurm") && j["slurm"].is_boolean() && j["slurm"].get<bool>();
    if (j.contains("node_dir") && j["node_dir"].is_string()) r.node_dir = j["node_dir"].get<std::string>();
    if (j.contains("gpus") && j["gpus"].is_array()) r.gpus = j["gpus"].get<std::vector<int>>();
    if (j.contains("max_retries") && j["max_retries"].is_number_integer()) r.max_retries = j["max_retries"].get<long long>();
    if (j.contains("settings")) {
      read_settings(j["settings"], r.settings);  // a setting this gpuq does not know (a newer one's) is left out
    } else {  // an older run: what it recorded
      if (!r.gpus.empty()) {
        std::string text;
        for (int g : r.gpus) text += (text.empty() ? "" : ",") + std::to_string(g);
        r.settings.given[setting_index(*find_setting("gpus"))] = read_setting(*find_setting("gpus"), text, r.settings.values).empty();
      }
      if (r.max_retries)
        r.settings.given[setting_index(*find_setting("max_retries"))] =
            read_setting(*find_setting("max_retries"), *r.max_retries, r.settings.values).empty();
    }
    return r;
  } catch (const std::exception&) {
    return std::nullopt;  // damaged or from elsewhere: status says less, nothing depends on it
  }
}

bool keep_loaded_plan(const PlanPaths& paths, const std::string& plan_file) {
  try {
    auto text = read_file(plan_file);
    return text && replace_file(paths.run_plan, *text);
  } catch (const StoreError&) {
    return false;
  }
}

RunPresence run_presence(const PlanPaths& paths) {
  RunPresence p;
  p.info = read_run_info(paths);
  int fd = ::open(paths.run_lock.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return p;  // no run has ever locked it here
  char buf[32] = {0};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  p.lock_pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!p.lock_pid.empty() && (p.lock_pid.back() == '\n' || p.lock_pid.back() == ' ')) p.lock_pid.pop_back();
  // A run holds it exclusively; a shared lock that can be had means no run does. Let go at once.
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0)
    p.running = errno == EWOULDBLOCK;
  ::close(fd);
  return p;
}

}  // namespace gpuq
