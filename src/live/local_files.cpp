#include "gpuq/live/local_files.h"

#include <sys/stat.h>

#include "gpuq/live/proc.h"

namespace gpuq {

std::string LocalFiles::expand(const std::string& written) const { return resolve_script(written, base_); }

bool LocalFiles::exists(const std::string& path) const {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace gpuq
