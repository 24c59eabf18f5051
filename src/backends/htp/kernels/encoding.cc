// Encodings, fixed-point requantization, and the QNN Quantize / Dequantize / Convert ops.
#include <cmath>
#include <limits>

#include "internal.h"
#include "simd_avx512.h"

namespace kiln::htp {

using detail::Range;

namespace detail {

Range storage_range(DType dtype) {
  switch (dtype) {
    case DType::kU8:
      return {0, 255};
    case DType::kI8:
      return {-128, 127};
    case DType::kU16:
      return {0, 65535};
    case DType::kI16:
      return {-32768, 32767};
    default:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  }
}

int storage_bits(DType dtype) { return static_cast<int>(dtype_size(dtype)) * 8; }

bool is_quant_storage(DType dtype) {
  return dtype == DType::kU8 || dtype == DType::kI8 || dtype == DType::kU16 ||
         dtype == DType::kI16 || dtype == DType::kI32;
}

int64_t max_abs_centered(const Encoding& enc, size_t i) {
  const int64_t zp = enc.zero_point(i);
  return std::max(enc.qmax - zp, zp - enc.qmin);
}

Status require_per_tensor(const Encoding& enc, std::string_view what) {
  if (enc.is_per_axis()) {
    return invalid_argument("{} encoding is per axis (axis {}), expected per tensor", what,
                            enc.axis);
  }
  return Status::Ok();
}

Result<int64_t> checked_numel(std::span<const int64_t> shape, std::string_view what) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) return invalid_argument("{}: dimension {} is {}", what, i, shape[i]);
    if (__builtin_mul_overflow(n, shape[i], &n) || n > (int64_t{1} << 48)) {
      return out_of_range("{}: shape has more than 2^48 elements", what);
    }
  }
  return n;
}

}  // namespace detail

namespace {

// Range of a bitwidth within its storage (4-bit signed storage: [-8, 7]; unsigned: [0, 15]).
Range bitwidth_range(DType dtype, int bitwidth) {
  Range r = detail::storage_range(dtype);
  if (bitwidth >= detail::storage_bits(dtype)) return r;
  if (r.lo < 0) return {-(int64_t{1} << (bitwidth - 1)), (int64_t{1} << (bitwidth - 1)) - 1};
  return {0, (int64_t{1} << bitwidth) - 1};
}

}  // namespace

Encoding make_encoding(DType dtype, float scale, int32_t zero_point, int64_t qmin, int64_t qmax,
                       int bitwidth) {
  Encoding e;
  e.dtype = dtype;
  e.bitwidth = bitwidth > 0 ? bitwidth : static_cast<int>(dtype_size(dtype)) * 8;
  e.scales = {scale};
  e.offsets = {-zero_point};
  e.axis = -1;
  e.qmin = qmin;
  e.qmax = qmax;
  return e;
}

Encoding make_encoding(DType dtype, float scale, int32_t zero_point) {
  Range r = detail::is_quant_storage(dtype) ? detail::storage_range(dtype) : Range{0, 0};
  return make_encoding(dtype, scale, zero_point, r.lo, r.hi);
}

Encoding make_per_axis_encoding(DType dtype, std::vector<float> scales,
                                std::vector<int32_t> zero_points, int32_t axis, int64_t qmin,
                                int64_t qmax, int bitwidth) {
  Encoding e;
  e.dtype = dtype;
  e.bitwidth = bitwidth > 0 ? bitwidth : static_cast<int>(dtype_size(dtype)) * 8;
  e.scales = std::move(scales);
  for (int32_t zp : zero_points) e.offsets.push_back(-zp);
  e.axis = axis;
  e.qmin = qmin;
  e.qmax = qmax;
  return e;
}

Status validate_encoding(const Encoding& enc, std::string_view what) {
  if (!detail::is_quant_storage(enc.dtype)) {
    return invalid_argument("{} encoding: dtype {} is not one of u8, i8, u16, i16, i32", what,
                            dtype_name(enc.dtype));
  }
  const int bits = detail::storage_bits(enc.dtype);
  if (!(enc.bitwidth == 4 || enc.bitwidth == 8 || enc.bitwidth == 16 || enc.bitwidth == 32) ||
      enc.bitwidth > bits) {
    return invalid_argument(
        "{} encoding: bitwidth {} does not fit {} storage (4, 8, 16 or 32, "
        "at most {})",
        what, enc.bitwidth, dtype_name(enc.dtype), bits);
  }
  const Range r = bitwidth_range(enc.dtype, enc.bitwidth);
  if (enc.qmin > enc.qmax || enc.qmin < r.lo || enc.qmax > r.hi) {
    return invalid_argument(
        "{} encoding: range [{}, {}] is not inside the {}-bit {} range [{}, {}]", what, enc.qmin,
        enc.qmax, enc.bitwidth, dtype_name(enc.dtype), r.lo, r.hi);
  }
  if (enc.scales.empty() || enc.scales.size() != enc.offsets.size()) {
    return invalid_argument(
        "{} encoding: {} scales and {} offsets, expected the same number (>= 1)", what,
        enc.scales.size(), enc.offsets.size());
  }
  if (!enc.is_per_axis() && enc.scales.size() != 1) {
    return invalid_argument("{} encoding: per tensor with {} scales, expected 1", what,
                            enc.scales.size());
  }
  if (enc.axis < -1) return invalid_argument("{} encoding: axis {} is negative", what, enc.axis);
  const Range s = detail::storage_range(enc.dtype);
  for (size_t i = 0; i < enc.scales.size(); ++i) {
    if (!(enc.scales[i] > 0) || !std::isfinite(enc.scales[i])) {
      return invalid_argument("{} encoding: scale[{}] = {} is not positive and finite", what, i,
                              enc.scales[i]);
    }
    // -offset must not overflow, and a zero point outside the storage range has no meaning.
    const int64_t zp = -static_cast<int64_t>(enc.offsets[i]);
    if (zp < s.lo || zp > s.hi) {
      return invalid_argument("{} encoding: zero point[{}] = {} (offset {}) is outside {} [{}, {}]",
                              what, i, zp, enc.offsets[i], dtype_name(enc.dtype), s.lo, s.hi);
    }
  }
  return Status::Ok();
}

FixedPointMultiplier quantize_multiplier(double real) {
  if (!(real > 0) || !std::isfinite(real)) return {};
  int exponent = 0;
  const double q = std::frexp(real, &exponent);  // q in [0.5, 1)
  int64_t m = std::llround(q * 2147483648.0);    // half away from zero
  if (m == (int64_t{1} << 31)) {
    m /= 2;
    ++exponent;
  }
  return {static_cast<int32_t>(m), exponent};
}

namespace {
__extension__ typedef __int128 int128;  // GCC/Clang's 128-bit integer (-Wpedantic-clean spelling)
}  // namespace

int64_t requantize(int64_t acc, FixedPointMultiplier m) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  if (acc == 0 || m.multiplier == 0) return 0;
  int128 x = static_cast<int128>(acc) * m.multiplier;  // |x| < 2^94
  const int64_t n = 31 - static_cast<int64_t>(m.shift);
  if (n <= 0) {
    const int64_t k = -n;
    const int128 mag = x < 0 ? -x : x;
    if (k >= 63 || mag > static_cast<int128>(kMax >> k)) return x < 0 ? kMin : kMax;
    return static_cast<int64_t>(x << k);
  }
  if (n >= 100) return 0;  // |x| < 2^94 < 2^(n-1): rounds to 0
  const int128 half = static_cast<int128>(1) << (n - 1);
  x = x >= 0 ? (x + half) >> n : -((-x + half) >> n);
  if (x > kMax) return kMax;
  if (x < kMin) return kMin;
  return static_cast<int64_t>(x);
}

int64_t requantize_output(int64_t acc, FixedPointMultiplier m, int32_t zero_point, int64_t qmin,
                          int64_t qmax) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  const int64_t r = std::clamp(requantize(acc, m), -kLimit, kLimit) + zero_point;
  return std::clamp(r, qmin, qmax);
}

int64_t quantize_value(float x, float scale, int32_t zero_point, int64_t qmin, int64_t qmax) {
  const float inv_scale = 1.0f / scale;
  const float v = static_cast<float>(zero_point) + std::nearbyint(x * inv_scale);
  const double d = static_cast<double>(v);
  if (!(d > static_cast<double>(qmin))) return qmin;
  if (d >= static_cast<double>(qmax)) return qmax;
  return std::clamp(static_cast<int64_t>(d), qmin, qmax);
}

float dequantize_value(int64_t q, float scale, int32_t zero_point) {
  return static_cast<float>(q - zero_point) * scale;
}

// ---- Quantize / Dequantize

namespace {

// [outer, count, inner] walk of a per-axis (or per-tensor: count 1) encoding over `shape`.
struct AxisWalk {
  int64_t outer = 1, count = 1, inner = 1;
};

Result<AxisWalk> axis_walk(std::span<const int64_t> shape, const Encoding& enc,
                           std::string_view what) {
  KILN_ASSIGN_OR_RETURN(int64_t numel, detail::checked_numel(shape, what));
  AxisWalk w;
  if (!enc.is_per_axis()) {
    w.inner = numel;
    return w;
  }
  const size_t axis = static_cast<size_t>(enc.axis);
  if (axis >= shape.size()) {
    return invalid_argument("{}: encoding axis {} is outside the rank-{} shape", what, enc.axis,
                            shape.size());
  }
  if (static_cast<int64_t>(enc.size()) != shape[axis]) {
    return invalid_argument("{}: encoding has {} scales, expected {} (dimension {})", what,
                            enc.size(), shape[axis], axis);
  }
  for (size_t i = 0; i < axis; ++i) w.outer *= shape[i];
  w.count = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i) w.inner *= shape[i];
  return w;
}

// quantize_value over a run of one encoding, 16 lanes at a time: the same f32 steps (x * (1/s),
// vrndscaleps to nearest even as nearbyint under the default rounding mode, + float(zp)), then
// the scalar's comparisons (NaN and anything not above qmin give qmin). 8/16-bit codes only
// (their qmin, qmax are exact floats).
template <typename T>
KILN_AVX512 void quantize_run_avx512(const float* in, T* out, int64_t n, float inv_scale,
                                     int32_t zero_point, int64_t qmin, int64_t qmax) {
  namespace v = detail::avx512;
  const __m512 inv = _mm512_set1_ps(inv_scale), zp = _mm512_set1_ps(static_cast<float>(zero_point));
  const __m512 lo = _mm512_set1_ps(static_cast<float>(qmin)),
               hi = _mm512_set1_ps(static_cast<float>(qmax));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = v::lanes16(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(k, in + i);
    const __m512 r = _mm512_add_ps(
        _mm512_roundscale_ps(_mm512_mul_ps(x, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
        zp);
    const __mmask16 above = _mm512_cmp_ps_mask(r, lo, _CMP_GT_OQ);
    const __m512 c = _mm512_mask_mov_ps(lo, above, _mm512_min_ps(r, hi));
    v::store16(out + i, _mm512_cvtps_epi32(c), k);
  }
}

// dequantize_value over a run: q - zp is exact in int32 and in f32 (|q - zp| < 2^17).
template <typename T>
KILN_AVX512 void dequantize_run_avx512(const T* in, float* out, int64_t n, float scale,
                                       int32_t zero_point) {
  namespace v = detail::avx512;
  const __m512 s = _mm512_set1_ps(scale);
  const __m512i zp = _mm512_set1_epi32(zero_point);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = v::lanes16(n - i);
    const __m512i d = _mm512_sub_epi32(v::load16(in + i, k), zp);
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_cvtepi32_ps(d), s));
  }
}

}  // namespace

Status quantize(const float* in, void* out, std::span<const int64_t> shape, const Encoding& enc,
                int threads) {
  KILN_RETURN_IF_ERROR(validate_encoding(enc, "quantize: output"));
  KILN_ASSIGN_OR_RETURN(AxisWalk w, axis_walk(shape, enc, "quantize"));
  detail::dispatch_storage(enc.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* po = static_cast<T*>(out);
    if (!enc.is_per_axis()) {
      // One encoding: chunks of the flat tensor (a few hundred KB stay on one thread).
      const float s = enc.scale();
      const int32_t zp = enc.zero_point();
      const bool vec = sizeof(T) <= 2 && detail::has_avx512();
      detail::parallel_for(threads, w.inner, 65536, [&](int64_t b, int64_t e) {
        if (vec) {
          quantize_run_avx512(in + b, po + b, e - b, 1.0f / s, zp, enc.qmin, enc.qmax);
          return;
        }
        for (int64_t i = b; i < e; ++i) {
          po[i] = static_cast<T>(quantize_value(in[i], s, zp, enc.qmin, enc.qmax));
        }
      });
      return;
    }
    detail::parallel_for(
        threads, w.outer * w.count, std::max<int64_t>(1, 16384 / std::max<int64_t>(w.inner, 1)),
        [&](int64_t b, int64_t e) {
          for (int64_t oc = b; oc < e; ++oc) {
            const size_t ch = static_cast<size_t>(oc % w.count);
            const float s = enc.scale(ch);
            const int32_t zp = enc.zero_point(ch);
            const int64_t base = oc * w.inner;
            for (int64_t i = base; i < base + w.inner; ++i) {
              po[i] = static_cast<T>(quantize_value(in[i], s, zp, enc.qmin, enc.qmax));
            }
          }
        });
  });
  return Status::Ok();
}

Status dequantize(const void* in, float* out, std::span<const int64_t> shape, const Encoding& enc,
                  int threads) {
  KILN_RETURN_IF_ERROR(validate_encoding(enc, "dequantize: input"));
  KILN_ASSIGN_OR_RETURN(AxisWalk w, axis_walk(shape, enc, "dequantize"));
  detail::dispatch_storage(enc.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pi = static_cast<const T*>(in);
    if (!enc.is_per_axis()) {
      // One encoding: chunks of the flat tensor.
      const float s = enc.scale();
      const int64_t zp = enc.zero_point();
      const bool vec = sizeof(T) <= 2 && detail::has_avx512();
      detail::parallel_for(threads, w.inner, 65536, [&](int64_t b, int64_t e) {
        if (vec) {
          dequantize_run_avx512(pi + b, out + b, e - b, s, static_cast<int32_t>(zp));
          return;
        }
        for (int64_t i = b; i < e; ++i) {
          out[i] = static_cast<float>(static_cast<int64_t>(pi[i]) - zp) * s;
        }
      });
      return;
    }
    detail::parallel_for(threads, w.outer * w.count,
                         std::max<int64_t>(1, 16384 / std::max<int64_t>(w.inner, 1)),
                         [&](int64_t b, int64_t e) {
                           for (int64_t oc = b; oc < e; ++oc) {
                             const size_t ch = static_cast<size_t>(oc % w.count);
                             const float s = enc.scale(ch);
                             const int64_t zp = enc.zero_point(ch);
                             const int64_t base = oc * w.inner;
                             for (int64_t i = base; i < base + w.inner; ++i) {
                               out[i] = static_cast<float>(static_cast<int64_t>(pi[i]) - zp) * s;
                             }
                           }
                         });
  });
  return Status::Ok();
}

// ---- Requantize (QNN Convert)

Result<Requantize> Requantize::prepare(const Encoding& in, const Encoding& out, int threads) {
  KILN_RETURN_IF_ERROR(validate_encoding(in, "requantize: input"));
  KILN_RETURN_IF_ERROR(validate_encoding(out, "requantize: output"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(in, "requantize: input"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(out, "requantize: output"));
  Requantize r;
  r.in_ = in;
  r.out_ = out;
  r.threads_ = std::max(1, threads);
  r.m_ = quantize_multiplier(static_cast<double>(in.scale()) / static_cast<double>(out.scale()));
  if (detail::storage_bits(in.dtype) <= 16) {
    const Range s = detail::storage_range(in.dtype);
    r.table_.resize(static_cast<size_t>(s.hi - s.lo + 1));
    for (int64_t q = s.lo; q <= s.hi; ++q) {
      r.table_[static_cast<size_t>(q - s.lo)] = static_cast<int32_t>(
          requantize_output(q - in.zero_point(), r.m_, out.zero_point(), out.qmin, out.qmax));
    }
  }
  return r;
}

Status Requantize::run(const void* in, void* out, int64_t count) const {
  if (count < 0) return invalid_argument("requantize: count {} is negative", count);
  const int64_t lo = detail::storage_range(in_.dtype).lo;
  detail::dispatch_storage(in_.dtype, [&](auto itag) {
    using I = decltype(itag);
    detail::dispatch_storage(out_.dtype, [&](auto otag) {
      using O = decltype(otag);
      const I* pi = static_cast<const I*>(in);
      O* po = static_cast<O*>(out);
      detail::parallel_for(threads_, count, 32768, [&](int64_t b, int64_t e) {
        if (!table_.empty()) {
          const int32_t* t = table_.data() - lo;
          for (int64_t i = b; i < e; ++i) po[i] = static_cast<O>(t[pi[i]]);
          return;
        }
        for (int64_t i = b; i < e; ++i) {
          po[i] = static_cast<O>(requantize_output(static_cast<int64_t>(pi[i]) - in_.zero_point(),
                                                   m_, out_.zero_point(), out_.qmin, out_.qmax));
        }
      });
    });
  });
  return Status::Ok();
}

}  // namespace kiln::htp
