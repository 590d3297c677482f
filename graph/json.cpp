#include <xgrad/graph/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace xgrad {

Json encode_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

void append_member(Json& object, std::string key, Json value) {
  if (!object.is_object()) throw error("append_member: not a JSON object");
  using Members = Json::object_t::Container;
  static_cast<Members&>(object.get_ref<Json::object_t&>()).emplace_back(std::move(key), std::move(value));
}

std::optional<double> decode_number_string(std::string_view s) {
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

namespace {

// A SAX handler that builds the document in one pass, keeping the order of keys, in time linear
// in its size: each member is appended to its object (Json keeps objects as vectors, whose own
// insertion searches them: quadratic in an object's size). It stops at the first syntax error,
// at nesting deeper than the cap (before the DOM is any deeper), and at a key given twice in one
// object (nlohmann keeps one of them silently; checked as the object closes), keeping the path
// to the current value for its message.
class Builder {
 public:
  explicit Builder(std::size_t max_depth) : m_max(max_depth) {}

  bool null() { return value(Json(nullptr)); }
  bool boolean(bool b) { return value(Json(b)); }
  bool number_integer(Json::number_integer_t i) { return value(Json(i)); }
  bool number_unsigned(Json::number_unsigned_t u) { return value(Json(u)); }
  bool number_float(Json::number_float_t x, const std::string&) { return value(Json(x)); }
  bool string(std::string& s) { return value(Json(std::move(s))); }
  bool binary(Json::binary_t& b) { return value(Json::binary(std::move(b))); }
  bool key(std::string& k) {
    m_levels.back().key = std::move(k);
    return true;
  }
  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return unique_keys() && close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    m_problem = std::string("not JSON: ") + e.what();
    return false;
  }

  const std::string& problem() const { return m_problem; }
  Json take() { return std::move(m_root); }

 private:
  struct Level {
    Json* json;       // the open object or array, inside its parent (which waits for it)
    std::string key;  // an object's key for the value to come
  };
  using Members = Json::object_t::Container;  // an object's members, in order

  // Puts v where the document is; the Json it now is.
  Json* place(Json v) {
    if (m_levels.empty()) {
      m_root = std::move(v);
      return &m_root;
    }
    Level& l = m_levels.back();
    if (l.json->is_array()) {
      auto& a = l.json->get_ref<Json::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    auto& members = static_cast<Members&>(l.json->get_ref<Json::object_t&>());
    members.emplace_back(std::move(l.key), std::move(v));
    return &members.back().second;
  }
  bool value(Json v) {
    place(std::move(v));
    return true;
  }
  bool open(Json empty) {
    if (m_levels.size() + 1 > m_max) {
      m_problem = "nested deeper than " + std::to_string(m_max) + " levels, more than the format allows";
      return false;
    }
    Json* at = place(std::move(empty));
    m_levels.push_back(Level{at, {}});
    return true;
  }
  // Refuses the object just read if it has a key twice (checked once it is whole: sorting its
  // keys costs O(n log n) and copies none).
  bool unique_keys() {
    const auto& members = m_levels.back().json->get_ref<const Json::object_t&>();
    std::vector<std::string_view> keys;
    keys.reserve(members.size());
    for (const auto& m : members) keys.push_back(m.first);
    std::sort(keys.begin(), keys.end());
    const auto twice = std::adjacent_find(keys.begin(), keys.end());
    if (twice == keys.end()) return true;
    m_problem = where() + ": the key \"" + std::string(twice->substr(0, 64)) + "\" appears twice";
    return false;
  }
  bool close() {
    m_levels.pop_back();
    return true;
  }
  // The path of the innermost open value, as JsonCursor writes it: "nodes[4]", "top level".
  std::string where() const {
    std::string path;
    for (std::size_t i = 0; i + 1 < m_levels.size(); ++i) {
      const Level& l = m_levels[i];
      if (l.json->is_object()) path += (path.empty() ? "" : ".") + l.json->get_ref<const Json::object_t&>().back().first;
      else path += "[" + std::to_string(l.json->size() - 1) + "]";
    }
    return path.empty() ? "top level" : path;
  }

  std::size_t m_max;
  Json m_root;
  std::vector<Level> m_levels;
  std::string m_problem;
};

const char* type_of(const Json& j) { return j.type_name(); }

}  // namespace

Json parse_json(std::string_view text, std::size_t max_depth, const std::string& what) {
  // nlohmann's parser stops at a NUL byte and would ignore what follows.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    throw error(what + ": not JSON: a NUL byte at byte " + std::to_string(nul));
  }
  Builder builder(max_depth);
  if (!Json::sax_parse(text, &builder) || !builder.problem().empty()) {
    throw error(what + ": " + (builder.problem().empty() ? "not JSON" : builder.problem()));
  }
  return builder.take();
}

void JsonCursor::fail(const std::string& problem) const {
  throw error((m_path.empty() ? std::string("top level") : m_path) + ": " + problem);
}

void JsonCursor::expect_object() const {
  if (!m_json->is_object()) fail(std::string("expected an object, got ") + type_of(*m_json));
}

void JsonCursor::check_object(std::initializer_list<const char*> required,
                              std::initializer_list<const char*> optional) const {
  expect_object();
  for (const char* key : required) {
    if (!m_json->contains(key)) fail(std::string("missing key \"") + key + "\"");
  }
  for (const auto& item : m_json->items()) {
    bool known = false;
    for (const char* key : required) known = known || item.key() == key;
    for (const char* key : optional) known = known || item.key() == key;
    if (!known) JsonCursor(item.value(), m_path.empty() ? item.key() : m_path + "." + item.key()).fail("unknown key");
  }
}

JsonCursor JsonCursor::operator[](const char* key) const {
  expect_object();
  const auto it = m_json->find(key);
  if (it == m_json->end()) fail(std::string("missing key \"") + key + "\"");
  return JsonCursor(*it, m_path.empty() ? key : m_path + "." + key);
}

std::optional<JsonCursor> JsonCursor::find(const char* key) const {
  expect_object();
  const auto it = m_json->find(key);
  if (it == m_json->end()) return std::nullopt;
  return JsonCursor(*it, m_path.empty() ? key : m_path + "." + key);
}

std::size_t JsonCursor::array_size() const {
  if (!m_json->is_array()) fail(std::string("expected an array, got ") + type_of(*m_json));
  return m_json->size();
}

JsonCursor JsonCursor::operator[](std::size_t index) const {
  if (index >= array_size()) fail("no element " + std::to_string(index));
  return JsonCursor((*m_json)[index], m_path + "[" + std::to_string(index) + "]");
}

std::string JsonCursor::string() const {
  if (!m_json->is_string()) fail(std::string("expected a string, got ") + type_of(*m_json));
  return m_json->get<std::string>();
}

bool JsonCursor::boolean() const {
  if (!m_json->is_boolean()) fail(std::string("expected true or false, got ") + type_of(*m_json));
  return m_json->get<bool>();
}

long JsonCursor::integer() const {
  if (m_json->is_number_unsigned()) {
    const auto u = m_json->get<Json::number_unsigned_t>();
    if (u > static_cast<Json::number_unsigned_t>(std::numeric_limits<long>::max())) fail("integer out of range");
    return static_cast<long>(u);
  }
  if (m_json->is_number_float()) fail("expected an integer, got " + m_json->dump());
  if (!m_json->is_number_integer()) fail(std::string("expected an integer, got ") + type_of(*m_json));
  return m_json->get<long>();
}

std::size_t JsonCursor::index() const {
  const long i = integer();
  if (i < 0) fail("expected a non-negative integer, got " + std::to_string(i));
  return static_cast<std::size_t>(i);
}

std::uint64_t JsonCursor::uint64() const {
  if (m_json->is_number_unsigned()) return m_json->get<std::uint64_t>();
  if (m_json->is_number_integer() && m_json->get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(m_json->get<std::int64_t>());
  const std::string range = "expected an integer from 0 to " + std::to_string(std::numeric_limits<std::uint64_t>::max());
  if (m_json->is_number()) fail(range + ", got " + m_json->dump());
  fail(range + ", got " + type_of(*m_json));
}

double JsonCursor::number() const {
  if (m_json->is_number()) return m_json->get<double>();
  if (m_json->is_string()) {
    const auto& s = m_json->get_ref<const std::string&>();
    if (const auto x = decode_number_string(s)) return *x;
    fail("expected a number or \"nan\", \"inf\", \"-inf\", got the string \"" + s.substr(0, 32) +
         (s.size() > 32 ? "...\"" : "\""));
  }
  fail(std::string("expected a number, got ") + type_of(*m_json));
}

Shape JsonCursor::shape() const {
  const std::size_t rank = array_size();
  Shape shape;
  for (std::size_t i = 0; i < rank; ++i) {
    shape.push_back((*this)[i].index());
    if (!bounded_size(shape)) fail("more than " + std::to_string(max_array_elements) + " elements");
  }
  return shape;
}

}  // namespace xgrad
