// Observers: the statistics calibration collects for one quantized tensor, and the parameters
// they give (torch.ao.quantization's MinMaxObserver, MovingAverageMinMaxObserver,
// PerChannelMinMaxObserver and HistogramObserver).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/quant/quant_spec.h"

namespace kiln::quant {

/// Range statistics of one tensor. The statistics do not depend on the bit width: the same
/// observer gives 8-bit and 16-bit parameters (mixed precision re-converts without
/// re-calibrating).
class Observer {
 public:
  static constexpr double kAveragingConstant = 0.01;  ///< torch's default
  static constexpr int kHistogramBins = 2048;          ///< torch's default

  explicit Observer(ObserverKind kind = ObserverKind::kMinMax) : kind_(kind) {}

  /// Adds one sample (any float or integer dtype; NaNs are ignored).
  void observe(const Tensor& t);
  /// Adds one sample given as floats.
  void observe(const float* data, int64_t n);
  bool empty() const { return samples_ == 0; }
  int64_t samples() const { return samples_; }
  ObserverKind kind() const { return kind_; }
  /// The observed range (the moving average for kMovingAverageMinMax).
  float min() const { return min_; }
  float max() const { return max_; }

  /// The range to quantize for a grid of `levels` integer steps: [min, max], or for the histogram
  /// the sub-range found by torch's non-linear search (minimum L2 quantization error).
  std::pair<float, float> range_for(int64_t levels) const;
  /// Parameters for `spec` (per tensor). An observer that saw nothing gives the range [0, 0].
  QParams qparams(const QuantSpec& spec) const;

 private:
  void add_to_histogram(const float* data, int64_t n, float lo, float hi);
  double quantization_error(int64_t start_bin, int64_t end_bin, int64_t levels) const;

  ObserverKind kind_;
  int64_t samples_ = 0;
  float min_ = 0, max_ = 0;
  std::vector<double> histogram_;  // kHistogram: counts over [hist_min_, hist_max_]
  float hist_min_ = 0, hist_max_ = 0;
};

/// Per-channel min/max of a tensor along `axis` (PerChannelMinMaxObserver on one sample).
struct ChannelRanges {
  std::vector<float> min, max;
};
ChannelRanges channel_ranges(const Tensor& t, int64_t axis);

/// Symmetric parameters for a constant tensor (weights): per channel along `spec.ch_axis` for
/// kPerChannelSymmetric, else per tensor.
QParams weight_qparams(const Tensor& t, const QuantSpec& spec);

/// Quantizes `t` (float) with `params` into `dtype` storage; rounding as quantize_value.
Tensor quantize_tensor(const Tensor& t, const QParams& params, DType dtype, int64_t quant_min,
                       int64_t quant_max);

}  // namespace kiln::quant
