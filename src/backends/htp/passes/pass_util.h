// Helpers shared by the HTP capture passes: q/dq recognition and quantization parameters from
// q/dq nodes (the generic ones, constants, insertion points, dead code, are kiln/passes/pass_util.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"
#include "kiln/passes/pass_util.h"

namespace kiln::htp {

inline bool is_quantize(const Node* n) {
  return n->is_call(OpId::kQuantizePerTensor) || n->is_call(OpId::kQuantizePerChannel);
}
inline bool is_dequantize(const Node* n) {
  return n->is_call(OpId::kDequantizePerTensor) || n->is_call(OpId::kDequantizePerChannel);
}
/// relu, relu6, clamp: the activations HTP fuses into the op before them.
inline bool is_fusable_activation(const Node* n) {
  return n->is_call(OpId::kRelu) || n->is_call(OpId::kRelu6) || n->is_call(OpId::kClamp);
}

/// The quantization parameters a q/dq node applies. Per channel, scales and zero points come
/// from their constant placeholders; an error names the node if they are not constants.
Result<QuantAttrs> qdq_attrs(const ExportedProgram& program, const Node* qdq);

/// The value users of `n` read: `n`, or the dequantize of n's only quantize when n's only user
/// is that quantize and the quantize's only user a dequantize. Lets pattern matchers see
/// through the q/dq pairs of a quantized program.
Node* through_qdq(Node* n);
/// The producer behind `n` when it is a dequantize of a quantize (else `n`).
Node* before_qdq(Node* n);
/// The only user of `n` (looking through a q/dq pair), or null.
Node* single_user(Node* n);

}  // namespace kiln::htp
