#include <xgrad/lib/array_io.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

namespace {

constexpr char npy_magic[] = "\x93NUMPY";
constexpr std::size_t npy_magic_size = 6;
constexpr std::size_t max_json_depth = 32;

bool host_is_little_endian() {
  const std::uint16_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

std::string read_file(const std::string& path, std::size_t offset, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(path + ": cannot open the file");
  in.seekg(static_cast<std::streamoff>(offset));
  std::string bytes(n, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  if (static_cast<std::size_t>(in.gcount()) != n) throw error(path + ": the file changed while being read");
  return bytes;
}

std::size_t file_size(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw error(path + ": " + (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw error(path + ": cannot read its size: " + ec.message());
  return static_cast<std::size_t>(size);
}

// The dict of a .npy header: {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }
struct NpyHeader {
  std::string dtype;
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
    if (d.size() == 3 && (d[0] == '<' || d[0] == '>' || d[0] == '=') && d[1] == 'f' && (d[2] == '4' || d[2] == '8')) {
      h.item_size = d[2] == '4' ? 4 : 8;
      h.dtype = d[2] == '4' ? "float32" : "float64";
      h.swap = (d[0] == '<' && !little) || (d[0] == '>' && little);
      return;
    }
    fail("dtype '" + d + "' is not supported: float32 ('<f4', '>f4') or float64 ('<f8', '>f8') only");
  }

  std::string_view m_s;
  const std::string& m_what;
  std::size_t m_pos = 0;
};

// Reads and checks everything up to the data, through `read(offset, n)`, for a source of
// `total` bytes. Nothing larger than the header is read or allocated.
NpyHeader read_npy_header(const std::function<std::string(std::size_t, std::size_t)>& read,
                          std::size_t total, const std::string& what) {
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
  h.data_offset = prelude + header_len;
  if (!bounded_size(h.shape)) {
    fail("shape " + shape_str(h.shape) + " has more than " + std::to_string(max_array_elements) +
         " elements (axes of length 0 counted as 1), the most xgrad reads");
  }
  std::size_t count = 1;
  for (std::size_t d : h.shape) count *= d;
  const std::size_t data_bytes = count * h.item_size, available = total - h.data_offset;
  if (data_bytes != available) {
    fail("shape " + shape_str(h.shape) + " of " + h.dtype + " needs " + std::to_string(data_bytes) +
         " data bytes, the file has " + std::to_string(available) + (available < data_bytes ? " (truncated)" : " (trailing bytes)"));
  }
  return h;
}

// Decodes each element straight to its row-major place: no copy beyond the result.
StoredArray decode_npy_data(const NpyHeader& h, const std::string& data) {
  StoredArray out;
  out.dtype = h.dtype;
  out.values = xt::xarray<double>::from_shape(h.shape);
  const std::size_t count = out.values.size(), rank = h.shape.size();
  std::vector<std::size_t> index(rank, 0);  // Fortran order: the first axis varies fastest
  for (std::size_t i = 0; i < count; ++i) {
    unsigned char b[8];
    std::memcpy(b, data.data() + i * h.item_size, h.item_size);
    if (h.swap) std::reverse(b, b + h.item_size);
    double x;
    if (h.item_size == 4) {
      float f;
      std::memcpy(&f, b, 4);
      x = f;
    } else {
      std::memcpy(&x, b, 8);
    }
    std::size_t c = i;
    if (h.fortran) {
      c = 0;
      for (std::size_t a = 0; a < rank; ++a) c = c * h.shape[a] + index[a];
      for (std::size_t a = 0; a < rank && ++index[a] == h.shape[a]; ++a) index[a] = 0;
    }
    out.values.data()[c] = x;
  }
  return out;
}

// Builds shape and data in one SAX pass: no DOM, so memory stays a small multiple of the text.
class ArrayBuilder {
 public:
  bool null() { return fail("expected a number, got null"); }
  bool boolean(bool) { return fail("expected a number, got a boolean"); }
  bool number_integer(Json::number_integer_t v) { return push(static_cast<double>(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return push(static_cast<double>(v)); }
  bool number_float(Json::number_float_t v, const std::string&) { return push(v); }
  bool string(std::string& s) {
    if (s == "nan") return push(std::numeric_limits<double>::quiet_NaN());
    if (s == "inf") return push(std::numeric_limits<double>::infinity());
    if (s == "-inf") return push(-std::numeric_limits<double>::infinity());
    return fail("expected a number, got a string (only \"nan\", \"inf\" and \"-inf\" stand for numbers)");
  }
  bool binary(Json::binary_t&) { return fail("expected a number"); }
  bool key(std::string&) { return fail("expected a number or an array, got an object"); }
  bool start_object(std::size_t) { return fail("expected a number or an array, got an object"); }
  bool end_object() { return false; }
  bool start_array(std::size_t) {
    if (m_rank && m_counts.size() + 1 > *m_rank) return fail("ragged: an array where a number belongs");
    if (m_counts.size() + 1 > max_json_depth) return fail("nested deeper than " + std::to_string(max_json_depth) + " levels");
    if (!m_counts.empty()) ++m_counts.back();
    m_counts.push_back(0);
    return true;
  }
  bool end_array() {
    const std::size_t depth = m_counts.size(), length = m_counts.back();
    m_counts.pop_back();  // a complaint about this array names the array itself
    if (length == 0) {
      if (!m_rank) m_rank = depth;
      else if (*m_rank != depth) return fail("ragged: an empty array where deeper arrays belong", true);
    }
    if (m_shape.size() < depth) m_shape.resize(depth, unknown);
    if (m_shape[depth - 1] == unknown) m_shape[depth - 1] = length;
    else if (m_shape[depth - 1] != length) {
      return fail("ragged: " + std::to_string(length) + " elements where other rows have " +
                  std::to_string(m_shape[depth - 1]), true);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    if (m_problem.empty()) m_problem = std::string("not JSON: ") + e.what();
    return false;
  }

  const std::string& problem() const { return m_problem; }
  StoredArray result() const {
    StoredArray out;
    out.dtype = "float64";
    out.values = xt::xarray<double>::from_shape(Shape(m_shape.begin(), m_shape.begin() + static_cast<long>(m_rank.value_or(0))));
    std::copy(m_data.begin(), m_data.end(), out.values.begin());
    return out;
  }

 private:
  static constexpr std::size_t unknown = std::numeric_limits<std::size_t>::max();

  bool push(double v) {
    const std::size_t depth = m_counts.size();
    if (!m_rank) m_rank = depth;
    else if (*m_rank != depth) return fail("ragged: a number where an array belongs");
    if (!m_counts.empty()) ++m_counts.back();
    m_data.push_back(v);
    return true;
  }
  // The problem, at the index path of what is being read: in each enclosing array the element
  // already counted; in the innermost one the next element, or, for a complaint about an array
  // just closed, that array.
  bool fail(const std::string& problem, bool closed_array = false) {
    std::string where;
    for (std::size_t i = 0; i < m_counts.size(); ++i) {
      const bool next = i + 1 == m_counts.size() && !closed_array;
      where += "[" + std::to_string(next ? m_counts[i] : m_counts[i] - 1) + "]";
    }
    m_problem = (where.empty() ? "" : where + ": ") + problem;
    return false;
  }

  std::vector<std::size_t> m_counts;  // elements seen so far in each open array
  Shape m_shape;
  std::optional<std::size_t> m_rank;
  std::vector<double> m_data;
  std::string m_problem;
};

template <class T>
Json nested(const xt::xarray<T>& a, std::size_t axis, std::size_t offset) {
  if (axis == a.dimension()) return encode_number(static_cast<double>(a.data()[offset]));
  std::size_t stride = 1;
  for (std::size_t i = axis + 1; i < a.dimension(); ++i) stride *= a.shape()[i];
  Json j = Json::array();
  for (std::size_t i = 0; i < a.shape()[axis]; ++i) j.push_back(nested(a, axis + 1, offset + i * stride));
  return j;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

StoredArray parse_npy(std::string_view bytes, const std::string& what) {
  const auto read = [&](std::size_t offset, std::size_t n) { return std::string(bytes.substr(offset, n)); };
  const NpyHeader h = read_npy_header(read, bytes.size(), what);
  return decode_npy_data(h, read(h.data_offset, bytes.size() - h.data_offset));
}

StoredArray read_npy(const std::string& path) {
  const std::size_t total = file_size(path);
  const auto read = [&](std::size_t offset, std::size_t n) { return read_file(path, offset, n); };
  const NpyHeader h = read_npy_header(read, total, path);
  return decode_npy_data(h, read(h.data_offset, total - h.data_offset));
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
  const std::string bytes = npy_bytes(array);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw error(path + ": cannot write the file");
}

StoredArray parse_json_array(std::string_view text, const std::string& what) {
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    throw error(what + ": not JSON: a NUL byte at byte " + std::to_string(nul));
  }
  ArrayBuilder builder;
  if (!Json::sax_parse(text, &builder) || !builder.problem().empty()) {
    throw error(what + ": " + (builder.problem().empty() ? "not JSON" : builder.problem()));
  }
  return builder.result();
}

std::string read_text_file(const std::string& path, std::size_t max_bytes) {
  const std::size_t size = file_size(path);
  if (size > max_bytes) {
    throw error(path + ": " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                " this reader takes");
  }
  return read_file(path, 0, size);
}

StoredArray read_json_array(const std::string& path) { return parse_json_array(read_text_file(path), path); }

template <class T>
Json array_to_json(const xt::xarray<T>& array) {
  return nested(array, 0, 0);
}

StoredArray read_array(const std::string& path) {
  if (ends_with(path, ".npy")) return read_npy(path);
  if (ends_with(path, ".json")) return read_json_array(path);
  throw error(path + ": unknown array file type (expected a name ending in .npy or .json)");
}

template std::string npy_bytes(const xt::xarray<float>&);
template std::string npy_bytes(const xt::xarray<double>&);
template void write_npy(const std::string&, const xt::xarray<float>&);
template void write_npy(const std::string&, const xt::xarray<double>&);
template Json array_to_json(const xt::xarray<float>&);
template Json array_to_json(const xt::xarray<double>&);

}  // namespace xgrad
