// xgrad attention: the output and the gradients of attention for arrays in files.
#include <cstdio>
#include <filesystem>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad attention --q Q --k K --v V [--grad-output G] [--dtype float32|float64]\n"
    "                       [--impl composed|fused] [--out DIR]\n"
    "\n"
    "Computes out = softmax(q k^T / sqrt(d_k)) v and the gradients of sum(grad_output * out)\n"
    "w.r.t. q, k and v. Arrays are .npy or .json files (nested arrays), by extension:\n"
    "  q (B..., T_q, d_k), k (B..., T_k, d_k), v (B..., T_k, d_v), grad_output (B..., T_q, d_v).\n"
    "\n"
    "  --grad-output G   the gradient w.r.t. the output (default: ones, the gradient of sum(out))\n"
    "  --dtype D         compute in float32 or float64 (default: the dtype of the input files;\n"
    "                    JSON files are float64)\n"
    "  --impl I          composed (default): the spec's nodes; fused: one flash_attention node,\n"
    "                    memory O((T_q + T_k) d), same results within rounding\n"
    "  --out DIR         write output.npy, grad_q.npy, grad_k.npy, grad_v.npy in DIR (created if\n"
    "                    missing); without it, print one JSON object\n"
    "                    {\"output\": ..., \"grad_q\": ..., \"grad_k\": ..., \"grad_v\": ...} to stdout.\n"
    "                    Non-finite values are the strings \"nan\", \"inf\", \"-inf\".\n"
    "\n"
    "The four files are written whole or not at all, never over an input file nor over anything\n"
    "but a regular file (a symbolic link is followed: the file it points to is replaced). JSON cannot\n"
    "show the shape of an empty array beyond its first empty axis ([] for (0, 1, 2)); --out can.\n"
    "Inputs whose T_q x T_k score arrays (times the batch) exceed 2^26 elements are refused, with\n"
    "either --impl.\n"
    "exit status: 0 success, 2 bad usage or input, out of memory or a failed write (one line on stderr)\n";

template <class T>
int run_attention(const Options& o, const AttentionInputs& in) {
  AttentionGraph<T> a;
  build_attention(in, a);
  std::vector<std::string> inputs = in.files;
  std::vector<Var<T>> grads;
  const Phase computing("computing the gradients of " + in.origin);
  if (const auto path = o.get("--grad-output")) {
    const xt::xarray<T> g = to_dtype<T>(read_array(*path).values, *path);
    grads = naming(*path, [&] { return grad(a.out, {a.q, a.k, a.v}, g); });
    inputs.push_back(*path);
  } else {
    grads = grad(a.out, {a.q, a.k, a.v});
  }
  const std::pair<const char*, const Var<T>*> results[] = {
      {"output", &a.out}, {"grad_q", &grads[0]}, {"grad_k", &grads[1]}, {"grad_v", &grads[2]}};

  if (const auto dir = o.get("--out")) {
    std::error_code ec;
    std::filesystem::create_directories(*dir, ec);
    if (!std::filesystem::is_directory(*dir)) throw error(*dir + ": cannot create the output directory");
    std::vector<std::pair<std::string, FileWriter>> files;
    for (const auto& [name, var] : results) {
      files.emplace_back((std::filesystem::path(*dir) / (std::string(name) + ".npy")).string(),
                         [var = var](std::ostream& out) { out << npy_bytes(var->value()); });
    }
    write_files_atomically(files, inputs);
    return 0;
  }
  const Phase formatting("formatting the results as JSON");
  Json j = Json::object();
  for (const auto& [name, var] : results) j[name] = array_to_json(var->value());
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int run(const std::vector<std::string>& args) {
  const Options o(args, {{"--q", true}, {"--k", true}, {"--v", true}, {"--dtype", true},
                         {"--impl", true}, {"--grad-output", true}, {"--out", true}});
  const AttentionInputs in = attention_inputs(o, false);
  return with_dtype(in.dtype, [&](auto tag) { return run_attention<decltype(tag)>(o, in); });
}

}  // namespace

const Command attention_command = {"attention", "output and gradients of attention for q, k, v files", help, run};

}  // namespace xgrad::tool
