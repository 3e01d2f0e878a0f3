#include "gpuq/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "gpuq/proc.h"

extern char** environ;

namespace gpuq {

namespace {

// Runs in the job's session. $1 script, $2 exit file, $3 aborted marker; fd 3 the start line.
// The paths are arguments, never pasted into the command (fix 2).
constexpr const char* kWrapper = R"(IFS= read -r go <&3 || go=
exec 3<&-
if [ "$go" != go ]; then : > "$3"; exit 0; fi
if [ -r "$1" ] && [ -f "$1" ]; then
  bash "$1"; c=$?
else
  echo "gpuq: cannot run the script $1: it is missing or not a readable file" >&2; c=127
fi
printf '%s\n' "$c" > "$2.tmp.$$" && mv -f "$2.tmp.$$" "$2")";

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

}  // namespace

Launch launch(const PlanPaths& paths, const LaunchSpec& spec) {
  std::error_code ec;
  std::filesystem::create_directories(paths.logs, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create the log folder {}: {}", paths.logs, ec.message()));
  std::string exitf = paths.exit(spec.id), logf = paths.log(spec.id), abortf = paths.aborted(spec.id);
  ::unlink(exitf.c_str());
  ::unlink(abortf.c_str());
  int log = ::open(logf.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (log < 0) fail("cannot open the log " + logf);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) {
    ::close(log);
    fail("pipe2");
  }

  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  std::string visible;
  for (size_t i = 0; i < spec.gpus.size(); ++i) visible += (i ? "," : "") + std::to_string(spec.gpus[i]);
  env["CUDA_VISIBLE_DEVICES"] = visible;
  env["TDPRM_GPU0"] = spec.gpus.empty() ? "9" : std::to_string(spec.gpus[0]);
  env.emplace("CUDA_DEVICE_ORDER", "PCI_BUS_ID");  // kept when already set
  env["GPUQ_JOB_ID"] = spec.id;
  env["GPUQ_ATTEMPT"] = std::to_string(spec.attempt);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::string script = expand_path(spec.script);
  std::vector<std::string> args{"bash", "-c", kWrapper, "gpuq-job", script, exitf, abortf};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, devnull, 0);
  posix_spawn_file_actions_adddup2(&fa, log, 1);
  posix_spawn_file_actions_adddup2(&fa, log, 2);
  posix_spawn_file_actions_adddup2(&fa, go[0], 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "bash", &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(log);
  ::close(devnull);
  ::close(go[0]);
  if (rc != 0) {
    ::close(go[1]);
    errno = rc;
    fail(fmt::format("posix_spawn(bash {}) failed", script));
  }
  Launch l;
  l.pid = pid;
  l.pid_start = process_start_time(pid);
  l.go_fd = go[1];
  return l;
}

void release(Launch& l) {
  if (l.go_fd < 0) return;
  // SIGPIPE is blocked or ignored by the caller; a job that died already just gets EPIPE.
  ssize_t n = ::write(l.go_fd, "go\n", 3);
  (void)n;
  ::close(l.go_fd);
  l.go_fd = -1;
}

void abandon(Launch& l) {
  if (l.go_fd < 0) return;
  ::close(l.go_fd);
  l.go_fd = -1;
}

}  // namespace gpuq
