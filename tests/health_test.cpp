// GPU health (issue 53, part 2): the Xid table and its settings, the faults of a reading, the
// node's drain records, the decision and prediction without drained GPUs, a failure on a GPU
// drained for a fault made waiting again without a retry spent; and through real runs on the
// fake NVML: an Xid 79 drains its GPU and its job runs again elsewhere, an Xid 13 drains
// nothing, `drain`/`undrain` by hand, simulate on the 7 GPUs left.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

#include "gpuq/core/engine.h"
#include "gpuq/core/gpu_health.h"
#include "gpuq/core/node.h"
#include "gpuq/core/settings.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

constexpr double kAt = 1.8e9;
const GpuMask kNode8 = mask_of({0, 1, 2, 3, 4, 5, 6, 7});

GpuReading reading_of(std::vector<int> gpus, double taken) {
  GpuReading r;
  r.used_mib.emplace();
  for (int g : gpus) (*r.used_mib)[g] = 0;
  r.taken = taken;
  r.source = "nvml";
  return r;
}

std::vector<std::string> whats(const std::vector<GpuFault>& faults) {
  std::vector<std::string> out;
  for (const GpuFault& f : faults) out.push_back(fmt::format("{}{}: {}", f.gpu, f.drains ? " drains" : "", f.what));
  return out;
}

}  // namespace

TEST(Health, TheXidTableAndItsSettings) {
  XidRules plain;
  for (unsigned code : {48u, 63u, 64u, 74u, 79u, 92u, 94u, 95u, 119u, 120u}) EXPECT_TRUE(plain.drains(code)) << code;
  for (unsigned code : {13u, 31u, 43u, 45u, 154u, 999u}) EXPECT_FALSE(plain.drains(code)) << code;
  XidRules tuned = xid_rules("154, 13", "79");
  EXPECT_TRUE(tuned.drains(154));
  EXPECT_TRUE(tuned.drains(13));
  EXPECT_FALSE(tuned.drains(79));  // ignore wins
  EXPECT_TRUE(tuned.drains(48));
  std::string problem;
  EXPECT_EQ(parse_xid_list("79, 48,79", &problem), (std::set<unsigned>{48, 79}));
  EXPECT_EQ(parse_xid_list("", &problem), (std::set<unsigned>{}));
  EXPECT_FALSE(parse_xid_list("79,7x", &problem));
  EXPECT_EQ(problem, "\"7x\" is not an Xid code (a whole number from 1 to 999)");
  EXPECT_FALSE(parse_xid_list("79,,48", &problem));
  // The settings: a list or a string, kept as "48,79"; anything else refused with its words.
  GivenSettings given;
  EXPECT_TRUE(read_settings(json{{"xid_drain", {119, 120}}, {"xid_ignore", "79"}}, given).empty());
  EXPECT_EQ(given.values.xid_drain, "119,120");
  EXPECT_EQ(given.values.xid_ignore, "79");
  std::vector<std::string> bad = read_settings(json{{"xid_drain", {"x"}}}, given);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0], "\"xid_drain\": \"x\" is not an Xid code (a whole number from 1 to 999)");
}

// doc/gpu-health.md's Xid table is the code's, row for row: code, meaning, whether it drains.
TEST(Health, TheDocsXidTableIsTheCodes) {
  std::ifstream in(std::string(EXAMPLES) + "/../doc/gpu-health.md");
  ASSERT_TRUE(in) << "doc/gpu-health.md";
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);)
    if (line.size() > 2 && line[0] == '|' && std::isdigit(static_cast<unsigned char>(line[2]))) rows.push_back(line);
  std::vector<std::string> want;
  for (const XidRow& r : xid_table()) want.push_back(fmt::format("| {} | {} | {} |", r.code, r.meaning, r.drains ? "yes" : "no"));
  EXPECT_EQ(rows, want);
}

TEST(Health, OnlyANewFaultCountsAndEachOnce) {
  FaultWatch w;
  XidRules rules;
  GpuReading r = reading_of({0, 1, 2, 3}, kAt);
  r.ecc_uncorrected = {{0, 0}, {1, 2}};
  r.xids = {{2, {13, 79}}, {9, {79}}};  // GPU 9 is no GPU of this node
  EXPECT_EQ(whats(find_faults(r, w, rules, mask_of({0, 1, 2, 3}), 0)),
            (std::vector<std::string>{"2: Xid 13 (graphics engine exception: the application's fault)",
                                      "2 drains: Xid 79 (GPU has fallen off the bus)",
                                      "1 drains: 2 uncorrectable ECC errors (volatile count 2)"}));
  // The same reading given again (a background probe's): its Xids are not new; the counts are not.
  EXPECT_TRUE(find_faults(r, w, rules, mask_of({0, 1, 2, 3}), 0).empty());
  GpuReading next = reading_of({0, 1, 2, 3}, kAt + 1);
  next.ecc_uncorrected = {{0, 1}, {1, 2}};
  next.pending = {{3, "row remap pending (the GPU needs a reset)"}};
  EXPECT_EQ(whats(find_faults(next, w, rules, mask_of({0, 1, 2, 3}), 0)),
            (std::vector<std::string>{"0 drains: 1 uncorrectable ECC error (volatile count 1)",
                                      "3 drains: row remap pending (the GPU needs a reset)"}));
  // GPU 1 falls off the bus: gone from the list, said once; GPU 0's count rises on a GPU undrained
  // since (accepted): no fault, and its new count is the one to rise from.
  GpuReading gone = reading_of({0, 2, 3}, kAt + 2);
  gone.source = "nvidia-smi";
  gone.ecc_uncorrected = {{0, 5}};
  gone.pending = next.pending;
  EXPECT_EQ(whats(find_faults(gone, w, rules, mask_of({0, 1, 2, 3}), mask_of({0}))),
            (std::vector<std::string>{"1 drains: GPU lost (gone from nvidia-smi's list)"}));
  gone.taken = kAt + 3;
  EXPECT_TRUE(find_faults(gone, w, rules, mask_of({0, 1, 2, 3}), 0).empty());
  // NVML's own "GPU is lost" the same way, once.
  GpuReading lost = reading_of({0, 1, 2}, kAt + 4);
  lost.lost = {{3, "GPU is lost"}};
  EXPECT_EQ(whats(find_faults(lost, w, rules, mask_of({0, 1, 2, 3}), 0)),
            (std::vector<std::string>{"3 drains: GPU lost (GPU is lost)"}));
  EXPECT_TRUE(find_faults(lost, w, rules, mask_of({0, 1, 2, 3}), 0).empty());
}

TEST(Health, EachGpusNewestRecordOfAnyUserDecides) {
  GpuDrain ana3{3, true, kAt, "Xid 79 (GPU has fallen off the bus)", "ana", true};
  GpuDrain bo3{3, false, kAt + 60, "", "bo", false};
  GpuDrain bo5{5, true, kAt + 10, "fan failing", "bo", false};
  std::map<int, GpuDrain> undrains;
  std::map<int, GpuDrain> d = drained_gpus({{ana3}, {bo3, bo5}}, &undrains);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.at(5).by, "bo");
  ASSERT_EQ(undrains.size(), 1u);
  EXPECT_EQ(undrains.at(3).by, "bo");
  // ana drains it again later: hers is the newest.
  ana3.at = kAt + 120;
  d = drained_gpus({{ana3}, {bo3, bo5}}, &undrains);
  EXPECT_EQ(drained_mask(d), mask_of({3, 5}));
  EXPECT_TRUE(undrains.empty());
  // A user keeps one record per GPU: the newest.
  std::vector<GpuDrain> mine{ana3};
  set_drain_record(mine, GpuDrain{3, false, kAt + 200, "", "ana", false});
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_FALSE(mine[0].drained);
  EXPECT_EQ(drain_text(ana3, "14:02"), "GPU 3 drained: Xid 79 (GPU has fallen off the bus), seen by ana's run at 14:02");
  EXPECT_EQ(drain_text(bo5, "14:03"), "GPU 5 drained by bo at 14:03: fan failing");
  EXPECT_EQ(drained_prediction_note(mask_of({3}), kNode8),
            "GPU 3 is drained (gpuq gpus says why; gpuq undrain gives it back): predicted on the 7 GPUs left");
  EXPECT_EQ(drained_prediction_note(mask_of({9}), kNode8), "");
}

TEST(Health, AFailureCountsAsTheFaultsWhenTheFaultCameWhileItRanOrJustAfter) {
  GpuDrain d{2, true, kAt, "Xid 79 (GPU has fallen off the bus)", "ana", true};
  EXPECT_TRUE(ended_by_fault(d, {2, 3}, kAt - 600, kAt + 30, 20));    // read while it ran
  EXPECT_TRUE(ended_by_fault(d, {2, 3}, kAt - 600, kAt - 60, 20));    // read a minute after it failed
  EXPECT_FALSE(ended_by_fault(d, {2, 3}, kAt - 6000, kAt - 600, 20));  // it failed long before
  EXPECT_FALSE(ended_by_fault(d, {0, 1}, kAt - 600, kAt + 30, 20));   // another GPU's
  EXPECT_FALSE(ended_by_fault(d, {2}, kAt + 10, kAt + 30, 20));       // started after the drain
  GpuDrain by_hand = d;
  by_hand.fault = false;
  EXPECT_FALSE(ended_by_fault(by_hand, {2}, kAt - 600, kAt + 30, 20));  // a drain by hand is no fault of its jobs'
}

TEST(Health, TheNodeDecidesAndPredictsWithoutDrainedGpus) {
  NodeUser ana;
  ana.name = "ana";
  ana.usage_at = kAt;
  NodeRun r;
  r.plan = "/home/ana/plan.json";
  r.pid = 4242;
  for (int k = 0; k < 8; ++k) r.wants.push_back(NodeWant{fmt::format("w{}", k), 1, 50, 1});
  r.wants.push_back(NodeWant{"wide", 8, 40, 1});
  ana.runs.push_back(r);
  NodeUser bo;
  bo.name = "bo";
  bo.usage_at = kAt;
  bo.drains.push_back(GpuDrain{3, true, kAt, "fan failing", "bo", false});
  std::vector<NodeUser> users{ana, bo};
  NodeDecision d = decide_node(users, kNode8, kNode8, kAt, NodeConfig{}, 0.5, nullptr);
  GpuMask given = 0;
  for (const NodeStart& s : d.starts) given |= mask_of(s.gpus);
  EXPECT_EQ(d.starts.size(), 7u);
  EXPECT_EQ(given, kNode8 & ~mask_of({3}));
  // Played forward: the 1-GPU wants run on the 7 GPUs left; the 8-GPU one never starts.
  std::vector<NodePredicted> p = predict_node(users, kNode8, kAt, NodeConfig{}, 0.5, nullptr);
  EXPECT_EQ(p.size(), 8u);
  for (const NodePredicted& x : p) EXPECT_EQ(std::count(x.gpus.begin(), x.gpus.end(), 3), 0);
  // The records travel in the user's file, and an older file without them reads as before.
  std::string problem;
  std::optional<NodeUser> back = read_node_user(write_node_user(bo), "bo", kNode8, &problem, nullptr);
  ASSERT_TRUE(back) << problem;
  EXPECT_EQ(back->drains, bo.drains);
  EXPECT_THAT(write_node_user(ana), Not(HasSubstr("drains")));
  json bad = json::parse(write_node_user(bo));
  bad["drains"][0]["drained"] = "yes";
  EXPECT_FALSE(read_node_user(bad.dump(), "bo", kNode8, &problem, nullptr));
  EXPECT_EQ(problem, "drain of GPU 3: \"drained\" is not true or false");
}

TEST(Health, AFailureOnAFaultyGpuWaitsAgainWithoutARetrySpent) {
  Plan plan = plan_of(R"([{"id": "train", "script": "s"}, {"id": "eval", "script": "s", "deps": ["train"]},
                          {"id": "done", "script": "s"}])");
  Policy p;
  p.max_retries = 0;
  Engine e(plan, p, 1);
  ev::Tick t;
  t.now = kAt;
  e.apply(t);
  e.apply(ev::Exited{0, kAt + 10, 1});
  e.apply(ev::Exited{2, kAt + 10, 0});
  ASSERT_EQ(kind_of(e.life(0)), LifeKind::Ended);
  EXPECT_EQ(kind_of(e.life(1)), LifeKind::Blocked);
  e.apply(ev::GpuFault{0});
  const Waiting* w = std::get_if<Waiting>(&e.life(0));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->attempts, 0);  // no retry spent: max_retries 0 still lets it run again
  EXPECT_EQ(kind_of(e.life(1)), LifeKind::Waiting);
  e.apply(ev::GpuFault{2});  // done: nothing to run again
  EXPECT_EQ(kind_of(e.life(2)), LifeKind::Ended);
}

// Through real runs, the fake NVML serving Xid events and ECC counts.
namespace {

std::string bus(int k) { return fmt::format("00000000:{:02X}:00.0", 0x18 + 0x10 * k); }

json two_gpus(json extra0 = json::object()) {
  json d0 = {{"bus_id", bus(0)}, {"util", 90}, {"ecc_uncorrected", 0}};
  d0.update(extra0);
  return {{"devices", {d0, {{"bus_id", bus(1)}, {"util", 90}, {"ecc_uncorrected", 0}}}}};
}

struct Fake {
  TempDir dir;
  std::string path;
  explicit Fake(const json& node) { path = dir.write("nvml.json", node.dump()); }
  void set(const json& node) {
    dir.write("next.json", node.dump());
    std::rename((dir.path() + "/next.json").c_str(), path.c_str());
  }
  std::map<std::string, std::string> env(const std::string& node_dir) const {
    return {{"GPUQ_NVML_LIB", FAKE_NVML}, {"GPUQ_FAKE_NVML", path}, {"GPUQ_NODE_DIR", node_dir}};
  }
};

// A job that waits, on GPU 0 only, for the file `fail` and then fails; elsewhere it succeeds.
constexpr const char* kFailsOnGpu0 =
    "echo \"$CUDA_VISIBLE_DEVICES\" >> \"$GPUQ_JOB_ID.gpus\"\n"
    "if [ \"$CUDA_VISIBLE_DEVICES\" = 0 ]; then while [ ! -e fail ]; do sleep 0.05; done; exit 3; fi\n";

}  // namespace

// An Xid 79 on GPU 0 while train runs there: GPU 0 is drained node-wide; train then fails, and
// runs again on GPU 1 with no retry spent (max_retries 0), eval after it; the drain and the
// requeue are in the event log; `gpus` and `simulate` show it; `undrain` gives it back.
TEST(HealthRun, AnXid79DrainsItsGpuAndItsJobRunsAgainElsewhere) {
  Fake fake(two_gpus());
  TempDir dir;
  std::string node_dir = dir.path() + "/node";
  ASSERT_EQ(::mkdir(node_dir.c_str(), 0700), 0);
  dir.write("train.sh", kFailsOnGpu0);
  dir.write("eval.sh", "true\n");
  dir.write("plan.json", R"({"settings": {"poll": 0.3, "max_retries": 0},
    "jobs": [{"id": "train", "script": "train.sh"}, {"id": "eval", "script": "eval.sh", "deps": ["train"]}]})");
  auto run = start_gpuq({"run", "--plan", "plan.json", "--gpus", "0,1", "--gpu-probe", "nvml"}, dir.path(),
                        fake.env(node_dir));
  ASSERT_TRUE(eventually([&] { return !dir.read("train.gpus").empty(); }, 10));
  ASSERT_EQ(dir.read("train.gpus"), "0\n");
  fake.set(two_gpus({{"xids", {79}}}));
  Output gpus;
  ASSERT_TRUE(eventually(
      [&] {
        gpus = run_gpuq({"gpus", "--gpus", "0,1", "--gpu-probe", "nvml"}, dir.path(), fake.env(node_dir));
        return gpus.out.find("drained: GPU 0 drained: Xid 79 (GPU has fallen off the bus)") != std::string::npos;
      },
      10))
      << gpus.out << gpus.err;
  // What this fake can say: no retirement or remap (Not Supported on every GPU), so not listed.
  EXPECT_THAT(gpus.out, HasSubstr("faults read: Xid events, uncorrectable ECC errors, lost GPUs\n"));
  dir.write("fail", "");
  Output o = run->wait(60);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_EQ(dir.read("train.gpus"), "0\n1\n");
  EXPECT_THAT(o.out, HasSubstr("GPU 0 drained: Xid 79 (GPU has fallen off the bus), seen by "));
  EXPECT_THAT(o.out, HasSubstr("no job starts on it until `gpuq undrain 0` (train on it goes on)"));
  EXPECT_THAT(o.out, HasSubstr("requeued train: it failed (exit 3) on GPU 0, drained for Xid 79 (GPU has fallen off "
                               "the bus); it runs again on other GPUs, not counted against max_retries"));
  json s = json::parse(dir.read("plan.state.json"));
  EXPECT_EQ(s["train"]["status"], "done");
  EXPECT_EQ(s["train"]["attempts"], 0);
  EXPECT_EQ(s["eval"]["status"], "done");
  std::string events = dir.read("plan.events.jsonl");
  EXPECT_THAT(events, HasSubstr("\"event\":\"drain\",\"id\":\"\",\"attempt\":0,\"gpus\":[0]"));
  EXPECT_THAT(events, HasSubstr("\"event\":\"requeue\",\"id\":\"train\""));
  EXPECT_THAT(events, HasSubstr("failed on a GPU drained for a fault"));
  // The drain is the node's: simulate predicts on the GPU left, and says so.
  Output sim = run_gpuq({"simulate", "--plan", "plan.json", "--gpus", "0,1"}, dir.path(), fake.env(node_dir));
  ASSERT_EQ(sim.status, 0) << sim.err;
  EXPECT_THAT(sim.err, HasSubstr("GPU 0 is drained (gpuq gpus says why; gpuq undrain gives it back): predicted on the "
                                 "1 GPU left"));
  EXPECT_THAT(sim.out, Not(HasSubstr("[0]")));
  Output undrain = run_gpuq({"undrain", "0", "--gpus", "0,1"}, dir.path(), fake.env(node_dir));
  ASSERT_EQ(undrain.status, 0) << undrain.err;
  EXPECT_THAT(undrain.out, HasSubstr("GPU 0 undrained (it was: GPU 0 drained: Xid 79"));
  Output again = run_gpuq({"undrain", "0", "--gpus", "0,1"}, dir.path(), fake.env(node_dir));
  EXPECT_EQ(again.status, 1);
  EXPECT_THAT(again.err, HasSubstr("GPU 0 is not drained (nothing changed"));
}

// An Xid 13 is the application's: said, nothing drained, and the job's failure is its own.
TEST(HealthRun, AnXid13DrainsNothing) {
  Fake fake(two_gpus());
  TempDir dir;
  std::string node_dir = dir.path() + "/node";
  ASSERT_EQ(::mkdir(node_dir.c_str(), 0700), 0);
  dir.write("train.sh", kFailsOnGpu0);
  dir.write("plan.json", R"({"settings": {"poll": 0.3, "max_retries": 0}, "jobs": [{"id": "train", "script": "train.sh"}]})");
  auto run = start_gpuq({"run", "--plan", "plan.json", "--gpus", "0,1", "--gpu-probe", "nvml"}, dir.path(),
                        fake.env(node_dir));
  ASSERT_TRUE(eventually([&] { return !dir.read("train.gpus").empty(); }, 10));
  fake.set(two_gpus({{"xids", {13}}}));
  ASSERT_TRUE(eventually([&] { return run->out().find("Xid 13") != std::string::npos; }, 10)) << run->out();
  dir.write("fail", "");
  Output o = run->wait(60);
  EXPECT_NE(o.status, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("GPU 0: Xid 13 (graphics engine exception: the application's fault): the GPU is not "
                               "drained"));
  EXPECT_THAT(o.out, Not(HasSubstr("requeued train")));
  EXPECT_EQ(json::parse(dir.read("plan.state.json"))["train"]["status"], "failed");
  Output gpus = run_gpuq({"gpus", "--gpus", "0,1", "--gpu-probe", "nvml"}, dir.path(), fake.env(node_dir));
  EXPECT_THAT(gpus.out, Not(HasSubstr("drained:")));
}

// By hand: `drain 3 --why` keeps every run's jobs off GPU 3 (a run going on says so and logs it),
// simulate predicts on the 7 GPUs left, `undrain` gives it back and the run logs that too.
TEST(HealthRun, DrainAndUndrainByHand) {
  TempDir dir;
  std::string node_dir = dir.path() + "/node";
  ASSERT_EQ(::mkdir(node_dir.c_str(), 0700), 0);
  std::map<std::string, std::string> env{{"GPUQ_NODE_DIR", node_dir}};
  Output no_why = run_gpuq({"drain", "3"}, dir.path(), env);
  EXPECT_EQ(no_why.status, 2);
  EXPECT_THAT(no_why.err, HasSubstr("--why"));
  Output not_ours = run_gpuq({"drain", "9", "--why", "x"}, dir.path(), env);
  EXPECT_EQ(not_ours.status, 2);
  EXPECT_THAT(not_ours.err, HasSubstr("GPU 9 is not one of this node's GPUs"));
  Output d = run_gpuq({"drain", "3", "--why", "fan failing"}, dir.path(), env);
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_THAT(d.out, HasSubstr("GPU 3 drained: fan failing. No new job starts on it in any user's run on this node"));
  std::string jobs;
  for (int k = 0; k < 8; ++k)
    jobs += fmt::format("{}{{\"id\": \"j{}\", \"script\": \"job.sh\", \"est_hours\": 1}}", k ? ", " : "", k);
  dir.write("plan.json", "[" + jobs + "]");
  dir.write("job.sh", "echo \"$CUDA_VISIBLE_DEVICES\" > \"$GPUQ_JOB_ID.gpus\"\nwhile [ ! -e go ]; do sleep 0.05; done\n");
  Output sim = run_gpuq({"simulate", "--plan", "plan.json"}, dir.path(), env);
  ASSERT_EQ(sim.status, 0) << sim.err;
  EXPECT_THAT(sim.err, HasSubstr("GPU 3 is drained (gpuq gpus says why; gpuq undrain gives it back): predicted on the "
                                 "7 GPUs left"));
  EXPECT_THAT(sim.out, Not(HasSubstr("[3]")));
  EXPECT_THAT(sim.out, HasSubstr("makespan 2.0h"));  // j7 waits for one of the 7 GPUs
  // A run started on the drained node: seven jobs start, none on GPU 3; the eighth waits.
  auto run = start_gpuq({"run", "--plan", "plan.json", "--poll", "0.2", "--gpu-probe", "none"}, dir.path(), env);
  std::set<std::string> gpus;
  ASSERT_TRUE(eventually(
      [&] {
        gpus.clear();
        for (int k = 0; k < 8; ++k)
          if (std::string g = dir.read(fmt::format("j{}.gpus", k)); !g.empty()) gpus.insert(g);
        return gpus.size() == 7;
      },
      10))
      << run->out();
  EXPECT_EQ(gpus.count("3\n"), 0u);
  // status predicts on the GPUs left: j7 after one of the seven, not "after the year 9999".
  Output st = run_gpuq({"status", "--plan", "plan.json"}, dir.path(), env);
  EXPECT_THAT(st.out, HasSubstr("GPU 3 is drained (gpuq gpus says why; gpuq undrain gives it back): predicted on the "
                                "7 GPUs left"));
  EXPECT_THAT(st.out, Not(HasSubstr("9999")));
  EXPECT_THAT(st.out, Not(HasSubstr("never")));
  // Undrained while it runs: the run says whose undrain it is, logs it, and starts j7 on GPU 3.
  Output u = run_gpuq({"undrain", "3"}, dir.path(), env);
  ASSERT_EQ(u.status, 0) << u.err;
  EXPECT_THAT(u.out, HasSubstr("GPU 3 undrained (it was: GPU 3 drained by "));
  ASSERT_TRUE(eventually([&] { return dir.read("j7.gpus") == "3\n"; }, 10)) << run->out();
  dir.write("go", "");
  Output o = run->wait(60);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("GPU 3 drained by "));
  EXPECT_THAT(o.out, HasSubstr(": fan failing; no job starts on it until `gpuq undrain 3`"));
  EXPECT_THAT(o.out, HasSubstr("GPU 3 undrained by "));
  EXPECT_THAT(o.out, HasSubstr(": jobs may start on it again"));
  std::string events = dir.read("plan.events.jsonl");
  EXPECT_THAT(events, HasSubstr("\"event\":\"undrain\",\"id\":\"\",\"attempt\":0,\"gpus\":[3]"));
  EXPECT_THAT(events, Not(HasSubstr("\"event\":\"drain\"")));  // there before the run: said, not logged again
  Output sim2 = run_gpuq({"simulate", "--plan", "plan.json"}, dir.path(), env);
  EXPECT_THAT(sim2.err, Not(HasSubstr("drained")));
}

// Through nvidia-smi (its ECC column, and its list): GPU 1's uncorrectable count rises while
// `train` runs there, so GPU 1 is drained and `train` runs again on GPU 0 with no retry spent;
// then GPU 2 leaves nvidia-smi's list (fallen off the bus) and is drained too, once.
TEST(HealthRun, NvidiaSmisEccCountAndAGpuGoneFromItsListDrain) {
  TempDir dir;
  std::string node_dir = dir.path() + "/node";
  ASSERT_EQ(::mkdir(node_dir.c_str(), 0700), 0);
  std::map<std::string, std::string> env = fake_nvidia_smi(dir, "0, 0, 0, 0\n1, 0, 0, 0\n2, 0, 0, [N/A]\n");
  env["GPUQ_NODE_DIR"] = node_dir;
  // train runs on GPU 1 first (GPU 0 is busy with a job of no plan's memory), and fails there once `fail` exists.
  dir.write("train.sh",
            "echo \"$CUDA_VISIBLE_DEVICES\" >> \"$GPUQ_JOB_ID.gpus\"\n"
            "if [ \"$CUDA_VISIBLE_DEVICES\" = 1 ]; then while [ ! -e fail ]; do sleep 0.05; done; exit 4; fi\n"
            "while [ ! -e go ]; do sleep 0.05; done\n");
  dir.write("plan.json", R"({"settings": {"poll": 0.3, "max_retries": 0, "gpus": "0-2", "gpu_probe": "nvidia-smi"},
    "jobs": [{"id": "train", "script": "train.sh"}]})");
  dir.write("smi.txt", "0, 30000, 0, 0\n1, 0, 0, 0\n2, 30000, 0, [N/A]\n");
  auto run = start_gpuq({"run", "--plan", "plan.json"}, dir.path(), env);
  ASSERT_TRUE(eventually([&] { return dir.read("train.gpus") == "1\n"; }, 10)) << run->out();
  dir.write("smi.txt", "0, 0, 0, 0\n1, 0, 0, 2\n2, 0, 0, [N/A]\n");
  ASSERT_TRUE(eventually([&] { return run->out().find("GPU 1 drained: ") != std::string::npos; }, 10)) << run->out();
  dir.write("fail", "");
  ASSERT_TRUE(eventually([&] { return dir.read("train.gpus") == "1\n0\n"; }, 10)) << run->out();
  dir.write("smi.txt", "0, 0, 0, 0\n1, 0, 0, 2\n");  // GPU 2 gone
  ASSERT_TRUE(eventually([&] { return run->out().find("GPU 2 drained: ") != std::string::npos; }, 10)) << run->out();
  dir.write("go", "");
  Output o = run->wait(60);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("GPU 1 drained: 2 uncorrectable ECC errors (volatile count 2), seen by "));
  EXPECT_THAT(o.out, HasSubstr("requeued train: it failed (exit 4) on GPU 1, drained for 2 uncorrectable ECC errors"));
  EXPECT_THAT(o.out, HasSubstr("GPU 2 drained: GPU lost (gone from nvidia-smi's list), seen by "));
  size_t first = o.out.find("GPU 2 drained: ");
  EXPECT_EQ(o.out.find("GPU 2 drained: ", first + 1), std::string::npos) << o.out;  // once
  EXPECT_EQ(json::parse(dir.read("plan.state.json"))["train"]["attempts"], 0);
  Output gpus = run_gpuq({"gpus", "--gpus", "0-2", "--gpu-probe", "nvidia-smi"}, dir.path(), env);
  EXPECT_THAT(gpus.out, HasSubstr("faults read: uncorrectable ECC errors, a GPU gone from its list\n"));
}
