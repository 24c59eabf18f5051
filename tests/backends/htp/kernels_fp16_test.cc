// Float conv2d (oneDNN f32) and pooling, with and without fp16 rounding, against double
// references.
#include <limits>

#include "backends/htp/kernels_reference.h"

namespace kiln::htp::testing {
namespace {

float round_half(float x) { return half_to_float(float_to_half(x)); }

// One half-precision unit in the last place at |x| (subnormal spacing below 2^-14).
double half_ulp(double x) {
  const double a = std::fabs(x);
  if (a < 0x1p-14) return 0x1p-24;
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 10);
}

TEST(HtpFloatConv2d, RandomAgainstDoubleReference) {
  Rng rng(51);
  for (int i = 0; i < 60; ++i) {
    const bool fp16 = i % 2 == 1;
    Conv2dParams p;
    for (;;) {
      p.batch = rng.uniform(1, 2);
      p.in_h = rng.uniform(1, 9);
      p.in_w = rng.uniform(1, 9);
      p.kernel_h = rng.uniform(1, 3);
      p.kernel_w = rng.uniform(1, 3);
      p.stride_h = rng.uniform(1, 2);
      p.stride_w = rng.uniform(1, 2);
      p.dilation_h = rng.uniform(1, 2);
      p.dilation_w = rng.uniform(1, 2);
      p.pad_top = rng.uniform(0, 2);
      p.pad_left = rng.uniform(0, 2);
      p.pad_bottom = rng.uniform(0, 2);
      p.pad_right = rng.uniform(0, 2);
      const int kind = i % 3;
      if (kind == 0) {
        p.groups = 1;
        p.in_c = rng.uniform(1, 17);
        p.out_c = rng.uniform(1, 17);
      } else if (kind == 1) {
        p.groups = rng.uniform(2, 3);
        p.in_c = p.groups * rng.uniform(1, 4);
        p.out_c = p.groups * rng.uniform(1, 4);
      } else {
        p.in_c = p.groups = rng.uniform(2, 16);
        p.out_c = p.in_c * rng.uniform(1, 2);
      }
      if (p.out_h() >= 1 && p.out_w() >= 1) break;
    }
    p.threads = static_cast<int>(rng.uniform(1, 2));
    const int64_t cig = p.in_c / p.groups, cog = p.out_c / p.groups;
    std::vector<float> x(static_cast<size_t>(p.batch * p.in_h * p.in_w * p.in_c));
    std::vector<float> w(static_cast<size_t>(p.kernel_h * p.kernel_w * cig * p.out_c));
    std::vector<float> b;
    for (auto& v : x) v = static_cast<float>(rng.real(-2, 2));
    for (auto& v : w) v = static_cast<float>(rng.real(-1, 1));
    if (rng.coin(0.7)) {
      for (int64_t c = 0; c < p.out_c; ++c) b.push_back(static_cast<float>(rng.real(-1, 1)));
    }
    if (fp16) round_to_half(x.data(), x.size());
    auto conv = FloatConv2d::prepare(p, w, b, fp16);
    ASSERT_TRUE(conv.ok()) << conv.status().message();
    const auto os = conv->output_shape();
    std::vector<float> y(static_cast<size_t>(os[0] * os[1] * os[2] * os[3]));
    ASSERT_TRUE(conv->run(x.data(), y.data()).ok());
    // The reference sees the weights the op packed (rounded to half in fp16 mode).
    std::vector<float> wr = w, br = b;
    if (fp16) {
      round_to_half(wr.data(), wr.size());
      round_to_half(br.data(), br.size());
    }
    size_t idx = 0;
    for (int64_t n = 0; n < p.batch; ++n)
      for (int64_t oy = 0; oy < os[1]; ++oy)
        for (int64_t ox = 0; ox < os[2]; ++ox)
          for (int64_t oc = 0; oc < p.out_c; ++oc, ++idx) {
            const int64_t g = oc / cog;
            double acc = br.empty() ? 0.0 : br[oc], mag = std::fabs(acc);
            for (int64_t ky = 0; ky < p.kernel_h; ++ky)
              for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
                const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
                const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
                if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w) continue;
                for (int64_t ic = 0; ic < cig; ++ic) {
                  const double t =
                      static_cast<double>(
                          x[((n * p.in_h + iy) * p.in_w + ix) * p.in_c + g * cig + ic]) *
                      wr[((ky * p.kernel_w + kx) * cig + ic) * p.out_c + oc];
                  acc += t;
                  mag += std::fabs(t);
                }
              }
            const double f32_err = mag * 1e-6 + 1e-7;  // f32 accumulation in any order
            if (!fp16) {
              ASSERT_NEAR(y[idx], acc, f32_err) << "case " << i << " at " << idx;
              continue;
            }
            ASSERT_EQ(y[idx], round_half(y[idx])) << "not a half value";
            ASSERT_LE(std::fabs(y[idx] - acc), half_ulp(acc) / 2 + f32_err + half_ulp(acc) * 1e-3)
                << "case " << i << " at " << idx;
          }
  }
}

TEST(HtpFloatConv2d, Errors) {
  Conv2dParams p;
  p.in_c = 2;
  p.out_c = 4;
  std::vector<float> w(7);
  auto r = FloatConv2d::prepare(p, w, {}, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("weights have 7 values, expected 8"), std::string::npos);
  w.resize(8);
  std::vector<float> b(3);
  EXPECT_FALSE(FloatConv2d::prepare(p, w, b, false).ok());
  p.groups = 3;
  EXPECT_FALSE(FloatConv2d::prepare(p, w, {}, false).ok());
  FloatConv2d empty;
  EXPECT_FALSE(empty.run(nullptr, nullptr).ok());
}

TEST(HtpFloatPool2d, RandomAgainstReference) {
  Rng rng(52);
  for (int i = 0; i < 80; ++i) {
    const PoolKind kind = i % 2 ? PoolKind::kMax : PoolKind::kAverage;
    const bool fp16 = (i / 2) % 2 == 1;
    Pool2dParams p;
    for (;;) {
      p.batch = rng.uniform(1, 2);
      p.in_h = rng.uniform(1, 8);
      p.in_w = rng.uniform(1, 8);
      p.channels = rng.uniform(1, 9);
      p.kernel_h = rng.uniform(1, 3);
      p.kernel_w = rng.uniform(1, 3);
      p.stride_h = rng.uniform(1, 2);
      p.stride_w = rng.uniform(1, 2);
      p.pad_top = rng.uniform(0, p.kernel_h / 2);
      p.pad_bottom = rng.uniform(0, p.kernel_h / 2);
      p.pad_left = rng.uniform(0, p.kernel_w / 2);
      p.pad_right = rng.uniform(0, p.kernel_w / 2);
      p.ceil_mode = rng.coin();
      p.count_include_pad = rng.coin();
      if (p.out_h() >= 1 && p.out_w() >= 1) break;
    }
    std::vector<float> x(static_cast<size_t>(p.batch * p.in_h * p.in_w * p.channels));
    for (auto& v : x) v = static_cast<float>(rng.real(-3, 3));
    auto pool = FloatPool2d::prepare(kind, p, fp16);
    ASSERT_TRUE(pool.ok()) << pool.status().message();
    std::vector<float> y(static_cast<size_t>(p.batch * p.out_h() * p.out_w() * p.channels));
    ASSERT_TRUE(pool->run(x.data(), y.data()).ok());
    size_t idx = 0;
    for (int64_t n = 0; n < p.batch; ++n)
      for (int64_t oy = 0; oy < p.out_h(); ++oy)
        for (int64_t ox = 0; ox < p.out_w(); ++ox)
          for (int64_t c = 0; c < p.channels; ++c, ++idx) {
            const int64_t hs = oy * p.stride_h - p.pad_top, ws = ox * p.stride_w - p.pad_left;
            const int64_t he = std::min(hs + p.kernel_h, p.in_h + p.pad_bottom);
            const int64_t we = std::min(ws + p.kernel_w, p.in_w + p.pad_right);
            double sum = 0, mx = -1e30;
            int64_t valid = 0;
            for (int64_t iy = std::max<int64_t>(hs, 0); iy < std::min(he, p.in_h); ++iy)
              for (int64_t ix = std::max<int64_t>(ws, 0); ix < std::min(we, p.in_w); ++ix) {
                const double v = x[((n * p.in_h + iy) * p.in_w + ix) * p.channels + c];
                sum += v;
                mx = std::max(mx, v);
                ++valid;
              }
            const int64_t count = p.count_include_pad ? (he - hs) * (we - ws) : valid;
            float want = kind == PoolKind::kMax
                             ? static_cast<float>(mx)
                             : static_cast<float>(sum / static_cast<double>(count));
            if (fp16) want = round_half(want);
            ASSERT_EQ(y[idx], want) << "case " << i << " at " << idx;
          }
  }
}

}  // namespace
}  // namespace kiln::htp::testing
