// An open file descriptor that closes with the object: a function that opens several files
// and may fail after any of them (the launcher's attempt files, follow's logs) closes each
// once, on every path, without a close per failure.
#pragma once

#include <unistd.h>

namespace gpuq {

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      if (fd >= 0) ::close(fd);
      fd = o.release();
    }
    return *this;
  }
  /// The descriptor, no longer closed with the object.
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

}  // namespace gpuq
