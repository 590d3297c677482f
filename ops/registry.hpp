// The one list of ops by name (ops/ops.def and ops/elementwise.def), for importing graphs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <xgrad/graph/json.hpp>
#include <xgrad/graph/op.hpp>

namespace xgrad {

// The op called `name` built from its exported attributes; nullptr if there is none. Throws
// xgrad::error naming attrs.path() if the attributes are wrong (missing, unknown, mistyped).
std::shared_ptr<const Op> make_op(const std::string& name, const JsonCursor& attrs);

// The names make_op knows, sorted.
std::vector<std::string> op_names();

// Each op's factory, the op from its exported attributes (the node's JSON "attrs", docs/graph-format.md):
//   std::shared_ptr<const Op> make_<name>_op(const JsonCursor& attrs);
// for each line XGRAD_OP(name) of ops/ops.def (the elementwise rows' in ops/elementwise.hpp).
#define XGRAD_OP(NAME) std::shared_ptr<const Op> make_##NAME##_op(const JsonCursor& attrs);
#include <xgrad/ops/ops.def>
#undef XGRAD_OP

}  // namespace xgrad
