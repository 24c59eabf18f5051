#include "kiln/core/dtype.h"

#include <array>
#include <limits>

namespace kiln {
namespace {
struct DTypeInfo {
  std::string_view name;
  size_t size;
  bool floating;
  bool integral;
};
constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"f32", 4, true, false},
    {"f16", 2, true, false},
    {"bf16", 2, true, false},
    {"f64", 8, true, false},
    {"i64", 8, false, true},
    {"i32", 4, false, true},
    {"i16", 2, false, true},
    {"i8", 1, false, true},
    {"u8", 1, false, true},
    {"bool", 1, false, false},
    {"u16", 2, false, true},
    {"u32", 4, false, true},
    {"u64", 8, false, true},
}};

// Rank used for promotion within a category: wider wins.
int int_rank(DType t) {
  switch (t) {
    case DType::kBool: return 0;
    case DType::kU8: return 1;
    case DType::kI8: return 1;
    case DType::kI16: return 2;
    case DType::kU16: return 2;
    case DType::kI32: return 3;
    case DType::kU32: return 3;
    case DType::kI64: return 4;
    case DType::kU64: return 4;
    default: return -1;
  }
}
int float_rank(DType t) {
  switch (t) {
    case DType::kF16: return 1;
    case DType::kBF16: return 1;
    case DType::kF32: return 2;
    case DType::kF64: return 3;
    default: return -1;
  }
}
}  // namespace

std::string_view dtype_name(DType dtype) { return kInfo[static_cast<size_t>(dtype)].name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i) {
    if (kInfo[i].name == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

size_t dtype_size(DType dtype) { return kInfo[static_cast<size_t>(dtype)].size; }
bool is_floating(DType dtype) { return kInfo[static_cast<size_t>(dtype)].floating; }
bool is_integral(DType dtype) { return kInfo[static_cast<size_t>(dtype)].integral; }

std::optional<std::pair<int64_t, int64_t>> integer_range(DType dtype) {
  using R = std::pair<int64_t, int64_t>;
  switch (dtype) {
    case DType::kU8: return R{0, 255};
    case DType::kI8: return R{-128, 127};
    case DType::kU16: return R{0, 65535};
    case DType::kI16: return R{-32768, 32767};
    case DType::kI32: return R{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::kU32: return R{0, std::numeric_limits<uint32_t>::max()};
    // u64 values above INT64_MAX exist but do not fit the pair.
    case DType::kU64: return R{0, std::numeric_limits<int64_t>::max()};
    case DType::kI64: return R{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    default: return std::nullopt;
  }
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if ((a == DType::kF16 && b == DType::kBF16) || (a == DType::kBF16 && b == DType::kF16)) {
      return DType::kF32;
    }
    return float_rank(a) >= float_rank(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  // Both integral or bool. u8 with a signed 8-bit widens to i16 as in torch.
  if ((a == DType::kU8 && b == DType::kI8) || (a == DType::kI8 && b == DType::kU8)) {
    return DType::kI16;
  }
  // u16 with a signed type of at most 16 bits needs 32 bits to hold both ranges.
  auto signed_narrow = [](DType t) { return t == DType::kI8 || t == DType::kI16; };
  if ((a == DType::kU16 && signed_narrow(b)) || (b == DType::kU16 && signed_narrow(a))) {
    return DType::kI32;
  }
  // u32 with a signed type of at most 32 bits needs 64; u64 with any signed type has no integer
  // type holding both ranges, and is computed in i64 (ONNX's ops take one type, so only casts
  // and kiln's own mixed arithmetic meet this).
  auto is_signed = [](DType t) {
    return t == DType::kI8 || t == DType::kI16 || t == DType::kI32 || t == DType::kI64;
  };
  auto wide_unsigned = [](DType t) { return t == DType::kU32 || t == DType::kU64; };
  if ((wide_unsigned(a) && is_signed(b)) || (wide_unsigned(b) && is_signed(a))) return DType::kI64;
  return int_rank(a) >= int_rank(b) ? a : b;
}

}  // namespace kiln
