// The names of an enum's values in one table, for printing them and for reading them back (the
// command line, Python's keyword strings, checkpoint metadata):
//   inline constexpr EnumName<QkNorm> qk_norm_names[] = {{QkNorm::none, "none"}, ...};
#pragma once

#include <cstddef>
#include <string>

#include <xgrad/graph/error.hpp>

namespace xgrad {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// v's name in the table; "?" for a value it lacks.
template <class E, std::size_t N>
const char* name_in(const EnumName<E> (&names)[N], E v) {
  for (const EnumName<E>& n : names) {
    if (n.value == v) return n.name;
  }
  return "?";
}

// The value the table names `text`. Throws xgrad::error otherwise: `<what> "x" is neither "a" nor
// "b"` for a table of two names, `<what> "x" is none of "a", "b", "c"` for more.
template <class E, std::size_t N>
E parse_name(const EnumName<E> (&names)[N], const std::string& text, const std::string& what) {
  std::string listed;
  for (std::size_t i = 0; i < N; ++i) {
    if (text == names[i].name) return names[i].value;
    listed += std::string(i == 0 ? "" : N == 2 ? " nor " : ", ") + "\"" + names[i].name + "\"";
  }
  throw error(what + " \"" + text + "\" is " + (N == 2 ? "neither " : "none of ") + listed);
}

}  // namespace xgrad
