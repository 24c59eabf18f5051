#include "kiln/quant/quant_spec.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace kiln::quant {

std::string_view observer_name(ObserverKind kind) {
  switch (kind) {
    case ObserverKind::kMinMax: return "minmax";
    case ObserverKind::kMovingAverageMinMax: return "moving-average";
    case ObserverKind::kHistogram: return "histogram";
  }
  return "?";
}

std::optional<ObserverKind> observer_from_name(std::string_view name) {
  for (ObserverKind k : {ObserverKind::kMinMax, ObserverKind::kMovingAverageMinMax, ObserverKind::kHistogram}) {
    if (observer_name(k) == name) return k;
  }
  return std::nullopt;
}

int QuantSpec::bits() const {
  uint64_t levels = static_cast<uint64_t>(quant_max - quant_min);
  int b = 0;
  while (levels > 0) {
    ++b;
    levels >>= 1;
  }
  return b;
}

std::string QuantSpec::to_string() const {
  const char* scheme = "";
  switch (qscheme) {
    case QScheme::kPerTensorAffine: scheme = "affine"; break;
    case QScheme::kPerTensorSymmetric: scheme = "symmetric"; break;
    case QScheme::kPerChannelSymmetric: scheme = "per-channel symmetric"; break;
    case QScheme::kFixed: scheme = "fixed"; break;
  }
  return fmt::format("{}[{}, {}] {}", dtype_name(dtype), quant_min, quant_max, scheme);
}

namespace {

QuantSpec activation_spec(DType dtype, int64_t qmax, ObserverKind observer) {
  QuantSpec s;
  s.dtype = dtype;
  s.quant_min = 0;
  s.quant_max = qmax;
  s.qscheme = QScheme::kPerTensorAffine;
  s.observer = observer;
  return s;
}

QuantSpec weight_spec(DType dtype, int64_t qmax, bool per_tensor) {
  QuantSpec s;
  s.dtype = dtype;
  s.quant_min = -qmax;
  s.quant_max = qmax;
  s.qscheme = per_tensor ? QScheme::kPerTensorSymmetric : QScheme::kPerChannelSymmetric;
  return s;
}

}  // namespace

const std::vector<std::string>& config_names() {
  static const std::vector<std::string> names = {"8a8w", "16a4w", "16a8w", "16a16w"};
  return names;
}

Result<QuantConfig> make_config(std::string_view name, bool per_tensor,
                                std::optional<ObserverKind> act_observer, bool full_range_weights) {
  ObserverKind obs = act_observer.value_or(ObserverKind::kMovingAverageMinMax);
  QuantConfig c;
  c.name = std::string(name);
  if (name == "8a8w") {
    c.activation = activation_spec(DType::kU8, 255, obs);
    c.weight = weight_spec(DType::kI8, 127, per_tensor);
  } else if (name == "16a8w") {
    c.activation = activation_spec(DType::kU16, 65535, obs);
    c.weight = weight_spec(DType::kI8, 127, per_tensor);
  } else if (name == "16a4w") {
    c.activation = activation_spec(DType::kU16, 65535, obs);
    c.weight = weight_spec(DType::kI8, 7, per_tensor);
  } else if (name == "16a16w") {
    c.activation = activation_spec(DType::kU16, 65535, obs);
    c.weight = weight_spec(DType::kI16, 32767, per_tensor);
  } else {
    return invalid_argument("unknown quantization config '{}' (known: {})", name,
                            fmt::join(config_names(), ", "));
  }
  if (full_range_weights) c.weight.quant_min = -c.weight.quant_max - 1;
  c.bias.dtype = DType::kI32;
  c.bias.quant_min = std::numeric_limits<int32_t>::min();
  c.bias.quant_max = std::numeric_limits<int32_t>::max();
  c.bias.qscheme = per_tensor ? QScheme::kPerTensorSymmetric : QScheme::kPerChannelSymmetric;
  return c;
}

QParams qparams_for_range(float min_val, float max_val, const QuantSpec& spec) {
  const float eps = std::numeric_limits<float>::epsilon();
  const auto qmin = static_cast<float>(spec.quant_min), qmax = static_cast<float>(spec.quant_max);
  QParams p;
  if (spec.qscheme == QScheme::kFixed) {
    // The integer range covers [fixed_min, fixed_max) in 2^bits equal steps: 1/256 for sigmoid
    // at 8 bits, zero point at the integer of fixed_min.
    double scale = (spec.fixed_max - spec.fixed_min) / (static_cast<double>(spec.quant_max - spec.quant_min) + 1);
    p.scales = {scale};
    p.zero_points = {spec.quant_min - static_cast<int64_t>(std::nearbyint(spec.fixed_min / scale))};
    return p;
  }
  float min_neg = std::min(min_val, 0.0f), max_pos = std::max(max_val, 0.0f);
  float scale = 0;
  int64_t zp = 0;
  if (spec.qscheme == QScheme::kPerTensorAffine) {
    scale = (max_pos - min_neg) / (qmax - qmin);
    scale = std::max(scale, eps);
    zp = static_cast<int64_t>(qmin - std::nearbyint(min_neg / scale));
    zp = std::clamp<int64_t>(zp, spec.quant_min, spec.quant_max);
  } else {
    float amax = std::max(-min_neg, max_pos);
    scale = amax / ((qmax - qmin) / 2.0f);
    scale = std::max(scale, eps);
    // torch centres unsigned symmetric ranges; signed ones sit on zero.
    zp = spec.dtype == DType::kU8 || spec.dtype == DType::kU16 ? (spec.quant_min + spec.quant_max + 1) / 2 : 0;
  }
  p.scales = {static_cast<double>(scale)};
  p.zero_points = {zp};
  return p;
}

int64_t quantize_value(float x, double scale, int64_t zero_point, int64_t quant_min,
                       int64_t quant_max) {
  // The portable quantize_per_tensor kernel's arithmetic (torch's, every step in f32).
  const float inv_scale = 1.0f / static_cast<float>(scale);
  const float v = static_cast<float>(zero_point) + std::nearbyint(x * inv_scale);
  if (v != v) return quant_min;
  if (v >= static_cast<float>(quant_max)) return quant_max;
  if (v <= static_cast<float>(quant_min)) return quant_min;
  return static_cast<int64_t>(v);
}

}  // namespace kiln::quant
