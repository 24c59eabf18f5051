// Structural comparison of nodes and graphs, as ExecuTorch's exir/backend/utils.py
// (is_same_node, is_identical_graph): names and meta are ignored.
#pragma once

#include "kiln/ir/graph.h"

namespace kiln {

/// True if `a` and `b` have the same op kind and target, and the same args and kwargs, where
/// node arguments are compared (transitively) as same nodes. Iterative: deep chains are fine.
bool is_same_node(const Node* a, const Node* b);

/// True if both graphs have the same node count and, position by position, same nodes.
bool is_identical_graph(const Graph& a, const Graph& b);

}  // namespace kiln
