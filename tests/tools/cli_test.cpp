// The xgrad binary run as scripts run it: exit codes, stdout, stderr and the files it writes.
#include "../check.hpp"

#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

struct Run {
  int rc;
  std::string out, err;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh directory per test case, removed at the end.
struct Sandbox {
  fs::path dir;
  Sandbox() {
    dir = fs::temp_directory_path() /
          ("xgrad_cli_" + std::string(boost::unit_test::framework::current_test_case().p_name.get()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    // The documented example as JSON files.
    write_text(dir / "q.json", "[[0.6931471805599453], [0]]");
    write_text(dir / "k.json", "[[1], [0]]");
    write_text(dir / "v.json", "[[3, 0], [0, 6]]");
  }
  ~Sandbox() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }

  // Runs `xgrad <args>` in the sandbox directory.
  Run xgrad(const std::string& args) const {
    const std::string cmd = "cd '" + dir.string() + "' && '" XGRAD_TOOL "' " + args + " > .stdout 2> .stderr";
    const int status = std::system(cmd.c_str());
    Run r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(dir / ".stdout"), read_text(dir / ".stderr")};
    fs::remove(dir / ".stdout");
    fs::remove(dir / ".stderr");
    return r;
  }
  std::size_t files() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
  }
};

// The library's answer for the documented example, to compare the tool with.
template <class T>
std::vector<xt::xarray<T>> expected_results(const xt::xarray<double>* grad_out = nullptr) {
  Graph<T> g;
  const auto q = g.input("q", {{static_cast<T>(std::log(2.0))}, {T(0)}});
  const auto k = g.input("k", {{T(1)}, {T(0)}});
  const auto v = g.input("v", {{T(3), T(0)}, {T(0), T(6)}});
  const auto out = attention(q, k, v);
  const auto grads = grad_out ? grad(out, {q, k, v}, xt::xarray<T>(xt::cast<T>(*grad_out))) : grad(out, {q, k, v});
  return {out.value(), grads[0].value(), grads[1].value(), grads[2].value()};
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

}  // namespace

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(attention_prints_one_json_object) {
  Sandbox s;
  const Run r = s.xgrad("attention --q q.json --k k.json --v v.json");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(r.err.empty());
  const Json j = Json::parse(r.out);
  const auto expected = expected_results<double>();
  const char* names[] = {"output", "grad_q", "grad_k", "grad_v"};
  BOOST_TEST(j.size() == 4u);
  for (int i = 0; i < 4; ++i) {
    BOOST_TEST(parse_json_array(j[names[i]].dump(), names[i]).values == expected[static_cast<std::size_t>(i)], names[i]);
  }
}

BOOST_AUTO_TEST_CASE(attention_writes_npy_files_in_the_inputs_dtype) {
  Sandbox s;
  // float32 .npy inputs: the computation and the outputs are float32.
  write_npy(s.path("q.npy"), matrix<float>({{std::log(2.0f)}, {0.0f}}));
  write_npy(s.path("k.npy"), matrix<float>({{1.0f}, {0.0f}}));
  write_npy(s.path("v.npy"), xt::xarray<float>{{3.0f, 0.0f}, {0.0f, 6.0f}});
  const Run r = s.xgrad("attention --q q.npy --k k.npy --v v.npy --out results");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(r.out.empty());
  const auto expected = expected_results<float>();
  const char* names[] = {"output", "grad_q", "grad_k", "grad_v"};
  for (int i = 0; i < 4; ++i) {
    const StoredArray a = read_npy(s.path(std::string("results/") + names[i] + ".npy"));
    BOOST_TEST(a.dtype == "float32");
    BOOST_TEST(a.values == xt::xarray<double>(xt::cast<double>(expected[static_cast<std::size_t>(i)])), names[i]);
  }
  BOOST_TEST(std::distance(fs::directory_iterator(s.dir / "results"), fs::directory_iterator()) == 4);
  // --dtype overrides the files' dtype.
  const Run r64 = s.xgrad("attention --q q.npy --k k.npy --v v.npy --dtype float64 --out r64");
  BOOST_TEST_REQUIRE(r64.rc == 0, r64.err);
  BOOST_TEST(read_npy(s.path("r64/output.npy")).dtype == "float64");
}

BOOST_AUTO_TEST_CASE(attention_takes_a_grad_output) {
  Sandbox s;
  write_text(s.dir / "g.json", "[[1, -2], [0.5, 0]]");
  const Run r = s.xgrad("attention --q q.json --k k.json --v v.json --grad-output g.json");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const xt::xarray<double> g = {{1, -2}, {0.5, 0}};
  const auto expected = expected_results<double>(&g);
  BOOST_TEST(parse_json_array(Json::parse(r.out)["grad_k"].dump(), "grad_k").values == expected[2]);
  write_text(s.dir / "bad_g.json", "[[1, 2, 3]]");
  const Run bad = s.xgrad("attention --q q.json --k k.json --v v.json --grad-output bad_g.json");
  BOOST_TEST(bad.rc == 2);
  BOOST_TEST(bad.err.find("xgrad attention: bad_g.json: grad: grad_out is (1, 3)") != std::string::npos, bad.err);
}

BOOST_AUTO_TEST_CASE(bad_usage_and_input_exit_2_with_one_line) {
  Sandbox s;
  write_text(s.dir / "k3.json", "[[1, 2, 3], [0, 0, 0]]");
  write_text(s.dir / "broken.json", "[[1, 2");
  write_text(s.dir / "broken.npy", "\x93NUMPY\x01\x00\xff\xff");
  const std::pair<std::string, std::string> cases[] = {
      {"attention --q q.json --k k3.json --v v.json", "xgrad attention: q.json, k3.json, v.json: attention: d_k differs"},
      {"attention --q missing.npy --k k.json --v v.json", "xgrad attention: missing.npy: no such file"},
      {"attention --q broken.json --k k.json --v v.json", "xgrad attention: broken.json: not JSON"},
      {"attention --q broken.npy --k k.json --v v.json", "xgrad attention: broken.npy: too short"},
      {"attention --q q.txt --k k.json --v v.json", "q.txt: unknown array file type"},
      {"attention --q q.json --k k.json", "missing --v"},
      {"attention --q q.json --k k.json --v v.json --frob", "unknown option '--frob'"},
      {"attention --q q.json --q q.json --k k.json --v v.json", "option --q given twice"},
      {"attention --q q.json --k k.json --v v.json --dtype half", "--dtype must be float32|float64, not 'half'"},
      {"attention --q q.json --k k.json --v v.json --out", "option --out needs a value"},
      {"gradcheck --shape 2,3", "--shape needs TQ,TK,DK,DV"},
      {"gradcheck --shape 2,x,3,4", "--shape needs a non-negative integer, got 'x'"},
      {"gradcheck --shape 2,3,2,2 --q q.json", "either --q --k --v or --shape"},
      {"gradcheck --shape 2,0,2,2", "T_k = 0"},
      {"export --q q.json --k k.json --v v.json --format svg", "--format must be json|dot"},
      {"export --shape 1,1,1,1 --format dot --values all", "--values applies to --format json only"},
      {"replay", "missing GRAPH.json"},
      {"replay missing.json", "missing.json: no such file"},
      {"replay .", ".: not a regular file"},
      {"replay /dev/zero", "/dev/zero: not a regular file"},
      {"example --dtype float64 --dtype float32", "option --dtype given twice"},
      {"gradcheck --shape 100000,2,2,2", "larger than 65536"},
      {"gradcheck --shape 30000,30000,1,1", "--shape 30000,30000,1,1: attention would build (30000, 30000) score arrays"},
      {"replay broken.json", "broken.json: graph JSON: not JSON"},
      {"gradcheck --shape 2,3,4,2 --impl flash", "--impl must be composed|fused, not 'flash'"},
      {"attention --q q.json --k k3.json --v v.json --impl fused", "xgrad attention: q.json, k3.json, v.json: attention: d_k differs"},
  };
  for (const auto& [args, message] : cases) {
    const Run r = s.xgrad(args);
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(r.rc == 2);
      BOOST_TEST(one_line(r.err), r.err);
      BOOST_TEST(r.err.find(message) != std::string::npos, r.err);
      BOOST_TEST(r.out.empty());
    }
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_passes_and_reports_each_input) {
  Sandbox s;
  for (const std::string args : {"gradcheck --shape 3,4,2,5 --seed 7", "gradcheck --shape 2,3,4,2 --dtype float32",
                                 "gradcheck --q q.json --k k.json --v v.json", "gradcheck --shape 20,30,16,8"}) {
    const Run r = s.xgrad(args);
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(r.rc == 0, r.out << r.err);
      BOOST_TEST(r.out.find(": PASS\n") != std::string::npos, r.out);
      for (const char* input : {"\n  q ", "\n  k ", "\n  v "}) BOOST_TEST(r.out.find(input) != std::string::npos);
    }
  }
  BOOST_TEST(s.xgrad("gradcheck --shape 20,30,16,8").out.find("random projections") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(gradcheck_fails_with_exit_1) {
  // A NaN input makes every derivative NaN, which no tolerance accepts.
  Sandbox s;
  write_text(s.dir / "nan.json", "[[\"nan\"], [0]]");
  const Run r = s.xgrad("gradcheck --q nan.json --k k.json --v v.json");
  BOOST_TEST(r.rc == 1, r.err);
  BOOST_TEST(r.out.find(": FAIL\n") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("<- FAIL") != std::string::npos, r.out);
}

BOOST_AUTO_TEST_CASE(export_and_replay_round_trip) {
  Sandbox s;
  for (const char* dtype : {"float32", "float64"}) {
    const Run e = s.xgrad(std::string("export --shape 3,4,2,5 --seed 3 --dtype ") + dtype + " -o g.json");
    BOOST_TEST_REQUIRE(e.rc == 0, e.err);
    BOOST_TEST(e.out.empty());
    const Run r = s.xgrad("replay g.json");
    BOOST_TEST(r.rc == 0, r.out << r.err);
    BOOST_TEST(r.out.find("replayed 16 nodes (" + std::string(dtype) + "); 16 stored values reproduced bit for bit") !=
               std::string::npos, r.out);
  }
  // stdout and -o give the same text; --no-backward and --values change it as documented.
  BOOST_TEST(s.xgrad("export --shape 3,4,2,5 --seed 3 --dtype float64").out == read_text(s.dir / "g.json"));
  const Json forward = Json::parse(s.xgrad("export --shape 3,4,2,5 --no-backward --values none").out);
  BOOST_TEST(forward["nodes"].size() == 8u);
  BOOST_TEST(forward["grads"].empty());
  for (const auto& n : forward["nodes"]) BOOST_TEST(!n.contains("value"));
}

BOOST_AUTO_TEST_CASE(fused_attention_through_the_tool) {
  // The same numbers as the composed graph, a gradcheck that passes, an export that replays.
  Sandbox s;
  const Json composed = Json::parse(s.xgrad("attention --q q.json --k k.json --v v.json").out);
  const Json fused = Json::parse(s.xgrad("attention --q q.json --k k.json --v v.json --impl fused").out);
  for (const char* key : {"output", "grad_q", "grad_k", "grad_v"}) {
    const auto a = composed[key].get<std::vector<std::vector<double>>>(), b = fused[key].get<std::vector<std::vector<double>>>();
    BOOST_TEST_REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      for (std::size_t j = 0; j < a[i].size(); ++j) BOOST_TEST(a[i][j] == b[i][j], boost::test_tools::tolerance(1e-12));
    }
  }
  const Run check = s.xgrad("gradcheck --shape 5,7,3,4 --impl fused");
  BOOST_TEST(check.rc == 0, check.out << check.err);
  BOOST_TEST(check.out.find(": PASS\n") != std::string::npos, check.out);
  const Run e = s.xgrad("export --shape 5,7,3,4 --seed 2 --dtype float32 --impl fused -o f.json");
  BOOST_TEST_REQUIRE(e.rc == 0, e.err);
  std::map<std::string, int> ops;
  const Json graph = Json::parse(read_text(s.dir / "f.json"));
  for (const auto& n : graph["nodes"]) ++ops[n["op"].get<std::string>()];
  BOOST_TEST(ops["flash_attention"] == 1);
  BOOST_TEST(ops["flash_attention_vjp"] == 1);
  BOOST_TEST(ops["softmax"] == 0);
  const Run r = s.xgrad("replay f.json");
  BOOST_TEST(r.rc == 0, r.out << r.err);
  BOOST_TEST(r.out.find("stored values reproduced bit for bit") != std::string::npos, r.out);
}

BOOST_AUTO_TEST_CASE(replay_names_the_first_node_that_differs) {
  Sandbox s;
  BOOST_TEST_REQUIRE(s.xgrad("export --q q.json --k k.json --v v.json -o g.json").rc == 0);
  Json j = Json::parse(read_text(s.dir / "g.json"));
  j["nodes"][6]["value"]["data"][1] = 0.25;  // the weights, softmax's output
  write_text(s.dir / "tampered.json", j.dump());
  const Run r = s.xgrad("replay tampered.json");
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(r.out.find("node 6 (softmax) differs at [0, 1]: stored 0.25, replayed 0.3333") != std::string::npos, r.out);
  j["nodes"][6]["inputs"] = {7};
  write_text(s.dir / "invalid.json", j.dump());
  const Run bad = s.xgrad("replay invalid.json");
  BOOST_TEST(bad.rc == 2);
  BOOST_TEST(bad.err.find("invalid.json: graph JSON: nodes[6].inputs[0]: refers to node 7") != std::string::npos, bad.err);
}

BOOST_AUTO_TEST_CASE(outputs_are_whole_or_absent_and_never_over_inputs) {
  Sandbox s;
  const std::string q_before = read_text(s.dir / "q.json");
  const Run over = s.xgrad("export --q q.json --k k.json --v v.json -o q.json");
  BOOST_TEST(over.rc == 2);
  BOOST_TEST(over.err.find("q.json: is an input file; refusing to overwrite it") != std::string::npos, over.err);
  BOOST_TEST(read_text(s.dir / "q.json") == q_before);
  // An input inside the output directory, under an output's name: no output is written at all.
  fs::create_directories(s.dir / "out");
  write_npy(s.path("out/grad_v.npy"), matrix<double>({{3, 0}, {0, 6}}));
  const std::string v_before = read_text(s.dir / "out" / "grad_v.npy");
  const Run inside = s.xgrad("attention --q q.json --k k.json --v out/grad_v.npy --out out");
  BOOST_TEST(inside.rc == 2);
  BOOST_TEST(inside.err.find("out/grad_v.npy: is an input file") != std::string::npos, inside.err);
  BOOST_TEST(read_text(s.dir / "out" / "grad_v.npy") == v_before);
  BOOST_TEST(std::distance(fs::directory_iterator(s.dir / "out"), fs::directory_iterator()) == 1);
  // A write that cannot happen leaves nothing behind.
  const std::size_t before = s.files();
  const Run nowhere = s.xgrad("export --shape 2,2,2,2 -o no/such/dir/g.json");
  BOOST_TEST(nowhere.rc == 2);
  BOOST_TEST(nowhere.err.find("no/such/dir/g.json") != std::string::npos, nowhere.err);
  BOOST_TEST(s.files() == before);
  // Replacing an existing output is atomic: the old file stays until the new one is complete.
  BOOST_TEST_REQUIRE(s.xgrad("export --shape 2,2,2,2 -o g.json").rc == 0);
  BOOST_TEST_REQUIRE(s.xgrad("export --shape 2,2,2,2 --seed 1 -o g.json").rc == 0);
  BOOST_TEST(s.xgrad("replay g.json").rc == 0);
  BOOST_TEST(s.files() == before + 1);  // no temporary files left
}

BOOST_AUTO_TEST_CASE(inspect_prints_softmax_diagnostics) {
  Sandbox s;
  BOOST_TEST_REQUIRE(s.xgrad("export --q q.json --k k.json --v v.json -o g.json").rc == 0);
  const Run table = s.xgrad("inspect g.json");
  BOOST_TEST(table.rc == 0, table.err);
  BOOST_TEST(table.out.find("g.json: 1 softmax node (float64)") != std::string::npos, table.out);
  BOOST_TEST(table.out.find("0.5/0.583/0.667") != std::string::npos, table.out);  // max weights 2/3 and 1/2
  BOOST_TEST(table.out.find("(node 11)") != std::string::npos, table.out);        // gains from softmax_vjp
  const Json j = Json::parse(s.xgrad("inspect g.json --format json --threshold 0.6").out);
  BOOST_TEST(j[0]["saturated_fraction"] == 0.5);  // 2/3 >= 0.6, 1/2 is not
  BOOST_TEST(j[0]["per_row"]["max_weight"].size() == 2u);
  const std::string csv = s.xgrad("inspect g.json --format csv").out;
  BOOST_TEST(std::count(csv.begin(), csv.end(), '\n') == 2);
  BOOST_TEST(csv.find("\n6,1,2,2,") != std::string::npos, csv);
  BOOST_TEST_REQUIRE(s.xgrad("export --q q.json --k k.json --v v.json --no-backward -o f.json").rc == 0);
  BOOST_TEST(s.xgrad("inspect f.json").out.find("- (no backward pass)") != std::string::npos);
  BOOST_TEST_REQUIRE(s.xgrad("export --q q.json --k k.json --v v.json --values none -o none.json").rc == 0);
  const Run none = s.xgrad("inspect none.json");
  BOOST_TEST(none.rc == 2);
  BOOST_TEST(none.err.find("none.json: node 0 ('q') has no stored value") != std::string::npos, none.err);
  const Run bad = s.xgrad("inspect g.json --threshold 2");
  BOOST_TEST(bad.rc == 2);
  BOOST_TEST(bad.err.find("--threshold must be a number in (0, 1], not '2'") != std::string::npos, bad.err);
}

BOOST_AUTO_TEST_CASE(saturation_sweeps_and_plots) {
  Sandbox s;
  const Run j = s.xgrad("saturation --dk 1,16,256 --trials 5 --seed 3 --format json --plot sweep.svg");
  BOOST_TEST_REQUIRE(j.rc == 0, j.err);
  const Json rows = Json::parse(j.out)["rows"];
  BOOST_TEST(rows.size() == 3u);
  BOOST_TEST(rows[2]["d_k"] == 256);
  BOOST_TEST(rows[2]["unscaled"]["max_weight"].get<double>() > rows[2]["scaled"]["max_weight"].get<double>());
  const std::string svg = read_text(s.dir / "sweep.svg");
  BOOST_TEST(svg.find("<svg") != std::string::npos);
  BOOST_TEST(svg.find("id=\"gradient_gain_unscaled\"") != std::string::npos);
  // Deterministic for a seed; table and csv formats.
  BOOST_TEST(s.xgrad("saturation --dk 1,16,256 --trials 5 --seed 3 --format json").out == j.out);
  BOOST_TEST(s.xgrad("saturation --dk 4 --trials 2").out.find("score variance") != std::string::npos);
  BOOST_TEST(s.xgrad("saturation --dk 4 --trials 2 --format csv").out.rfind("d_k,scaled_score_variance", 0) == 0u);
  for (const char* args : {"saturation --dk 0", "saturation --dk 4,x", "saturation --trials 0", "saturation --format xml"}) {
    const Run r = s.xgrad(args);
    BOOST_TEST(r.rc == 2, args);
    BOOST_TEST(one_line(r.err), args << ": " << r.err);
  }
}

BOOST_AUTO_TEST_CASE(failing_stdout_is_an_error) {
  Sandbox s;
  for (const char* args : {"export --shape 3,3,3,3", "attention --q q.json --k k.json --v v.json", "example"}) {
    const std::string cmd = "cd '" + s.dir.string() + "' && '" XGRAD_TOOL "' " + args + " > /dev/full 2> err.txt";
    const int status = std::system(cmd.c_str());
    BOOST_TEST(WEXITSTATUS(status) == 2, args);
    BOOST_TEST(read_text(s.dir / "err.txt").find("cannot write to standard output") != std::string::npos, args);
  }
}

BOOST_AUTO_TEST_CASE(float32_inputs_out_of_range_are_refused) {
  Sandbox s;
  write_text(s.dir / "big.json", "[[1e300], [0]]");
  const Run r = s.xgrad("attention --q big.json --k k.json --v v.json --dtype float32");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("big.json: the value 1.0000000000000001e+300") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("at [0, 0] is outside the range of float32") != std::string::npos, r.err);
  BOOST_TEST(s.xgrad("attention --q big.json --k k.json --v v.json").rc == 0);  // fine in float64
}

BOOST_AUTO_TEST_CASE(help_is_an_option_not_a_value) {
  Sandbox s;
  const Run help = s.xgrad("export --shape 1,1,1,1 --help");
  BOOST_TEST(help.rc == 0);
  BOOST_TEST(help.out.rfind("usage: xgrad export", 0) == 0u);
  const Run value = s.xgrad("export --shape 1,1,1,1 -o --help");
  BOOST_TEST(value.rc == 0, value.err);
  BOOST_TEST(fs::exists(s.dir / "--help"));  // a file named --help, as asked
  for (const char* cmd : {"example", "attention", "gradcheck", "export", "replay", "inspect", "saturation"}) {
    const Run r = s.xgrad(std::string(cmd) + " --help");
    BOOST_TEST(r.rc == 0, cmd);
    BOOST_TEST(r.out.rfind(std::string("usage: xgrad ") + cmd, 0) == 0u, cmd);
  }
}

BOOST_AUTO_TEST_CASE(dot_export_renders_with_graphviz) {
  Sandbox s;
  BOOST_TEST_REQUIRE(s.xgrad("export --q q.json --k k.json --v v.json --format dot -o g.dot").rc == 0);
  const std::string cmd = "dot -Tsvg '" + s.path("g.dot") + "' -o '" + s.path("g.svg") + "'";
  BOOST_TEST_REQUIRE(std::system(cmd.c_str()) == 0, "graphviz's dot failed or is missing (tools/setup test installs it)");
  const std::string svg = read_text(s.dir / "g.svg");
  BOOST_TEST(svg.find("<svg") != std::string::npos);
  BOOST_TEST(svg.find("softmax_vjp") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
