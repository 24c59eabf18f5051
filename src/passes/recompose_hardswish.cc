// RecomposeHardswish: hardswish written out as x * clip(x + 3, 0, 6) / 6 (Paddle's and older
// ONNX exports) becomes one hardswish, which the delegates and the portable kernels run whole.
#include <cmath>

#include "kiln/passes/optimize.h"
#include "kiln/passes/pass_util.h"

namespace kiln {
namespace {

bool near(std::optional<double> v, double want) { return v && std::abs(*v - want) <= 1e-6 * std::abs(want); }

// `n` divides `v` by 6 or multiplies it by 1/6.
bool sixth_of(const ExportedProgram& program, const Node* n, const Node* v) {
  if (n->is_call(OpId::kDiv)) {
    return n->arg(0).is_node() && n->arg(0).node() == v && n->kwarg("rounding_mode").is_none() &&
           near(scalar_value(program, n->arg(1)), 6.0);
  }
  auto o = n->is_call(OpId::kMul) ? other_operand(n, v) : std::nullopt;
  return o && near(scalar_value(program, n->arg(*o)), 1.0 / 6.0);
}

// From clip(x + 3, 0, 6): x * that / 6, or x * (that / 6). Returns the node hardswish replaces
// and x.
std::optional<std::pair<Node*, Node*>> match(const ExportedProgram& program, Node* c) {
  if (!c->is_call(OpId::kClamp) || !c->arg(0).is_node() || c->kwarg("min").is_none() || c->kwarg("max").is_none() ||
      c->kwarg_float("min") != 0.0 || c->kwarg_float("max") != 6.0) {
    return std::nullopt;
  }
  Node* a = c->arg(0).node();
  if (!a->is_call(OpId::kAdd) || only_user(a) != c || a->kwarg_float("alpha") != 1.0 || !a->arg(0).is_node() ||
      !near(scalar_value(program, a->arg(1)), 3.0)) {
    return std::nullopt;
  }
  Node* x = a->arg(0).node();
  Node* u = only_user(c);
  if (u == nullptr) return std::nullopt;
  if (auto o = u->is_call(OpId::kMul) ? other_operand(u, c) : std::nullopt; o && u->arg(*o).is_node() && u->arg(*o).node() == x) {
    Node* d = only_user(u);  // x * clip(...), then / 6
    if (d == nullptr || !sixth_of(program, d, u)) return std::nullopt;
    return std::make_pair(d, x);
  }
  if (!sixth_of(program, u, c)) return std::nullopt;  // clip(...) / 6, then x * that
  Node* m = only_user(u);
  auto o = m != nullptr && m->is_call(OpId::kMul) ? other_operand(m, u) : std::nullopt;
  if (!o || !m->arg(*o).is_node() || m->arg(*o).node() != x) return std::nullopt;
  return std::make_pair(m, x);
}

}  // namespace

Result<bool> recompose_hardswish(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n = g.first(); n != nullptr; n = n->next()) {
    auto m = match(program, n);
    if (!m) continue;
    auto [last, x] = *m;
    if (!x->has_spec() || x->spec().dtype != DType::kF32 || !(last->spec() == x->spec())) continue;
    KILN_ASSIGN_OR_RETURN(Node * hs, add_call_at(g, last, OpId::kHardswish, {x}));
    replace_node(g, last, hs);
    changed = true;
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln
