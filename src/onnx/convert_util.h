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

}  // namespace kiln::onnx_import
