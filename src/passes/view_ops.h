// The planner's view of view-like ops (internal): may_alias_input is public, in memory_plan.h.
#pragma once

#include <cstdint>

#include "kiln/ir/node.h"

namespace kiln::passes {

/// The node whose storage value `index` of `node` shares when the portable kernel runs it with
/// the node's specs, or null when the kernel may allocate (or the node is no such op). Exact for
/// the cases decided statically: a non-null answer means the kernel returns a view.
const Node* certain_view_source(const Node& node, uint32_t index);

}  // namespace kiln::passes
