// How the GPUs of a node reach each other (NVLink lanes, else the PCIe path), and the
// placement rule that reads it: which free GPUs a multi-GPU job takes.
// Pure: the matrix comes from NVML or `nvidia-smi topo -m` (live), or from a test.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuq/core/gpus.h"

namespace gpuq {

/// The path between two GPUs, worst first (the words of `nvidia-smi topo -m`).
enum class Path : std::uint8_t {
  Unknown = 0,  ///< not known (no reading)
  Sys,          ///< SYS: across the interconnect between NUMA nodes (SMP, e.g. QPI/UPI)
  Node,         ///< NODE: across PCIe host bridges within one NUMA node
  Phb,          ///< PHB: through a PCIe host bridge (the CPU)
  Pxb,          ///< PXB: through several PCIe bridges, not a host bridge
  Pix,          ///< PIX: through at most one PCIe bridge
  Board,        ///< both on one board (NVML's "internal", a dual-GPU card)
  NvLink,       ///< NV#: NVLink, `lanes` of them (directly or through NVSwitch)
};

/// How two GPUs are connected.
struct Link {
  Path path = Path::Unknown;
  int lanes = 0;  ///< NVLink lanes (NvLink only)
  bool operator==(const Link&) const = default;
};

/// A number that orders links, better is larger: NVLink by its lanes above every PCIe path.
int link_score(Link l);

/// `nvidia-smi topo -m`'s word for a link: "NV12", "PIX", "SYS", "?".
std::string link_name(Link l);

/// The connection matrix of a node: a link for each pair of GPU ids, and the cores near each GPU.
struct Topology {
  std::vector<int> gpus;                      ///< the GPU ids it covers, ascending
  std::map<std::pair<int, int>, Link> links;  ///< (a, b) with a < b
  std::map<int, std::vector<int>> cpus;       ///< GPU id: its NUMA node's cores (topo -m's CPU Affinity), where known

  /// The link between a and b (Unknown when not known, or a == b).
  Link between(int a, int b) const;
  /// Records the link between a and b (either order).
  void set(int a, int b, Link l);
  /// True when no pair has a known link.
  bool empty() const;
  /// The cores near any of `gpus` (their CPU affinities together), ascending; empty where none is known.
  std::vector<int> cores_near(const std::vector<int>& gpus) const;
};

/// How multi-GPU jobs are placed (--pairs).
struct Placement {
  enum class Kind {
    Original,  ///< the original's: a 2-GPU job on the first free pair of (0,1) (2,3) (4,5) (6,7)
    Pairs,     ///< as Original, with the pairs given (--pairs 0-2,1-3)
    Auto,      ///< from `topology`: the best-connected free set (Original while it is empty)
  } kind = Kind::Original;
  std::vector<std::pair<int, int>> pairs;  ///< Pairs: in the order given
  Topology topology;                       ///< Auto
};

/// Parses --pairs: "auto", "original", or pairs such as "0-1,2-3" / "1-3,0-2". Nullopt, with
/// `err` filled, for anything else (an id outside 0..63, a GPU in two pairs, a pair of one GPU).
std::optional<Placement> parse_pairs(std::string_view text, std::string* err);

/// The GPUs a job needing `n` takes among `free` (nullopt when they do not fit). `p` null or
/// Original: the original's rule (pick_gpus). Pairs: a 2-GPU job on the first free pair
/// listed, else the lowest ids. Auto: 1 GPU, the lowest free id; more, the free set whose
/// worst link is best, then whose links sum highest, then the lowest ids (on an all-NVSwitch
/// board every set ties, so the lowest ids are taken, as the original does for other widths).
std::optional<std::vector<int>> pick_gpus(int n, GpuMask free, const Placement* p);

/// The pairs a 2-GPU job is given first on a node of `node` GPUs, best first: the listed
/// ones, or from the topology each GPU's best partner (for `gpuq gpus`).
std::vector<std::pair<int, int>> pairs_in_use(const Placement& p, GpuMask node);

/// Parses the matrix `nvidia-smi topo -m` prints (GPU rows and columns; NIC columns, the NUMA
/// affinity columns and the legend are skipped), with each GPU's CPU Affinity where it gives one
/// (a cpu list such as 0-31,64-95; N/A or none: not known). Nullopt, with `err` saying the line and
/// what was expected, when it has no GPU matrix or a cell that is no link word.
std::optional<Topology> parse_topo_matrix(const std::string& text, std::string* err);

}  // namespace gpuq
