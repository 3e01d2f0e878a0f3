// Topology-aware placement (issue 15, point 2): the rule from a connection matrix, --pairs,
// and `nvidia-smi topo -m` read from captured outputs (tests/fixtures/topo).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "gpuq/core/schedule.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/topology.h"
#include "test_util.h"

using namespace gpuq;

namespace {

// Every pair linked by `l`, the pairs in `special` by their own link.
Topology all_to_all(int n, Link l, std::vector<std::tuple<int, int, Link>> special = {}) {
  Topology t;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) t.set(a, b, l);
  for (auto [a, b, s] : special) t.set(a, b, s);
  return t;
}

Placement auto_from(Topology t) {
  Placement p;
  p.kind = Placement::Kind::Auto;
  p.topology = std::move(t);
  return p;
}

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(FIXTURES) + "/topo/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const Link kNv18{Path::NvLink, 18}, kNv4{Path::NvLink, 4}, kPix{Path::Pix, 0}, kSys{Path::Sys, 0},
    kPhb{Path::Phb, 0};

}  // namespace

TEST(Placement, AllNvSwitchTakesTheLowestFreeIdsWhereTheOriginalTakesAPair) {
  Placement p = auto_from(all_to_all(8, kNv18));
  GpuMask free = mask_of({1, 2, 3, 6, 7});
  EXPECT_EQ(*pick_gpus(2, free, &p), (std::vector<int>{1, 2}));
  EXPECT_EQ(*pick_gpus(2, free, nullptr), (std::vector<int>{2, 3}));  // the original's pair (2,3)
  EXPECT_EQ(*pick_gpus(3, free, &p), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(*pick_gpus(1, free, &p), (std::vector<int>{1}));
  EXPECT_FALSE(pick_gpus(6, free, &p));
}

TEST(Placement, BridgedPairsOnAPcieBoardAreTakenBeforeNeighbours) {
  // NVLink bridges on (0,2) and (1,3); 0-1 and 2-3 share a PCIe switch; the rest cross sockets.
  Placement p = auto_from(all_to_all(4, kSys, {{0, 2, kNv4}, {1, 3, kNv4}, {0, 1, kPix}, {2, 3, kPix}}));
  EXPECT_EQ(*pick_gpus(2, mask_of({0, 1, 2, 3}), &p), (std::vector<int>{0, 2}));
  EXPECT_EQ(*pick_gpus(2, mask_of({1, 2, 3}), &p), (std::vector<int>{1, 3}));
  EXPECT_EQ(*pick_gpus(2, mask_of({0, 1, 3}), &p), (std::vector<int>{1, 3}));
  EXPECT_EQ(pairs_in_use(p, mask_of({0, 1, 2, 3})), (std::vector<std::pair<int, int>>{{0, 2}, {1, 3}}));
  // The original's rule would split both bridges.
  EXPECT_EQ(*pick_gpus(2, mask_of({0, 1, 2, 3}), nullptr), (std::vector<int>{0, 1}));
}

TEST(Placement, NoNvLinkPrefersTheSameSocketAndWideJobsStayTogether) {
  // Two sockets of 4: PHB within a socket, SYS across.
  Topology t;
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b) t.set(a, b, a / 4 == b / 4 ? kPhb : kSys);
  Placement p = auto_from(t);
  EXPECT_EQ(*pick_gpus(2, mask_of({3, 4, 5}), &p), (std::vector<int>{4, 5}));
  EXPECT_EQ(*pick_gpus(4, mask_of({1, 2, 3, 4, 5, 6, 7}), &p), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(*pick_gpus(3, mask_of({0, 3, 4, 6, 7}), &p), (std::vector<int>{4, 6, 7}));
}

TEST(Placement, WithoutATopologyAutoIsTheOriginal) {
  Placement p;
  p.kind = Placement::Kind::Auto;
  const uint64_t seed = test::test_seed(15);
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int k = 0; k < 200; ++k) {
    GpuMask free = rng() & 0xff;
    int n = static_cast<int>(rng() % 5);
    EXPECT_EQ(pick_gpus(n, free, &p), pick_gpus(n, free)) << "free " << free << " n " << n;
  }
}

TEST(Placement, PairsFlagParsesAndPlaces) {
  std::string err;
  auto p = parse_pairs("1-3,0-2", &err);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->kind, Placement::Kind::Pairs);
  EXPECT_EQ(*pick_gpus(2, mask_of({0, 1, 2, 3}), &*p), (std::vector<int>{1, 3}));
  EXPECT_EQ(*pick_gpus(2, mask_of({0, 1, 2}), &*p), (std::vector<int>{0, 2}));
  EXPECT_EQ(*pick_gpus(2, mask_of({0, 3}), &*p), (std::vector<int>{0, 3}));  // no listed pair free: lowest
  EXPECT_EQ(parse_pairs("auto", &err)->kind, Placement::Kind::Auto);
  EXPECT_EQ(parse_pairs("original", &err)->kind, Placement::Kind::Original);
  EXPECT_FALSE(parse_pairs("0-1,1-2", &err));
  EXPECT_EQ(err, "GPU 1 is in two pairs of --pairs '0-1,1-2'");
  EXPECT_FALSE(parse_pairs("0-0", &err));
  EXPECT_FALSE(parse_pairs("0,1", &err));
  EXPECT_EQ(err, "'0' in --pairs '0,1' is not a pair of two GPU ids 0..63 (expected auto, original, or pairs such as "
                 "0-1,2-3)");
  EXPECT_FALSE(parse_pairs("0-64", &err));
}

TEST(Placement, TheSimulatorPlacesAsTheTopologySays) {
  Plan plan = test::plan_of(R"([{"id": "one", "script": "a.sh", "gpus": 1, "est_hours": 1},
                                {"id": "two", "script": "b.sh", "gpus": 2, "est_hours": 1}])",
                            {0, 1, 2, 3});
  SimOptions opt;
  opt.node_gpus = {0, 1, 2, 3};
  Simulation original = simulate(plan, opt);
  opt.placement = auto_from(all_to_all(4, kSys, {{0, 2, kNv4}, {1, 3, kNv4}, {0, 1, kPix}, {2, 3, kPix}}));
  Simulation bridged = simulate(plan, opt);
  ASSERT_EQ(original.rows.size(), 2u);
  ASSERT_EQ(bridged.rows.size(), 2u);
  EXPECT_EQ(original.rows[1].gpus, (std::vector<int>{2, 3}));  // "one" took 0; the original's next pair
  EXPECT_EQ(bridged.rows[1].gpus, (std::vector<int>{1, 3}));   // the free bridge
}

TEST(TopoMatrix, DgxA100IsNv12EverywhereAndTheNicsAreSkipped) {
  std::string err;
  auto t = parse_topo_matrix(fixture("dgx-a100.txt"), &err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->gpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(t->links.size(), 28u);
  for (auto& [ab, l] : t->links) EXPECT_EQ(l, (Link{Path::NvLink, 12})) << ab.first << "-" << ab.second;
}

TEST(TopoMatrix, HgxH100IsNv18EverywhereSoTheLowestIdsAreTaken) {
  std::string err;
  auto t = parse_topo_matrix(fixture("hgx-h100.txt"), &err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->links.size(), 28u);
  EXPECT_EQ(t->between(3, 6), kNv18);
  Placement p = auto_from(*t);
  EXPECT_EQ(*pick_gpus(2, mask_of({1, 4, 5}), &p), (std::vector<int>{1, 4}));
}

TEST(TopoMatrix, PcieBoxesGiveTheirSocketsAndBridges) {
  std::string err;
  auto plain = parse_topo_matrix(fixture("pcie-4gpu.txt"), &err);
  ASSERT_TRUE(plain) << err;
  EXPECT_EQ(plain->between(0, 1), kPhb);
  EXPECT_EQ(plain->between(1, 2), kSys);
  auto bridged = parse_topo_matrix(fixture("pcie-4gpu-bridged.txt"), &err);
  ASSERT_TRUE(bridged) << err;
  EXPECT_EQ(bridged->between(2, 0), kNv4);
  EXPECT_EQ(bridged->between(0, 1), kPix);
  Placement p = auto_from(*bridged);
  EXPECT_EQ(pairs_in_use(p, mask_of({0, 1, 2, 3})), (std::vector<std::pair<int, int>>{{0, 2}, {1, 3}}));
}

// Issue 45: each GPU's CPU Affinity (the cores of its NUMA node) is kept; N/A, and a matrix with
// no such column, give none. The cores near a set of GPUs are their affinities together.
TEST(TopoMatrix, EachGpusCpuAffinityIsKeptAndNaIsNone) {
  std::string err;
  auto t = parse_topo_matrix(
      "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
      "GPU0\t X \tNV4\tSYS\tPIX\t0-3,8-11\t0\t\tN/A\n"
      "GPU1\tNV4\t X \tSYS\tPIX\t0-3,8-11\t0\t\tN/A\n"
      "GPU2\tSYS\tSYS\t X \tSYS\tN/A\tN/A\t\tN/A\n"
      "NIC0\tPIX\tPIX\tSYS\t X \n\nLegend:\n\n  X    = Self\n",
      &err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->between(0, 1), kNv4);
  const std::vector<int> node0{0, 1, 2, 3, 8, 9, 10, 11};
  EXPECT_EQ(t->cpus, (std::map<int, std::vector<int>>{{0, node0}, {1, node0}}));
  EXPECT_EQ(t->cores_near({2}), std::vector<int>{});
  EXPECT_EQ(t->cores_near({1, 2}), node0);
  auto none = parse_topo_matrix("\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n", &err);
  ASSERT_TRUE(none) << err;
  EXPECT_TRUE(none->cpus.empty());
  // A captured DGX A100: two GPUs on each of four NUMA nodes.
  auto dgx = parse_topo_matrix(fixture("dgx-a100.txt"), &err);
  ASSERT_TRUE(dgx) << err;
  ASSERT_EQ(dgx->cpus.size(), 8u);
  std::vector<int> node7;
  for (int c = 112; c <= 127; ++c) node7.push_back(c);
  for (int c = 240; c <= 255; ++c) node7.push_back(c);
  EXPECT_EQ(dgx->cpus.at(4), node7);
  EXPECT_EQ(dgx->cores_near({4, 5}), node7);
  EXPECT_EQ(dgx->cores_near({0, 4}).size(), 64u);
}

TEST(TopoMatrix, BadInputSaysTheLineAndWhatWasExpected) {
  std::string err;
  EXPECT_FALSE(parse_topo_matrix("0, 1000\n1, 20\n", &err));
  EXPECT_EQ(err, "no GPU matrix (expected a header line GPU0 GPU1 ... and a row per GPU)");
  EXPECT_FALSE(parse_topo_matrix("\tGPU0\tGPU1\nGPU0\t X \tNVX\nGPU1\tNV4\t X \n", &err));
  EXPECT_EQ(err, "line 2: 'NVX' is not a link (expected X, NV#, PIX, PXB, PHB, NODE or SYS)");
  EXPECT_FALSE(parse_topo_matrix("\tGPU0\tGPU1\nGPU0\t X\n", &err));
  EXPECT_EQ(err, "line 2: GPU0 has 1 cells, expected one for each of the 2 devices of the header");
}
