// AnnotateAndQuantScalar: a lifted scalar read by a quantized binary op is stored quantized.
#include <cmath>

#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {

Result<bool> annotate_and_quant_scalar(ExportedProgram& program) {
  bool changed = false;
  for (Node* n : program.graph().nodes()) {
    bool binary = n->is_call(OpId::kAdd) || n->is_call(OpId::kSub) || n->is_call(OpId::kMul) ||
                  n->is_call(OpId::kDiv);
    if (!binary || !n->meta.quant) continue;
    // The encoding of the quantized operand gives dtype and range.
    const Node* other = nullptr;
    Node* scalar = nullptr;
    for (size_t i = 0; i < 2; ++i) {
      if (!n->arg(i).is_node()) continue;
      Node* a = n->arg(i).node();
      const Tensor* t = constant_of(program, a);
      if (t != nullptr && t->numel() == 1 && is_floating(t->dtype()) && !a->meta.quant && a->num_users() == 1) {
        scalar = a;
      } else if (a->is_call(OpId::kDequantizePerTensor)) {
        other = a;
      }
    }
    if (scalar == nullptr || other == nullptr) continue;
    KILN_ASSIGN_OR_RETURN(QuantAttrs q, qdq_attrs(program, other));
    const Tensor& t = *constant_of(program, scalar);
    double v = t.scalar_at(0);
    auto range = static_cast<double>(q.quant_max - q.quant_min);
    // The scalar takes one end of the range: qmax for v >= 0 (zero point qmin), qmin for v < 0
    // (zero point qmax); ExecuTorch's zero point 0 / qmax for the unsigned activations HTP uses.
    q.scales = {v == 0 ? 1.0 : std::abs(v) / range};
    q.zero_points = {v >= 0 ? q.quant_min : q.quant_max};
    int64_t stored = v == 0 ? q.quant_min : (v > 0 ? q.quant_max : q.quant_min);
    Tensor qt(q.dtype, t.shape());
    qt.set_scalar_at(0, static_cast<double>(stored));
    program.constants().set(program.input_spec(scalar)->target, std::move(qt));
    scalar->meta.val[0].dtype = q.dtype;
    scalar->meta.quant = std::move(q);
    changed = true;
  }
  return changed;
}

}  // namespace kiln::htp
