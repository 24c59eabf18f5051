// Import-time evaluation of ONNX ops on constant kiln tensors (shape arithmetic, small constants).
// All functions check their inputs: the tensors come from untrusted files.
#pragma once

#include <span>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::onnx_import::fold {

/// Element i as int64 (floats truncate) / as double.
int64_t get_i64(const Tensor& t, int64_t i);
double get_f64(const Tensor& t, int64_t i);
/// The elements of an integer tensor of rank <= 1 as int64 values.
std::vector<int64_t> to_i64_vector(const Tensor& t);
/// A 1-D (or rank-0 when `scalar`) int64 tensor holding `values`.
Tensor i64_tensor(std::span<const int64_t> values, bool scalar = false);

/// numpy broadcast of two shapes; error if incompatible.
[[nodiscard]] Result<std::vector<int64_t>> broadcast_shapes(std::span<const int64_t> a,
                                                            std::span<const int64_t> b);

enum class BinOp { kAdd, kSub, kMul, kDiv, kEq, kLt, kGt, kLe, kGe, kAnd, kOr };
/// ONNX binary op with broadcasting; comparisons return bool, arithmetic keeps the dtype
/// (integer division truncates, as ONNX Runtime does; overflow and division by zero are errors).
[[nodiscard]] Result<Tensor> binary(BinOp op, const Tensor& a, const Tensor& b);
[[nodiscard]] Result<Tensor> logical_not(const Tensor& a);
[[nodiscard]] Result<Tensor> where(const Tensor& cond, const Tensor& x, const Tensor& y);
[[nodiscard]] Result<Tensor> cast(const Tensor& a, DType to);
[[nodiscard]] Result<Tensor> concat(std::span<const Tensor> parts, int64_t axis);
[[nodiscard]] Result<Tensor> gather(const Tensor& data, const Tensor& indices, int64_t axis);
/// ONNX Slice with resolved per-axis parameters (axes normalized, one entry each).
[[nodiscard]] Result<Tensor> slice(const Tensor& data, std::span<const int64_t> starts,
                                   std::span<const int64_t> ends, std::span<const int64_t> axes,
                                   std::span<const int64_t> steps);
[[nodiscard]] Result<Tensor> transpose(const Tensor& data, std::span<const int64_t> perm);
[[nodiscard]] Result<Tensor> expand(const Tensor& data, std::span<const int64_t> shape);
/// Tensor of `shape` filled with element 0 of `value`.
[[nodiscard]] Result<Tensor> fill(std::span<const int64_t> shape, const Tensor& value);
[[nodiscard]] Result<Tensor> range(const Tensor& start, const Tensor& limit, const Tensor& delta,
                                   int64_t max_elements);

}  // namespace kiln::onnx_import::fold
