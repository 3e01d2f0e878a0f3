// The file checks of file: deps on this machine's file system.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <string>
#include <vector>

#include "gpuq/core/rules.h"

namespace gpuq {

/// FileChecks over the file system: `~` and `$VARS` expanded as the original
/// does (expand_path), a relative path taken from `base` when one is given (the
/// plan's workdir; without one, from the current folder), then stat(2).
class LocalFiles : public FileChecks {
 public:
  explicit LocalFiles(std::string base = "") : base_(std::move(base)) {}
  std::string expand(const std::string& written) const override;
  bool exists(const std::string& path) const override;
  bool nested() const override { return true; }
  std::vector<std::string> names_in(const std::string& folder) const override;

 private:
  std::string base_;
};

}  // namespace gpuq
