// libFuzzer target: the state codec. Whatever it accepts must encode and decode back to the
// same text; whatever it refuses must be refused with the file named.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpuq/core/state.h"
#include "gpuq/live/state_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  gpuq::StateLoad load = gpuq::parse_state(text, "fuzz.state.json");
  if (!load.state) {
    if (load.error.rfind("fuzz.state.json: ", 0) != 0) std::abort();
    return 0;
  }
  std::string once = gpuq::dump_state(*load.state);
  gpuq::StateLoad again = gpuq::parse_state(once, "again");
  if (!again.state) std::abort();  // gpuq wrote a state it cannot read
  if (gpuq::dump_state(*again.state) != once) std::abort();
  return 0;
}
