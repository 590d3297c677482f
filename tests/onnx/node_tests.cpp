// ONNX's backend node tests (libonnx-testdata) run through import_onnx: a conformance suite no
// one here wrote. For each test directory: import model.onnx with test_data_set_N/input_K.pb,
// compare each output with output_K.pb as ONNX's runner does (dtype exact, rtol 1e-3, atol
// 1e-7, NaN equal to NaN), then gradcheck the graph in float64 w.r.t. its float inputs and
// parameters (a replay of the imported graph, finite differences against the VJPs).
//
//   xgrad_onnx_node_tests DATA_DIR MANIFEST [--write-manifest FILE] [--only NAME]
//
// The manifest (tests/onnx/node_tests.manifest) has one line per test:
//   NAME pass gradcheck            passes, and its gradients match finite differences
//   NAME pass gradcheck (eps 1e-4) the same with a difference step of 1e-4 (large sums)
//   NAME pass no-gradcheck: WHY    passes; no gradient check (no float input, or WHY)
//   NAME skip: WHY                 not expected to pass (the importer's message, or the dtype)
// The program fails (exit 1) if a listed pass fails or a listed gradcheck fails; it reports
// tests that pass but are listed as skips, and tests the manifest does not list. It prints
// "N passed, N failed, N skipped" and the gradcheck counts. Exit 77 (ctest: skipped) when
// DATA_DIR does not exist.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <xgrad/lib/onnx_import.hpp>
#include <xgrad/xgrad.hpp>

namespace fs = std::filesystem;
using namespace xgrad;

namespace {

struct Outcome {
  bool passed = false;
  std::string why;          // for a failure or a skip
  bool gradchecked = false;  // a gradcheck ran
  bool grad_passed = false;
  double grad_eps = 0;      // the step it passed with
  std::string grad_why;     // no gradcheck: why; failed: the worst entry
};

std::vector<fs::path> data_sets(const fs::path& dir) {
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  return sets;
}

std::vector<OnnxTensor> read_numbered(const fs::path& set, const std::string& prefix) {
  std::vector<OnnxTensor> out;
  for (std::size_t k = 0;; ++k) {
    const fs::path p = set / (prefix + "_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(read_onnx_tensor(p.string()));
  }
  return out;
}

// Strips "path: " from an importer message, for the manifest.
std::string reason(const std::string& what, const std::string& model) {
  std::string s = what.rfind(model, 0) == 0 ? what.substr(model.size() + 2) : what;
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s.size() > 200 ? s.substr(0, 200) + "..." : s;
}

template <class T>
std::string compare(Graph<T>& g, const std::vector<std::string>& names, const std::vector<OnnxTensor>& expected) {
  for (std::size_t k = 0; k < expected.size() && k < names.size(); ++k) {
    const auto it = g.outputs().find(names[k]);
    if (it == g.outputs().end()) return "output '" + names[k] + "' missing";
    const xt::xarray<T>& y = g.var(it->second).value();
    const OnnxTensor& e = expected[k];
    if (shape_of(y) != e.shape()) return "output '" + names[k] + "' has shape " + shape_str(shape_of(y)) + ", expected " + shape_str(e.shape());
    for (std::size_t i = 0; i < y.size(); ++i) {
      const double a = static_cast<double>(y.data()[i]), b = e.real.data()[i];
      if (std::isnan(a) && std::isnan(b)) continue;
      if (a == b) continue;
      if (!(std::fabs(a - b) <= 1e-7 + 1e-3 * std::fabs(b))) {
        std::ostringstream s;
        s.precision(9);
        s << "output '" << names[k] << "' element " << i << ": " << a << ", expected " << b;
        return s.str();
      }
    }
  }
  return "";
}

template <class T>
Outcome run_typed(const std::string& model, const std::vector<fs::path>& sets) {
  Outcome o;
  const std::vector<std::string> in_names = onnx_graph_inputs(model), out_names = onnx_graph_outputs(model);
  std::vector<std::map<std::string, OnnxTensor>> feeds;
  std::vector<std::vector<OnnxTensor>> expected;
  for (const fs::path& set : sets) {
    const std::vector<OnnxTensor> ins = read_numbered(set, "input");
    std::map<std::string, OnnxTensor> feed;
    for (std::size_t k = 0; k < ins.size() && k < in_names.size(); ++k) feed[in_names[k]] = ins[k];
    feeds.push_back(std::move(feed));
    expected.push_back(read_numbered(set, "output"));
  }
  // Each data set imported on its own: shapes are fixed at import, and may differ between sets.
  for (std::size_t s = 0; s < sets.size(); ++s) {
    OnnxImportOptions options;
    options.inputs = feeds[s];
    std::unique_ptr<Graph<T>> g;
    try {
      g = import_onnx<T>(model, options);
    } catch (const error& e) {
      o.why = reason(e.what(), model);
      return o;
    }
    const std::string diff = compare(*g, out_names, expected[s]);
    if (!diff.empty()) {
      o.why = sets[s].filename().string() + ": " + diff;
      return o;
    }
  }
  o.passed = true;

  // The backward: the float64 graph of the first data set.
  OnnxImportOptions options;
  options.inputs = feeds[0];
  for (auto& kv : options.inputs) {
    if (kv.second.is_float()) kv.second.dtype = "float64";
  }
  std::unique_ptr<Graph<double>> g;
  try {
    g = import_onnx<double>(model, options);
  } catch (const error& e) {
    o.grad_why = "float64 import: " + reason(e.what(), model);
    return o;
  }
  std::vector<Var<double>> xs;
  for (std::size_t id = 0; id < g->size(); ++id) {
    const Node<double>& n = g->node(id);
    const auto fed = feeds[0].find(n.name);
    const bool mask = n.role == Role::input && fed != feeds[0].end() && fed->second.dtype == "bool";  // no gradient
    if (n.is_leaf() && !n.index_leaf && !mask && (n.role == Role::input || n.role == Role::parameter) && n.value().size() > 0) {
      xs.push_back(g->var(id));
    }
  }
  if (xs.empty()) {
    o.grad_why = "no float input";
    return o;
  }
  // One scalar of every output: the sum of each, weighted by fixed pseudo-random factors so that
  // outputs that sum to a constant (softmax rows) still carry a gradient.
  Var<double> loss;
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  for (const auto& kv : g->outputs()) {
    const Var<double> y = g->var(kv.second);
    if (y.value().size() == 0) continue;
    bool finite = true;
    for (double v : y.value()) finite = finite && std::isfinite(v);
    if (!finite) {
      o.grad_why = "output '" + kv.first + "' is not finite everywhere";
      return o;
    }
    xt::xarray<double> w = xt::xarray<double>::from_shape(y.value().shape());
    for (double& v : w) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      v = 0.5 + static_cast<double>(state >> 11) / 9007199254740992.0;
    }
    const Var<double> term = sum(mul(y, g->constant("w_" + kv.first, w)));
    loss = loss.valid() ? add(loss, term) : term;
  }
  if (!loss.valid()) {
    o.grad_why = "outputs are empty";
    return o;
  }
  try {
    // The default step first; then 1e-4, for graphs whose sum is so large (tens of thousands of
    // terms) that its rounding, divided by 2 eps, outweighs the tolerance at 1e-6. A kink fails both.
    for (const double eps : {1e-6, 1e-4}) {
      GradcheckOptions go;
      go.eps = eps;
      const GradcheckReport r = gradcheck(loss, xs, go);
      o.gradchecked = true;
      o.grad_passed = r.passed;
      o.grad_eps = eps;
      if (r.passed) break;
      std::string s = r.str();
      std::replace(s.begin(), s.end(), '\n', ' ');
      o.grad_why = s.substr(0, 240);
    }
  } catch (const error& e) {
    o.grad_why = std::string("gradcheck refused: ") + e.what();
  }
  return o;
}

Outcome run_test(const fs::path& dir) {
  const std::string model = (dir / "model.onnx").string();
  const std::vector<fs::path> sets = data_sets(dir);
  Outcome o;
  try {
    if (sets.empty()) {
      o.why = "no test data set";
      return o;
    }
    const std::vector<OnnxTensor> outs = read_numbered(sets[0], "output");
    std::string dtype;
    for (const OnnxTensor& t : outs) {
      if (!t.is_float()) {
        o.why = "an output is " + t.dtype + " (xgrad graphs compute float values)";
        return o;
      }
      if (!dtype.empty() && dtype != t.dtype) {
        o.why = "outputs of two float types (an xgrad graph has one)";
        return o;
      }
      dtype = t.dtype;
    }
    if (dtype.empty()) {
      o.why = "no output";
      return o;
    }
    return dtype == "float32" ? run_typed<float>(model, sets) : run_typed<double>(model, sets);
  } catch (const error& e) {
    o.passed = false;
    o.why = reason(e.what(), model);
    return o;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const bool verbose = std::getenv("XGRAD_NODE_TESTS_VERBOSE") != nullptr;
  if (argc < 3) {
    std::fprintf(stderr, "usage: xgrad_onnx_node_tests DATA_DIR MANIFEST [--write-manifest FILE] [--only NAME]\n");
    return 2;
  }
  const fs::path data = argv[1];
  const std::string manifest_path = argv[2];
  std::string write_to, only;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--write-manifest") write_to = argv[i + 1];
    else if (a == "--only") only = argv[i + 1];
  }
  if (!fs::is_directory(data)) {
    std::printf("%s: no such directory (install libonnx-testdata): skipped\n", data.c_str());
    return 77;
  }
  // The manifest: name -> "pass gradcheck" | "pass no-gradcheck..." | "skip...".
  std::map<std::string, std::string> listed;
  {
    std::ifstream in(manifest_path);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const std::size_t sp = line.find(' ');
      listed[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(sp + 1);
    }
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(data)) {
    if (e.is_directory()) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::size_t passed = 0, failed = 0, skipped = 0, grad_passed = 0, grad_failed = 0, grad_none = 0, problems = 0;
  std::ostringstream manifest;
  manifest << "# ONNX 1.12 backend node tests (libonnx-testdata) through xgrad's import_onnx.\n"
              "# Written by xgrad_onnx_node_tests --write-manifest; see tests/onnx/node_tests.cpp.\n";
  for (const std::string& name : names) {
    if (!only.empty() && name != only) continue;
    if (verbose) std::printf("running %s\n", name.c_str());
    const Outcome o = run_test(data / name);
    const auto it = listed.find(name);
    const std::string expect = it == listed.end() ? "" : it->second;
    const bool expect_pass = expect.rfind("pass", 0) == 0;
    const bool expect_grad = expect.rfind("pass gradcheck", 0) == 0;
    if (o.passed) {
      ++passed;
      if (o.gradchecked && o.grad_passed) ++grad_passed;
      else if (o.gradchecked) ++grad_failed;
      else ++grad_none;
      if (!expect_pass) {
        std::printf("%s: passes, but the manifest %s\n", name.c_str(), it == listed.end() ? "does not list it" : "lists it as a skip");
      }
      if (expect_grad && !(o.gradchecked && o.grad_passed)) {
        std::printf("FAIL %s: gradcheck: %s\n", name.c_str(), o.grad_why.c_str());
        ++problems;
      } else if (expect_pass && !expect_grad && o.gradchecked && o.grad_passed) {
        std::printf("%s: gradcheck now passes, but the manifest lists no-gradcheck\n", name.c_str());
      }
      const std::string grad = o.grad_eps == 1e-6 ? "gradcheck" : "gradcheck (eps 1e-4)";
      manifest << name << " pass " << (o.gradchecked && o.grad_passed ? grad : "no-gradcheck: " + o.grad_why) << "\n";
    } else {
      if (expect_pass) {
        std::printf("FAIL %s: %s\n", name.c_str(), o.why.c_str());
        ++failed;
        ++problems;
      } else {
        ++skipped;
        if (it == listed.end()) std::printf("%s: not in the manifest (%s)\n", name.c_str(), o.why.c_str());
      }
      manifest << name << " skip: " << o.why << "\n";
    }
  }
  std::printf("%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
  std::printf("gradcheck (float64) of the passing graphs: %zu passed, %zu failed, %zu not checked\n", grad_passed,
              grad_failed, grad_none);
  if (!write_to.empty()) {
    std::ofstream out(write_to);
    out << manifest.str();
  }
  return problems == 0 ? 0 : 1;
}
