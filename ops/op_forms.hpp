// Forms of op class written once, for ops/*.cpp: AttrOp, an op of one attribute (scale's alpha,
// reshape's shape, softmax_vjp's axis), and RowOp, an AttrOp that maps each row along an axis
// to a row of the same length (softmax, log_softmax).
#pragma once

#include <memory>
#include <type_traits>

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>
#include <xgrad/ops/kernels/common.hpp>

namespace xgrad {

// The factory of an op of no attributes, for its make_<name>_op (ops/registry): attrs must be {}
// (xgrad::error naming a key otherwise).
template <class O>
std::shared_ptr<const Op> from_no_attrs(const JsonCursor& attrs) {
  attrs.check_object({});
  return std::make_shared<O>();
}

// Derived names its attribute's key, `static constexpr const char* key`, and writes the rest of
// an op (name(), infer_shape, run_forward, run_vjp, to_onnx, ...), reading the attribute as
// m_value. A is Shape (JSON an array of lengths), long (an integer) or double (a number, or
// "nan", "inf", "-inf").
template <class Derived, class A, std::size_t Arity = 1>
class AttrOp : public OpFor<Derived> {
 public:
  explicit AttrOp(A value) : m_value(std::move(value)) {}

  std::size_t arity() const override { return Arity; }
  Json attrs() const override { return {{Derived::key, m_value}}; }

  // The op from its exported attributes {key: value}, for its make_<name>_op (ops/registry).
  static std::shared_ptr<const Op> from_attrs(const JsonCursor& attrs) {
    attrs.check_object({Derived::key});
    const JsonCursor value = attrs[Derived::key];
    if constexpr (std::is_same_v<A, Shape>) {
      return std::make_shared<Derived>(value.shape());
    } else if constexpr (std::is_same_v<A, long>) {
      return std::make_shared<Derived>(value.integer());
    } else {
      static_assert(std::is_same_v<A, double>, "an attribute is a Shape, a long or a double");
      return std::make_shared<Derived>(value.number());
    }
  }

 protected:
  A m_value;
};

// Derived writes name(), to_onnx(), run_vjp() and the row kernel
//   template <class T> static void row(const T* x, T* y, std::size_t n, std::size_t stride)
// (a row of n elements at stride `stride`). y has x's shape; the axis (attribute "axis",
// negative counting from the end) must be within x's rank and of length >= 1 (xgrad::error
// naming the op otherwise).
template <class Derived>
class RowOp : public AttrOp<Derived, long> {
 public:
  static constexpr const char* key = "axis";

  explicit RowOp(long axis) : AttrOp<Derived, long>(axis) {}

  long axis() const { return this->m_value; }
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return detail::row_pass_work(Op::work(x, y), x[0], axis());
  }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    detail::nonempty_axis(axis(), x[0], this->name());
    return x[0];
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* src = x[0]->data();
    T* dst = y.data();
    detail::parallel_for_each_row(shape_of(y), axis(), [&](std::size_t offset, std::size_t n, std::size_t stride) {
      Derived::row(src + offset, dst + offset, n, stride);
    });
  }
};

}  // namespace xgrad
