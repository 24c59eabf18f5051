// AVX-512 helpers of the elementwise, pooling and encoding kernels (not installed): codes to and
// from int32 lanes, and the exact fixed-point requantization on 16 int32 lanes. Every function
// is compiled for AVX-512 F/DQ/BW/VL only; callers check detail::has_avx512() first.
#pragma once

// GCC 12 warns inside the AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#define KILN_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))

namespace kiln::htp::detail::avx512 {

/// The mask of the first `n` of 16 lanes (n may exceed 16).
inline __mmask16 lanes16(int64_t n) {
  return n >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << n) - 1);
}

/// Loads the codes selected by `k` (of 16 from p) sign- or zero-extended to int32 lanes.
template <typename T>
KILN_AVX512 inline __m512i load16(const T* p, __mmask16 k) {
  if (k == 0xffff) {
    if constexpr (std::is_same_v<T, uint8_t>) {
      return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else if constexpr (std::is_same_v<T, int8_t>) {
      return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else if constexpr (std::is_same_v<T, uint16_t>) {
      return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else if constexpr (std::is_same_v<T, int16_t>) {
      return _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
      return _mm512_loadu_si512(p);
    }
  }
  if constexpr (std::is_same_v<T, uint8_t>) {
    return _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, p));
  } else if constexpr (std::is_same_v<T, int8_t>) {
    return _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, p));
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p));
  } else if constexpr (std::is_same_v<T, int16_t>) {
    return _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(k, p));
  } else {
    return _mm512_maskz_loadu_epi32(k, p);
  }
}

/// Stores the int32 lanes selected by `k` as T (truncating: callers clamp to T's range first).
template <typename T>
KILN_AVX512 inline void store16(T* p, __m512i v, __mmask16 k) {
  if (k == 0xffff) {
    if constexpr (sizeof(T) == 1) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
    } else if constexpr (sizeof(T) == 2) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v));
    } else {
      _mm512_storeu_si512(p, v);
    }
    return;
  }
  if constexpr (sizeof(T) == 1) {
    _mm512_mask_cvtepi32_storeu_epi8(p, k, v);
  } else if constexpr (sizeof(T) == 2) {
    _mm512_mask_cvtepi32_storeu_epi16(p, k, v);
  } else {
    _mm512_mask_storeu_epi32(p, k, v);
  }
}

/// requantize_fast on 16 int32 lanes: round half away from zero of x * mult / 2^n per lane
/// (n in [1, 62], mult >= 0), exact through vpmuldq (32 x 32 -> 64 bits) on the even and odd
/// lanes. Returns the int64 results of the even lanes in *even and of the odd lanes in *odd.
KILN_AVX512 inline void mul_round_shift(__m512i x, __m512i mult, __m512i half, __m128i n,
                                        __m512i* even, __m512i* odd) {
  __m512i pe = _mm512_mul_epi32(x, mult);
  __m512i po = _mm512_mul_epi32(_mm512_srli_epi64(x, 32), mult);
  pe = _mm512_add_epi64(pe, _mm512_add_epi64(half, _mm512_srai_epi64(pe, 63)));
  po = _mm512_add_epi64(po, _mm512_add_epi64(half, _mm512_srai_epi64(po, 63)));
  *even = _mm512_sra_epi64(pe, n);
  *odd = _mm512_sra_epi64(po, n);
}

/// The low 32 bits of the even-lane and odd-lane int64 results, back in lane order.
KILN_AVX512 inline __m512i pack_even_odd(__m512i even, __m512i odd) {
  return _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

/// requantize_output on 16 int32 accumulators: the constants of one (mult, n, zero point,
/// [qmin, qmax]) with mult > 0 and n in [1, 62] (fast_requant_ok).
struct OutputRq {
  __m512i mult, half, lo, hi, zp;
  __m128i n;
};

KILN_AVX512 inline OutputRq output_rq(int64_t mult, int64_t n, int64_t zp, int64_t qmin,
                                      int64_t qmax) {
  OutputRq r;
  r.mult = _mm512_set1_epi64(mult);
  r.half = _mm512_set1_epi64(int64_t{1} << (n - 1));
  r.n = _mm_cvtsi64_si128(n);
  r.lo = _mm512_set1_epi64(qmin - zp);
  r.hi = _mm512_set1_epi64(qmax - zp);
  r.zp = _mm512_set1_epi32(static_cast<int32_t>(zp));
  return r;
}

/// clamp(requantize(acc) + zp, qmin, qmax) per lane (|acc| < 2^31, as the fast form needs).
KILN_AVX512 inline __m512i requantize_output16(__m512i acc, const OutputRq& r) {
  __m512i e, o;
  mul_round_shift(acc, r.mult, r.half, r.n, &e, &o);
  e = _mm512_min_epi64(_mm512_max_epi64(e, r.lo), r.hi);
  o = _mm512_min_epi64(_mm512_max_epi64(o, r.lo), r.hi);
  return _mm512_add_epi32(pack_even_odd(e, o), r.zp);
}

}  // namespace kiln::htp::detail::avx512
