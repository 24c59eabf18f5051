// TensorSpec: the dtype and (possibly symbolic) shape of a value in the IR.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/dtype.h"

namespace kiln {

/// One dimension: a static size, or a named symbol such as `batch` (or a derived name such as
/// `batch*12`). Symbols are interned process-wide, so a Dim is two words and compares by value.
class Dim {
 public:
  Dim() = default;
  Dim(int64_t value) : value_(value) {}  // NOLINT: static dims read naturally as integers
  /// A symbolic dim; `name` must be an identifier or a derived expression printed by kiln.
  static Dim symbol(std::string_view name);

  bool is_static() const { return sym_ < 0; }
  /// Static size; only meaningful when is_static().
  int64_t value() const { return value_; }
  /// Symbol name; empty for a static dim. The view lives as long as the process.
  std::string_view symbol_name() const;
  std::string to_string() const;

  bool operator==(const Dim& o) const { return sym_ == o.sym_ && (sym_ >= 0 || value_ == o.value_); }
  bool operator!=(const Dim& o) const { return !(*this == o); }

 private:
  int64_t value_ = 0;
  int32_t sym_ = -1;
};

/// Product of two dims: static if both are, else a derived symbol ("batch*12").
Dim dim_mul(Dim a, Dim b);
/// Sum of two dims, same rules as dim_mul ("a+b").
Dim dim_add(Dim a, Dim b);

/// Dtype plus shape of one tensor value.
struct TensorSpec {
  DType dtype = DType::kF32;
  std::vector<Dim> shape;

  TensorSpec() = default;
  TensorSpec(DType d, std::vector<Dim> s) : dtype(d), shape(std::move(s)) {}
  static TensorSpec of(DType d, const std::vector<int64_t>& static_shape);

  size_t rank() const { return shape.size(); }
  bool is_static() const;
  /// Static dims as integers; nullopt if any dim is symbolic.
  std::optional<std::vector<int64_t>> static_shape() const;
  /// Element count if static (and no overflow).
  std::optional<int64_t> numel() const;
  /// "f32[batch, 3, 224, 224]".
  std::string to_string() const;

  bool operator==(const TensorSpec& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorSpec& o) const { return !(*this == o); }
};

}  // namespace kiln
