// Every checked-in fuzz input, corpus seeds and regressions alike, through its target: an input
// that once crashed stays fixed in every build, sanitized or not.
#include "../check.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "targets.hpp"

namespace fs = std::filesystem;

namespace {

using Target = int (*)(const std::uint8_t*, std::size_t);

std::size_t run_all(const std::string& name, Target target) {
  std::size_t inputs = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = fs::path(XGRAD_FUZZ_DATA) / kind / name;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file() || entry.path().filename() == ".gitkeep") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::ostringstream bytes;
      bytes << in.rdbuf();
      const std::string s = bytes.str();
      BOOST_TEST_CONTEXT(entry.path().string()) {
        BOOST_TEST(target(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()) == 0);
      }
      ++inputs;
    }
  }
  return inputs;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fuzz_corpus)

BOOST_AUTO_TEST_CASE(graph_json) { BOOST_TEST(run_all("graph_json", xgrad::fuzz::graph_json) >= 5u); }
BOOST_AUTO_TEST_CASE(npy) { BOOST_TEST(run_all("npy", xgrad::fuzz::npy) >= 20u); }
BOOST_AUTO_TEST_CASE(json_array) { BOOST_TEST(run_all("json_array", xgrad::fuzz::json_array) >= 5u); }
BOOST_AUTO_TEST_CASE(safetensors) { BOOST_TEST(run_all("safetensors", xgrad::fuzz::safetensors) >= 3u); }
BOOST_AUTO_TEST_CASE(npz) { BOOST_TEST(run_all("npz", xgrad::fuzz::npz) >= 3u); }
BOOST_AUTO_TEST_CASE(onnx) { BOOST_TEST(run_all("onnx", xgrad::fuzz::onnx) >= 30u); }
BOOST_AUTO_TEST_CASE(json) { BOOST_TEST(run_all("json", xgrad::fuzz::json) >= 8u); }
BOOST_AUTO_TEST_CASE(beneath) { BOOST_TEST(run_all("beneath", xgrad::fuzz::beneath) >= 10u); }
BOOST_AUTO_TEST_CASE(cli_attention) { BOOST_TEST(run_all("cli_attention", xgrad::fuzz::cli_attention) >= 4u); }

BOOST_AUTO_TEST_SUITE_END()
