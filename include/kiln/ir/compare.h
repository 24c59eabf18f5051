// Structural comparison of nodes and graphs, as ExecuTorch's exir/backend/utils.py
// (is_same_node, is_identical_graph): names and meta are ignored.
#pragma once

#include "kiln/ir/graph.h"

namespace kiln {

/// True if `a` and `b` have the same op kind and target (a placeholder's target is its name, a
/// get_attr's the attribute it reads: a lowered module is not looked into), and the same args
/// and kwargs, where node arguments are compared (transitively) as same nodes and a node read
/// twice must be read twice at the same places on both sides. Two nulls are the same node.
/// Stricter than ExecuTorch's, which compares only the distinct input nodes (all_input_nodes)
/// and so ignores scalar args (add's alpha, mean's dim) and where each input sits (cat([a, a,
/// b]) vs cat([a, b, b])): same here implies same there. Nothing is cached between calls (the
/// reference's lru_cache answers from before a mutation). Iterative: deep chains are fine.
bool is_same_node(const Node* a, const Node* b);

/// True if both graphs have the same node count and, position by position, same nodes
/// (is_same_node), so the order of nodes matters, not only their topological order.
bool is_identical_graph(const Graph& a, const Graph& b);

}  // namespace kiln
