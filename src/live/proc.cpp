#include "gpuq/live/proc.h"

#include <pwd.h>
#include <sys/stat.h>
#include <time.h>
#include <spawn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <limits>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gpuq {

namespace {

volatile sig_atomic_t g_continued = 0;
void on_continued(int) { g_continued = 1; }

}  // namespace

bool SystemClock::continued() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_handler = on_continued;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // a read, a write or a waitpid it lands in goes on (poll loops on EINTR)
    return ::sigaction(SIGCONT, &sa, nullptr) == 0;
  }();
  const bool was = installed && g_continued != 0;
  g_continued = 0;
  return was;
}

namespace {

// State letter and start time from /proc/PID/stat; the command name may hold spaces and parens.
bool read_stat(long long pid, char* state, unsigned long long* start) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  if (!f) return false;
  std::string line;
  std::getline(f, line);
  auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  // Fields after the name start at field 3 (state); start time is field 22.
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return false;
    if (i == 3) *state = field.empty() ? '?' : field[0];
  }
  *start = std::strtoull(field.c_str(), nullptr, 10);
  return true;
}

// The parent, process group and session of `pid` (fields 4, 5 and 6 of /proc/PID/stat).
bool read_parentage(long long pid, long long* ppid, long long* pgid, long long* sid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!f || !std::getline(f, line)) return false;
  auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 2));
  char state;
  return static_cast<bool>(rest >> state >> *ppid >> *pgid >> *sid);
}

}  // namespace

GpuProcess describe_process(long long pid) {
  GpuProcess p;
  p.pid = pid;
  p.lineage.push_back(pid);
  long long ppid = 0, pgid = 0, sid = 0;
  if (!read_parentage(pid, &ppid, &pgid, &sid)) return p;
  p.lineage.push_back(pgid);
  p.lineage.push_back(sid);
  for (int depth = 0; ppid > 1 && depth < 64; ++depth) {
    p.lineage.push_back(ppid);
    long long up = 0;
    if (!read_parentage(ppid, &up, &pgid, &sid)) break;
    ppid = up;
  }
  struct stat st {};
  if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0) {
    struct passwd pw {}, *found = nullptr;
    char buf[1024];
    p.user = getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &found) == 0 && found ? found->pw_name
                                                                              : "uid " + std::to_string(st.st_uid);
  }
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::getline(comm, p.name);
  std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline");
  std::string raw((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  p.command = raw.size() > 60 ? raw.substr(0, 57) + "..." : raw;
  return p;
}

double monotonic_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

double unix_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

std::optional<unsigned long long> process_start_time(long long pid) {
  char state;
  unsigned long long start;
  if (!read_stat(pid, &state, &start)) return std::nullopt;
  return start;
}

std::optional<double> boot_time() {
  std::ifstream f("/proc/stat");
  std::string key;
  double value = 0;
  while (f >> key) {
    if (key == "btime" && f >> value) return value;
    f.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

bool process_alive(long long pid, std::optional<unsigned long long> start) {
  if (pid <= 0) return false;
  char state = '?';
  unsigned long long actual = 0;
  if (!read_stat(pid, &state, &actual)) return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
  if (state == 'Z' || state == 'X') return false;
  if (start && *start != actual) return false;
  return true;
}

bool group_alive(long long pgid) {
  if (pgid <= 1) return false;
  return ::killpg(static_cast<pid_t>(pgid), 0) == 0 || errno == EPERM;
}

bool signal_group(long long pgid, int sig) {
  if (pgid <= 1) return false;
  return ::killpg(static_cast<pid_t>(pgid), sig) == 0;
}

std::string expand_path(const std::string& s) {
  if ((s.empty() || s[0] != '~') && s.find('$') == std::string::npos) return s;  // most paths
  std::string p = s;
  if (!p.empty() && p[0] == '~') {
    size_t slash = p.find('/');
    std::string user = p.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
    std::string home;
    if (user.empty()) {
      const char* h = std::getenv("HOME");
      if (h) home = h;
      else if (passwd* pw = getpwuid(getuid())) home = pw->pw_dir;
    } else if (passwd* pw = getpwnam(user.c_str())) {
      home = pw->pw_dir;
    }
    if (!home.empty() || user.empty()) {
      while (home.size() > 1 && home.back() == '/') home.pop_back();
      p = home + (slash == std::string::npos ? "" : p.substr(slash));
      if (p.empty()) p = "/";
    }
  }
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size();) {
    if (p[i] != '$') {  // up to the next $ in one piece
      size_t d = std::min(p.find('$', i), p.size());
      out.append(p, i, d - i);
      i = d;
    } else if (i + 1 < p.size()) {
      size_t j;
      std::string name;
      if (p[i + 1] == '{') {
        j = p.find('}', i + 2);
        if (j == std::string::npos) {
          out += p.substr(i);
          break;
        }
        name = p.substr(i + 2, j - i - 2);
        ++j;
      } else {
        j = i + 1;
        while (j < p.size() && (std::isalnum(static_cast<unsigned char>(p[j])) || p[j] == '_')) ++j;
        name = p.substr(i + 1, j - i - 1);
      }
      const char* v = name.empty() ? nullptr : std::getenv(name.c_str());
      if (v)
        out += v;
      else
        out += p.substr(i, j - i);
      i = j;
    } else {
      out += p[i++];  // a $ that ends the path
    }
  }
  return out;
}

std::map<std::string, std::string> environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::vector<std::string> environment_strings(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

int spawn_process(pid_t* pid, const char* path, bool search_path, const std::vector<int>& fds, short flags,
                  const std::vector<std::string>& argv, const std::vector<std::string>* env, const char* cwd) {
  // posix_spawn takes lists of char* that end in a null (and changes none of them).
  auto c_strings = [](const std::vector<std::string>& v) {
    std::vector<char*> out;
    for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
  };
  std::vector<char*> args = c_strings(argv), envs = env ? c_strings(*env) : std::vector<char*>{};
  char* const* envp = env ? envs.data() : environ;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (cwd) posix_spawn_file_actions_addchdir_np(&fa, cwd);
  for (size_t i = 0; i < fds.size(); ++i) posix_spawn_file_actions_adddup2(&fa, fds[i], static_cast<int>(i));
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, static_cast<short>(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | flags));
  if (flags & POSIX_SPAWN_SETPGROUP) posix_spawnattr_setpgroup(&attr, 0);
  int rc = search_path ? posix_spawnp(pid, path, &fa, &attr, args.data(), envp)
                       : posix_spawn(pid, path, &fa, &attr, args.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return rc;
}

std::string resolve_script(const std::string& written, const std::string& workdir) {
  std::string p = expand_path(written);
  if (workdir.empty() || p.empty() || p[0] == '/') return p;
  return workdir + (workdir.back() == '/' ? "" : "/") + p;
}

int reap_children() {
  int n = 0;
  int st;
  while (::waitpid(-1, &st, WNOHANG) > 0) ++n;
  return n;
}

}  // namespace gpuq
