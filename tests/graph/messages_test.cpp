// What error messages are made of (graph/error.hpp, graph/names.hpp): shapes, an element's
// index, and the names of enums read and written through their tables.
#include "../check.hpp"

namespace {

enum class Color { red, green, blue, unnamed };
constexpr EnumName<Color> three[] = {{Color::red, "red"}, {Color::green, "green"}, {Color::blue, "blue"}};
constexpr EnumName<Color> two[] = {{Color::red, "red"}, {Color::green, "green"}};

}  // namespace

BOOST_AUTO_TEST_SUITE(messages)

BOOST_AUTO_TEST_CASE(shapes_and_indices_read_as_numpy_prints_them) {
  BOOST_TEST(shape_str(Shape{2, 3}) == "(2, 3)");
  BOOST_TEST(shape_str(Shape{5}) == "(5,)");
  BOOST_TEST(shape_str(Shape{}) == "()");
  // Element 11 of a (2, 3, 4) array is [0, 2, 3]; the last, 23, is [1, 2, 3]; a scalar's is [].
  BOOST_TEST(index_str(unravel_index(11, Shape{2, 3, 4})) == "[0, 2, 3]");
  BOOST_TEST(index_str(unravel_index(23, xt::xarray<double>::shape_type{2, 3, 4})) == "[1, 2, 3]");
  BOOST_TEST(index_str(unravel_index(0, Shape{})) == "[]");
}

BOOST_AUTO_TEST_CASE(enum_names_print_and_parse_through_one_table) {
  BOOST_TEST(std::string(name_in(three, Color::blue)) == "blue");
  BOOST_TEST(std::string(name_in(three, Color::unnamed)) == "?");
  BOOST_TEST((parse_name(three, "green", "color") == Color::green));
  check_error([] { parse_name(three, "Green", "paint: color"); },
              {R"(paint: color "Green" is none of "red", "green", "blue")"});
  check_error([] { parse_name(two, "", "color"); }, {R"(color "" is neither "red" nor "green")"});
  // The library's tables name every enumerator.
  for (const auto v : {ExportValues::none, ExportValues::inputs, ExportValues::all}) BOOST_TEST(std::string(values_name(v)) != "?");
  for (const auto v : {QkNorm::none, QkNorm::layer, QkNorm::rms}) BOOST_TEST(std::string(qk_norm_name(v)) != "?");
  for (const auto v : {AttentionWeights::softmax, AttentionWeights::sigmoid}) BOOST_TEST(std::string(attention_weights_name(v)) != "?");
  for (const auto v : {GradcheckMode::automatic, GradcheckMode::full, GradcheckMode::projection}) {
    BOOST_TEST(std::string(mode_name(v)) != "?");
  }
}

BOOST_AUTO_TEST_SUITE_END()
