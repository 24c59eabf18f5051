// Quantization specs and the named configurations of the Qualcomm quantizer (8a8w, 16a8w, 16a4w,
// 16a16w), and the affine parameters computed from observed ranges.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/core/status.h"

namespace kiln::quant {

/// How values map to integers (torch's qscheme).
enum class QScheme : uint8_t {
  kPerTensorAffine,      ///< one scale and zero point from [min, max] (activations)
  kPerTensorSymmetric,   ///< one scale from max |x|, zero point 0 (weights per tensor)
  kPerChannelSymmetric,  ///< a scale per slice of `ch_axis`, zero points 0 (weights)
  kFixed,                ///< parameters fixed by the op's output range (sigmoid, tanh, softmax)
};

/// How an activation's range is observed during calibration.
enum class ObserverKind : uint8_t {
  kMinMax,               ///< running min and max over every sample
  kMovingAverageMinMax,  ///< min/max moved towards each sample's by an averaging constant 0.01
  kHistogram,            ///< a 2048-bin histogram; the range that minimises the L2 error
};

/// "minmax", "moving-average", "histogram"; and back (nullopt for an unknown name).
std::string_view observer_name(ObserverKind kind);
std::optional<ObserverKind> observer_from_name(std::string_view name);

/// How one tensor is quantized: storage dtype, integer range and scheme.
struct QuantSpec {
  DType dtype = DType::kU8;  ///< storage: u8, i8, u16, i16 or i32
  int64_t quant_min = 0;
  int64_t quant_max = 255;
  QScheme qscheme = QScheme::kPerTensorAffine;
  int64_t ch_axis = 0;  ///< per-channel only; the consumer sets the axis of its weight
  ObserverKind observer = ObserverKind::kMovingAverageMinMax;  ///< activations only
  /// kFixed: the real range the integer range stands for ([0, 1] for sigmoid, [-1, 1] for tanh).
  double fixed_min = 0;
  double fixed_max = 1;

  /// Bits of the integer range (8 for [0, 255] and [-127, 127], 4 for [-7, 7]).
  int bits() const;
  /// "u8[0, 255] affine" and so on, for reports.
  std::string to_string() const;
  bool operator==(const QuantSpec&) const = default;
};

/// A named configuration: how activations, weights and biases are quantized.
struct QuantConfig {
  std::string name;     ///< "8a8w", "16a8w", "16a4w", "16a16w"
  QuantSpec activation;
  QuantSpec weight;     ///< per-channel symmetric (axis set per op) unless per tensor
  QuantSpec bias;       ///< i32; scale = input scale x weight scale

  bool operator==(const QuantConfig&) const = default;
};

/// Configuration `name` ("8a8w", "16a8w", "16a4w", "16a16w"): activations uint8 or uint16
/// affine (moving-average min/max unless `act_observer` says otherwise), weights int8 [-127, 127],
/// int8 [-7, 7] or int16 [-32767, 32767] symmetric, per channel unless `per_tensor`;
/// `full_range_weights` adds the most negative value ([-8, 7], [-128, 127], [-32768, 32767]). An
/// unknown name is an error listing the known ones.
Result<QuantConfig> make_config(std::string_view name, bool per_tensor = false,
                                std::optional<ObserverKind> act_observer = std::nullopt,
                                bool full_range_weights = false);
/// The known configuration names, from least to most precise.
const std::vector<std::string>& config_names();

/// Affine parameters of one tensor: one scale and zero point, or one per slice of `axis`.
struct QParams {
  std::vector<double> scales;
  std::vector<int64_t> zero_points;
  int64_t axis = -1;  ///< -1: per tensor

  bool operator==(const QParams&) const = default;
};

/// torch's _calculate_qparams for a range [min_val, max_val] under `spec` (affine or symmetric),
/// in float32 arithmetic as torch does: the range is widened to include 0, the scale is at least
/// float32 epsilon, affine zero points are rounded half to even and clamped to the range. kFixed
/// specs ignore the range. Returns one scale and zero point.
QParams qparams_for_range(float min_val, float max_val, const QuantSpec& spec);

/// quantize_per_tensor's arithmetic (torch's, in f32): clamp(float(zero_point) +
/// round_half_even(x * (1.0f / float(scale)))); NaN gives quant_min.
int64_t quantize_value(float x, double scale, int64_t zero_point, int64_t quant_min,
                       int64_t quant_max);

}  // namespace kiln::quant
