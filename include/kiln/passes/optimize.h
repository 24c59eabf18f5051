// The graph passes every CPU user expects before a model reaches a backend, one per file in
// src/passes/, and the pipeline kiln runs them in (ONNX Runtime's basic and extended graph
// optimizations; torch's freezing passes).
//
// Each pass is `Result<bool>(ExportedProgram&)`: whether it changed the program, or an error
// naming what it could not handle. None changes what the program computes beyond float rounding
// (folding a batch norm into a conv's weights rounds differently); names of user outputs stay.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"
#include "kiln/passes/pass_manager.h"

namespace kiln {

/// Evaluates call node `n` on the tensors `value_of` gives for its inputs (the portable kernels:
/// passes do not depend on a backend, the caller hands one in).
using NodeEvaluator = std::function<Result<std::vector<Tensor>>(
    const Node& n, const std::function<const Tensor*(const Node*)>& value_of)>;

struct FoldConstantsOptions {
  /// A node is folded only if its results take at most this many bytes, or no more than its
  /// constant inputs do (an expand or a full of a huge constant stays a node).
  size_t max_result_bytes = size_t{1} << 20;
};

/// Every call whose inputs are all constants (parameters, buffers, lifted constants: never user
/// inputs) becomes a lifted constant holding its value, computed once by `evaluate`. Quantize /
/// dequantize nodes stay (a backend reads the codes and their encoding from them), as do calls a
/// delegate owns and calls `evaluate` fails on. Constants nothing reads any more go.
Result<bool> fold_constants(ExportedProgram& program, const NodeEvaluator& evaluate,
                            const FoldConstantsOptions& options = {});

/// A batch norm, or a mul / add by a constant with one value per output channel (or a single
/// value), that is the only reader of a convolution or conv_transpose2d with f32 constant
/// weights folds into them: W' = W * scale and b' = b * scale + shift per output channel (with
/// scale = gamma / sqrt(var + eps), shift = beta - mean * scale for a batch norm). Chains fold
/// one after the other (conv, mul, add: Paddle's learnable affine blocks).
Result<bool> fold_into_conv(ExportedProgram& program);

/// GELU written out as torch exports it, x * 0.5 * (1 + erf(x / sqrt(2))) in any order of the
/// multiplications (and x * (1 + erf(x * (1 / sqrt(2)))) * 0.5), becomes gelu(x).
Result<bool> recompose_gelu(ExportedProgram& program);

/// Hardswish written out, x * clip(x + 3, 0, 6) / 6 (or * (1 / 6), or x * (clip / 6)),
/// becomes hardswish(x).
Result<bool> recompose_hardswish(ExportedProgram& program);

/// Layer norm written out (torch's opset < 17 export): d = x - mean(x, last dims); then
/// d / sqrt(mean(d^2, same dims) + eps) [* weight] [+ bias] becomes layer_norm(x, weight, bias)
/// when weight and bias are constants of the normalized shape.
Result<bool> recompose_layer_norm(ExportedProgram& program);

/// Layout chains that do nothing or that one op does: a permute / transpose of a permute becomes
/// one permute (none when the composition is the identity); reshape / view / flatten / squeeze /
/// unsqueeze of one another become one reshape (none when the shape does not change).
Result<bool> cancel_transposes(ExportedProgram& program);

/// An activation that is the only reader of a linear / addmm / convolution / conv_transpose2d
/// (relu, relu6, clamp, hardswish, sigmoid, silu, tanh, gelu with the erf form, on float values)
/// moves into that call's `activation` keyword. Runs after partitioning, on what the portable
/// kernels run: delegates fuse what their hardware fuses themselves.
Result<bool> fuse_activations(ExportedProgram& program);

struct OptimizeOptions {
  NodeEvaluator evaluate;        ///< constant folding's evaluator (empty: no constant folding)
  bool lint = true;              ///< lint after each pass that changed the program
  AfterPassFn after_changed;     ///< seen after each pass that changed the program
};

/// The passes before partitioning, in order: constant folding, folding into convolutions, GELU,
/// hardswish and layer-norm recomposition, layout-chain cancellation, dead-code elimination. Returns what each
/// pass did (PassManager's records).
Result<std::vector<PassRecord>> optimize(ExportedProgram& program, const OptimizeOptions& options);

}  // namespace kiln
