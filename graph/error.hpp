// xgrad::error, the one exception type for caller errors, and the shape formatting its messages use.
#pragma once

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>

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
