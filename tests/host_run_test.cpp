// Cores and host memory (issue 45) with real `gpuq run`s and real bash jobs: each job is pinned
// to its own cores (its /proc/self/status Cpus_allowed_list), the thread pools take their number,
// no more jobs run than the cores allow, a job whose memory does not fit beside another's waits,
// a job's cores are on its GPUs' NUMA node where `nvidia-smi topo -m` says which, and a plan that
// gives neither field runs its jobs as before (unpinned, nothing set).
#include <fmt/format.h>
#include <sched.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "gpuq/core/events.h"
#include "gpuq/live/host.h"
#include "gpuq/live/journal.h"
#include "gpuq/live/node_dir.h"
#include "test_util.h"

namespace gpuq::test {
namespace {

using ::testing::HasSubstr;

// A job that writes what it was given: its allowed cores, the thread pools' sizes, GPUQ_CORES,
// and when it ran (unix seconds), one line of its own in seen/ID.
constexpr const char* kSeer =
    "mkdir -p seen\n"
    "start=$(date +%s.%N)\n"
    "sleep \"${1:-1}\"\n"
    "echo \"$(grep Cpus_allowed_list: /proc/self/status | cut -f2) omp=${OMP_NUM_THREADS-unset} "
    "mkl=${MKL_NUM_THREADS-unset} openblas=${OPENBLAS_NUM_THREADS-unset} cores=${GPUQ_CORES-unset} "
    "$start $(date +%s.%N)\" > \"seen/$GPUQ_JOB_ID\"\n";

struct Seen {
  std::vector<int> allowed;
  std::map<std::string, std::string> vars;  // omp, mkl, openblas, cores
  double start = 0, end = 0;
};

std::map<std::string, Seen> seen_in(const std::string& folder) {
  std::map<std::string, Seen> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(folder + "/seen", ec)) {
    std::vector<std::string> l = lines_of(e.path().string());
    if (l.empty()) continue;
    std::stringstream ss(l[0]);
    std::string allowed, w;
    Seen s;
    ss >> allowed;
    s.allowed = parse_core_list(allowed);
    for (int k = 0; k < 4 && ss >> w; ++k) s.vars[w.substr(0, w.find('='))] = w.substr(w.find('=') + 1);
    ss >> s.start >> s.end;
    out[e.path().filename().string()] = s;
  }
  return out;
}

// The issue's first case, on the cores this machine has (CI: 2): n jobs of one core each on a
// node given n cores run n at a time, each pinned to a core of its own; one more waits for a
// core; OMP_NUM_THREADS and the like are 1 (but where the job's "env" sets one); the state
// records each job's cores.
TEST(HostRun, EachJobIsPinnedToCoresOfItsOwnAndNoMoreRunThanTheCoresAllow) {
  std::vector<int> usable = usable_cores();
  const int n = static_cast<int>(std::min<size_t>(usable.size(), 4));
  ASSERT_GE(n, 1);
  PlanFolder f(2);
  f.d.write("seer.sh", kSeer);
  std::string jobs;
  for (int k = 0; k <= n; ++k)
    jobs += fmt::format(R"({}{{"id": "j{}", "script": "seer.sh", "gpus": 0, "cpus": 1, "args": ["1.5"]{}}})",
                        k ? ", " : "", k, k == 0 ? R"(, "env": {"OMP_NUM_THREADS": "7"})" : "");
  f.plan("[" + jobs + "]");
  Output r = f.gpuq({"run", "--gpus", "0-1", "--poll", "0.2", "--node-dir", "off", "--node-cpus",
                     std::to_string(n), "--reserve-cpus", "0"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::map<std::string, Seen> seen = seen_in(f.d.path());
  ASSERT_EQ(seen.size(), static_cast<size_t>(n + 1)) << r.out;
  std::set<int> mine(usable.begin(), usable.end());
  for (const auto& [id, s] : seen) {
    ASSERT_EQ(s.allowed.size(), 1u) << id << " is pinned to its one core";
    EXPECT_TRUE(mine.count(s.allowed[0])) << id << " on core " << s.allowed[0] << ", not one gpuq may use";
    EXPECT_EQ(s.vars.at("omp"), id == "j0" ? "7" : "1") << id << ": its env wins";
    EXPECT_EQ(s.vars.at("mkl"), "1") << id;
    EXPECT_EQ(s.vars.at("openblas"), "1") << id;
    EXPECT_EQ(s.vars.at("cores"), core_list_text(s.allowed)) << id;
  }
  // Jobs that ran at once ran on different cores, and never more than n at once.
  for (const auto& [a, sa] : seen)
    for (const auto& [b, sb] : seen) {
      if (a < b && sa.start < sb.end && sb.start < sa.end)
        EXPECT_NE(sa.allowed, sb.allowed) << a << " and " << b << " ran at once on one core";
    }
  for (const auto& [a, sa] : seen) {
    int at_once = 0;
    for (const auto& [b, sb] : seen) at_once += sb.start <= sa.start && sa.start < sb.end;
    EXPECT_LE(at_once, n) << "when " << a << " started";
  }
  // The state says each job's cores as the job saw them.
  nlohmann::json st = f.state();
  for (const auto& [id, s] : seen) EXPECT_EQ(st[id].value("cores", ""), core_list_text(s.allowed)) << id;
}

// The issue's second case: on a node given 2 GiB for jobs, a job of 1.5 GiB waits while one of
// 1 GiB runs (both start at once with 3 GiB), and status said what it waited for. Cores are
// plenty (a 2-core machine has 1 for jobs by default: one job at a time).
TEST(HostRun, AJobWhoseMemoryDoesNotFitBesideAnothersWaitsForIt) {
  PlanFolder f(2);
  f.d.write("seer.sh", kSeer);
  f.plan(R"([{"id": "one", "script": "seer.sh", "gpus": 0, "mem_gib": 1, "args": ["2"]},
             {"id": "big", "script": "seer.sh", "gpus": 0, "mem_gib": 1.5, "args": ["0.2"]}])");
  auto run = f.background({"run", "--gpus", "0-1", "--poll", "0.2", "--node-dir", "off", "--node-mem-gib", "2",
                            "--node-cpus", "4"});
  ASSERT_TRUE(eventually([&] { return f.status_of("one") == "running"; })) << run->out();
  Output st = f.gpuq({"status", "--node-mem-gib", "2",
                            "--node-cpus", "4"});
  EXPECT_THAT(st.out, HasSubstr("needs 1.5 GiB of host memory, 1.0 free")) << st.out;
  Output r = run->wait(kPatience);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::map<std::string, Seen> seen = seen_in(f.d.path());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_GE(seen["big"].start, seen["one"].end - 0.05) << "big waited for one's memory";
  // With 3 GiB for jobs they run side by side.
  PlanFolder g(2);
  g.d.write("seer.sh", kSeer);
  g.plan(f.d.read("plan.json"));
  // The cores are the machine's (at least 2, none kept back): only memory decides (issue 50: node_cpus
  // past the cores jobs may be pinned to is lowered to them).
  Output r3 = g.gpuq({"run", "--gpus", "0-1", "--poll", "0.2", "--node-dir", "off", "--node-mem-gib", "3", "--node-cpus",
                      std::to_string(std::max<size_t>(2, usable_cores().size())), "--reserve-cpus", "0"});
  ASSERT_EQ(r3.status, 0) << r3.out << r3.err;
  seen = seen_in(g.d.path());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_LT(seen["big"].start, seen["one"].end) << "3 GiB: both at once\n" << r3.out;
}

// A plan that gives neither cpus nor mem_gib: its jobs run on every core gpuq may use, with no
// thread pool set and no "cores" in the state, whatever --node-cpus says.
TEST(HostRun, APlanWithoutTheFieldsRunsItsJobsUnpinned) {
  std::vector<int> usable = usable_cores();
  PlanFolder f(2);
  f.d.write("seer.sh", kSeer);
  f.plan(R"([{"id": "a", "script": "seer.sh", "gpus": 1, "args": ["0.1"]},
             {"id": "b", "script": "seer.sh", "gpus": 1, "args": ["0.1"]}])");
  Output r = f.gpuq({"run", "--gpus", "0-1", "--poll", "0.2", "--node-dir", "off", "--node-cpus", "1"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::map<std::string, Seen> seen = seen_in(f.d.path());
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& [id, s] : seen) {
    EXPECT_EQ(s.allowed, usable) << id;
    EXPECT_EQ(s.vars.at("omp"), "unset") << id;
    EXPECT_EQ(s.vars.at("cores"), "unset") << id;
  }
  EXPECT_LT(seen["a"].start, seen["b"].end) << "one core counted for neither: both at once";
  EXPECT_EQ(f.d.read("plan.state.json").find("\"cores\""), std::string::npos);
}


// One node, two runs (issue 45, point 2: the node-wide decision counts cores and host memory across
// runs): each run publishes the cores and host memory of its running jobs in the node directory,
// and the other counts them taken. A job of 1.5 GiB of plan B waits while one of plan A holds 1.5
// of the node's 2 GiB; then two one-core jobs, one per plan, run at once on different cores.
TEST(HostRun, AnotherRunsJobsCoresAndMemoryAreTakenOnASharedNode) {
  TempDir node;
  PlanFolder a(2), b(2);
  for (PlanFolder* f : {&a, &b}) f->d.write("seer.sh", kSeer);
  a.plan(R"([{"id": "a", "script": "seer.sh", "gpus": 0, "mem_gib": 1.5, "args": ["2"]}])");
  b.plan(R"([{"id": "b", "script": "seer.sh", "gpus": 0, "mem_gib": 1.5, "args": ["0.2"]}])");
  std::vector<std::string> flags{"run", "--gpus", "0-1", "--poll", "5", "--node-dir", node.path(), "--node-mem-gib", "2",
                                 "--node-cpus", "4", "--mem-cgroup", "off"};
  auto ra = a.background(flags);
  ASSERT_TRUE(eventually([&] { return a.status_of("a") == "running"; })) << ra->out();
  // A's entry in the node directory says what a holds.
  std::string mine = node.read(node_user_me() + ".json");
  EXPECT_THAT(mine, HasSubstr("\"host_mem_gib\": 1.5")) << mine;
  Output node_view = b.gpuq({"status", "--node", "--node-dir", node.path()});
  EXPECT_THAT(node_view.out, HasSubstr("no GPU, 1 cores, 1.5 GiB")) << node_view.out << node_view.err;
  auto rb = b.background(flags);
  Output ob = rb->wait(kPatience), oa = ra->wait(kPatience);
  ASSERT_EQ(oa.status, 0) << oa.out << oa.err;
  ASSERT_EQ(ob.status, 0) << ob.out << ob.err;
  std::map<std::string, Seen> sa = seen_in(a.d.path()), sb = seen_in(b.d.path());
  ASSERT_EQ(sa.size(), 1u);
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_GE(sb["b"].start, sa["a"].end - 0.05) << "b started while a held 1.5 of the node's 2 GiB\n" << ob.out;
  EXPECT_LT(sb["b"].start, sa["a"].end + 3) << "b waited long past a's end (--poll 5: it looks again each second)";

  // Cores: two one-core jobs on a node of two, one per run, each pinned to a core the other's is not.
  std::vector<int> usable = usable_cores();
  if (usable.size() < 2) {
    std::printf("one core here: the cores of two runs at once are not exercised\n");
    return;
  }
  PlanFolder c(2), d(2);
  for (PlanFolder* f : {&c, &d}) f->d.write("seer.sh", kSeer);
  c.plan(R"([{"id": "c", "script": "seer.sh", "gpus": 0, "cpus": 1, "args": ["1.5"]}])");
  d.plan(R"([{"id": "d", "script": "seer.sh", "gpus": 0, "cpus": 1, "args": ["1.5"]}])");
  std::vector<std::string> two{"run", "--gpus", "0-1", "--poll", "0.2", "--node-dir", node.path(), "--node-cpus", "2",
                               "--reserve-cpus", "0"};
  auto rc = c.background(two);
  ASSERT_TRUE(eventually([&] { return c.status_of("c") == "running"; })) << rc->out();
  Output od = d.gpuq(two), oc = rc->wait(kPatience);
  ASSERT_EQ(oc.status, 0) << oc.out << oc.err;
  ASSERT_EQ(od.status, 0) << od.out << od.err;
  Seen sc = seen_in(c.d.path())["c"], sd = seen_in(d.d.path())["d"];
  EXPECT_LT(sd.start, sc.end) << "two cores for two one-core jobs: both at once";
  ASSERT_EQ(sc.allowed.size(), 1u);
  ASSERT_EQ(sd.allowed.size(), 1u);
  EXPECT_NE(sc.allowed, sd.allowed) << "c and d ran at once on one core";
}

// `nvidia-smi topo -m` of 8 GPUs, all NV12, GPUs 0-3 on the NUMA node of cores `low`, 4-7 on
// that of `high` (the columns of a recent driver: CPU Affinity, NUMA Affinity, GPU NUMA ID).
std::string topo_of(const std::string& low, const std::string& high) {
  std::string t;
  for (int g = 0; g < 8; ++g) t += fmt::format("\tGPU{}", g);
  t += "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n";
  for (int g = 0; g < 8; ++g) {
    t += fmt::format("GPU{}", g);
    for (int o = 0; o < 8; ++o) t += o == g ? "\t X " : "\tNV12";
    t += fmt::format("\t{}\t{}\t\tN/A\n", g < 4 ? low : high, g < 4 ? 0 : 1);
  }
  return t + "\nLegend:\n\n  X    = Self\n";
}

// Issue 45: a job's cores are on the NUMA node of its GPUs where `nvidia-smi topo -m` gives their
// CPU Affinity. GPU 0's node has the second core gpuq may use, GPU 4's the first: the job on GPU 0
// (launched first) gets the second, where the rule without a topology would give it the first.
// With both GPUs on the first core's node, the job launched second spills to the other core, and
// its start line says so.
TEST(HostRun, EachJobIsPinnedOnTheNumaNodeOfItsGpus) {
  std::vector<int> usable = usable_cores();
  if (usable.size() < 2) GTEST_SKIP() << "needs 2 cores";
  const std::string first = std::to_string(usable[0]), second = std::to_string(usable[1]);
  for (bool spill : {false, true}) {
    SCOPED_TRACE(spill ? "both GPUs on the first core's node" : "GPU 0 on the second core's node");
    PlanFolder f(idle_gpus(8));
    f.d.write("topo.txt", spill ? topo_of(first, first) : topo_of(second, first));
    f.d.write("nvidia-smi",
              "#!/bin/sh\nd=$(dirname \"$0\")\n"
              "if [ \"$1\" = topo ]; then cat \"$d/topo.txt\"; else cat \"$d/smi.txt\"; fi\n",
              0755);
    f.d.write("seer.sh", kSeer);
    // 3 s each: on a busy machine (CI at -j2) a job pinned to a busy core began its first line
    // more than a second after the other's.
    f.plan(R"([{"id": "on0", "script": "seer.sh", "gpus": 1, "cpus": 1, "args": ["3"]},
               {"id": "on4", "script": "seer.sh", "gpus": 1, "cpus": 1, "args": ["3"]}])");
    Output r = f.gpuq({"run", "--gpus", "0,4", "--poll", "0.2", "--node-dir", "off", "--node-cpus", "2",
                       "--reserve-cpus", "0", "--gpu-probe", "nvidia-smi"});
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    nlohmann::json st = f.state();
    ASSERT_EQ(st["on0"]["gpus"], nlohmann::json::array({0})) << st.dump();
    ASSERT_EQ(st["on4"]["gpus"], nlohmann::json::array({4})) << st.dump();
    std::map<std::string, Seen> seen = seen_in(f.d.path());
    ASSERT_EQ(seen.size(), 2u) << r.out;
    EXPECT_LT(seen["on0"].start, seen["on4"].end) << "both at once, on a core each";
    const std::vector<int> on0{spill ? usable[0] : usable[1]}, on4{spill ? usable[1] : usable[0]};
    EXPECT_EQ(seen["on0"].allowed, on0) << r.out;
    EXPECT_EQ(seen["on4"].allowed, on4) << r.out;
    EXPECT_EQ(st["on0"].value("cores", ""), core_list_text(on0));
    EXPECT_EQ(st["on4"].value("cores", ""), core_list_text(on4));
    std::string start4;  // on4's start line
    for (std::stringstream lines(r.out); std::getline(lines, start4);)
      if (start4.find("start on4 on GPUs [4] (pid ") != std::string::npos) break;
    const std::string off =
        fmt::format("); cores {} are off its GPUs' NUMA node (cores {}: too few free)", second, first);
    if (spill)
      EXPECT_TRUE(start4.ends_with(off)) << start4 << "\n" << r.out;
    else
      EXPECT_THAT(r.out, ::testing::Not(HasSubstr("NUMA node"))) << "each on its GPU's node";
  }
}

}  // namespace
}  // namespace gpuq::test

namespace gpuq::test {
namespace {

// Issue 50, part 3, on this machine's cores (CI: 2): node_cpus as many as the machine has, with
// reserve_cpus 1 keeping one of them for the system. Admission and pinning agree: no more one-core
// jobs run at once than there are cores to pin them to (on 0e8b200 as many ran as node_cpus, two
// of them pinned to one core without a word), each on a core of its own; settings, validate,
// simulate and run say node_cpus was lowered.
TEST(HostRun, AdmissionAndPinningAgreeNoTwoJobsShareACore) {
  std::vector<int> usable = usable_cores();
  const int n = static_cast<int>(std::min<size_t>(usable.size(), 4));
  if (usable.size() < 2) GTEST_SKIP() << "one core: no core to reserve";
  PlanFolder f(2);
  f.d.write("seer.sh", kSeer);
  std::string jobs;
  for (int k = 0; k < n + 1; ++k)
    jobs += fmt::format(R"({}{{"id": "j{}", "script": "seer.sh", "gpus": 0, "cpus": 1, "args": ["1.2"]}})", k ? ", " : "", k);
  f.plan(fmt::format(R"({{"settings": {{"node_cpus": {}, "reserve_cpus": 1}}, "jobs": [{}]}})", usable.size(), jobs));
  const std::string said = fmt::format("node_cpus {} is more than the {} core", usable.size(), usable.size() - 1);
  EXPECT_THAT(f.gpuq({"settings"}).out, HasSubstr(said));
  Output v = f.gpuq({"validate", "--gpus", "0-1"});
  EXPECT_THAT(v.out + v.err, HasSubstr(said));
  // simulate plans the node the plan names (it may run on a laptop): node_cpus as given; its run's
  // prediction on this machine (--from-state, and status) has the cores run may pin.
  Output sim = f.gpuq({"simulate", "--gpus", "0-1", "--from-state"});
  EXPECT_THAT(sim.err, HasSubstr(said));
  Output r = f.gpuq({"run", "--gpus", "0-1", "--poll", "0.2", "--node-dir", "off"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr(said));
  std::map<std::string, Seen> seen = seen_in(f.d.path());
  ASSERT_EQ(seen.size(), static_cast<size_t>(n + 1)) << r.out;
  int most = 0;
  for (const auto& [a, sa] : seen) {
    ASSERT_EQ(sa.allowed.size(), 1u) << a;
    EXPECT_NE(sa.allowed[0], usable[0]) << a << " pinned to the reserved core";
    int together = 0;
    for (const auto& [b, sb] : seen) {
      bool overlap = sa.start < sb.end - 0.05 && sb.start < sa.end - 0.05;
      if (!overlap) continue;
      ++together;
      if (a < b) EXPECT_NE(sa.allowed, sb.allowed) << a << " and " << b << " ran at once on one core\n" << r.out;
    }
    most = std::max(most, together);
  }
  EXPECT_LE(most, static_cast<int>(usable.size()) - 1) << r.out;
}

}  // namespace
}  // namespace gpuq::test
