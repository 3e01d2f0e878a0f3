#include "gpuq/core/topology.h"

#include "gpuq/core/cores.h"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace gpuq {

int link_score(Link l) { return l.path == Path::NvLink ? 100 + l.lanes : static_cast<int>(l.path); }

std::string link_name(Link l) {
  switch (l.path) {
    case Path::NvLink: return "NV" + std::to_string(l.lanes);
    case Path::Board: return "BRD";
    case Path::Pix: return "PIX";
    case Path::Pxb: return "PXB";
    case Path::Phb: return "PHB";
    case Path::Node: return "NODE";
    case Path::Sys: return "SYS";
    case Path::Unknown: break;
  }
  return "?";
}

Link Topology::between(int a, int b) const {
  if (a == b) return {};
  auto it = links.find({std::min(a, b), std::max(a, b)});
  return it == links.end() ? Link{} : it->second;
}

void Topology::set(int a, int b, Link l) {
  if (a == b) return;
  links[{std::min(a, b), std::max(a, b)}] = l;
  for (int g : {a, b})
    if (!std::binary_search(gpus.begin(), gpus.end(), g)) gpus.insert(std::upper_bound(gpus.begin(), gpus.end(), g), g);
}

bool Topology::empty() const {
  return std::none_of(links.begin(), links.end(), [](const auto& kv) { return kv.second.path != Path::Unknown; });
}

std::vector<int> Topology::cores_near(const std::vector<int>& ids) const {
  std::vector<int> out;
  for (int g : ids)
    if (auto it = cpus.find(g); it != cpus.end()) out.insert(out.end(), it->second.begin(), it->second.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

const std::vector<std::pair<int, int>> kOriginalPairs{{0, 1}, {2, 3}, {4, 5}, {6, 7}};

bool has(GpuMask m, int g) { return g >= 0 && g <= kMaxGpuId && (m >> g & 1); }

std::optional<std::vector<int>> lowest(int n, GpuMask free) {
  if (count(free) < n) return std::nullopt;
  std::vector<int> ids = ids_of(free);
  ids.resize(static_cast<size_t>(n));
  return ids;
}

// The set's worst link and the sum of its links: how well connected it is.
std::pair<int, long> quality(const Topology& t, const std::vector<int>& set) {
  int worst = 1 << 30;
  long sum = 0;
  for (size_t i = 0; i < set.size(); ++i)
    for (size_t j = i + 1; j < set.size(); ++j) {
      int s = link_score(t.between(set[i], set[j]));
      worst = std::min(worst, s);
      sum += s;
    }
  return {worst, sum};
}

// Auto for n >= 2: from each free GPU as a seed, grow the set by the GPU whose worst link to
// it is best (ties: the larger sum, then the lower id); keep the best set found (ties: the
// lowest ids). Exact for n == 2; a greedy for wider jobs (a node has at most 64 GPUs).
std::vector<int> best_connected(int n, GpuMask free, const Topology& t) {
  std::vector<int> ids = ids_of(free), best;
  std::pair<int, long> best_q{-1, -1};
  for (int seed : ids) {
    std::vector<int> set{seed};
    while (static_cast<int>(set.size()) < n) {
      int pick = -1;
      std::pair<int, long> pick_q{-1, -1};
      for (int g : ids) {
        if (std::find(set.begin(), set.end(), g) != set.end()) continue;
        std::pair<int, long> q{1 << 30, 0};
        for (int m : set) {
          int s = link_score(t.between(g, m));
          q.first = std::min(q.first, s);
          q.second += s;
        }
        if (q > pick_q) pick_q = q, pick = g;
      }
      set.push_back(pick);
    }
    std::sort(set.begin(), set.end());
    std::pair<int, long> q = quality(t, set);
    if (q > best_q || (q == best_q && set < best)) best_q = q, best = set;
  }
  return best;
}

std::optional<int> id_in(std::string_view s) {
  int g = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), g);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || g < 0 || g > kMaxGpuId) return std::nullopt;
  return g;
}

}  // namespace

std::optional<Placement> parse_pairs(std::string_view text, std::string* err) {
  Placement p;
  if (text == "auto") p.kind = Placement::Kind::Auto;
  if (text == "auto" || text == "original") return p;
  p.kind = Placement::Kind::Pairs;
  GpuMask seen = 0;
  size_t pos = 0;
  while (true) {
    size_t comma = text.find(',', pos);
    std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    size_t dash = item.find('-');
    std::optional<int> a = dash == std::string_view::npos ? std::nullopt : id_in(item.substr(0, dash));
    std::optional<int> b = dash == std::string_view::npos ? std::nullopt : id_in(item.substr(dash + 1));
    if (!a || !b || *a == *b) {
      *err = "'" + std::string(item) + "' in --pairs '" + std::string(text) +
             "' is not a pair of two GPU ids 0..63 (expected auto, original, or pairs such as 0-1,2-3)";
      return std::nullopt;
    }
    for (int g : {*a, *b}) {
      if (has(seen, g)) {
        *err = "GPU " + std::to_string(g) + " is in two pairs of --pairs '" + std::string(text) + "'";
        return std::nullopt;
      }
      seen |= GpuMask{1} << g;
    }
    p.pairs.emplace_back(*a, *b);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return p;
}

std::optional<std::vector<int>> pick_gpus(int n, GpuMask free, const Placement* p) {
  if (!p || p->kind == Placement::Kind::Original || (p->kind == Placement::Kind::Auto && p->topology.empty()))
    return pick_gpus(n, free);
  if (n == 0) return std::vector<int>{};
  if (count(free) < n) return std::nullopt;
  if (p->kind == Placement::Kind::Pairs) {
    if (n == 2)
      for (auto [a, b] : p->pairs)
        if (has(free, a) && has(free, b)) return std::vector<int>{std::min(a, b), std::max(a, b)};
    return lowest(n, free);
  }
  if (n == 1) return lowest(n, free);
  return best_connected(n, free, p->topology);
}

std::vector<std::pair<int, int>> pairs_in_use(const Placement& p, GpuMask node) {
  std::vector<std::pair<int, int>> out;
  const auto& listed = p.kind == Placement::Kind::Pairs ? p.pairs : kOriginalPairs;
  if (p.kind != Placement::Kind::Auto || p.topology.empty()) {
    for (auto [a, b] : listed)
      if (has(node, a) && has(node, b)) out.emplace_back(a, b);
    return out;
  }
  // Auto: take the best pair the rule would, then the best among the GPUs left, and so on.
  GpuMask left = node;
  while (count(left) >= 2) {
    std::vector<int> two = best_connected(2, left, p.topology);
    out.emplace_back(two[0], two[1]);
    left &= ~mask_of(two);
  }
  return out;
}

namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::optional<int> gpu_name(const std::string& w) {
  if (w.size() < 4 || w.compare(0, 3, "GPU") != 0) return std::nullopt;
  return id_in(std::string_view(w).substr(3));
}

std::optional<Link> link_word(const std::string& w) {
  if (w == "X") return Link{};
  if (w.size() > 2 && w.compare(0, 2, "NV") == 0) {
    int lanes = 0;
    auto [p, ec] = std::from_chars(w.data() + 2, w.data() + w.size(), lanes);
    if (ec == std::errc() && p == w.data() + w.size() && lanes > 0) return Link{Path::NvLink, lanes};
    return std::nullopt;
  }
  static const std::map<std::string, Path> kWords{{"PIX", Path::Pix}, {"PXB", Path::Pxb}, {"PHB", Path::Phb},
                                                  {"NODE", Path::Node}, {"SYS", Path::Sys}, {"SOC", Path::Sys}};
  auto it = kWords.find(w);
  if (it == kWords.end()) return std::nullopt;
  return Link{it->second, 0};
}

}  // namespace

std::optional<Topology> parse_topo_matrix(const std::string& text, std::string* err) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::optional<int>> columns;  // per device column: its GPU id (NICs: none)
  bool affinity = false;                     // the header has "CPU Affinity" after the devices
  Topology t;
  int n = 0;
  bool any_row = false;
  while (std::getline(in, line)) {
    ++n;
    std::vector<std::string> w = words(line);
    if (w.empty()) continue;
    if (w[0] == "Legend:") break;
    if (columns.empty()) {
      if (!gpu_name(w[0])) continue;  // a banner before the header
      // The header: device columns until "CPU Affinity" (or the end).
      for (const std::string& c : w) {
        if (c == "CPU" || c == "NUMA") {
          affinity = c == "CPU";
          break;
        }
        columns.push_back(gpu_name(c));
      }
      continue;
    }
    std::optional<int> row = gpu_name(w[0]);
    if (!row) continue;  // a NIC's row
    if (w.size() < columns.size() + 1) {
      *err = "line " + std::to_string(n) + ": GPU" + std::to_string(*row) + " has " + std::to_string(w.size() - 1) +
             " cells, expected one for each of the " + std::to_string(columns.size()) + " devices of the header";
      return std::nullopt;
    }
    for (size_t c = 0; c < columns.size(); ++c) {
      std::optional<Link> l = link_word(w[c + 1]);
      if (!l) {
        *err = "line " + std::to_string(n) + ": '" + w[c + 1] +
               "' is not a link (expected X, NV#, PIX, PXB, PHB, NODE or SYS)";
        return std::nullopt;
      }
      if (columns[c] && *columns[c] != *row) t.set(*row, *columns[c], *l);
    }
    // The cell after the devices: the cores of its NUMA node ("0-31,64-95"; "N/A" is none).
    if (affinity && w.size() > columns.size() + 1)
      if (std::vector<int> cores = parse_core_list(w[columns.size() + 1]); !cores.empty()) t.cpus[*row] = cores;
    any_row = true;
  }
  if (!any_row) {
    *err = "no GPU matrix (expected a header line GPU0 GPU1 ... and a row per GPU)";
    return std::nullopt;
  }
  return t;
}

}  // namespace gpuq
