// The output stage of conv / fully connected / matmul: int32 partial products -> output codes.
// GCC 12 warns about the AVX-512 headers' own _mm512_undefined_* operands (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "internal.h"

namespace kiln::htp::detail {

namespace {

// One raw plane, every |acc| < 2^31 and every multiplier in the fast form: all int64 lane
// arithmetic, which GCC vectorises (vpmullq, vpsravq) in the AVX-512 clone below.
template <typename O>
[[gnu::always_inline]] inline void fast_rows(const int32_t* raw, int64_t rows, int64_t channels,
                                             int64_t stride, const int64_t* c0, const int64_t* mult,
                                             const int64_t* rshift, const int64_t* half, int64_t zp,
                                             int64_t lo, int64_t hi, O* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* src = raw + r * stride;
    O* dst = out + r * channels;
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t p = (static_cast<int64_t>(src[c]) + c0[c]) * mult[c];
      int64_t v = (p + half[c] - (p < 0 ? 1 : 0)) >> rshift[c];
      v += zp;
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
      dst[c] = static_cast<O>(v);
    }
  }
}

// The fast form with AVX-512 intrinsics, 16 channels at a time: acc + c0 in int32 lanes (c0
// taken modulo 2^32: the true accumulator fits, so the wrapping sum is exact), the products by vpmuldq on even and odd
// lanes (32 x 32 -> 64 bits: GCC's own vectorisation of the loop above uses the slow vpmullq),
// the same rounding shift per lane, and the clamp in int64 before narrowing.
#define KILN_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))

// (p + 2^(n-1) - (p < 0)) >> n per int64 lane, clamped to [lo, hi].
KILN_AVX512 inline __m512i round_shift(__m512i p, __m512i n, __m512i lo, __m512i hi) {
  const __m512i one = _mm512_set1_epi64(1);
  const __m512i half = _mm512_sllv_epi64(one, _mm512_sub_epi64(n, one));
  const __m512i v = _mm512_srav_epi64(_mm512_add_epi64(_mm512_add_epi64(p, half), _mm512_srai_epi64(p, 63)), n);
  return _mm512_min_epi64(_mm512_max_epi64(v, lo), hi);
}

template <typename O>
KILN_AVX512 void fast_rows_avx512(
    const int32_t* raw, int64_t rows, int64_t channels, int64_t stride, const int64_t* c0,
    const int32_t* mult, const int32_t* rshift, int64_t zp, int64_t lo, int64_t hi, O* out) {
  const __m512i low32 = _mm512_set1_epi64(0xffffffff);
  const __m512i vlo = _mm512_set1_epi64(lo - zp), vhi = _mm512_set1_epi64(hi - zp);
  const __m512i vzp = _mm512_set1_epi32(static_cast<int32_t>(zp));
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* src = raw + r * stride;
    O* dst = out + r * channels;
    for (int64_t c = 0; c < channels; c += 16) {
      const __mmask16 k = channels - c >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << (channels - c)) - 1);
      const __m256i c0_lo = _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64(static_cast<__mmask8>(k), c0 + c));
      const __m256i c0_hi = _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64(static_cast<__mmask8>(k >> 8), c0 + c + 8));
      const __m512i a = _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, src + c),
                                         _mm512_inserti64x4(_mm512_castsi256_si512(c0_lo), c0_hi, 1));
      const __m512i m = _mm512_maskz_loadu_epi32(k, mult + c);
      const __m512i n = _mm512_mask_loadu_epi32(_mm512_set1_epi32(1), k, rshift + c);
      const __m512i even = round_shift(_mm512_mul_epi32(a, m), _mm512_and_si512(n, low32), vlo, vhi);
      const __m512i odd = round_shift(_mm512_mul_epi32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(m, 32)),
                                      _mm512_srli_epi64(n, 32), vlo, vhi);
      const __m512i v = _mm512_add_epi32(_mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32)), vzp);
      // Narrowing in registers, then a plain store: the memory form of vpmovdb / vpmovdw that
      // the compiler would fuse the pair into is several times slower on AMD Zen 4 and 5.
      if constexpr (sizeof(O) == 1) {
        __m128i b = _mm512_cvtepi32_epi8(v);
        asm("" : "+v"(b));
        if (k == 0xffff) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c), b);
        } else {
          _mm_mask_storeu_epi8(dst + c, k, b);
        }
      } else if constexpr (sizeof(O) == 2) {
        __m256i h = _mm512_cvtepi32_epi16(v);
        asm("" : "+v"(h));
        if (k == 0xffff) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c), h);
        } else {
          _mm256_mask_storeu_epi16(dst + c, k, h);
        }
      } else {
        static_assert(sizeof(O) == 4);
        _mm512_mask_storeu_epi32(dst + c, k, v);
      }
    }
  }
}

template <typename O>
void fast_rows_default(const int32_t* raw, int64_t rows, int64_t channels, int64_t stride,
                       const int64_t* c0, const int64_t* mult, const int64_t* rshift,
                       const int64_t* half, int64_t zp, int64_t lo, int64_t hi, O* out) {
  fast_rows(raw, rows, channels, stride, c0, mult, rshift, half, zp, lo, hi, out);
}

// |acc| < 2^47, n = rshift in [16, 62]: with acc = hi * 2^16 + lo (lo in [0, 2^16)) and
// h = 2^(n-1) - (acc < 0), floor((acc * m + h) / 2^n) = floor((hi * m + floor((lo * m + h) /
// 2^16)) / 2^(n-16)) (floor division nests for integers), and every term fits int64:
// |hi * m| < 2^62, lo * m + h < 2^47 + 2^61. The left side is the fast form, which equals the
// 128-bit definition (round half away from zero).
template <typename O>
[[gnu::always_inline]] inline void medium_row(const int64_t* acc, int64_t channels,
                                              const int64_t* mult, const int64_t* rshift,
                                              const int64_t* half, int64_t zp, int64_t lo,
                                              int64_t hi, O* out) {
  for (int64_t c = 0; c < channels; ++c) {
    const int64_t a = acc[c];
    const int64_t x = (a & 0xffff) * mult[c] + half[c] - (a < 0 ? 1 : 0);
    int64_t v = ((a >> 16) * mult[c] + (x >> 16)) >> (rshift[c] - 16);
    v += zp;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    out[c] = static_cast<O>(v);
  }
}

template <typename O>
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) void medium_row_avx512(
    const int64_t* acc, int64_t channels, const int64_t* mult, const int64_t* rshift,
    const int64_t* half, int64_t zp, int64_t lo, int64_t hi, O* out) {
  medium_row(acc, channels, mult, rshift, half, zp, lo, hi, out);
}

template <typename O>
void medium_row_default(const int64_t* acc, int64_t channels, const int64_t* mult,
                        const int64_t* rshift, const int64_t* half, int64_t zp, int64_t lo,
                        int64_t hi, O* out) {
  medium_row(acc, channels, mult, rshift, half, zp, lo, hi, out);
}

}  // namespace

void OutputStage::set_output(const std::vector<double>& real, const Encoding& out) {
  m.resize(real.size());
  mult.resize(real.size());
  rshift.resize(real.size());
  for (size_t c = 0; c < real.size(); ++c) {
    m[c] = quantize_multiplier(real[c]);
    mult[c] = m[c].multiplier;
    rshift[c] = 31 - static_cast<int64_t>(m[c].shift);
  }
  zero_point = out.zero_point();
  qmin = out.qmin;
  qmax = out.qmax;
  dtype = out.dtype;
}

void OutputStage::finish() {
  half_.assign(m.size(), 0);
  // int32 copies for the AVX-512 fast form: multipliers < 2^31, shifts in [1, 62].
  mult_32_.assign(m.size(), 0);
  rshift_32_.assign(m.size(), 1);
  medium_ = max_abs_acc < (int64_t{1} << 47);
  for (size_t c = 0; c < m.size(); ++c) {
    if (fast_requant_ok(m[c])) {
      half_[c] = int64_t{1} << (rshift[c] - 1);
      mult_32_[c] = m[c].multiplier;
      rshift_32_[c] = static_cast<int32_t>(rshift[c]);
    }
    medium_ = medium_ && m[c].multiplier > 0 && rshift[c] >= 16 && rshift[c] <= 62;
  }
}

void OutputStage::requant_row(const int64_t* acc, int64_t channels, void* out,
                              int64_t offset) const {
  dispatch_storage(dtype, [&](auto tag) {
    using O = decltype(tag);
    O* po = static_cast<O*>(out) + offset;
    if (medium_) {
      auto fn = has_avx512() ? medium_row_avx512<O> : medium_row_default<O>;
      fn(acc, channels, mult.data(), rshift.data(), half_.data(), zero_point, qmin, qmax, po);
      return;
    }
    for (int64_t c = 0; c < channels; ++c) {
      po[c] = static_cast<O>(requantize_output(acc[c], m[c], zero_point, qmin, qmax));
    }
  });
}

void OutputStage::store(const int32_t* raw, int64_t rows, int64_t channels, int64_t raw_stride,
                        void* out, int64_t row0) const {
  dispatch_storage(dtype, [&](auto tag) {
    using O = decltype(tag);
    O* po = static_cast<O*>(out) + row0 * channels;
    if (fast && has_avx512()) {
      fast_rows_avx512<O>(raw, rows, channels, raw_stride, c0.data(), mult_32_.data(), rshift_32_.data(),
                          zero_point, qmin, qmax, po);
      return;
    }
    if (fast) {
      fast_rows_default<O>(raw, rows, channels, raw_stride, c0.data(), mult.data(), rshift.data(), half_.data(),
                           zero_point, qmin, qmax, po);
      return;
    }
    std::vector<int64_t> acc(static_cast<size_t>(channels));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < channels; ++c) acc[c] = raw[r * raw_stride + c] + c0[c];
      requant_row(acc.data(), channels, out, (row0 + r) * channels);
    }
  });
}

void OutputStage::store64(const int64_t* acc, int64_t rows, int64_t channels, void* out,
                          int64_t row0) const {
  std::vector<int64_t> row(static_cast<size_t>(channels));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < channels; ++c) row[c] = acc[r * channels + c] + c0[c];
    requant_row(row.data(), channels, out, (row0 + r) * channels);
  }
}

void OutputStage::run(std::span<const int32_t* const> raws, std::span<const int64_t> coef,
                      int64_t rows, int64_t channels, int64_t raw_stride, const int64_t* row_term,
                      const int64_t* col_coef, void* out, int threads) const {
  const bool one = raws.size() == 1 && coef[0] == 1 && row_term == nullptr;
  if (one) {
    parallel_for(threads, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(channels, 1)),
                 [&](int64_t b, int64_t e) {
                   store(raws[0] + b * raw_stride, e - b, channels, raw_stride, out, b);
                 });
    return;
  }
  parallel_for(threads, rows, std::max<int64_t>(1, 2048 / std::max<int64_t>(channels, 1)),
               [&](int64_t b, int64_t e) {
                 std::vector<int64_t> acc(static_cast<size_t>(channels));
                 for (int64_t r = b; r < e; ++r) {
                   for (int64_t c = 0; c < channels; ++c) acc[c] = c0[c];
                   if (row_term) {
                     for (int64_t c = 0; c < channels; ++c) acc[c] += row_term[r] * col_coef[c];
                   }
                   for (size_t k = 0; k < raws.size(); ++k) {
                     const int32_t* src = raws[k] + r * raw_stride;
                     const int64_t ck = coef[k];
                     for (int64_t c = 0; c < channels; ++c) acc[c] += ck * src[c];
                   }
                   requant_row(acc.data(), channels, out, r * channels);
                 }
               });
}

}  // namespace kiln::htp::detail
