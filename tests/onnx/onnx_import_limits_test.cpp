// ONNX import's limits on hostile models: external data read only beneath the model's directory
// and only its own bytes; a work budget (OnnxImportOptions::max_work, `xgrad import --max-work`)
// over every node built and every value computed at import.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <xgrad/lib/onnx_import.hpp>
#include <xgrad/xgrad.hpp>

#include "../check.hpp"
#include "../tools/sandbox.hpp"
#include "onnx_models.hpp"

namespace fs = std::filesystem;
using namespace xgrad;
using test::check_error;

namespace {

constexpr int f32 = onnx::TensorProto::FLOAT;

// dir/model/m.onnx: x * w, w's 3 floats in external data at `location` (offset, length if set).
struct ExternalModel {
  fs::path root, dir;
  ExternalModel() {
    root = fs::path(XGRAD_TEST_OUTPUT) / ("onnx_limits_" + std::string(boost::unit_test::framework::current_test_case().p_name) +
                                          "_" + std::to_string(getpid()));
    fs::remove_all(root);
    dir = root / "model";
    fs::create_directories(dir / "sub");
    fs::create_directories(root / "outside");
    write(dir / "w.bin", {1.5f, -2.0f, 0.25f});
    write(root / "outside" / "secret.bin", {7.0f, 7.0f, 7.0f});
  }
  ~ExternalModel() { fs::remove_all(root); }
  static void write(const fs::path& p, const std::vector<float>& v) {
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), static_cast<long>(v.size() * 4));
  }
  std::string model(const std::string& location, const std::string& offset = "", const std::string& length = "") const {
    onnx::ModelProto m = test::onnx_model("Mul", {{"x", f32, {3}}}, {"x", "w"});
    onnx::TensorProto& w = test::add_initializer(m, "w", {0, 0, 0});
    test::make_external(w, location);
    for (const auto& [key, value] : {std::pair{"offset", offset}, {"length", length}}) {
      if (value.empty()) continue;
      auto* kv = w.add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    }
    test::write_model(m, (dir / "m.onnx").string());
    return (dir / "m.onnx").string();
  }
  OnnxImportOptions options() const {
    OnnxImportOptions o;
    o.inputs["x"] = {"float32", xt::xarray<double>{2.0, 2.0, 2.0}, {}};
    return o;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(onnx_import_limits)

BOOST_AUTO_TEST_CASE(external_data_through_a_symbolic_link_out_of_the_directory_is_refused) {
  // ONNX's CVE-2024-27318: a link beside the model to a file elsewhere, a path through a link
  // to a directory elsewhere.
  const ExternalModel m;
  fs::create_symlink(m.root / "outside" / "secret.bin", m.dir / "leak.bin");
  fs::create_directory_symlink(m.root / "outside", m.dir / "linked");
  for (const char* location : {"leak.bin", "linked/secret.bin"}) {
    BOOST_TEST_CONTEXT(location) {
      check_error([&] { import_onnx<float>(m.model(location), m.options()); },
                  {"m.onnx: initializer 'w': external data location '" + std::string(location) + "': a symbolic link"});
    }
  }
  // A link that stays in the model's directory is read (openat2 checks where it leads).
  fs::create_symlink("sub/w.bin", m.dir / "alias.bin");
  fs::copy_file(m.dir / "w.bin", m.dir / "sub" / "w.bin");
  const auto g = import_onnx<float>(m.model("alias.bin"), m.options());
  BOOST_TEST((g->var(g->outputs().at("y")).value() == xt::xarray<float>{3.0f, -4.0f, 0.5f}));
}

BOOST_AUTO_TEST_CASE(external_data_refusals_name_the_model_the_initializer_and_the_location) {
  const ExternalModel m;
  BOOST_TEST_REQUIRE(mkfifo((m.dir / "fifo.bin").c_str(), 0600) == 0);
  check_error([&] { import_onnx<float>(m.model("fifo.bin"), m.options()); },
              {"m.onnx: initializer 'w': external data location 'fifo.bin': a FIFO, not a regular file"});
  check_error([&] { import_onnx<float>(m.model("sub"), m.options()); },
              {"m.onnx: initializer 'w': external data location 'sub': a directory, not a regular file"});
  fs::create_symlink("/dev/zero", m.dir / "zero.bin");
  check_error([&] { import_onnx<float>(m.model("zero.bin"), m.options()); },
              {"m.onnx: initializer 'w': external data location 'zero.bin': a symbolic link"});
  check_error([&] { import_onnx<float>(m.model("none.bin"), m.options()); },
              {"m.onnx: initializer 'w': external data location 'none.bin': no such file in"});
}

BOOST_AUTO_TEST_CASE(external_data_reads_only_the_tensors_bytes) {
  // A (3,) float tensor beside a 1 GiB file (sparse: it takes no disk): without a length its data
  // runs to the end of the file, 1 GiB for 12 bytes, refused before reading; with an offset and a
  // length only those 12 bytes are read.
  const ExternalModel m;
  const fs::path big = m.dir / "big.bin";
  { std::ofstream(big, std::ios::binary) << ""; }
  fs::resize_file(big, std::size_t(1) << 30);
  {
    std::fstream f(big, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(1000);
    const float w[3] = {4.0f, 5.0f, 6.0f};
    f.write(reinterpret_cast<const char*>(w), 12);
  }
  check_error([&] { import_onnx<float>(m.model("big.bin"), m.options()); },
              {"m.onnx: initializer 'w': external data location 'big.bin': shape (3,) of float32 needs 12 bytes of data, "
               "the external data range 0+1073741824 has 1073741824"});
  const auto g = import_onnx<float>(m.model("big.bin", "1000", "12"), m.options());
  BOOST_TEST((g->var(g->outputs().at("y")).value() == xt::xarray<float>{8.0f, 10.0f, 12.0f}));
  check_error([&] { import_onnx<float>(m.model("w.bin", "8", "12"), m.options()); },
              {"m.onnx: initializer 'w': external data location 'w.bin': bytes 8+12 lie beyond its end (12 bytes)"});
  check_error([&] { import_onnx<float>(m.model("w.bin", "13"), m.options()); },
              {"external data location 'w.bin': offset 13 lies beyond its end (12 bytes)"});
}

BOOST_AUTO_TEST_CASE(the_work_budget_covers_every_node_before_it_runs) {
  // 100 ReduceSum nodes over a declared (1024, 1024) input: each costs its input's 2^20 element
  // visits; a budget of 10^7 admits 9 of them and refuses the next before it runs.
  onnx::ModelProto m = test::empty_model({{"x", f32, {1024, 1024}}});
  for (int i = 0; i < 100; ++i) test::add_node(m, "ReduceSum", {"x"}, {i == 99 ? "y" : "r" + std::to_string(i)});
  const std::string path = std::string(XGRAD_TEST_OUTPUT) + "/reduce_sums.onnx";
  test::write_model(m, path);
  OnnxImportOptions o;
  o.max_work = 1e7;
  check_error([&] { import_onnx<float>(path, o); },
              {"reduce_sums.onnx: node 9 '' (ReduceSum, domain ai.onnx, opset 17): ",
               "computing the graph takes more than 10000000 element visits (Op::work), the most this import runs",
               "; raise it with OnnxImportOptions::max_work (xgrad import --max-work N)"});
  o.max_work = 2e8;
  const auto g = import_onnx<float>(path, o);
  BOOST_TEST(g->outputs().count("y") == 1u);
  // The backward nodes count too: the forward's 100 * (2^20 + 3) visits fit in 1.052e8, the
  // gradient's broadcast back to x (2^20 more) does not.
  o.max_work = 1.052e8;
  import_onnx<float>(path, o);
  o.gradients = true;
  check_error([&] { import_onnx<float>(path, o); }, {"computing the graph takes more than 105200000 element visits"});
  o.max_work = -1;
  check_error([&] { import_onnx<float>(path, o); }, {"reduce_sums.onnx: OnnxImportOptions::max_work must be a finite number >= 0"});
}

BOOST_AUTO_TEST_CASE(the_work_budget_covers_values_computed_at_import) {
  // ConstantOfShape (1000, 1000), then Adds of known values, folded at import: no graph node
  // runs, the importer computes them itself, charged as it reads and writes them.
  onnx::ModelProto m = test::empty_model({});
  test::add_int64_constant(m, "shape", {1000, 1000});
  test::add_node(m, "ConstantOfShape", {"shape"}, {"c"});
  test::add_node(m, "Add", {"c", "c"}, {"a1"});
  test::add_node(m, "Add", {"a1", "a1"}, {"a2"});
  test::add_node(m, "Add", {"a2", "a2"}, {"y"});
  const std::string path = std::string(XGRAD_TEST_OUTPUT) + "/folds.onnx";
  test::write_model(m, path);
  OnnxImportOptions o;
  o.max_work = 5e6;  // ConstantOfShape 1e6, the first Add 3e6, the second passes it
  check_error([&] { import_onnx<float>(path, o); },
              {"folds.onnx: node 3 '' (Add, domain ai.onnx, opset 17): computing the graph takes more than 5000000 element visits",
               "this Add computed at import"});
  o.max_work = 1e8;
  import_onnx<float>(path, o);
}

BOOST_AUTO_TEST_CASE(xgrad_import_takes_max_work) {
  test::Sandbox box;
  onnx::ModelProto m = test::empty_model({{"x", f32, {256, 256}}});
  for (int i = 0; i < 20; ++i) test::add_node(m, "ReduceSum", {"x"}, {i == 19 ? "y" : "r" + std::to_string(i)});
  test::write_model(m, box.path("m.onnx"));
  const test::Run refused = box.xgrad("import m.onnx --max-work 100000 -o g.json");
  BOOST_TEST(refused.rc == 2);
  BOOST_TEST(refused.err.find("computing the graph takes more than 100000 element visits") != std::string::npos, refused.err);
  BOOST_TEST(refused.err.find("xgrad import --max-work N") != std::string::npos, refused.err);
  BOOST_TEST(!fs::exists(box.dir / "g.json"));
  const test::Run ok = box.xgrad("import m.onnx --max-work 2e6 -o g.json");
  BOOST_TEST(ok.rc == 0, ok.err);
  const test::Run bad = box.xgrad("import m.onnx --max-work -1 -o g.json");
  BOOST_TEST(bad.rc == 2);
  BOOST_TEST(bad.err.find("--max-work needs a number") != std::string::npos, bad.err);
}

BOOST_AUTO_TEST_SUITE_END()
