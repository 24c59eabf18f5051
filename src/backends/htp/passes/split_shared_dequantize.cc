// SplitSharedDequantize: one dequantize per reading call, so that each can go with its reader
// when the graph is partitioned (see passes.h).
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {

Result<bool> split_shared_dequantize(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n = g.first(); n != nullptr; n = n->next()) {  // copies are skipped: one reader each
    if (!n->is_call(OpId::kDequantizePerTensor) && !n->is_call(OpId::kDequantizePerChannel)) continue;
    std::vector<Node*> readers;  // users() are distinct
    for (Node* u : n->users()) {
      if (u->op() == OpKind::kCallFunction) readers.push_back(u);
    }
    // The first reader keeps the original (and so do the outputs that return it); the copies
    // follow it in reader order.
    Node* last = n;
    for (size_t i = 1; i < readers.size(); ++i) {
      Graph::InsertGuard at(g, last->next());
      std::vector<Arg> args(n->args().begin(), n->args().end());
      std::vector<Arg> kwargs(n->kwargs().begin(), n->kwargs().end());
      KILN_ASSIGN_OR_RETURN(Node * copy, g.add_call_exact(n->target(), std::move(args), std::move(kwargs),
                                                          std::string(n->name()), false));
      copy->meta.val = n->meta.val;
      copy->meta.source = n->meta.source;
      copy->meta.quant = n->meta.quant;
      Node* reader = readers[i];
      g.replace_all_uses_with_if(n, copy, [reader](Node* u) { return u == reader; });
      last = copy;
      changed = true;
    }
  }
  return changed;
}

}  // namespace kiln::htp
