#include "gpuq/live/local_files.h"

#include <sys/stat.h>

#include <filesystem>

#include "gpuq/live/proc.h"

namespace gpuq {

std::string LocalFiles::expand(const std::string& written) const { return resolve_script(written, base_); }

bool LocalFiles::exists(const std::string& path) const {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> LocalFiles::names_in(const std::string& folder) const {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(folder, ec)) names.push_back(e.path().filename().string());
  return names;
}

}  // namespace gpuq
