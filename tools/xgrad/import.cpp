// xgrad import: an ONNX model as an xgrad graph (JSON), with its gradients if asked.
#include <cstdio>

#include <xgrad/lib/onnx_import.hpp>
#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad import MODEL.onnx [--input NAME=FILE]... [--dtype float32|float64] [--grad]\n"
    "                    [--max-work N] -o GRAPH.json\n"
    "\n"
    "Imports an ONNX model (opsets 1 to 17 of the default domain; the ops docs/onnx.md lists) and\n"
    "writes it as an xgrad graph with every value, which `xgrad replay`, `inspect` and `export`\n"
    "read. Graph inputs become input leaves, float initializers the outputs depend on parameter\n"
    "leaves, integer inputs index leaves; the outputs keep their ONNX names.\n"
    "\n"
    "  --input NAME=FILE  the value of graph input NAME: a .npy file (float32 or float64 for a\n"
    "                     float input, int32 or int64 for an integer one such as token ids) or a\n"
    "                     .json nested array; bool (or integer 0/1) for a bool input such as\n"
    "                     a padding mask; repeat for each input. An input not given takes\n"
    "                     zeros of the shape the model declares, which must then be fixed.\n"
    "  --dtype D          the graph's dtype (default: the model's, float32 if it has no floats)\n"
    "  --grad             add the backward nodes of the sum of every element of every output,\n"
    "                     w.r.t. every float graph input and every parameter leaf, named in\n"
    "                     \"grads\" by their ONNX names\n"
    "  --max-work N       the most work the import may compute, in element visits (Op::work:\n"
    "                     an element read or written; a product's multiply-adds count 1/8 each),\n"
    "                     over every node it builds (the backward too) and every value it computes\n"
    "                     itself; each node is charged before it runs (default 4294967296, 2^32,\n"
    "                     a few seconds on one core)\n"
    "  -o GRAPH.json      where to write the graph (written whole or not at all)\n"
    "\n"
    "Prints one line: the nodes, dtype, inputs, parameters, outputs and gradients written.\n"
    "\n"
    "exit status: 0 written, 2 bad usage or input: an op, attribute or type the importer does\n"
    "             not support (one line naming the file, the node's index and name, its op_type,\n"
    "             domain and opset), a truncated or malformed file, or out of memory\n";

OnnxTensor input_value(const std::string& file) {
  OnnxTensor t;
  if (ends_with(file, ".npy")) {
    // The header says which: try floats, then integers.
    try {
      StoredArray a = read_npy(file);
      t.dtype = a.dtype;
      t.real = std::move(a.values);
      return t;
    } catch (const error& e) {
      const std::string what = e.what();
      if (what.find("dtype '<i") == std::string::npos && what.find("dtype '>i") == std::string::npos &&
          what.find("dtype '=i") == std::string::npos && what.find("dtype '|b1'") == std::string::npos) {
        throw;
      }
    }
    t.dtype = "int64";  // a bool input takes it too: 0 and 1
    t.ints = read_npy_integers(file);
    return t;
  }
  StoredArray a = read_array(file);
  t.dtype = a.dtype;
  t.real = std::move(a.values);
  return t;
}

// What the graph holds, for the line the command prints.
template <class T>
std::string summary(const Graph<T>& g) {
  std::size_t inputs = 0, parameters = 0;
  for (std::size_t id = 0; id < g.size(); ++id) {
    const Node<T>& n = g.node(id);
    inputs += n.is_leaf() && (n.role == Role::input || n.index_leaf);
    parameters += n.is_leaf() && n.role == Role::parameter;
  }
  const auto count = [](std::size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  return count(g.size(), "node") + " (" + dtype_name<T>() + "), " + count(inputs, "input") + ", " +
         count(parameters, "parameter") + ", " + count(g.outputs().size(), "output") + ", " +
         count(g.grads().size(), "gradient");
}

// The model imported and written to `out` as JSON with all its values, streamed; its summary.
template <class T>
std::string import_to(const std::string& model, const OnnxImportOptions& options, const std::string& out,
                      const std::vector<std::string>& inputs) {
  const std::unique_ptr<Graph<T>> g = import_onnx<T>(model, options);
  write_files_atomically({{out, [&](std::ostream& o) {
                            write_json(o, *g, ExportValues::all);
                            o << '\n';
                          }}},
                         inputs);
  return summary(*g);
}

int run(const std::vector<std::string>& args) {
  const Options o(args, {{"--input", true, true}, {"--dtype", true}, {"--grad", false}, {"--max-work", true}, {"-o", true}}, 1);
  const std::string model = o.first_positional("MODEL.onnx");
  const std::string out = o.required("-o", "GRAPH.json");
  OnnxImportOptions options;
  options.gradients = o.has("--grad");
  options.max_work = o.real("--max-work", {0, 1e300, false, false}, max_import_work);
  std::vector<std::string> files = {model};
  for (const std::string& spec : o.all("--input")) {
    const std::size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      throw usage_error("--input needs NAME=FILE, not '" + spec + "'");
    }
    const std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    if (options.inputs.count(name)) throw usage_error("--input " + name + " given twice");
    const Phase phase("reading " + file);
    options.inputs[name] = input_value(file);
    files.push_back(file);
  }
  const Phase phase("importing " + model);
  const std::string dtype = o.choice("--dtype", {"float32", "float64"}, onnx_model_float_type(model));
  std::string about;
  with_dtype(dtype, [&](auto tag) {
    about = import_to<decltype(tag)>(model, options, out, files);
    return 0;
  });
  std::printf("%s: %s, written to %s\n", model.c_str(), about.c_str(), out.c_str());
  return 0;
}

}  // namespace

const Command import_command = {"import", "import an ONNX model as an xgrad graph (with --grad, its gradients)", help,
                                run};

}  // namespace xgrad::tool
