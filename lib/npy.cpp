// .npy files (numpy's format, NEP 1): a reader that validates everything against the file size
// before it allocates, and a writer of version 1.0, little-endian, C order.
#include <xgrad/lib/array_io.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/shape.hpp>
#include <xgrad/lib/files.hpp>

namespace xgrad {

namespace {

constexpr char npy_magic[] = "\x93NUMPY";
constexpr std::size_t npy_magic_size = 6;

bool host_is_little_endian() {
  const std::uint16_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// The dict of a .npy header: {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }
struct NpyHeader {
  std::string dtype;
  std::string descr;  // as the header spells it: '<f8'
  std::size_t item_size = 0;
  bool swap = false;     // stored in the other byte order than the host's
  bool fortran = false;
  Shape shape;
  std::size_t data_offset = 0;
};

class DictParser {
 public:
  DictParser(std::string_view text, const std::string& what) : m_s(text), m_what(what) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!peek('}')) {
      const std::string key = quoted();
      expect(':');
      if (key == "descr") {
        once(have_descr, key);
        descr(quoted(), h);
      } else if (key == "fortran_order") {
        once(have_order, key);
        h.fortran = boolean();
      } else if (key == "shape") {
        once(have_shape, key);
        h.shape = tuple();
      } else {
        fail("unknown key '" + key + "' in the header dict");
      }
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (m_pos != m_s.size()) fail("unexpected text after the header dict");
    if (!have_descr) fail("the header has no 'descr'");
    if (!have_order) fail("the header has no 'fortran_order'");
    if (!have_shape) fail("the header has no 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const { throw error(m_what + ": " + problem); }
  void skip_space() {
    for (; m_pos < m_s.size(); ++m_pos) {
      const char c = m_s[m_pos];
      if (c != ' ' && c != '\t' && c != '\r' && c != '\n') break;
    }
  }
  bool peek(char c) {
    skip_space();
    return m_pos < m_s.size() && m_s[m_pos] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("malformed header dict: expected '") + c + "' at byte " + std::to_string(m_pos));
    ++m_pos;
  }
  void once(bool& seen, const std::string& key) {
    if (seen) fail("the header dict has '" + key + "' twice");
    seen = true;
  }
  std::string quoted() {
    skip_space();
    if (m_pos >= m_s.size() || (m_s[m_pos] != '\'' && m_s[m_pos] != '"')) fail("malformed header dict: expected a quoted string");
    const char q = m_s[m_pos++];
    const std::size_t end = m_s.find(q, m_pos);
    if (end == std::string_view::npos) fail("malformed header dict: unterminated string");
    std::string s(m_s.substr(m_pos, end - m_pos));
    m_pos = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (m_s.substr(m_pos, std::strlen(word)) == word) {
        m_pos += std::strlen(word);
        return value;
      }
    }
    fail("'fortran_order' must be True or False");
  }
  Shape tuple() {
    Shape shape;
    expect('(');
    while (!peek(')')) {
      if (m_pos < m_s.size() && m_s[m_pos] == '-') fail("negative axis length in 'shape'");
      std::size_t d = 0;
      const std::size_t start = m_pos;
      while (m_pos < m_s.size() && m_s[m_pos] >= '0' && m_s[m_pos] <= '9') {
        const auto digit = static_cast<std::size_t>(m_s[m_pos++] - '0');
        if (d > (std::numeric_limits<std::size_t>::max() - digit) / 10) fail("axis length overflows in 'shape'");
        d = d * 10 + digit;
      }
      if (m_pos == start) fail("'shape' must be a tuple of non-negative integers");
      shape.push_back(d);
      if (!peek(')')) expect(',');
    }
    expect(')');
    return shape;
  }
  void descr(const std::string& d, NpyHeader& h) const {
    const bool little = host_is_little_endian();
    if (d.size() == 3 && (d[0] == '<' || d[0] == '>' || d[0] == '=') && (d[1] == 'f' || d[1] == 'i') &&
        (d[2] == '4' || d[2] == '8')) {
      h.item_size = d[2] == '4' ? 4 : 8;
      h.dtype = std::string(d[1] == 'f' ? "float" : "int") + (d[2] == '4' ? "32" : "64");
      h.descr = d;
      h.swap = (d[0] == '<' && !little) || (d[0] == '>' && little);
      return;
    }
    if (d == "|b1") {  // numpy's bool, read as the integers 0 and 1
      h.item_size = 1;
      h.dtype = "bool";
      h.descr = d;
      return;
    }
    fail("dtype '" + d + "' is not supported: float32 ('<f4', '>f4') or float64 ('<f8', '>f8') only" +
         std::string(d.find('i') != std::string::npos || d.find('u') != std::string::npos
                         ? " (int32 or int64 where integers are read)" : ""));
  }

  std::string_view m_s;
  const std::string& m_what;
  std::size_t m_pos = 0;
};

// Reads and checks everything up to the data, through `read(offset, n)`, for a source of
// `total` bytes. Nothing larger than the header is read or allocated.
NpyHeader read_npy_header(const std::function<std::string(std::size_t, std::size_t)>& read,
                          std::size_t total, const std::string& what, bool integers = false) {
  const auto fail = [&](const std::string& problem) -> void { throw error(what + ": " + problem); };
  if (total < 10) fail("too short for a .npy file (" + std::to_string(total) + " bytes)");
  const std::string pre = read(0, std::min<std::size_t>(total, 12));
  if (pre.compare(0, npy_magic_size, npy_magic, npy_magic_size) != 0) fail("not a .npy file (no \\x93NUMPY magic)");
  const auto major = static_cast<unsigned char>(pre[6]), minor = static_cast<unsigned char>(pre[7]);
  if (major < 1 || major > 3 || minor != 0) {
    fail("format version " + std::to_string(major) + "." + std::to_string(minor) + " is not supported (1.0, 2.0, 3.0)");
  }
  const auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(pre[i])); };
  std::size_t header_len = 0, prelude = 0;
  if (major == 1) {
    header_len = byte(8) | byte(9) << 8;
    prelude = 10;
  } else {
    if (total < 12) fail("too short for a version " + std::to_string(major) + ".0 .npy file");
    header_len = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    prelude = 12;
  }
  if (header_len > total - prelude) {
    fail("the header claims " + std::to_string(header_len) + " bytes but the file has " + std::to_string(total - prelude) +
         " after the prelude (truncated)");
  }
  NpyHeader h = DictParser(read(prelude, header_len), what).parse();
  if ((h.dtype[0] == 'i' || h.dtype == "bool") != integers) {
    fail("dtype '" + h.descr + "' is not supported: " +
         (integers ? "int32 ('<i4', '>i4'), int64 ('<i8', '>i8') or bool ('|b1') only"
                   : "float32 ('<f4', '>f4') or float64 ('<f8', '>f8') only"));
  }
  h.data_offset = prelude + header_len;
  if (!bounded_size(h.shape)) {
    fail("shape " + shape_str(h.shape) + " has more than " + std::to_string(max_array_elements) +
         " elements (axes of length 0 counted as 1), the most xgrad reads");
  }
  const std::size_t data_bytes = shape_size(h.shape) * h.item_size, available = total - h.data_offset;
  if (data_bytes != available) {
    fail("shape " + shape_str(h.shape) + " of " + h.dtype + " needs " + std::to_string(data_bytes) +
         " data bytes, the file has " + std::to_string(available) + (available < data_bytes ? " (truncated)" : " (trailing bytes)"));
  }
  return h;
}

// Decodes each element of `data` with convert(bytes, item size), in the host's byte order,
// straight to its row-major place in `out`: no copy beyond the result.
template <class E, class F>
void decode_elements(const NpyHeader& h, const std::string& data, E* out, F convert) {
  const std::size_t count = shape_size(h.shape), rank = h.shape.size();
  std::vector<std::size_t> index(rank, 0);  // Fortran order: the first axis varies fastest
  for (std::size_t i = 0; i < count; ++i) {
    unsigned char b[8];
    std::memcpy(b, data.data() + i * h.item_size, h.item_size);
    if (h.swap) std::reverse(b, b + h.item_size);
    std::size_t c = i;
    if (h.fortran) {
      c = 0;
      for (std::size_t a = 0; a < rank; ++a) c = c * h.shape[a] + index[a];
      for (std::size_t a = 0; a < rank && ++index[a] == h.shape[a]; ++a) index[a] = 0;
    }
    out[c] = convert(b, h.item_size);
  }
}

// Decodes each element straight to its row-major place: no copy beyond the result.
StoredArray decode_npy_data(const NpyHeader& h, const std::string& data) {
  StoredArray out;
  out.dtype = h.dtype;
  out.values = xt::xarray<double>::from_shape(h.shape);
  decode_elements(h, data, out.values.data(), [](const unsigned char* b, std::size_t size) {
    if (size == 8) {
      double x;
      std::memcpy(&x, b, 8);
      return x;
    }
    float f;
    std::memcpy(&f, b, 4);
    return double(f);
  });
  return out;
}

}  // namespace

StoredArray parse_npy(std::string_view bytes, const std::string& what) {
  const auto read = [&](std::size_t offset, std::size_t n) { return std::string(bytes.substr(offset, n)); };
  const NpyHeader h = read_npy_header(read, bytes.size(), what);
  return decode_npy_data(h, read(h.data_offset, bytes.size() - h.data_offset));
}

StoredArray read_npy(const std::string& path) {
  const InputFile file(path);
  const std::size_t total = file.size();
  const auto read = [&](std::size_t offset, std::size_t n) { return file.read(offset, n); };
  const NpyHeader h = read_npy_header(read, total, path);
  return decode_npy_data(h, read(h.data_offset, total - h.data_offset));
}

xt::xarray<std::int64_t> read_npy_integers(const std::string& path) {
  const InputFile file(path);
  const std::size_t total = file.size();
  const auto read = [&](std::size_t offset, std::size_t n) { return file.read(offset, n); };
  const NpyHeader h = read_npy_header(read, total, path, true);
  auto out = xt::xarray<std::int64_t>::from_shape(h.shape);
  decode_elements(h, read(h.data_offset, total - h.data_offset), out.data(),
                  [&](const unsigned char* b, std::size_t size) -> std::int64_t {
                    if (size == 1) {
                      if (b[0] > 1) throw error(path + ": a bool is " + std::to_string(int(b[0])) + ", not 0 or 1");
                      return b[0];
                    }
                    if (size == 4) {
                      std::int32_t v;
                      std::memcpy(&v, b, 4);
                      return v;
                    }
                    std::int64_t x;
                    std::memcpy(&x, b, 8);
                    return x;
                  });
  return out;
}

template <class T>
std::string npy_bytes(const xt::xarray<T>& array) {
  std::string shape = "(";
  for (std::size_t i = 0; i < array.dimension(); ++i) shape += std::to_string(array.shape()[i]) + (array.dimension() == 1 || i + 1 < array.dimension() ? "," : "");
  shape += ")";
  std::string header = std::string("{'descr': '<f") + (sizeof(T) == 4 ? "4" : "8") +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so that magic + version + length + header is a multiple of 64, ending in \n.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(npy_magic, npy_magic_size);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const std::size_t start = out.size();
  out.resize(start + array.size() * sizeof(T));
  for (std::size_t i = 0; i < array.size(); ++i) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &array.data()[i], sizeof(T));
    if (!host_is_little_endian()) std::reverse(b, b + sizeof(T));
    std::memcpy(out.data() + start + i * sizeof(T), b, sizeof(T));
  }
  return out;
}

template <class T>
void write_npy(const std::string& path, const xt::xarray<T>& array) {
  write_file_atomically(path, npy_bytes(array));
}

template std::string npy_bytes(const xt::xarray<float>&);
template std::string npy_bytes(const xt::xarray<double>&);
template void write_npy(const std::string&, const xt::xarray<float>&);
template void write_npy(const std::string&, const xt::xarray<double>&);

}  // namespace xgrad
