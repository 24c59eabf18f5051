// Encodings, the fixed-point multiplier and requantize, quantize/dequantize/convert, fp16.
#include <bit>
#include <limits>

#include "backends/htp/kernels/internal.h"
#include "backends/htp/kernels_reference.h"
#include "kiln/backends/portable/kernels.h"
#include "kiln/core/tensor.h"

namespace kiln::htp::testing {
namespace {

__extension__ typedef __int128 int128;

// requantize written another way: exact floor division of acc * m by 2^n, then the remainder
// compared with one half (ties away from zero).
int64_t requantize_by_division(int64_t acc, FixedPointMultiplier m) {
  const int128 x = static_cast<int128>(acc) * m.multiplier;
  const int n = 31 - m.shift;
  if (n <= 0) return static_cast<int64_t>(x * (static_cast<int128>(1) << -n));
  const int128 d = static_cast<int128>(1) << n;
  const int128 mag = x < 0 ? -x : x;
  int128 q = mag / d;
  const int128 r = mag % d;
  if (2 * r >= d) ++q;
  return static_cast<int64_t>(x < 0 ? -q : q);
}

TEST(HtpFixedPoint, QuantizeMultiplierKnownValues) {
  EXPECT_EQ(quantize_multiplier(0.5).multiplier, 1 << 30);
  EXPECT_EQ(quantize_multiplier(0.5).shift, 0);
  EXPECT_EQ(quantize_multiplier(1.0).multiplier, 1 << 30);
  EXPECT_EQ(quantize_multiplier(1.0).shift, 1);
  EXPECT_EQ(quantize_multiplier(0.75).multiplier, 3 << 29);
  EXPECT_EQ(quantize_multiplier(0.75).shift, 0);
  EXPECT_EQ(quantize_multiplier(0.001).shift, -9);  // 0.001 = 0.512 * 2^-9
  // A mantissa that rounds up to 2^31 carries into the exponent.
  const auto carry = quantize_multiplier(1.0 - std::ldexp(1.0, -40));
  EXPECT_EQ(carry.multiplier, 1 << 30);
  EXPECT_EQ(carry.shift, 1);
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(quantize_multiplier(bad).multiplier, 0) << bad;
  }
  // Mantissa rounding is half away from zero: 2^-31 * (2^30 + 0.5) -> 2^30 + 1.
  const double tie = (std::ldexp(1.0, 30) + 0.5) / std::ldexp(1.0, 31);
  EXPECT_EQ(quantize_multiplier(tie).multiplier, (1 << 30) + 1);
}

TEST(HtpFixedPoint, RequantizeRoundsHalfAwayFromZero) {
  const FixedPointMultiplier half = quantize_multiplier(0.5);
  EXPECT_EQ(requantize(3, half), 2);
  EXPECT_EQ(requantize(-3, half), -2);
  EXPECT_EQ(requantize(5, half), 3);
  EXPECT_EQ(requantize(-5, half), -3);
  EXPECT_EQ(requantize(4, half), 2);
  EXPECT_EQ(requantize(1, quantize_multiplier(0.25)), 0);   // 0.25
  EXPECT_EQ(requantize(-1, quantize_multiplier(0.5)), -1);  // -0.5 -> -1
  EXPECT_EQ(requantize(7, quantize_multiplier(3.0)), 21);
  EXPECT_EQ(requantize(0, quantize_multiplier(3.0)), 0);
  // Saturation and tiny multipliers.
  EXPECT_EQ(requantize(std::numeric_limits<int64_t>::max(), quantize_multiplier(1e6)),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(requantize(std::numeric_limits<int64_t>::min(), quantize_multiplier(1e6)),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(requantize(1000, quantize_multiplier(1e-300)), 0);
  EXPECT_EQ(requantize_output(1000, quantize_multiplier(1.0), 10, 0, 255), 255);
  EXPECT_EQ(requantize_output(-1000, quantize_multiplier(1.0), 10, 0, 255), 0);
  EXPECT_EQ(requantize_output(-7, quantize_multiplier(1.0), 10, 0, 255), 3);
}

TEST(HtpFixedPoint, RequantizeMatchesDivisionAndFastForm) {
  Rng rng(1);
  for (int i = 0; i < 200000; ++i) {
    const double real = std::ldexp(rng.real(0.5, 1.0), static_cast<int>(rng.uniform(-40, 20)));
    const FixedPointMultiplier m = quantize_multiplier(real);
    const int bits = static_cast<int>(rng.uniform(0, 40));
    const int64_t acc = rng.uniform(-(int64_t{1} << bits), int64_t{1} << bits);
    if (31 - m.shift > 94 - bits) continue;  // keep the division form in range
    ASSERT_EQ(requantize(acc, m), requantize_by_division(acc, m)) << acc << " " << real;
    const int64_t n = 31 - m.shift;
    if (bits <= 30 && n >= 1 && n <= 62) {
      ASSERT_EQ(requantize(acc, m), detail::requantize_fast(acc, m.multiplier, n)) << acc;
    }
  }
}

// The portable quantize_per_tensor kernel, for bit-exactness of quantize_value.
std::vector<int64_t> portable_quantize(const std::vector<float>& x, float scale, int32_t zp,
                                       int64_t qmin, int64_t qmax, DType dtype) {
  Tensor t(DType::kF32, {static_cast<int64_t>(x.size())});
  std::memcpy(t.mutable_data(), x.data(), x.size() * sizeof(float));
  portable::KernelArgs args;
  args.inputs.push_back(portable::KernelInput::of(&t));
  args.attrs = {{"scale", static_cast<double>(scale)},
                {"zero_point", static_cast<int64_t>(zp)},
                {"quant_min", qmin},
                {"quant_max", qmax},
                {"dtype", dtype}};
  portable::SimpleKernelContext ctx;
  std::vector<Tensor> out;
  Status s = portable::find_kernel("quantize_per_tensor")(ctx, args, &out);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<std::byte> bytes(out[0].nbytes());
  std::memcpy(bytes.data(), out[0].data(), bytes.size());
  return from_bytes(bytes, dtype);
}

TEST(HtpFixedPoint, FastFormOnExactTies) {
  // Dyadic multipliers put acc * m exactly halfway between integers for many acc.
  for (double real : {0.5, 0.25, 0.75, 0.125, 0.375, 1.5, 3.0 / 1024}) {
    const FixedPointMultiplier m = quantize_multiplier(real);
    const int64_t n = 31 - m.shift;
    for (int64_t acc = -5000; acc <= 5000; ++acc) {
      const int64_t want = requantize_by_division(acc, m);
      ASSERT_EQ(requantize(acc, m), want) << acc << " * " << real;
      ASSERT_EQ(detail::requantize_fast(acc, m.multiplier, n), want) << acc << " * " << real;
    }
  }
}

TEST(HtpOutputStage, EveryRequantPathMatchesDefinition) {
  // The int64 fast form (one plane, |acc| < 2^31), the split form (|acc| < 2^47) and the 128-bit
  // form, on the same accumulators: all equal requantize_output.
  Rng rng(4);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t rows = rng.uniform(1, 40), channels = rng.uniform(1, 37);
    const int planes = static_cast<int>(rng.uniform(1, 4));
    const bool row_terms = rng.coin();
    std::vector<std::vector<int32_t>> raw(static_cast<size_t>(planes));
    std::vector<const int32_t*> raws;
    std::vector<int64_t> coef;
    for (int k = 0; k < planes; ++k) {
      for (int64_t i = 0; i < rows * channels; ++i) {
        raw[k].push_back(static_cast<int32_t>(rng.uniform(-(1 << 20), 1 << 20)));
      }
      raws.push_back(raw[k].data());
      coef.push_back(planes == 1 ? 1 : int64_t{1} << (8 * k));
    }
    std::vector<int64_t> row_term, col_coef;
    for (int64_t r = 0; r < rows; ++r) row_term.push_back(rng.uniform(-50000, 50000));
    for (int64_t c = 0; c < channels; ++c) col_coef.push_back(rng.uniform(-300, 300));
    detail::OutputStage st;
    std::vector<double> real;
    for (int64_t c = 0; c < channels; ++c) {
      st.c0.push_back(rng.uniform(-(1 << 24), 1 << 24));
      real.push_back(std::ldexp(rng.real(0.5, 1), static_cast<int>(rng.uniform(-30, -8))));
    }
    if (rng.coin(0.2)) real[0] = 0.25;  // dyadic: exact ties
    const DType od = rng.coin() ? DType::kU8 : DType::kI16;
    Encoding out = make_encoding(od, 1.0f, od == DType::kU8 ? 128 : -7);
    st.set_output(real, out);
    std::vector<int64_t> want(static_cast<size_t>(rows * channels));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < channels; ++c) {
        int64_t acc = st.c0[c];
        for (int k = 0; k < planes; ++k) acc += coef[k] * raws[k][r * channels + c];
        if (row_terms && planes > 1) acc += row_term[r] * col_coef[c];
        want[r * channels + c] =
            requantize_output(acc, st.m[c], out.zero_point(), out.qmin, out.qmax);
      }
    }
    for (int path = 0; path < 3; ++path) {
      st.max_abs_acc = path == 2 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << 46);
      st.fast = path == 0 && planes == 1;
      st.finish();
      auto ob = buffer(want.size(), od);
      const bool terms = row_terms && planes > 1;
      st.run(raws, coef, rows, channels, channels, terms ? row_term.data() : nullptr,
             terms ? col_coef.data() : nullptr, ob.data(), 2);
      ASSERT_EQ(from_bytes(ob, od), want) << "path " << path << " planes " << planes;
    }
  }
}

TEST(HtpQuantize, BitIdenticalToPortableKernel) {
  Rng rng(2);
  for (DType dtype : {DType::kU8, DType::kI8, DType::kU16, DType::kI16, DType::kI32}) {
    for (int trial = 0; trial < 20; ++trial) {
      auto [lo, hi] = storage(dtype);
      const float scale = static_cast<float>(std::exp(rng.real(-12, 3)));
      const int32_t zp = static_cast<int32_t>(dtype == DType::kI32 ? rng.uniform(-1000, 1000)
                                                                   : rng.zero_point(lo, hi));
      std::vector<float> x;
      for (int i = 0; i < 2000; ++i) {
        x.push_back(static_cast<float>(rng.real(-1, 1) * scale * (hi - lo) * 0.7));
        // Exact ties (k + 0.5) * scale.
        x.push_back(static_cast<float>((rng.uniform(-300, 300) + 0.5) * scale));
      }
      for (float v :
           {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
            -std::numeric_limits<float>::infinity(), std::nanf(""), 3e38f, -3e38f, 1e-45f}) {
        x.push_back(v);
      }
      Encoding enc = make_encoding(dtype, scale, zp);
      std::vector<int64_t> shape = {static_cast<int64_t>(x.size())};
      auto out = buffer(x.size(), dtype);
      ASSERT_TRUE(quantize(x.data(), out.data(), shape, enc, 2).ok());
      const auto ours = from_bytes(out, dtype);
      const auto ref = portable_quantize(x, scale, zp, lo, hi, dtype);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(ours[i], ref[i]) << "x=" << x[i] << " scale=" << scale << " zp=" << zp;
        ASSERT_EQ(quantize_value(x[i], scale, zp, lo, hi), ref[i]);
      }
    }
  }
}

TEST(HtpDequantize, PerTensorMatchesDequantizeValue) {
  Rng rng(4);
  for (DType dtype : {DType::kU8, DType::kI8, DType::kU16, DType::kI16, DType::kI32}) {
    for (int64_t n : {1, 15, 16, 64, 65, 1000, 70001}) {
      auto [lo, hi] = storage(dtype);
      const float scale = static_cast<float>(std::exp(rng.real(-12, 3)));
      const int32_t zp = static_cast<int32_t>(dtype == DType::kI32 ? rng.uniform(-1000, 1000)
                                                                   : rng.zero_point(lo, hi));
      auto codes = rng.codes(static_cast<size_t>(n), dtype == DType::kI32 ? -1000000 : lo,
                             dtype == DType::kI32 ? 1000000 : hi);
      auto in = to_bytes(codes, dtype);
      std::vector<float> out(static_cast<size_t>(n));
      std::vector<int64_t> shape = {n};
      ASSERT_TRUE(dequantize(in.data(), out.data(), shape, make_encoding(dtype, scale, zp), 2).ok());
      for (size_t i = 0; i < codes.size(); ++i) {
        ASSERT_EQ(out[i], dequantize_value(codes[i], scale, zp)) << dtype_name(dtype) << " " << i;
      }
    }
  }
}

TEST(HtpQuantize, PerAxisAndDequantize) {
  // shape [2, 3, 2], axis 1: three channels.
  Encoding enc = make_per_axis_encoding(DType::kI8, {0.5f, 1.0f, 2.0f}, {0, 1, -1}, 1, -128, 127);
  std::vector<float> x = {1, 1, 1, 1, 1, 1, -3, 3, -3, 3, -3, 3};
  std::vector<int64_t> shape = {2, 3, 2};
  auto out = buffer(x.size(), DType::kI8);
  ASSERT_TRUE(quantize(x.data(), out.data(), shape, enc).ok());
  // 1/0.5 = 2; 1/1 + 1 = 2; 1/2 = 0.5 -> 0 (half to even) - 1 = -1; -3/0.5 = -6; ...
  EXPECT_EQ(from_bytes(out, DType::kI8),
            (std::vector<int64_t>{2, 2, 2, 2, -1, -1, -6, 6, -2, 4, -3, 1}));
  std::vector<float> back(x.size());
  ASSERT_TRUE(dequantize(out.data(), back.data(), shape, enc).ok());
  EXPECT_EQ(back, (std::vector<float>{1, 1, 1, 1, 0, 0, -3, 3, -3, 3, -4, 4}));
  // Wrong number of scales for the axis.
  std::vector<int64_t> bad_shape = {2, 4, 2};
  Status s = quantize(x.data(), out.data(), bad_shape, enc);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("3 scales, expected 4"), std::string::npos) << s.message();
}

TEST(HtpRequantize, TableAndComputedMatchDefinition) {
  Rng rng(3);
  for (DType din : {DType::kU8, DType::kI8, DType::kU16, DType::kI16, DType::kI32}) {
    for (DType dout : {DType::kU8, DType::kI8, DType::kU16, DType::kI16, DType::kI32}) {
      auto [lo, hi] = storage(din);
      auto [olo, ohi] = storage(dout);
      const int64_t zin = din == DType::kI32 ? rng.uniform(-5000, 5000) : rng.zero_point(lo, hi);
      const int64_t zout = dout == DType::kI32 ? 7 : rng.zero_point(olo, ohi);
      Encoding in =
          make_encoding(din, static_cast<float>(rng.real(1e-3, 1)), static_cast<int32_t>(zin));
      Encoding out =
          make_encoding(dout, static_cast<float>(rng.real(1e-3, 1)), static_cast<int32_t>(zout));
      if (rng.coin()) out.qmin = std::max(out.qmin, static_cast<int64_t>(zout));  // relu range
      auto conv = Requantize::prepare(in, out, 2);
      ASSERT_TRUE(conv.ok()) << conv.status().message();
      auto codes =
          rng.codes(70001, din == DType::kI32 ? -1000000 : lo, din == DType::kI32 ? 1000000 : hi);
      auto ib = to_bytes(codes, din);
      auto ob = buffer(codes.size(), dout);
      ASSERT_TRUE(conv->run(ib.data(), ob.data(), static_cast<int64_t>(codes.size())).ok());
      const auto got = from_bytes(ob, dout);
      const FixedPointMultiplier m =
          quantize_multiplier(static_cast<double>(in.scale()) / out.scale());
      for (size_t i = 0; i < codes.size(); ++i) {
        const int64_t want =
            requantize_output(codes[i] - zin, m, out.zero_point(), out.qmin, out.qmax);
        ASSERT_EQ(got[i], want) << dtype_name(din) << "->" << dtype_name(dout);
        // Within one step of the float conversion.
        const double real = (codes[i] - zin) * static_cast<double>(in.scale());
        ASSERT_LE(std::abs(got[i] - fake_quant(real, out)), 1);
      }
    }
  }
}

TEST(HtpEncoding, ValidationErrors) {
  auto expect_error = [](const Encoding& e, const char* needle) {
    Status s = validate_encoding(e, "t");
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  expect_error(make_encoding(DType::kF32, 1.0f, 0, 0, 1), "dtype f32");
  expect_error(make_encoding(DType::kU8, 1.0f, 0, 0, 255, 16), "bitwidth 16");
  expect_error(make_encoding(DType::kI8, 1.0f, 0, -9, 7, 4), "range [-9, 7]");
  expect_error(make_encoding(DType::kU8, 1.0f, 0, 10, 5), "range [10, 5]");
  expect_error(make_encoding(DType::kU8, 0.0f, 0), "scale[0] = 0");
  expect_error(make_encoding(DType::kU8, std::nanf(""), 0), "is not positive");
  expect_error(make_encoding(DType::kU8, 1.0f, 300), "zero point[0] = 300");
  Encoding e = make_per_axis_encoding(DType::kI8, {1.0f, 2.0f}, {0}, 0, -128, 127);
  expect_error(e, "2 scales and 1 offsets");
  Encoding t = make_encoding(DType::kU8, 1.0f, 0);
  t.scales.push_back(2.0f);
  t.offsets.push_back(0);
  expect_error(t, "per tensor with 2 scales");
  EXPECT_TRUE(validate_encoding(make_encoding(DType::kI8, 0.1f, 0, -8, 7, 4), "t").ok());
  EXPECT_TRUE(validate_encoding(make_encoding(DType::kU16, 0.1f, 40000), "t").ok());
  EXPECT_EQ(make_encoding(DType::kU8, 0.5f, 3).offsets[0], -3);
  EXPECT_EQ(make_encoding(DType::kU8, 0.5f, 3).zero_point(), 3);
}

TEST(HtpFp16, KnownValues) {
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);         // tie between 0 and 2^-24: even
  EXPECT_EQ(float_to_half(0x1.8p-24f), 0x0002);       // 1.5 units: tie to even 2
  EXPECT_EQ(float_to_half(0x1.000002p-25f), 0x0001);  // just above the tie
  EXPECT_EQ(float_to_half(0x1.ff8p-15f), 0x03ff);     // largest subnormal
  EXPECT_EQ(float_to_half(0x1.ffcp-15f), 0x0400);     // 1023.5 units: even, the smallest normal
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);         // smallest normal
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);  // tie: even (down)
  EXPECT_EQ(float_to_half(1.0f + 0x3p-11f), 0x3c02);  // tie: even (up)
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_half(std::bit_cast<float>(0x7fc00000u)), 0x7e00);
  EXPECT_EQ(float_to_half(std::bit_cast<float>(0xff800001u)), 0xfe00);  // signalling: quieted
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x03ff), 0x3ffp-24f);
  EXPECT_EQ(half_to_float(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
  EXPECT_TRUE(std::isinf(half_to_float(0xfc00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e01)));
  // Every half round-trips.
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), h) << h;
  }
}

TEST(HtpFp16, RoundToHalfMatchesScalarEverywhere) {
  // A stride through every float bit pattern: the vcvtps2ph path (when the CPU has F16C) and the
  // scalar conversion agree, NaNs stay NaN with their sign.
  std::vector<float> v;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4093) {
    v.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  }
  std::vector<float> r = v;
  round_to_half(r.data(), r.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float want = half_to_float(float_to_half(v[i]));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(r[i]));
      ASSERT_EQ(std::signbit(r[i]), std::signbit(v[i]));
      ASSERT_EQ(std::bit_cast<uint32_t>(r[i]), std::bit_cast<uint32_t>(want)) << i;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(r[i]), std::bit_cast<uint32_t>(want)) << v[i];
  }
}

}  // namespace
}  // namespace kiln::htp::testing
