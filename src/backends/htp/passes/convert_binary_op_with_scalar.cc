// ConvertBinaryOpsWithScalar: a number operand of add/sub/mul/div becomes a lifted 0-d constant.
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {

Result<bool> convert_binary_ops_with_scalar(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n : g.nodes()) {
    bool has_alpha = n->is_call(OpId::kAdd) || n->is_call(OpId::kSub);
    if (!has_alpha && !n->is_call(OpId::kMul) && !n->is_call(OpId::kDiv)) continue;
    if (!n->arg(1).is_number() || !n->arg(0).is_node() || !n->arg(0).node()->has_spec()) continue;
    const TensorSpec& self = n->arg(0).node()->spec();
    double value = n->arg(1).to_float();
    if (has_alpha) value *= n->kwarg_float("alpha");
    // The constant takes self's dtype unless that would truncate a fractional number (torch's
    // result type: an int tensor with a float scalar computes in the default float dtype).
    DType dtype = self.dtype;
    bool fractional = n->arg(1).kind() == Arg::Kind::kFloat || value != static_cast<double>(static_cast<int64_t>(value));
    if (!is_floating(dtype) && fractional) dtype = DType::kF32;
    if (dtype == DType::kBool) continue;
    Tensor t(dtype, {});
    t.set_scalar_at(0, value);
    Node* c = add_lifted_constant(program, "_lifted_tensor_constant", std::move(t));
    KILN_RETURN_IF_ERROR(g.set_arg(n, 1, c));
    if (has_alpha) KILN_RETURN_IF_ERROR(g.set_kwarg(n, "alpha", 1.0));
    KILN_RETURN_IF_ERROR(g.infer(n));
    changed = true;
  }
  return changed;
}

}  // namespace kiln::htp
