// The plain integer reference of the HTP kernels: naive loops in int64 and the library's
// requantize (the definition). Every quantized kernel is compared bit for bit against these.
#pragma once

#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/backends/htp/kernels.h"

namespace kiln::htp::testing {

inline std::pair<int64_t, int64_t> storage(DType d) {
  switch (d) {
    case DType::kU8:
      return {0, 255};
    case DType::kI8:
      return {-128, 127};
    case DType::kU16:
      return {0, 65535};
    case DType::kI16:
      return {-32768, 32767};
    default:
      return {INT32_MIN, INT32_MAX};
  }
}

/// Codes stored as int64 in tests; converted to/from the storage bytes.
inline std::vector<std::byte> to_bytes(const std::vector<int64_t>& v, DType d) {
  std::vector<std::byte> out(v.size() * dtype_size(d));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (d) {
      case DType::kU8: {
        uint8_t x = static_cast<uint8_t>(v[i]);
        std::memcpy(&out[i], &x, 1);
        break;
      }
      case DType::kI8: {
        int8_t x = static_cast<int8_t>(v[i]);
        std::memcpy(&out[i], &x, 1);
        break;
      }
      case DType::kU16: {
        uint16_t x = static_cast<uint16_t>(v[i]);
        std::memcpy(&out[2 * i], &x, 2);
        break;
      }
      case DType::kI16: {
        int16_t x = static_cast<int16_t>(v[i]);
        std::memcpy(&out[2 * i], &x, 2);
        break;
      }
      default: {
        int32_t x = static_cast<int32_t>(v[i]);
        std::memcpy(&out[4 * i], &x, 4);
        break;
      }
    }
  }
  return out;
}

inline std::vector<int64_t> from_bytes(const std::vector<std::byte>& b, DType d) {
  const size_t n = b.size() / dtype_size(d);
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    switch (d) {
      case DType::kU8: {
        uint8_t x;
        std::memcpy(&x, &b[i], 1);
        v[i] = x;
        break;
      }
      case DType::kI8: {
        int8_t x;
        std::memcpy(&x, &b[i], 1);
        v[i] = x;
        break;
      }
      case DType::kU16: {
        uint16_t x;
        std::memcpy(&x, &b[2 * i], 2);
        v[i] = x;
        break;
      }
      case DType::kI16: {
        int16_t x;
        std::memcpy(&x, &b[2 * i], 2);
        v[i] = x;
        break;
      }
      default: {
        int32_t x;
        std::memcpy(&x, &b[4 * i], 4);
        v[i] = x;
        break;
      }
    }
  }
  return v;
}

/// A buffer of `n` codes of dtype d (zeroed), for outputs.
inline std::vector<std::byte> buffer(size_t n, DType d) {
  return std::vector<std::byte>(n * dtype_size(d));
}

struct Rng {
  std::mt19937_64 gen;
  bool dyadic = false;  // scales are powers of two: requantization hits exact ties often
  explicit Rng(uint64_t seed) : gen(seed) {}
  /// A scale in [lo, hi] (a power of two near it when `dyadic`).
  float scale(double lo, double hi) {
    const double s = real(lo, hi);
    return static_cast<float>(dyadic ? std::exp2(std::round(std::log2(s))) : s);
  }
  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen); }
  bool coin(double p = 0.5) { return real(0, 1) < p; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uniform(0, static_cast<int64_t>(v.size()) - 1))];
  }
  /// Codes in [lo, hi], biased towards the edges sometimes.
  std::vector<int64_t> codes(size_t n, int64_t lo, int64_t hi) {
    std::vector<int64_t> v(n);
    const int mode = static_cast<int>(uniform(0, 3));
    for (auto& x : v) {
      if (mode == 0 && coin(0.3)) {
        x = coin() ? lo : hi;
      } else {
        x = uniform(lo, hi);
      }
    }
    return v;
  }
  /// A zero point inside [lo, hi]: an edge, the middle or random.
  int64_t zero_point(int64_t lo, int64_t hi) {
    switch (uniform(0, 4)) {
      case 0:
        return lo;
      case 1:
        return hi;
      case 2:
        return lo + (hi - lo + 1) / 2;
      default:
        return uniform(lo, hi);
    }
  }
};

// ---- the reference ops

struct RefConv {
  Conv2dParams p;
  Encoding in, w, out;
  std::vector<int64_t> x, wt, bias;  // wt HWIO
};

/// Exact accumulators of a conv: bias + sum over in-bounds taps (x - zx) * (w - zw[c]).
inline std::vector<int64_t> ref_conv_acc(const RefConv& r) {
  const Conv2dParams& p = r.p;
  const int64_t oh = p.out_h(), ow = p.out_w(), cig = p.in_c / p.groups, cog = p.out_c / p.groups;
  std::vector<int64_t> acc(static_cast<size_t>(p.batch * oh * ow * p.out_c));
  const int64_t zx = r.in.zero_point();
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        for (int64_t oc = 0; oc < p.out_c; ++oc) {
          const int64_t g = oc / cog;
          int64_t a = r.bias.empty() ? 0 : r.bias[oc];
          for (int64_t ky = 0; ky < p.kernel_h; ++ky)
            for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
              const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
              const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
              if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w) continue;
              for (int64_t ic = 0; ic < cig; ++ic) {
                const int64_t xv = r.x[((n * p.in_h + iy) * p.in_w + ix) * p.in_c + g * cig + ic];
                const int64_t wv = r.wt[((ky * p.kernel_w + kx) * cig + ic) * p.out_c + oc];
                a += (xv - zx) * (wv - r.w.zero_point(static_cast<size_t>(oc)));
              }
            }
          acc[static_cast<size_t>(((n * oh + oy) * ow + ox) * p.out_c + oc)] = a;
        }
  return acc;
}

/// Requantizes per-channel accumulators (channel = index % channels) with scale s_in * s_w[c].
inline std::vector<int64_t> ref_requant(const std::vector<int64_t>& acc, int64_t channels,
                                        const Encoding& in, const Encoding& w,
                                        const Encoding& out) {
  std::vector<int64_t> y(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    const size_t c = i % static_cast<size_t>(channels);
    const FixedPointMultiplier m = quantize_multiplier(
        static_cast<double>(in.scale()) * w.scale(c) / static_cast<double>(out.scale()));
    y[i] = requantize_output(acc[i], m, out.zero_point(), out.qmin, out.qmax);
  }
  return y;
}

/// The float fake-quant result of a per-channel accumulator: quantize(acc * s_in * s_w / s_out).
inline int64_t fake_quant(double real_value, const Encoding& out) {
  const double q = std::nearbyint(real_value / out.scale()) + out.zero_point();
  return static_cast<int64_t>(
      std::clamp<double>(q, static_cast<double>(out.qmin), static_cast<double>(out.qmax)));
}

/// An output encoding fitted to real values (so outputs spread over the range, some saturate).
inline Encoding fit_output(Rng& rng, DType dtype, const std::vector<double>& real) {
  auto [lo, hi] = storage(dtype);
  if (dtype == DType::kI32) {
    lo = -(1 << 20);
    hi = 1 << 20;
  }
  double mn = 0, mx = 0;
  for (double v : real) {
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  if (mx - mn <= 0) mx = mn + 1;
  const double shrink = rng.coin(0.3) ? 0.7 : 1.0;  // sometimes saturate
  float scale = static_cast<float>((mx - mn) * shrink / static_cast<double>(hi - lo));
  if (rng.dyadic) scale = static_cast<float>(std::exp2(std::ceil(std::log2(scale))));
  int64_t zp = lo + static_cast<int64_t>(std::llround(-mn * shrink / scale));
  zp = std::clamp(zp, lo, hi);
  if (dtype == DType::kI32) return make_encoding(dtype, scale, static_cast<int32_t>(zp), lo, hi);
  return make_encoding(dtype, scale, static_cast<int32_t>(zp));
}

}  // namespace kiln::htp::testing
