#include <xgrad/graph/lean.hpp>

#include <algorithm>

namespace xgrad::detail {

LeanPlan plan_lean_replay(std::size_t count, const std::function<const std::vector<Slot>&(std::size_t)>& inputs_of,
                          const std::vector<char>& kept) {
  LeanPlan plan;
  plan.needed.assign(count, 0);
  plan.last_read.assign(count, 0);
  for (std::size_t id = count; id-- > 0;) {
    plan.needed[id] = plan.needed[id] || kept[id];
    if (!plan.needed[id]) continue;
    for (const Slot& in : inputs_of(id)) {
      plan.needed[in.node] = 1;
      plan.last_read[in.node] = std::max(plan.last_read[in.node], id);
    }
  }
  return plan;
}

}  // namespace xgrad::detail
