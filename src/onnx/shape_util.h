// Shape helpers shared by the ONNX converters and the constant folder.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/tensor_spec.h"

namespace kiln::onnx_import {

/// Maps `*axis` in [-rank, rank) to [0, rank); error naming `what` otherwise.
[[nodiscard]] Status normalize_axis(int64_t* axis, size_t rank, std::string_view what);
/// Output shape of ONNX Unsqueeze(axes) on `shape` (axes relative to the output rank).
[[nodiscard]] Result<std::vector<int64_t>> unsqueeze_shape(std::span<const int64_t> shape,
                                                           std::span<const int64_t> axes);
/// Output shape of ONNX Squeeze; no axes: every size-1 dim.
[[nodiscard]] Result<std::vector<int64_t>> squeeze_shape(
    std::span<const int64_t> shape, const std::optional<std::vector<int64_t>>& axes);
/// ONNX Reshape target resolved against a static input shape (0 copies unless allowzero,
/// one -1 inferred).
[[nodiscard]] Result<std::vector<int64_t>> resolve_reshape(std::span<const int64_t> in,
                                                           std::span<const int64_t> target,
                                                           bool allowzero);

}  // namespace kiln::onnx_import
