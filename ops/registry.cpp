#include <xgrad/ops/registry.hpp>

#include <algorithm>

#include <xgrad/ops/elementwise.hpp>

namespace xgrad {

namespace {

struct Entry {
  const char* name;
  std::shared_ptr<const Op> (*make)(const JsonCursor& attrs);
};

// Every op, by the name its name() returns: each line of ops/ops.def,
const Entry registry[] = {
#define XGRAD_OP(NAME) {#NAME, make_##NAME##_op},
#include <xgrad/ops/ops.def>
#undef XGRAD_OP
    // and every row of ops/elementwise.def (relu, exp, add, div, ...)
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX) {#NAME, make_##NAME##_op},
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX) {#NAME, make_##NAME##_op},
#include <xgrad/ops/elementwise.def>
};

}  // namespace

std::shared_ptr<const Op> make_op(const std::string& name, const JsonCursor& attrs) {
  for (const Entry& e : registry) {
    if (name == e.name) return e.make(attrs);
  }
  return nullptr;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const Entry& e : registry) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace xgrad
