// The plan file as `run` watches it for edits: reload on edit (README, "The plan can be
// edited while it runs"). A port, so that the run loop's reload is tested with a fake.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"

namespace gpuq {

/// What a look at the plan file found.
struct PlanLook {
  enum class Kind {
    Same,      ///< the version in use (or one already said to be broken)
    Settling,  ///< changed and not valid (yet): an editor may be mid-save; look again in recheck_in
    Loaded,    ///< changed and valid: `plan` replaces the one in use
    Broken,    ///< changed, not valid, and still so after the settle time: `errors`, said once
  } kind = Kind::Same;
  std::optional<Plan> plan;
  std::string text;                 ///< Loaded: the text `plan` was read from
  std::vector<std::string> errors;  ///< every problem, as the loader words them
  std::vector<std::string> unknown_fields;  ///< Loaded: the fields gpuq does not read (PlanLoad's), said as warnings
  double recheck_in = std::numeric_limits<double>::infinity();  ///< seconds until the next look is due
};

/// The plan file, looked at by `run` at each tick.
class PlanSource {
 public:
  virtual ~PlanSource() = default;
  /// The file at `now` against the version last taken (or said to be broken).
  virtual PlanLook look(double now) = 0;
};

/// The plan file on this machine. A changed file is read and checked whole; a file with
/// errors is reported only once it has stayed the same for `settle_s` seconds (a half-written
/// file, an editor's save in two steps), a valid one is taken at once.
class PlanFile : public PlanSource {
 public:
  /// `loaded_text`: the text of the version `run` started with.
  PlanFile(std::string path, std::vector<int> node_gpus, const std::string& loaded_text, double settle_s = 0.25);
  PlanLook look(double now) override;
  /// Applied to each valid version before it is taken: a non-empty return is a problem of
  /// that version (then it is not taken, and said as the loader's errors are). run --slurm
  /// refuses a reservation of GPU ids in an edit as it does at the start.
  std::function<std::string(Plan&)> adapt;

 private:
  struct FileId {
    long long size = -1, mtime_ns = 0, ctime_ns = 0;
    unsigned long long ino = 0;
    bool operator==(const FileId&) const = default;
  };
  FileId stat_now() const;

  std::string path_;
  std::vector<int> gpus_;
  double settle_s_;
  FileId seen_;                 // the file as it was when last taken or reported
  size_t taken_ = 0;            // the hash of the text in use
  std::optional<size_t> reported_, pending_;  // of the broken text last said; of one waiting out the settle time
  double pending_since_ = 0;
};

}  // namespace gpuq
