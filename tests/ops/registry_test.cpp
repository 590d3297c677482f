// The places an op must appear besides its own files, checked against the registry (op_names()):
// the umbrella header, the property test's generator, the graph format document. And that every
// test case is inside a suite (ctest runs the suites, tests/CMakeLists.txt).
#include "../check.hpp"
#include "../properties/random_graph.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
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

// The names of the rows of ops/elementwise.def: the first argument of each line that starts
// XGRAD_UNARY( or XGRAD_BINARY( (plain string scans: std::regex trips GCC 12's
// -Wmaybe-uninitialized under the sanitizers).
std::vector<std::string> elementwise_rows() {
  std::vector<std::string> names;
  std::istringstream lines(read_text(source / "ops/elementwise.def"));
  for (std::string line; std::getline(lines, line);) {
    for (const std::string start : {"XGRAD_UNARY(", "XGRAD_BINARY("}) {
      if (line.compare(0, start.size(), start) != 0) continue;
      const std::size_t begin = line.find_first_not_of(' ', start.size());
      const std::size_t end = line.find_first_of(" ,", begin);
      names.push_back(line.substr(begin, end - begin));
    }
  }
  return names;
}

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The op names of the factories a text declares or calls: each make_<name>_op( that starts a word.
std::vector<std::string> factories_in(const std::string& text) {
  std::vector<std::string> names;
  for (std::size_t at = text.find("make_"); at != std::string::npos; at = text.find("make_", at + 1)) {
    if (at > 0 && identifier_char(text[at - 1])) continue;
    std::size_t end = at + 5;
    while (end < text.size() && identifier_char(text[end])) ++end;
    const std::string word = text.substr(at + 5, end - at - 5);
    if (end < text.size() && text[end] == '(' && word.size() > 3 && word.compare(word.size() - 3, 3, "_op") == 0) {
      names.push_back(word.substr(0, word.size() - 3));
    }
  }
  return names;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The header of ops/ (relative, "softmax.hpp") that declares the op `name`: the one declaring
// make_<name>_op, or elementwise.hpp for a row of ops/elementwise.def; "" if there is none.
std::string declaring_header(const std::string& name) {
  if (contains(elementwise_rows(), name)) return "elementwise.hpp";
  for (const auto& entry : std::filesystem::directory_iterator(source / "ops")) {
    if (entry.path().extension() != ".hpp") continue;
    if (contains(factories_in(read_text(entry.path())), name)) return entry.path().filename().string();
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
  std::size_t found = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source / "ops")) {
    if (entry.path().extension() != ".hpp" || entry.path().filename() == "registry.hpp") continue;
    for (const std::string& factory : factories_in(read_text(entry.path()))) {
      ++found;
      BOOST_TEST(registered(factory), entry.path().filename() << " declares make_" << factory
                                                              << "_op, but ops/registry.cpp does not list " << factory);
    }
  }
  for (const std::string& row : elementwise_rows()) {
    ++found;
    BOOST_TEST(registered(row), "ops/elementwise.def has a row " << row << " that ops/registry.cpp does not list");
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
