// Quantized conv2d and fully connected: bit-exact against the integer reference on random
// shapes and parameters through every algorithm, within one step of float fake-quant, and
// errors for bad parameters.
#include "backends/htp/kernels_reference.h"

namespace kiln::htp::testing {
namespace {

enum class WeightKind { k8, k4, k16, kU8 };

Encoding random_input_encoding(Rng& rng, DType dtype) {
  auto [lo, hi] = storage(dtype);
  const int64_t zp = rng.zero_point(lo, hi);
  Encoding e = make_encoding(dtype, rng.scale(0.005, 0.1), static_cast<int32_t>(zp));
  if (rng.coin(0.2)) e.qmin = zp;  // a relu folded into the range
  return e;
}

Encoding random_weight_encoding(Rng& rng, WeightKind kind, int64_t channels, int32_t axis,
                                bool per_channel) {
  DType dtype = DType::kI8;
  int64_t lo = -128, hi = 127;
  int bits = 8;
  switch (kind) {
    case WeightKind::k8:
      break;
    case WeightKind::k4:
      lo = -8, hi = 7, bits = 4;
      break;
    case WeightKind::k16:
      dtype = DType::kI16, lo = -32768, hi = 32767, bits = 16;
      break;
    case WeightKind::kU8:
      dtype = DType::kU8, lo = 0, hi = 255;
      break;
  }
  if (kind != WeightKind::kU8 && rng.coin(0.3)) lo = -hi;  // symmetric
  const int64_t n = per_channel ? channels : 1;
  std::vector<float> scales;
  std::vector<int32_t> zps;
  const bool asym = kind == WeightKind::kU8 || rng.coin(0.25);
  for (int64_t c = 0; c < n; ++c) {
    scales.push_back(rng.scale(0.001, 0.05));
    zps.push_back(asym ? static_cast<int32_t>(rng.zero_point(lo, hi)) : 0);
  }
  if (!per_channel) return make_encoding(dtype, scales[0], zps[0], lo, hi, bits);
  return make_per_axis_encoding(dtype, scales, zps, axis, lo, hi, bits);
}

struct Case {
  RefConv r;
  std::string desc;
};

Case random_conv(Rng& rng, DType act, WeightKind wk, int kind) {
  Case c;
  Conv2dParams& p = c.r.p;
  for (;;) {
    p.batch = rng.uniform(1, 2);
    p.in_h = rng.uniform(1, 9);
    p.in_w = rng.uniform(1, 11);
    p.kernel_h = rng.uniform(1, 3);
    p.kernel_w = rng.coin(0.1) ? 5 : rng.uniform(1, 3);
    p.stride_h = rng.uniform(1, 2);
    p.stride_w = rng.uniform(1, 2);
    p.dilation_h = rng.uniform(1, 2);
    p.dilation_w = rng.uniform(1, 2);
    p.pad_top = rng.uniform(0, 2);
    p.pad_left = rng.uniform(0, 2);
    p.pad_bottom = rng.uniform(0, 2);
    p.pad_right = rng.uniform(0, 2);
    if (kind == 0) {
      p.groups = 1;
      p.in_c = rng.uniform(1, 24);
      p.out_c = rng.uniform(1, 24);
    } else if (kind == 1) {
      p.groups = rng.uniform(2, 3);
      p.in_c = p.groups * rng.uniform(1, 5);
      p.out_c = p.groups * rng.uniform(1, 5);
    } else {
      p.in_c = rng.uniform(2, 24);
      p.groups = p.in_c;
      p.out_c = p.in_c * rng.uniform(1, 2);
    }
    if (p.out_h() >= 1 && p.out_w() >= 1) break;
  }
  p.threads = static_cast<int>(rng.uniform(1, 2));
  const bool per_channel = rng.coin(0.6);
  c.r.in = random_input_encoding(rng, act);
  c.r.w = random_weight_encoding(rng, wk, p.out_c, 3, per_channel);
  c.r.x =
      rng.codes(static_cast<size_t>(p.batch * p.in_h * p.in_w * p.in_c), c.r.in.qmin, c.r.in.qmax);
  c.r.wt = rng.codes(static_cast<size_t>(p.kernel_h * p.kernel_w * (p.in_c / p.groups) * p.out_c),
                     c.r.w.qmin, c.r.w.qmax);
  if (rng.coin(0.7)) {
    for (int64_t i = 0; i < p.out_c; ++i) c.r.bias.push_back(rng.uniform(-40000, 40000));
  }
  c.desc = fmt::format(
      "act {} w {}{} bits {} {} | n{} {}x{}x{} -> {} k{}x{} s{}x{} d{}x{} pad {},{},{},{} g{} t{}",
      dtype_name(act), dtype_name(c.r.w.dtype), per_channel ? " per-channel" : "", c.r.w.bitwidth,
      c.r.w.qmin, p.batch, p.in_h, p.in_w, p.in_c, p.out_c, p.kernel_h, p.kernel_w, p.stride_h,
      p.stride_w, p.dilation_h, p.dilation_w, p.pad_top, p.pad_left, p.pad_bottom, p.pad_right,
      p.groups, p.threads);
  return c;
}

std::vector<double> real_values(const std::vector<int64_t>& acc, int64_t channels,
                                const Encoding& in, const Encoding& w) {
  std::vector<double> real(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    real[i] = static_cast<double>(acc[i]) * in.scale() * w.scale(i % static_cast<size_t>(channels));
  }
  return real;
}

// Runs every algorithm that prepares on the case and compares with the reference.
void check_conv(Rng& rng, Case& c, DType out_dtype, bool expect_onednn) {
  const auto acc = ref_conv_acc(c.r);
  const auto real = real_values(acc, c.r.p.out_c, c.r.in, c.r.w);
  c.r.out = fit_output(rng, out_dtype, real);
  const auto want = ref_requant(acc, c.r.p.out_c, c.r.in, c.r.w, c.r.out);
  const auto xb = to_bytes(c.r.x, c.r.in.dtype);
  const auto wb = to_bytes(c.r.wt, c.r.w.dtype);
  std::vector<int32_t> bias(c.r.bias.begin(), c.r.bias.end());
  for (ConvAlgorithm algo :
       {ConvAlgorithm::kAuto, ConvAlgorithm::kOneDnn, ConvAlgorithm::kDirect}) {
    auto conv = QuantConv2d::prepare(c.r.p, c.r.in, wb, c.r.w, bias, c.r.out, algo);
    if (algo == ConvAlgorithm::kOneDnn && !expect_onednn) continue;
    ASSERT_TRUE(conv.ok()) << c.desc << ": " << conv.status().message();
    if (algo != ConvAlgorithm::kAuto) {
      ASSERT_EQ(conv->algorithm(), algo);
    }
    auto ob = buffer(want.size(), out_dtype);
    ASSERT_TRUE(conv->run(xb.data(), ob.data()).ok());
    const auto got = from_bytes(ob, out_dtype);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << c.desc << " algo " << algorithm_name(conv->algorithm())
                                 << " at " << i << " acc " << acc[i];
      ASSERT_LE(std::abs(got[i] - fake_quant(real[i], c.r.out)), 1) << c.desc;
    }
    // A second run reuses the prepared state.
    auto ob2 = buffer(want.size(), out_dtype);
    ASSERT_TRUE(conv->run(xb.data(), ob2.data()).ok());
    ASSERT_EQ(ob, ob2) << c.desc;
  }
}

TEST(HtpConv2d, RandomCasesBitExactEveryAlgorithm) {
  Rng rng(11);
  const std::vector<DType> acts = {DType::kU8, DType::kI8, DType::kU16, DType::kI16};
  const std::vector<DType> outs = {DType::kU8, DType::kI8, DType::kU16, DType::kI16, DType::kI32};
  const std::vector<WeightKind> wks = {WeightKind::k8, WeightKind::k4, WeightKind::k16,
                                       WeightKind::kU8};
  for (int i = 0; i < 240; ++i) {
    const DType act = acts[static_cast<size_t>(i) % acts.size()];
    const WeightKind wk = wks[static_cast<size_t>(i / 4) % wks.size()];
    rng.dyadic = i % 5 == 4;
    Case c = random_conv(rng, act, wk, static_cast<int>(i / 16) % 3);
    check_conv(rng, c, rng.pick(outs), true);
    if (HasFatalFailure()) return;
  }
}

TEST(HtpConv2d, Resnet18Layer1ShapeAndWideChannels) {
  Rng rng(12);
  for (DType act : {DType::kU8, DType::kU16}) {
    Case c;
    Conv2dParams& p = c.r.p;
    p.in_h = p.in_w = 12;
    p.in_c = p.out_c = 64;
    p.kernel_h = p.kernel_w = 3;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    p.threads = 2;
    c.r.in = random_input_encoding(rng, act);
    c.r.w = random_weight_encoding(rng, WeightKind::k8, 64, 3, true);
    c.r.x = rng.codes(12 * 12 * 64, c.r.in.qmin, c.r.in.qmax);
    c.r.wt = rng.codes(9 * 64 * 64, c.r.w.qmin, c.r.w.qmax);
    for (int i = 0; i < 64; ++i) c.r.bias.push_back(rng.uniform(-100000, 100000));
    c.desc = fmt::format("resnet-like {}", dtype_name(act));
    check_conv(rng, c, DType::kU8, true);
  }
}

// Large enough that one thread runs oneDNN in bands of output rows (int32 sums of a band in
// L2) with a shorter last band: strided, dilated, padded, grouped, bit-exact like the rest.
TEST(HtpConv2d, BandsOfOutputRowsBitExact) {
  Rng rng(13);
  struct Geometry { int64_t h, w, in_c, out_c, k, stride, dilation, pad, groups; };
  const Geometry geometries[] = {{70, 48, 16, 64, 3, 1, 1, 1, 1}, {300, 40, 3, 64, 7, 2, 1, 3, 1},
                                 {64, 64, 32, 96, 3, 1, 2, 2, 1}, {201, 48, 64, 64, 3, 2, 1, 1, 64}};
  // One thread runs the bands in order; two run whole bands each, side by side.
  for (int i = 0; i < 8; ++i) {
    const Geometry g = geometries[i % 4];
    const int threads = 1 + i / 4;
    Case c;
    Conv2dParams& p = c.r.p;
    p.in_h = g.h;
    p.in_w = g.w;
    p.in_c = g.in_c;
    p.out_c = g.out_c;
    p.kernel_h = p.kernel_w = g.k;
    p.stride_h = p.stride_w = g.stride;
    p.dilation_h = p.dilation_w = g.dilation;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = g.pad;
    p.groups = g.groups;
    p.threads = threads;
    c.r.in = random_input_encoding(rng, DType::kU8);
    c.r.w = random_weight_encoding(rng, WeightKind::k8, g.out_c, 3, true);
    c.r.x = rng.codes(g.h * g.w * g.in_c, c.r.in.qmin, c.r.in.qmax);
    c.r.wt = rng.codes(g.k * g.k * (g.in_c / g.groups) * g.out_c, c.r.w.qmin, c.r.w.qmax);
    for (int64_t o = 0; o < g.out_c; ++o) c.r.bias.push_back(rng.uniform(-100000, 100000));
    c.desc = fmt::format("banded {}x{}x{}->{} k{} s{} d{} g{} threads {}", g.h, g.w, g.in_c, g.out_c, g.k,
                         g.stride, g.dilation, g.groups, threads);
    check_conv(rng, c, DType::kU8, true);
    if (HasFatalFailure()) return;
  }
}

TEST(HtpConv2d, PaddingReadsTheZeroPoint) {
  // 1x1 input, 3x3 kernel, padding 1: only the centre tap sees data. With zero point 200, an
  // implementation that padded with code 0 would add (0 - 200) * w for the other taps.
  Conv2dParams p;
  p.kernel_h = p.kernel_w = 3;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  Encoding in = make_encoding(DType::kU8, 1.0f, 200);
  Encoding w = make_encoding(DType::kI8, 1.0f, 0);
  Encoding out = make_encoding(DType::kI32, 1.0f, 0);
  std::vector<int8_t> weights(9, 1);
  weights[4] = 3;
  for (ConvAlgorithm algo : {ConvAlgorithm::kOneDnn, ConvAlgorithm::kDirect}) {
    auto conv = QuantConv2d::prepare(p, in, std::as_bytes(std::span(weights)), w, {}, out, algo);
    ASSERT_TRUE(conv.ok()) << conv.status().message();
    uint8_t x = 210;
    int32_t y = 0;
    ASSERT_TRUE(conv->run(&x, &y).ok());
    EXPECT_EQ(y, 30) << algorithm_name(algo);  // (210 - 200) * 3
  }
}

TEST(HtpFullyConnected, RandomCasesBitExactEveryAlgorithm) {
  Rng rng(13);
  const std::vector<DType> acts = {DType::kU8, DType::kI8, DType::kU16, DType::kI16};
  const std::vector<WeightKind> wks = {WeightKind::k8, WeightKind::k4, WeightKind::k16,
                                       WeightKind::kU8};
  for (int i = 0; i < 64; ++i) {
    const DType act = acts[static_cast<size_t>(i) % acts.size()];
    const WeightKind wk = wks[static_cast<size_t>(i / 4) % wks.size()];
    rng.dyadic = i % 5 == 4;
    FullyConnectedParams p;
    p.m = rng.uniform(1, 17);
    p.k = rng.coin(0.2) ? rng.uniform(200, 700) : rng.uniform(1, 40);
    p.n = rng.uniform(1, 33);
    p.threads = static_cast<int>(rng.uniform(1, 2));
    const bool per_channel = rng.coin(0.6);
    Encoding in = random_input_encoding(rng, act);
    Encoding w = random_weight_encoding(rng, wk, p.n, 0, per_channel);
    auto x = rng.codes(static_cast<size_t>(p.m * p.k), in.qmin, in.qmax);
    auto wt = rng.codes(static_cast<size_t>(p.n * p.k), w.qmin, w.qmax);  // [N, K]
    std::vector<int32_t> bias;
    if (rng.coin(0.7)) {
      for (int64_t j = 0; j < p.n; ++j)
        bias.push_back(static_cast<int32_t>(rng.uniform(-1e5, 1e5)));
    }
    std::vector<int64_t> acc(static_cast<size_t>(p.m * p.n));
    for (int64_t m = 0; m < p.m; ++m) {
      for (int64_t n = 0; n < p.n; ++n) {
        int64_t a = bias.empty() ? 0 : bias[n];
        for (int64_t k = 0; k < p.k; ++k) {
          a += (x[m * p.k + k] - in.zero_point()) *
               (wt[n * p.k + k] - w.zero_point(static_cast<size_t>(n)));
        }
        acc[static_cast<size_t>(m * p.n + n)] = a;
      }
    }
    const auto real = real_values(acc, p.n, in, w);
    const DType od = rng.pick(std::vector<DType>{DType::kU8, DType::kU16, DType::kI8});
    Encoding out = fit_output(rng, od, real);
    const auto want = ref_requant(acc, p.n, in, w, out);
    const auto xb = to_bytes(x, in.dtype);
    const auto wb = to_bytes(wt, w.dtype);
    const std::string desc =
        fmt::format("fc {}x{}x{} act {} w {} bits {} pc {}", p.m, p.k, p.n, dtype_name(act),
                    dtype_name(w.dtype), w.bitwidth, per_channel);
    for (ConvAlgorithm algo :
         {ConvAlgorithm::kAuto, ConvAlgorithm::kOneDnn, ConvAlgorithm::kDirect}) {
      auto fc = QuantFullyConnected::prepare(p, in, wb, w, bias, out, algo);
      ASSERT_TRUE(fc.ok()) << desc << ": " << fc.status().message();
      auto ob = buffer(want.size(), od);
      ASSERT_TRUE(fc->run(xb.data(), ob.data()).ok());
      const auto got = from_bytes(ob, od);
      for (size_t j = 0; j < want.size(); ++j) {
        ASSERT_EQ(got[j], want[j]) << desc << " " << algorithm_name(fc->algorithm()) << " at " << j;
        ASSERT_LE(std::abs(got[j] - fake_quant(real[j], out)), 1) << desc;
      }
    }
  }
}

TEST(HtpConv2d, BadParametersAreErrors) {
  Conv2dParams p;
  p.in_h = p.in_w = 4;
  p.in_c = 4;
  p.out_c = 32;
  p.kernel_h = p.kernel_w = 3;
  Encoding in = make_encoding(DType::kU8, 0.1f, 128);
  Encoding out = make_encoding(DType::kU8, 0.1f, 128);
  std::vector<float> scales(16, 0.01f);
  std::vector<int32_t> zps(16, 0);
  Encoding w16 = make_per_axis_encoding(DType::kI8, scales, zps, 3, -128, 127);
  std::vector<int8_t> weights(3 * 3 * 4 * 32, 1);
  auto wb = std::as_bytes(std::span(weights));
  auto expect_error = [&](const Conv2dParams& pp, const Encoding& i, std::span<const std::byte> b,
                          const Encoding& w, std::span<const int32_t> bias, const Encoding& o,
                          const char* needle) {
    auto r = QuantConv2d::prepare(pp, i, b, w, bias, o);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(p, in, wb, w16, {}, out,
               "conv2d: weight encoding has 16 scales, expected 32 (one per output channel)");
  Encoding w = make_encoding(DType::kI8, 0.01f, 0);
  expect_error(p, in, wb.subspan(1), w, {}, out, "weights have 1151 bytes, expected 1152");
  std::vector<int32_t> bias(31);
  expect_error(p, in, wb, w, bias, out, "bias has 31 values, expected 32");
  Conv2dParams g = p;
  g.groups = 3;
  expect_error(g, in, wb, w, {}, out, "groups 3 does not divide");
  Conv2dParams big = p;
  big.kernel_h = 7;
  expect_error(big, in, wb, w, {}, out, "does not fit the padded 4x4 input");
  Conv2dParams s0 = p;
  s0.stride_w = 0;
  expect_error(s0, in, wb, w, {}, out, "stride_w is 0");
  Conv2dParams neg = p;
  neg.pad_left = -1;
  expect_error(neg, in, wb, w, {}, out, "pad_left is -1");
  Conv2dParams t0 = p;
  t0.threads = 0;
  expect_error(t0, in, wb, w, {}, out, "threads is 0");
  Encoding w4 = make_encoding(DType::kI8, 0.01f, 0, -8, 7, 4);
  std::vector<int8_t> w4v(weights.size(), 3);
  w4v[17] = 9;
  expect_error(p, in, std::as_bytes(std::span(w4v)), w4, {}, out,
               "weight value 9 at index 17 is outside the encoding's range [-8, 7]");
  Encoding per_axis_in = make_per_axis_encoding(DType::kU8, {0.1f}, {0}, 3, 0, 255);
  expect_error(p, per_axis_in, wb, w, {}, out, "input encoding is per axis");
  expect_error(p, make_encoding(DType::kF32, 0.1f, 0, 0, 1), wb, w, {}, out, "dtype f32");
  expect_error(p, make_encoding(DType::kI32, 0.1f, 0), wb, w, {}, out, "input dtype i32");
  Encoding wrong_axis = make_per_axis_encoding(DType::kI8, std::vector<float>(32, 0.01f),
                                               std::vector<int32_t>(32, 0), 0, -128, 127);
  expect_error(p, in, wb, wrong_axis, {}, out, "weight encoding axis is 0, expected 3");

  auto fc = QuantFullyConnected::prepare({0, 4, 4, 1}, in, wb, w, {}, out);
  ASSERT_FALSE(fc.ok());
  EXPECT_NE(fc.status().message().find("fully_connected: m 0"), std::string::npos);

  auto ok = QuantConv2d::prepare(p, in, wb, w, {}, out);
  ASSERT_TRUE(ok.ok());
  EXPECT_FALSE(ok->run(nullptr, nullptr).ok());
  QuantConv2d empty;
  EXPECT_FALSE(empty.run(nullptr, nullptr).ok());
}

}  // namespace
}  // namespace kiln::htp::testing
