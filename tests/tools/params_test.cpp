// `xgrad params` run as a script runs it: the listing of a checkpoint, exit codes, one line on
// stderr for bad input.
#include "../check.hpp"
#include "sandbox.hpp"

#include <filesystem>

BOOST_AUTO_TEST_SUITE(params_cli)

// The example of docs/cli.md, verbatim.
BOOST_AUTO_TEST_CASE(lists_tensors_and_metadata) {
  Sandbox s;
  xgrad::save_tensors(s.path("model.safetensors"), std::map<std::string, xt::xarray<double>>{{"w", {{1, 2, 3}, {4, 5, 6}}}},
                      {{"config", "{\"d_model\": 4}"}});
  // A float32 tensor beside a float64 one: write them with the lower level, then join the files.
  const std::string f32 = xgrad::checkpoint_bytes(std::map<std::string, xt::xarray<float>>{{"b", {0.5f, -0.25f}}}, {},
                                                  xgrad::CheckpointFormat::safetensors, "b");
  const std::string f64 = read_text(s.path("model.safetensors"));
  // One header for both: b's 8 bytes first, then w's 48.
  const std::string header =
      R"({"__metadata__":{"config":"{\"d_model\": 4}"},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("w":{"dtype":"F64","shape":[2,3],"data_offsets":[8,56]}})";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  file += header + f32.substr(f32.size() - 8) + f64.substr(f64.size() - 48);
  std::ofstream(s.path("model.safetensors"), std::ios::binary) << file;
  const Run r = s.xgrad("params model.safetensors");
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(r.out ==
             "model.safetensors: safetensors, 2 tensors, 8 elements, 1 metadata entry\n"
             "b  float32  (2,)    min -0.25  mean 0.125  max 0.5\n"
             "w  float64  (2, 3)  min 1      mean 3.5    max 6\n"
             "metadata \"config\": \"{\\\"d_model\\\": 4}\"\n");
  std::ifstream doc(XGRAD_DOCS "/cli.md");
  std::ostringstream text;
  text << doc.rdbuf();
  BOOST_TEST(text.str().find("$ xgrad params model.safetensors\n" + r.out) != std::string::npos,
             "docs/cli.md's example differs from:\n" << r.out);
}

BOOST_AUTO_TEST_CASE(lists_npz_files_nan_and_empty_tensors) {
  Sandbox s;
  xgrad::save_tensors(s.path("m.npz"), std::map<std::string, xt::xarray<double>>{
                                           {"a", {1.0, std::nan("")}}, {"e", xt::xarray<double>::from_shape({0, 2})}});
  const Run r = s.xgrad("params m.npz");
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(r.out ==
             "m.npz: npz, 2 tensors, 2 elements, 0 metadata entries\n"
             "a  float64  (2,)    min nan  mean nan  max nan\n"
             "e  float64  (0, 2)  min -    mean -    max -\n");
  const Run fixture = s.xgrad("params '" XGRAD_TEST_DATA "/checkpoint/savez_compressed.npz'");
  BOOST_TEST(fixture.rc == 0, fixture.err);
  BOOST_TEST(fixture.out.find("b   float32  (4,)    min -2.25") != std::string::npos, fixture.out);
}

BOOST_AUTO_TEST_CASE(bad_usage_and_input_exit_2_with_one_line) {
  Sandbox s;
  std::ofstream(s.path("short.safetensors"), std::ios::binary) << "abc";
  std::ofstream(s.path("bad.npz"), std::ios::binary) << std::string(40, 'x');
  const std::pair<std::string, std::string> cases[] = {
      {"params", "xgrad params: missing FILE (a .safetensors or .npz checkpoint) (see xgrad params --help)"},
      {"params a.safetensors b.safetensors", "xgrad params: unexpected argument 'b.safetensors'"},
      {"params --frob", "xgrad params: unknown option '--frob'"},
      {"params none.npz", "xgrad params: none.npz: no such file"},
      {"params model.ckpt", "xgrad params: model.ckpt: unknown checkpoint type"},
      {"params short.safetensors", "xgrad params: short.safetensors: too short for a safetensors file (3 bytes"},
      {"params bad.npz", "xgrad params: bad.npz: not a readable zip archive (.npz)"},
  };
  for (const auto& [args, message] : cases) {
    const Run r = s.xgrad(args);
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(r.rc == 2);
      BOOST_TEST(one_line(r.err), r.err);
      BOOST_TEST(r.err.rfind(message, 0) == 0, r.err);
      BOOST_TEST(r.out.empty());
    }
  }
  const Run help = s.xgrad("params --help");
  BOOST_TEST(help.rc == 0);
  BOOST_TEST(help.out.find("usage: xgrad params FILE.safetensors|FILE.npz") == 0u, help.out);
  BOOST_TEST(s.xgrad("--help").out.find("params") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
