// JSON nested arrays: a one-pass SAX reader (no DOM) and a writer.
#include <xgrad/lib/array_io.hpp>

#include <limits>
#include <optional>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/json.hpp>
#include <xgrad/lib/files.hpp>

namespace xgrad {

namespace {

constexpr std::size_t max_json_depth = 32;

// Reads shape and data in SAX passes, no DOM: the first checks the text and finds the shape,
// storing nothing; the second writes the numbers into an array of that shape (`out`). So memory
// is the text and the array, and a text claiming more than max_array_elements numbers is refused
// before anything grows with it.
class ArrayBuilder {
 public:
  ArrayBuilder(std::size_t max_elements, double* out) : m_max(max_elements), m_out(out) {}

  bool null() { return fail("expected a number, got null"); }
  bool boolean(bool) { return fail("expected a number, got a boolean"); }
  bool number_integer(Json::number_integer_t v) { return push(static_cast<double>(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return push(static_cast<double>(v)); }
  bool number_float(Json::number_float_t v, const std::string&) { return push(v); }
  bool string(std::string& s) {
    if (const auto x = decode_number_string(s)) return push(*x);
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
  Shape shape() const { return Shape(m_shape.begin(), m_shape.begin() + static_cast<long>(m_rank.value_or(0))); }

 private:
  static constexpr std::size_t unknown = std::numeric_limits<std::size_t>::max();

  bool push(double v) {
    const std::size_t depth = m_counts.size();
    if (!m_rank) m_rank = depth;
    else if (*m_rank != depth) return fail("ragged: a number where an array belongs");
    if (m_size == m_max) return fail("more than " + std::to_string(m_max) + " numbers, the most an array holds");
    if (!m_counts.empty()) ++m_counts.back();
    if (m_out) m_out[m_size] = v;
    ++m_size;
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
  std::size_t m_max;
  double* m_out;
  std::size_t m_size = 0;
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

}  // namespace

StoredArray parse_json_array(std::string_view text, const std::string& what, std::size_t max_elements) {
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    throw error(what + ": not JSON: a NUL byte at byte " + std::to_string(nul));
  }
  ArrayBuilder check(max_elements, nullptr);
  if (!Json::sax_parse(text, &check) || !check.problem().empty()) {
    throw error(what + ": " + (check.problem().empty() ? "not JSON" : check.problem()));
  }
  const Shape shape = check.shape();
  if (!bounded_size(shape, max_elements)) {
    throw error(what + ": shape " + shape_str(shape) + " has more than " + std::to_string(max_elements) +
                " elements (axes of length 0 counted as 1), the most an array holds");
  }
  StoredArray out;
  out.dtype = "float64";
  out.values = xt::xarray<double>::from_shape(shape);
  ArrayBuilder fill(max_elements, out.values.data());
  Json::sax_parse(text, &fill);
  return out;
}

StoredArray read_json_array(const std::string& path) { return parse_json_array(read_text_file(path), path); }

template <class T>
Json array_to_json(const xt::xarray<T>& array) {
  return nested(array, 0, 0);
}

template Json array_to_json(const xt::xarray<float>&);
template Json array_to_json(const xt::xarray<double>&);

}  // namespace xgrad
