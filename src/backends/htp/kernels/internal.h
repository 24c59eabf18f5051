// Internal helpers of the HTP kernel library (not installed): dtype dispatch, threads, the
// requantizing output stage shared by conv, fully connected and matmul.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/backends/htp/kernels.h"

namespace kiln::htp::detail {

// ---- dtypes

/// [min, max] of a quantized storage dtype (u8, i8, u16, i16, i32).
struct Range {
  int64_t lo, hi;
};
Range storage_range(DType dtype);
/// Bits of a quantized storage dtype.
int storage_bits(DType dtype);
/// True for the storage dtypes an Encoding may use.
bool is_quant_storage(DType dtype);

/// Calls fn(T{}) with T the C++ type of a quantized storage dtype (callers validate first).
template <typename Fn>
decltype(auto) dispatch_storage(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kU8:
      return fn(uint8_t{});
    case DType::kI8:
      return fn(int8_t{});
    case DType::kU16:
      return fn(uint16_t{});
    case DType::kI16:
      return fn(int16_t{});
    default:
      return fn(int32_t{});
  }
}

/// Largest |q - zero_point| over the encoding's representable codes (channel `i`).
int64_t max_abs_centered(const Encoding& enc, size_t i = 0);

/// Checks an encoding is per tensor (after validate_encoding).
Status require_per_tensor(const Encoding& enc, std::string_view what);

/// Checks a conv geometry (positive sizes, groups divide the channels, the kernel fits,
/// element counts below 2^48); `op` prefixes the message.
Status check_conv_geometry(const char* op, const Conv2dParams& p);
/// Checks a pooling geometry likewise.
Status check_pool_geometry(const char* op, const Pool2dParams& p);

/// Checked product of dims (each >= 0), or an error naming `what`.
Result<int64_t> checked_numel(std::span<const int64_t> shape, std::string_view what);

/// The per-element requantization constants of one channel: fast when n in [1, 62].
struct Requant {
  int64_t mult = 0;    // Q31 multiplier
  int64_t rshift = 0;  // 31 - shift
};

/// True when requantize(acc, m) for every |acc| < 2^31 may use the int64 form
/// (acc * mult + 2^(n-1) - (product < 0)) >> n, which equals the 128-bit definition.
inline bool fast_requant_ok(FixedPointMultiplier m) {
  const int n = 31 - m.shift;
  return m.multiplier > 0 && n >= 1 && n <= 62;
}

/// The int64 form above (callers check fast_requant_ok and |acc| < 2^31).
inline int64_t requantize_fast(int64_t acc, int64_t mult, int64_t n) {
  const int64_t p = acc * mult;
  return (p + (int64_t{1} << (n - 1)) - (p < 0 ? 1 : 0)) >> n;
}

// ---- threads (see the header: OpenMP through the libgomp oneDNN loaded)

/// Runs fn(begin, end) over [0, n) split into at most `threads` contiguous chunks of at least
/// `min_chunk` items, on OpenMP threads (the calling thread takes part); serial for one chunk.
void parallel_for(int threads, int64_t n, int64_t min_chunk,
                  const std::function<void(int64_t, int64_t)>& fn);

/// Sets the calling thread's OpenMP thread count for oneDNN and restores it on destruction.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int threads);
  ~OmpThreadsScope();
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int old_ = 0;
};

/// True when the CPU has AVX-512 F/DQ/BW/VL (for the vectorised clones).
bool has_avx512();
/// True when oneDNN's effective ISA has VNNI (vpdpbusd: u8 x s8 sums without int16 saturation).
bool dnnl_has_vnni();

// ---- the output stage: int32 partial products -> codes

/// Turns the integer partial results of a conv / fully connected / matmul into output codes:
/// acc = sum_r coef[r] * raw_r[i] + c0[c] (+ row term), out = requantize_output(acc, m[c], ...).
struct OutputStage {
  std::vector<int64_t> c0;              // per channel constant (bias - compensation)
  std::vector<FixedPointMultiplier> m;  // per channel
  std::vector<int64_t> mult, rshift;    // fast form, per channel
  int32_t zero_point = 0;
  int64_t qmin = 0, qmax = 255;
  DType dtype = DType::kU8;
  bool fast = false;  // one raw plane, |acc| < 2^31 proven at prepare, every m fast
  /// A bound on |acc| proven at prepare; below 2^47 (with every shift in [16, 62]) the int64
  /// split form is used instead of the 128-bit one (finish() decides).
  int64_t max_abs_acc = std::numeric_limits<int64_t>::max();

  /// Fills m/mult/rshift from per-channel real multipliers and the output encoding.
  void set_output(const std::vector<double>& real, const Encoding& out);
  /// Writes `rows` x `channels` codes: raw planes are [rows, channels] int32 with row stride
  /// `raw_stride` (>= channels), `coef` their weights; `row_term` (may be null) adds
  /// row_term[row] * col_coef[c] to each acc (matmul's zero-point terms). Threads split rows.
  void run(std::span<const int32_t* const> raws, std::span<const int64_t> coef, int64_t rows,
           int64_t channels, int64_t raw_stride, const int64_t* row_term, const int64_t* col_coef,
           void* out, int threads) const;
  /// One plane of int32 partial sums (coefficient 1), on the calling thread: rows starting at
  /// output row `row0` (out points at the whole output).
  void store(const int32_t* raw, int64_t rows, int64_t channels, int64_t raw_stride, void* out,
             int64_t row0) const;
  /// int64 accumulators without c0 (acc + c0[c] is requantized), on the calling thread.
  void store64(const int64_t* acc, int64_t rows, int64_t channels, void* out, int64_t row0) const;
  /// Precomputes the rounding constants (after set_output).
  void finish();

 private:
  void requant_row(const int64_t* acc, int64_t channels, void* out, int64_t offset) const;
  std::vector<int64_t> half_;
  std::vector<int32_t> mult_32_, rshift_32_;  // the AVX-512 fast form's operands
  bool medium_ = false;
};

}  // namespace kiln::htp::detail
