// The file checks of file: deps on this machine's file system.
#pragma once

#include "gpuq/rules.h"

namespace gpuq {

/// FileChecks over the file system: `~` and `$VARS` expanded as the original
/// does (expand_path), then stat(2).
class LocalFiles : public FileChecks {
 public:
  std::string expand(const std::string& written) const override;
  bool exists(const std::string& path) const override;
};

}  // namespace gpuq
