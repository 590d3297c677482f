// graph/json: parse_json, the one parser of every reader (graph JSON, safetensors headers, npz
// metadata, JSON arrays): one pass, key order kept, duplicate keys and deep nesting refused, and
// append_member for writers.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>
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

// A random document of at most `depth` levels: objects of distinct keys (in random order),
// arrays, strings with escapes, integers of every kind, doubles, booleans, null.
Json random_document(std::mt19937_64& rng, int depth) {
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  const int kind = depth > 1 ? pick(8) : 2 + pick(6);
  switch (kind) {
    case 0: {
      Json o = Json::object();
      const int n = pick(6);
      for (int i = 0; i < n; ++i) o["k" + std::to_string(rng() % 1000) + "\"\n\u00e9"] = random_document(rng, depth - 1);
      return o;
    }
    case 1: {
      Json a = Json::array();
      const int n = pick(6);
      for (int i = 0; i < n; ++i) a.push_back(random_document(rng, depth - 1));
      return a;
    }
    case 2: return Json(static_cast<std::int64_t>(rng()));
    case 3: return Json(static_cast<std::uint64_t>(rng()));
    case 4: return Json(std::ldexp(static_cast<double>(rng() % 100000) - 50000, pick(200) - 100));
    case 5: return Json(std::string(pick(4), static_cast<char>('a' + pick(26))) + "\t\\");
    case 6: return Json(pick(2) == 1);
    default: return Json(nullptr);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(json_parse)

BOOST_AUTO_TEST_CASE(random_documents_read_as_nlohmann_reads_them) {
  // Property: for documents of every shape, parse_json gives the document nlohmann's own parser
  // gives, keys in the order of the text, and writes back the same text.
  std::mt19937_64 rng(37);
  for (int i = 0; i < 500; ++i) {
    const std::string text = random_document(rng, 6).dump(i % 3 == 0 ? 2 : -1);
    const Json ours = parse_json(text, 6, "t");
    BOOST_TEST_REQUIRE(ours == Json::parse(text), text);
    BOOST_TEST_REQUIRE(ours.dump(i % 3 == 0 ? 2 : -1) == text);
  }
}

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
