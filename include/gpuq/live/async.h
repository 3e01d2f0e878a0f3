// Work on a second core, where the system gives one.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <future>
#include <system_error>
#include <type_traits>

namespace gpuq {

/// std::async(std::launch::async, f), or, when no thread can be had (EAGAIN under a
/// process limit), the same work run later on this thread by get(): slower, never an error.
template <typename F>
std::future<std::invoke_result_t<F>> on_another_core(F f) {
  try {
    return std::async(std::launch::async, f);
  } catch (const std::system_error&) {
    return std::async(std::launch::deferred, std::move(f));
  }
}

}  // namespace gpuq
