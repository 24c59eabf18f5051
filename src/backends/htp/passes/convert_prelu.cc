// ConvertPReLU: torch's prelu decomposition where(x > 0, x, a * x) becomes prelu(x, a).
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

bool is_zero(const ExportedProgram& program, const Arg& a) {
  if (a.is_number()) return a.to_float() == 0.0;
  if (!a.is_node()) return false;
  const Tensor* t = constant_of(program, a.node());
  return t != nullptr && t->numel() == 1 && t->scalar_at(0) == 0.0;
}

// The slope as a rank-1 [C] (or [1]) tensor if `t` holds one value per channel of an input of
// rank `rank` (channels at dim 1) or a single value; else nullopt.
std::optional<Tensor> slope_vector(const Tensor& t, size_t rank) {
  if (t.numel() == 1) return t.reshaped({1});
  if (rank < 2) return std::nullopt;
  // [C] only broadcasts to dim 1 for a rank-2 input; [C, 1, ..., 1] with rank - 1 dims for any.
  bool ok = (t.rank() == 1 && rank == 2) || t.rank() == rank - 1;
  for (size_t i = 1; ok && i < t.rank(); ++i) ok = t.dim(i) == 1;
  if (!ok) return std::nullopt;
  return t.reshaped({t.numel()});
}

}  // namespace

Result<bool> convert_prelu(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n = g.first(); n != nullptr;) {
    Node* next = n->next();
    if (!n->is_call(OpId::kWhere) || !n->arg(0).is_node() || !n->arg(1).is_node() ||
        !n->arg(2).is_node()) {
      n = next;
      continue;
    }
    Node* cond = n->arg(0).node();
    Node* x = n->arg(1).node();
    Node* prod = n->arg(2).node();
    bool cond_ok = cond->is_call(OpId::kGt) && cond->arg(0) == Arg(x) &&
                   is_zero(program, cond->arg(1)) && cond->num_users() == 1;
    bool prod_ok = prod->is_call(OpId::kMul) && prod->num_users() == 1 &&
                   (prod->arg(0) == Arg(x) || prod->arg(1) == Arg(x));
    if (!cond_ok || !prod_ok || !x->has_spec()) {
      n = next;
      continue;
    }
    Arg slope_arg = prod->arg(0) == Arg(x) ? prod->arg(1) : prod->arg(0);
    const Tensor* slope = slope_arg.is_node() ? constant_of(program, slope_arg.node()) : nullptr;
    std::optional<Tensor> vec = slope ? slope_vector(*slope, x->spec().rank()) : std::nullopt;
    if (!vec || vec->dtype() != x->spec().dtype) {
      n = next;
      continue;
    }
    Node* weight = slope_arg.node();
    if (slope->rank() != 1) weight = add_lifted_constant(program, weight->name() + "_prelu", std::move(*vec));
    KILN_ASSIGN_OR_RETURN(Node * prelu, add_call_at(g, n, OpId::kPrelu, {x, weight}, {}, "prelu"));
    prelu->meta.quant = n->meta.quant;
    prelu->meta.source = n->meta.source;
    g.replace_all_uses_with(n, prelu);
    g.erase(n);
    g.erase(cond);
    g.erase(prod);
    changed = true;
    n = next;
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln::htp
