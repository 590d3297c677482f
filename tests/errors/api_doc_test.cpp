// docs/api.md against the public headers: every name declared at namespace scope (outside
// namespace detail) in a header that <xgrad/xgrad.hpp> includes, whether a struct, class, enum,
// alias, function or constant, appears in docs/api.md as a whole word. A new public name fails
// this suite until the API page says what it is.
#include "../check.hpp"

#include <cctype>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  BOOST_TEST_REQUIRE(in.good(), "cannot read " << path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The source without comments, string and character literals, and preprocessor lines.
std::string code_of(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
      out += '\n';
    } else if (text.compare(i, 2, "/*") == 0) {
      i = text.find("*/", i + 2);
      if (i == std::string::npos) break;
      ++i;
    } else if (text[i] == '"' || text[i] == '\'') {
      const char quote = text[i];
      for (++i; i < text.size() && text[i] != quote; ++i) {
        if (text[i] == '\\') ++i;
      }
      out += "\"\"";
    } else {
      out += text[i];
    }
  }
  std::istringstream lines(out);
  std::string code;
  for (std::string line; std::getline(lines, line);) {
    const std::size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '#') continue;
    code += line + '\n';
  }
  return code;
}

// The name a declaration at namespace scope declares, or "" for none (using namespace, a friend,
// an operator).
std::string declared_name(std::string d) {
  d = std::regex_replace(d, std::regex(R"(\s+)"), " ");
  d = std::regex_replace(d, std::regex(R"(^ )"), "");
  d = std::regex_replace(d, std::regex(R"(^template ?<.*?> ?(?=[A-Za-z]))"), "");
  std::smatch m;
  if (std::regex_search(d, m, std::regex(R"(^(?:struct|class|enum class|enum|union) (\w+))"))) return m[1];
  if (d.rfind("using namespace", 0) == 0 || d.rfind("friend", 0) == 0 || d.rfind("extern template", 0) == 0) return "";
  if (std::regex_search(d, m, std::regex(R"(^using (\w+))"))) return m[1];
  if (std::regex_search(d, m, std::regex(R"(^[\w:<>,*& ]+?\b(\w+) ?\()"))) return m[1] == "operator" ? "" : m[1].str();
  if (std::regex_search(d, m, std::regex(R"(^(?:inline )?(?:constexpr |const )[\w:<> ]+ (\w+) ?=)"))) return m[1];
  return "";
}

// Every name declared at namespace scope outside namespace detail in `code`.
std::set<std::string> public_names(const std::string& code) {
  std::set<std::string> names;
  enum Kind { named_namespace, detail_namespace, other };
  std::vector<Kind> open;
  std::string statement;
  const auto at_namespace_scope = [&] {
    return std::all_of(open.begin(), open.end(), [](Kind k) { return k == named_namespace; });
  };
  for (const char c : code) {
    if (c == '{' || c == ';') {
      std::smatch m;
      const bool is_namespace = std::regex_search(statement, m, std::regex(R"(^\s*namespace\s*([\w:]*))"));
      if (at_namespace_scope() && !is_namespace) {
        const std::string name = declared_name(statement);
        if (!name.empty()) names.insert(name);
      }
      if (c == '{') {
        const bool detail = is_namespace && m[1].str().find("detail") != std::string::npos;
        open.push_back(is_namespace ? (detail ? detail_namespace : named_namespace) : other);
      }
      statement.clear();
    } else if (c == '}') {
      BOOST_TEST_REQUIRE(!open.empty(), "unbalanced braces");
      open.pop_back();
      statement.clear();
    } else {
      statement += c;
    }
  }
  return names;
}

// Whether `name` is in `doc` as a whole word (no letter, digit or _ on either side).
bool mentions(const std::string& doc, const std::string& name) {
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t at = doc.find(name); at != std::string::npos; at = doc.find(name, at + 1)) {
    const bool starts = at == 0 || !word(doc[at - 1]);
    const bool ends = at + name.size() == doc.size() || !word(doc[at + name.size()]);
    if (starts && ends) return true;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(api_doc)

BOOST_AUTO_TEST_CASE(the_scanner_finds_what_headers_declare) {
  const auto names = public_names(code_of(R"(
    namespace xgrad {
    // struct Commented;
    template <class T>
    struct Pair { int inner(); };
    enum class Mode { a, b };
    using Alias = int;
    inline constexpr std::size_t limit = 4;
    std::vector<int> make_things(const std::string& s = "{;}", int n = 2);
    template <class T>
    Var<T> op(const Var<T>& x);
    namespace detail { void hidden(); }
    namespace elementwise { double helper(double x); }
    class Big : public Base { void member(); };
    }
  )"));
  BOOST_TEST(names == (std::set<std::string>{"Pair", "Mode", "Alias", "limit", "make_things", "op", "helper", "Big"}),
             "found: " << [&] {
               std::string s;
               for (const auto& n : names) s += n + " ";
               return s;
             }());
}

BOOST_AUTO_TEST_CASE(a_name_counts_as_a_whole_word_only) {
  BOOST_TEST(mentions("`softmax(x)`", "softmax"));
  BOOST_TEST(mentions("softmax", "softmax"));
  BOOST_TEST(!mentions("log_softmax and softmaxes", "softmax"));
  BOOST_TEST(mentions("log_softmax and softmax.", "softmax"));
}

BOOST_AUTO_TEST_CASE(api_md_names_every_public_declaration) {
  const std::string doc = read_all(XGRAD_DOCS "/api.md");
  std::map<std::string, std::set<std::string>> missing;  // header -> names
  std::size_t found = 0;
  const std::regex include(R"(#include <xgrad/([\w/]+\.hpp)>)");
  const std::string umbrella = read_all(XGRAD_SOURCE "/lib/xgrad.hpp");
  std::size_t headers = 0;
  for (std::sregex_iterator it(umbrella.begin(), umbrella.end(), include), end; it != end; ++it) {
    const std::string header = (*it)[1];
    ++headers;
    for (const std::string& name : public_names(code_of(read_all(XGRAD_SOURCE "/" + header)))) {
      ++found;
      if (!mentions(doc, name)) missing[header].insert(name);
    }
  }
  BOOST_TEST(headers > 40u);
  BOOST_TEST(found > 200u);  // the scan sees the API (261 names when this test was written)
  for (const auto& [header, names] : missing) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    BOOST_ERROR(header << " declares what docs/api.md does not name: " << list);
  }
}

BOOST_AUTO_TEST_SUITE_END()
