// IEEE half conversions: the fp16 precision rounds every op output to half.
#include <immintrin.h>

#include <bit>
#include <cstring>

#include "internal.h"

namespace kiln::htp {

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: mant * 2^-24, exact in float.
    const float v = static_cast<float>(mant) * 0x1p-24f;
    bits = sign | std::bit_cast<uint32_t>(v);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {
    if (abs == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // quiet NaN
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (abs >= 0x38800000u) {                       // normal half (>= 2^-14)
    uint32_t h = (abs >> 13) - (112u << 10);
    const uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry bumps the exponent
    return static_cast<uint16_t>(sign | h);
  }
  // Subnormal half: round(value / 2^-24) to nearest even.
  const uint32_t exp = abs >> 23;
  if (exp == 0) return sign;  // float subnormals are far below 2^-25
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t s = 126 - exp;  // value = mant * 2^(exp - 150) = (mant >> s) units of 2^-24
  if (s >= 32) return sign;
  uint32_t q = mant >> s;
  const uint32_t rem = mant & ((1u << s) - 1), halfway = 1u << (s - 1);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

namespace {

__attribute__((target("avx,f16c"))) void round_to_half_f16c(float* data, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(data + i);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(data + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) data[i] = half_to_float(float_to_half(data[i]));
}

}  // namespace

void round_to_half(float* data, size_t n) {
  static const bool f16c = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  if (f16c) {
    round_to_half_f16c(data, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) data[i] = half_to_float(float_to_half(data[i]));
}

}  // namespace kiln::htp
