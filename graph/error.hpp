// xgrad::error, the one exception type for caller errors, and the shape, index and number
// formatting its messages use.
#pragma once

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace xgrad {

// Thrown for every caller error: bad shapes, bad arguments, bad files. The message names the op,
// the node and the shapes involved, e.g. "matmul (node 7): inner sizes differ: a is (2, 3), b is (4, 5)".
class error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// "(2, 3)"; a rank-1 shape is "(5,)" and a scalar "()", as numpy prints them.
template <class S>
std::string shape_str(const S& shape) {
  std::ostringstream out;
  out << '(';
  std::size_t i = 0;
  for (auto d : shape) out << (i++ ? ", " : "") << d;
  if (i == 1) out << ',';
  out << ')';
  return out.str();
}

// The multi-index of element `flat` of a row-major array of this shape (flat below its element
// count), and its text "[0, 1]": a message's "ids[1, 3]", "the value at [0, 2]".
template <class S>
std::vector<std::size_t> unravel_index(std::size_t flat, const S& shape) {
  std::vector<std::size_t> index(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

inline std::string index_str(const std::vector<std::size_t>& index) {
  std::string s = "[";
  for (std::size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
  return s + "]";
}

// A number for a message: up to 6 significant digits, "nan", "inf" as printf writes them.
inline std::string number_str(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

// Runs f() and returns what it returns; an xgrad::error it throws is thrown again with prefix()
// in front of its message ("<op> (node N): ", "graph JSON: "). prefix is called only then.
template <class Prefix, class F>
auto with_context(const Prefix& prefix, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const error& e) {
    throw error(prefix() + e.what());
  }
}

// Whether two shapes (any containers of sizes) are equal.
template <class A, class B>
bool shapes_equal(const A& a, const B& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace xgrad
