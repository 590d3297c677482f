// Array files: .npy (numpy's format, NEP 1) and JSON nested arrays.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/op.hpp>
#include <xgrad/lib/files.hpp>

namespace xgrad {

// An array as stored in a file: its dtype ("float32" or "float64") and its values, float32
// data converted exactly to double.
struct StoredArray {
  std::string dtype;
  xt::xarray<double> values;
};

// Reads a .npy file: float32 or float64 ('<f4', '>f4', '=f4', '<f8', '>f8', '=f8'), C or
// Fortran order, format version 1.0, 2.0 or 3.0. Before it allocates anything but the header it
// checks the magic, the version, the header length against the file size, the header dict (keys
// descr, fortran_order, shape in any order, nothing else), the shape (no negative axis, no
// overflow, at most max_array_elements) and that the data is exactly shape-product x item-size
// bytes to the end of the file.
// Throws xgrad::error naming the file and the problem.
StoredArray read_npy(const std::string& path);
// The same from bytes in memory; `what` names them in errors.
StoredArray parse_npy(std::string_view bytes, const std::string& what);

// Reads a .npy file of int32, int64 ('<i4', '>i4', '=i4', '<i8', ...) or bool ('|b1', as 0 and
// 1) with the same checks, for integer data such as token ids and masks (xgrad import --input).
xt::xarray<std::int64_t> read_npy_integers(const std::string& path);

// Writes a little-endian, C-order .npy file of format version 1.0 (float32 '<f4' or float64
// '<f8'); numpy.load reads it. Throws xgrad::error if the file cannot be written.
template <class T>
void write_npy(const std::string& path, const xt::xarray<T>& array);
template <class T>
std::string npy_bytes(const xt::xarray<T>& array);

// Reads a JSON file holding a number or rectangular nested arrays of numbers; "nan", "inf" and
// "-inf" strings stand for the non-finite values. The dtype is float64. Rejects ragged or
// deeper-than-32 nesting, other types, and anything after the value, naming the element
// ("q.json: [1][2]: expected a number, got a string"), and more than max_elements numbers (axes
// of length 0 counted as 1), before anything grows with them. Memory: the text and the array.
StoredArray read_json_array(const std::string& path);
StoredArray parse_json_array(std::string_view text, const std::string& what,
                             std::size_t max_elements = max_array_elements);

// Nested arrays as read_json_array reads them back, non-finite values as strings.
template <class T>
Json array_to_json(const xt::xarray<T>& array);

// read_npy for a name ending in .npy, read_json_array for .json; xgrad::error otherwise.
StoredArray read_array(const std::string& path);

}  // namespace xgrad
