// A RunLoop over the fakes (fakes.h), tick by tick: what tick_test.cpp and limits_test.cpp drive.
#pragma once

#include <memory>

#include "fakes.h"
#include "gpuq/core/local_time.h"
#include "gpuq/live/control.h"
#include "gpuq/live/run_loop.h"
#include "test_util.h"

namespace gpuq::test {

/// A RunLoop over fakes, with what it printed.
struct Loop {
  Journal journal;
  FakeClock clock;
  FakeLauncher launcher{&journal};
  FakeProbe probe;
  FakeDisk disk;
  FakeStore store{disk, &journal};  // run's
  FakeStore other{disk, &journal};  // the control commands'

  FakeFiles files;
  FakeWaker waker{clock};
  Plan plan;
  RunOptions opt;
  std::vector<std::string> out, err;
  std::unique_ptr<RunLoop> loop;

  explicit Loop(const std::string& plan_json, const std::function<void(RunOptions&)>& tweak = {},
                const std::vector<int>& gpus = {0, 1, 2, 3, 4, 5, 6, 7})
      : plan(plan_of(plan_json, gpus)) {
    opt.node_gpus = gpus;
    opt.poll = 3600;  // so that a shorter wait says why
    if (tweak) tweak(opt);
    loop = std::make_unique<RunLoop>(plan, opt, Ports{clock, launcher, probe, store, files, waker},
                                     [this](const std::string& l) { out.push_back(l); },
                                     [this](const std::string& l) { err.push_back(l); });
  }
  TickResult tick() {
    out.clear();
    journal.clear();
    return loop->tick();
  }
  /// A line as run prints it now.
  std::string line(const std::string& text) const { return clock_stamp(clock.t) + " " + text; }
  const JobState& entry(const std::string& id) const {
    const JobState* s = disk.state.find(id);
    if (!s) throw std::runtime_error("no entry for " + id);
    return *s;
  }
  Status status(const std::string& id) const { return disk.state.status_of(id); }
  /// The state as another process leaves it: `id` running as `pid` on `gpus`.
  void adopt(const std::string& id, long long pid, std::vector<int> gpus, long long attempts = 0) {
    State s = disk.state;
    JobState run;
    run.status = Status::Running;
    run.pid = pid;
    run.gpus = std::move(gpus);
    run.start = clock.t - 100;
    run.attempts = attempts;
    s.set(id, run);
    disk.replace(std::move(s));
  }
  ControlResult control(const std::string& action, const std::vector<std::string>& ids) {
    return gpuq::control(plan, "plan.json", other, launcher, clock, action, ids);
  }
};

}  // namespace gpuq::test
