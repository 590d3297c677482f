// ONNX export: a graph, forward and backward, as an ONNX model of standard ops that any ONNX
// engine runs (ONNX Runtime checks it in the tests). docs/onnx.md lists each op's lowering.
#pragma once

#include <cstddef>
#include <string>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

struct OnnxExportOptions {
  // Lists every parameter also as a graph input whose initializer is its default, so that an
  // engine can be fed other parameter values (a checkpoint, a step of training) without a new
  // export. Off: parameters are initializers only, constants of the model.
  bool parameters_as_inputs = false;
  // The ONNX graph's name.
  std::string graph_name = "xgrad";
  // The largest model written, in bytes: protobuf's limit of 2 GiB - 1 (xgrad writes no external
  // data), or less.
  std::size_t max_bytes = (std::size_t(1) << 31) - 1;
};

// The graph as an ONNX model (opset 17, IR version 8, default domain only), its bytes. Of the
// graph, what a named output or gradient depends on, and nothing else:
//   - each input leaf a graph input of its name, dtype and shape; each index leaf an int64 one;
//   - each parameter an initializer of its name; each constant an initializer of its name (made
//     unique with a suffix where constants share one: "zeros", "zeros_1");
//   - each node through its op's lowering (Op::to_onnx, beside the op in ops/);
//   - each named output (Graph::set_output) an ONNX output of that name, each named gradient
//     (Graph::set_grad) one named "grad_<name>", with its dtype and shape.
// Values are T (float32 or float64) throughout; ids int64. Dropout in training mode multiplies
// by its mask at the graph's step, stored as an initializer; flash_attention and its VJP are
// written as the composition (the T_q x T_k weights exist then: the memory bound is lost).
// Throws xgrad::error, before anything is written, for a graph that names no output or
// gradient, a node whose op has no lowering ("to_onnx: node 7 (frobnicate): has no ONNX
// lowering"), two leaves (inputs, index leaves, parameters) of one name or an output named as a
// leaf, a released value (a lean graph: Graph::keep_all first), or a model over max_bytes.
template <class T>
std::string to_onnx_bytes(const Graph<T>& g, const OnnxExportOptions& options = {});

// The same model written to `path`, atomically: whole or not at all (lib/files.hpp).
template <class T>
void to_onnx(const Graph<T>& g, const std::string& path, const OnnxExportOptions& options = {});

}  // namespace xgrad
