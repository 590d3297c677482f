// Checkpoints (lib/checkpoint.hpp): bit-exact round trips in both formats and dtypes, numpy's and
// a hand-written safetensors file read, exactness of float64 -> float32, all-or-nothing loads,
// atomic writes, and one crafted bad file per rule.
#include "../check.hpp"

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/resource.h>

namespace fs = std::filesystem;
using namespace xgrad;

namespace {

const std::string data_dir = XGRAD_TEST_DATA "/checkpoint/";

const fs::path& scratch() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / "xgrad_checkpoint_test";
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
std::string at(const std::string& name) { return (scratch() / name).string(); }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

const double inf_v = std::numeric_limits<double>::infinity();
const double nan_v = std::numeric_limits<double>::quiet_NaN();

// Values every round trip must keep bit for bit: -0.0, infinities, NaN, subnormals of T.
template <class T>
std::map<std::string, xt::xarray<T>> special_tensors() {
  const T tiny = std::numeric_limits<T>::denorm_min();
  std::map<std::string, xt::xarray<T>> t;
  t["layer.0.weight"] = xt::xarray<T>{{T(0.1), T(-0.0), T(inf_v)}, {T(-inf_v), T(nan_v), tiny}};
  t["bias"] = xt::xarray<T>{T(1e-30), -tiny, std::numeric_limits<T>::max(), std::numeric_limits<T>::lowest()};
  t["scalar"] = xt::xarray<T>(T(2.5));
  t["empty"] = xt::xarray<T>::from_shape({0, 3});
  return t;
}

template <class T>
bool same(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  return same_bits(a, b);
}

// A safetensors file from its header text and data.
std::string safetensors(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (std::size_t k = 0; k < 8; ++k) out[k] = static_cast<char>((header.size() >> (8 * k)) & 0xff);
  return out + header + data;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t i = 0; (i = s.find(from, i)) != std::string::npos; i += to.size()) s.replace(i, from.size(), to);
  return s;
}

void check_parse_error(const std::string& bytes, CheckpointFormat format, std::initializer_list<std::string> parts) {
  test::check_error([&] { parse_checkpoint(bytes, format, "t.ckpt"); }, parts);
}


// A graph of three named parameters and an input.
template <class T>
struct Model {
  Graph<T> g;
  Var<T> w = g.parameter("w", xt::xarray<T>{{1, 2, 3}, {4, 5, 6}});
  Var<T> b = g.parameter("b", xt::xarray<T>{T(0.5), T(-0.25)});
  Var<T> x = g.input("x", xt::xarray<T>(xt::ones<T>({3, 1})));
  Var<T> s = g.parameter("s", xt::xarray<T>(T(3)));
};

// The arrays of tests/data/make_checkpoint_fixtures.py.
xt::xarray<double> fixture_w() { return {{0.5, -0.0, inf_v}, {-inf_v, nan_v, 5e-324}}; }
xt::xarray<double> fixture_b() {
  return {1.5, -2.25, static_cast<double>(std::numeric_limits<float>::denorm_min()), static_cast<double>(3e38f)};
}

const std::vector<CheckpointFormat> formats = {CheckpointFormat::safetensors, CheckpointFormat::npz};
const char* extension(CheckpointFormat f) { return f == CheckpointFormat::npz ? ".npz" : ".safetensors"; }

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE_TEMPLATE(tensors_round_trip_bit_exact, T, test::dtypes) {
  const auto tensors = special_tensors<T>();
  const CheckpointMetadata metadata = {{"config", "{\"d_model\": 4}"}, {"step", "100"}, {"empty", ""}};
  for (const CheckpointFormat format : formats) {
    const std::string path = at(std::string("round_trip_") + dtype_name<T>() + extension(format));
    save_tensors(path, tensors, metadata);
    const TensorFile<T> back = load_tensors<T>(path);
    BOOST_TEST(back.metadata == metadata);
    BOOST_TEST_REQUIRE(back.tensors.size() == tensors.size());
    auto expected = tensors.begin();  // the file order is the name order save_tensors writes in
    for (const auto& [name, array] : back.tensors) {
      BOOST_TEST(name == expected->first);
      BOOST_TEST(same(array, expected->second), path << ": tensor " << name);
      ++expected;
    }
    const StoredCheckpoint stored = read_checkpoint(path);
    for (const auto& [name, array] : stored.tensors) BOOST_TEST(array.dtype == dtype_name<T>());
    BOOST_TEST(read_checkpoint_metadata(path) == metadata);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(parameters_round_trip_and_load_by_name, T, test::dtypes) {
  for (const CheckpointFormat format : formats) {
    const std::string path = at(std::string("params_") + dtype_name<T>() + extension(format));
    Model<T> saved;
    save_parameters(saved.g, path, {{"epoch", "3"}});
    Model<T> loaded;
    loaded.g.set_value(loaded.w, xt::xarray<T>(xt::zeros<T>({2, 3})));
    loaded.g.set_value(loaded.b, xt::xarray<T>(xt::zeros<T>({2})));
    const CheckpointMetadata metadata = load_parameters(loaded.g, path);
    BOOST_TEST(metadata == (CheckpointMetadata{{"epoch", "3"}}));
    BOOST_TEST(same(loaded.w.value(), saved.w.value()));
    BOOST_TEST(same(loaded.b.value(), saved.b.value()));
    BOOST_TEST(same(loaded.s.value(), saved.s.value()));
    // Inputs are no parameters: not in the file.
    BOOST_TEST(!load_tensors<T>(path).find("x"));
    BOOST_TEST(load_tensors<T>(path).tensors.size() == 3u);
  }
}

BOOST_AUTO_TEST_CASE(float64_graph_loads_float32_exactly) {
  const auto tensors = special_tensors<float>();
  for (const CheckpointFormat format : formats) {
    const std::string path = at(std::string("f32_into_f64") + extension(format));
    save_tensors(path, tensors);
    const TensorFile<double> back = load_tensors<double>(path);
    for (const auto& [name, array] : back.tensors) {
      const xt::xarray<double> expected = xt::cast<double>(tensors.at(name));
      BOOST_TEST(same_bits(array, expected), name);
    }
  }
}

BOOST_AUTO_TEST_CASE(float32_graph_loads_float64_only_when_exact) {
  const std::map<std::string, xt::xarray<double>> exact = {
      {"a", {0.5, -0.0, inf_v, -inf_v, nan_v, static_cast<double>(std::numeric_limits<float>::denorm_min()), 3.0e38f}}};
  const std::map<std::string, xt::xarray<double>> inexact = {{"a", {0.5}}, {"z", {{1.0, 2.0}, {0.1, 4.0}}}};
  const std::map<std::string, xt::xarray<double>> too_big = {{"big", {1e300}}};
  for (const CheckpointFormat format : formats) {
    const std::string path = at(std::string("f64_into_f32") + extension(format));
    save_tensors(path, exact);
    const TensorFile<float> back = load_tensors<float>(path);
    BOOST_TEST(same_bits(back.tensors.at(0).second, xt::xarray<float>(xt::cast<float>(exact.at("a")))));
    save_tensors(path, inexact);
    test::check_error([&] { load_tensors<float>(path); },
                      {path + ": tensor 'z': the float64 value 0.10000000000000001 at [1, 0] has no exact float32 value"});
    save_tensors(path, too_big);
    test::check_error([&] { load_tensors<float>(path); }, {"tensor 'big': the float64 value 1.0000000000000001e+300 at [0]"});
  }
}

BOOST_AUTO_TEST_CASE(reads_numpy_savez_compressed_and_zip64) {
  for (const char* name : {"savez.npz", "savez_compressed.npz", "zip64.npz"}) {
    BOOST_TEST_CONTEXT(name) {
      const std::string path = data_dir + name;
      const StoredCheckpoint c = read_checkpoint(path);
      std::vector<std::string> names;
      for (const auto& [n, a] : c.tensors) names.push_back(n);
      BOOST_TEST(names == (std::vector<std::string>{"w", "b", "s", "e", "f", "be"}), boost::test_tools::per_element());
      BOOST_TEST(c.metadata.empty());
      const TensorFile<double> t = load_tensors<double>(path);
      BOOST_TEST(same_bits_any_nan(*t.find("w"), fixture_w()));
      BOOST_TEST(same_bits(*t.find("b"), fixture_b()));
      BOOST_TEST(same_bits(*t.find("s"), xt::xarray<double>(2.5)));
      BOOST_TEST(shapes_equal(t.find("e")->shape(), Shape{0, 3}));
      BOOST_TEST(same_bits(*t.find("f"), xt::xarray<double>{{1, 2}, {3, 4}}));
      BOOST_TEST(same_bits(*t.find("be"), xt::xarray<double>{1, -2, 0.125}));
      BOOST_TEST(c.tensors[0].second.dtype == "float64");
      BOOST_TEST(c.tensors[1].second.dtype == "float32");
      // A float32 graph refuses w: 5e-324 (a float64 subnormal) has no float32 value.
      test::check_error([&] { load_tensors<float>(path); },
                        {path + ": tensor 'w': the float64 value 4.9406564584124654e-324 at [1, 2] has no exact float32 value"});
    }
  }
}

BOOST_AUTO_TEST_CASE(reads_a_hand_written_safetensors_file) {
  const std::string path = data_dir + "hand.safetensors";
  const StoredCheckpoint c = read_checkpoint(path);
  std::vector<std::string> names;
  for (const auto& [n, a] : c.tensors) names.push_back(n);
  // File order is data order (b, w, e, s), not the header's key order (s, w, e, b).
  BOOST_TEST(names == (std::vector<std::string>{"b", "w", "e", "s"}), boost::test_tools::per_element());
  BOOST_TEST(c.metadata == (CheckpointMetadata{{"format", "pt"}, {"config", "{\"d_model\": 4}"}}));
  const TensorFile<double> t = load_tensors<double>(path);
  BOOST_TEST(same_bits_any_nan(*t.find("w"), fixture_w()));
  BOOST_TEST(same_bits(*t.find("b"), fixture_b()));
  BOOST_TEST(same_bits(*t.find("s"), xt::xarray<double>(2.5)));
  BOOST_TEST(c.tensors[0].second.dtype == "float32");
}

BOOST_AUTO_TEST_CASE(writes_the_safetensors_layout) {
  const std::map<std::string, xt::xarray<double>> t = {{"b", {1.0}}, {"a", {{2.0, 3.0}}}};
  const std::string bytes = checkpoint_bytes(t, {{"k", "v"}}, CheckpointFormat::safetensors, "t");
  const std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F64","shape":[1,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F64","shape":[1],"data_offsets":[16,24]}})";
  const std::size_t n = header.size() + (8 - header.size() % 8) % 8;  // padded with spaces to 8
  BOOST_TEST_REQUIRE(bytes.size() == 8 + n + 24);
  BOOST_TEST(static_cast<unsigned char>(bytes[0]) == n);
  BOOST_TEST(bytes.substr(1, 7) == std::string(7, '\0'));
  BOOST_TEST(bytes.substr(8, n) == header + std::string(n - header.size(), ' '));
  double x;
  std::memcpy(&x, bytes.data() + 8 + n + 16, 8);
  BOOST_TEST(x == 1.0);
  // Float32 tensors are F32; no __metadata__ when there is none.
  const std::string f = checkpoint_bytes(std::map<std::string, xt::xarray<float>>{{"a", {1.0f}}}, {},
                                         CheckpointFormat::safetensors, "t");
  BOOST_TEST(f.substr(8, 54) == R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
  // The same tensors give the same bytes (the .npz members carry a fixed time).
  BOOST_TEST(checkpoint_bytes(t, {}, CheckpointFormat::npz, "t") == checkpoint_bytes(t, {}, CheckpointFormat::npz, "t"));
}

BOOST_AUTO_TEST_CASE(empty_checkpoints_round_trip) {
  for (const CheckpointFormat format : formats) {
    const std::string path = at(std::string("empty") + extension(format));
    save_tensors(path, std::map<std::string, xt::xarray<double>>{});
    const TensorFile<double> back = load_tensors<double>(path);
    BOOST_TEST(back.tensors.empty());
    BOOST_TEST(back.metadata.empty());
  }
}

BOOST_AUTO_TEST_CASE(load_parameters_is_all_or_nothing) {
  for (const CheckpointFormat format : formats) {
    const std::string path = at(std::string("partial") + extension(format));
    Model<double> m;
    const auto untouched = [&] {
      BOOST_TEST(same(m.w.value(), xt::xarray<double>{{1, 2, 3}, {4, 5, 6}}));
      BOOST_TEST(same(m.b.value(), xt::xarray<double>{0.5, -0.25}));
    };
    const xt::xarray<double> w = xt::zeros<double>({2, 3}), b = xt::zeros<double>({2}), s = xt::xarray<double>(1.0);
    save_tensors(path, std::map<std::string, xt::xarray<double>>{{"w", w}, {"b", b}});
    test::check_error([&] { load_parameters(m.g, path); }, {path + ": no tensor 's' for parameter 's' (node 3, ())"});
    untouched();
    save_tensors(path, std::map<std::string, xt::xarray<double>>{{"w", w}, {"b", b}, {"s", s}, {"extra", b}});
    test::check_error([&] { load_parameters(m.g, path); }, {path + ": tensor 'extra' (2,) is no parameter of the graph"});
    untouched();
    save_tensors(path, std::map<std::string, xt::xarray<double>>{{"w", xt::zeros<double>({3, 2})}, {"b", b}, {"s", s}});
    test::check_error([&] { load_parameters(m.g, path); }, {path + ": tensor 'w' is (3, 2), parameter 'w' (node 0) is (2, 3)"});
    untouched();
    // A float32 graph and an inexact float64 value: nothing changes either.
    Model<float> f;
    save_tensors(path, std::map<std::string, xt::xarray<double>>{{"w", w}, {"b", {0.5, 0.1}}, {"s", s}});
    test::check_error([&] { load_parameters(f.g, path); }, {"tensor 'b': the float64 value 0.10000000000000001 at [1]"});
    BOOST_TEST(same(f.w.value(), xt::xarray<float>{{1, 2, 3}, {4, 5, 6}}));
  }
}

BOOST_AUTO_TEST_CASE(parameters_need_one_name_each) {
  Graph<double> g;
  g.parameter("w", xt::xarray<double>{1.0});
  g.parameter("w", xt::xarray<double>{2.0});
  test::check_error([&] { save_parameters(g, at("dup.safetensors")); },
                    {"dup.safetensors: parameters node 0 and node 1 are both named 'w'"});
  BOOST_TEST(!fs::exists(at("dup.safetensors")));
  test::check_error([&] { load_parameters(g, at("dup.safetensors")); }, {"both named 'w'"});
  Graph<double> h;
  h.parameter("", xt::xarray<double>{{1.0, 2.0}});
  test::check_error([&] { save_parameters(h, at("unnamed.npz")); }, {"unnamed.npz: parameter node 0 (1, 2) has no name"});
}

BOOST_AUTO_TEST_CASE(names_the_writer_refuses) {
  const xt::xarray<double> one{1.0};
  for (const CheckpointFormat format : formats) {
    test::check_error([&] { checkpoint_bytes(std::map<std::string, xt::xarray<double>>{{"", one}}, {}, format, "t"); },
                      {"t: a tensor has an empty name"});
    test::check_error(
        [&] { checkpoint_bytes(std::map<std::string, xt::xarray<double>>{{"__metadata__", one}}, {}, format, "t"); },
        {"t: the name '__metadata__' is reserved"});
    test::check_error([&] { checkpoint_bytes(std::map<std::string, xt::xarray<double>>{}, {{"k", "\xff"}}, format, "t"); },
                      {"not valid UTF-8"});
  }
  test::check_error(
      [&] { checkpoint_bytes(std::map<std::string, xt::xarray<double>>{{"\xff", one}}, {}, CheckpointFormat::safetensors, "t"); },
      {"t: a tensor name or a metadata string is not valid UTF-8"});
  test::check_error([&] { checkpoint_bytes(std::map<std::string, xt::xarray<double>>{{std::string("a\0b", 3), one}}, {},
                                           CheckpointFormat::npz, "t"); },
                    {"t: tensor name holds a NUL byte"});
  test::check_error([&] { save_tensors(at("model.ckpt"), std::map<std::string, xt::xarray<double>>{}); },
                    {"model.ckpt: unknown checkpoint type: the name must end in .safetensors or .npz"});
  test::check_error([&] { load_tensors<double>(at("model.pt")); }, {"model.pt: unknown checkpoint type"});
}

BOOST_AUTO_TEST_CASE(writes_are_atomic) {
  const std::map<std::string, xt::xarray<double>> small = {{"a", {1.0}}};
  const std::map<std::string, xt::xarray<double>> large = {{"a", xt::zeros<double>({4096})}};
  for (const CheckpointFormat format : formats) {
    const std::string path = at(std::string("atomic") + extension(format));
    save_tensors(path, small);
    const std::string before = slurp(path);
    {
      const FileSizeLimit limit(4096);
      test::check_error([&] { save_tensors(path, large); }, {path + ": cannot write it: File too large"});
    }
    BOOST_TEST(slurp(path) == before);
    for (const auto& entry : fs::directory_iterator(scratch())) {
      BOOST_TEST(entry.path().filename().string().find(".atomic") != 0, "a temporary file was left: " << entry.path());
    }
    test::check_error([&] { save_tensors(at(std::string("no/such/dir/m") + extension(format)), small); },
                      {"no/such/dir/m", ": cannot create a temporary file in its directory: No such file or directory"});
    fs::create_directories(at(std::string("adir") + extension(format)));
    test::check_error([&] { save_tensors(at(std::string("adir") + extension(format)), small); },
                      {"exists and is a directory; refusing to replace it"});
    // A symbolic link: the file it points to is replaced, the link stays.
    const std::string link = at(std::string("link") + extension(format));
    fs::remove(link);
    fs::create_symlink(path, link);
    save_tensors(link, large);
    BOOST_TEST(fs::is_symlink(link));
    BOOST_TEST(load_tensors<double>(path).tensors.at(0).second.size() == 4096u);
    fs::remove(link);
    fs::create_symlink(at("nothing_here"), link);
    test::check_error([&] { save_tensors(link, small); }, {"is a symbolic link to nothing"});
  }
}

// For the ctest entry numpy_reads_xgrad_checkpoints (tests/data/check_numpy_reads.py), which
// runs after this suite: an .npz xgrad writes, for np.load.
BOOST_AUTO_TEST_CASE(writes_npz_files_for_numpy) {
  fs::create_directories(XGRAD_TEST_OUTPUT);
  save_tensors(XGRAD_TEST_OUTPUT "/xgrad_float64.npz", special_tensors<double>(), {{"config", "{\"d\": 2}"}});
  save_tensors(XGRAD_TEST_OUTPUT "/xgrad_float32.npz", special_tensors<float>());
  save_tensors(XGRAD_TEST_OUTPUT "/xgrad_float64.safetensors", special_tensors<double>(), {{"config", "{\"d\": 2}"}});
  save_tensors(XGRAD_TEST_OUTPUT "/xgrad_float32.safetensors", special_tensors<float>());
  BOOST_TEST(load_tensors<double>(XGRAD_TEST_OUTPUT "/xgrad_float64.npz").tensors.size() == 4u);
}

BOOST_AUTO_TEST_CASE(refuses_bad_safetensors_files) {
  const auto S = CheckpointFormat::safetensors;
  const std::string f64 = R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})";
  const std::string data(16, '\0');
  BOOST_TEST(parse_checkpoint(safetensors(f64, data), S, "t").tensors.size() == 1u);  // the base every case breaks
  BOOST_TEST(parse_checkpoint(safetensors(f64 + "   ", data), S, "t").tensors.size() == 1u);  // padding: spaces
  check_parse_error(std::string("\x05\x00\x00", 3), S, {"t.ckpt: too short for a safetensors file (3 bytes"});
  check_parse_error(std::string("\x00\xe2\xf5\x05\x00\x00\x00\x00{}", 10), S, {"the header claims 100000256 bytes, more than the 100000000"});
  check_parse_error(std::string("\x40\x00\x00\x00\x00\x00\x00\x00{}", 10), S, {"the header claims 64 bytes but the file has 2 after the length (truncated)"});
  check_parse_error(safetensors("  {}"), S, {"t.ckpt: header: does not begin with '{'"});
  check_parse_error(safetensors("{\"a\": "), S, {"t.ckpt: header: not JSON"});
  check_parse_error(safetensors(R"({"a":{"dtype":"F64","shape":[0],"data_offsets":[0,0]},"a":{}})"), S, {"t.ckpt: header: top level: the key \"a\" appears twice"});
  check_parse_error(safetensors(R"({"a":{"dtype":"F64","shape":[[1]],"data_offsets":[0,0]}})"), S, {"nested deeper than 3 levels"});
  check_parse_error(safetensors(replace_all(f64, "F64", "BF16"), data), S, {"t.ckpt: header: tensor 'a'.dtype: dtype \"BF16\" is not supported: xgrad reads F32 and F64"});
  check_parse_error(safetensors(replace_all(f64, "\"shape\":[2]", "\"shape\":[99999,99999]"), data), S, {"tensor 'a'.shape: more than 268435456 elements"});
  check_parse_error(safetensors(replace_all(f64, "\"shape\":[2]", "\"shape\":[-2]"), data), S, {"tensor 'a'.shape[0]: expected a non-negative integer, got -2"});
  check_parse_error(safetensors(replace_all(f64, ",\"shape\":[2]", ""), data), S, {"tensor 'a': missing key \"shape\""});
  check_parse_error(safetensors(replace_all(f64, "}}", ",\"colour\":1}}"), data), S, {"tensor 'a'.colour: unknown key"});
  check_parse_error(safetensors(R"({"a":[1]})"), S, {"tensor 'a': expected an object, got array"});
  check_parse_error(safetensors(replace_all(f64, "[0,16]", "[0]"), data), S, {"tensor 'a'.data_offsets: expected [BEGIN, END], an array of 2 integers"});
  check_parse_error(safetensors(replace_all(f64, "[0,16]", "[16,0]"), data), S, {"tensor 'a': data_offsets [16, 0] begin after they end"});
  check_parse_error(safetensors(replace_all(f64, "[0,16]", "[0,8]"), data.substr(0, 8)), S, {"t.ckpt: tensor 'a': data_offsets [0, 8] hold 8 bytes, shape (2,) of F64 needs 16"});
  check_parse_error(safetensors(f64, data.substr(0, 12)), S, {"t.ckpt: tensor 'a': data_offsets [0, 16] end past the data, which has 12 bytes (truncated)"});
  check_parse_error(safetensors(f64, data + "xx"), S, {"t.ckpt: bytes [16, 18) of the data belong to no tensor: the tensors must tile the data (trailing bytes)"});
  const std::string two = R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  check_parse_error(safetensors(two, data), S, {"t.ckpt: tensor 'b': data_offsets [8, 16] overlap those of tensor 'a' [0, 16]"});
  const std::string gap = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  check_parse_error(safetensors(gap, std::string(8, '\0')), S, {"t.ckpt: bytes [0, 4) of the data belong to no tensor", "(before tensor 'a')"});
  check_parse_error(safetensors(R"({"__metadata__":{"lr":0.1}})"), S, {"t.ckpt: header: __metadata__: the value of \"lr\" is number; metadata maps strings to strings"});
  check_parse_error(safetensors(R"({"__metadata__":[]})"), S, {"t.ckpt: header: __metadata__: expected an object of strings, got array"});
  check_parse_error(safetensors(R"({"":{"dtype":"F64","shape":[0],"data_offsets":[0,0]}})"), S, {"t.ckpt: a tensor has an empty name"});
  check_parse_error(safetensors("[]"), S, {"does not begin with '{'"});
}

BOOST_AUTO_TEST_CASE(refuses_bad_npz_files) {
  const auto Z = CheckpointFormat::npz;
  const std::map<std::string, xt::xarray<double>> ab = {{"a", {1.0}}, {"b", {2.0}}};
  const std::string good = checkpoint_bytes(ab, {{"k", "v"}}, Z, "t");
  BOOST_TEST(parse_checkpoint(good, Z, "t").tensors.size() == 2u);
  check_parse_error("PK\x05\x06", Z, {"t.ckpt: too short for a zip archive (.npz) (4 bytes"});
  check_parse_error(std::string(64, 'x'), Z, {"t.ckpt: not a readable zip archive (.npz): Not a zip archive"});
  check_parse_error(good.substr(0, good.size() - 10), Z, {"t.ckpt: not a readable zip archive (.npz)"});
  check_parse_error(replace_all(good, "b.npy", "b.txt"), Z, {"t.ckpt: member 'b.txt': is not NAME.npy"});
  check_parse_error(replace_all(good, "b.npy", "a.npy"), Z, {"t.ckpt: tensor 'a' (a.npy) appears twice"});
  // Members that are no valid .npy or metadata (tests/data/make_checkpoint_fixtures.py).
  test::check_error([&] { read_checkpoint(data_dir + "bad_dtype.npz"); }, {"bad_dtype.npz: tensor 'a' (a.npy): dtype '<i8' is not supported"});
  test::check_error([&] { read_checkpoint(data_dir + "nested_metadata.npz"); }, {"nested_metadata.npz: member '__metadata__.json': nested deeper than 1 levels"});
  test::check_error([&] { read_checkpoint(data_dir + "bad_metadata.npz"); }, {"bad_metadata.npz: member '__metadata__.json': the value of \"k\" is number; metadata maps strings to strings"});
  // A stored member whose size differs from its compressed size (central and local headers agree).
  const std::string npy = npy_bytes(xt::xarray<double>{1.0});
  const std::string one = checkpoint_bytes(std::map<std::string, xt::xarray<double>>{{"a", {1.0}}}, {}, Z, "t");
  const std::string size_le = std::string(1, static_cast<char>(npy.size())) + std::string(3, '\0');
  BOOST_TEST_REQUIRE(one.find(size_le + size_le) != std::string::npos);
  check_parse_error(replace_all(one, size_le + size_le, size_le + std::string("\x00\x00\x00\x10", 4)), Z,
                    {"t.ckpt: tensor 'a' (a.npy): declares 268435456 bytes (136 compressed) in an archive of"});
  // Another compression method than stored or deflated (12, bzip2), in both headers.
  std::string bzip2 = one;
  for (const auto& [signature, offset] : {std::pair{std::string("PK\x03\x04"), 8}, std::pair{std::string("PK\x01\x02"), 10}}) {
    for (std::size_t i = 0; (i = bzip2.find(signature, i)) != std::string::npos; i += 4) bzip2[i + offset] = 12;
  }
  check_parse_error(bzip2, Z, {"t.ckpt: tensor 'a' (a.npy): is compressed with zip method 12; xgrad reads stored and deflated"});
  // A flipped bit in a member's data.
  std::string crc = one;
  crc[crc.find('\n', crc.find("'shape': (1,), }")) + 1] ^= 1;
  check_parse_error(crc, Z, {"t.ckpt: tensor 'a' (a.npy): cannot read it: CRC error"});
}

BOOST_AUTO_TEST_CASE(npz_members_together_are_bounded_before_any_is_inflated) {
  // Each member alone declares 1e9 bytes, within its own bound (2^31 + 1 MiB, and 1032 times
  // its 1 MB compressed), but three together pass the archive's bound (2^28 float64 elements
  // and headers): a 3 MB archive that would need 3 GB is refused before inflating anything.
  const std::uint32_t member = 1'000'000'000, compressed = 1'000'000;
  check_parse_error(test::zip_declaring({member, member, member}, compressed), CheckpointFormat::npz,
                    {"t.ckpt: its 3 members declare 3000000000 bytes in all, more than the 2247495936 xgrad reads from "
                     "one archive (268435456 float64 elements and their headers)"});
  // Two of them are within it: the reader goes on to inflate the first (whose data is no deflate stream).
  check_parse_error(test::zip_declaring({member, member}, compressed), CheckpointFormat::npz, {"t.ckpt: tensor 't0' (t0.npy): cannot read it"});
}

BOOST_AUTO_TEST_CASE(reads_files_as_it_reads_bytes) {
  spit(at("bytes.npz"), "PK\x05\x06");
  test::check_error([&] { read_checkpoint(at("bytes.npz")); }, {"bytes.npz: too short for a zip archive"});
  test::check_error([&] { read_checkpoint(at("none.safetensors")); }, {"none.safetensors: no such file"});
  test::check_error([&] { read_checkpoint(at("none.npz")); }, {"none.npz: no such file"});
  spit(at("trunc.safetensors"), safetensors(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", "12345678"));
  test::check_error([&] { load_tensors<float>(at("trunc.safetensors")); }, {"trunc.safetensors: tensor 'a'", "(truncated)"});
}

BOOST_AUTO_TEST_SUITE_END()
