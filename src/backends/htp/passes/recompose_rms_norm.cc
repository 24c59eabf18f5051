// RecomposeRmsNorm: x * rsqrt(mean(x^2, last dims, keepdim) + eps) [* weight] becomes rms_norm
// again (QNN has RmsNorm).
#include <algorithm>

#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

// The other operand of a binary `n` when one operand (looking through q/dq) is `v`.
Node* other_operand(Node* n, Node* v) {
  if (!n->arg(0).is_node() || !n->arg(1).is_node()) return nullptr;
  if (before_qdq(n->arg(0).node()) == v) return n->arg(1).node();
  if (before_qdq(n->arg(1).node()) == v) return n->arg(0).node();
  return nullptr;
}

// eps as a number: a number argument or a 0-d float constant.
std::optional<double> scalar_of(const ExportedProgram& program, const Arg& a) {
  if (a.is_number()) return a.to_float();
  if (!a.is_node()) return std::nullopt;
  const Tensor* t = constant_of(program, a.node());
  if (t == nullptr || t->numel() != 1 || !is_floating(t->dtype())) return std::nullopt;
  return t->scalar_at(0);
}

struct Match {
  Node* x;
  std::vector<int64_t> normalized_shape;
  double eps;
};

// `m` = mul(x, rsqrt(add(mean(pow(x, 2) | mul(x, x)), eps))).
std::optional<Match> match_normed(const ExportedProgram& program, Node* m) {
  if (!m->is_call(OpId::kMul)) return std::nullopt;
  for (size_t i = 0; i < 2; ++i) {
    if (!m->arg(i).is_node() || !m->arg(1 - i).is_node()) continue;
    Node* r = before_qdq(m->arg(i).node());
    Node* x = before_qdq(m->arg(1 - i).node());
    if (!r->is_call(OpId::kRsqrt)) continue;
    Node* a = before_qdq(r->arg(0).node());
    if (!a->is_call(OpId::kAdd) || !a->arg(0).is_node()) continue;
    auto eps = scalar_of(program, a->arg(1));
    Node* mean = before_qdq(a->arg(0).node());
    if (!eps || !mean->is_call(OpId::kMean) || !mean->kwarg_bool("keepdim") || mean->kwarg("dim").is_none()) continue;
    Node* sq = before_qdq(mean->arg(0).node());
    bool square = (sq->is_call(OpId::kPow) && sq->arg(1).is_number() && sq->arg(1).to_float() == 2.0 &&
                   before_qdq(sq->arg(0).node()) == x) ||
                  (sq->is_call(OpId::kMul) && sq->arg(0).is_node() && sq->arg(1).is_node() &&
                   before_qdq(sq->arg(0).node()) == x && before_qdq(sq->arg(1).node()) == x);
    auto shape = static_shape_of(x);
    if (!square || !shape) continue;
    auto rank = static_cast<int64_t>(shape->size());
    std::vector<int64_t> dims = mean->kwarg("dim").to_ints();
    for (int64_t& d : dims) d = d < 0 ? d + rank : d;
    std::sort(dims.begin(), dims.end());
    auto k = static_cast<int64_t>(dims.size());
    bool last = k > 0;
    for (int64_t j = 0; j < k; ++j) last = last && dims[static_cast<size_t>(j)] == rank - k + j;
    if (!last) continue;
    return Match{x, std::vector<int64_t>(shape->end() - k, shape->end()), *eps};
  }
  return std::nullopt;
}

}  // namespace

Result<bool> recompose_rms_norm(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* m = g.first(); m != nullptr;) {
    Node* next = m->next();
    auto match = match_normed(program, m);
    if (!match) {
      m = next;
      continue;
    }
    // A following mul by a constant of the normalized shape is the weight.
    Node* last = m;
    Node* weight = nullptr;
    if (Node* u = single_user(m); u != nullptr && u->is_call(OpId::kMul)) {
      Node* w = other_operand(u, m);
      auto ws = w != nullptr ? static_shape_of(before_qdq(w)) : std::nullopt;
      if (ws && *ws == match->normalized_shape && is_constant_placeholder(program, before_qdq(w))) {
        weight = w;
        last = u;
      }
    }
    KILN_ASSIGN_OR_RETURN(Node * rn, add_call_at(g, last, OpId::kRmsNorm, {match->x, weight},
                                                 {{"normalized_shape", match->normalized_shape}, {"eps", match->eps}}));
    if (last == next) next = rn;  // the weight mul came right after: continue from its place
    g.replace_all_uses_with(last, rn);
    std::string name = last->name();
    g.erase(last);
    g.rename(rn, name);
    changed = true;
    m = next;
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln::htp
