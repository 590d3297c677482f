// The ONNX importer's table (lib/onnx/reader.hpp): one rule per op type across the family files,
// each rule able to import its node one way or the other, and each op type named in
// docs/onnx.md's table of ops.
#include <boost/test/unit_test.hpp>

#include <cctype>
#include <fstream>
#include <sstream>

#include <xgrad/lib/onnx/reader.hpp>

using namespace xgrad;
using namespace xgrad::onnx_rules;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  BOOST_TEST_REQUIRE(in.good(), "cannot read " << path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// True if `word` occurs in `text` with no letter or digit on either side.
bool has_word(const std::string& text, const std::string& word) {
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool open = at == 0 || !std::isalnum(static_cast<unsigned char>(text[at - 1]));
    const std::size_t end = at + word.size();
    const bool close = end == text.size() || !std::isalnum(static_cast<unsigned char>(text[end]));
    if (open && close) return true;
  }
  return false;
}

template <class T>
std::size_t family_rules() {
  return elementwise_rules<T>().size() + shape_rules<T>().size() + slice_rules<T>().size() + reduce_rules<T>().size() + nn_rules<T>().size() +
         logic_rules<T>().size();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(import_rules_table)

BOOST_AUTO_TEST_CASE(every_op_type_has_exactly_one_rule) {
  // import_rules() throws on an op type given twice; the count catches a family left out.
  BOOST_TEST(import_rules<float>().size() == family_rules<float>());
  BOOST_TEST(import_rules<double>().size() == family_rules<double>());
  BOOST_TEST(import_rules<float>().size() > 80u);
  for (const auto& [op, rule] : import_rules<double>()) {
    BOOST_TEST_CONTEXT(op) {
      BOOST_TEST(find_rule<double>(op) == &rule);
      BOOST_TEST(std::string(rule.op_type) == op);
      BOOST_TEST((rule.build != nullptr || rule.fold != nullptr));
      BOOST_TEST(rule.since >= 1);
      BOOST_TEST(rule.since <= 17);
    }
  }
  BOOST_TEST(find_rule<double>("Conv") == nullptr);
}

BOOST_AUTO_TEST_CASE(every_op_type_is_named_in_the_ops_table_of_docs_onnx) {
  const std::string doc = read_text(std::string(XGRAD_DOCS) + "/onnx.md");
  const std::size_t begin = doc.find("\n## Ops\n");
  BOOST_TEST_REQUIRE(begin != std::string::npos);
  const std::size_t end = doc.find("\n## ", begin + 1);
  const std::string ops = doc.substr(begin, end - begin);
  for (const auto& [op, rule] : import_rules<float>()) {
    BOOST_TEST(has_word(ops, op), "docs/onnx.md's section Ops does not name " << op);
  }
}

BOOST_AUTO_TEST_SUITE_END()
