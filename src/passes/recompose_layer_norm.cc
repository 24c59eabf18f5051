// RecomposeLayerNorm: layer normalization written out in basic ops (torch's ONNX export before
// opset 17: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) becomes one layer_norm
// (ONNX Runtime's LayerNormFusion).
#include <algorithm>

#include "kiln/passes/optimize.h"
#include "kiln/passes/pass_util.h"

namespace kiln {
namespace {

// The dims of a keepdim mean over the last dims of a static rank-`rank` value, as a count, or 0.
size_t trailing_mean_dims(const Node* mean, size_t rank) {
  if (!mean->is_call(OpId::kMean) || !mean->kwarg_bool("keepdim") || mean->kwarg("dim").is_none()) return 0;
  std::vector<int64_t> dims = mean->kwarg("dim").to_ints();
  const auto r = static_cast<int64_t>(rank);
  for (int64_t& d : dims) d = d < 0 ? d + r : d;
  std::sort(dims.begin(), dims.end());
  const auto k = static_cast<int64_t>(dims.size());
  for (int64_t j = 0; j < k; ++j) {
    if (dims[static_cast<size_t>(j)] != r - k + j) return 0;
  }
  return dims.size();
}

// d * d or d ^ 2.
bool squares(const ExportedProgram& program, const Node* p, const Node* d) {
  if (p->is_call(OpId::kMul)) return p->arg(0).is_node() && p->arg(1).is_node() && p->arg(0).node() == d && p->arg(1).node() == d;
  if (!p->is_call(OpId::kPow) || !p->arg(0).is_node() || p->arg(0).node() != d) return false;
  auto e = scalar_value(program, p->arg(1));
  return e && *e == 2.0;
}

// The weight or bias: a constant of the normalized shape (leading unit dims allowed: then its
// values reshaped).
struct Affine {
  Node* node = nullptr;
  std::optional<Tensor> reshaped;
};
std::optional<Affine> affine(const ExportedProgram& program, const Node* mul_or_add, const Node* v,
                             const std::vector<int64_t>& normalized) {
  auto o = other_operand(mul_or_add, v);
  if (!o || !mul_or_add->arg(*o).is_node()) return std::nullopt;
  if (mul_or_add->is_call(OpId::kAdd) && mul_or_add->kwarg_float("alpha") != 1.0) return std::nullopt;
  const Tensor* t = constant_of(program, mul_or_add->arg(*o).node());
  if (t == nullptr || t->dtype() != DType::kF32 || t->rank() < normalized.size()) return std::nullopt;
  size_t lead = t->rank() - normalized.size();
  for (size_t i = 0; i < t->rank(); ++i) {
    if (t->dim(i) != (i < lead ? 1 : normalized[i - lead])) return std::nullopt;
  }
  Node* c = mul_or_add->arg(*o).node();
  if (lead == 0) return Affine{c, std::nullopt};
  return Affine{c, t->reshaped(normalized)};
}

struct Match {
  Node* x;
  Node* last;
  std::vector<int64_t> normalized;
  double eps;
  std::optional<Affine> weight, bias;
};

// From the division d / sqrt(mean(d^2) + eps) (or d * rsqrt(...)).
std::optional<Match> match(const ExportedProgram& program, Node* n) {
  const bool div = n->is_call(OpId::kDiv);
  if ((!div && !n->is_call(OpId::kMul)) || !n->arg(0).is_node() || !n->arg(1).is_node()) return std::nullopt;
  if (div && !n->kwarg("rounding_mode").is_none()) return std::nullopt;
  for (size_t i = 0; i < (div ? 1u : 2u); ++i) {
    Node* d = n->arg(i).node();
    Node* root = n->arg(1 - i).node();
    if (!root->is_call(div ? OpId::kSqrt : OpId::kRsqrt) || only_user(root) != n || !root->arg(0).is_node()) continue;
    Node* a = root->arg(0).node();
    if (!a->is_call(OpId::kAdd) || only_user(a) != root || !a->arg(0).is_node() || a->kwarg_float("alpha") != 1.0) continue;
    auto eps = scalar_value(program, a->arg(1));
    Node* var = a->arg(0).node();
    if (!eps || !var->is_call(OpId::kMean) || only_user(var) != a || !var->arg(0).is_node()) continue;
    Node* sq = var->arg(0).node();
    if (only_user(sq) != var || !squares(program, sq, d)) continue;
    if (!d->is_call(OpId::kSub) || d->kwarg_float("alpha") != 1.0 || !d->arg(0).is_node() || !d->arg(1).is_node()) continue;
    Node* x = d->arg(0).node();
    Node* mu = d->arg(1).node();
    auto shape = static_shape_of(x);
    if (!shape || x->spec().dtype != DType::kF32 || !mu->is_call(OpId::kMean) || only_user(mu) != d || !mu->arg(0).is_node() || mu->arg(0).node() != x) continue;
    size_t k = trailing_mean_dims(mu, shape->size());
    if (k == 0 || trailing_mean_dims(var, shape->size()) != k) continue;
    // d feeds the square and the division only.
    bool inside = true;
    for (const Use& u : d->uses()) inside = inside && (u.user == sq || u.user == n);
    if (!inside) continue;
    Match m{x, n, std::vector<int64_t>(shape->end() - static_cast<ptrdiff_t>(k), shape->end()), *eps, {}, {}};
    if (Node* u = only_user(m.last); u != nullptr && u->is_call(OpId::kMul)) {
      if ((m.weight = affine(program, u, m.last, m.normalized))) m.last = u;
    }
    if (Node* u = only_user(m.last); u != nullptr && u->is_call(OpId::kAdd)) {
      if ((m.bias = affine(program, u, m.last, m.normalized))) m.last = u;
    }
    if (!(m.last->spec() == x->spec())) continue;
    return m;
  }
  return std::nullopt;
}

}  // namespace

Result<bool> recompose_layer_norm(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n = g.first(); n != nullptr; n = n->next()) {
    auto m = match(program, n);
    if (!m) continue;
    auto constant = [&](std::optional<Affine>& a) -> Arg {
      if (!a) return nullptr;
      if (!a->reshaped) return a->node;
      return add_lifted_constant(program, a->node->name() + "_reshaped", std::move(*a->reshaped));
    };
    Arg weight = constant(m->weight);
    Arg bias = constant(m->bias);
    KILN_ASSIGN_OR_RETURN(Node * ln, add_call_at(g, m->last, OpId::kLayerNorm, {m->x, weight, bias},
                                                 {{"normalized_shape", m->normalized}, {"eps", m->eps}}));
    replace_node(g, m->last, ln);
    changed = true;
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln
