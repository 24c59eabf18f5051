// Helpers shared by the op converter files.
#pragma once

#include "importer.h"

namespace kiln::onnx_import {

/// Input `i` as a number when it is a one-element constant that broadcasting cannot change the
/// output shape of (its rank is at most `max_rank`), else as a node.
[[nodiscard]] Result<Arg> scalar_or_node(Importer& im, size_t i, size_t max_rank);
/// Single-output unary op `op` on input 0.
[[nodiscard]] Status unary(Importer& im, OpId op, const Kwargs& kwargs = {});
/// Rank of input `i`.
[[nodiscard]] Result<size_t> input_rank(Importer& im, size_t i);
/// A convolution of `x` by `w` (+ `b`) with the current node's Conv attributes (kernel_shape,
/// strides, dilations, group, pads / auto_pad); `xs` and `ws` are the specs of X and W
/// (ops_nn.cc; Conv and the quantized convolutions share it).
[[nodiscard]] Result<Node*> conv_call(Importer& im, const TensorSpec& xs, const TensorSpec& ws,
                                      Node* x, Node* w, Arg b);

}  // namespace kiln::onnx_import
