// The extension module xgrad._xgrad; python/xgrad/__init__.py is the package users import.
#include "common.hpp"

PYBIND11_MODULE(_xgrad, m) {
  namespace py = pybind11;
  m.doc() = "xgrad: reverse-mode autodiff over an expression graph (the C++ library, from Python).";
  // xgrad.Error: every caller error of the library, a ValueError with the C++ message.
  py::register_exception<xgrad::error>(m, "Error", PyExc_ValueError);
  xgrad::python::bind_graph(m);
  xgrad::python::bind_ops(m);
  xgrad::python::bind_blocks(m);
  xgrad::python::bind_training(m);
}
