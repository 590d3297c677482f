// Lean replays (Graph::keep_only): the plan of which nodes a replay computes and when each value
// may go, and the released buffers the next replay reuses. graph.cpp runs the plan.
#pragma once

#include <cstddef>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/op.hpp>

namespace xgrad::detail {

struct LeanPlan {
  // needed[id]: a replay computes node id: it keeps its values, or a needed node reads one.
  std::vector<char> needed;
  // last_read[id]: the last needed node that reads an output of node id (0 if none reads it):
  // after it has run, node id's values may go.
  std::vector<std::size_t> last_read;
};

// The plan for nodes 0 .. count - 1, whose inputs inputs_of(id) gives (outputs of earlier
// nodes), where kept[id] is 1 for the nodes whose values the replay must leave in place. One
// backward pass over the nodes: linear in their number and their inputs.
LeanPlan plan_lean_replay(std::size_t count, const std::function<const std::vector<Slot>&(std::size_t)>& inputs_of,
                          const std::vector<char>& kept);

// Buffers of released values by element count: taking one and giving one back cost O(1), so
// that a replay stays linear in the node count.
template <class T>
class SpareBuffers {
 public:
  // Moves a buffer of `size` elements given back earlier into `out` and returns true, or
  // returns false, out untouched, if there is none (no array is made for a miss: a default
  // xarray allocates its one element).
  bool take(std::size_t size, xt::xarray<T>& out) {
    const auto spare = m_by_size.find(size);
    if (spare == m_by_size.end() || spare->second.empty()) return false;
    out = std::move(spare->second.back());
    spare->second.pop_back();
    return true;
  }
  void give(xt::xarray<T>&& buffer) { m_by_size[buffer.size()].push_back(std::move(buffer)); }
  // The elements the buffers hold.
  std::size_t elements() const {
    std::size_t count = 0;
    for (const auto& [size, buffers] : m_by_size) count += size * buffers.size();
    return count;
  }
  void clear() { m_by_size.clear(); }

 private:
  std::unordered_map<std::size_t, std::vector<xt::xarray<T>>> m_by_size;
};

}  // namespace xgrad::detail
