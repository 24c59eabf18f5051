// FoldQDQ: the q/dq nodes whose parameters live in meta.quant are erased.
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

// A quantize whose input was annotated from it: the pair is storage of that value.
bool is_folded(const ExportedProgram& program, const Node* q) {
  if (!q->is_call(OpId::kQuantizePerTensor)) return false;
  const Node* v = q->arg(0).node();
  if (v->op() != OpKind::kCallFunction || !v->meta.quant) return false;
  auto attrs = qdq_attrs(program, q);
  return attrs.ok() && *attrs == *v->meta.quant;
}

// A reader of a dequantized value that runs quantized: it has parameters itself, is a q/dq
// (a requantize), or is an op whose only user is a quantized fused activation (conv -> relu).
bool reads_quantized(const Node* u) {
  if (u->op() != OpKind::kCallFunction) return false;
  if (u->meta.quant || is_quantize(u) || is_dequantize(u)) return true;
  if (u->num_users() != 1) return false;
  const Node* act = u->users()[0];
  return is_fusable_activation(act) && act->meta.quant && act->arg(0) == Arg(const_cast<Node*>(u));
}

}  // namespace

Result<bool> fold_qdq(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* d = g.first(); d != nullptr;) {
    Node* next = d->next();
    if (!is_dequantize(d)) {
      d = next;
      continue;
    }
    Node* in = d->arg(0).node();
    if (in->op() == OpKind::kPlaceholder && in->meta.quant) {
      // An integer constant: quantized readers take it as is; float readers and user outputs (a
      // partition's weight read on the CPU) keep its Dequantize.
      for (Node* u : d->users()) {
        if (!reads_quantized(u)) continue;
        g.replace_all_uses_with_if(d, in, [u](Node* user) { return user == u; });
        changed = true;
      }
      if (!d->has_uses()) {
        g.erase(d);
        changed = true;
      }
    } else if (in->is_call(OpId::kQuantizePerTensor)) {
      bool folded = is_folded(program, in);
      Node* src = folded ? in->arg(0).node() : in;
      if (!folded && !in->meta.quant) {
        // A kept Quantize (or requantize) states its own encoding like every stored value.
        KILN_ASSIGN_OR_RETURN(QuantAttrs q, qdq_attrs(program, in));
        in->meta.quant = std::move(q);
      }
      for (Node* u : d->users()) {
        if (!reads_quantized(u)) continue;
        g.replace_all_uses_with_if(d, src, [u](Node* user) { return user == u; });
        changed = true;
      }
      // Float readers and user outputs keep a Dequantize, reading the stored value.
      if (d->has_uses() && folded) {
        KILN_RETURN_IF_ERROR(g.set_arg(d, 0, src));
        changed = true;
      }
      if (!d->has_uses()) {
        g.erase(d);
        changed = true;
      }
    }
    d = next;
  }
  // A folded quantize goes, except where a user output returns it: the output is codes (a
  // partition boundary, tag_quant_io), which the value's float spec would not say.
  std::vector<bool> returned(g.id_bound(), false);
  for (const Node* v : program.user_outputs()) returned[v->id()] = true;
  for (Node* q = g.first(); q != nullptr;) {
    Node* next = q->next();
    if (is_folded(program, q) && !returned[q->id()]) {
      g.replace_all_uses_with(q, q->arg(0).node());
      g.erase(q);
      changed = true;
    }
    q = next;
  }
  KILN_ASSIGN_OR_RETURN(bool dead, eliminate_dead_code(program));
  return changed || dead;
}

}  // namespace kiln::htp
