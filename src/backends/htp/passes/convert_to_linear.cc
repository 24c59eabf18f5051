// ConvertToLinear: addmm / mm of a transposed weight is linear.
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

// w when `n` is permute(w, [1, 0]) or transpose(w, 0, 1) of a rank-2 w, else null.
Node* transposed_2d(Node* n) {
  if (n->num_users() != 1 || !n->has_spec() || n->spec().rank() != 2) return nullptr;
  if (n->is_call(OpId::kPermute) && n->kwarg("dims").to_ints() == std::vector<int64_t>{1, 0}) {
    return n->arg(0).node();
  }
  if (n->is_call(OpId::kTranspose)) {
    int64_t d0 = (n->kwarg_int("dim0") + 2) % 2, d1 = (n->kwarg_int("dim1") + 2) % 2;
    if (d0 != d1) return n->arg(0).node();
  }
  return nullptr;
}

}  // namespace

Result<bool> convert_to_linear(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n = g.first(); n != nullptr;) {
    Node* next = n->next();
    Node *x = nullptr, *wt = nullptr;
    Arg bias;
    if (n->is_call(OpId::kMm)) {
      x = n->arg(0).node();
      wt = n->arg(1).node();
    } else if (n->is_call(OpId::kAddmm) && n->kwarg_float("beta") == 1.0 &&
               n->kwarg_float("alpha") == 1.0 && n->arg(0).is_node()) {
      Node* b = n->arg(0).node();
      // linear's bias is one value per output feature.
      if (b->has_spec() && b->spec().rank() == 1 && n->has_spec() && b->spec().shape[0] == n->spec().shape[1]) {
        x = n->arg(1).node();
        wt = n->arg(2).node();
        bias = b;
      }
    }
    Node* w = wt != nullptr ? transposed_2d(wt) : nullptr;
    if (w == nullptr) {
      n = next;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Node * lin, add_call_at(g, n, OpId::kLinear, {x, w, bias}, {}, "linear"));
    lin->meta.quant = n->meta.quant;
    lin->meta.source = n->meta.source;
    g.replace_all_uses_with(n, lin);
    g.erase(n);
    g.erase(wt);
    changed = true;
    n = next;
  }
  return changed;
}

}  // namespace kiln::htp
