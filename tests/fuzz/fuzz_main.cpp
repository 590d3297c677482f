// The libFuzzer entry point of one target, chosen at compile time (tests/fuzz/CMakeLists.txt).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return xgrad::fuzz::XGRAD_FUZZ_TARGET(data, size);
}
