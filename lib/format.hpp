// Printing arrays for people: nested brackets, like numpy's repr without the padding.
#pragma once

#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/error.hpp>

namespace xgrad {

// "[[2, 2], [1.5, 3]]": each value with `precision` significant digits (%g), NaN and infinities
// as nan, inf, -inf; a scalar as its value.
template <class T>
std::string format_array(const xt::xarray<T>& a, int precision = 6);

// unravel_index(flat, shape) and index_str(index), for the indices of its elements, are in
// graph/error.hpp.

}  // namespace xgrad
