// Printing arrays for people: nested brackets, like numpy's repr without the padding.
#pragma once

#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

namespace xgrad {

// "[[2, 2], [1.5, 3]]": each value with `precision` significant digits (%g), NaN and infinities
// as nan, inf, -inf; a scalar as its value.
template <class T>
std::string format_array(const xt::xarray<T>& a, int precision = 6);

// The multi-index of element `flat` of a row-major array of this shape, and its text "[0, 1]".
std::vector<std::size_t> unravel_index(std::size_t flat, const xt::svector<std::size_t, 4>& shape);
std::string index_str(const std::vector<std::size_t>& index);

}  // namespace xgrad
