// The activation a linear / addmm / convolution / conv_transpose2d call may end in (its
// `activation` keyword, set by the fuse_activations pass). Header-only: the portable kernels and
// the delegates read the same names without the IR.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class FusedActivation : uint8_t { kNone, kRelu, kRelu6, kClamp, kHardswish, kSigmoid, kSilu, kTanh, kGelu };

/// The names, in enum order, as written in the `activation` keyword.
inline constexpr std::array<std::string_view, 9> kFusedActivationNames = {
    "none", "relu", "relu6", "clamp", "hardswish", "sigmoid", "silu", "tanh", "gelu"};

inline std::optional<FusedActivation> fused_activation_from_name(std::string_view name) {
  for (size_t i = 0; i < kFusedActivationNames.size(); ++i) {
    if (kFusedActivationNames[i] == name) return static_cast<FusedActivation>(i);
  }
  return std::nullopt;
}

inline std::string_view fused_activation_name(FusedActivation a) {
  return kFusedActivationNames[static_cast<size_t>(a)];
}

}  // namespace kiln
