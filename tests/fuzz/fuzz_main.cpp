// The libFuzzer entry point of one target, chosen at compile time (tests/fuzz/CMakeLists.txt).
#include "targets.hpp"

#include <xgrad/graph/graph.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int status = xgrad::fuzz::XGRAD_FUZZ_TARGET(data, size);
  // The buffers of this input's graphs, cached for a next graph of their sizes, which another
  // input rarely builds: freed, so that the fuzzer's RSS limit measures one input at a time.
  xgrad::release_cached_buffers();
  return status;
}
