// RecomposeGelu: the erf form of GELU that torch's ONNX export writes out (Div, Erf, Add, Mul,
// Mul) becomes one gelu (ONNX Runtime's GeluFusion).
#include <cmath>

#include "kiln/passes/optimize.h"
#include "kiln/passes/pass_util.h"

namespace kiln {
namespace {

bool near(std::optional<double> v, double want) { return v && std::abs(*v - want) <= 1e-4 * std::abs(want); }

// `n` = op(v, c) (or op(c, v) when `commutes`) with the number c near `want`.
bool by_scalar(const ExportedProgram& program, const Node* n, OpId op, const Node* v, double want, bool commutes) {
  if (!n->is_call(op)) return false;
  if ((op == OpId::kAdd || op == OpId::kSub) && n->kwarg_float("alpha") != 1.0) return false;
  auto other = other_operand(n, v);
  if (!other || (*other == 0 && !commutes)) return false;
  return near(scalar_value(program, n->arg(*other)), want);
}

struct Match {
  Node* x;     // gelu's input
  Node* last;  // the node gelu replaces
};

// From erf(x / sqrt(2)) (or erf(x * (1 / sqrt(2)))): the half of 1 + erf, times x, times 0.5.
std::optional<Match> match(const ExportedProgram& program, Node* erf) {
  if (!erf->is_call(OpId::kErf) || !erf->arg(0).is_node()) return std::nullopt;
  Node* scaled = erf->arg(0).node();
  if (!(scaled->is_call(OpId::kDiv) || scaled->is_call(OpId::kMul)) || !scaled->arg(0).is_node()) return std::nullopt;
  Node* x = scaled->arg(0).node();
  if (!by_scalar(program, scaled, OpId::kDiv, x, std::sqrt(2.0), false) &&
      !by_scalar(program, scaled, OpId::kMul, x, std::sqrt(0.5), true)) {
    return std::nullopt;
  }
  if (scaled->is_call(OpId::kDiv) && !scaled->kwarg("rounding_mode").is_none()) return std::nullopt;
  Node* plus = only_user(erf);
  if (plus == nullptr || !by_scalar(program, plus, OpId::kAdd, erf, 1.0, true)) return std::nullopt;
  Node* m1 = only_user(plus);
  if (m1 == nullptr || !m1->is_call(OpId::kMul)) return std::nullopt;
  auto o = other_operand(m1, plus);
  if (!o || !m1->arg(*o).is_node()) {
    // (1 + erf) * 0.5, then x times that.
    if (!o || !by_scalar(program, m1, OpId::kMul, plus, 0.5, true)) return std::nullopt;
    Node* m2 = only_user(m1);
    auto ox = m2 != nullptr && m2->is_call(OpId::kMul) ? other_operand(m2, m1) : std::nullopt;
    if (!ox || !m2->arg(*ox).is_node() || m2->arg(*ox).node() != x) return std::nullopt;
    return Match{x, m2};
  }
  Node* y = m1->arg(*o).node();
  if (y == x) {  // x * (1 + erf), then times 0.5
    Node* m2 = only_user(m1);
    if (m2 == nullptr || !by_scalar(program, m2, OpId::kMul, m1, 0.5, true)) return std::nullopt;
    return Match{x, m2};
  }
  // (x * 0.5) * (1 + erf)
  if (y->num_users() == 1 && by_scalar(program, y, OpId::kMul, x, 0.5, true)) return Match{x, m1};
  return std::nullopt;
}

}  // namespace

Result<bool> recompose_gelu(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n = g.first(); n != nullptr; n = n->next()) {
    auto m = match(program, n);
    if (!m || !m->x->has_spec() || !is_floating(m->x->spec().dtype) || !(m->last->spec() == m->x->spec())) continue;
    KILN_ASSIGN_OR_RETURN(Node * gelu, add_call_at(g, m->last, OpId::kGelu, {m->x}));
    replace_node(g, m->last, gelu);
    changed = true;
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln
