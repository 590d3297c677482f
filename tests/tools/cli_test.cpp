// The xgrad binary run as scripts run it: exit codes, stdout, stderr and the files it writes.
#include "../check.hpp"
#include "../saturating_head.hpp"
#include "sandbox.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <xtensor/xview.hpp>

namespace fs = std::filesystem;

namespace {

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

// Each `xgrad <args>` exits 2 with one line on stderr that holds its message, and prints nothing.
template <class Cases>
void check_refused(const Sandbox& s, const Cases& cases, const std::string& suffix = "") {
  for (const auto& [args, message] : cases) {
    const Run r = s.xgrad(args);
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(r.rc == 2);
      BOOST_TEST(one_line(r.err), r.err);
      BOOST_TEST(r.err.find(message + suffix) != std::string::npos, r.err);
      BOOST_TEST(r.out.empty());
    }
  }
}

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
      {"gradcheck --shape 2,x,3,4", "--shape needs an integer from 0 to 65536, not 'x'"},
      {"gradcheck --shape 2,3,2,2 --q q.json", "either --q --k --v or --shape"},
      {"gradcheck --shape 2,0,2,2", "T_k = 0"},
      {"export --q q.json --k k.json --v v.json --format svg", "--format must be json|dot"},
      {"export --shape 1,1,1,1 --format dot --values all", "--values applies to --format json only"},
      {"replay", "missing GRAPH.json"},
      {"replay missing.json", "missing.json: no such file"},
      {"replay .", ".: a directory, not a regular file"},
      {"replay /dev/zero", "/dev/zero: a device, not a regular file"},
      {"example --dtype float64 --dtype float32", "option --dtype given twice"},
      {"gradcheck --shape 100000,2,2,2", "--shape needs an integer from 0 to 65536, not '100000'"},
      {"gradcheck --shape 30000,30000,1,1", "--shape 30000,30000,1,1: attention would build (30000, 30000) score arrays"},
      {"replay broken.json", "broken.json: graph JSON: not JSON"},
      {"gradcheck --shape 2,3,4,2 --impl flash", "--impl must be composed|fused, not 'flash'"},
      {"attention --q q.json --k k3.json --v v.json --impl fused", "xgrad attention: q.json, k3.json, v.json: attention: d_k differs"},
  };
  check_refused(s, cases);
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
  j["nodes"][6]["outputs"][0]["data"][1] = 0.25;  // the weights, softmax's output
  write_text(s.dir / "tampered.json", j.dump());
  const Run r = s.xgrad("replay tampered.json");
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(r.out.find("node 6 (softmax) differs at [0, 1]: stored 0.25, replayed 0.3333") != std::string::npos, r.out);
  j["nodes"][6]["inputs"] = {{7, 0}};
  write_text(s.dir / "invalid.json", j.dump());
  const Run bad = s.xgrad("replay invalid.json");
  BOOST_TEST(bad.rc == 2);
  BOOST_TEST(bad.err.find("invalid.json: graph JSON: nodes[6].inputs[0][0]: refers to node 7") != std::string::npos, bad.err);
}

BOOST_AUTO_TEST_CASE(outputs_are_whole_or_absent_and_never_over_inputs) {
  Sandbox s;
  const std::string q_before = read_text(s.dir / "q.json");
  const Run over = s.xgrad("export --q q.json --k k.json --v v.json -o q.json");
  BOOST_TEST(over.rc == 2);
  BOOST_TEST(over.err.find("q.json: is the input") != std::string::npos, over.err);
  BOOST_TEST(read_text(s.dir / "q.json") == q_before);
  // An input inside the output directory, under an output's name: no output is written at all.
  fs::create_directories(s.dir / "out");
  write_npy(s.path("out/grad_v.npy"), matrix<double>({{3, 0}, {0, 6}}));
  const std::string v_before = read_text(s.dir / "out" / "grad_v.npy");
  const Run inside = s.xgrad("attention --q q.json --k k.json --v out/grad_v.npy --out out");
  BOOST_TEST(inside.rc == 2);
  BOOST_TEST(inside.err.find("out/grad_v.npy: is the input") != std::string::npos, inside.err);
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
  BOOST_TEST(bad.err.find("--threshold needs a number in (0, 1], not '2'") != std::string::npos, bad.err);
}

BOOST_AUTO_TEST_CASE(inspect_by_axis_names_the_saturated_head) {
  Sandbox s;
  {
    // (B, H, T, T) attention in scope enc.l0.attn, head 1 of 3 made to saturate (queries x30).
    Graph<double> g;
    test::saturating_head(g, 1);
    write_text(s.dir / "h.json", to_json(g, ExportValues::all).dump());
  }
  const Run table = s.xgrad("inspect h.json --by-axis 1");
  BOOST_TEST_REQUIRE(table.rc == 0, table.err);
  BOOST_TEST(table.out.find("one line per index along axis 1") != std::string::npos, table.out);
  BOOST_TEST(std::count(table.out.begin(), table.out.end(), '\n') == 5, table.out);  // title, header, 3 heads
  BOOST_TEST(table.out.find("enc.l0.attn") != std::string::npos, table.out);
  // The CSV's most saturated line is head 1's.
  const std::string csv = s.xgrad("inspect h.json --by-axis 1 --format csv").out;
  std::istringstream lines(csv);
  std::string line, header, worst;
  std::getline(lines, header);
  BOOST_TEST(header.find(",scope,group_axis,index,masked_rows,rows_without_gradient,in_backward") != std::string::npos);
  double most = -1;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    std::vector<std::string> cells;
    std::istringstream cell(line);
    for (std::string c; std::getline(cell, c, ',');) cells.push_back(c);
    BOOST_TEST_REQUIRE(cells.size() == 30u, line);
    BOOST_TEST(cells[24] == "enc.l0.attn");
    BOOST_TEST(cells[25] == "1");
    if (std::stod(cells[5]) > most) {
      most = std::stod(cells[5]);
      worst = cells[26];
    }
  }
  BOOST_TEST(count == 3);
  BOOST_TEST(worst == "1");
  const Json j = Json::parse(s.xgrad("inspect h.json --by-axis 1 --format json").out);
  BOOST_TEST(j[0]["row_shape"] == Json::array({2, 3, 4}));
  BOOST_TEST(j[0]["groups"].size() == 3u);
  BOOST_TEST(j[0]["groups"][1]["index"] == 1);
  // The DOT picture shades the node by its worst head.
  const Run dot = s.xgrad("export --graph h.json --format dot --by-axis 1");
  BOOST_TEST(dot.out.find("[1] = 1: ") != std::string::npos, dot.out);
  // An axis no softmax node has, or the softmax axis itself: exit 2 naming the node.
  for (const char* bad : {"3", "4"}) {
    const Run r = s.xgrad(std::string("inspect h.json --by-axis ") + bad);
    BOOST_TEST(r.rc == 2, bad);
    BOOST_TEST(r.err.find("--by-axis: softmax_diagnostics: group axis " + std::string(bad) +
                          " is an axis other than the softmax axis of no softmax node (node ") != std::string::npos, r.err);
    BOOST_TEST(one_line(r.err), r.err);
  }
  BOOST_TEST(s.xgrad("inspect h.json --by-axis x").rc == 2);
  BOOST_TEST(s.xgrad("export --graph h.json --by-axis 1").rc == 2);  // DOT only
}

BOOST_AUTO_TEST_CASE(inspect_leaves_out_a_backward_softmax_unless_all) {
  Sandbox s;
  {
    Graph<double> g;
    const auto x = g.input("x", random_array<double>({3, 5}, 1));
    {
      const auto scope = g.scope("l0,attn");  // a comma: the CSV quotes it
      softmax(x);
    }
    grad(log_softmax(x), {x}, xt::xarray<double>(random_array<double>({3, 5}, 2)));
    write_text(s.dir / "b.json", to_json(g, ExportValues::all).dump());
  }
  const Run model = s.xgrad("inspect b.json");
  BOOST_TEST_REQUIRE(model.rc == 0, model.err);
  BOOST_TEST(model.out.find("b.json: 1 softmax node (float64)") != std::string::npos, model.out);
  BOOST_TEST(model.out.find("(1 softmax node made by a backward pass left out; --all lists it)") != std::string::npos, model.out);
  const Run all = s.xgrad("inspect b.json --all");
  BOOST_TEST(all.out.find("b.json: 2 softmax nodes (float64)") != std::string::npos, all.out);
  BOOST_TEST(all.out.find("[in a backward pass]") != std::string::npos, all.out);
  BOOST_TEST(Json::parse(s.xgrad("inspect b.json --format json").out).size() == 1u);
  const Json j = Json::parse(s.xgrad("inspect b.json --format json --all").out);
  BOOST_TEST(j.size() == 2u);
  BOOST_TEST(j[1]["in_backward"] == true);
  const std::string csv = s.xgrad("inspect b.json --format csv").out;
  BOOST_TEST(csv.find(",\"l0,attn\",,,0,,0\n") != std::string::npos, csv);
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
  // Every command that prints, and every help text (issue 15: `xgrad --help > /dev/full` exited 0).
  Sandbox s;
  BOOST_TEST_REQUIRE(s.xgrad("export --shape 2,3,4,5 -o g.json").rc == 0);
  std::vector<std::string> all = {"--help", "-h", "help", "export --shape 3,3,3,3", "example", "gradcheck --shape 2,2,2,2",
                                  "attention --q q.json --k k.json --v v.json", "replay g.json", "inspect g.json",
                                  "inspect g.json --format json", "inspect g.json --format csv",
                                  "saturation --dk 4 --trials 1", "export --shape 1,1,1,1 --format dot"};
  for (const char* cmd : {"example", "attention", "gradcheck", "export", "replay", "inspect", "saturation"}) {
    all.push_back(std::string(cmd) + " --help");
  }
  for (const std::string& args : all) {
    const Run r = s.shell("exec '" XGRAD_TOOL "' " + args + " > /dev/full");
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(r.rc == 2);
      BOOST_TEST(one_line(r.err), r.err);
      BOOST_TEST(r.err.find("cannot write to standard output") != std::string::npos, r.err);
    }
  }
  // Usage on stderr without a command still exits 2, with the usage.
  const Run none = s.xgrad("");
  BOOST_TEST(none.rc == 2);
  BOOST_TEST(none.err.rfind("usage: xgrad", 0) == 0u, none.err);
}

// AddressSanitizer reserves terabytes of address space for its shadow memory, so a tool built
// with it cannot start under ulimit -v: the address-space cases are skipped in that build (the
// Release build runs them).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool address_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool address_sanitizer = true;
#else
constexpr bool address_sanitizer = false;
#endif
#else
constexpr bool address_sanitizer = false;
#endif

boost::test_tools::assertion_result can_limit_address_space(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(!address_sanitizer);
  r.message() << "the tool is built with AddressSanitizer, which cannot start under ulimit -v";
  return r;
}

// Issue 15, class 2: under an address-space limit the tool died of std::terminate (exit 134)
// because nlohmann/json allocates in its destructors while unwinding a std::bad_alloc.
BOOST_AUTO_TEST_CASE(out_of_memory_exits_2_with_one_line_and_no_output,
                     *boost::unit_test::precondition(can_limit_address_space)) {
  Sandbox s;
  // An 8 MB graph; the tool with OpenBLAS's buffer needs about 181 MB, parsing the graph about 40 MB more.
  BOOST_TEST_REQUIRE(s.shell("OPENBLAS_NUM_THREADS=1 exec '" XGRAD_TOOL "' export --shape 300,300,16,16 -o g.json").rc == 0);
  BOOST_TEST_REQUIRE(fs::file_size(s.dir / "g.json") > 8000000u);
  const std::set<std::string> before = s.entries();
  const std::tuple<std::string, long, std::string> cases[] = {
      {"replay g.json", 200000, "xgrad replay: out of memory while reading g.json\n"},
      {"inspect g.json", 200000, "xgrad inspect: out of memory while reading g.json\n"},
      {"export --shape 8192,8192,1,1 -o out.json", 400000, "xgrad export: out of memory while building the graph of --shape 8192,8192,1,1\n"},
      // Below what OpenBLAS's work buffer needs the tool stops at once (it used to hang in mmap).
      {"replay g.json", 100000, "xgrad replay: out of memory while starting (OpenBLAS needs a 128 MiB work buffer)\n"},
  };
  for (const auto& [args, kib, line] : cases) {
    const Run r = s.xgrad_limited(args, kib);
    BOOST_TEST_CONTEXT(args << " under " << kib << " KiB") {
      BOOST_TEST(r.rc == 2);
      BOOST_TEST(r.err == line);
      BOOST_TEST(r.out.empty());
      BOOST_TEST((s.entries() == before));  // no out.json, no temporary file
    }
  }
  // With enough memory the same commands succeed, so the limits above are what made them fail.
  BOOST_TEST(s.xgrad_limited("replay g.json", 400000).rc == 0);
}

// Several OpenBLAS threads under an address-space limit hung in OpenBLAS's mmap retry loop (at
// 220 MB on 2 threads) or stopped for want of memory (at 260 MB, where one thread runs): the tool
// runs again on one thread, says so, and gives the unlimited run's output.
BOOST_AUTO_TEST_CASE(a_memory_limit_runs_openblas_on_one_thread_with_a_message,
                     *boost::unit_test::precondition(can_limit_address_space)) {
  Sandbox s;
  const Run unlimited = s.shell("OPENBLAS_NUM_THREADS=2 exec '" XGRAD_TOOL "' example");
  BOOST_TEST_REQUIRE(unlimited.rc == 0);
  BOOST_TEST(unlimited.err.empty(), unlimited.err);
  const std::string line =
      "xgrad: an address-space limit (ulimit -v) is set: OpenBLAS runs on one thread, not 2 (its threads hang when "
      "they cannot map their work buffers: OpenBLAS issue 5289)\n";
  for (const long kib : {220000L, 260000L, 400000L}) {
    BOOST_TEST_CONTEXT(kib << " KiB") {
      const Run r = s.xgrad_limited("example", kib, 2);
      BOOST_TEST(r.rc == 0);  // 124: timed out, hung
      BOOST_TEST(r.err == line);
      BOOST_TEST(r.out == unlimited.out);
    }
  }
  const Run info = s.xgrad_limited("info", 260000, 2);
  BOOST_TEST(info.rc == 0);
  BOOST_TEST(info.out.find("\nthreads:    1\n") != std::string::npos, info.out);
  // A core the user chose is still theirs after the restart.
  const Run chosen = s.shell("OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=2 exec timeout 60 sh -c 'ulimit -v 260000 && "
                             "exec \"$0\" info' '" XGRAD_TOOL "'");
  BOOST_TEST(chosen.rc == 0);
  BOOST_TEST(chosen.out.find("\ncore:       Haswell (AVX2, OPENBLAS_CORETYPE=Haswell)\n") != std::string::npos, chosen.out);
}

// Every limit, whichever phase it stops the command in, ends with all the outputs or none of
// them, one line on stderr and no temporary file left behind.
BOOST_AUTO_TEST_CASE(every_memory_limit_ends_whole_or_clean, *boost::unit_test::precondition(can_limit_address_space)) {
  Sandbox s;
  write_npy(s.path("q.npy"), xt::xarray<double>(xt::ones<double>({600, 64})));
  write_npy(s.path("k.npy"), xt::xarray<double>(xt::ones<double>({600, 64})));
  write_npy(s.path("v.npy"), xt::xarray<double>(xt::ones<double>({600, 64})));
  const std::set<std::string> before = s.entries();
  for (const std::string& args : {std::string("export --shape 512,512,16,16 -o e.json"),
                                  std::string("attention --q q.npy --k k.npy --v v.npy --out res")}) {
    std::set<std::string> phases;
    bool succeeded = false;
    for (long kib = 160000; kib <= 260000 && !succeeded; kib += 6000) {
      const Run r = s.xgrad_limited(args, kib);
      BOOST_TEST_CONTEXT(args << " under " << kib << " KiB") {
        if (r.rc == 0) {
          succeeded = true;
          BOOST_TEST(r.err.empty());
          const bool dir = fs::is_directory(s.dir / "res");
          if (dir) BOOST_TEST((s.entries("res") == std::set<std::string>{"grad_k.npy", "grad_q.npy", "grad_v.npy", "output.npy"}));
          else BOOST_TEST(fs::file_size(s.dir / "e.json") > 0u);
          continue;
        }
        BOOST_TEST_REQUIRE(r.rc == 2, r.err);
        const std::string prefix = "xgrad " + args.substr(0, args.find(' ')) + ": out of memory while ";
        BOOST_TEST(r.err.rfind(prefix, 0) == 0u, r.err);
        BOOST_TEST(one_line(r.err), r.err);
        phases.insert(r.err.substr(prefix.size()));
        std::set<std::string> now = s.entries();
        if (now.count("res")) {
          BOOST_TEST(s.entries("res").empty());  // the directory is made first; no file in it
          now.erase("res");
        }
        BOOST_TEST((now == before));
      }
    }
    BOOST_TEST(succeeded, args);
    BOOST_TEST(phases.size() >= 2u, args);  // the limits stop it in more than one phase
    fs::remove_all(s.dir / "res");
    fs::remove(s.dir / "e.json");
  }
}

// Issue 15, class 3: -o onto a FIFO or a device replaced it with a regular file.
BOOST_AUTO_TEST_CASE(outputs_that_exist_and_are_not_regular_files_are_refused) {
  Sandbox s;
  BOOST_TEST_REQUIRE(mkfifo(s.path("fifo").c_str(), 0644) == 0);
  fs::create_directories(s.dir / "dir");
  const int sock = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock_path = s.path("sock");
  BOOST_TEST_REQUIRE(sock_path.size() < sizeof addr.sun_path);
  std::copy(sock_path.begin(), sock_path.end(), addr.sun_path);
  BOOST_TEST_REQUIRE(bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  std::vector<std::string> specials = {"fifo", "dir", "sock"};
  if (geteuid() == 0) {
    BOOST_TEST_REQUIRE(mknod(s.path("full").c_str(), S_IFCHR | 0644, makedev(1, 7)) == 0);  // as /dev/full
    specials.push_back("full");
  } else {
    BOOST_TEST_MESSAGE("not root: the device node case is skipped");
  }
  fs::create_directories(s.dir / "res");
  BOOST_TEST_REQUIRE(mkfifo(s.path("res/grad_k.npy").c_str(), 0644) == 0);
  const auto types = [&] {
    std::map<std::string, fs::file_type> t;
    for (const auto& e : fs::recursive_directory_iterator(s.dir)) t[e.path().string()] = e.symlink_status().type();
    return t;
  };
  const auto before = types();
  std::vector<std::pair<std::string, std::string>> cases;
  for (const auto& name : specials) cases.push_back({"export --shape 1,1,1,1 -o " + name, name});
  cases.push_back({"saturation --dk 4 --trials 1 --plot fifo", "fifo"});
  cases.push_back({"attention --q q.json --k k.json --v v.json --out res", "res/grad_k.npy"});
  for (const auto& [args, path] : cases) {
    const Run r = s.xgrad(args);
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(r.rc == 2);
      // "a directory", "a FIFO", "a device": one line naming the path and what it is.
      const std::string head = "xgrad " + args.substr(0, args.find(' ')) + ": " + path + ": exists and is a";
      BOOST_TEST(r.err.rfind(head, 0) == 0, r.err);
      BOOST_TEST((r.err.size() > head.size() && r.err.find("; refusing to replace it\n") == r.err.size() - 25), r.err);
      BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      BOOST_TEST(r.out.empty());
      BOOST_TEST((types() == before));  // nothing replaced, no other output, no temporary file
    }
  }
  close(sock);
}

// Symbolic links: the file a link points to is replaced and the link stays; a link to nothing
// is refused (writing through it would create a file wherever it points).
BOOST_AUTO_TEST_CASE(outputs_follow_symbolic_links_to_regular_files) {
  Sandbox s;
  fs::create_directories(s.dir / "elsewhere");
  write_text(s.dir / "elsewhere" / "g.json", "old");
  fs::create_symlink("elsewhere/g.json", s.dir / "link.json");
  const Run r = s.xgrad("export --shape 2,2,2,2 -o link.json");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(fs::is_symlink(s.dir / "link.json"));
  BOOST_TEST(read_text(s.dir / "elsewhere" / "g.json") == s.xgrad("export --shape 2,2,2,2").out);
  BOOST_TEST((s.entries("elsewhere") == std::set<std::string>{"g.json"}));  // the temporary was beside the target
  fs::create_symlink("nowhere.json", s.dir / "dangling.json");
  const Run dangling = s.xgrad("export --shape 2,2,2,2 -o dangling.json");
  BOOST_TEST(dangling.rc == 2);
  BOOST_TEST(dangling.err == "xgrad export: dangling.json: is a symbolic link to nothing; refusing to write through it\n");
  BOOST_TEST(!fs::exists(s.dir / "nowhere.json"));
}

// Issue 15, class 4: a failed write named the temporary (out/.output.npy.pND2jE).
BOOST_AUTO_TEST_CASE(failed_writes_name_the_file_and_leave_nothing) {
  Sandbox s;
  write_text(s.dir / "g.json", "old");
  write_npy(s.path("q.npy"), xt::xarray<double>(xt::ones<double>({200, 16})));
  write_npy(s.path("k.npy"), xt::xarray<double>(xt::ones<double>({200, 16})));
  write_npy(s.path("v.npy"), xt::xarray<double>(xt::ones<double>({200, 16})));
  fs::create_directories(s.dir / "res");
  const std::set<std::string> before = s.entries();
  // A file-size limit of 4 blocks of 512 bytes (sh's unit); the tool ignores SIGXFSZ itself.
  const std::pair<std::string, std::string> cases[] = {
      {"export --shape 64,64,4,4 -o g.json", "xgrad export: g.json: cannot write it: File too large (a file-size limit, ulimit -f)\n"},
      {"attention --q q.npy --k k.npy --v v.npy --out res", "xgrad attention: res/output.npy: cannot write it: File too large (a file-size limit, ulimit -f)\n"},
      {"saturation --dk 4 --trials 1 --plot g.json", "xgrad saturation: g.json: cannot write it: File too large (a file-size limit, ulimit -f)\n"},
  };
  for (const auto& [args, line] : cases) {
    const Run r = s.shell("ulimit -f 4 && exec '" XGRAD_TOOL "' " + args);
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(r.rc == 2);
      BOOST_TEST(r.err == line);
      BOOST_TEST((s.entries() == before));
      BOOST_TEST(s.entries("res").empty());
      BOOST_TEST(read_text(s.dir / "g.json") == "old");
    }
  }
}

// Issue 15, class 6: --seed 0, the documented default, was refused; 2^64 + 4 gave --seed 4's
// output; ' 0.5' passed as a threshold.
BOOST_AUTO_TEST_CASE(numeric_options_take_whole_numbers_in_their_range) {
  Sandbox s;
  BOOST_TEST_REQUIRE(s.xgrad("export --shape 2,3,4,5 -o g.json").rc == 0);
  // The documented defaults, given explicitly, are accepted and change nothing.
  const std::pair<std::string, std::string> same[] = {
      {"saturation --dk 4 --trials 2 --seed 0", "saturation --dk 4 --trials 2"},
      {"saturation --dk 1,4 --tq 16 --tk 16 --dv 16 --trials 20", "saturation --dk 1,4"},
      {"export --shape 2,3,4,5 --seed 0", "export --shape 2,3,4,5"},
      {"inspect g.json --threshold 0.99", "inspect g.json"},
      {"inspect g.json --threshold .99", "inspect g.json --threshold 9.9e-1"},
  };
  for (const auto& [a, b] : same) {
    const Run ra = s.xgrad(a), rb = s.xgrad(b);
    BOOST_TEST_CONTEXT(a << " vs " << b) {
      BOOST_TEST(ra.rc == 0, ra.err);
      BOOST_TEST(ra.out == rb.out);
    }
  }
  for (const char* ok : {"saturation --dk 4 --trials 1 --seed 18446744073709551615", "inspect g.json --threshold 1",
                         "saturation --dk 65536 --tq 1 --tk 1 --dv 1 --trials 1", "gradcheck --shape 1,1,1,0"}) {
    const Run r = s.xgrad(ok);
    BOOST_TEST(r.rc == 0, ok << ": " << r.err);
  }
  const std::string seed_range = "--seed needs an integer from 0 to 18446744073709551615, not ";
  const std::pair<std::string, std::string> refused[] = {
      {"saturation --seed 18446744073709551616", seed_range + "'18446744073709551616'"},
      {"saturation --seed 18446744073709551620", seed_range + "'18446744073709551620'"},
      {"saturation --seed -1", seed_range + "'-1'"},
      {"saturation --seed +1", seed_range + "'+1'"},
      {"saturation --seed ' 1'", seed_range + "' 1'"},
      {"saturation --seed '1 '", seed_range + "'1 '"},
      {"saturation --seed 0x10", seed_range + "'0x10'"},
      {"saturation --seed ''", seed_range + "''"},
      {"export --shape 2,2,2,2 --seed 99999999999999999999", seed_range + "'99999999999999999999'"},
      {"saturation --tq 0", "--tq needs an integer from 1 to 4096, not '0'"},
      {"saturation --tk 4097", "--tk needs an integer from 1 to 4096, not '4097'"},
      {"saturation --dv 1e3", "--dv needs an integer from 1 to 4096, not '1e3'"},
      {"saturation --trials 100001", "--trials needs an integer from 1 to 100000, not '100001'"},
      {"saturation --dk 1,,4", "--dk needs an integer from 1 to 65536, not ''"},
      {"saturation --dk 4,", "--dk needs an integer from 1 to 65536, not ''"},
      {"saturation --dk 65537", "--dk needs an integer from 1 to 65536, not '65537'"},
      {"gradcheck --shape ' 1,1,1,1'", "--shape needs an integer from 0 to 65536, not ' 1'"},
      {"gradcheck --shape 1,1,1,65537", "--shape needs an integer from 0 to 65536, not '65537'"},
      {"gradcheck --shape 1,1,1,18446744073709551617", "--shape needs an integer from 0 to 65536, not '18446744073709551617'"},
  };
  check_refused(s, refused, " (see xgrad");
  for (const char* t : {" 0.5", "0.5 ", "+0.5", "-0.5", "0", "1.5", "inf", "nan", "0x1p-1", "1e", ".", "", "0,5", "1e-400", "5e-1x"}) {
    const Run r = s.xgrad(std::string("inspect g.json --threshold '") + t + "'");
    BOOST_TEST_CONTEXT("--threshold '" << t << "'") {
      BOOST_TEST(r.rc == 2);
      BOOST_TEST(r.err.find(std::string("--threshold needs a number in (0, 1], not '") + t + "'") != std::string::npos, r.err);
    }
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
