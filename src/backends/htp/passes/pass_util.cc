// Helpers shared by the HTP capture passes.
#include "pass_util.h"

namespace kiln::htp {

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

}  // namespace kiln::htp
