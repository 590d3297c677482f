// xgrad onnx: a graph file, forward and backward, as an ONNX model that any ONNX engine runs.
#include <cstdio>

#include <xgrad/lib/onnx_export.hpp>
#include <xgrad/lib/onnx_import.hpp>
#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad onnx GRAPH.json -o MODEL.onnx [--parameters-as-inputs]\n"
    "\n"
    "Writes a graph file (from `xgrad export`, `xgrad import` or to_json) as an ONNX model of the\n"
    "default domain at opset 17, IR version 8: every node the graph's named outputs and\n"
    "gradients depend on, forward and backward, through its op's lowering\n"
    "(docs/onnx-export.md). Input leaves become graph inputs of their names (index leaves\n"
    "int64), parameters and constants initializers; the named outputs become ONNX outputs of\n"
    "their names, each named gradient an output grad_<name>. The graph is recomputed from its\n"
    "stored leaves first. `node tools/ort_run.js MODEL.onnx --graph GRAPH.json` runs the model\n"
    "in ONNX Runtime and compares its outputs with the graph file's values.\n"
    "\n"
    "  -o MODEL.onnx           where to write the model (whole or not at all)\n"
    "  --parameters-as-inputs  list the parameters also as graph inputs, whose initializers are\n"
    "                          then defaults an engine may be fed other values for\n"
    "\n"
    "Prints one line: the graph's nodes and dtype, the model's inputs to feed (those without an\n"
    "initializer), its outputs and its size, as read back from the model.\n"
    "\n"
    "exit status: 0 written, 2 bad usage or input: a graph file xgrad cannot read, an op without\n"
    "             an ONNX lowering (one line naming the node and the op), leaves sharing a name,\n"
    "             a graph with no named output or gradient, or out of memory\n";

int run(const std::vector<std::string>& args) {
  const Options o(args, {{"-o", true}, {"--parameters-as-inputs", false}}, 1);
  const std::string path = o.first_positional("GRAPH.json");
  const std::string out = o.required("-o", "MODEL.onnx");
  OnnxExportOptions options;
  options.parameters_as_inputs = o.has("--parameters-as-inputs");
  const Phase reading("reading " + path);
  const GraphFile file = read_graph_file(path);
  std::string bytes;
  std::size_t nodes = 0;
  with_dtype(file.dtype, [&](auto tag) {
    using T = decltype(tag);
    const Phase phase("writing " + path + " as ONNX");
    const std::unique_ptr<Graph<T>> g = naming(path, [&] { return graph_from_parsed_json<T>(file.json); });
    nodes = g->size();
    bytes = naming(path, [&] { return to_onnx_bytes(*g, options); });
    return 0;
  });
  const std::size_t size = bytes.size();
  write_files_atomically({{out, [&](std::ostream& model) { model << bytes; }}}, {path});
  // What the model holds, read back from it.
  const auto names = [](const std::vector<std::string>& v) {
    std::string text;
    for (const auto& name : v) text += (text.empty() ? "" : ", ") + name;
    return text.empty() ? std::string("none") : text;
  };
  std::printf("%s: %zu nodes (%s) as an ONNX model of inputs %s and outputs %s, %zu bytes, written to %s\n",
              path.c_str(), nodes, file.dtype.c_str(), names(onnx_graph_inputs(out)).c_str(),
              names(onnx_graph_outputs(out)).c_str(), size, out.c_str());
  return 0;
}

}  // namespace

const Command onnx_command = {"onnx", "a graph file, backward included, as an ONNX model (opset 17)", help, run};

}  // namespace xgrad::tool
