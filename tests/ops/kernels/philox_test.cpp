// Philox4x32-10 (ops/kernels/philox.hpp) against the known-answer vectors of the Random123
// distribution (tests/kat_vectors, the three "philox4x32 10" lines: counter, key, output).
#include "../../check.hpp"

#include <xgrad/ops/kernels/philox.hpp>

BOOST_AUTO_TEST_SUITE(philox)

BOOST_AUTO_TEST_CASE(matches_the_random123_known_answers) {
  using detail::philox4x32_10;
  BOOST_TEST((philox4x32_10({0, 0, 0, 0}, {0, 0}) == detail::PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  BOOST_TEST((philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
              detail::PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  // The digits of pi.
  BOOST_TEST((philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
              detail::PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

BOOST_AUTO_TEST_CASE(a_streams_words_are_laid_out_as_documented) {
  // Block j of (seed, step) is Philox with the counter (j low, high, step low, high) and the key
  // (seed low, high): the pi-digits vector again. Element i is word i % 4 of block i / 4.
  const std::uint64_t seed = 0x299f31d0a4093822u, step = 0x0370734413198a2eu, block = 0x85a308d3243f6a88u;
  BOOST_TEST((detail::philox_block(seed, step, block) ==
              detail::PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  BOOST_TEST(detail::philox_bits(0, 0, 3) == 0x9b00dbd8u);
  BOOST_TEST(detail::philox_bits(0, 0, 0) == 0x6627e8d5u);
  for (std::uint64_t i = 0; i < 12; ++i) BOOST_TEST(detail::philox_bits(seed, step, i) == detail::philox_block(seed, step, i / 4)[i % 4]);
}

BOOST_AUTO_TEST_SUITE_END()
