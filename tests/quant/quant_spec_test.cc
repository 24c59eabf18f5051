// Configurations, parameters from ranges, and quantize_per_tensor's rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/quant/observer.h"
#include "kiln/quant/quant_spec.h"

namespace kiln::quant {
namespace {

TEST(QuantConfig, QualcommConfigurations) {
  auto c = make_config("8a8w");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->activation.dtype, DType::kU8);
  EXPECT_EQ(c->activation.quant_min, 0);
  EXPECT_EQ(c->activation.quant_max, 255);
  EXPECT_EQ(c->activation.qscheme, QScheme::kPerTensorAffine);
  EXPECT_EQ(c->activation.observer, ObserverKind::kMovingAverageMinMax);
  EXPECT_EQ(c->weight.dtype, DType::kI8);
  EXPECT_EQ(c->weight.quant_min, -127);
  EXPECT_EQ(c->weight.quant_max, 127);
  EXPECT_EQ(c->weight.qscheme, QScheme::kPerChannelSymmetric);
  EXPECT_EQ(c->bias.dtype, DType::kI32);

  auto a16w4 = make_config("16a4w");
  ASSERT_TRUE(a16w4.ok());
  EXPECT_EQ(a16w4->activation.dtype, DType::kU16);
  EXPECT_EQ(a16w4->activation.quant_max, 65535);
  EXPECT_EQ(a16w4->weight.dtype, DType::kI8);  // 4-bit weights in int8 storage
  EXPECT_EQ(a16w4->weight.quant_min, -7);
  EXPECT_EQ(a16w4->weight.quant_max, 7);
  EXPECT_EQ(a16w4->weight.bits(), 4);

  auto a16w16 = make_config("16a16w", /*per_tensor=*/true);
  ASSERT_TRUE(a16w16.ok());
  EXPECT_EQ(a16w16->weight.dtype, DType::kI16);
  EXPECT_EQ(a16w16->weight.quant_min, -32767);
  EXPECT_EQ(a16w16->weight.qscheme, QScheme::kPerTensorSymmetric);
  EXPECT_EQ(make_config("16a8w")->weight.quant_max, 127);
  auto full = make_config("16a4w", false, std::nullopt, /*full_range_weights=*/true);
  EXPECT_EQ(full->weight.quant_min, -8);
  EXPECT_EQ(full->weight.quant_max, 7);
  EXPECT_EQ(full->weight.bits(), 4);
  EXPECT_EQ(make_config("8a8w", false, ObserverKind::kHistogram)->activation.observer, ObserverKind::kHistogram);
}

TEST(QuantConfig, UnknownNameListsKnownOnes) {
  auto c = make_config("4a4w");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "unknown quantization config '4a4w' (known: 8a8w, 16a4w, 16a8w, 16a16w)");
}

TEST(QParams, AffineFromRange) {
  QuantSpec u8 = make_config("8a8w")->activation;
  // [-1, 3]: scale 4/255, zero point 0 - round(-1 / scale) = round(63.75) = 64.
  QParams p = qparams_for_range(-1.0f, 3.0f, u8);
  EXPECT_EQ(p.scales[0], static_cast<double>(4.0f / 255.0f));
  EXPECT_EQ(p.zero_points[0], 64);
  // The range always includes 0: [2, 5] is quantized as [0, 5].
  p = qparams_for_range(2.0f, 5.0f, u8);
  EXPECT_EQ(p.scales[0], static_cast<double>(5.0f / 255.0f));
  EXPECT_EQ(p.zero_points[0], 0);
  // An all-zero tensor: scale float32 epsilon, zero point at quant_min.
  p = qparams_for_range(0.0f, 0.0f, u8);
  EXPECT_EQ(p.scales[0], static_cast<double>(std::numeric_limits<float>::epsilon()));
  EXPECT_EQ(p.zero_points[0], 0);
  // All negative: the zero point sits at quant_max.
  p = qparams_for_range(-2.0f, -1.0f, u8);
  EXPECT_EQ(p.zero_points[0], 255);
}

TEST(QParams, SymmetricFromRange) {
  QuantSpec w = make_config("8a8w", true)->weight;
  QParams p = qparams_for_range(-2.0f, 1.0f, w);
  EXPECT_EQ(p.scales[0], static_cast<double>(2.0f / 127.0f));
  EXPECT_EQ(p.zero_points[0], 0);
  QuantSpec w4 = make_config("16a4w", true)->weight;
  p = qparams_for_range(-1.0f, 3.5f, w4);
  EXPECT_EQ(p.scales[0], 0.5);
  // [-8, 7]: torch divides the range by (quant_max - quant_min) / 2 = 7.5.
  QuantSpec w4full = make_config("16a4w", true, std::nullopt, true)->weight;
  p = qparams_for_range(-1.0f, 3.75f, w4full);
  EXPECT_EQ(p.scales[0], 0.5);
  EXPECT_EQ(quantize_value(-3.75f, 0.5, 0, -8, 7), -8);
}

TEST(QParams, FixedRanges) {
  QuantSpec s = make_config("8a8w")->activation;
  s.qscheme = QScheme::kFixed;
  s.fixed_min = 0;
  s.fixed_max = 1;
  QParams p = qparams_for_range(-5, 5, s);
  EXPECT_EQ(p.scales[0], 1.0 / 256);
  EXPECT_EQ(p.zero_points[0], 0);
  s.fixed_min = -1;  // tanh
  p = qparams_for_range(0, 0, s);
  EXPECT_EQ(p.scales[0], 1.0 / 128);
  EXPECT_EQ(p.zero_points[0], 128);
  QuantSpec s16 = make_config("16a8w")->activation;
  s16.qscheme = QScheme::kFixed;
  s16.fixed_min = 0;
  s16.fixed_max = 1;
  EXPECT_EQ(qparams_for_range(0, 0, s16).scales[0], 1.0 / 65536);
}

TEST(QuantizeValue, RoundsHalfToEven) {
  EXPECT_EQ(quantize_value(0.5f, 1.0, 0, -128, 127), 0);
  EXPECT_EQ(quantize_value(1.5f, 1.0, 0, -128, 127), 2);
  EXPECT_EQ(quantize_value(2.5f, 1.0, 0, -128, 127), 2);
  EXPECT_EQ(quantize_value(-0.5f, 1.0, 0, -128, 127), 0);
  EXPECT_EQ(quantize_value(-1.5f, 1.0, 0, -128, 127), -2);
  EXPECT_EQ(quantize_value(-2.5f, 1.0, 0, -128, 127), -2);
  EXPECT_EQ(quantize_value(0.25f, 0.5, 10, 0, 255), 10);  // 0.5 rounds to 0, plus the zero point
  EXPECT_EQ(quantize_value(0.75f, 0.5, 10, 0, 255), 12);  // 1.5 rounds to 2
}

TEST(QuantizeValue, ClampsAndKeepsNanDefined) {
  EXPECT_EQ(quantize_value(1000.0f, 1.0, 0, -7, 7), 7);
  EXPECT_EQ(quantize_value(-1000.0f, 1.0, 0, -7, 7), -7);
  EXPECT_EQ(quantize_value(-1000.0f, 1.0, 0, -8, 7), -8);
  EXPECT_EQ(quantize_value(std::numeric_limits<float>::infinity(), 0.1, 3, 0, 255), 255);
  EXPECT_EQ(quantize_value(std::nanf(""), 0.1, 3, 0, 255), 0);  // as the kernel (torch on x86)
  EXPECT_EQ(quantize_value(70000.0f, 1.0, 0, 0, 65535), 65535);
}

TEST(WeightQParams, PerChannelSymmetricRoundsHalfToEven) {
  // Rows: max |w| 2 and 0.5; 1 * 127 / 2 = 63.5 rounds to 64, 0.25 * 127 / 0.5 = 63.5 to 64.
  Tensor w(DType::kF32, {2, 2});
  float v[] = {1.0f, -2.0f, 0.5f, 0.25f};
  for (int i = 0; i < 4; ++i) w.set_scalar_at(i, v[i]);
  QuantSpec spec = make_config("8a8w")->weight;
  spec.ch_axis = 0;
  QParams p = weight_qparams(w, spec);
  ASSERT_EQ(p.scales.size(), 2u);
  EXPECT_EQ(p.axis, 0);
  EXPECT_EQ(p.scales[0], static_cast<double>(2.0f / 127.0f));
  EXPECT_EQ(p.scales[1], static_cast<double>(0.5f / 127.0f));
  Tensor q = quantize_tensor(w, p, DType::kI8, -127, 127);
  EXPECT_EQ(q.dtype(), DType::kI8);
  EXPECT_EQ(q.scalar_at(0), 64);
  EXPECT_EQ(q.scalar_at(1), -127);
  EXPECT_EQ(q.scalar_at(2), 127);
  EXPECT_EQ(q.scalar_at(3), 64);
  // Axis 1 (transposed conv weights): columns max |w| 1 and 2.
  spec.ch_axis = 1;
  p = weight_qparams(w, spec);
  EXPECT_EQ(p.scales[0], static_cast<double>(1.0f / 127.0f));
  EXPECT_EQ(p.scales[1], static_cast<double>(2.0f / 127.0f));
}

}  // namespace
}  // namespace kiln::quant
