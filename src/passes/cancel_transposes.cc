// CancelTransposes: layout chains that do nothing, or that one op does (ONNX Runtime's
// TransposeOptimizer and ReshapeFusion, for the cases that need no layout propagation).
#include <numeric>

#include "kiln/passes/optimize.h"
#include "kiln/passes/pass_util.h"

namespace kiln {
namespace {

// The permutation a permute / transpose applies to a value of rank `rank`, or nullopt.
std::optional<std::vector<int64_t>> perm_of(const Node* n, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  if (n->is_call(OpId::kPermute)) {
    perm = n->kwarg("dims").to_ints();
    if (perm.size() != rank) return std::nullopt;
    std::vector<bool> seen(rank, false);
    for (int64_t& d : perm) {
      d = d < 0 ? d + r : d;
      if (d < 0 || d >= r || seen[static_cast<size_t>(d)]) return std::nullopt;
      seen[static_cast<size_t>(d)] = true;
    }
    return perm;
  }
  if (!n->is_call(OpId::kTranspose)) return std::nullopt;
  int64_t a = n->kwarg_int("dim0"), b = n->kwarg_int("dim1");
  a = a < 0 ? a + r : a;
  b = b < 0 ? b + r : b;
  if (a < 0 || b < 0 || a >= r || b >= r) return std::nullopt;
  std::swap(perm[static_cast<size_t>(a)], perm[static_cast<size_t>(b)]);
  return perm;
}

bool is_reshape_like(const Node* n) {
  return n->is_call(OpId::kReshape) || n->is_call(OpId::kView) || n->is_call(OpId::kFlatten) ||
         n->is_call(OpId::kUnflatten) || n->is_call(OpId::kSqueeze) || n->is_call(OpId::kUnsqueeze);
}

bool identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// `n` is replaced by `v` (a value it equals): its users read v.
bool bypass(Graph& g, Node* n, Node* v) {
  // An output read straight from a placeholder would lose the output's own value name.
  for (const Use& u : n->uses()) {
    if (u.user->op() == OpKind::kOutput && v->op() == OpKind::kPlaceholder) return false;
  }
  g.replace_all_uses_with(n, v);
  return true;
}

}  // namespace

Result<bool> cancel_transposes(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n = g.first(); n != nullptr; n = n->next()) {
    if (n->op() != OpKind::kCallFunction || !n->has_uses() || n->num_args() == 0 || !n->arg(0).is_node() ||
        n->meta.val.size() != 1) {
      continue;
    }
    Node* in = n->arg(0).node();
    if (!in->has_spec() || in->meta.val.size() != 1) continue;
    const size_t rank = in->spec().rank();
    if (auto perm = perm_of(n, rank)) {
      // permute(permute(x, p), q) = permute(x, p[q]).
      Node* src = in;
      std::vector<int64_t> total = *perm;
      if (auto inner = perm_of(in, rank); inner && in->arg(0).is_node()) {
        src = in->arg(0).node();
        for (size_t i = 0; i < total.size(); ++i) total[i] = (*inner)[static_cast<size_t>((*perm)[i])];
      }
      if (identity(total)) {
        changed |= bypass(g, n, src);
      } else if (src != in) {
        KILN_ASSIGN_OR_RETURN(Node * p, add_call_at(g, n, OpId::kPermute, {src}, {{"dims", total}}));
        replace_node(g, n, p);
        n = p;
        changed = true;
      }
      continue;
    }
    if (!is_reshape_like(n)) continue;
    auto out = static_shape_of(n);
    if (!out) continue;
    // A chain of reshapes is one reshape of its first input; none when the shape comes back.
    Node* src = is_reshape_like(in) && in->arg(0).is_node() ? in->arg(0).node() : in;
    if (src->has_spec() && src->meta.val.size() == 1 && src->spec().static_shape() == out) {
      changed |= bypass(g, n, src);
    } else if (src != in) {
      KILN_ASSIGN_OR_RETURN(Node * r, add_call_at(g, n, OpId::kReshape, {src}, {{"shape", *out}}));
      replace_node(g, n, r);
      n = r;
      changed = true;
    }
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln
