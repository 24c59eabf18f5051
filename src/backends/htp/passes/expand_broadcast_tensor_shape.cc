// ExpandBroadcastTensorShape: operands of binary elementwise ops get the same rank.
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {

Result<bool> expand_broadcast_tensor_shape(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n : g.nodes()) {
    bool binary = n->is_call(OpId::kAdd) || n->is_call(OpId::kSub) || n->is_call(OpId::kMul) ||
                  n->is_call(OpId::kDiv) || n->is_call(OpId::kPow);
    if (!binary || !n->has_spec()) continue;
    size_t rank = n->spec().rank();
    for (size_t i = 0; i < 2; ++i) {
      if (!n->arg(i).is_node()) continue;
      Node* v = n->arg(i).node();
      auto shape = static_shape_of(v);
      if (!shape || shape->size() >= rank) continue;
      std::vector<int64_t> expanded(rank - shape->size(), 1);
      expanded.insert(expanded.end(), shape->begin(), shape->end());
      KILN_ASSIGN_OR_RETURN(Node * r, add_call_at(g, n, OpId::kReshape, {v}, {{"shape", expanded}},
                                                  v->name() + "_expanded"));
      r->meta.quant = v->meta.quant;
      KILN_RETURN_IF_ERROR(g.set_arg(n, i, r));
      changed = true;
    }
  }
  return changed;
}

}  // namespace kiln::htp
