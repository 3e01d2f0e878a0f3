// GPU health: the Xid table, the faults of a reading, the node's drain records (gpu_health.h).
#include "gpuq/core/gpu_health.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace gpuq {

namespace {

// NVIDIA, "XID Errors", docs.nvidia.com/deploy/xid-errors (r555): the Xid catalog, the common Xids
// of data-center GPUs. Kept in step with doc/gpu-health.md's table (a test holds them together).
constexpr auto kXids = std::to_array<XidRow>({
    {13, false, "graphics engine exception: the application's fault"},
    {31, false, "GPU memory page fault: the application's fault"},
    {43, false, "GPU stopped processing: the application's fault"},
    {45, false, "preemptive cleanup after earlier errors"},
    {48, true, "double-bit ECC error"},
    {63, true, "ECC page retirement or row remapping recorded"},
    {64, true, "ECC page retirement or row remapping failed"},
    {74, true, "NVLink error"},
    {79, true, "GPU has fallen off the bus"},
    {92, true, "high single-bit ECC error rate"},
    {94, true, "contained ECC error"},
    {95, true, "uncontained ECC error"},
    {119, true, "GSP RPC timeout"},
    {120, true, "GSP error"},
});

}  // namespace

std::span<const XidRow> xid_table() { return kXids; }

const XidRow* find_xid(unsigned code) {
  for (const XidRow& r : kXids)
    if (r.code == code) return &r;
  return nullptr;
}

bool XidRules::drains(unsigned code) const {
  if (ignore.count(code)) return false;
  if (drain.count(code)) return true;
  const XidRow* r = find_xid(code);
  return r && r->drains;
}

std::optional<std::set<unsigned>> parse_xid_list(std::string_view text, std::string* problem) {
  std::set<unsigned> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    std::string_view item = text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty() || comma != std::string_view::npos) {
      unsigned code = 0;
      auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), code);
      if (item.empty() || ec != std::errc() || end != item.data() + item.size() || code == 0 || code > 999) {
        if (problem) *problem = fmt::format("\"{}\" is not an Xid code (a whole number from 1 to 999)", item);
        return std::nullopt;
      }
      out.insert(code);
    }
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}

XidRules xid_rules(std::string_view drain, std::string_view ignore) {
  XidRules r;
  r.drain = parse_xid_list(drain, nullptr).value_or(std::set<unsigned>{});
  r.ignore = parse_xid_list(ignore, nullptr).value_or(std::set<unsigned>{});
  return r;
}

std::vector<GpuFault> find_faults(const GpuReading& r, FaultWatch& w, const XidRules& rules, GpuMask node,
                                  GpuMask accept) {
  std::vector<GpuFault> out;
  auto ours = [&](int g) { return g >= 0 && g <= kMaxGpuId && (node >> g & 1); };
  auto accepted = [&](int g) { return (accept >> g & 1) != 0; };
  bool fresh = !(r.taken && w.last_taken && *r.taken == *w.last_taken);
  if (r.taken) w.last_taken = r.taken;
  if (fresh)
    for (const auto& [g, codes] : r.xids) {
      if (!ours(g)) continue;
      for (unsigned code : codes) {
        const XidRow* row = find_xid(code);
        std::string what = row ? fmt::format("Xid {} ({})", code, row->meaning) : fmt::format("Xid {}", code);
        bool drains = rules.drains(code);
        if (rules.ignore.count(code)) what += " (xid_ignore)";
        else if (rules.drain.count(code) && !(row && row->drains)) what += " (xid_drain)";
        out.push_back({g, drains, std::move(what)});
      }
    }
  for (const auto& [g, n] : r.ecc_uncorrected) {
    if (!ours(g)) continue;
    unsigned long long before = w.ecc.count(g) ? w.ecc[g] : 0;
    w.ecc[g] = n;
    if (n > before && !accepted(g))
      out.push_back({g, true,
                     fmt::format("{} uncorrectable ECC error{} (volatile count {})", n - before,
                                 n - before == 1 ? "" : "s", n)});
  }
  for (auto it = w.pending.begin(); it != w.pending.end();)
    it = r.pending.count(it->first) || !r.used_mib ? std::next(it) : w.pending.erase(it);
  for (const auto& [g, what] : r.pending) {
    if (!ours(g) || w.pending.count(g)) continue;
    w.pending[g] = what;
    if (!accepted(g)) out.push_back({g, true, what});
  }
  // Lost: NVML's "GPU is lost", or a GPU an earlier reading listed that this one does not.
  std::map<int, std::string> lost = r.lost;
  GpuMask listed = 0;
  if (r.used_mib) {
    for (const auto& [g, mib] : *r.used_mib)
      if (ours(g)) listed |= GpuMask{1} << g;
    for (const auto& [g, why] : r.lost)
      if (ours(g)) listed |= GpuMask{1} << g;
    for (GpuMask gone = w.listed & ~listed; gone; gone &= gone - 1) {
      int g = std::countr_zero(gone);
      lost[g] = fmt::format("gone from {}'s list", r.source.empty() ? "the probe" : r.source);
      listed |= GpuMask{1} << g;  // still counted as listed: it drains once
    }
    w.listed |= listed;
    for (auto it = w.lost.begin(); it != w.lost.end();)
      it = lost.count(*it) ? std::next(it) : w.lost.erase(it);
  }
  for (const auto& [g, why] : lost) {
    if (!ours(g) || w.lost.count(g)) continue;
    w.lost.insert(g);
    if (!accepted(g)) out.push_back({g, true, fmt::format("GPU lost ({})", why)});
  }
  return out;
}

std::map<int, GpuDrain> drained_gpus(const std::vector<std::vector<GpuDrain>>& records,
                                     std::map<int, GpuDrain>* undrains) {
  std::map<int, const GpuDrain*> newest;
  for (const auto& list : records)
    for (const GpuDrain& d : list) {
      if (d.gpu < 0 || d.gpu > kMaxGpuId) continue;
      const GpuDrain*& n = newest[d.gpu];
      if (!n || d.at > n->at) n = &d;
    }
  std::map<int, GpuDrain> out;
  if (undrains) undrains->clear();
  for (const auto& [g, d] : newest)
    if (d->drained) out[g] = *d;
    else if (undrains) (*undrains)[g] = *d;
  return out;
}

GpuMask drained_mask(const std::map<int, GpuDrain>& drained) {
  GpuMask m = 0;
  for (const auto& [g, d] : drained) m |= GpuMask{1} << g;
  return m;
}

void set_drain_record(std::vector<GpuDrain>& mine, GpuDrain record) {
  std::erase_if(mine, [&](const GpuDrain& d) { return d.gpu == record.gpu; });
  mine.push_back(std::move(record));
  std::sort(mine.begin(), mine.end(), [](const GpuDrain& a, const GpuDrain& b) { return a.gpu < b.gpu; });
}

std::string drain_text(const GpuDrain& d, std::string_view when) {
  if (!d.drained) return fmt::format("GPU {} undrained by {} at {}{}", d.gpu, d.by, when, d.why.empty() ? "" : ": " + d.why);
  if (d.fault) return fmt::format("GPU {} drained: {}, seen by {}'s run at {}", d.gpu, d.why, d.by, when);
  return fmt::format("GPU {} drained by {} at {}: {}", d.gpu, d.by, when, d.why);
}

std::string drained_prediction_note(GpuMask drained, GpuMask node) {
  GpuMask d = drained & node;
  if (!d) return "";
  std::vector<int> ids = ids_of(d);
  std::string list;
  for (size_t k = 0; k < ids.size(); ++k) list += fmt::format("{}{}", k ? ", " : "", ids[k]);
  int left = std::popcount(node & ~d);
  return fmt::format("GPU{} {} {} drained (gpuq gpus says why; gpuq undrain gives {} back): predicted on the {} GPU{} left",
                     ids.size() == 1 ? "" : "s", list, ids.size() == 1 ? "is" : "are", ids.size() == 1 ? "it" : "them",
                     left, left == 1 ? "" : "s");
}

bool ended_by_fault(const GpuDrain& d, const std::vector<int>& gpus, std::optional<double> start, double end,
                    double poll) {
  if (!d.drained || !d.fault || std::find(gpus.begin(), gpus.end(), d.gpu) == gpus.end()) return false;
  double window = std::max(kFaultWindowSeconds, 2 * poll);
  // Read while it ran, or soon after it ended (its Xid is often read a tick after it failed).
  return d.at >= start.value_or(end - window) && d.at <= end + window;
}

}  // namespace gpuq
