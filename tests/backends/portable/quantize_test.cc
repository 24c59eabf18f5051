// quantize/dequantize kernels: PyTorch's arithmetic bit for bit (torch 1.13, ATen), on
// hand-computed edge cases and on a golden file that torch wrote
// (tests/models/make_quant_golden.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "backends/portable/kernel_test_util.h"

namespace kiln::portable::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One f32 value per element (doubles are rounded to f32 once, as a float literal would be).
Tensor f32(std::vector<double> v) { return make(DType::kF32, {static_cast<int64_t>(v.size())}, v); }

Call quantize(const Tensor& x, double scale, int64_t zp, int64_t qmin, int64_t qmax, DType dtype) {
  Call c("quantize_per_tensor");
  c.in(x)
      .attr("scale", scale)
      .attr("zero_point", zp)
      .attr("quant_min", qmin)
      .attr("quant_max", qmax)
      .attr("dtype", dtype);
  return c;
}

Call dequantize(const Tensor& q, double scale, int64_t zp, int64_t qmin, int64_t qmax,
                DType dtype) {
  Call c("dequantize_per_tensor");
  c.in(q)
      .attr("scale", scale)
      .attr("zero_point", zp)
      .attr("quant_min", qmin)
      .attr("quant_max", qmax)
      .attr("dtype", dtype);
  return c;
}

Call per_channel(const char* op, const Tensor& x, const Tensor& scales, const Tensor& zps,
                 int64_t axis, int64_t qmin, int64_t qmax, DType dtype) {
  Call c(op);
  c.in(x)
      .in(scales)
      .in(zps)
      .attr("axis", axis)
      .attr("quant_min", qmin)
      .attr("quant_max", qmax)
      .attr("dtype", dtype);
  return c;
}

using V = std::vector<double>;

TEST(Quantize, HalvesRoundToEvenAtScaleOne) {
  Tensor x = f32({0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, -3.5, 0.49999997, 2.5000002});
  EXPECT_EQ(values(quantize(x, 1.0, 0, -128, 127, DType::kI8).run()),
            (V{0, 2, 2, 4, 0, -2, -2, -4, 0, 3}));
  // The zero point is added after rounding: 0.5 + 10 is 10, not 11.
  EXPECT_EQ(values(quantize(x, 1.0, 10, 0, 255, DType::kU8).run()),
            (V{10, 12, 12, 14, 10, 8, 8, 6, 10, 13}));
}

TEST(Quantize, HalvesAtScaleOneTenth) {
  // float(0.1) = 0.100000001490116; 1.0f / float(0.1) = 10.0f exactly, so these f32 inputs give
  // products 0.5, 1.5, ... exactly. 0.35f is 0.34999999404, which divided by 0.1 exactly is
  // 3.4999999 (3), but torch multiplies in f32: 0.35f * 10.0f rounds to 3.5, then to even 4.
  Tensor x = f32({0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, -0.05, -0.25, -0.35});
  EXPECT_EQ(values(quantize(x, 0.1, 0, -128, 127, DType::kI8).run()),
            (V{0, 2, 2, 4, 4, 6, 6, 0, -2, -4}));
}

TEST(Quantize, HalvesAtScaleOneThird) {
  // 1.0f / float(1/3) = 1.0f / 0.333333343f = 2.99999991 rounds to 3.0f: products 0.5, 1.5, 2.5.
  Tensor x = f32({1.0 / 6, 0.5, 2.5 / 3, -1.0 / 6, -0.5, -2.5 / 3});
  EXPECT_EQ(values(quantize(x, 1.0 / 3, 0, -128, 127, DType::kI8).run()), (V{0, 2, 2, 0, -2, -2}));
}

TEST(Quantize, InverseScaleIsOneOverTheF32Scale) {
  // torch 1.13: 1.0f / float(0.001) = 999.99994f, and 0.0015f * 999.99994f = 1.4999999 -> 1,
  // 0.0045f -> 4.4999995 -> 4, 0.0055f -> 5.4999995 -> 5. float(1.0 / 0.001) would be 1000.0f
  // and give 1.5, 4.5, 5.5 -> 2, 4, 6 (quantized_decomposed in torch 2 computes it that way).
  Tensor x = f32({0.0015, 0.0045, 0.0055});
  EXPECT_EQ(values(quantize(x, 0.001, 0, -128, 127, DType::kI8).run()), (V{1, 4, 5}));
  EXPECT_EQ(values(quantize(f32({0.0035}), 0.007, 0, -128, 127, DType::kI8).run()), (V{0}));
}

TEST(Quantize, ClampsToTheQuantRange) {
  Tensor x = f32({100, -100, 63.5, 63.75, -64.25});
  // scale 0.5, zero point 128: 200 + 128 -> 255, -200 + 128 -> 0, 127 + 128 = 255, 127.5 -> 128
  // -> 256 -> 255, -128.5 -> -128 (even) + 128 = 0.
  EXPECT_EQ(values(quantize(x, 0.5, 128, 0, 255, DType::kU8).run()), (V{255, 0, 255, 255, 0}));
  EXPECT_EQ(values(quantize(x, 0.5, 0, -127, 127, DType::kI8).run()),
            (V{127, -127, 127, 127, -127}));
}

TEST(Quantize, FourBitRangesInInt8Storage) {
  Tensor x = f32({-8, -7.5, -7.4, -8.4, -9, 6.5, 7.4, 7.6, 100});
  Tensor q7 = quantize(x, 1.0, 0, -7, 7, DType::kI8).run();
  EXPECT_EQ(q7.dtype(), DType::kI8);
  EXPECT_EQ(values(q7), (V{-7, -7, -7, -7, -7, 6, 7, 7, 7}));
  EXPECT_EQ(values(quantize(x, 1.0, 0, -8, 7, DType::kI8).run()),
            (V{-8, -8, -7, -8, -8, 6, 7, 7, 7}));
  // Dequantize does not clamp: it reads what storage holds.
  Tensor q = make(DType::kI8, {3}, {-8, 0, 7});
  EXPECT_EQ(values(dequantize(q, 0.25, 0, -8, 7, DType::kI8).run()), (V{-2, 0, 1.75}));
}

TEST(Quantize, Uint16FullRange) {
  Tensor x = f32({32767, 32767.5, 40000, -32768, -40000, 0.5, 1.5, -0.5});
  Tensor q = quantize(x, 1.0, 32768, 0, 65535, DType::kU16).run();
  EXPECT_EQ(q.dtype(), DType::kU16);
  // 32767.5 -> 32768 (even) + 32768 = 65536 -> 65535; -0.5 -> 0 + 32768.
  EXPECT_EQ(values(q), (V{65535, 65535, 65535, 0, 0, 32768, 32770, 32768}));
  Tensor d =
      dequantize(make(DType::kU16, {3}, {0, 65535, 32768}), 0.25, 32768, 0, 65535, DType::kU16)
          .run();
  EXPECT_EQ(values(d), (V{-8192, 8191.75, 0}));
}

TEST(Quantize, Int16) {
  Tensor x = f32({32766.5, 32767.5, -32768.5, -32769.5, 1.5});
  EXPECT_EQ(values(quantize(x, 1.0, 0, -32768, 32767, DType::kI16).run()),
            (V{32766, 32767, -32768, -32768, 2}));
  EXPECT_EQ(values(quantize(x, 1.0, 0, -32767, 32767, DType::kI16).run()),
            (V{32766, 32767, -32767, -32767, 2}));
}

TEST(Quantize, Int32AddsTheZeroPointInF32) {
  // torch adds the zero point to the rounded f32 value in f32: 16777218 + 1 = 16777219 is not an
  // f32 and rounds to even, 16777220.
  Tensor x = f32({16777218, 3e9, -3e9, 2.5});
  Tensor q = quantize(x, 1.0, 1, std::numeric_limits<int32_t>::min(),
                      std::numeric_limits<int32_t>::max(), DType::kI32)
                 .run();
  EXPECT_EQ(q.dtype(), DType::kI32);
  EXPECT_EQ(values(q), (V{16777220, 2147483647.0, -2147483648.0, 3}));
  // Dequantize subtracts in integers first: 2147483647 - (-1) = 2^31 exactly.
  Tensor d = dequantize(make(DType::kI32, {2}, {2147483647.0, -5}), 1.0, -1,
                        std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(),
                        DType::kI32)
                 .run();
  EXPECT_EQ(values(d), (V{2147483648.0, -4}));
}

TEST(Quantize, NanAndInfinityAreDefined) {
  // torch casts these to an integer with undefined behaviour (quant_min on x86); kiln gives NaN
  // quant_min (as torch on x86 and onnxruntime), infinities and huge values saturate.
  Tensor x = f32({kNaN, kInf, -kInf, 1e30, -1e30, 3.4e38});
  EXPECT_EQ(values(quantize(x, 0.1, 3, -128, 127, DType::kI8).run()),
            (V{-128, 127, -128, 127, -128, 127}));
  EXPECT_EQ(values(quantize(x, 1e-30, 128, 0, 255, DType::kU8).run()), (V{0, 255, 0, 255, 0, 255}));
  EXPECT_EQ(values(quantize(x, 1.0, 0, -7, 7, DType::kI8).run()), (V{-7, 7, -7, 7, -7, 7}));
  Tensor q32 = quantize(x, 1.0, 0, std::numeric_limits<int32_t>::min(),
                        std::numeric_limits<int32_t>::max(), DType::kI32)
                   .run();
  EXPECT_EQ(values(q32), (V{-2147483648.0, 2147483647.0, -2147483648.0, 2147483647.0, -2147483648.0,
                            2147483647.0}));
  Tensor q64 = quantize(x, 1.0, 0, std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), DType::kI64)
                   .run();
  EXPECT_EQ(q64.data_as<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(q64.data_as<int64_t>()[1], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(q64.data_as<int64_t>()[5], std::numeric_limits<int64_t>::max());
  // A scale below the smallest f32 makes 1.0f / float(scale) infinite: still no undefined cast.
  EXPECT_EQ(values(quantize(f32({0, 1, -1}), 1e-50, 0, -128, 127, DType::kI8).run()),
            (V{-128, 127, -128}));
}

TEST(Quantize, PerChannelAxis0) {
  // [2, 3], channel 0 scale 0.5 zero point 0, channel 1 scale 0.25 zero point 1, range [-8, 7].
  Tensor w = make(DType::kF32, {2, 3}, {0.25, 0.75, -4.5, 0.125, -0.375, 2});
  Tensor s = make(DType::kF32, {2}, {0.5, 0.25}), z = make(DType::kI64, {2}, {0, 1});
  Tensor q = per_channel("quantize_per_channel", w, s, z, 0, -8, 7, DType::kI8).run();
  // 0.5 -> 0, 1.5 -> 2, -9 -> -8; 0.5 -> 0 + 1, -1.5 -> -2 + 1, 8 + 1 -> 7.
  EXPECT_EQ(values(q), (V{0, 2, -8, 1, -1, 7}));
  Tensor d = per_channel("dequantize_per_channel", q, s, z, 0, -8, 7, DType::kI8).run();
  EXPECT_EQ(values(d), (V{0, 1, -4, 0, -0.5, 1.5}));
}

TEST(Quantize, PerChannelAxis1) {
  // [2, 2, 2] on axis 1: channel 0 scale 1 zero point 10, channel 1 scale 0.5 zero point 200.
  Tensor x = make(DType::kF32, {2, 2, 2}, {0.5, 1.5, 0.25, 0.75, -10.5, 300, -100, 30});
  Tensor s = make(DType::kF64, {2}, {1.0, 0.5}), z = make(DType::kI32, {2}, {10, 200});
  Tensor q = per_channel("quantize_per_channel", x, s, z, 1, 0, 255, DType::kU8).run();
  EXPECT_EQ(q.dtype(), DType::kU8);
  EXPECT_EQ(values(q), (V{10, 12, 200, 202, 0, 255, 0, 255}));
  Tensor d = per_channel("dequantize_per_channel", q, s, z, -2, 0, 255, DType::kU8).run();
  EXPECT_EQ(values(d), (V{0, 2, 0, 1, -10, 245, -100, 27.5}));
}

TEST(Quantize, DequantizeOutDtype) {
  Tensor q = make(DType::kI8, {2}, {-128, 127});
  Tensor d = dequantize(q, 0.5, -3, -128, 127, DType::kI8).attr("out_dtype", DType::kF16).run();
  EXPECT_EQ(d.dtype(), DType::kF16);
  EXPECT_EQ(values(d), (V{-62.5, 65}));
}

TEST(Quantize, BadParametersAreErrors) {
  Tensor x = f32({1, 2});
  auto expect_error = [](Call c, const std::string& needle) {
    auto r = c.try_run();
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(quantize(x, 0.0, 0, -128, 127, DType::kI8), "scale 0 must be positive");
  expect_error(quantize(x, kNaN, 0, -128, 127, DType::kI8), "must be positive and finite");
  expect_error(quantize(x, 1.0, 0, -129, 127, DType::kI8),
               "quant range [-129, 127] does not fit i8");
  expect_error(quantize(x, 1.0, 0, 0, 65536, DType::kU16), "does not fit u16");
  expect_error(quantize(x, 1.0, 0, 5, 4, DType::kI8), "quant_min 5 > quant_max 4");
  expect_error(quantize(x, 1.0, 300, 0, 255, DType::kU8),
               "zero point 300 is outside the range of u8");
  expect_error(quantize(x, 1.0, 0, 0, 1, DType::kF32), "quantized dtype f32");
  expect_error(quantize(make(DType::kI8, {1}, {1}), 1.0, 0, -128, 127, DType::kI8),
               "input dtype i8 is not a float");
  expect_error(dequantize(make(DType::kU8, {1}, {1}), 1.0, 0, -128, 127, DType::kI8),
               "input dtype u8 differs");
  Tensor w = make(DType::kF32, {2, 3}, {0, 0, 0, 0, 0, 0});
  expect_error(per_channel("quantize_per_channel", w, f32({1, 1}), make(DType::kI64, {2}, {0, 0}),
                           1, -128, 127, DType::kI8),
               "2 scales and 2 zero points for 3 channels");
  expect_error(per_channel("quantize_per_channel", w, f32({1, 1}), make(DType::kI64, {2}, {0, 0}),
                           2, -128, 127, DType::kI8),
               "dim 2 is out of range");
  expect_error(per_channel("dequantize_per_channel", make(DType::kI8, {2}, {0, 0}), f32({1, -1}),
                           make(DType::kI64, {2}, {0, 0}), 0, -128, 127, DType::kI8),
               "scale -1 must be positive");
}

// ---- The golden file written by torch.

struct GoldenCase {
  std::string name, op, dtype;
  int64_t qmin = 0, qmax = 0, axis = -1;
  std::vector<int64_t> shape;
  std::vector<double> scales;
  std::vector<int64_t> zps;
  std::vector<std::string> in, out;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  return out;
}

std::vector<std::string> words_after(const std::string& line, const std::string& tag) {
  std::vector<std::string> w;
  std::stringstream ss(line);
  std::string first;
  ss >> first;
  EXPECT_EQ(first, tag);
  for (std::string x; ss >> x;) w.push_back(x);
  return w;
}

std::vector<GoldenCase> read_golden() {
  std::ifstream f(std::string(KILN_TEST_DATA_DIR) + "/quant/torch_quantize.txt");
  EXPECT_TRUE(f.good()) << "tests/data/quant/torch_quantize.txt is missing";
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    GoldenCase c;
    std::string tag, shape, scales, zps;
    ss >> tag >> c.name >> c.op >> c.dtype >> c.qmin >> c.qmax >> c.axis >> shape >> scales >> zps;
    EXPECT_EQ(tag, "case");
    for (const auto& d : split(shape, ',')) c.shape.push_back(std::stoll(d));
    for (const auto& s : split(scales, ',')) c.scales.push_back(std::strtod(s.c_str(), nullptr));
    for (const auto& z : split(zps, ',')) c.zps.push_back(std::stoll(z));
    std::string in, out;
    std::getline(f, in);
    std::getline(f, out);
    c.in = words_after(in, "in");
    c.out = words_after(out, "out");
    cases.push_back(std::move(c));
  }
  return cases;
}

DType dtype_of(const std::string& s) {
  if (s == "u8") return DType::kU8;
  if (s == "i8") return DType::kI8;
  if (s == "u16") return DType::kU16;
  if (s == "i16") return DType::kI16;
  return DType::kI32;
}

TEST(Quantize, MatchesTorchBitForBit) {
  auto cases = read_golden();
  ASSERT_GE(cases.size(), 40u);
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(c.name);
    const bool quant = c.op.rfind("quantize", 0) == 0;
    const DType qdt = dtype_of(c.dtype);
    Tensor x(quant ? DType::kF32 : qdt, c.shape);
    ASSERT_EQ(static_cast<size_t>(x.numel()), c.in.size());
    ASSERT_EQ(c.in.size(), c.out.size());
    for (size_t i = 0; i < c.in.size(); ++i) {
      if (quant) {
        x.mutable_data_as<float>()[i] = std::strtof(c.in[i].c_str(), nullptr);
      } else {
        x.set_scalar_at(static_cast<int64_t>(i), static_cast<double>(std::stoll(c.in[i])));
      }
    }
    Call call(c.op);
    call.in(x);
    if (c.axis < 0) {
      call.attr("scale", c.scales[0]).attr("zero_point", c.zps[0]);
    } else {
      Tensor s(DType::kF64, {static_cast<int64_t>(c.scales.size())});
      Tensor z(DType::kI64, {static_cast<int64_t>(c.zps.size())});
      for (size_t i = 0; i < c.scales.size(); ++i) {
        s.mutable_data_as<double>()[i] = c.scales[i];
        z.mutable_data_as<int64_t>()[i] = c.zps[i];
      }
      call.in(s).in(z).attr("axis", c.axis);
    }
    call.attr("quant_min", c.qmin).attr("quant_max", c.qmax).attr("dtype", qdt);
    Tensor y = call.run();
    ASSERT_EQ(y.numel(), x.numel());
    int mismatches = 0;
    for (size_t i = 0; i < c.out.size(); ++i) {
      if (quant) {
        int64_t want = std::stoll(c.out[i]);
        auto got = static_cast<int64_t>(y.scalar_at(static_cast<int64_t>(i)));
        if (got != want && mismatches++ < 5) {
          ADD_FAILURE() << "element " << i << ": input " << c.in[i] << " gave " << got << ", torch "
                        << want;
        }
      } else {
        float want = std::strtof(c.out[i].c_str(), nullptr);
        float got = y.data_as<float>()[i];
        if (std::memcmp(&got, &want, sizeof(float)) != 0 && mismatches++ < 5) {
          ADD_FAILURE() << "element " << i << ": input " << c.in[i] << " gave " << got << ", torch "
                        << c.out[i];
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

}  // namespace
}  // namespace kiln::portable::testing
