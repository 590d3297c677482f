// The one list of ops by name, for importing graphs.
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

}  // namespace xgrad
