// Resource bounds, in a test program of its own because it replaces the global operator new to
// measure what a call allocates: readers and the importer never allocate more than a small
// multiple of their input before they have validated it, and a tiny file claiming a huge shape
// fails fast: on its header, before anything grows with the claim. It replaces rename(2) too,
// to fail the one step of an atomic write that no check beforehand can foresee.
#define BOOST_TEST_MODULE xgrad_resources
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fcntl.h>
#include <unistd.h>

#include <xgrad/xgrad.hpp>

#include "../heap_count.hpp"

namespace {

// rename(2) fails with EXDEV while this is set (the executable's rename, which the library's
// calls reach before libc's).
std::atomic<bool> fail_rename{false};

}  // namespace

extern "C" int rename(const char* from, const char* to) noexcept {
  if (fail_rename) {
    errno = EXDEV;
    return -1;
  }
  return ::renameat(AT_FDCWD, from, AT_FDCWD, to);
}

namespace {

using xgrad::heap::current;
using xgrad::heap::limit;
using xgrad::heap::peak;

// The peak of bytes allocated (beyond what was live before) while f runs.
template <class F>
std::size_t peak_of(F&& f) {
  const std::size_t base = current;
  peak = base;
  try {
    f();
  } catch (const xgrad::error&) {
  }
  return peak - base;
}

}  // namespace

using namespace xgrad;

BOOST_AUTO_TEST_SUITE(resources)

BOOST_AUTO_TEST_CASE(a_failed_rename_names_the_file_and_leaves_it_and_no_temporary) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("xgrad_rename_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string a = (dir / "a.json").string(), b = (dir / "b.json").string();
  std::ofstream(a) << "old";
  fail_rename = true;
  std::string message;
  try {
    xgrad::write_files_atomically({{a, "new a"}, {b, "new b"}});
  } catch (const xgrad::error& e) {
    message = e.what();
  }
  fail_rename = false;
  BOOST_TEST(message == a + ": cannot replace it: " + std::strerror(EXDEV));
  std::ifstream in(a);
  BOOST_TEST(std::string(std::istreambuf_iterator<char>(in), {}) == "old");  // the old file, whole
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename() != "a.json";
  BOOST_TEST(entries == 0u);  // no b.json, no hidden temporary
  xgrad::write_file_atomically(a, "new");  // and rename works again
  std::ifstream again(a);
  BOOST_TEST(std::string(std::istreambuf_iterator<char>(again), {}) == "new");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_12_byte_npy_claiming_a_huge_shape_fails_fast) {
  // Fast means: rejected on its header, before any allocation that grows with the claim.
  const std::string file("\x93NUMPY\x01\x00\xff\xff{'", 12);
  BOOST_CHECK_THROW(parse_npy(file, "tiny.npy"), xgrad::error);
  const std::size_t bytes = peak_of([&] { parse_npy(file, "tiny.npy"); });
  BOOST_TEST(bytes < 4096u, bytes << " bytes");
  // A well-formed header claiming 10000 x 10000 float64 (800 MB) with no data.
  const std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (10000, 10000), }";
  const std::string header = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size()) + '\0' + dict;
  BOOST_CHECK_THROW(parse_npy(header, "claim.npy"), xgrad::error);
  BOOST_TEST(peak_of([&] { parse_npy(header, "claim.npy"); }) < 4096u);
}

BOOST_AUTO_TEST_CASE(reading_npy_allocates_a_small_multiple_of_the_file) {
  // The bytes read, plus the float64 array (twice the bytes of float32 data).
  const std::string file = npy_bytes(xt::xarray<float>(xt::ones<float>({256, 256})));  // 256 KiB
  const std::size_t bytes = peak_of([&] { parse_npy(file, "ok.npy"); });
  BOOST_TEST(bytes <= 3 * file.size() + 4096, bytes << " bytes for a file of " << file.size());
  // Fortran order is reordered in place, without a second copy.
  std::string fortran = file;
  fortran.replace(fortran.find("False"), 5, "True ");
  const std::size_t f_bytes = peak_of([&] { parse_npy(fortran, "f.npy"); });
  BOOST_TEST(f_bytes <= 3 * file.size() + 4096, f_bytes << " bytes for a file of " << file.size());
}

BOOST_AUTO_TEST_CASE(json_arrays_allocate_a_small_multiple_of_the_text) {
  std::string text = "[";
  for (int i = 0; i < 20000; ++i) text += (i ? ",[" : "[") + std::to_string(i % 97) + ".5, -1]";
  text += "]";
  const std::size_t bytes = peak_of([&] { parse_json_array(text, "a.json"); });
  BOOST_TEST(bytes <= 8 * text.size(), bytes << " bytes for " << text.size() << " bytes of text");
  // Deep nesting is refused before anything grows with it.
  const std::string deep = std::string(1000000, '[');
  BOOST_TEST(peak_of([&] { parse_json_array(deep, "deep.json"); }) < 64 * 1024u);
}

BOOST_AUTO_TEST_CASE(graph_import_allocates_a_small_multiple_of_the_text) {
  Graph<double> g;
  const auto q = g.input("q", xt::xarray<double>(xt::ones<double>({64, 16})));
  const auto k = g.input("k", xt::xarray<double>(xt::ones<double>({64, 16})));
  const auto v = g.input("v", xt::xarray<double>(xt::ones<double>({64, 16})));
  grad(attention(q, k, v), {q, k, v});
  const std::string text = to_json(g, ExportValues::inputs).dump();
  const std::size_t bytes = peak_of([&] { graph_from_json<double>(text); });
  BOOST_TEST(bytes <= 64 * text.size(), bytes << " bytes for " << text.size() << " bytes of text");
  // Nesting past the format's 6 levels is refused on the text, before a DOM exists.
  const std::string deep(1000000, '[');
  BOOST_TEST(peak_of([&] { graph_from_json<double>(deep); }) < 64 * 1024u);
  // A leaf claiming more elements than an import takes is refused before it is allocated.
  Json j = to_json(g, ExportValues::none);
  j["nodes"][0]["outputs"][0]["shape"] = {1u << 15, 1u << 14};
  const std::string claim = j.dump();
  BOOST_TEST(peak_of([&] { graph_from_json<double>(claim); }) <= 64 * claim.size());
}

BOOST_AUTO_TEST_CASE(a_graph_above_the_work_limit_is_refused_before_any_node_runs) {
  // Regression (issue 15): one matmul of two value-less (4096, 8192) and (8192, 4096) leaves ran
  // 13-19 s. Refused on its structure: the leaves' 2^26 elements are never allocated.
  Graph<double> g;
  const auto a = g.input("a", xt::xarray<double>(xt::zeros<double>({4, 8})));
  const auto b = g.input("b", xt::xarray<double>(xt::zeros<double>({8, 4})));
  matmul(a, b);
  Json j = to_json(g, ExportValues::none);
  j["nodes"][0]["outputs"][0]["shape"] = {4096, 8192};
  j["nodes"][1]["outputs"][0]["shape"] = {8192, 4096};
  j["nodes"][2]["outputs"][0]["shape"] = {4096, 4096};
  const std::string text = j.dump();
  try {
    graph_from_json<double>(text);
    BOOST_FAIL("the import ran");
  } catch (const xgrad::error& e) {
    BOOST_TEST(std::string(e.what()).find("nodes[2]: computing the graph takes more than") != std::string::npos, e.what());
  }
  const std::size_t bytes = peak_of([&] { graph_from_json<double>(text); });
  BOOST_TEST(bytes <= 64 * text.size(), bytes << " bytes for " << text.size() << " bytes of text");
}

BOOST_AUTO_TEST_CASE(summary_diagnostics_take_no_memory_per_row) {
  // Regression (issue 15): the diagnostics copied each softmax's values to float64 and kept 64
  // bytes per row. The summaries alone read the values in place.
  Graph<float> g;
  const auto x = g.input("x", xt::xarray<float>(xt::zeros<float>({std::size_t(1) << 18, std::size_t(4)})));
  grad(softmax(x), {x});
  const std::size_t bytes = peak_of([&] { softmax_diagnostics(g, 0.99, false); });
  BOOST_TEST(bytes < 64 * 1024u, bytes << " bytes for a softmax of " << (1u << 20) << " elements");
}

// A graph of three op values of `rows` x 256 float64 (rows / 2 KiB each) on an input of that size.
void chain_of_three(std::size_t rows) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>(xt::ones<double>({rows, std::size_t(256)})));
  exp(exp(exp(x)));
}

BOOST_AUTO_TEST_CASE(a_fresh_graph_takes_its_large_values_from_the_ones_before) {
  release_cached_buffers();
  const std::size_t before = current;
  chain_of_three(1024);  // 2 MiB values: three go to the cache (and a few bytes of its index)
  BOOST_TEST(current - before >= 3 * 2048 * 1024u);
  BOOST_TEST(current - before < 3 * 2048 * 1024u + 4096);
  // The same graph again: its op values come from the cache, only the input is new memory.
  const std::size_t again = peak_of([] { chain_of_three(1024); });
  BOOST_TEST(again < 2 * 2048 * 1024u, again << " bytes");
  release_cached_buffers();
  BOOST_TEST(current - before < 4096u);
}

BOOST_AUTO_TEST_CASE(the_cache_gives_its_memory_back_when_a_node_needs_it) {
  release_cached_buffers();
  const std::size_t before = current;
  chain_of_three(1024);  // 6 MiB cached, of a size the next graph does not take
  // Room for the next graph's input and three 3 MiB values only if the cache lets go.
  limit = before + 4 * 3072 * 1024 + 64 * 1024;
  bool built = false;
  try {
    chain_of_three(1536);
    built = true;
  } catch (const std::bad_alloc&) {
  }
  limit = SIZE_MAX;
  BOOST_TEST(built);
  release_cached_buffers();
  BOOST_TEST(current - before < 4096u);
}

BOOST_AUTO_TEST_CASE(a_failed_allocation_leaves_no_value_of_the_wrong_size) {
  // xtensor's resize sets the new shape before it allocates. A lean replay that could not get a
  // released node's buffer must not leave a value of the right shape over no memory, which the
  // next replay would write past (AddressSanitizer's heap-buffer-overflow, before the fix).
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>(xt::ones<double>({512, 256})));
  const auto a = exp(x);
  const auto b = exp(a);
  g.keep_only({b});
  g.replay();           // a released after b read it
  g.keep_only({b});     // and its buffer no longer spare: the next replay allocates it
  limit = current + 64 * 1024;
  bool refused = false;
  try {
    g.replay();
  } catch (const std::bad_alloc&) {
    refused = true;
  }
  limit = SIZE_MAX;
  BOOST_TEST(refused);
  g.replay();
  BOOST_TEST(b.value()(511, 255) == std::exp(std::exp(1.0)));
  g.keep_all();
  g.replay();
  BOOST_TEST(a.value()(511, 255) == std::exp(1.0));
}

BOOST_AUTO_TEST_SUITE_END()
