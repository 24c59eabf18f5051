// ConvertBmmToMatmul: bmm is matmul; torch's matmul decomposition (reshape -> bmm -> reshape)
// folds back into one matmul of the original operands.
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

// The operand before a reshape that merged its leading dims into one batch dim, or null.
Node* unbatched(Node* n, std::vector<int64_t>* lead) {
  if (!n->is_call(OpId::kReshape) && !n->is_call(OpId::kView)) return nullptr;
  if (n->num_users() != 1) return nullptr;
  Node* src = n->arg(0).node();
  auto in = static_shape_of(src), out = static_shape_of(n);
  if (!in || !out || in->size() < 3 || out->size() != 3) return nullptr;
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < in->size(); ++i) batch *= (*in)[i];
  if (batch != (*out)[0] || (*in)[in->size() - 2] != (*out)[1] || in->back() != (*out)[2]) return nullptr;
  lead->assign(in->begin(), in->end() - 2);
  return src;
}

}  // namespace

Result<bool> convert_bmm_to_matmul(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n = g.first(); n != nullptr;) {
    Node* next = n->next();
    if (!n->is_call(OpId::kBmm)) {
      n = next;
      continue;
    }
    Node* a = n->arg(0).node();
    Node* b = n->arg(1).node();
    std::vector<int64_t> lead_a, lead_b;
    Node* a0 = unbatched(a, &lead_a);
    Node* b0 = unbatched(b, &lead_b);
    Node* back = n->num_users() == 1 ? n->users()[0] : nullptr;
    auto back_shape = back ? static_shape_of(back) : std::nullopt;
    auto bmm_shape = static_shape_of(n);
    bool fold = a0 != nullptr && b0 != nullptr && a != b && lead_a == lead_b && back_shape && bmm_shape &&
                (back->is_call(OpId::kReshape) || back->is_call(OpId::kView));
    if (fold) {
      std::vector<int64_t> want = lead_a;
      want.push_back((*bmm_shape)[1]);
      want.push_back((*bmm_shape)[2]);
      fold = want == *back_shape;
    }
    KILN_ASSIGN_OR_RETURN(Node * mm, add_call_at(g, n, OpId::kMatmul, {fold ? a0 : a, fold ? b0 : b}, {}, "matmul"));
    mm->meta.source = n->meta.source;
    if (fold) {
      mm->meta.quant = back->meta.quant;
      if (back == next) next = back->next();
      g.replace_all_uses_with(back, mm);
      g.erase(back);
      g.erase(n);
      g.erase(a);
      g.erase(b);
    } else {
      mm->meta.quant = n->meta.quant;
      g.replace_all_uses_with(n, mm);
      g.erase(n);
    }
    changed = true;
    n = next;
  }
  return changed;
}

}  // namespace kiln::htp
