// Element types shared by the IR, the kernels and the program format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace kiln {

/// Element type of a tensor. The numeric values are part of the program format: append only.
enum class DType : uint8_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kF64 = 3,
  kI64 = 4,
  kI32 = 5,
  kI16 = 6,
  kI8 = 7,
  kU8 = 8,
  kBool = 9,
  kU16 = 10,  ///< 16-bit quantized activations (Qualcomm 16a configurations)
  kU32 = 11,
  kU64 = 12,
};

inline constexpr int kNumDTypes = 13;

/// Short name used in .kir text ("f32", "i64", "bool", ...).
std::string_view dtype_name(DType dtype);
/// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> dtype_from_name(std::string_view name);
/// Bytes per element.
size_t dtype_size(DType dtype);
bool is_floating(DType dtype);
bool is_integral(DType dtype);  ///< integer types, not bool
/// The values an integer type holds ([0, 255] for u8, ...); nullopt for float types and bool.
std::optional<std::pair<int64_t, int64_t>> integer_range(DType dtype);
/// Type both operands of an arithmetic op are computed in (torch's promote_types).
DType promote_types(DType a, DType b);

}  // namespace kiln
