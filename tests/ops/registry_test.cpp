// The places an op must appear besides its own files, checked against the registry (op_names()):
// the umbrella header, the property test's generator, the graph format document. And that every
// test case is inside a suite (ctest runs the suites, tests/CMakeLists.txt).
#include "../check.hpp"
#include "../properties/random_graph.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <boost/test/tree/traverse.hpp>
#include <boost/test/tree/visitor.hpp>

using namespace xgrad;

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  BOOST_TEST_REQUIRE(in.good(), "cannot read " << path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::filesystem::path source = XGRAD_SOURCE;

// The header of ops/ (relative, "softmax.hpp") that declares the op `name`: the one declaring
// make_<name>_op, or elementwise.hpp for a row of ops/elementwise.def; "" if there is none.
std::string declaring_header(const std::string& name) {
  const std::regex row("(^|\\n)XGRAD_(UNARY|BINARY)\\(\\s*" + name + "\\s*,");
  if (std::regex_search(read_text(source / "ops/elementwise.def"), row)) return "elementwise.hpp";
  const std::regex factory("\\bmake_" + name + "_op\\(");
  for (const auto& entry : std::filesystem::directory_iterator(source / "ops")) {
    if (entry.path().extension() != ".hpp") continue;
    if (std::regex_search(read_text(entry.path()), factory)) return entry.path().filename().string();
  }
  return "";
}

// Fails the test for each test case that is not inside a suite: no ctest entry would run it.
class CasesOutsideSuites : public boost::unit_test::test_tree_visitor {
 public:
  void visit(const boost::unit_test::test_case& tc) override {
    const auto master = boost::unit_test::framework::master_test_suite().p_id;
    BOOST_TEST(tc.p_parent_id != master, tc.p_name.get() << " (" << tc.p_file_name << ") is outside every "
                                         << "BOOST_AUTO_TEST_SUITE, so no ctest entry runs it");
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(registry)

BOOST_AUTO_TEST_CASE(every_op_is_declared_by_a_header_of_the_umbrella_header) {
  const std::string umbrella = read_text(source / "lib/xgrad.hpp");
  for (const auto& name : op_names()) {
    const std::string header = declaring_header(name);
    BOOST_TEST(!header.empty(), "no header of ops/ declares make_" << name << "_op or a row " << name
                                                                   << " (ops/elementwise.def)");
    if (header.empty()) continue;
    const std::string include = "#include <xgrad/ops/" + header + ">";
    BOOST_TEST(umbrella.find(include) != std::string::npos,
               "lib/xgrad.hpp lacks `" << include << "`, the header of " << name);
  }
}

BOOST_AUTO_TEST_CASE(every_op_of_ops_is_in_the_registry) {
  // The other way round: each factory a header of ops/ declares, and each row of
  // ops/elementwise.def, is an op the registry lists (an import could not make it otherwise).
  const std::vector<std::string> names = op_names();
  const auto registered = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const std::regex factory("\\bmake_(\\w+)_op\\(");
  std::size_t found = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source / "ops")) {
    if (entry.path().extension() != ".hpp" || entry.path().filename() == "registry.hpp") continue;
    const std::string text = read_text(entry.path());
    for (std::sregex_iterator m(text.begin(), text.end(), factory), end; m != end; ++m, ++found) {
      BOOST_TEST(registered((*m)[1]), entry.path().filename() << " declares make_" << (*m)[1]
                                                               << "_op, but ops/registry.cpp does not list " << (*m)[1]);
    }
  }
  const std::string rows = read_text(source / "ops/elementwise.def");
  const std::regex row("(^|\\n)XGRAD_(UNARY|BINARY)\\(\\s*(\\w+)\\s*,");
  for (std::sregex_iterator m(rows.begin(), rows.end(), row), end; m != end; ++m, ++found) {
    BOOST_TEST(registered((*m)[3]), "ops/elementwise.def has a row " << (*m)[3] << " that ops/registry.cpp does not list");
  }
  BOOST_TEST(found >= names.size());
}

BOOST_AUTO_TEST_CASE(every_op_is_in_the_property_generator) {
  // Often enough that the property tests check it in many graphs (tests/properties/).
  const std::map<std::string, std::size_t> uses = test::random_graph_op_uses();
  for (const auto& name : op_names()) {
    const auto it = uses.find(name);
    const std::size_t n = it == uses.end() ? 0 : it->second;
    BOOST_TEST(n >= 50u, name << " makes " << n << " nodes of the property tests' graphs, fewer than 50: "
                              << "add it to the generator of tests/properties/random_graph_test.cpp");
  }
}

BOOST_AUTO_TEST_CASE(every_op_is_named_in_the_graph_format) {
  const std::string doc = read_text(source / "docs/graph-format.md");
  for (const auto& name : op_names()) {
    BOOST_TEST(doc.find("`" + name + "`") != std::string::npos,
               "docs/graph-format.md does not name `" << name << "` (in backticks)");
  }
}

BOOST_AUTO_TEST_CASE(every_test_case_is_in_a_suite) {
  CasesOutsideSuites visitor;
  boost::unit_test::traverse_test_tree(boost::unit_test::framework::master_test_suite(), visitor, true);
}

BOOST_AUTO_TEST_SUITE_END()
