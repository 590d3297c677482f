#include "../check.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

namespace {

const std::string npy_dir = XGRAD_TEST_DATA "/npy/";

// The array of tests/data/make_npy_fixtures.py: arange(24) * 0.5 - 3 in shape (2, 3, 4), with
// element 1 = -0.0, 2 = inf, 3 = -inf, 4 = nan, 5 = the dtype's smallest subnormal.
template <class T>
xt::xarray<double> fixture() {
  xt::xarray<double> a = xt::xarray<double>::from_shape({2, 3, 4});
  for (std::size_t i = 0; i < 24; ++i) a.data()[i] = static_cast<double>(i) * 0.5 - 3;
  a.data()[1] = -0.0;
  a.data()[2] = std::numeric_limits<double>::infinity();
  a.data()[3] = -std::numeric_limits<double>::infinity();
  a.data()[4] = std::numeric_limits<double>::quiet_NaN();
  a.data()[5] = std::numeric_limits<T>::denorm_min();
  return a;
}

// Equal shapes and bit patterns (any NaN equals any NaN).
void check_same(const xt::xarray<double>& a, const xt::xarray<double>& b) {
  BOOST_TEST_REQUIRE(shapes_equal(a.shape(), b.shape()));
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = a.data()[i], y = b.data()[i];
    BOOST_TEST((std::isnan(x) ? std::isnan(y) : std::memcmp(&x, &y, sizeof x) == 0),
               "element " << i << ": " << x << " vs " << y);
  }
}

// A .npy file: magic, version, header length, then the header (padded to 16 bytes with '\n').
std::string npy(const std::string& dict, const std::string& data = "", int major = 1, long declared_len = -1) {
  std::string header = dict;
  while ((header.size() + 11) % 16) header += ' ';
  header += '\n';
  const std::size_t len = declared_len < 0 ? header.size() : static_cast<std::size_t>(declared_len);
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (major > 1) {
    out += static_cast<char>((len >> 16) & 0xff);
    out += static_cast<char>((len >> 24) & 0xff);
  }
  return out + header + data;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("xgrad_array_io_" + name)).string();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(array_io)

BOOST_AUTO_TEST_CASE(reads_numpy_files_of_every_supported_kind) {
  int files = 0;
  for (const char* code : {"f4", "f8"}) {
    for (const char* endian : {"le", "be"}) {
      for (const char* order : {"C", "F"}) {
        for (const char* version : {"v1", "v2", "v3"}) {
          const std::string path = npy_dir + code + "_" + endian + "_" + order + "_" + version + ".npy";
          BOOST_TEST_CONTEXT(path) {
            const StoredArray a = read_npy(path);
            BOOST_TEST(a.dtype == (std::string(code) == "f4" ? "float32" : "float64"));
            check_same(a.values, std::string(code) == "f4" ? fixture<float>() : fixture<double>());
          }
          ++files;
        }
      }
    }
  }
  BOOST_TEST(files == 24);
}

BOOST_AUTO_TEST_CASE(reads_scalars_vectors_and_empty_arrays) {
  const StoredArray scalar = read_npy(npy_dir + "f8_scalar.npy");
  BOOST_TEST(scalar.values.dimension() == 0u);
  BOOST_TEST(scalar.values() == 2.5);
  check_same(read_npy(npy_dir + "f8_vector.npy").values, xt::xarray<double>{1, 2, 3});
  const StoredArray empty = read_npy(npy_dir + "f4_empty.npy");
  BOOST_TEST(empty.values.shape() == (xt::svector<std::size_t>{0, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(write_read_round_trip_is_bit_exact) {
  for (int dtype = 0; dtype < 2; ++dtype) {
    xt::xarray<double> a = random_array<double>({3, 1, 4}, 7);
    a.data()[0] = -0.0;
    a.data()[1] = std::numeric_limits<double>::quiet_NaN();
    a.data()[2] = -std::numeric_limits<double>::infinity();
    a.data()[3] = std::numeric_limits<float>::denorm_min();
    const std::string path = temp_path("round_trip.npy");
    if (dtype == 0) write_npy(path, xt::xarray<float>(xt::cast<float>(a)));
    else write_npy(path, a);
    const StoredArray back = read_npy(path);
    BOOST_TEST(back.dtype == (dtype == 0 ? "float32" : "float64"));
    check_same(back.values, dtype == 0 ? xt::xarray<double>(xt::cast<double>(xt::cast<float>(a))) : a);
    std::filesystem::remove(path);
  }
  // The header is padded with spaces to a multiple of 64 bytes and ends in \n, as numpy writes it.
  const std::string bytes = npy_bytes(xt::xarray<double>{1.0, 2.0});
  BOOST_TEST(bytes.size() == 128u + 16u);
  BOOST_TEST(bytes.substr(10).rfind("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }   ", 0) == 0u);
  BOOST_TEST(bytes[127] == '\n');
}

BOOST_AUTO_TEST_CASE(header_keys_in_any_order) {
  std::string data(16, '\0');
  const StoredArray a = parse_npy(npy("{'shape': (2,), 'fortran_order': False, 'descr': '<f8'}", data), "t");
  BOOST_TEST(a.values.size() == 2u);
}

BOOST_AUTO_TEST_CASE(rejects_bad_files_before_allocating) {
  const std::string good_dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string data(48, '\0');
  BOOST_REQUIRE_NO_THROW(parse_npy(npy(good_dict, data), "t"));
  check_error([&] { parse_npy("", "t.npy"); }, {"t.npy", "too short"});
  check_error([&] { parse_npy("\x93NUMPZ\x01\x00\x10\x00" + std::string(16, ' '), "t.npy"); }, {"t.npy", "not a .npy file"});
  check_error([&] { parse_npy(npy(good_dict, data, 4), "t.npy"); }, {"format version 4.0 is not supported"});
  // A 12-byte file whose header length claims 65535 bytes.
  check_error([&] { parse_npy(std::string("\x93NUMPY\x01\x00\xff\xff", 10) + "{}", "t.npy"); },
              {"the header claims 65535 bytes", "truncated"});
  check_error([&] { parse_npy(npy(good_dict, data.substr(0, 40)), "t.npy"); }, {"needs 48 data bytes", "has 40", "truncated"});
  check_error([&] { parse_npy(npy(good_dict, data + "x"), "t.npy"); }, {"needs 48 data bytes", "has 49", "trailing"});
  // A huge shape with no data fails on the size check, not in an allocation; an empty array
  // cannot carry an absurd axis either.
  const std::pair<std::string, std::vector<std::string>> shapes[] = {
      {"(10000, 10000)", {"needs 800000000 data bytes", "has 0"}},
      {"(100000000, 100000000)", {"shape (100000000, 100000000) has more than 268435456 elements"}},
      {"(4294967296, 4294967296)", {"more than 268435456 elements"}},
      {"(0, 18446744073709551615)", {"more than 268435456 elements", "axes of length 0 counted as 1"}},
      {"(99999999999999999999999,)", {"overflows"}},
      {"(-2, 3)", {"negative axis"}},
  };
  for (const auto& [shape, message] : shapes) {
    const std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }";
    check_error([&] { parse_npy(npy(dict), "t.npy"); }, message);
  }
  check_error([&] { parse_npy(npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", "ab"), "t.npy"); },
              {"dtype '|b1' is not supported"});
  // Header dicts of a (2, 3) array's 48 bytes.
  const std::pair<std::string, std::string> headers[] = {
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", "dtype '<i8' is not supported"},
      {"{'descr': '<f8', 'shape': (2, 3), }", "no 'fortran_order'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", "unknown key 'x'"},
      {"{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)}", "'descr' twice"},
      {"{'descr': '<f8', 'fortran_order': Maybe, 'shape': (2, 3)}", "True or False"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3}", "malformed header dict"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape: (2, 3)}", "malformed header dict"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (2.5, 3)}", "malformed header dict"},
  };
  for (const auto& [header, message] : headers) {
    const std::string& dict = header;  // (a lambda captures no structured binding in C++17)
    check_error([&] { parse_npy(npy(dict, data), "t.npy"); }, {message});
  }
  check_error([&] { read_npy(npy_dir + "i8_matrix.npy"); }, {"i8_matrix.npy", "dtype '<i8' is not supported"});
  check_error([&] { read_npy(npy_dir + "missing.npy"); }, {"missing.npy", "no such file"});
  check_error([&] { read_npy(npy_dir); }, {"not a regular file"});
}

BOOST_AUTO_TEST_CASE(json_arrays_read_nested_numbers) {
  const StoredArray a = parse_json_array("[[1, 2.5, \"nan\"], [-0.0, \"inf\", \"-inf\"]]", "a.json");
  BOOST_TEST(a.dtype == "float64");
  xt::xarray<double> expected = {{1, 2.5, 0}, {-0.0, 0, 0}};
  expected(0, 2) = std::numeric_limits<double>::quiet_NaN();
  expected(1, 1) = std::numeric_limits<double>::infinity();
  expected(1, 2) = -std::numeric_limits<double>::infinity();
  check_same(a.values, expected);
  BOOST_TEST(parse_json_array("7", "s.json").values() == 7.0);
  BOOST_TEST(parse_json_array("[]", "e.json").values.shape() == (xt::svector<std::size_t>{0}), boost::test_tools::per_element());
  BOOST_TEST(parse_json_array("[[], []]", "e.json").values.shape() == (xt::svector<std::size_t>{2, 0}),
             boost::test_tools::per_element());
  // What array_to_json writes, parse_json_array reads back bit for bit.
  check_same(parse_json_array(array_to_json(expected).dump(), "r.json").values, expected);
}

BOOST_AUTO_TEST_CASE(json_arrays_reject_bad_input) {
  check_error([&] { parse_json_array("[[1, 2], [3]]", "a.json"); }, {"a.json: [1]: ragged: 1 elements where other rows have 2"});
  check_error([&] { parse_json_array("[[[]], []]", "a.json"); }, {"a.json: [1]: ragged: an empty array where deeper"});
  check_error([&] { parse_json_array(std::string_view("[1, 2]\0[[[", 10), "a.json"); }, {"a.json: not JSON: a NUL byte at byte 6"});
  check_error([&] { parse_json_array("[[1, 2], 3]", "a.json"); }, {"a.json: [1]", "ragged"});
  check_error([&] { parse_json_array("[1, [2]]", "a.json"); }, {"ragged"});
  check_error([&] { parse_json_array("[[], [1]]", "a.json"); }, {"a.json: [1]: ragged"});
  check_error([&] { parse_json_array("[[1, \"x\"]]", "a.json"); }, {"a.json: [0][1]", "got a string"});
  check_error([&] { parse_json_array("[1, null]", "a.json"); }, {"[1]", "got null"});
  check_error([&] { parse_json_array("[true]", "a.json"); }, {"got a boolean"});
  check_error([&] { parse_json_array("{\"a\": 1}", "a.json"); }, {"got an object"});
  check_error([&] { parse_json_array("[1, 2", "a.json"); }, {"a.json", "not JSON"});
  check_error([&] { parse_json_array("[1] [2]", "a.json"); }, {"not JSON"});
  check_error([&] { parse_json_array("", "a.json"); }, {"not JSON"});
  check_error([&] { parse_json_array(std::string(100000, '[') + std::string(100000, ']'), "deep.json"); },
              {"deep.json", "nested deeper than 32 levels"});
  check_error([&] { read_array("a.txt"); }, {"a.txt", ".npy or .json"});
  check_error([&] { read_json_array(npy_dir + "missing.json"); }, {"missing.json", "no such file"});
}

BOOST_AUTO_TEST_CASE(json_arrays_hold_at_most_max_elements) {
  // Regression (issue 15): the JSON reader lacked the .npy reader's 2^28 bound (2^28 + 1 zeros
  // were read). The bound is a parameter, so that it can be tested on small texts.
  BOOST_TEST(parse_json_array("[[1, 2], [3, 4]]", "a.json", 4).values.size() == 4u);
  check_error([&] { parse_json_array("[[1, 2], [3, 4], [5, 6]]", "a.json", 4); },
              {"a.json: [2][0]: more than 4 numbers, the most an array holds"});
  // An axis of length 0 counts as 1: no absurd axis on an empty array.
  check_error([&] { parse_json_array("[[], [], [], [], []]", "a.json", 4); },
              {"a.json: shape (5, 0) has more than 4 elements (axes of length 0 counted as 1)"});
  BOOST_TEST(parse_json_array("[[], []]", "a.json", 4).values.shape() == (std::vector<std::size_t>{2, 0}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
