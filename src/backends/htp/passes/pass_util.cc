// Helpers shared by the HTP capture passes.
#include "pass_util.h"

namespace kiln::htp {

const Tensor* constant_of(const ExportedProgram& program, const Node* n) {
  if (n->op() != OpKind::kPlaceholder) return nullptr;
  const InputSpec* in = program.input_spec(n);
  if (in == nullptr || in->kind == InputKind::kUserInput) return nullptr;
  return program.constants().find(in->target);
}

bool is_constant_placeholder(const ExportedProgram& program, const Node* n) {
  if (n->op() != OpKind::kPlaceholder) return false;
  const InputSpec* in = program.input_spec(n);
  return in != nullptr && in->kind != InputKind::kUserInput;
}

Result<QuantAttrs> qdq_attrs(const ExportedProgram& program, const Node* n) {
  QuantAttrs q;
  q.dtype = n->kwarg("dtype").to_dtype();
  q.quant_min = n->kwarg_int("quant_min");
  q.quant_max = n->kwarg_int("quant_max");
  if (n->is_call(OpId::kQuantizePerTensor) || n->is_call(OpId::kDequantizePerTensor)) {
    q.scales = {n->kwarg_float("scale")};
    q.zero_points = {n->kwarg_int("zero_point")};
    return q;
  }
  q.axis = n->kwarg_int("axis");
  const Tensor* scales = n->arg(1).is_node() ? constant_of(program, n->arg(1).node()) : nullptr;
  const Tensor* zps = n->arg(2).is_node() ? constant_of(program, n->arg(2).node()) : nullptr;
  if (scales == nullptr || zps == nullptr || scales->numel() != zps->numel()) {
    return unsupported("node '{}' ({}): per-channel scales and zero points must be constants of "
                       "the same size",
                       n->name(), n->target_name());
  }
  for (int64_t i = 0; i < scales->numel(); ++i) {
    q.scales.push_back(scales->scalar_at(i));
    q.zero_points.push_back(static_cast<int64_t>(zps->scalar_at(i)));
  }
  return q;
}

Node* after(const Graph& graph, Node* n) {
  if (n->op() != OpKind::kPlaceholder) return n->next();
  for (Node* m : graph.nodes()) {
    if (m->op() != OpKind::kPlaceholder) return m;
  }
  return nullptr;
}

Result<Node*> add_call_with_spec(Graph& g, Node* before, OpId op, std::vector<Arg> args,
                                 const Kwargs& kwargs, std::string_view name, TensorSpec spec) {
  Graph::InsertGuard guard(g, before);
  KILN_ASSIGN_OR_RETURN(Node * n, g.add_call(op, std::move(args), kwargs, name, /*infer_spec=*/false));
  n->meta.val.clear();
  n->meta.val.push_back(std::move(spec));
  return n;
}

Result<Node*> add_call_at(Graph& g, Node* before, OpId op, std::vector<Arg> args,
                          const Kwargs& kwargs, std::string_view name) {
  Graph::InsertGuard guard(g, before);
  return g.add_call(op, std::move(args), kwargs, name);
}

Node* add_lifted_constant(ExportedProgram& program, std::string_view base, Tensor value) {
  std::string target(base);
  for (int i = 1; program.constants().contains(target) || program.graph().find(target) != nullptr;
       ++i) {
    target = fmt::format("{}_{}", base, i);
  }
  return program.add_constant(target, target, std::move(value));
}

Node* through_qdq(Node* n) {
  if (n->num_users() != 1) return n;
  Node* q = n->users()[0];
  if (!q->is_call(OpId::kQuantizePerTensor) || q->num_users() != 1) return n;
  Node* dq = q->users()[0];
  return dq->is_call(OpId::kDequantizePerTensor) ? dq : n;
}

Node* before_qdq(Node* n) {
  if (!n->is_call(OpId::kDequantizePerTensor) || !n->arg(0).is_node()) return n;
  Node* q = n->arg(0).node();
  if (!q->is_call(OpId::kQuantizePerTensor) || q->num_users() != 1) return n;
  return q->arg(0).node();
}

Node* single_user(Node* n) {
  Node* v = through_qdq(n);
  return v->num_users() == 1 ? v->users()[0] : nullptr;
}

Result<bool> eliminate_dead_code(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n : g.nodes_reversed()) {
    if (n->has_uses()) continue;
    if (n->op() == OpKind::kCallFunction) {
      g.erase(n);
      changed = true;
    } else if (is_constant_placeholder(program, n)) {
      KILN_RETURN_IF_ERROR(program.erase_input(n));
      changed = true;
    }
  }
  return changed;
}

std::optional<std::vector<int64_t>> static_shape_of(const Node* n) {
  if (!n->has_spec() || n->meta.val.size() != 1) return std::nullopt;
  return n->spec().static_shape();
}

}  // namespace kiln::htp
