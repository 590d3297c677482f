// ONNX import: a model exported by PyTorch (or any ONNX writer) as an xgrad graph, whose
// gradients are then ordinary graph nodes. docs/onnx.md lists the ops and how each maps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// A tensor as ONNX stores it (TensorProto, .pb files): its ONNX element type by name ("float32",
// "float64", "int64", "bool", ...) and its values: float types in `real`, integer and bool types
// in `ints` (the other one is empty).
struct OnnxTensor {
  std::string dtype;
  xt::xarray<double> real;
  xt::xarray<std::int64_t> ints;
  bool is_float() const { return dtype == "float32" || dtype == "float64"; }
  Shape shape() const;
};

// Reads a serialized TensorProto (ONNX's test_data_set_N/input_K.pb): the same checks and
// element types as the importer's initializers, external data refused. Throws xgrad::error
// naming the file.
OnnxTensor read_onnx_tensor(const std::string& path);

struct OnnxImportOptions {
  // Values for the model's graph inputs, by name. Float inputs take a float OnnxTensor (its
  // `real` values converted to the graph's dtype), integer inputs an integer one (`ints`); the
  // other kind is refused. An input not given takes zeros of the shape the model declares,
  // which must then be fixed.
  std::map<std::string, OnnxTensor> inputs;
  // Adds the gradients of the sum of every element of every output w.r.t. every float graph
  // input and every parameter leaf, named by their ONNX names in Graph::grads().
  bool gradients = false;
  // Limits, as the JSON importer's: elements of one tensor and of all the graph's values
  // together, and the bytes of the model file. External data is read tensor by tensor, only the
  // bytes of each (its offset and length in the file).
  std::size_t max_elements = max_array_elements;
  std::size_t max_file_bytes = std::size_t(1) << 30;
  // The most work the import computes, in element visits (Op::work, as the JSON importer's
  // ImportOptions::max_work): every node it builds (the backward of `gradients` too) is charged
  // before its forward runs, and every value it computes at import (shapes, constants) as it
  // reads and writes it; the first that would pass the limit is refused ("... computing the
  // graph takes more than N element visits ...; raise it with OnnxImportOptions::max_work").
  // So a refused import has computed at most max_work. `xgrad import --max-work N` sets it.
  double max_work = max_import_work;
};

// Imports the ONNX model at `path`, computing in T (float or double: the model's float tensors
// are converted). The graph has
//   - a mask leaf (Graph::mask) for each bool graph input, and for each float one that only
//     Casts to bool read (true where it is not 0);
//   - an input leaf for each other float graph input (its ONNX name), an index leaf for each integer
//     one that Gather or a loss reads as ids, as it is or reshaped (token ids, labels); integers
//     read only as shapes are read at import, and ids computed from them refused;
//   - a parameter leaf for each float initializer the outputs depend on through float
//     computations (its ONNX name), so it can be differentiated and fine-tuned (never read at
//     import: one used also as a shape, exponent or condition is refused); integer
//     initializers, and float ones used only as shapes, masks or conditions, are read at import;
//   - the model's outputs as named outputs (Graph::outputs()), by their ONNX names.
// Shapes are fixed at import: Shape, ConstantOfShape, Range, Cast, comparisons and the shape
// arithmetic on them are computed once, and what depends on the inputs at run time maps onto
// xgrad ops, each with its VJP (docs/onnx.md). External data is read only from files beneath the
// model's directory: a relative path without "..", through no symbolic link that leads out of it
// (InputFile::beneath), the tensor's bytes only. Throws xgrad::error naming the file and, for a node, its
// index, name, op_type, domain and opset ("m.onnx: node 3 'Conv_0' (Conv, domain ai.onnx, opset
// 13): op not supported") for an op, attribute, type or shape the importer does not handle, and
// for a truncated or malformed file.
template <class T>
std::unique_ptr<Graph<T>> import_onnx(const std::string& path, const OnnxImportOptions& options = {});

// The same from the bytes of a model in memory, named `what` in errors; external data is refused.
template <class T>
std::unique_ptr<Graph<T>> import_onnx_bytes(const std::string& bytes, const std::string& what,
                                            const OnnxImportOptions& options = {});

// The names of the model's graph inputs that are not initializers (what a caller feeds), in order.
std::vector<std::string> onnx_graph_inputs(const std::string& path);
// The names of the model's graph outputs, in order.
std::vector<std::string> onnx_graph_outputs(const std::string& path);

// "float32" or "float64": the float type of the model's first float graph input or initializer
// ("float32" if it has none), the dtype `xgrad import` computes in by default.
std::string onnx_model_float_type(const std::string& path);

}  // namespace xgrad
