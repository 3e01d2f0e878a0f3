// A fake libnvidia-ml.so.1 for the tests: the NVML functions gpuq uses, answered from the
// JSON file named by $GPUQ_FAKE_NVML (read again whenever it changes, so that a test can
// change the node mid-run). The structs follow NVIDIA's nvml.h, as gpuq's nvml.cpp does.
//
// {"init": 0,                        nvmlInit_v2's return code (e.g. 9: driver not loaded)
//  "devices": [{"bus_id": "00000000:18:00.0", "name": "NVIDIA H100 80GB HBM3",
//               "total_mib": 81559, "used_mib": 0, "util": 0 (null: not supported),
//               "lost": false, "fail": 0 (a return code for every call on it),
//               "processes": [{"pid": 4242, "used_mib": 20000}],
//               "energy_mj": 1000 (absent or null: Not Supported), "power_w": 300: the energy
//               counter is energy_mj plus power_w for each second since this process first asked,
//               "nvlinks": ["00000000:2A:00.0", "switch", ...],     one entry per active link
//               "cpus": [0, 1, 2, 3],                              its CPU affinity (none: Not Supported)
//               "xids": [13, 79]: the Xid errors the GPU has had; an event set delivers those added
//               after its registration, once each (nvmlEventSetWait_v2),
//               "ecc_uncorrected": 2 (absent: Not Supported), "retired_pending": true, "remap_pending":
//               true (each absent: Not Supported)}],
//  "ancestors": [["00000000:18:00.0", "00000000:2A:00.0", 10]]}     others: 50 (SYSTEM)
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

using nlohmann::json;

extern "C" {
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
}

namespace {

std::mutex mu;
json node;
long long seen_mtime = -1;
bool initialized = false;

// The JSON file as it is now (read again when its mtime or size changed).
const json& current() {
  const char* path = std::getenv("GPUQ_FAKE_NVML");
  struct stat st {};
  if (!path || ::stat(path, &st) != 0) {
    node = json::object();
    return node;
  }
  long long stamp = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec + st.st_size;
  if (stamp != seen_mtime) {
    std::ifstream in(path);
    json j = json::parse(in, nullptr, false);
    if (!j.is_discarded()) {
      node = j;
      seen_mtime = stamp;
    }
  }
  return node;
}

const json* device(nvmlDevice_t h) {
  const json& n = current();
  size_t i = reinterpret_cast<size_t>(h) - 1;
  if (!n.contains("devices") || i >= n["devices"].size()) return nullptr;
  return &n["devices"][i];
}

void fill_pci(const std::string& bus_id, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
  pci->domain = dom;
  pci->bus = bus;
  pci->device = dev;
  std::snprintf(pci->busId, sizeof pci->busId, "%s", bus_id.c_str());
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
}

// The device's "fail" code, or 15 (GPU is lost) for a lost one, or 0.
nvmlReturn_t trouble(const json& d) {
  if (d.value("lost", false)) return 15;
  return d.value("fail", 0);
}

}  // namespace

#define LOCKED std::lock_guard<std::mutex> lock(mu)

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  LOCKED;
  int rc = current().value("init", 0);
  initialized = rc == 0;
  return rc;
}

nvmlReturn_t nvmlShutdown() {
  LOCKED;
  initialized = false;
  return 0;
}

const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    case 999: return "Unknown Error";
  }
  return "some NVML error";
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) {
  LOCKED;
  if (!initialized) return 1;
  const json& j = current();
  *n = j.contains("devices") ? static_cast<unsigned>(j["devices"].size()) : 0;
  return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* h) {
  LOCKED;
  *h = reinterpret_cast<nvmlDevice_t>(static_cast<size_t>(i) + 1);
  return device(*h) ? 0 : 2;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char* name, unsigned int len) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  std::snprintf(name, len, "%s", d->value("name", "Fake GPU").c_str());
  return 0;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t* pci) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  fill_pci(d->value("bus_id", ""), pci);
  return 0;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t* m) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  if (nvmlReturn_t rc = trouble(*d)) return rc;
  m->total = d->value("total_mib", 81559ULL) << 20;
  m->used = d->value("used_mib", 0ULL) << 20;
  m->free = m->total - m->used;
  return 0;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t* u) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  if (nvmlReturn_t rc = trouble(*d)) return rc;
  if (!d->contains("util") || (*d)["util"].is_null()) return 3;
  u->gpu = (*d)["util"].get<unsigned>();
  u->memory = 0;
  return 0;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t h, unsigned int* count, nvmlProcessInfo_v1_t* infos) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  if (nvmlReturn_t rc = trouble(*d)) return rc;
  json procs = d->value("processes", json::array());
  if (procs.size() > *count) {
    *count = static_cast<unsigned>(procs.size());
    return 7;  // insufficient size
  }
  *count = static_cast<unsigned>(procs.size());
  for (size_t k = 0; k < procs.size(); ++k) {
    infos[k].pid = procs[k].value("pid", 0u);
    infos[k].usedGpuMemory = procs[k].value("used_mib", 0ULL) << 20;
  }
  return 0;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t h, unsigned long long* mj) {
  LOCKED;
  static const auto first = std::chrono::steady_clock::now();
  const json* d = device(h);
  if (!d) return 2;
  if (nvmlReturn_t rc = trouble(*d)) return rc;
  if (!d->contains("energy_mj") || (*d)["energy_mj"].is_null()) return 3;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - first).count();
  *mj = (*d)["energy_mj"].get<unsigned long long>() +
        static_cast<unsigned long long>(d->value("power_w", 0.0) * seconds * 1000);
  return 0;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t h, unsigned int link, int* active) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  json links = d->value("nvlinks", json::array());
  if (links.empty()) return 3;  // no NVLink on this GPU
  if (link >= links.size()) return 2;
  *active = 1;
  return 0;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t h, unsigned int link, nvmlPciInfo_t* pci) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  json links = d->value("nvlinks", json::array());
  if (link >= links.size()) return 2;
  std::string remote = links[link].get<std::string>();
  fill_pci(remote == "switch" ? "00000000:ff:00.0" : remote, pci);
  return 0;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int* level) {
  LOCKED;
  const json* da = device(a);
  const json* db = device(b);
  if (!da || !db) return 2;
  *level = 50;
  for (const json& e : current().value("ancestors", json::array())) {
    std::string x = e[0], y = e[1];
    if ((x == (*da)["bus_id"] && y == (*db)["bus_id"]) || (y == (*da)["bus_id"] && x == (*db)["bus_id"])) *level = e[2];
  }
  return 0;
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t h, unsigned int words, unsigned long* set) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  if (!d->contains("cpus")) return 3;
  std::memset(set, 0, words * sizeof *set);
  const unsigned bits = sizeof *set * 8;
  for (unsigned c : (*d)["cpus"])
    if (c / bits < words) set[c / bits] |= 1UL << (c % bits);
  return 0;
}

// The event set: per device, how many of its "xids" were delivered (or there at registration).
std::map<size_t, size_t> xids_taken;

nvmlReturn_t nvmlEventSetCreate(void** set) {
  LOCKED;
  *set = reinterpret_cast<void*>(0x5e7);
  return 0;
}

nvmlReturn_t nvmlEventSetFree(void*) { return 0; }

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t h, unsigned long long types, void*) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  if (nvmlReturn_t rc = trouble(*d)) return rc;
  if (!(types & 0x8)) return 3;
  xids_taken[reinterpret_cast<size_t>(h)] = d->value("xids", json::array()).size();
  return 0;
}

typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

nvmlReturn_t nvmlEventSetWait_v2(void*, nvmlEventData_t* data, unsigned int) {
  LOCKED;
  for (auto& [h, taken] : xids_taken) {
    const json* d = device(reinterpret_cast<nvmlDevice_t>(h));
    if (!d) continue;
    json xids = d->value("xids", json::array());
    if (taken < xids.size()) {
      *data = {reinterpret_cast<nvmlDevice_t>(h), 0x8, xids[taken].get<unsigned long long>(), 0, 0};
      ++taken;
      return 0;
    }
  }
  return 10;  // NVML_ERROR_TIMEOUT: no event
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t h, int type, int counter, unsigned long long* count) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  if (nvmlReturn_t rc = trouble(*d)) return rc;
  if (type != 1 || counter != 0 || !d->contains("ecc_uncorrected")) return 3;
  *count = (*d)["ecc_uncorrected"].get<unsigned long long>();
  return 0;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t h, int* pending) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  if (nvmlReturn_t rc = trouble(*d)) return rc;
  if (!d->contains("retired_pending")) return 3;
  *pending = (*d)["retired_pending"].get<bool>() ? 1 : 0;
  return 0;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t h, unsigned int* corr, unsigned int* unc, unsigned int* pending,
                                       unsigned int* failed) {
  LOCKED;
  const json* d = device(h);
  if (!d) return 2;
  if (nvmlReturn_t rc = trouble(*d)) return rc;
  if (!d->contains("remap_pending")) return 3;
  *corr = *unc = *failed = 0;
  *pending = (*d)["remap_pending"].get<bool>() ? 1 : 0;
  return 0;
}

}  // extern "C"
