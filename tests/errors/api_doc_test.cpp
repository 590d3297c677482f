// docs/api.md against the public headers: every name declared at namespace scope (outside
// namespace detail) in a header that <xgrad/xgrad.hpp> includes, whether a struct, class, enum,
// alias, function or constant, appears in docs/api.md as a whole word. A new public name fails
// this suite until the API page says what it is.
#include "../check.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace {

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

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The identifier that starts at `at` in s ("" if none).
std::string identifier_at(const std::string& s, std::size_t at) {
  std::size_t end = at;
  while (end < s.size() && identifier_char(s[end])) ++end;
  return s.substr(at, end - at);
}

// The identifier that ends at `end` in s, after skipping one space before it ("" if none).
std::string identifier_before(const std::string& s, std::size_t end, std::size_t* begin_out = nullptr) {
  if (end > 0 && s[end - 1] == ' ') --end;
  std::size_t begin = end;
  while (begin > 0 && identifier_char(s[begin - 1])) --begin;
  if (begin_out) *begin_out = begin;
  return s.substr(begin, end - begin);
}

// The name a declaration at namespace scope declares, or "" for none (using namespace, a friend,
// an operator, an expression). Plain string work: GCC 12's std::regex trips -Wmaybe-uninitialized
// in the sanitizers' Debug build.
std::string declared_name(const std::string& text) {
  std::string d;  // whitespace runs as one space, trimmed
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!d.empty() && d.back() != ' ') d += ' ';
    } else {
      d += c;
    }
  }
  if (!d.empty() && d.back() == ' ') d.pop_back();
  if (starts_with(d, "template")) {  // template <...>, its brackets balanced
    std::size_t at = d.find('<');
    if (at == std::string::npos) return "";
    for (int depth = 0; at < d.size(); ++at) {
      if (d[at] == '<') ++depth;
      if (d[at] == '>' && --depth == 0) break;
    }
    d = at + 1 < d.size() ? d.substr(at + 1) : "";
    if (!d.empty() && d[0] == ' ') d.erase(0, 1);
  }
  for (const char* prefix : {"using namespace", "friend", "extern template"}) {
    if (starts_with(d, prefix)) return "";
  }
  for (const std::string key : {"enum class ", "struct ", "class ", "enum ", "union ", "using "}) {
    if (starts_with(d, key)) return identifier_at(d, key.size());
  }
  // A function: an identifier right before the first '(', after a return type.
  const std::size_t paren = d.find('(');
  if (paren != std::string::npos) {
    std::size_t begin = 0;
    const std::string name = identifier_before(d, paren, &begin);
    const std::string type = d.substr(0, begin);
    const bool a_type = !type.empty() && std::all_of(type.begin(), type.end(), [](char c) {
      return identifier_char(c) || std::string(":<>,*& ").find(c) != std::string::npos;
    });
    if (a_type && !name.empty() && name != "operator" && type.find("operator") == std::string::npos) return name;
  }
  // A constant: [inline] constexpr|const TYPE NAME = ...
  const std::string rest = starts_with(d, "inline ") ? d.substr(7) : d;
  const std::size_t eq = rest.find('=');
  if ((starts_with(rest, "constexpr ") || starts_with(rest, "const ")) && eq != std::string::npos) {
    return identifier_before(rest, eq);
  }
  return "";
}

// NAME of a statement "namespace NAME" (NAME may be "a::b", or empty); nullopt for any other.
std::optional<std::string> namespace_of(const std::string& statement) {
  const std::size_t at = statement.find_first_not_of(" \t\n");
  if (at == std::string::npos || statement.compare(at, 9, "namespace") != 0) return std::nullopt;
  std::size_t end = at + 9;
  if (end < statement.size() && identifier_char(statement[end])) return std::nullopt;
  while (end < statement.size() && std::isspace(static_cast<unsigned char>(statement[end]))) ++end;
  std::size_t stop = end;
  while (stop < statement.size() && (identifier_char(statement[stop]) || statement[stop] == ':')) ++stop;
  return statement.substr(end, stop - end);
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
      const std::optional<std::string> ns = namespace_of(statement);
      if (at_namespace_scope() && !ns) {
        const std::string name = declared_name(statement);
        if (!name.empty()) names.insert(name);
      }
      if (c == '{') {
        const bool detail = ns && ns->find("detail") != std::string::npos;
        open.push_back(ns ? (detail ? detail_namespace : named_namespace) : other);
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
  const std::string doc = read_text_file(XGRAD_DOCS "/api.md");
  std::map<std::string, std::set<std::string>> missing;  // header -> names
  std::size_t found = 0;
  std::istringstream umbrella(read_text_file(XGRAD_SOURCE "/lib/xgrad.hpp"));
  std::size_t headers = 0;
  for (std::string line; std::getline(umbrella, line);) {
    const std::string include = "#include <xgrad/";
    if (!starts_with(line, include) || line.back() != '>') continue;
    const std::string header = line.substr(include.size(), line.size() - include.size() - 1);
    ++headers;
    for (const std::string& name : public_names(code_of(read_text_file(XGRAD_SOURCE "/" + header)))) {
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
