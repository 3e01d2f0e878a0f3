// --gpu-probe (NVML, else nvidia-smi) and the background reader of the chosen probe.
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <system_error>
#include <thread>

#include "gpuq/live/nvml.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/proc.h"

namespace gpuq {

std::optional<ProbeKind> parse_probe_kind(const std::string& text) {
  if (text == "auto") return ProbeKind::Auto;
  if (text == "nvml") return ProbeKind::Nvml;
  if (text == "nvidia-smi") return ProbeKind::NvidiaSmi;
  if (text == "none") return ProbeKind::None;
  return std::nullopt;
}

std::string placement_line(const Placement& p, GpuMask node) {
  std::string pairs;
  for (auto [a, b] : pairs_in_use(p, node)) pairs += fmt::format(" [{}, {}]", a, b);
  if (p.kind == Placement::Kind::Auto && p.topology.empty())
    return "--pairs auto: no GPU topology could be read: 2-GPU jobs take the original's pairs" + pairs + " first";
  const char* from = p.kind == Placement::Kind::Auto ? "from the GPU topology; wider jobs the best-connected set"
                     : p.kind == Placement::Kind::Pairs ? "as --pairs lists them"
                                                         : "the original's pairs";
  return fmt::format("--pairs {}: 2-GPU jobs take{} first ({})",
                     p.kind == Placement::Kind::Auto ? "auto" : p.kind == Placement::Kind::Pairs ? "LIST" : "original",
                     pairs.empty() ? " the lowest free ids" : pairs, from);
}

namespace {

/// NVML while it works, then nvidia-smi for good; or one of them alone; or nothing.
class ChosenProbe : public GpuProbe {
 public:
  ChosenProbe(ProbeKind kind, const std::string& nvidia_smi, double timeout_s)
      : kind_(kind), smi_(nvidia_smi, timeout_s), command_(nvidia_smi), timeout_s_(timeout_s) {
    if (kind == ProbeKind::Auto || kind == ProbeKind::Nvml) {
      nvml_ = std::make_unique<NvmlProbe>(nvml_library());
      if (!nvml_->ok()) give_up_nvml(nvml_->problem(), false);
      else note_ = "NVML (" + nvml_->describe() + ")";
    }
    if (kind == ProbeKind::NvidiaSmi) note_ = "--gpu-probe nvidia-smi";
  }

  GpuReading read() override {
    std::map<int, std::vector<unsigned>> xids;  // of a failed NVML reading: kept in the one returned
    if (kind_ == ProbeKind::None) {
      GpuReading r;
      r.problem = "--gpu-probe none";
      return r;
    }
    if (nvml_) {
      GpuReading r = nvml_->read();
      if (r.used_mib || kind_ == ProbeKind::Nvml) {
        r.source_note = note_;
        return r;
      }
      xids = std::move(r.xids);
      give_up_nvml(r.problem, true);
    }
    if (kind_ == ProbeKind::Nvml) {
      GpuReading r;
      r.source = "nvml";
      r.problem = nvml_problem_;
      r.xids = std::move(xids);
      return r;
    }
    GpuReading r = smi_.read();
    r.source_note = note_;
    r.xids = std::move(xids);
    return r;
  }

  std::optional<Topology> topology() override {
    if (nvml_) return nvml_->topology();
    if (kind_ != ProbeKind::Auto && kind_ != ProbeKind::NvidiaSmi) return std::nullopt;
    std::string problem;
    return probe_topology_smi(command_, timeout_s_, &problem);
  }

 private:
  // Said as news, not as an error: on a machine without NVML, nvidia-smi is simply the probe.
  void give_up_nvml(const std::string& why, bool was_working) {
    nvml_problem_ = "NVML: " + why;
    if (kind_ == ProbeKind::Auto) {
      note_ = was_working ? "nvidia-smi from now on (NVML failed: " + why + ")"
                          : "nvidia-smi (NVML is not available here: " + why + ")";
      nvml_.reset();
    }
  }

  ProbeKind kind_;
  std::unique_ptr<NvmlProbe> nvml_;
  NvidiaSmiProbe smi_;
  std::string command_;
  double timeout_s_;
  std::string note_, nvml_problem_;
};

}  // namespace

std::unique_ptr<GpuProbe> make_probe(ProbeKind kind, const std::string& nvidia_smi, double timeout_s) {
  return std::make_unique<ChosenProbe>(kind, nvidia_smi, timeout_s);
}

// The thread's rules: it touches only `Shared` (under `mu`) and the inner probe (only it
// reads it once started; topology() takes `probe_mu`); never the state, the store, the
// launcher or the terminal. It blocks every signal, so that SIGTERM, SIGINT and SIGCHLD
// reach the run loop's waker as before. A child it spawns (nvidia-smi) is in its own
// process group and killed at its timeout. It is detached: gpuq exits without waiting for
// an nvidia-smi call in progress, and `Shared` lives until both sides let it go.
struct BackgroundProbe::Shared {
  std::unique_ptr<GpuProbe> inner;
  double min_period_s = 1;
  std::mutex probe_mu;  // held while the inner probe is read
  std::mutex mu;        // guards what follows
  std::condition_variable cv;
  std::optional<GpuReading> latest;
  bool handed = false;  // `latest` was given to a read(): its Xid events were seen
  bool asked = true;  // a fresh reading is wanted (the first at once)
  bool stop = false;
  double last_start = -1e18;  // monotonic time the last reading began

  void loop() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::unique_lock lock(mu);
    while (true) {
      // Woken only for a reason: read() asks, or the destructor stops it (both under `mu`, with
      // notify_all). A timeout here woke an idle run five times a second (issue 43).
      cv.wait(lock, [&] { return stop || asked; });
      if (stop) return;
      double wait = last_start + min_period_s - monotonic_now();
      if (wait > 0) {
        cv.wait_for(lock, std::chrono::duration<double>(wait), [&] { return stop; });
        if (stop) return;
      }
      asked = false;
      last_start = monotonic_now();
      double taken = unix_now();
      lock.unlock();
      GpuReading r;
      {
        std::lock_guard p(probe_mu);
        r = inner->read();
      }
      r.taken = taken;
      lock.lock();
      // Xid events happen once: those of a reading no read() took go on in the next one.
      if (latest && !handed)
        for (auto& [g, codes] : latest->xids) r.xids[g].insert(r.xids[g].begin(), codes.begin(), codes.end());
      latest = std::move(r);
      handed = false;
      cv.notify_all();
    }
  }
};

BackgroundProbe::BackgroundProbe(std::unique_ptr<GpuProbe> inner, double min_period_s)
    : shared_(std::make_shared<Shared>()) {
  shared_->inner = std::move(inner);
  shared_->min_period_s = min_period_s;
  try {
    std::thread([s = shared_] { s->loop(); }).detach();
  } catch (const std::system_error&) {
    shared_->stop = true;  // no thread: read() reads the probe itself
  }
}

BackgroundProbe::~BackgroundProbe() {
  std::lock_guard lock(shared_->mu);
  shared_->stop = true;
  shared_->cv.notify_all();
}

GpuReading BackgroundProbe::read() {
  Shared& s = *shared_;
  {
    std::unique_lock lock(s.mu);
    if (!s.stop) {
      s.cv.wait(lock, [&] { return s.latest.has_value(); });  // only the first read waits
      s.asked = true;
      s.handed = true;
      s.cv.notify_all();
      return *s.latest;
    }
  }
  std::lock_guard p(s.probe_mu);
  return s.inner->read();
}

std::optional<Topology> BackgroundProbe::topology() {
  std::lock_guard p(shared_->probe_mu);
  return shared_->inner->topology();
}

}  // namespace gpuq
