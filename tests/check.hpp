// Helpers shared by every test suite: error checks, gradcheck with its report, ulp checks.
// (Random inputs: xgrad::random_array, lib/random.hpp; bit equality: lib/same_bits.hpp.)
#pragma once

#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <functional>
#include <initializer_list>
#include <limits>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>
#include <xtensor/xarray.hpp>

#include <xgrad/xgrad.hpp>

extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

namespace xgrad::test {

// Both dtypes, for BOOST_AUTO_TEST_CASE_TEMPLATE.
using dtypes = boost::mpl::list<float, double>;

// OpenBLAS's thread count (which xgrad's pool follows) set to `threads` for a scope, and
// restored when it ends, also when a BOOST_TEST_REQUIRE ends the test case early.
class BlasThreads {
 public:
  explicit BlasThreads(int threads) { set(threads); }
  ~BlasThreads() { openblas_set_num_threads(m_before); }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;
  void set(int threads) { openblas_set_num_threads(threads); }

 private:
  int m_before = openblas_get_num_threads();
};

// Attention's inputs q, k, v in g, random (random_array) of these shapes from the seeds seed,
// seed + 1 and seed + 2, q and k with standard deviation `spread`:
//   const auto [q, k, v] = random_qkv(g, {2, 3}, {4, 3}, {4, 2}, 1);
template <class T>
struct Qkv {
  Var<T> q, k, v;
};
template <class T>
Qkv<T> random_qkv(Graph<T>& g, const Shape& q, const Shape& k, const Shape& v, std::uint64_t seed, double spread = 1.0) {
  return {g.input("q", random_array<T>(q, seed, spread)), g.input("k", random_array<T>(k, seed + 1, spread)),
          g.input("v", random_array<T>(v, seed + 2))};
}

// Runs f, expects xgrad::error, and checks the message contains every one of `parts`.
inline void check_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const xgrad::error& e) {
    const std::string what = e.what();
    for (const auto& p : parts) {
      BOOST_TEST(what.find(p) != std::string::npos, "message \"" << what << "\" lacks \"" << p << "\"");
    }
    return;
  }
  BOOST_ERROR("no xgrad::error thrown");
}

// gradcheck, failing the test with the full report (worst element of each input) if it fails.
template <class T>
GradcheckReport check_gradients(const Var<T>& y, const std::vector<Var<T>>& xs,
                                const GradcheckOptions& options = {}) {
  const GradcheckReport report = gradcheck(y, xs, options);
  BOOST_TEST(report.passed, report.str());
  return report;
}

// g through JSON and back: exported with every value, it imports as the same ops and replays to
// the same text; then, for each of `nexts` given to `leaf` in both graphs (V: T, or a mask leaf's
// booleans), both replay to the same bits in every node. Returns the exported text (to look for
// an op or attributes in).
template <class T, class V>
std::string check_json_replays(Graph<T>& g, const Var<T>& leaf, std::initializer_list<V> nexts) {
  const std::string text = to_json(g, ExportValues::all).dump();
  const auto back = graph_from_json<T>(text);
  BOOST_TEST_REQUIRE(back->size() == g.size());
  for (std::size_t id = 0; id < g.size(); ++id) BOOST_TEST(back->node(id).op_name() == g.node(id).op_name(), "node " << id);
  back->replay();
  BOOST_TEST(to_json(*back, ExportValues::all).dump() == text);
  for (const auto& next : nexts) {
    g.set_value(leaf, next);
    back->set_value(back->var(leaf.id()), next);
    g.replay();
    back->replay();
    for (std::size_t id = 0; id < g.size(); ++id) BOOST_TEST(same_bits(back->node(id).value(), g.node(id).value()), "node " << id);
  }
  return text;
}

// y's op writes `attrs` (compact JSON), and the export of y's graph with all values imports back
// with y's node of the same op, the same attrs and the same value. Returns the export (for the
// refusals below).
inline Json check_attrs_round_trip(const Var<double>& y, const std::string& op, const std::string& attrs) {
  BOOST_TEST(y.node().op->attrs().dump() == attrs);
  Json exported = to_json(y.graph(), ExportValues::all);
  const auto copy = graph_from_json<double>(exported.dump());
  BOOST_TEST(copy->node(y.id()).op_name() == op);
  BOOST_TEST(copy->node(y.id()).op->attrs() == y.node().op->attrs());
  BOOST_TEST(copy->node(y.id()).value() == y.value());
  return exported;
}

// The import of `exported` with node `id`'s attribute `key` set to `value` fails with `message`.
inline void check_refuses_attr(const Json& exported, std::size_t id, const std::string& key, const Json& value,
                               const std::string& message) {
  Json bad = exported;
  bad["nodes"][id]["attrs"][key] = value;
  check_error([&] { graph_from_json<double>(bad.dump()); }, {message});
}

// The import of `exported` refuses node `id`'s attrs with an unknown key, and with each of `keys`
// (non-negative integers) set to -1 or, if `required`, missing; each message names the key.
inline void check_refuses_bad_attrs(const Json& exported, std::size_t id, std::initializer_list<const char*> keys,
                                    bool required = true) {
  const std::string at = "nodes[" + std::to_string(id) + "].attrs";
  check_refuses_attr(exported, id, "unknown", 0, at + ".unknown: unknown key");
  for (const char* key : keys) {
    check_refuses_attr(exported, id, key, -1, at + "." + key + ": expected a non-negative integer, got -1");
    if (!required) continue;
    Json missing = exported;
    missing["nodes"][id]["attrs"].erase(key);
    check_error([&] { graph_from_json<double>(missing.dump()); }, {at + ": missing key \"" + key + "\""});
  }
}

// |actual - expected| <= n ulp of T at expected, for every element.
template <class T>
void check_ulps(const xt::xarray<T>& actual, const xt::xarray<double>& expected, int n) {
  BOOST_TEST_REQUIRE(shapes_equal(actual.shape(), expected.shape()));
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double e = expected.data()[i];
    const T te = static_cast<T>(e);
    const double ulp = std::nextafter(std::abs(te), std::numeric_limits<T>::infinity()) - std::abs(te);
    const double diff = std::abs(static_cast<double>(actual.data()[i]) - e);
    BOOST_TEST(diff <= n * ulp, "element " << i << ": " << actual.data()[i] << " vs " << e << " ("
                                            << diff / ulp << " ulp)");
  }
}

// A file-size limit (RLIMIT_FSIZE) of `bytes` for a scope, SIGXFSZ ignored, so that a write
// past it fails with EFBIG: a full disk, for the writers' error paths.
struct FileSizeLimit {
  rlimit old{};
  void (*old_handler)(int) = SIG_DFL;
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler = std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &old);
    rlimit small = old;
    small.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &small);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
};

// A PyTorch reference of tests/data/make_torch_fixtures.py: tests/data/torch/<name>.npy.
inline xt::xarray<double> torch_fixture(const std::string& name) {
  return read_npy(XGRAD_TEST_DATA "/torch/" + name + ".npy").values;
}

// |actual - expected| <= tol (1 + |expected|) for every element (relative, absolute near 0);
// NaN exactly where expected is NaN, an infinity exactly where expected has it.
template <class T>
void check_close(const xt::xarray<T>& actual, const xt::xarray<double>& expected, double tol = 1e-12) {
  BOOST_TEST_REQUIRE(shapes_equal(actual.shape(), expected.shape()), shape_str(shape_of(actual)) << " vs " << shape_str(shape_of(expected)));
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual.data()[i]), e = expected.data()[i];
    const bool ok = std::isnan(e) ? std::isnan(a) : std::isinf(e) ? a == e : std::abs(a - e) <= tol * (1 + std::abs(e));
    BOOST_TEST(ok, "element " << i << ": " << a << " vs " << e);
  }
}

// A zip archive by hand: members with the given declared (uncompressed) sizes, deflated, each
// with `compressed` bytes of zeros as its data (never inflated by a reader that refuses first).
inline std::string zip_declaring(const std::vector<std::uint32_t>& declared, std::uint32_t compressed) {
  std::string out, central;
  const auto le = [](std::string& s, std::uint64_t v, int bytes) {
    for (int k = 0; k < bytes; ++k) s += static_cast<char>((v >> (8 * k)) & 0xff);
  };
  for (std::size_t i = 0; i < declared.size(); ++i) {
    const std::string name = "t" + std::to_string(i) + ".npy";
    const auto offset = static_cast<std::uint32_t>(out.size());
    // Local header: signature, version 20, flags 0, method 8 (deflate), time, date, CRC, sizes.
    le(out, 0x04034b50, 4), le(out, 20, 2), le(out, 0, 2), le(out, 8, 2), le(out, 0, 2), le(out, 0x21, 2);
    le(out, 0, 4), le(out, compressed, 4), le(out, declared[i], 4), le(out, name.size(), 2), le(out, 0, 2);
    out += name + std::string(compressed, '\0');
    le(central, 0x02014b50, 4), le(central, 20, 2), le(central, 20, 2), le(central, 0, 2), le(central, 8, 2);
    le(central, 0, 2), le(central, 0x21, 2), le(central, 0, 4), le(central, compressed, 4), le(central, declared[i], 4);
    le(central, name.size(), 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 2);
    le(central, 0, 4), le(central, offset, 4);
    central += name;
  }
  const auto at = static_cast<std::uint32_t>(out.size());
  out += central;
  le(out, 0x06054b50, 4), le(out, 0, 2), le(out, 0, 2), le(out, declared.size(), 2), le(out, declared.size(), 2);
  le(out, central.size(), 4), le(out, at, 4), le(out, 0, 2);
  return out;
}

}  // namespace xgrad::test

// Every suite names xgrad's API and these helpers unqualified.
using namespace xgrad;
using namespace xgrad::test;
