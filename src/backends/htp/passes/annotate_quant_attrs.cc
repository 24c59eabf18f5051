// AnnotateQuantAttrs: quantization parameters move from the q/dq nodes onto the values.
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

// dequantize -> quantize chains (q1 -> dq -> q2 -> dq2): where the requantization is not kept,
// the readers of dq2 read dq instead, so q2 and dq2 fall away.
Result<bool> drop_requants(ExportedProgram& program, bool skip_advanced_requant) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* q2 = g.first(); q2 != nullptr;) {
    Node* next = q2->next();
    if (!q2->is_call(OpId::kQuantizePerTensor) || !q2->arg(0).node()->is_call(OpId::kDequantizePerTensor) ||
        !q2->arg(0).node()->arg(0).node()->is_call(OpId::kQuantizePerTensor)) {
      q2 = next;
      continue;
    }
    Node* dq = q2->arg(0).node();
    KILN_ASSIGN_OR_RETURN(QuantAttrs a, qdq_attrs(program, dq));
    KILN_ASSIGN_OR_RETURN(QuantAttrs b, qdq_attrs(program, q2));
    bool same = a == b;
    if (!same && !(skip_advanced_requant && a.dtype == b.dtype)) {
      q2 = next;
      continue;
    }
    for (Node* dq2 : q2->users()) {
      if (!dq2->is_call(OpId::kDequantizePerTensor)) continue;
      if (dq2 == next) next = dq2->next();
      g.replace_all_uses_with(dq2, dq);
      g.erase(dq2);
      changed = true;
    }
    if (!q2->has_uses()) {
      g.erase(q2);
      changed = true;
    }
    q2 = next;
  }
  return changed;
}

}  // namespace

Result<bool> annotate_quant_attrs(ExportedProgram& program, bool skip_advanced_requant) {
  KILN_ASSIGN_OR_RETURN(bool changed, drop_requants(program, skip_advanced_requant));
  for (Node* n : program.graph().nodes()) {
    if (n->is_call(OpId::kQuantizePerTensor)) {
      // The value this quantize stores: an op's output (not another q/dq, not a user input,
      // whose quantize stays a Quantize op). The first quantize wins; a later one with other
      // parameters becomes a requantize in FoldQDQ.
      Node* v = n->arg(0).node();
      if (v->op() != OpKind::kCallFunction || is_quantize(v) || is_dequantize(v) || v->meta.quant) continue;
      KILN_ASSIGN_OR_RETURN(QuantAttrs q, qdq_attrs(program, n));
      v->meta.quant = std::move(q);
      changed = true;
    } else if (is_dequantize(n)) {
      // An integer constant, or a user input that carries codes (tag_quant_io, or a partition
      // boundary after a quantize) read only through dequantizes of one encoding.
      Node* c = n->arg(0).node();
      if (c->op() != OpKind::kPlaceholder || c->meta.quant || !c->has_spec() || is_floating(c->spec().dtype)) {
        continue;
      }
      KILN_ASSIGN_OR_RETURN(QuantAttrs q, qdq_attrs(program, n));
      if (!is_constant_placeholder(program, c)) {
        bool one_encoding = true;
        for (const Node* u : c->users()) {
          auto other = is_dequantize(u) ? qdq_attrs(program, u) : Result<QuantAttrs>(invalid_argument("not a dq"));
          one_encoding = one_encoding && other.ok() && *other == q;
        }
        if (!one_encoding) continue;
      }
      c->meta.quant = std::move(q);
      changed = true;
    }
  }
  return changed;
}

}  // namespace kiln::htp
