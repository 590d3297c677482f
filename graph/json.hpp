// JSON helpers for the graph format: a cursor that checks types and names the JSON path of the
// first problem, the encoding of numbers (non-finite values as strings), and a depth-capped parse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/op.hpp>

namespace xgrad {

// The graph format's nesting limit: an import rejects deeper nesting before parsing.
struct JsonLimits {
  static constexpr std::size_t max_depth = 6;
};

// A number as JSON: itself if finite, else the string "nan", "inf" or "-inf" (nlohmann would
// write null). dump() then round-trips every double bit for bit, -0.0 and subnormals included.
Json encode_number(double x);
// The inverse for the strings: the value "nan", "inf" or "-inf" stands for; nullopt for any
// other string.
std::optional<double> decode_number_string(std::string_view s);

// Appends key: value to a JSON object without looking for the key first (Json's own insertion
// searches the object, so n of them take time quadratic in n): for writers whose keys are
// distinct already (a std::map's). A key given twice would be written twice.
void append_member(Json& object, std::string key, Json value);

// Parses text as JSON in one pass, in time linear in its length, keeping the order of keys;
// rejects nesting deeper than max_depth (a DOM's dump, copy and comparison recurse once per
// level) before the document is any deeper, and a key given twice in one object (which a DOM
// would keep only once). Throws xgrad::error naming `what` and the byte offset or
// the path: "graph JSON: not JSON: ... at byte 17", "...: nested deeper than 6 levels",
// "graph JSON: nodes[0]: the key \"id\" appears twice".
Json parse_json(std::string_view text, std::size_t max_depth, const std::string& what);

// A position in a JSON document: the value and its path ("nodes[4].inputs[1]"). Every accessor
// checks the type and throws xgrad::error("<path>: <problem>") on the first mismatch.
class JsonCursor {
 public:
  JsonCursor(const Json& json, std::string path) : m_json(&json), m_path(std::move(path)) {}

  const Json& json() const { return *m_json; }
  const std::string& path() const { return m_path; }
  [[noreturn]] void fail(const std::string& problem) const;

  void expect_object() const;  // of any keys
  // An object with all the keys `required` and no others than those and `optional`.
  void check_object(std::initializer_list<const char*> required,
                    std::initializer_list<const char*> optional = {}) const;
  JsonCursor operator[](const char* key) const;        // a key that must be present
  std::optional<JsonCursor> find(const char* key) const;
  std::size_t array_size() const;                        // checks that it is an array
  JsonCursor operator[](std::size_t index) const;        // element of an array

  std::string string() const;
  bool boolean() const;
  long integer() const;          // a JSON integer (not 2.0, not "2")
  std::size_t index() const;     // a non-negative JSON integer
  std::uint64_t uint64() const;  // a JSON integer from 0 to 2^64 - 1 (seeds, steps)
  double number() const;         // a number, or "nan", "inf", "-inf"
  // An array of non-negative integers within max_array_elements (see bounded_size).
  Shape shape() const;

 private:
  const Json* m_json;
  std::string m_path;
};

}  // namespace xgrad
