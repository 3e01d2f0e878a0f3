#include "gpuq/live/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <vector>

#include "gpuq/live/proc.h"

namespace gpuq {

namespace {

// The NVML ABI, as NVIDIA's nvml.h declares it (the unversioned names are the v1 ABI; the
// _v2/_v3 names below are those nvml.h maps the plain names to).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
using nvmlEventSet_t = struct nvmlEventSet_st*;
constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8;
constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
constexpr int NVML_VOLATILE_ECC = 0;
struct nvmlEventData_t {  // nvmlEventSetWait_v2
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
};
constexpr unsigned kNvLinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS (Hopper: 18)

struct nvmlMemory_t {
  unsigned long long total, free, used;  // bytes
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;  // percent
};
struct nvmlProcessInfo_v1_t {  // nvmlDeviceGetComputeRunningProcesses (v1)
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; NVML_VALUE_NOT_AVAILABLE (~0ULL) when not known
};
struct nvmlPciInfo_t {  // nvmlDeviceGetPciInfo_v3, nvmlDeviceGetNvLinkRemotePciInfo_v2
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
enum nvmlEnableState_t { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
enum nvmlGpuTopologyLevel_t {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50,
};

Path path_of(nvmlGpuTopologyLevel_t level) {
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL: return Path::Board;
    case NVML_TOPOLOGY_SINGLE: return Path::Pix;
    case NVML_TOPOLOGY_MULTIPLE: return Path::Pxb;
    case NVML_TOPOLOGY_HOSTBRIDGE: return Path::Phb;
    case NVML_TOPOLOGY_NODE: return Path::Node;
    case NVML_TOPOLOGY_SYSTEM: return Path::Sys;
  }
  return Path::Unknown;
}

using PciKey = std::tuple<unsigned, unsigned, unsigned>;  // domain, bus, device

}  // namespace

struct NvmlProbe::Api {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  const char* (*error_string)(nvmlReturn_t);
  nvmlReturn_t (*count)(unsigned int*);
  nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*);
  nvmlReturn_t (*ancestor)(nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t*);
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned int, nvmlEnableState_t*);
  nvmlReturn_t (*link_remote)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*);
  nvmlReturn_t (*cpu_affinity)(nvmlDevice_t, unsigned int, unsigned long*);  ///< none: not asked
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*);                  ///< none: no energy readings
  // Faults (gpu_health.h); each optional: none, that fault is not read.
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*);
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
  nvmlReturn_t (*event_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t);
  nvmlReturn_t (*ecc)(nvmlDevice_t, int, int, unsigned long long*);
  nvmlReturn_t (*retired_pending)(nvmlDevice_t, nvmlEnableState_t*);
  nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*, unsigned int*);

  std::string words(nvmlReturn_t rc) const {
    const char* s = error_string ? error_string(rc) : nullptr;
    return s ? s : fmt::format("NVML error {}", rc);
  }
};

struct NvmlProbe::Device {
  nvmlDevice_t handle;
  PciKey pci;
  std::string name;
};

std::string nvml_library() {
  const char* env = std::getenv("GPUQ_NVML_LIB");
  return env && *env ? env : "libnvidia-ml.so.1";
}

NvmlProbe::NvmlProbe(const std::string& library) : api_(std::make_unique<Api>()), library_(library) {
  lib_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    const char* e = ::dlerror();
    problem_ = e ? e : fmt::format("cannot open {}", library);  // dlerror names the file
    return;
  }
  bind(library);
  if (!problem_.empty()) return;
  open_devices();
  if (ok_) listen_for_xids();
}

void NvmlProbe::bind(const std::string& library) {
  // Each symbol, or the problem naming the first one missing.
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib_, name));
    if (!fn && problem_.empty()) problem_ = fmt::format("{} has no {}", library, name);
  };
  Api& a = *api_;
  sym(a.init, "nvmlInit_v2");
  sym(a.shutdown, "nvmlShutdown");
  sym(a.error_string, "nvmlErrorString");
  sym(a.count, "nvmlDeviceGetCount_v2");
  sym(a.handle, "nvmlDeviceGetHandleByIndex_v2");
  sym(a.name, "nvmlDeviceGetName");
  sym(a.memory, "nvmlDeviceGetMemoryInfo");
  sym(a.utilization, "nvmlDeviceGetUtilizationRates");
  sym(a.processes, "nvmlDeviceGetComputeRunningProcesses");
  sym(a.pci, "nvmlDeviceGetPciInfo_v3");
  sym(a.ancestor, "nvmlDeviceGetTopologyCommonAncestor");
  sym(a.link_state, "nvmlDeviceGetNvLinkState");
  sym(a.link_remote, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  // Those a driver may lack, each missing alone: the cores near each GPU (only they are unknown),
  // the energy counter (Volta and later, driver 410 on: no job's energy is known), Xid events and
  // the fault counters.
  auto maybe = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib_, name)); };
  maybe(a.cpu_affinity, "nvmlDeviceGetCpuAffinity");
  maybe(a.energy, "nvmlDeviceGetTotalEnergyConsumption");
  maybe(a.event_set_create, "nvmlEventSetCreate");
  maybe(a.register_events, "nvmlDeviceRegisterEvents");
  maybe(a.event_wait, "nvmlEventSetWait_v2");
  maybe(a.event_set_free, "nvmlEventSetFree");
  maybe(a.ecc, "nvmlDeviceGetTotalEccErrors");
  maybe(a.retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
  maybe(a.remapped_rows, "nvmlDeviceGetRemappedRows");
}

void NvmlProbe::open_devices() {
  const Api& a = *api_;
  if (nvmlReturn_t rc = a.init(); rc != NVML_SUCCESS) {
    problem_ = fmt::format("nvmlInit_v2: {}", a.words(rc));
    return;
  }
  initialized_ = true;
  unsigned int n = 0;
  if (nvmlReturn_t rc = a.count(&n); rc != NVML_SUCCESS) {
    problem_ = fmt::format("nvmlDeviceGetCount_v2: {}", a.words(rc));
    return;
  }
  for (unsigned int i = 0; i < n && i <= static_cast<unsigned>(kMaxGpuId); ++i) {
    Device d{};
    nvmlPciInfo_t pci{};
    nvmlReturn_t rc = a.handle(i, &d.handle);
    if (rc == NVML_SUCCESS) rc = a.pci(d.handle, &pci);
    if (rc != NVML_SUCCESS) {
      problem_ = fmt::format("NVML device {}: {}", i, a.words(rc));
      return;
    }
    d.pci = {pci.domain, pci.bus, pci.device};
    char name[96] = {0};
    if (a.name(d.handle, name, sizeof name) == NVML_SUCCESS) d.name = name;
    devices_.push_back(std::move(d));
  }
  if (devices_.empty()) {
    problem_ = "NVML sees no GPU";
    return;
  }
  // As CUDA_DEVICE_ORDER=PCI_BUS_ID numbers them.
  std::stable_sort(devices_.begin(), devices_.end(), [](const Device& x, const Device& y) { return x.pci < y.pci; });
  ok_ = true;
}

// Xid events: one set for every GPU that takes them (a GPU that does not, e.g. a consumer board
// on an old driver, says Not Supported; its Xids go unread).
void NvmlProbe::listen_for_xids() {
  const Api& a = *api_;
  if (!(a.event_set_create && a.register_events && a.event_wait && a.event_set_free)) return;
  nvmlEventSet_t set = nullptr;
  if (a.event_set_create(&set) != NVML_SUCCESS) return;
  int taken = 0;
  for (Device& d : devices_) taken += a.register_events(d.handle, nvmlEventTypeXidCriticalError, set) == NVML_SUCCESS;
  if (!taken) {
    a.event_set_free(set);
    return;
  }
  events_ = set;
  xid_note_ = taken == static_cast<int>(devices_.size()) ? "Xid events" : fmt::format("Xid events ({} of the GPUs)", taken);
}

NvmlProbe::~NvmlProbe() {
  if (events_ && api_->event_set_free) api_->event_set_free(static_cast<nvmlEventSet_t>(events_));
  if (initialized_ && api_->shutdown) api_->shutdown();
  if (lib_) ::dlclose(lib_);
}

std::string NvmlProbe::describe() const {
  return fmt::format("{}, {} GPU{}", library_, devices_.size(), devices_.size() == 1 ? "" : "s");
}

// Faults: each where this GPU can say (ECC off, or no retirement on a board that remaps rows:
// Not Supported, nothing read).
void NvmlProbe::read_faults(const Device& d, int g, GpuReading& r, FaultKinds& kinds) const {
  const Api& a = *api_;
  nvmlDevice_t h = d.handle;
  unsigned long long ecc = 0;
  if (a.ecc && a.ecc(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc) == NVML_SUCCESS)
    r.ecc_uncorrected[g] = ecc, kinds.ecc = true;
  nvmlEnableState_t retire = NVML_FEATURE_DISABLED;
  if (a.retired_pending && a.retired_pending(h, &retire) == NVML_SUCCESS) {
    kinds.retire = true;
    if (retire == NVML_FEATURE_ENABLED) r.pending[g] = "page retirement pending (the GPU needs a reset)";
  }
  unsigned int corr = 0, unc = 0, remap = 0, failed_remap = 0;
  if (a.remapped_rows && a.remapped_rows(h, &corr, &unc, &remap, &failed_remap) == NVML_SUCCESS) {
    kinds.remap = true;
    if (remap || failed_remap)
      r.pending[g] = failed_remap ? "row remapping failed (the GPU needs service)" : "row remap pending (the GPU needs a reset)";
  }
}

int NvmlProbe::read_processes(const Device& d, std::vector<GpuProcess>& list) const {
  const Api& a = *api_;
  std::vector<nvmlProcessInfo_v1_t> infos(16);
  unsigned int n = static_cast<unsigned>(infos.size());
  nvmlReturn_t rc;
  while ((rc = a.processes(d.handle, &n, infos.data())) == NVML_ERROR_INSUFFICIENT_SIZE && n > infos.size() &&
         n < 65536) {
    infos.resize(n + 8);  // more processes started since the count
    n = static_cast<unsigned>(infos.size());
  }
  for (unsigned int k = 0; rc == NVML_SUCCESS && k < n && k < infos.size(); ++k) {
    GpuProcess p = describe_process(infos[k].pid);
    p.used_mib = infos[k].usedGpuMemory == ~0ULL ? -1 : static_cast<long long>(infos[k].usedGpuMemory >> 20);
    list.push_back(std::move(p));
  }
  return rc;
}

GpuReading NvmlProbe::read() {
  GpuReading r;
  r.source = "nvml";
  if (!ok_) {
    r.problem = problem_;
    return r;
  }
  const Api& a = *api_;
  // The Xid events since the last reading, without waiting: first, so that a reading that fails
  // below (a GPU going bad often fails a call too) loses none of them.
  if (events_) {
    nvmlEventData_t e{};
    for (int k = 0; k < 256 && a.event_wait(static_cast<nvmlEventSet_t>(events_), &e, 0) == NVML_SUCCESS; ++k) {
      auto it = std::find_if(devices_.begin(), devices_.end(), [&](const Device& d) { return d.handle == e.device; });
      if (it != devices_.end() && (e.eventType & nvmlEventTypeXidCriticalError))
        r.xids[static_cast<int>(it - devices_.begin())].push_back(static_cast<unsigned>(e.eventData));
    }
  }
  FaultKinds kinds;
  std::map<int, long long> used;
  std::map<int, std::vector<GpuProcess>> procs;
  // The call that failed, as the reading's problem.
  auto failed = [&](const char* call, int g, nvmlReturn_t rc) {
    r.problem = fmt::format("{}(GPU {}): {}", call, g, a.words(rc));
    r.util_pct.clear();
    return r;
  };
  for (int g = 0; g < static_cast<int>(devices_.size()); ++g) {
    nvmlDevice_t h = devices_[g].handle;
    nvmlMemory_t mem{};
    nvmlReturn_t rc = a.memory(h, &mem);
    if (rc == NVML_ERROR_GPU_IS_LOST) {
      r.lost[g] = a.words(rc);
      continue;
    }
    if (rc != NVML_SUCCESS) return failed("nvmlDeviceGetMemoryInfo", g, rc);
    used[g] = static_cast<long long>(mem.used >> 20);
    r.total_mib[g] = static_cast<long long>(mem.total >> 20);
    if (!devices_[g].name.empty()) r.names[g] = devices_[g].name;
    nvmlUtilization_t u{};
    rc = a.utilization(h, &u);
    if (rc == NVML_SUCCESS && u.gpu <= 100) r.util_pct[g] = static_cast<int>(u.gpu);
    else if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED) return failed("nvmlDeviceGetUtilizationRates", g, rc);
    unsigned long long mj = 0;
    if (a.energy && a.energy(h, &mj) == NVML_SUCCESS) r.energy_mj[g] = mj;  // else: not this GPU's to say
    read_faults(devices_[g], g, r, kinds);
    rc = static_cast<nvmlReturn_t>(read_processes(devices_[g], procs[g]));
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED) return failed("nvmlDeviceGetComputeRunningProcesses", g, rc);
  }
  std::string seen = events_ ? xid_note_ : "";
  for (auto [got, what] : {std::pair{kinds.ecc, "uncorrectable ECC errors"}, std::pair{kinds.retire, "pending page retirements"},
                           std::pair{kinds.remap, "pending row remaps"}})
    if (got) seen += (seen.empty() ? "" : ", ") + std::string(what);
  r.faults_seen = seen + (seen.empty() ? "" : ", ") + "lost GPUs";
  r.used_mib = std::move(used);
  r.processes = std::move(procs);
  return r;
}

std::optional<Topology> NvmlProbe::topology() {
  if (!ok_) return std::nullopt;
  const Api& a = *api_;
  size_t n = devices_.size();
  std::vector<std::vector<int>> lanes(n, std::vector<int>(n, 0));
  std::vector<int> to_switch(n, 0);  // lanes to something that is no GPU of the node: an NVSwitch
  for (size_t i = 0; i < n; ++i)
    for (unsigned link = 0; link < kNvLinkMaxLinks; ++link) {
      nvmlEnableState_t on = NVML_FEATURE_DISABLED;
      if (a.link_state(devices_[i].handle, link, &on) != NVML_SUCCESS) break;  // no such link: no more
      if (on != NVML_FEATURE_ENABLED) continue;
      nvmlPciInfo_t remote{};
      if (a.link_remote(devices_[i].handle, link, &remote) != NVML_SUCCESS) continue;
      PciKey key{remote.domain, remote.bus, remote.device};
      auto it = std::find_if(devices_.begin(), devices_.end(), [&](const Device& d) { return d.pci == key; });
      if (it == devices_.end()) ++to_switch[i];
      else ++lanes[i][static_cast<size_t>(it - devices_.begin())];
    }
  Topology t;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      int l = std::max(lanes[i][j], lanes[j][i]) + std::min(to_switch[i], to_switch[j]);
      Link link{Path::NvLink, l};
      if (l == 0) {
        nvmlGpuTopologyLevel_t level{};
        bool known = a.ancestor(devices_[i].handle, devices_[j].handle, &level) == NVML_SUCCESS;
        link = {known ? path_of(level) : Path::Unknown, 0};
      }
      t.set(static_cast<int>(i), static_cast<int>(j), link);
    }
  // Each GPU's CPU affinity (the cores of its NUMA node, as topo -m's column): a bit per core.
  constexpr unsigned kWords = 64;  // 64 words of 64 bits: 4096 cores
  constexpr int kBits = static_cast<int>(sizeof(unsigned long) * 8);
  for (size_t i = 0; i < n && a.cpu_affinity; ++i) {
    std::vector<unsigned long> set(kWords, 0);
    if (a.cpu_affinity(devices_[i].handle, kWords, set.data()) != NVML_SUCCESS) continue;
    std::vector<int> cores;
    for (unsigned w = 0; w < kWords; ++w)
      for (int b = 0; b < kBits; ++b)
        if (set[w] >> b & 1UL) cores.push_back(static_cast<int>(w) * kBits + b);
    if (!cores.empty()) t.cpus[static_cast<int>(i)] = cores;
  }
  return t;
}

}  // namespace gpuq
