// The working state of one tick of RunLoop, shared by the files that define its steps.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <set>
#include <vector>

#include "gpuq/core/watchdog.h"
#include "gpuq/live/control.h"
#include "gpuq/live/run_loop.h"

namespace gpuq {

/// A line for the pane (`job` empty) or a note for a job's log, with what it is about (its key
/// for told_; empty: said each time).
struct RunLoop::Told {
  std::string text, about, job;
};

/// One tick's working state (the queue itself is RunLoop::q_).
struct RunLoop::Tick {
  WorldRead world;                 // the one read (read.h), decided on by the steps after it
  double now = 0;
  double wake_in = 0;
  GpuMask busy = 0;                // GPUs not free: running jobs, killed ones dying, memory in use
  std::vector<WatchedJob> running;  // jobs to wake on the end of: running jobs, killed ones dying
  std::vector<Launch> launches;    // what the engine chose to launch
  std::vector<std::pair<size_t, Launched>> launched;
  std::vector<std::string> missing_files;  // file: deps decide found missing
  GpuActivity activity;                    // the probe's utilization per GPU (those that gave one), process lists
  bool fresh = false;                      // the state was read from the store (not kept from the last tick)
  bool saved = false;
  bool paused = false;                     // `gpuq pause`: nothing starts
  bool node_in = false;                    // this tick holds the node lock (node_enter)
  std::vector<double> mem_other;           // jobs that pack: GiB per GPU beyond their declared (memory_use)
  std::vector<Preemption> preempts;        // the engine's and the node's preemptions, said and signalled by decide
  // The signals this tick decided (stops, warnings, preemptions, SIGKILLs): sent by
  // signal_groups once the state that records them is saved, durably (act's order).
  std::vector<GroupSignal> signals;
  size_t signals_saved = 0;  // how many of them a save that succeeded came after
  std::set<std::string> ended;             // jobs whose end this tick saw, not yet saved (refresh_ended)
  std::vector<std::string> unsynced_ends;  // their codes, and those of the groups SIGKILLed: synced before the save (sync_ends)
  std::string not_started;                 // a job's wrapper was refused a process: nothing starts this tick
  std::optional<GpuReading> reading;       // the probe's reading (probe), for the faults (watch_drains)
  bool fault_unread = false;               // a job failed after the reading: the next may hold its fault
  std::vector<Told> told;                  // the lines and log notes decided, not yet told (tell)
};

/// A hash of the jobs' statuses and starts: what makes a prediction worth making again.
size_t state_signature(const State& state);

/// "a, b, c" (the first 10, then the count of the rest).
std::string id_list(const std::vector<std::string>& ids);

}  // namespace gpuq
