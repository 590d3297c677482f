// xgrad export: the attention graph, backward included, or an exported graph, as JSON or Graphviz DOT.
#include <cstdio>
#include <sstream>
#include <string>

#include <xgrad/lib/onnx_export.hpp>
#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

// The export's default values: all, so that `xgrad replay` checks every node and `xgrad inspect`
// reads the file as is (the library's to_json defaults to inputs, enough to replay).
constexpr ExportValues default_values = ExportValues::all;

// The help, with the --values names of graph/serialize's values_name and default_values marked.
std::string help_text() {
  const auto name = [](ExportValues v) {
    return std::string(values_name(v)) + (v == default_values ? " (default)" : "");
  };
  return "usage: xgrad export (--q Q --k K --v V | --shape TQ,TK,DK,DV [--seed N]) [--dtype float32|float64]\n"
         "                    [--impl composed|fused] [--format json|dot|onnx] [--values " +
         std::string(values_name(ExportValues::none)) + "|" + values_name(ExportValues::inputs) + "|" +
         values_name(ExportValues::all) + "]\n"
         "                    [--no-backward] [-o FILE]\n"
         "       xgrad export --graph GRAPH.json [--format json|dot|onnx] [--values V] [-o FILE]\n"
         "       ... --format dot [--forward-only] [--scope PREFIX] [--around NODE [--depth K]] [--expand]\n"
         "                        [--by-axis K] [--all]\n"
         "\n"
         "Builds the attention graph out = softmax(q k^T / sqrt(d_k)) v and, unless --no-backward, the\n"
         "backward nodes of grad(out, {q, k, v}) (grad_out = ones), and writes it out. With --graph,\n"
         "writes a graph exported before (by `xgrad export` or `xgrad import`) instead, recomputed from\n"
         "its stored leaves: as DOT to draw it, or as JSON with other values.\n"
         "\n" +
         input_options_help +
         "  --graph GRAPH.json  the graph to write, instead of attention (no --q/--k/--v/--shape/--seed/\n"
         "                      --dtype/--impl/--no-backward then)\n" +
         "  --format F          json (default): the xgrad-graph format, version 2, which `xgrad replay`\n"
         "                      and graph_from_json read back; dot: Graphviz (render: dot -Tsvg);\n"
         "                      onnx: an ONNX model (opset 17), forward and backward, with -o only\n"
         "                      (as `xgrad onnx` writes it; docs/onnx-export.md)\n"
         "  --values V          JSON only: the node values to include: " + name(ExportValues::none) + ", " +
         name(ExportValues::inputs) + " (the leaves, enough\n"
         "                      to replay), " + name(ExportValues::all) + "\n"
         "  --no-backward       the forward graph only\n"
         "DOT only (docs/cli.md):\n"
         "  --forward-only      draw the forward nodes only\n"
         "  --scope PREFIX      draw only the nodes of scope PREFIX and the scopes in it (Graph::scope;\n"
         "                      \"enc.l1\" holds enc.l1.attn, not enc.l10), inputs from outside as stubs\n"
         "  --around NODE       draw only the nodes within K edges of node NODE (an id), either way\n"
         "  --depth K           with --around: K (default 2)\n"
         "  --expand            draw every node: without a filter, a graph of more than 150 nodes is\n"
         "                      drawn with each scope as one box (a line on stderr says so)\n"
         "  --by-axis K         shade each softmax node by its most saturated index along axis K (for\n"
         "                      (B, H, T_q, T_k) scores, K = 1: the worst head) rather than all its rows\n"
         "  --all               shade the softmax nodes made by a backward pass too (`xgrad inspect --all`)\n"
         "  -o FILE             write FILE instead of stdout: whole or not at all, never over an input,\n"
         "                      never over anything but a regular file; a symbolic link is followed (the\n"
         "                      file it points to is replaced, the link stays)\n"
         "\n"
         "exit status: 0 success, 2 bad usage or input, out of memory or a failed write (one line on stderr)\n";
}

const std::string help = help_text();

// Writes g as --format and --values say, to -o or stdout.
template <class T>
int write_graph(const Options& o, const Graph<T>& g, const std::vector<std::string>& inputs) {
  const std::string format = o.choice("--format", {"json", "dot", "onnx"}, "json");
  const std::string values =
      o.choice("--values", {values_name(ExportValues::none), values_name(ExportValues::inputs), values_name(ExportValues::all)},
               values_name(default_values));
  if (format != "json" && o.has("--values")) throw usage_error("--values applies to --format json only");
  for (const char* dot_only : {"--forward-only", "--scope", "--around", "--depth", "--expand", "--by-axis", "--all"}) {
    if (format != "dot" && o.has(dot_only)) throw usage_error(std::string(dot_only) + " applies to --format dot only");
  }
  if (o.has("--depth") && !o.has("--around")) throw usage_error("--depth applies with --around NODE only");
  DotOptions dot;
  dot.forward_only = o.has("--forward-only");
  if (const auto scope = o.get("--scope")) {
    if (scope->empty()) throw usage_error("--scope needs a scope's name (PREFIX), got an empty one");
    dot.scope = *scope;
  }
  if (o.has("--around")) dot.around = static_cast<std::size_t>(o.integer("--around", 0, max_array_elements, 0));
  dot.depth = static_cast<std::size_t>(o.integer("--depth", 0, 1000000, 2));
  if (o.has("--expand")) dot.collapse = DotOptions::Collapse::never;
  if (o.has("--by-axis")) dot.group_axis = static_cast<std::size_t>(o.integer("--by-axis", 0, 63, 0));
  dot.backward_softmax = o.has("--all");
  if (format == "onnx" && !o.has("-o")) throw usage_error("--format onnx needs -o FILE: an ONNX model is binary");
  const ExportValues ev = parse_name(export_values_names, values, "--values");  // one of them: o.choice checked
  // JSON is streamed into the file a node at a time (write_json): a graph of millions of nodes
  // exports in little more memory than it holds. On stdout, which shows nothing of a command
  // that fails, it is made whole first.
  const FileWriter json = [&](std::ostream& out) {
    const Phase phase("formatting the graph as json");
    write_json(out, g, ev);
    out << '\n';
  };
  const auto path = o.get("-o");
  if (format == "json" && path) {
    write_files_atomically({{*path, json}}, inputs);
    return 0;
  }
  std::string text = [&] {
    const Phase phase("formatting the graph as " + format);
    if (format == "onnx") return to_onnx_bytes(g);
    if (format == "json") {
      std::ostringstream s;
      json(s);
      return std::move(s).str();
    }
    if (format == "dot" && dot_collapses_scopes(g, dot)) {
      std::fprintf(stderr,
                   "xgrad export: more than %zu nodes to draw (the graph has %zu): each named scope is drawn as one "
                   "box; --expand draws every node, --scope PREFIX one scope, --around NODE [--depth K] a "
                   "neighbourhood, --forward-only the forward pass\n",
                   dot.collapse_above, g.size());
    }
    return to_dot(g, dot);
  }();
  if (path) {
    write_files_atomically({{*path, [&](std::ostream& out) { out << text; }}}, inputs);
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  return 0;
}

// --graph: an exported graph, imported (which recomputes every node) and written again.
int export_graph(const Options& o) {
  for (const char* other : {"--q", "--k", "--v", "--shape", "--seed", "--dtype", "--impl", "--no-backward"}) {
    if (!o.has(other)) continue;
    if (std::string(other) == "--no-backward") {
      throw usage_error("--graph takes no --no-backward: the file holds what it holds; --format dot --forward-only draws its "
                        "forward pass");
    }
    throw usage_error(std::string("--graph takes no ") + other + ": the graph's file says it all");
  }
  const std::string path = *o.get("--graph");
  const Phase reading("reading " + path);
  const GraphFile file = read_graph_file(path);
  return with_dtype(file.dtype, [&](auto tag) {
    using T = decltype(tag);
    const Phase phase("importing " + path);
    const std::unique_ptr<Graph<T>> g = naming(path, [&] { return graph_from_parsed_json<T>(file.json); });
    return write_graph(o, *g, {path});
  });
}

template <class T>
int run_export(const Options& o, const AttentionInputs& in) {
  AttentionGraph<T> a;
  build_attention(in, a);
  Graph<T>& g = a.graph;
  g.set_output("out", a.out);
  if (!o.has("--no-backward")) {
    const Phase phase("differentiating the graph of " + in.origin);
    const auto grads = grad(a.out, {a.q, a.k, a.v});
    g.set_grad("q", grads[0]);
    g.set_grad("k", grads[1]);
    g.set_grad("v", grads[2]);
  }
  return write_graph(o, g, in.files);
}

int run(const std::vector<std::string>& args) {
  const Options o(args, {{"--q", true}, {"--k", true}, {"--v", true}, {"--shape", true}, {"--seed", true},
                         {"--dtype", true}, {"--impl", true}, {"--format", true}, {"--values", true}, {"--no-backward", false},
                         {"-o", true}, {"--graph", true}, {"--forward-only", false}, {"--scope", true},
                         {"--around", true}, {"--depth", true}, {"--expand", false},
                         {"--by-axis", true}, {"--all", false}});
  if (o.has("--graph")) return export_graph(o);
  const AttentionInputs in = attention_inputs(o, true);
  return with_dtype(in.dtype, [&](auto tag) { return run_export<decltype(tag)>(o, in); });
}

}  // namespace

const Command export_command = {"export", "the attention graph, backward included, or a graph file, as JSON, DOT or ONNX",
                                help.c_str(), run};

}  // namespace xgrad::tool
