// The places an op must appear besides its own files, checked against the registry (op_names()):
// the umbrella header, the property test's generator, the graph format document. And that every
// test case is inside a suite (ctest runs the suites, tests/CMakeLists.txt).
#include "../check.hpp"
#include "../properties/random_graph.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
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

// The ops of ops/ other than the elementwise rows, by the source file (relative, "softmax.cpp")
// defining each one's factory make_<name>_op.
std::map<std::string, std::string> factory_files() {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(source / "ops")) {
    if (entry.path().extension() != ".cpp" || entry.path().filename() == "registry.cpp") continue;
    for (const std::string& name : factories_in(read_text(entry.path()))) files[name] = entry.path().filename().string();
  }
  return files;
}

// The header of ops/ (relative, "softmax.hpp") that declares the op `name`'s function: the first
// include of the source defining make_<name>_op (its own header, as every source of ops/ starts;
// `files` is factory_files()), or elementwise.hpp for a row of ops/elementwise.def; "" if there
// is none.
std::string declaring_header(const std::string& name, const std::map<std::string, std::string>& files) {
  if (contains(elementwise_rows(), name)) return "elementwise.hpp";
  const auto it = files.find(name);
  if (it == files.end()) return "";
  const std::string text = read_text(source / "ops" / it->second);
  const std::string own = "#include <xgrad/ops/";
  const std::size_t at = text.find("#include ");
  if (at == std::string::npos || text.compare(at, own.size(), own) != 0) return "";
  return text.substr(at + own.size(), text.find('>', at) - at - own.size());
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
  const auto files = factory_files();
  for (const auto& name : op_names()) {
    const std::string header = declaring_header(name, files);
    BOOST_TEST(!header.empty(), "no source of ops/ that starts with its header's include defines make_"
                                    << name << "_op, and no row " << name << " is in ops/elementwise.def");
    if (header.empty()) continue;
    const std::string include = "#include <xgrad/ops/" + header + ">";
    BOOST_TEST(umbrella.find(include) != std::string::npos,
               "lib/xgrad.hpp lacks `" << include << "`, the header of " << name);
  }
}

BOOST_AUTO_TEST_CASE(every_op_of_ops_is_in_the_registry) {
  // The other way round: each factory a source of ops/ defines, and each row of
  // ops/elementwise.def, is an op the registry lists (an import could not make it otherwise).
  const std::vector<std::string> names = op_names();
  const auto registered = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::size_t found = 0;
  for (const auto& [factory, file] : factory_files()) {
    ++found;
    BOOST_TEST(registered(factory), file << " defines make_" << factory << "_op, but ops/ops.def has no line XGRAD_OP("
                                         << factory << ")");
  }
  for (const std::string& row : elementwise_rows()) {
    ++found;
    BOOST_TEST(registered(row), "ops/elementwise.def has a row " << row << " that ops/registry.cpp does not list");
  }
  BOOST_TEST(found == names.size());
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
