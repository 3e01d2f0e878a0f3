// Helpers shared by the tests: inline plans, temporary folders, running the binary.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "gpuq/plan.h"

namespace gpuq::test {

/// Parses an inline plan for an 8-GPU node; fails the test if it is rejected.
Plan plan_of(const std::string& json, const std::vector<int>& gpus = {0, 1, 2, 3, 4, 5, 6, 7});

/// Errors of an inline plan that must be rejected (empty if it was accepted).
std::vector<std::string> errors_of(const std::string& json, const std::vector<int>& gpus = {0, 1, 2, 3, 4, 5, 6, 7});

/// A fresh folder under $TMPDIR, removed with the object.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  /// Writes `text` to path()/name (creating folders) and returns the full path.
  std::string write(const std::string& name, const std::string& text, int mode = 0644) const;
  /// The text of path()/name ("" if missing).
  std::string read(const std::string& name) const;

 private:
  std::string path_;
};

/// What a finished command printed and returned.
struct Output {
  int status = -1;  ///< exit status, or 128+signal
  std::string out;
  std::string err;
};

/// Runs `argv` in `cwd` with extra environment variables, waits for it, captures output.
Output run(const std::vector<std::string>& argv, const std::string& cwd = ".",
           const std::map<std::string, std::string>& env = {});

/// Runs the built gpuq binary with `args`.
Output run_gpuq(const std::vector<std::string>& args, const std::string& cwd = ".",
            const std::map<std::string, std::string>& env = {});

/// Path of the built gpuq binary.
std::string gpuq_binary();

}  // namespace gpuq::test
