#include "test_util.h"

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <fstream>
#include <sstream>

extern char** environ;

namespace gpuq::test {

namespace fs = std::filesystem;

Plan plan_of(const std::string& json, const std::vector<int>& gpus) {
  PlanLoad load = parse_plan(json, "inline.json", gpus);
  for (const auto& e : load.errors) ADD_FAILURE() << e;
  if (!load.plan) throw std::runtime_error("inline plan rejected");
  return std::move(*load.plan);
}

std::vector<std::string> errors_of(const std::string& json, const std::vector<int>& gpus) {
  return parse_plan(json, "inline.json", gpus).errors;
}

TempDir::TempDir() {
  std::string base = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  std::string tmpl = base + "/gpuq-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text, int mode) const {
  fs::path p = fs::path(path_) / name;
  fs::create_directories(p.parent_path());
  {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << text;
  }
  ::chmod(p.c_str(), mode);
  return p.string();
}

std::string TempDir::read(const std::string& name) const {
  std::ifstream f(fs::path(path_) / name, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

namespace {
std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

Output run(const std::vector<std::string>& argv, const std::string& cwd, const std::map<std::string, std::string>& env) {
  return Background(argv, cwd, env).wait(600);
}

std::string gpuq_binary() {
  // GPUQ_TEST_BINARY: another build (an older commit's), to check that a test fails on it.
  const char* other = std::getenv("GPUQ_TEST_BINARY");
  return other && *other ? other : GPUQ_BINARY;
}

Output run_gpuq(const std::vector<std::string>& args, const std::string& cwd, const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv{gpuq_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, cwd, env);
}

}  // namespace gpuq::test

namespace gpuq::test {

namespace {

// $XDG_STATE_HOME for the commands the running test starts: a folder of its own, under one
// folder of this process that goes with it.
std::string test_state_home() {
  static TempDir root;
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = t ? std::string(t->test_suite_name()) + "." + t->name() : "no-test";
  std::replace(name.begin(), name.end(), '/', '_');
  return root.path() + "/" + name;
}

}  // namespace

Background::Background(const std::vector<std::string>& argv, const std::string& cwd,
                       const std::map<std::string, std::string>& env) {
  std::string out_path = io_.path() + "/out", err_path = io_.path() + "/err";
  std::string state_home = test_state_home();
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    // No real NVML in tests (a node with GPUs would answer instead of the fake nvidia-smi):
    // tests of NVML name the fake library themselves.
    if (!std::getenv("GPUQ_NVML_LIB")) setenv("GPUQ_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    // Each test is a user of its own: its runs share GPUs through their own node directory
    // (own_node_dir, under $XDG_STATE_HOME), not with the tests that run beside it.
    setenv("XDG_STATE_HOME", state_home.c_str(), 1);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
}

Background::~Background() {
  if (!reaped_) {
    // Its process group too: a `runuser -u USER -- gpuq run` leaves its gpuq behind otherwise (a
    // CI's node tests left two runs of a removed folder going for half an hour).
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void Background::signal(int sig) const { ::kill(pid_, sig); }

bool Background::running() {
  if (reaped_) return false;
  int st;
  if (waitpid(pid_, &st, WNOHANG) == pid_) {
    reaped_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

Output Background::wait(double timeout_s) {
  for (int i = 0; i < static_cast<int>(timeout_s * 1000) && running(); ++i) usleep(1000);
  Output r;
  r.status = reaped_ ? status_ : -1;
  r.out = slurp(io_.path() + "/out");
  r.err = slurp(io_.path() + "/err");
  return r;
}

std::string Background::out() const { return slurp(io_.path() + "/out"); }
std::string Background::err() const { return slurp(io_.path() + "/err"); }

bool eventually(const std::function<bool()>& cond, double timeout_s) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < until) {
    if (cond()) return true;
    usleep(20000);
  }
  return cond();
}

uint64_t test_seed(uint64_t fallback) {
  const char* env = std::getenv("GPUQ_TEST_SEED");
  if (!env || !*env) return fallback;
  if (std::string(env) == "random") {
    uint64_t seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
    const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
    std::fprintf(stderr, "%s.%s: GPUQ_TEST_SEED=random drew %llu\n", t ? t->test_suite_name() : "?",
                 t ? t->name() : "?", static_cast<unsigned long long>(seed));
    return seed;
  }
  char* end = nullptr;
  errno = 0;
  unsigned long long seed = std::strtoull(env, &end, 10);
  if (errno || end == env || *end) {
    ADD_FAILURE() << "GPUQ_TEST_SEED=" << env << ": not a whole number nor \"random\"";
    return fallback;
  }
  return seed;
}

std::string seed_note(uint64_t seed) {
  const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
  return "seed " + std::to_string(seed) + "; replay: GPUQ_TEST_SEED=" + std::to_string(seed) +
         " gpuq_tests --gtest_filter=" + (t ? std::string(t->test_suite_name()) + "." + t->name() : "...");
}

std::unique_ptr<Background> start_gpuq(const std::vector<std::string>& args, const std::string& cwd,
                                       const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv{gpuq_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<Background>(argv, cwd, env);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) out.push_back(line);
  return out;
}

bool pid_alive(long long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  if (!f) return false;
  std::string line;
  std::getline(f, line);
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string idle_gpus(int gpus) {
  std::string out;
  for (int g = 0; g < gpus; ++g) out += std::to_string(g) + ", 0\n";
  return out;
}

std::map<std::string, std::string> fake_nvidia_smi(const TempDir& d, const std::string& smi) {
  d.write("smi.txt", smi);
  d.write("nvidia-smi", "#!/bin/sh\ncat \"$(dirname \"$0\")/smi.txt\"\n", 0755);
  return {{"GPUQ_NVIDIA_SMI", d.path() + "/nvidia-smi"}};
}

Output PlanFolder::gpuq(std::vector<std::string> args, const std::string& plan) const {
  args.insert(args.begin() + 1, {"--plan", plan});
  return run_gpuq(args, d.path(), env);
}

nlohmann::json PlanFolder::state(const std::string& name) const {
  std::string t = d.read(name);
  return t.empty() ? nlohmann::json::object() : nlohmann::json::parse(t);
}

std::unique_ptr<Background> PlanFolder::background(std::vector<std::string> args, const std::string& plan) const {
  args.insert(args.begin() + 1, {"--plan", plan});
  return start_gpuq(args, d.path(), env);
}

bool PlanFolder::has_state(const std::string& name) const { return !d.read(name).empty(); }

std::string PlanFolder::status_of(const std::string& id, const std::string& name) const {
  const nlohmann::json s = state(name);
  return s.contains(id) ? s[id]["status"].get<std::string>() : "pending";
}

void PlanFolder::kill_jobs() const {
  const nlohmann::json s = state();  // kept: items() of a temporary dangles before the loop runs
  for (auto& [id, e] : s.items())
    if (e.contains("pid") && e["pid"].is_number()) ::kill(-e["pid"].get<int>(), SIGKILL);
}

}  // namespace gpuq::test
