// What the binding files share: how a graph and a Var look from Python, numpy <-> xtensor, and
// the one way a binding calls into the library (the GIL released, the graph locked).
//
// A Python Graph is a Box: the C++ graph and a mutex, shared by every Var of it (a Var keeps its
// graph alive). Its dtype is the variant's alternative: float32 or float64. The library's calls
// run without the GIL, so two Python threads may use two graphs at once; on one graph they take
// turns (the mutex). The module adds no semantics: each binding is the C++ call it names.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <xgrad/xgrad.hpp>

namespace xgrad::python {

namespace py = pybind11;

template <class T>
struct Box {
  explicit Box(std::unique_ptr<Graph<T>> g) : graph(std::move(g)) {}
  std::unique_ptr<Graph<T>> graph;
  std::mutex lock;
};
template <class T>
using BoxPtr = std::shared_ptr<Box<T>>;

template <class T>
struct TypedVar {
  using type = T;
  BoxPtr<T> box;
  Var<T> var;
};

// xgrad.Var and xgrad.Graph.
struct PyVar {
  std::variant<TypedVar<float>, TypedVar<double>> v;
};
struct PyGraph {
  std::variant<BoxPtr<float>, BoxPtr<double>> g;
};

template <class T>
PyVar wrap(const BoxPtr<T>& box, const Var<T>& var) {
  return PyVar{TypedVar<T>{box, var}};
}
template <class T>
std::vector<PyVar> wrap(const BoxPtr<T>& box, const std::vector<Var<T>>& vars) {
  std::vector<PyVar> out;
  out.reserve(vars.size());
  for (const Var<T>& v : vars) out.push_back(wrap(box, v));
  return out;
}

// f() on the graph: without the GIL, holding the graph's lock. f must not touch Python objects.
template <class T, class F>
auto locked(const BoxPtr<T>& box, F&& f) {
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> guard(box->lock);
  return f();
}

// The Var of dtype T that v is; an xgrad::error naming both dtypes otherwise.
template <class T>
const TypedVar<T>& typed(const PyVar& v) {
  if (const auto* t = std::get_if<TypedVar<T>>(&v.v)) return *t;
  throw error(std::string("a ") + (std::is_same_v<T, float> ? "float64" : "float32") + " Var among " +
              dtype_name<T>() + " ones: every Var of a call belongs to one graph");
}
template <class T>
std::vector<Var<T>> typed(const std::vector<PyVar>& vs) {
  std::vector<Var<T>> out;
  out.reserve(vs.size());
  for (const PyVar& v : vs) out.push_back(typed<T>(v).var);
  return out;
}
template <class T>
Var<T> typed(const std::optional<PyVar>& v) {
  return v ? typed<T>(*v).var : Var<T>();
}

// The Var<T>s of a call's arguments: a PyVar's Var, a vector's, an optional's (empty for None).
template <class T>
const Var<T>& unwrap(const PyVar& v) {
  return typed<T>(v).var;
}
template <class T>
std::vector<Var<T>> unwrap(const std::vector<PyVar>& vs) {
  return typed<T>(vs);
}
template <class T>
Var<T> unwrap(const std::optional<PyVar>& v) {
  return typed<T>(v);
}

// Calls f(var of first, unwrap<T>(rest)...) on first's graph, T its dtype, and wraps the result
// (a Var or a vector of them). The rest are PyVars, vectors or optionals of them.
template <class F, class... Rest>
auto call(F&& f, const PyVar& first, const Rest&... rest) {
  return std::visit(
      [&](const auto& a) {
        using T = typename std::decay_t<decltype(a)>::type;
        auto result = locked(a.box, [&] { return f(a.var, unwrap<T>(rest)...); });
        return wrap(a.box, result);
      },
      first.v);
}

// The dtype of a graph or a Var, as numpy names it.
std::string dtype_of(const PyVar& v);

// numpy -> xtensor: any array (or nested sequence) numpy converts, in any layout (non-contiguous
// and negative strides are read through numpy), converted to T. An xgrad::error names `what`
// and the array's dtype when it is not numeric (complex, object, strings).
template <class T>
xt::xarray<T> to_xarray(const py::handle& obj, const std::string& what);
xt::xarray<std::int64_t> to_indices(const py::handle& obj, const std::string& what);
xt::xarray<bool> to_mask(const py::handle& obj, const std::string& what);

// xtensor -> numpy: a new array (a copy) of the same shape.
template <class V>
py::array to_numpy(const xt::xarray<V>& x) {
  std::vector<py::ssize_t> shape(x.shape().begin(), x.shape().end());
  py::array_t<V> out(shape);
  if (x.size()) std::copy(x.data(), x.data() + x.size(), out.mutable_data());
  return std::move(out);
}

// The parts of the module, one file each (python/<part>.cpp).
void bind_graph(py::module_& m);
void bind_ops(py::module_& m);
void bind_blocks(py::module_& m);
void bind_training(py::module_& m);

}  // namespace xgrad::python
