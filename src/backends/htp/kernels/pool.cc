// Quantized pooling (NHWC) and reductions over arbitrary axes.
#include <cstring>
#include <type_traits>

#include "internal.h"
#include "simd_avx512.h"

namespace kiln::htp {

using detail::Range;

namespace {

int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t pad_begin, int64_t pad_end,
                 bool ceil_mode) {
  if (in < 1 || k < 1 || s < 1 || pad_begin < 0 || pad_end < 0) return 0;
  const int64_t span = in + pad_begin + pad_end - k;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // torch: the last window must start inside the input or the leading padding.
  if (ceil_mode && (out - 1) * s >= in + pad_begin) --out;
  return out;
}

// 64 bytes of 8- or 16-bit codes: masked load, max, min and splat by element type.
template <typename I>
KILN_AVX512 inline __m512i load64(const I* p, uint64_t k) {
  if constexpr (sizeof(I) == 1) {
    return _mm512_maskz_loadu_epi8(k, p);
  } else {
    return _mm512_maskz_loadu_epi16(static_cast<__mmask32>(k), p);
  }
}

template <typename I>
KILN_AVX512 inline __m512i vmax(__m512i a, __m512i b) {
  if constexpr (std::is_same_v<I, uint8_t>) return _mm512_max_epu8(a, b);
  if constexpr (std::is_same_v<I, int8_t>) return _mm512_max_epi8(a, b);
  if constexpr (std::is_same_v<I, uint16_t>) return _mm512_max_epu16(a, b);
  if constexpr (std::is_same_v<I, int16_t>) return _mm512_max_epi16(a, b);
}

template <typename I>
KILN_AVX512 inline __m512i vmin(__m512i a, __m512i b) {
  if constexpr (std::is_same_v<I, uint8_t>) return _mm512_min_epu8(a, b);
  if constexpr (std::is_same_v<I, int8_t>) return _mm512_min_epi8(a, b);
  if constexpr (std::is_same_v<I, uint16_t>) return _mm512_min_epu16(a, b);
  if constexpr (std::is_same_v<I, int16_t>) return _mm512_min_epi16(a, b);
}

template <typename I>
KILN_AVX512 inline __m512i splat(int64_t v) {
  if constexpr (sizeof(I) == 1) {
    return _mm512_set1_epi8(static_cast<char>(v));
  } else {
    return _mm512_set1_epi16(static_cast<int16_t>(v));
  }
}

// The maximum of a rows x cols window of NHWC pixels (`src` its top-left pixel), 64 bytes of
// channels at a time, clamped to [lo, hi] and stored at dst (c codes).
template <typename I>
KILN_AVX512 void window_max_avx512(const I* src, int64_t rows, int64_t cols, int64_t row_stride,
                                   int64_t c, int64_t lo, int64_t hi, I* dst) {
  constexpr int64_t kLanes = 64 / sizeof(I);
  const __m512i vlo = splat<I>(lo), vhi = splat<I>(hi);
  for (int64_t ch = 0; ch < c; ch += kLanes) {
    const uint64_t k = c - ch >= kLanes ? ~uint64_t{0} >> (64 - kLanes)
                                        : (uint64_t{1} << (c - ch)) - 1;
    __m512i m = load64(src + ch, k);
    for (int64_t r = 0; r < rows; ++r) {
      const I* p = src + r * row_stride + ch;
      for (int64_t q = 0; q < cols; ++q) m = vmax<I>(m, load64(p + q * c, k));
    }
    m = vmin<I>(vmax<I>(m, vlo), vhi);
    if constexpr (sizeof(I) == 1) {
      _mm512_mask_storeu_epi8(dst + ch, k, m);
    } else {
      _mm512_mask_storeu_epi16(dst + ch, static_cast<__mmask32>(k), m);
    }
  }
}

}  // namespace

int64_t Pool2dParams::out_h() const {
  return pool_out(in_h, kernel_h, stride_h, pad_top, pad_bottom, ceil_mode);
}

int64_t Pool2dParams::out_w() const {
  return pool_out(in_w, kernel_w, stride_w, pad_left, pad_right, ceil_mode);
}

Status detail::check_pool_geometry(const char* op, const Pool2dParams& p) {
  const std::pair<const char*, int64_t> positive[] = {
      {"batch", p.batch},       {"in_h", p.in_h},         {"in_w", p.in_w},
      {"channels", p.channels}, {"kernel_h", p.kernel_h}, {"kernel_w", p.kernel_w},
      {"stride_h", p.stride_h}, {"stride_w", p.stride_w}};
  for (auto [what, v] : positive) {
    if (v < 1 || v > (int64_t{1} << 31)) {
      return invalid_argument("{}: {} is {}, expected 1 to 2^31", op, what, v);
    }
  }
  for (int64_t pad : {p.pad_top, p.pad_left, p.pad_bottom, p.pad_right}) {
    if (pad < 0 || pad > (int64_t{1} << 20)) {
      return invalid_argument("{}: padding {} is outside [0, 2^20]", op, pad);
    }
  }
  if (p.out_h() < 1 || p.out_w() < 1) {
    return invalid_argument("{}: the {}x{} window does not fit the padded {}x{} input", op,
                            p.kernel_h, p.kernel_w, p.in_h + p.pad_top + p.pad_bottom,
                            p.in_w + p.pad_left + p.pad_right);
  }
  if (p.kernel_h * p.kernel_w > (int64_t{1} << 24)) {
    return invalid_argument("{}: window of {}x{} elements is larger than 2^24", op, p.kernel_h,
                            p.kernel_w);
  }
  const int64_t dims[] = {p.batch, p.in_h, p.in_w, p.channels, 8};
  const int64_t odims[] = {p.batch, p.out_h(), p.out_w(), p.channels, 8};
  for (auto d : {std::span<const int64_t>(dims), std::span<const int64_t>(odims)}) {
    auto n = detail::checked_numel(d, op);
    if (!n.ok()) return n.status();
  }
  if (p.threads < 1) return invalid_argument("{}: threads is {}, expected >= 1", op, p.threads);
  return Status::Ok();
}

Result<QuantPool2d> QuantPool2d::prepare(PoolKind kind, const Pool2dParams& p, const Encoding& in,
                                         const Encoding& out) {
  const char* op = kind == PoolKind::kMax ? "max_pool2d" : "avg_pool2d";
  const std::string name = op;
  KILN_RETURN_IF_ERROR(detail::check_pool_geometry(op, p));
  KILN_RETURN_IF_ERROR(validate_encoding(in, name + ": input"));
  KILN_RETURN_IF_ERROR(validate_encoding(out, name + ": output"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(in, name + ": input"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(out, name + ": output"));
  if (detail::storage_bits(in.dtype) > 16) {
    return unsupported("{}: input dtype {} is not supported (8- and 16-bit)", op,
                       dtype_name(in.dtype));
  }
  QuantPool2d q;
  q.kind_ = kind;
  q.p_ = p;
  q.in_ = in;
  q.out_ = out;
  if (kind == PoolKind::kAverage) {
    const int64_t window = p.kernel_h * p.kernel_w;
    q.count_m_.resize(static_cast<size_t>(window + 1));
    for (int64_t c = 1; c <= window; ++c) {
      q.count_m_[static_cast<size_t>(c)] = quantize_multiplier(
          static_cast<double>(in.scale()) / (static_cast<double>(out.scale()) * c));
    }
  } else {
    const bool same =
        in.dtype == out.dtype && in.scale() == out.scale() && in.zero_point() == out.zero_point();
    const Range r = detail::storage_range(in.dtype);
    q.convert_.resize(static_cast<size_t>(r.hi - r.lo + 1));
    const FixedPointMultiplier m =
        quantize_multiplier(static_cast<double>(in.scale()) / out.scale());
    for (int64_t v = r.lo; v <= r.hi; ++v) {
      q.convert_[static_cast<size_t>(v - r.lo)] = static_cast<int32_t>(
          same ? std::clamp(v, out.qmin, out.qmax)
               : requantize_output(v - in.zero_point(), m, out.zero_point(), out.qmin, out.qmax));
    }
  }
  return q;
}

Status QuantPool2d::run(const void* in, void* out) const {
  if (in == nullptr || out == nullptr) return invalid_argument("pool2d: null buffer");
  const Pool2dParams& p = p_;
  const int64_t oh = p.out_h(), ow = p.out_w(), c = p.channels;
  const int32_t zo = out_.zero_point();
  const int64_t zo_code = std::clamp<int64_t>(zo, out_.qmin, out_.qmax);
  const int64_t lo = detail::storage_range(in_.dtype).lo, hi = detail::storage_range(in_.dtype).hi;
  // Max over the channels with AVX-512; the same encoding in and out is a clamp, else the
  // maxima go through the conversion table.
  const bool vec_max = kind_ == PoolKind::kMax && detail::storage_bits(in_.dtype) <= 16 &&
                       detail::has_avx512();
  const bool same = in_.dtype == out_.dtype && in_.scale() == out_.scale() &&
                    in_.zero_point() == out_.zero_point();
  detail::dispatch_storage(in_.dtype, [&](auto itag) {
    using I = decltype(itag);
    detail::dispatch_storage(out_.dtype, [&](auto otag) {
      using O = decltype(otag);
      const I* x = static_cast<const I*>(in);
      O* y = static_cast<O*>(out);
      // Output rows in chunks of at least 16K codes (a small pool stays on one thread).
      const int64_t min_rows = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, ow * c));
      detail::parallel_for(p.threads, p.batch * oh, min_rows, [&](int64_t b, int64_t e) {
        std::vector<int64_t> acc(static_cast<size_t>(c));
        std::vector<I> mx(static_cast<size_t>(c));
        for (int64_t row = b; row < e; ++row) {
          const int64_t n = row / oh, oy = row % oh;
          const int64_t y0 = oy * p.stride_h - p.pad_top;
          const int64_t y1 = std::min(y0 + p.kernel_h, p.in_h + p.pad_bottom);
          const int64_t ys = std::max<int64_t>(y0, 0), ye = std::min(y1, p.in_h);
          for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t x0 = ox * p.stride_w - p.pad_left;
            const int64_t x1 = std::min(x0 + p.kernel_w, p.in_w + p.pad_right);
            const int64_t xs = std::max<int64_t>(x0, 0), xe = std::min(x1, p.in_w);
            O* dst = y + (row * ow + ox) * c;
            const int64_t valid = std::max<int64_t>(0, ye - ys) * std::max<int64_t>(0, xe - xs);
            if (kind_ == PoolKind::kMax) {
              if (valid == 0) {
                for (int64_t ch = 0; ch < c; ++ch) dst[ch] = static_cast<O>(zo_code);
                continue;
              }
              const I* first = x + ((n * p.in_h + ys) * p.in_w + xs) * c;
              if constexpr (sizeof(I) <= 2) {
                if (vec_max) {
                  if constexpr (std::is_same_v<I, O>) {
                    if (same) {
                      window_max_avx512(first, ye - ys, xe - xs, p.in_w * c, c, out_.qmin,
                                        out_.qmax, dst);
                      continue;
                    }
                  }
                  window_max_avx512(first, ye - ys, xe - xs, p.in_w * c, c, lo, hi, mx.data());
                  const int32_t* t = convert_.data() - lo;
                  for (int64_t ch = 0; ch < c; ++ch) dst[ch] = static_cast<O>(t[mx[ch]]);
                  continue;
                }
              }
              std::memcpy(mx.data(), first, static_cast<size_t>(c) * sizeof(I));
              for (int64_t iy = ys; iy < ye; ++iy) {
                for (int64_t ix = xs; ix < xe; ++ix) {
                  const I* src = x + ((n * p.in_h + iy) * p.in_w + ix) * c;
                  for (int64_t ch = 0; ch < c; ++ch) mx[ch] = std::max(mx[ch], src[ch]);
                }
              }
              const int32_t* t = convert_.data() - lo;
              for (int64_t ch = 0; ch < c; ++ch) dst[ch] = static_cast<O>(t[mx[ch]]);
              continue;
            }
            const int64_t count = p.count_include_pad ? (y1 - y0) * (x1 - x0) : valid;
            std::fill(acc.begin(), acc.end(), 0);
            for (int64_t iy = ys; iy < ye; ++iy) {
              for (int64_t ix = xs; ix < xe; ++ix) {
                const I* src = x + ((n * p.in_h + iy) * p.in_w + ix) * c;
                for (int64_t ch = 0; ch < c; ++ch) acc[ch] += src[ch];
              }
            }
            const FixedPointMultiplier m =
                count > 0 ? count_m_[static_cast<size_t>(count)] : FixedPointMultiplier{};
            const int64_t zsum = valid * in_.zero_point();
            for (int64_t ch = 0; ch < c; ++ch) {
              dst[ch] =
                  static_cast<O>(requantize_output(acc[ch] - zsum, m, zo, out_.qmin, out_.qmax));
            }
          }
        }
      });
    });
  });
  return Status::Ok();
}

// ---- reductions

Result<QuantReduce> QuantReduce::prepare(std::span<const int64_t> shape,
                                         std::span<const int64_t> axes, bool mean, bool keep_dims,
                                         const Encoding& in, const Encoding& out, int threads) {
  const char* op = mean ? "reduce_mean" : "reduce_sum";
  const std::string name = op;
  KILN_RETURN_IF_ERROR(validate_encoding(in, name + ": input"));
  KILN_RETURN_IF_ERROR(validate_encoding(out, name + ": output"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(in, name + ": input"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(out, name + ": output"));
  if (detail::storage_bits(in.dtype) > 16) {
    return unsupported("{}: input dtype {} is not supported (8- and 16-bit)", op,
                       dtype_name(in.dtype));
  }
  KILN_ASSIGN_OR_RETURN(int64_t numel, detail::checked_numel(shape, op));
  (void)numel;
  QuantReduce q;
  q.shape_.assign(shape.begin(), shape.end());
  q.reduced_.assign(shape.size(), false);
  const int64_t rank = static_cast<int64_t>(shape.size());
  for (int64_t a : axes) {
    const int64_t ax = a < 0 ? a + rank : a;
    if (ax < 0 || ax >= rank) {
      return invalid_argument("{}: axis {} is outside the rank-{} shape", op, a, rank);
    }
    if (q.reduced_[static_cast<size_t>(ax)]) {
      return invalid_argument("{}: axis {} is given twice", op, a);
    }
    q.reduced_[static_cast<size_t>(ax)] = true;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (q.reduced_[static_cast<size_t>(d)]) {
      q.count_ *= shape[d];
      if (keep_dims) q.out_shape_.push_back(1);
    } else {
      q.out_shape_.push_back(shape[d]);
    }
  }
  if (mean && q.count_ == 0) return invalid_argument("{}: mean over no elements", op);
  q.in_ = in;
  q.out_ = out;
  q.threads_ = std::max(1, threads);
  q.m_ = quantize_multiplier(static_cast<double>(in.scale()) /
                             (static_cast<double>(out.scale()) * (mean ? q.count_ : 1)));
  return q;
}

Status QuantReduce::run(const void* in, void* out) const {
  if (in == nullptr || out == nullptr) return invalid_argument("reduce: null buffer");
  // Collapse runs of dimensions with the same reduced flag: they stay contiguous.
  std::vector<int64_t> size;
  std::vector<bool> red;
  for (size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] == 1) continue;
    if (!size.empty() && red.back() == reduced_[d]) {
      size.back() *= shape_[d];
    } else {
      size.push_back(shape_[d]);
      red.push_back(reduced_[d]);
    }
  }
  if (size.empty()) {
    size = {1};
    red = {false};
  }
  int64_t out_n = 1, in_n = 1;
  for (size_t d = 0; d < size.size(); ++d) {
    in_n *= size[d];
    if (!red[d]) out_n *= size[d];
  }
  // Output strides of each collapsed dimension (0 for reduced ones).
  std::vector<int64_t> ostride(size.size(), 0);
  for (int64_t s = 1, d = static_cast<int64_t>(size.size()) - 1; d >= 0; --d) {
    if (!red[static_cast<size_t>(d)]) {
      ostride[static_cast<size_t>(d)] = s;
      s *= size[static_cast<size_t>(d)];
    }
  }
  // Split the outermost dimension across threads when it is kept (its outputs are disjoint).
  // (Only when it is not also the innermost one, which the walk below takes whole.)
  const int64_t outer = red[0] || size.size() == 1 ? 1 : size[0];
  const int64_t in_per_outer = in_n / std::max<int64_t>(outer, 1);
  const int32_t zi = in_.zero_point(), zo = out_.zero_point();
  detail::dispatch_storage(in_.dtype, [&](auto itag) {
    using I = decltype(itag);
    detail::dispatch_storage(out_.dtype, [&](auto otag) {
      using O = decltype(otag);
      const I* x = static_cast<const I*>(in);
      O* y = static_cast<O*>(out);
      std::vector<int64_t> acc(static_cast<size_t>(out_n), 0);
      const int64_t inner = size.back();
      const bool inner_red = red.back();
      detail::parallel_for(threads_, outer, 1, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          // Walk rows of the innermost dimension, from input element o * in_per_outer.
          for (int64_t start = o * in_per_outer; start < (o + 1) * in_per_outer; start += inner) {
            int64_t off = 0, rest = start / inner;
            for (int64_t d = static_cast<int64_t>(size.size()) - 2; d >= 0; --d) {
              off += (rest % size[static_cast<size_t>(d)]) * ostride[static_cast<size_t>(d)];
              rest /= size[static_cast<size_t>(d)];
            }
            const I* src = x + start;
            if (inner_red) {
              int64_t s = 0;
              for (int64_t i = 0; i < inner; ++i) s += src[i];
              acc[static_cast<size_t>(off)] += s;
            } else {
              int64_t* a = acc.data() + off;
              for (int64_t i = 0; i < inner; ++i) a[i] += src[i];
            }
          }
        }
      });
      const int64_t zsum = count_ * zi;
      for (int64_t i = 0; i < out_n; ++i) {
        y[i] = static_cast<O>(
            requantize_output(acc[static_cast<size_t>(i)] - zsum, m_, zo, out_.qmin, out_.qmax));
      }
    });
  });
  return Status::Ok();
}

}  // namespace kiln::htp
