// Helpers shared by the portable kernels (internal).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kiln/backends/portable/kernels.h"
#include "kiln/ir/fused_activation.h"

namespace kiln::portable {

/// Fails unless input `i` is a tensor; `op`/`what` name it in the message.
Status need_tensor(const KernelArgs& args, size_t i, const char* op, const char* what);
/// `shape` with its one -1 inferred for `numel` elements; errors when it cannot hold them.
Result<std::vector<int64_t>> infer_view_shape(std::vector<int64_t> shape, int64_t numel,
                                              const char* op);
/// The values of 1-D integer (i64 or i32) tensor input `i`: a shape read when the program runs.
Result<std::vector<int64_t>> int_values(const KernelArgs& args, size_t i, const char* op,
                                        const char* what);
/// Fails (unsupported) unless `t` is f32, the one floating type the float kernels take.
Status need_f32(const Tensor& t, const char* op, const char* what);
/// Normalizes a possibly negative dim against `rank`.
Result<int64_t> norm_dim(int64_t dim, int64_t rank, const char* op);
/// Broadcast shape of a and b (numpy rules).
Result<std::vector<int64_t>> broadcast_shapes(const std::vector<int64_t>& a,
                                              const std::vector<int64_t>& b, const char* op);
/// Copy of `src` converted to `dtype` (the same tensor if it already has it).
Tensor convert(KernelContext& ctx, const Tensor& src, DType dtype);
/// A tensor of `shape` whose elements are `src` broadcast (src must broadcast to shape).
Tensor broadcast_to(KernelContext& ctx, const Tensor& src, const std::vector<int64_t>& shape);
/// A 0-d tensor holding `v` as `dtype`.
Tensor scalar_tensor(double v, DType dtype);
/// Product of shape[begin, end).
int64_t dims_product(const std::vector<int64_t>& shape, size_t begin, size_t end);
/// Strides (in elements) of a dense row-major tensor of `shape`.
std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape);

/// Per-thread scratch floats (grow-only, contents unspecified), valid until the next call on
/// this thread. Keeps big im2col buffers from being mapped, zeroed and unmapped per call.
float* scratch_floats(size_t n);

/// Row-major C[m,n] = alpha * op(A) op(B) + beta * C with explicit leading dims through
/// single-threaded OpenBLAS, split over ctx's threads by rows or columns when large.
void sgemm(KernelContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
           float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
           float* c, int64_t ldc);

/// The same product on the calling thread only (a worker's share of a larger parallel loop).
void sgemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc);

/// The float activations, one definition for the elementwise kernels and the fused epilogue of
/// linear / addmm / convolution (so that fusing changes no bit of the result).
namespace act {
inline float relu(float x) { return x > 0.0f ? x : 0.0f; }
inline float relu6(float x) { return x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float tanh(float x) { return std::tanh(x); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float hardswish(float x) { return x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
inline float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); }
}  // namespace act

/// The activation a linear / addmm / convolution / conv_transpose2d call ends in (its
/// `activation`, `clamp_min` and `clamp_max` attributes).
struct Epilogue {
  FusedActivation kind = FusedActivation::kNone;
  float lo = -INFINITY, hi = INFINITY;  ///< clamp's bounds
};
/// Reads the attributes; an unknown name or bad bounds are an error naming `op`.
Result<Epilogue> read_epilogue(const KernelArgs& args, const char* op);
/// Applies `e` to p[0, n) in place.
void apply_epilogue(const Epilogue& e, float* p, int64_t n);
/// apply_epilogue split over ctx's threads when p is large.
void apply_epilogue(KernelContext& ctx, const Epilogue& e, float* p, int64_t n);

/// Calls f(T{}) with T the C++ type of `dtype` (bool as uint8_t; f16/bf16 as uint16_t).
template <typename F>
auto dispatch_all(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(float{});
    case DType::kF64: return f(double{});
    case DType::kI64: return f(int64_t{});
    case DType::kI32: return f(int32_t{});
    case DType::kI16: return f(int16_t{});
    case DType::kU16: return f(uint16_t{});
    case DType::kU32: return f(uint32_t{});
    case DType::kU64: return f(uint64_t{});
    case DType::kI8: return f(int8_t{});
    case DType::kU8: return f(uint8_t{});
    case DType::kBool: return f(uint8_t{});
    case DType::kF16:
    case DType::kBF16: return f(uint16_t{});
  }
  return f(float{});
}

/// Calls f(T{}) for the types arithmetic kernels compute in; false for f16/bf16 (converted to
/// f32 before the kernel runs) and bool.
template <typename F>
bool dispatch_arith(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: f(float{}); return true;
    case DType::kF64: f(double{}); return true;
    case DType::kI64: f(int64_t{}); return true;
    case DType::kI32: f(int32_t{}); return true;
    case DType::kI16: f(int16_t{}); return true;
    case DType::kU16: f(uint16_t{}); return true;
    case DType::kU32: f(uint32_t{}); return true;
    case DType::kU64: f(uint64_t{}); return true;
    case DType::kI8: f(int8_t{}); return true;
    case DType::kU8: f(uint8_t{}); return true;
    default: return false;
  }
}

/// Row-major element iteration over `shape` with per-operand strides (0 for broadcast dims):
/// calls fn(offsets..., inner_count, inner_strides...) once per innermost row.
struct BroadcastIter {
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> strides;  // per operand, aligned with shape

  /// Strides of a dense operand of `op_shape` broadcast to `out_shape`.
  static std::vector<int64_t> strides_for(const std::vector<int64_t>& op_shape,
                                          const std::vector<int64_t>& out_shape);

  /// Merges adjacent dims every operand walks as one (x[1,C,H,W] * s[1,C,1,1] iterates rows of
  /// H*W, not H rows of W), so that rows are as long as they can be.
  void coalesce();
  /// Rows of the innermost dim (1 for a 0-d shape).
  int64_t rows() const;

  template <typename Fn>
  void for_each_row(Fn&& fn) const {
    for_each_row(0, rows(), fn);
  }
  /// The rows [row_begin, row_end) only: a range of them is one thread's share.
  template <typename Fn>
  void for_each_row(int64_t row_begin, int64_t row_end, Fn&& fn) const {
    const size_t r = shape.size();
    const size_t nops = strides.size();
    if (r == 0) {
      std::vector<int64_t> offs(nops, 0), inner(nops, 0);
      if (row_begin < row_end) fn(offs.data(), int64_t{1}, inner.data());
      return;
    }
    int64_t inner_n = shape[r - 1];
    std::vector<int64_t> inner(nops);
    for (size_t k = 0; k < nops; ++k) inner[k] = strides[k][r - 1];
    if (inner_n == 0 || row_begin >= row_end) return;
    std::vector<int64_t> idx(r, 0), offs(nops, 0);
    for (int64_t rest = row_begin, d = static_cast<int64_t>(r) - 2; d >= 0 && rest > 0; --d) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
      for (size_t k = 0; k < nops; ++k) offs[k] += strides[k][d] * idx[d];
    }
    for (int64_t row = row_begin; row < row_end; ++row) {
      fn(offs.data(), inner_n, inner.data());
      for (size_t d = r - 1; d-- > 0;) {
        ++idx[d];
        for (size_t k = 0; k < nops; ++k) offs[k] += strides[k][d];
        if (idx[d] < shape[d]) break;
        for (size_t k = 0; k < nops; ++k) offs[k] -= strides[k][d] * idx[d];
        idx[d] = 0;
      }
    }
  }
};

/// Elements of cheap elementwise work below which a loop stays on one thread: waking the pool
/// costs more than splitting saves.
inline constexpr int64_t kParallelGrain = 16384;

/// Runs fn(begin, end) over [0, n) split across ctx's threads in pieces of at least `grain`
/// items; a single inline call when n < 2 * grain or the context has one thread.
template <typename Fn>
void parallel_range(KernelContext& ctx, int64_t n, int64_t grain, Fn&& fn) {
  int64_t parts = std::min<int64_t>(ctx.num_threads(), n / std::max<int64_t>(grain, 1));
  if (parts <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  ctx.parallel_for(parts, [&](int64_t begin, int64_t end) { fn(n * begin / parts, n * end / parts); });
}

/// Items per piece for parallel_range when each item costs about `cost` elements of work.
inline int64_t grain_for(int64_t cost) { return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(cost, 1)); }

}  // namespace kiln::portable
