// graph/json: parse_json, the one parser of every reader (graph JSON, safetensors headers, npz
// metadata, JSON arrays): one pass, key order kept, duplicate keys and deep nesting refused, and
// append_member for writers.
#include <boost/test/unit_test.hpp>

#include <string>

#include <xgrad/graph/json.hpp>

#include "../check.hpp"

using namespace xgrad;
using test::check_error;

namespace {

// {"k0": 0, "k1": 1, ...}: n keys, in an order that is not sorted (k10 before k2 by bytes).
std::string object_of(std::size_t n) {
  std::string text = "{";
  for (std::size_t i = 0; i < n; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  return text + "}";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(json_parse)

BOOST_AUTO_TEST_CASE(keeps_values_types_and_key_order) {
  const Json j = parse_json(R"({"z": 1, "a": [true, null, -2, 18446744073709551615, 0.5, "s"], "m": {"y": {}, "b": []}})", 4, "t");
  BOOST_TEST(j.dump() == R"({"z":1,"a":[true,null,-2,18446744073709551615,0.5,"s"],"m":{"y":{},"b":[]}})");
  BOOST_TEST(j["a"][2].is_number_integer());
  BOOST_TEST(j["a"][3].is_number_unsigned());
  BOOST_TEST(j["a"][4].is_number_float());
  // The same document as nlohmann's own parser builds.
  const std::string text = R"([{"x": [1, 2.5e-3, {"q": "\u00e9\n"}]}, -0.0, 1e308, [], {}])";
  BOOST_TEST(parse_json(text, 4, "t") == Json::parse(text));
  BOOST_TEST(parse_json("3", 1, "t") == Json(3));
}

BOOST_AUTO_TEST_CASE(refuses_a_key_given_twice_naming_its_path) {
  check_error([] { parse_json(R"({"a": 1, "a": 2})", 3, "t"); }, {"t: top level: the key \"a\" appears twice"});
  check_error([] { parse_json(R"({"n": [{}, {"id": 1, "x": 0, "id": 2}]})", 3, "graph JSON"); },
              {"graph JSON: n[1]: the key \"id\" appears twice"});
  check_error([] { parse_json(R"({"m": {"k": {"a": 1}, "k": {}}})", 3, "t"); }, {"t: m: the key \"k\" appears twice"});
  // The same key in two objects is no duplicate, nor the same text as a value.
  BOOST_TEST(parse_json(R"({"a": {"a": "a"}, "b": {"a": 1}})", 3, "t")["b"]["a"] == 1);
  // The rule at scale: 200,000 distinct keys, then one of them again at the end.
  std::string big = object_of(200000);
  BOOST_TEST(parse_json(big, 1, "t").size() == 200000u);
  big.back() = ',';
  big += "\"k123456\": 0}";
  check_error([&] { parse_json(big, 1, "t"); }, {"t: top level: the key \"k123456\" appears twice"});
}

BOOST_AUTO_TEST_CASE(refuses_bad_text_and_deep_nesting) {
  check_error([] { parse_json("[[[1]]]", 2, "t"); }, {"t: nested deeper than 2 levels, more than the format allows"});
  BOOST_TEST(parse_json("[[1]]", 2, "t").size() == 1u);
  check_error([] { parse_json("{\"a\": }", 3, "t"); }, {"t: not JSON: "});
  check_error([] { parse_json("", 3, "t"); }, {"t: not JSON"});
  check_error([] { parse_json(std::string("{}\0x", 4), 3, "t"); }, {"t: not JSON: a NUL byte at byte 2"});
  check_error([] { parse_json("{} {}", 3, "t"); }, {"t: not JSON"});
}

BOOST_AUTO_TEST_CASE(a_large_object_keeps_its_order_and_every_member) {
  const Json j = parse_json(object_of(100000), 1, "t");
  std::size_t i = 0;
  bool in_order = true;
  for (const auto& item : j.items()) {
    in_order = in_order && item.key() == "k" + std::to_string(i) && item.value() == i;
    ++i;
  }
  BOOST_TEST(in_order);
  BOOST_TEST(i == 100000u);
}

BOOST_AUTO_TEST_CASE(append_member_appends_in_order) {
  Json j = Json::object();
  append_member(j, "b", 1);
  append_member(j, "a", Json::array({1, 2}));
  BOOST_TEST(j.dump() == R"({"b":1,"a":[1,2]})");
  BOOST_TEST(j["a"][1] == 2);
  Json not_object = Json::array();
  check_error([&] { append_member(not_object, "a", 1); }, {"append_member: not a JSON object"});
}

BOOST_AUTO_TEST_SUITE_END()
