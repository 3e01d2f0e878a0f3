// The NVML probe (issue 15, point 1) against the fake libnvidia-ml.so.1 (fake_nvml.cpp):
// boards, the PCI order, a foreign process, a library that fails, a GPU lost mid-run; and
// `gpuq gpus` and `gpuq run` loading it through GPUQ_NVML_LIB.
#include <optional>
#include <gmock/gmock.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "gpuq/core/gpu_use.h"
#include "gpuq/live/nvml.h"
#include "gpuq/live/probe.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;

namespace {

std::string bus(int k) { return fmt::format("00000000:{:02X}:00.0", 0x18 + 0x10 * k); }

// An 8-GPU HGX board: every GPU has 18 NVLinks to the NVSwitches. Listed out of PCI order.
json hgx() {
  json devs = json::array();
  for (int k : {3, 0, 7, 1, 6, 2, 5, 4}) {
    json links = json::array();
    for (int l = 0; l < 18; ++l) links.push_back("switch");
    devs.push_back({{"bus_id", bus(k)}, {"name", "NVIDIA H100 80GB HBM3"}, {"total_mib", 81559},
                    {"used_mib", 300 + k}, {"util", 10 * k}, {"nvlinks", links}});
  }
  return {{"devices", devs}};
}

// A PCIe board of 4 GPUs with NVLink bridges on (0,2) and (1,3), 0-1 and 2-3 behind one switch.
json bridged() {
  json devs = json::array();
  std::map<int, int> peer{{0, 2}, {2, 0}, {1, 3}, {3, 1}};
  for (int k = 0; k < 4; ++k)
    devs.push_back({{"bus_id", bus(k)}, {"name", "NVIDIA RTX A6000"}, {"used_mib", 5}, {"util", nullptr},
                    {"nvlinks", {bus(peer[k]), bus(peer[k]), bus(peer[k]), bus(peer[k])}}});
  return {{"devices", devs},
          {"ancestors", {{bus(0), bus(1), 10}, {bus(2), bus(3), 10}}}};
}

// The fake library's file, for this process (NvmlProbe here) and for gpuq (GPUQ_FAKE_NVML).
// The variable is this process's only while the fake lives: the one before it comes back.
struct FakeNvml {
  TempDir dir;
  std::string path;
  std::optional<std::string> before;
  explicit FakeNvml(const json& node) {
    path = dir.write("nvml.json", node.dump());
    if (const char* v = std::getenv("GPUQ_FAKE_NVML")) before = v;
    setenv("GPUQ_FAKE_NVML", path.c_str(), 1);
  }
  ~FakeNvml() {
    if (before)
      setenv("GPUQ_FAKE_NVML", before->c_str(), 1);
    else
      unsetenv("GPUQ_FAKE_NVML");
  }
  FakeNvml(const FakeNvml&) = delete;
  FakeNvml& operator=(const FakeNvml&) = delete;
  void set(const json& node) {
    // A new file renamed over: the fake reads it again (its stamp changes).
    dir.write("next.json", node.dump());
    std::rename((dir.path() + "/next.json").c_str(), path.c_str());
  }
  std::map<std::string, std::string> env() const { return {{"GPUQ_NVML_LIB", FAKE_NVML}, {"GPUQ_FAKE_NVML", path}}; }
};

}  // namespace

TEST(Nvml, HgxBoardInPciOrderWithNv18BetweenEveryPair) {
  FakeNvml fake(hgx());
  NvmlProbe probe(FAKE_NVML);
  ASSERT_TRUE(probe.ok()) << probe.problem();
  GpuReading r = probe.read();
  ASSERT_TRUE(r.used_mib) << r.problem;
  EXPECT_EQ(r.source, "nvml");
  // GPU k is the k-th bus id, whatever order the driver lists them in.
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(r.used_mib->at(k), 300 + k);
    EXPECT_EQ(r.util_pct.at(k), 10 * k);
    EXPECT_EQ(r.total_mib.at(k), 81559);
    EXPECT_EQ(r.names.at(k), "NVIDIA H100 80GB HBM3");
  }
  std::optional<Topology> t = probe.topology();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->links.size(), 28u);
  for (auto& [ab, l] : t->links) EXPECT_EQ(l, (Link{Path::NvLink, 18}));
}

TEST(Nvml, PcieBoardWithBridgedPairsAndNoUtilization) {
  FakeNvml fake(bridged());
  NvmlProbe probe(FAKE_NVML);
  ASSERT_TRUE(probe.ok()) << probe.problem();
  GpuReading r = probe.read();
  ASSERT_TRUE(r.used_mib) << r.problem;
  EXPECT_TRUE(r.util_pct.empty());  // Not Supported: no utilization, still a reading
  Placement p;
  p.kind = Placement::Kind::Auto;
  p.topology = *probe.topology();
  EXPECT_EQ(p.topology.between(0, 2), (Link{Path::NvLink, 4}));
  EXPECT_EQ(p.topology.between(0, 1), (Link{Path::Pix, 0}));
  EXPECT_EQ(p.topology.between(1, 2), (Link{Path::Sys, 0}));
  EXPECT_EQ(pairs_in_use(p, mask_of({0, 1, 2, 3})), (std::vector<std::pair<int, int>>{{0, 2}, {1, 3}}));
}

// Issue 45: each GPU's CPU affinity (the cores of its NUMA node) is kept, as topo -m's column
// is; a GPU the library answers Not Supported for has none.
TEST(Nvml, EachGpusCpuAffinityIsKept) {
  json node = bridged();
  node["devices"][0]["cpus"] = {0, 1, 2, 3, 70};
  node["devices"][1]["cpus"] = {0, 1, 2, 3, 70};
  node["devices"][2]["cpus"] = {64, 65, 4095};
  FakeNvml fake(node);
  NvmlProbe probe(FAKE_NVML);
  ASSERT_TRUE(probe.ok()) << probe.problem();
  Topology t = *probe.topology();
  const std::vector<int> near01{0, 1, 2, 3, 70}, near2{64, 65, 4095};
  EXPECT_EQ(t.cpus, (std::map<int, std::vector<int>>{{0, near01}, {1, near01}, {2, near2}}));
  EXPECT_EQ(t.cores_near({1, 2, 3}), (std::vector<int>{0, 1, 2, 3, 64, 65, 70, 4095}));
}

TEST(Nvml, BoardWithoutNvLinkUsesTheCommonAncestor) {
  json node = bridged();
  for (json& d : node["devices"]) d.erase("nvlinks");
  FakeNvml fake(node);
  NvmlProbe probe(FAKE_NVML);
  ASSERT_TRUE(probe.ok()) << probe.problem();
  Topology t = *probe.topology();
  EXPECT_EQ(t.between(0, 1), (Link{Path::Pix, 0}));
  EXPECT_EQ(t.between(0, 2), (Link{Path::Sys, 0}));
  Placement p;
  p.kind = Placement::Kind::Auto;
  p.topology = t;
  EXPECT_EQ(*pick_gpus(2, mask_of({1, 2, 3}), &p), (std::vector<int>{2, 3}));
}

TEST(Nvml, AForeignProcessOnGpu5IsSeenWithItsLineage) {
  json node = hgx();
  // This test process stands for the tenant: a real pid, so /proc has its lineage.
  for (json& d : node["devices"])
    if (d["bus_id"] == bus(5)) d["processes"] = {{{"pid", ::getpid()}, {"used_mib", 150}}};
  FakeNvml fake(node);
  NvmlProbe probe(FAKE_NVML);
  GpuReading r = probe.read();
  ASSERT_TRUE(r.processes);
  ASSERT_EQ(r.processes->at(5).size(), 1u);
  const GpuProcess& p = r.processes->at(5)[0];
  EXPECT_EQ(p.pid, ::getpid());
  EXPECT_EQ(p.used_mib, 150);
  EXPECT_THAT(p.lineage, ::testing::Contains(static_cast<long long>(::getppid())));
  EXPECT_EQ(see_reading(r, State{}, GpuRules{}, ~GpuMask{0}).busy, mask_of({5}));
  // Under a job whose pid is this process's parent, it is the job's own.
  State st;
  JobState s;
  s.status = Status::Running;
  s.pid = ::getppid();
  s.gpus = std::vector<int>{5};
  st.set("a", s);
  EXPECT_TRUE(foreign_processes(r, st, GpuRules{}).empty());
}

TEST(Nvml, ALostGpuIsBusyAndTheRestStillRead) {
  FakeNvml fake(hgx());
  setenv("GPUQ_NVML_LIB", FAKE_NVML, 1);
  std::unique_ptr<GpuProbe> probe = make_probe(ProbeKind::Auto, "/nonexistent/nvidia-smi", 5);
  unsetenv("GPUQ_NVML_LIB");
  GpuReading before = probe->read();
  ASSERT_TRUE(before.used_mib) << before.problem;
  EXPECT_TRUE(before.lost.empty());
  json node = hgx();
  for (json& d : node["devices"])
    if (d["bus_id"] == bus(3)) d["lost"] = true;
  fake.set(node);
  GpuReading after = probe->read();
  ASSERT_TRUE(after.used_mib) << after.problem;
  EXPECT_EQ(after.source, "nvml");
  EXPECT_EQ(after.lost, (std::map<int, std::string>{{3, "GPU is lost"}}));
  EXPECT_EQ(after.used_mib->count(3), 0u);
  EXPECT_EQ(see_reading(after, State{}, GpuRules{}, ~GpuMask{0}).busy, mask_of({3}));
  // Any other NVML error: nvidia-smi from then on (here there is none: no reading, said why).
  for (json& d : node["devices"]) d["fail"] = 999;
  fake.set(node);
  GpuReading failed = probe->read();
  EXPECT_FALSE(failed.used_mib);
  EXPECT_EQ(failed.source, "nvidia-smi");
  EXPECT_EQ(failed.source_note, "nvidia-smi from now on (NVML failed: nvmlDeviceGetMemoryInfo(GPU 0): Unknown Error)");
}

TEST(NvmlCli, GpusJsonShowsTheBoardItsPairsAndTheForeignProcess) {
  json node = bridged();
  node["devices"][1]["processes"] = {{{"pid", ::getpid()}, {"used_mib", 150}}};
  FakeNvml fake(node);
  Output o = run_gpuq({"gpus", "--json"}, ".", fake.env());
  ASSERT_EQ(o.status, 0) << o.err;
  json j = json::parse(o.out);
  EXPECT_EQ(j["source"], "nvml");
  EXPECT_EQ(j["gpus"].size(), 4u);
  EXPECT_EQ(j["gpus"][1]["processes"][0]["pid"], ::getpid());
  EXPECT_EQ(j["gpus"][1]["processes"][0]["foreign"], true);
  EXPECT_EQ(j["pairs"], json::parse("[[0, 2], [1, 3]]"));
  EXPECT_EQ(j["placement"], "auto");
  Output text = run_gpuq({"gpus"}, ".", fake.env());
  EXPECT_THAT(text.out, HasSubstr("GPU probe: NVML ("));
  EXPECT_THAT(text.out, HasSubstr("--pairs auto: 2-GPU jobs take [0, 2] [1, 3] first (from the GPU topology"));
  EXPECT_THAT(text.out, HasSubstr("GPU0       X   PIX   NV4   SYS"));
}

TEST(NvmlCli, ALibraryThatFailsInitFallsBackToNvidiaSmiAndSaysSoOnce) {
  FakeNvml fake({{"init", 9}, {"devices", json::array()}});
  TempDir dir;
  dir.write("job.sh", "sleep 0.3\n");
  dir.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 1, "est_hours": 0.01},
                             {"id": "b", "script": "job.sh", "gpus": 1, "est_hours": 0.01, "deps": ["a"]}])");
  auto env = fake.env();
  env.merge(fake_nvidia_smi(dir, idle_gpus(2)));
  Output o = run_gpuq({"run", "--plan", "plan.json", "--gpus", "0,1", "--poll", "1"}, dir.path(), env);
  ASSERT_EQ(o.status, 0) << o.err;
  std::string said = "GPU probe: nvidia-smi (NVML is not available here: nvmlInit_v2: Driver Not Loaded)";
  size_t first = o.out.find(said);
  EXPECT_NE(first, std::string::npos) << o.out;
  EXPECT_EQ(o.out.find(said, first + 1), std::string::npos) << o.out;
  EXPECT_THAT(o.out, HasSubstr("all jobs finished"));
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("no GPU memory reading")));
}

TEST(NvmlCli, RunPlacesAPairOnTheBridgeAndKeepsJobsOffALostGpu) {
  json node = bridged();
  node["devices"][1]["lost"] = true;
  FakeNvml fake(node);
  TempDir dir;
  dir.write("job.sh", "echo \"$CUDA_VISIBLE_DEVICES\" > \"$GPUQ_JOB_ID.gpus\"\n");
  dir.write("plan.json", R"([{"id": "pair", "script": "job.sh", "gpus": 2, "est_hours": 0.01},
                             {"id": "one", "script": "job.sh", "gpus": 1, "est_hours": 0.01}])");
  Output o = run_gpuq({"run", "--plan", "plan.json", "--gpus", "0-3", "--poll", "1"}, dir.path(), fake.env());
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  EXPECT_EQ(dir.read("pair.gpus"), "0,2\n");  // the bridge, not the original's (0,1)... nor the lost GPU 1
  EXPECT_EQ(dir.read("one.gpus"), "3\n");
  EXPECT_THAT(o.out, HasSubstr("GPU 1 busy: lost (GPU is lost); no job starts on it"));
}

TEST(NvmlCli, StatusNamesTheProcessThatHoldsABusyGpu) {
  json node = bridged();
  node["devices"][1]["processes"] = {{{"pid", ::getpid()}, {"used_mib", 150}}};
  FakeNvml fake(node);
  TempDir dir;
  dir.write("w.sh", "true\n");
  dir.write("plan.json", R"([{"id": "wide", "script": "w.sh", "gpus": 4, "est_hours": 1}])");
  Output o = run_gpuq({"status", "--plan", "plan.json", "--gpus", "0-3"}, dir.path(), fake.env());
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr(fmt::format("needs 4 GPUs, 3 free; GPU 1 busy: process {} `", ::getpid())));
  EXPECT_THAT(o.out, HasSubstr("(150 MiB) is no gpuq job's"));
}

TEST(NvmlCli, SimulateKeepsTheOriginalPairsUnlessToldAndThenPlacesAsRun) {
  json node = bridged();
  FakeNvml fake(node);
  TempDir dir;
  dir.write("plan.json", R"([{"id": "one", "script": "a.sh", "gpus": 1, "est_hours": 1},
                             {"id": "two", "script": "b.sh", "gpus": 2, "est_hours": 1}])");
  Output plain = run_gpuq({"simulate", "--plan", "plan.json", "--gpus", "0-3"}, dir.path(), fake.env());
  EXPECT_THAT(plain.out, HasSubstr("gpus=[2, 3]   two"));
  Output topo = run_gpuq({"simulate", "--plan", "plan.json", "--gpus", "0-3", "--pairs", "auto"}, dir.path(), fake.env());
  EXPECT_THAT(topo.out, HasSubstr("gpus=[1, 3]   two"));
  Output listed = run_gpuq({"simulate", "--plan", "plan.json", "--gpus", "0-3", "--pairs", "1-2"}, dir.path());
  EXPECT_THAT(listed.out, HasSubstr("gpus=[1, 2]   two"));
  Output bad = run_gpuq({"simulate", "--plan", "plan.json", "--pairs", "1-1"}, dir.path());
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.err, HasSubstr("'1-1' in --pairs '1-1' is not a pair of two GPU ids"));
}

// Several jobs on one GPU, end to end: 8 GPUs of 80 GiB (no headroom), 64 jobs of 20 GiB. Four
// share each GPU at a time; each sees its one GPU in CUDA_VISIBLE_DEVICES; another user's 70 GiB
// on GPU 5 keeps every packed job off it.
TEST(NvmlCli, PackedJobsShareGpusByMemoryAndStayOffAGpuAnotherUserFills) {
  json devs = json::array();
  for (int k = 0; k < 8; ++k)
    devs.push_back({{"bus_id", bus(k)}, {"name", "NVIDIA H100 80GB HBM3"}, {"total_mib", 80 * 1024},
                    {"used_mib", k == 5 ? 70 * 1024 : 0}, {"util", 0}});
  devs[5]["processes"] = json::array({{{"pid", 4242}, {"used_mib", 70 * 1024}}});
  FakeNvml fake(json{{"devices", devs}});
  TempDir dir;
  dir.write("job.sh", "echo \"$CUDA_VISIBLE_DEVICES\" > \"$GPUQ_JOB_ID.gpus\"\nsleep 1\n");
  json plan = json::array();
  for (int k = 0; k < 64; ++k) plan.push_back({{"id", fmt::format("s{}", k)}, {"script", "job.sh"}, {"gpu_mem_gib", 20}});
  dir.write("plan.json", plan.dump());
  Output o = run_gpuq({"run", "--plan", "plan.json", "--poll", "1", "--gpu-mem-headroom", "0"}, dir.path(), fake.env());
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  json state = json::parse(dir.read("plan.state.json"));
  // Per GPU, the most jobs running at once (from the state's starts and ends).
  std::map<int, std::vector<std::pair<double, int>>> at;
  for (int k = 0; k < 64; ++k) {
    std::string id = fmt::format("s{}", k);
    const json& s = state.at(id);
    ASSERT_EQ(s.at("status"), "done") << id;
    ASSERT_EQ(s.at("gpus").size(), 1u) << id;
    int g = s.at("gpus")[0].get<int>();
    EXPECT_EQ(dir.read(id + ".gpus"), std::to_string(g) + "\n") << id << " saw other GPUs than its own";
    at[g].push_back({s.at("start").get<double>(), 1});
    at[g].push_back({s.at("end").get<double>(), -1});
  }
  EXPECT_EQ(at.count(5), 0u) << "GPU 5 has 10 GiB left: no job of 20 fits";
  int most = 0;
  for (auto& [g, v] : at) {
    std::sort(v.begin(), v.end());
    int n = 0;
    for (auto [t, d] : v) {
      n += d;
      EXPECT_LE(n, 4) << "GPU " << g << " holds more than 80 GiB of declared jobs";
      most = std::max(most, n);
    }
  }
  EXPECT_EQ(most, 4) << "jobs were not packed";
}

// The peak GPU memory of each attempt, from NVML's process list: the job's own process
// (found by its lineage) says it uses 18000 MiB; the state, the event log's end and history
// carry it.
TEST(NvmlCli, EachAttemptsPeakGpuMemoryIsRecordedAndHistoryShowsIt) {
  json node;
  node["devices"] = json::array({{{"bus_id", bus(0)}, {"name", "NVIDIA H100 80GB HBM3"}, {"total_mib", 81559},
                                  {"used_mib", 0}, {"util", 50}}});
  FakeNvml fake(node);
  TempDir dir;
  // The job puts its own process on GPU 0 (a new file renamed over the fake's), then waits to be seen.
  node["devices"][0]["used_mib"] = 18000;
  node["devices"][0]["processes"] = json::array({{{"pid", 424242}, {"used_mib", 18000}}});
  dir.write("nvml.tmpl", node.dump());
  dir.write("job.sh", "sed \"s/424242/$$/\" nvml.tmpl > \"" + fake.path + ".new\" && mv \"" + fake.path + ".new\" \"" +
                          fake.path + "\"\nsleep 3\n");
  dir.write("plan.json", R"([{"id": "train", "script": "job.sh", "gpus": 1, "est_hours": 0.01}])");
  Output o = run_gpuq({"run", "--plan", "plan.json", "--gpus", "0", "--poll", "1"}, dir.path(), fake.env());
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  json state = json::parse(dir.read("plan.state.json"));
  EXPECT_EQ(state["train"].value("gpu_mem_peak_mib", -1), 18000) << state.dump();
  EXPECT_THAT(dir.read("plan.events.jsonl"), HasSubstr("\"gpu_mem_peak_mib\":18000"));
  Output h = run_gpuq({"history", "--plan", "plan.json"}, dir.path(), fake.env());
  EXPECT_THAT(h.out, HasSubstr("done, peak 17.6 GiB")) << h.out;
}

// A packed job that uses more than it declared is named, by run once and by status while it
// does: its processes (NVML's list, found by lineage) hold 31 GiB where it declared 20.
TEST(NvmlCli, APackedJobUsingMoreThanItDeclaredIsNamedByRunAndStatus) {
  json node;
  node["devices"] = json::array({{{"bus_id", bus(0)}, {"name", "NVIDIA H100 80GB HBM3"}, {"total_mib", 81559},
                                  {"used_mib", 0}, {"util", 50}}});
  FakeNvml fake(node);
  TempDir dir;
  node["devices"][0]["used_mib"] = 31 * 1024;
  node["devices"][0]["processes"] = json::array({{{"pid", 424242}, {"used_mib", 31 * 1024}}});
  dir.write("nvml.tmpl", node.dump());
  dir.write("job.sh", "sed \"s/424242/$$/\" nvml.tmpl > \"" + fake.path + ".new\" && mv \"" + fake.path + ".new\" \"" +
                          fake.path + "\"\ntouch using\nwhile [ ! -e stop ]; do sleep 0.1; done\n");
  dir.write("plan.json", R"([{"id": "train", "script": "job.sh", "gpu_mem_gib": 20, "est_hours": 0.01}])");
  auto run = start_gpuq({"run", "--plan", "plan.json", "--gpus", "0", "--poll", "1"}, dir.path(), fake.env());
  ASSERT_TRUE(eventually([&] { return ::access((dir.path() + "/using").c_str(), F_OK) == 0 && run->out().find("uses 31.0 GiB") != std::string::npos; }))
      << run->out() << run->err();
  EXPECT_THAT(run->out(), HasSubstr("train uses 31.0 GiB on GPU 0, more than its gpu_mem_gib 20"));
  Output st = run_gpuq({"status", "--plan", "plan.json"}, dir.path(), fake.env());
  EXPECT_THAT(st.out, HasSubstr("train uses 31.0 GiB on GPU 0, declared 20 (gpu_mem_gib)")) << st.out << st.err;
  dir.write("stop", "");
  Output done = run->wait(30);
  EXPECT_EQ(done.status, 0) << done.err;
}

// The idle watch through NVML's process lists (issue 53): GPU 0 reads 90 % throughout (a packed
// neighbour, say). `own` puts its own process on it (the job writes the fake's file), so it is
// never idle; `lonely` has no process there, and is stopped as idle (on_idle "kill") after
// idle_minutes (1.2 s here).
TEST(NvmlCli, AJobWithNoProcessOnItsBusyGpuIsIdle) {
  json node = {{"devices", {{{"bus_id", bus(0)}, {"name", "NVIDIA H100 80GB HBM3"}, {"total_mib", 81559},
                             {"used_mib", 0}, {"util", 90}, {"processes", json::array()}}}}};
  FakeNvml fake(node);
  json mine = node;
  mine["devices"][0]["processes"] = {{{"pid", 999999}, {"used_mib", 100}}};
  std::string with_pid = mine.dump();
  with_pid.replace(with_pid.find("999999"), 6, "'$$'");  // the job's own pid, in the shell
  TempDir dir;
  dir.write("own.sh", fmt::format("echo '{}' > {}.new && mv {}.new {}\nsleep 3\necho '{}' > {}.new && mv {}.new {}\n",
                                  with_pid, fake.path, fake.path, fake.path, node.dump(), fake.path, fake.path,
                                  fake.path));
  dir.write("lonely.sh", "echo $$ > lonely.pid; sleep 600\n");
  dir.write("plan.json", R"({"settings": {"idle_minutes": 0.02, "on_idle": "kill"},
                             "jobs": [{"id": "own", "script": "own.sh"},
                                      {"id": "lonely", "script": "lonely.sh", "deps": ["after:own"]}]})");
  Output o = run_gpuq({"run", "--plan", "plan.json", "--gpus", "0", "--gpu-probe", "nvml"}, dir.path(), fake.env());
  ASSERT_EQ(o.status, 3) << o.err << o.out;
  json s = json::parse(dir.read("plan.state.json"));
  EXPECT_EQ(s["own"]["status"], "done") << o.out;
  EXPECT_EQ(s["lonely"]["outcome"], "idle") << o.out;
  EXPECT_THAT(o.out, HasSubstr("stopped lonely as idle (no process of it on GPU [0] for "));
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("own as idle")));
  EXPECT_TRUE(eventually([&] { return !pid_alive(std::stoll(dir.read("lonely.pid"))); }, kPatience));
}

// Energy per job through the fake NVML's counter (issue 53): GPU 0 draws 300 W, GPU 1 has no
// counter. `hot` runs about 2 s on GPU 0; `cold` on GPU 1 has no reading, and shows none.
TEST(NvmlCli, EachAttemptsEnergyComesFromItsGpusCounter) {
  json node = {{"devices",
                {{{"bus_id", bus(0)}, {"util", 99}, {"energy_mj", 5000000}, {"power_w", 300}},
                 {{"bus_id", bus(1)}, {"util", 99}}}}};
  FakeNvml fake(node);
  TempDir dir;
  dir.write("hot.sh", "sleep 2\n");
  dir.write("cold.sh", "sleep 2\n");
  dir.write("plan.json", R"({"settings": {"energy_factor": 0.5, "energy_unit": "EUR", "poll": 0.5},
                             "jobs": [{"id": "hot", "script": "hot.sh"}, {"id": "cold", "script": "cold.sh"}]})");
  Output o = run_gpuq({"run", "--plan", "plan.json", "--gpus", "0,1", "--gpu-probe", "nvml"}, dir.path(), fake.env());
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  json s = json::parse(dir.read("plan.state.json"));
  ASSERT_TRUE(s["hot"].contains("energy_j")) << s.dump();
  long long joules = s["hot"]["energy_j"].get<long long>();
  // 300 W for the time between its first and last reading: at least one 0.5 s poll, at most its 2 s and a poll.
  EXPECT_GE(joules, 150) << s.dump();
  EXPECT_LE(joules, 300 * 3) << s.dump();
  EXPECT_FALSE(s["cold"].contains("energy_j")) << s.dump();
  Output h = run_gpuq({"history", "--plan", "plan.json", "--json"}, dir.path(), fake.env());
  ASSERT_EQ(h.status, 0) << h.err;
  for (const json& a : json::parse(h.out)) {
    if (a["id"] == "hot") EXPECT_NEAR(a["energy_kwh"].get<double>(), static_cast<double>(joules) / 3.6e6, 1e-9);
    if (a["id"] == "cold") EXPECT_TRUE(a["energy_kwh"].is_null());
  }
  Output text = run_gpuq({"history", "--plan", "plan.json"}, dir.path(), fake.env());
  EXPECT_THAT(text.out, HasSubstr("GPU energy (NVML's counter"));
  EXPECT_THAT(text.out, HasSubstr(" kWh x 0.5 = "));
  EXPECT_THAT(text.out, HasSubstr(" EUR"));
  EXPECT_THAT(text.out, HasSubstr("(1 ended attempt without a reading: not counted)"));
}

// Hoarded GPUs (issue 53): a process of no gpuq job (a `sleep` this test starts) holds 2000 MiB
// on GPU 1, which reads 0 %. The run sees it there, idle, and publishes it to the node directory;
// `gpus` and `status --node` name it, with its user, memory and how long it has been idle. It is
// never stopped.
TEST(NvmlCli, AProcessOfNoJobHoldingAnIdleGpuIsNamedAndLeftAlone) {
  pid_t hoarder = fork();
  if (hoarder == 0) {
    execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
    _exit(127);
  }
  json node = {{"devices",
                {{{"bus_id", bus(0)}, {"util", 90}},
                 {{"bus_id", bus(1)}, {"util", 0}, {"used_mib", 2000},
                  {"processes", {{{"pid", hoarder}, {"used_mib", 2000}}}}}}}};
  FakeNvml fake(node);
  TempDir dir;
  dir.write("work.sh", "sleep 8\n");
  dir.write("plan.json", R"({"settings": {"idle_minutes": 0.02, "poll": 0.5},
                             "jobs": [{"id": "work", "script": "work.sh"}]})");
  auto run = start_gpuq({"run", "--plan", "plan.json", "--gpus", "0,1", "--gpu-probe", "nvml"}, dir.path(), fake.env());
  struct passwd* pw = getpwuid(geteuid());
  std::string said = fmt::format("GPU 1: {}'s process {} `sleep 60`, 2000 MiB, at or below 5% for ",
                                 pw ? pw->pw_name : "?", hoarder);
  Output gpus;
  EXPECT_TRUE(eventually(
      [&] {
        gpus = run_gpuq({"gpus", "--plan", "plan.json", "--gpus", "0,1", "--gpu-probe", "nvml"}, dir.path(), fake.env());
        return gpus.out.find(said) != std::string::npos;
      },
      6))
      << gpus.out << gpus.err;
  Output node_view = run_gpuq({"status", "--plan", "plan.json", "--node", "--gpus", "0,1", "--idle-minutes", "0.02"},
                              dir.path(), fake.env());
  EXPECT_THAT(node_view.out, HasSubstr(said)) << node_view.out << node_view.err;
  EXPECT_THAT(node_view.out, HasSubstr("(reported; gpuq never stops them)"));
  Output js = run_gpuq({"gpus", "--plan", "plan.json", "--gpus", "0,1", "--gpu-probe", "nvml", "--json"}, dir.path(),
                       fake.env());
  json idle = json::parse(js.out)["idle_processes"];
  ASSERT_EQ(idle.size(), 1u) << js.out;
  EXPECT_EQ(idle[0]["pid"], hoarder);
  EXPECT_EQ(idle[0]["used_mib"], 2000);
  Output r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(pid_alive(hoarder));  // reported, never stopped
  kill(hoarder, SIGKILL);
  waitpid(hoarder, nullptr, 0);
}
