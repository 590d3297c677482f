// xgrad export: the attention graph, backward included, as JSON or Graphviz DOT.
#include <cstdio>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad export (--q Q --k K --v V | --shape TQ,TK,DK,DV [--seed N]) [--dtype float32|float64]\n"
    "                    [--impl composed|fused] [--format json|dot] [--values none|inputs|all]\n"
    "                    [--no-backward] [-o FILE]\n"
    "\n"
    "Builds the attention graph out = softmax(q k^T / sqrt(d_k)) v and, unless --no-backward, the\n"
    "backward nodes of grad(out, {q, k, v}) (grad_out = ones), and writes it out.\n"
    "\n"
    "  --q Q --k K --v V   input arrays, .npy or .json\n"
    "  --shape TQ,TK,DK,DV random inputs q (TQ, DK), k (TK, DK), v (TK, DV), standard normal;\n"
    "                      each 0 to 65536\n"
    "  --seed N            seed of the random inputs, 0 to 2^64 - 1 (default 0)\n"
    "  --dtype D           float32 or float64 (default: the inputs' dtype; float64 for --shape)\n"
    "  --impl I            composed (default): the spec's nodes, every intermediate kept; fused: one\n"
    "                      flash_attention node, memory O((T_q + T_k) d), no scores or weights kept\n"
    "  --format F          json (default): the xgrad-graph format, version 2, which `xgrad replay`\n"
    "                      and graph_from_json read back; dot: Graphviz (render: dot -Tsvg)\n"
    "  --values V          JSON only: the node values to include: none, inputs (the leaves, enough\n"
    "                      to replay), all (default)\n"
    "  --no-backward       the forward graph only\n"
    "  -o FILE             write FILE instead of stdout: whole or not at all, never over an input,\n"
    "                      never over anything but a regular file; a symbolic link is followed (the\n"
    "                      file it points to is replaced, the link stays)\n"
    "\n"
    "exit status: 0 success, 2 bad usage or input, out of memory or a failed write (one line on stderr)\n";

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
  const std::string format = o.choice("--format", {"json", "dot"}, "json");
  const std::string values = o.choice("--values", {"none", "inputs", "all"}, "all");
  if (format == "dot" && o.has("--values")) throw usage_error("--values applies to --format json only");
  const ExportValues ev = values == "none" ? ExportValues::none : values == "inputs" ? ExportValues::inputs : ExportValues::all;
  std::string text = [&] {
    const Phase phase("formatting the graph as " + format);
    return format == "dot" ? to_dot(g) : to_json(g, ev).dump() + "\n";
  }();
  if (const auto path = o.get("-o")) {
    // Moved, not copied: contents() is called once, and the text may be most of the memory.
    write_files_atomically({{*path, [&] { return std::move(text); }}}, in.files);
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  return 0;
}

int run(const std::vector<std::string>& args) {
  const Options o(args, {{"--q", true}, {"--k", true}, {"--v", true}, {"--shape", true}, {"--seed", true},
                         {"--dtype", true}, {"--impl", true}, {"--format", true}, {"--values", true}, {"--no-backward", false},
                         {"-o", true}});
  const AttentionInputs in = attention_inputs(o, true);
  return with_dtype(in.dtype, [&](auto tag) { return run_export<decltype(tag)>(o, in); });
}

}  // namespace

const Command export_command = {"export", "the attention graph, backward included, as JSON or DOT", help, run};

}  // namespace xgrad::tool
