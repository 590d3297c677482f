// The property tests' random graphs, as the registry test sees them (random_graph_test.cpp).
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace xgrad::test {

// How many nodes of each op, by name, the graphs of the property tests hold over all their seeds.
std::map<std::string, std::size_t> random_graph_op_uses();

}  // namespace xgrad::test
