// Observers: exact statistics on hand-computed inputs.
#include <gtest/gtest.h>

#include <random>

#include "kiln/quant/observer.h"

namespace kiln::quant {
namespace {

Tensor values(std::vector<float> v) {
  Tensor t(DType::kF32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.set_scalar_at(static_cast<int64_t>(i), v[i]);
  return t;
}

TEST(Observer, MinMaxKeepsTheWidestRange) {
  Observer o(ObserverKind::kMinMax);
  EXPECT_TRUE(o.empty());
  o.observe(values({0.0f, 1.0f}));
  o.observe(values({-1.0f, 0.5f}));
  o.observe(values({0.25f, 3.0f}));
  EXPECT_EQ(o.min(), -1.0f);
  EXPECT_EQ(o.max(), 3.0f);
  EXPECT_EQ(o.samples(), 3);
}

TEST(Observer, MovingAverageMovesOnePercent) {
  Observer o(ObserverKind::kMovingAverageMinMax);
  o.observe(values({0.0f, 1.0f}));  // the first sample sets the range
  EXPECT_EQ(o.min(), 0.0f);
  EXPECT_EQ(o.max(), 1.0f);
  o.observe(values({-1.0f, 3.0f}));
  EXPECT_FLOAT_EQ(o.min(), -0.01f);
  EXPECT_FLOAT_EQ(o.max(), 1.02f);
}

TEST(Observer, IgnoresNanAndInfinity) {
  Observer o(ObserverKind::kMinMax);
  o.observe(values({std::nanf(""), 2.0f, -std::numeric_limits<float>::infinity(), -1.0f}));
  EXPECT_EQ(o.min(), -1.0f);
  EXPECT_EQ(o.max(), 2.0f);
  Observer empty(ObserverKind::kMinMax);
  empty.observe(values({std::nanf("")}));
  EXPECT_TRUE(empty.empty());
}

TEST(Observer, IntegerInputsAreObservedAsValues) {
  Tensor t(DType::kI32, {3});
  t.set_scalar_at(0, -4);
  t.set_scalar_at(1, 9);
  t.set_scalar_at(2, 1);
  Observer o(ObserverKind::kMinMax);
  o.observe(t);
  EXPECT_EQ(o.min(), -4.0f);
  EXPECT_EQ(o.max(), 9.0f);
}

TEST(Observer, HistogramClipsARareOutlier) {
  // 1M values uniform in [0, 1] and one at 3: min/max spends two thirds of an 8-bit grid on the
  // outlier; the histogram's search clips it (error 4) for a finer grid (error 11 -> 1.3).
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> v(1000000);
  for (float& x : v) x = u(rng);
  v[500] = 3.0f;
  Observer hist(ObserverKind::kHistogram), minmax(ObserverKind::kMinMax);
  hist.observe(values(v));
  minmax.observe(values(v));
  auto [lo, hi] = hist.range_for(256);
  EXPECT_EQ(minmax.max(), 3.0f);
  EXPECT_GE(lo, 0.0f);
  EXPECT_LT(hi, 1.1f);
  EXPECT_GT(hi, 0.9f);
  QuantSpec u8 = make_config("8a8w")->activation;
  EXPECT_LT(hist.qparams(u8).scales[0], minmax.qparams(u8).scales[0] / 2.5);
  // Among 100k values a lone outlier at 100 costs more clipped (error 99^2) than kept: torch's
  // search keeps it.
  v.resize(100000);
  v[500] = 100.0f;
  Observer far(ObserverKind::kHistogram);
  far.observe(values(v));
  EXPECT_GT(far.range_for(256).second, 99.0f);
}

TEST(Observer, HistogramWidensAndKeepsItsMass) {
  // A second sample outside the first's range re-bins the first: the range found still covers
  // both clusters.
  std::vector<float> a(1000, 0.0f), b(1000, 0.0f);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i) / 1000.0f;          // [0, 1)
    b[i] = -1.0f - static_cast<float>(i) / 1000.0f;  // (-2, -1]
  }
  Observer o(ObserverKind::kHistogram);
  o.observe(values(a));
  o.observe(values(b));
  auto [lo, hi] = o.range_for(256);
  EXPECT_LT(lo, -1.5f);
  EXPECT_GT(hi, 0.5f);
}

TEST(Observer, ChannelRangesPerAxis) {
  Tensor t(DType::kF32, {2, 3});
  float v[] = {1, -2, 3, -4, 5, 0.5f};
  for (int i = 0; i < 6; ++i) t.set_scalar_at(i, v[i]);
  ChannelRanges r0 = channel_ranges(t, 0);
  EXPECT_EQ(r0.min, (std::vector<float>{-2, -4}));
  EXPECT_EQ(r0.max, (std::vector<float>{3, 5}));
  ChannelRanges r1 = channel_ranges(t, 1);
  EXPECT_EQ(r1.min, (std::vector<float>{-4, -2, 0.5f}));
  EXPECT_EQ(r1.max, (std::vector<float>{1, 5, 3}));
}

}  // namespace
}  // namespace kiln::quant
