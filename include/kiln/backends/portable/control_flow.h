// The iteration protocol of kiln's loop op (ONNX Loop), shared by the interpreter and the
// runtime: each brings the body (an interpreter or a method of the program file).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "kiln/backends/portable/kernels.h"

namespace kiln::portable {

/// Runs one iteration: takes (iteration i64[], condition bool[], carried..., other operands...)
/// and returns (condition, carried..., scan elements...).
using LoopBody = std::function<Result<std::vector<Tensor>>(const std::vector<Tensor>&)>;

/// What a scan output is when the loop runs no iteration: its dtype and its element's shape.
struct ScanElement {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};

/// Runs `body` while the iteration count is below `trip_count` (one integer element; null: no
/// limit) and the condition holds (`cond`, one element, then the body's; null: always true, the
/// body's ignored, as in ONNX).
/// `operands` are the carried values' initial values (the first `num_carried`), then the body's
/// other operands. Returns the carried values' final values, then each scan element stacked
/// along a new dim 0 (a scan output per entry of `scan`). Messages name no node: callers add it.
Result<std::vector<Tensor>> run_loop(KernelContext& ctx, const Tensor* trip_count,
                                     const Tensor* cond, std::span<const Tensor> operands,
                                     size_t num_carried, std::span<const ScanElement> scan,
                                     const LoopBody& body);

}  // namespace kiln::portable
