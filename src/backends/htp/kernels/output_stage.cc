// The output stage of conv / fully connected / matmul: int32 partial products -> output codes.
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

template <typename O>
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) void fast_rows_avx512(
    const int32_t* raw, int64_t rows, int64_t channels, int64_t stride, const int64_t* c0,
    const int64_t* mult, const int64_t* rshift, const int64_t* half, int64_t zp, int64_t lo,
    int64_t hi, O* out) {
  fast_rows(raw, rows, channels, stride, c0, mult, rshift, half, zp, lo, hi, out);
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
  medium_ = max_abs_acc < (int64_t{1} << 47);
  for (size_t c = 0; c < m.size(); ++c) {
    if (fast_requant_ok(m[c])) half_[c] = int64_t{1} << (rshift[c] - 1);
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
    if (fast) {
      auto fn = has_avx512() ? fast_rows_avx512<O> : fast_rows_default<O>;
      fn(raw, rows, channels, raw_stride, c0.data(), mult.data(), rshift.data(), half_.data(),
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
