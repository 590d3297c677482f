// The ONNX emitter: what an op's lowering (Op::to_onnx) writes ONNX nodes through. It names no
// protobuf type: lib/onnx_export.cpp implements it with ONNX's classes, and graph/ stays free of
// them. Every node is of the default domain (ai.onnx) at opset 17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <xgrad/graph/shape.hpp>

namespace xgrad {

// The ONNX opset and IR version every export is written at.
inline constexpr std::int64_t onnx_opset = 17;
inline constexpr std::int64_t onnx_ir_version = 8;

// An attribute of an ONNX node: an integer (INT), a float (FLOAT: ONNX stores 32 bits), a string
// (STRING) or a list of integers (INTS).
struct OnnxAttr {
  using Value = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>>;
  std::string name;
  Value value;
};

class OnnxEmitter {
 public:
  virtual ~OnnxEmitter() = default;
  // Appends a node `op_type` reading the values named `inputs` ("" for an optional input left
  // out) and returns the names of its `outputs` new values.
  virtual std::vector<std::string> emit(const std::string& op_type, const std::vector<std::string>& inputs,
                                        const std::vector<OnnxAttr>& attrs, std::size_t outputs) = 0;
  // An initializer of int64 values of `shape`, row-major (axes, shapes, indices); its name.
  virtual std::string int64s(const std::vector<std::int64_t>& values, const Shape& shape) = 0;
  // An initializer of the graph's float type holding values of `shape`, row-major, each rounded
  // to that type (exact for values that are of it); its name.
  virtual std::string floats(const std::vector<double>& values, const Shape& shape) = 0;
  // True for a float32 graph, false for a float64 one.
  virtual bool float32() const = 0;

  // One node of one output: its name.
  std::string op(const std::string& op_type, const std::vector<std::string>& inputs,
                 const std::vector<OnnxAttr>& attrs = {}) {
    return emit(op_type, inputs, attrs, 1)[0];
  }
  // A 1-D int64 initializer (axes, starts, a shape).
  std::string int64s(const std::vector<std::int64_t>& values) { return int64s(values, Shape{values.size()}); }
  // A float scalar of shape (), which broadcasts against anything.
  std::string scalar(double value) { return floats({value}, Shape{}); }
  // alpha as Mul's factor for an array of `shape`: the scalar alpha, or, in a float64 graph where
  // alpha has no exact float32 value, alpha repeated along the last axes (at least 2 elements;
  // Mul broadcasts it to the same products). ONNX Runtime fuses a MatMul and a Mul by a scalar
  // (or one-element) constant into FusedMatMul, whose float attribute alpha rounds a float64
  // scale to float32 (relative errors of 1e-8); it leaves a row alone. An array of one element
  // still gets the scalar.
  std::string factor(double alpha, const Shape& shape) {
    if (float32() || static_cast<double>(static_cast<float>(alpha)) == alpha) return scalar(alpha);
    Shape row;
    std::size_t n = 1;
    for (auto d = shape.rbegin(); d != shape.rend() && n < 2; ++d) {
      row.insert(row.begin(), *d);
      n *= *d;
    }
    if (n < 2) return scalar(alpha);
    return floats(std::vector<double>(n, alpha), row);
  }
  // The scalar -FLT_MAX or -DBL_MAX, the graph's lowest finite value: Max(m, lowest()) is m for
  // any m but -inf, which it makes finite.
  std::string lowest() {
    return scalar(float32() ? -double(std::numeric_limits<float>::max()) : -std::numeric_limits<double>::max());
  }
};

// What a lowering knows of the node it lowers.
struct OnnxNode {
  std::vector<std::string> inputs;  // the names of its inputs' values, in order
  std::vector<Shape> input_shapes;  // their shapes (an index leaf's: its ids')
  std::vector<bool> index_inputs;   // true where the input is an index leaf (int64 values)
  std::vector<std::string> bool_inputs;  // where the input is a mask leaf: its ONNX bool value; else ""
  std::vector<Shape> output_shapes;
  // The bool value of input i if it is a mask leaf, "" otherwise.
  std::string bool_input(std::size_t i) const { return i < bool_inputs.size() ? bool_inputs[i] : std::string(); }
  std::uint64_t step = 0;  // the graph's run state (Graph::set_step, Graph::set_training)
  bool training = true;
};

// The ONNX axis of `axis` (negative counts from the end) for an array of `rank` axes, as int64.
inline std::int64_t onnx_axis(long axis, std::size_t rank) {
  return axis < 0 ? static_cast<std::int64_t>(rank) + axis : axis;
}

// The permutation that swaps the last two of `rank` axes (rank >= 2): Transpose's perm.
inline std::vector<std::int64_t> onnx_swap_last_two(std::size_t rank) {
  std::vector<std::int64_t> perm;
  for (std::size_t i = 0; i < rank; ++i) perm.push_back(static_cast<std::int64_t>(i));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

// A shape as ONNX's int64 list.
inline std::vector<std::int64_t> onnx_dims(const Shape& shape) {
  return std::vector<std::int64_t>(shape.begin(), shape.end());
}

}  // namespace xgrad
