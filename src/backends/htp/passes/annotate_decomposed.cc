// AnnotateDecomposed: multi-output ops take the parameters of the value they split.
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {

Result<bool> annotate_decomposed(ExportedProgram& program) {
  bool changed = false;
  for (Node* n : program.graph().nodes()) {
    if (!n->is_call(OpId::kSplit) || n->meta.quant) continue;
    Node* in = n->arg(0).node();
    if (!in->is_call(OpId::kDequantizePerTensor)) continue;
    KILN_ASSIGN_OR_RETURN(QuantAttrs q, qdq_attrs(program, in));
    for (Node* u : n->users()) {
      if (u->is_call(OpId::kGetitem) && !u->meta.quant) u->meta.quant = q;
    }
    n->meta.quant = std::move(q);
    changed = true;
  }
  return changed;
}

}  // namespace kiln::htp
