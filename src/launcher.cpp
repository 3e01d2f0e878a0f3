#include "gpuq/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "gpuq/proc.h"

extern char** environ;

namespace gpuq {

namespace {

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
  // The wrapper is gpuq itself (see job_wrapper): the paths are arguments, never pasted into a shell
  // string (fix 2), and the exit code is renamed into place without a helper process.
  std::vector<std::string> args{"gpuq-job", kJobWrapperArg, script, exitf, abortf};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = 0;
  int rc = spawn_process(&pid, "/proc/self/exe", false, {devnull, log, log, go[0]}, POSIX_SPAWN_SETSID, argv.data(),
                         envp.data());
  ::close(log);
  ::close(devnull);
  ::close(go[0]);
  if (rc != 0) {
    ::close(go[1]);
    errno = rc;
    fail(fmt::format("posix_spawn(gpuq-job {}) failed", script));
  }
  Launch l;
  l.pid = pid;
  l.pid_start = process_start_time(pid);
  l.go_fd = go[1];
  return l;
}

int job_wrapper(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "gpuq-job: usage: gpuq %s SCRIPT EXITFILE ABORTEDFILE\n", kJobWrapperArg);
    return 2;
  }
  const char *script = argv[2], *exitf = argv[3], *abortf = argv[4];
  // The start line: "go" once the state that records this job is saved; EOF if gpuq died first.
  char buf[8] = {0};
  size_t got = 0;
  while (got < 3) {
    ssize_t n = ::read(3, buf + got, 3 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(3);
  if (std::string(buf, got) != "go\n") {
    int fd = ::open(abortf, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
    return 0;
  }
  int code = 127;
  struct stat st;
  if (::access(script, R_OK) != 0 || ::stat(script, &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fprintf(stderr, "gpuq: cannot run the script %s: it is missing or not a readable file\n", script);
  } else {
    char* args[] = {const_cast<char*>("bash"), const_cast<char*>(script), nullptr};
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, "bash", nullptr, nullptr, args, environ);
    if (rc != 0) {
      std::fprintf(stderr, "gpuq: posix_spawn(bash %s) failed: %s\n", script, std::strerror(rc));
    } else {
      int wst = 0;
      while (::waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
      }
      code = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    }
  }
  // Write-then-rename: a reader never sees a half-written exit file (fix 3).
  std::string tmp = std::string(exitf) + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "gpuq: cannot write %s: %s\n", tmp.c_str(), std::strerror(errno));
    return 1;
  }
  std::string text = std::to_string(code) + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), exitf) != 0) {
    std::fprintf(stderr, "gpuq: cannot write %s: %s\n", exitf, std::strerror(errno));
    ::unlink(tmp.c_str());
    return 1;
  }
  return 0;
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
