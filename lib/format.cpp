#include <xgrad/lib/format.hpp>

#include <cstdio>

namespace xgrad {

namespace {

template <class T>
void format_axis(const xt::xarray<T>& a, std::size_t axis, std::size_t offset, int precision,
                 std::string& out) {
  if (axis == a.dimension()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(a.data()[offset]));
    out += buf;
    return;
  }
  out += '[';
  const std::size_t stride = a.strides().empty() ? 1 : static_cast<std::size_t>(a.strides()[axis]);
  for (std::size_t i = 0; i < a.shape()[axis]; ++i) {
    if (i) out += ", ";
    format_axis(a, axis + 1, offset + i * stride, precision, out);
  }
  out += ']';
}

}  // namespace

template <class T>
std::string format_array(const xt::xarray<T>& a, int precision) {
  std::string out;
  format_axis(a, 0, 0, precision, out);
  return out;
}

template std::string format_array(const xt::xarray<float>&, int);
template std::string format_array(const xt::xarray<double>&, int);

}  // namespace xgrad
