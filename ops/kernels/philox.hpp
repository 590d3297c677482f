// Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel random
// numbers: as easy as 1, 2, 3" (SC '11), as Random123 defines it: 128 bits of output are a pure
// function of a 128-bit counter and a 64-bit key, so any element's random bits are drawn without
// a state, on any thread, in any order. tests/ops/kernels/philox_test.cpp checks it against
// Random123's known-answer vectors (tests/kat_vectors).
#pragma once

#include <array>
#include <cstdint>

namespace xgrad::detail {

using PhiloxCounter = std::array<std::uint32_t, 4>;
using PhiloxKey = std::array<std::uint32_t, 2>;

// Ten rounds; the key is bumped by the Weyl constants between rounds.
inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;  // the round multipliers
  constexpr std::uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;  // the key schedule's Weyl constants
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += w0;
      k[1] += w1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(m0) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(m1) * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(p0)};
  }
  return c;
}

// The random bits of elements 4 block .. 4 block + 3 of a stream keyed by `seed` at `step`:
// Philox4x32-10 with the key (seed's low word, high word) and the counter (block's low word,
// high word, step's low word, high word).
inline PhiloxCounter philox_block(std::uint64_t seed, std::uint64_t step, std::uint64_t block) {
  return philox4x32_10({static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                        static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(step >> 32)},
                       {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

// The 32 random bits of element `index` of that stream: word index % 4 of block index / 4.
inline std::uint32_t philox_bits(std::uint64_t seed, std::uint64_t step, std::uint64_t index) {
  return philox_block(seed, step, index / 4)[index % 4];
}

}  // namespace xgrad::detail
