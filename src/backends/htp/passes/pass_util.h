// Helpers shared by the HTP capture passes: q/dq recognition, quantization parameters from q/dq
// nodes, insertion points, constants and dead-code removal.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

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

/// The stored tensor behind a parameter / buffer / constant placeholder, or null.
const Tensor* constant_of(const ExportedProgram& program, const Node* n);
/// True for a placeholder of kind parameter, buffer or constant tensor.
bool is_constant_placeholder(const ExportedProgram& program, const Node* n);

/// Where a node computed from `n` goes so that it comes right after `n` (placeholders: before
/// the first non-placeholder node).
Node* after(const Graph& graph, Node* n);

/// Adds a call before `before` with the spec given (no inference).
Result<Node*> add_call_with_spec(Graph& g, Node* before, OpId op, std::vector<Arg> args,
                                 const Kwargs& kwargs, std::string_view name, TensorSpec spec);
/// Adds a call before `before`, inferring its spec.
Result<Node*> add_call_at(Graph& g, Node* before, OpId op, std::vector<Arg> args,
                          const Kwargs& kwargs = {}, std::string_view name = {});

/// A new lifted constant placeholder holding `value`, named after `base` (made unique, also as
/// a constant-store target).
Node* add_lifted_constant(ExportedProgram& program, std::string_view base, Tensor value);

/// The value users of `n` read: `n`, or the dequantize of n's only quantize when n's only user
/// is that quantize and the quantize's only user a dequantize. Lets pattern matchers see
/// through the q/dq pairs of a quantized program.
Node* through_qdq(Node* n);
/// The producer behind `n` when it is a dequantize of a quantize (else `n`).
Node* before_qdq(Node* n);
/// The only user of `n` (looking through a q/dq pair), or null.
Node* single_user(Node* n);

/// Erases call_function nodes without uses and parameter / buffer / constant placeholders
/// without uses (with their constants). Returns whether anything was erased.
Result<bool> eliminate_dead_code(ExportedProgram& program);
/// eliminate_dead_code, for passes that already know they changed the program.
inline Status remove_dead(ExportedProgram& program) {
  Result<bool> r = eliminate_dead_code(program);
  return r.ok() ? Status::Ok() : r.status();
}

/// A static shape, or nullopt.
std::optional<std::vector<int64_t>> static_shape_of(const Node* n);

}  // namespace kiln::htp
