// TensorSpec: the dtype and (possibly symbolic) shape of a value in the IR.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/core/small_vec.h"

namespace kiln {

/// One dimension: a static size, or a named symbol such as `batch` (or a derived name such as
/// `batch*12`). Symbols are interned process-wide, so a Dim is one word and compares by value:
/// symbol k is stored as INT64_MIN + k. A static value in that range (only folded garbage from a
/// hostile model gets there) is clamped to the range's end, so it never reads as a symbol.
class Dim {
 public:
  Dim() = default;
  Dim(int64_t value) : v_(value < kSymbolEnd ? kSymbolEnd : value) {}  // NOLINT: reads as an int
  /// A symbolic dim; `name` must be an identifier or a derived expression printed by kiln.
  static Dim symbol(std::string_view name);

  bool is_static() const { return v_ >= kSymbolEnd; }
  /// Static size; -1 for a symbolic dim.
  int64_t value() const { return is_static() ? v_ : -1; }
  /// Symbol name; empty for a static dim. The view lives as long as the process.
  std::string_view symbol_name() const;
  std::string to_string() const;

  bool operator==(const Dim& o) const { return v_ == o.v_; }
  bool operator!=(const Dim& o) const { return v_ != o.v_; }

 private:
  static constexpr int64_t kSymbolBase = INT64_MIN;
  static constexpr int64_t kSymbolEnd = INT64_MIN + (int64_t{1} << 32);
  int64_t v_ = 0;
};

/// A shape: dims kept inline up to rank 5.
using Shape = SmallVec<Dim, 5>;

/// Product of two dims: static if both are, else a derived symbol ("batch*12").
Dim dim_mul(Dim a, Dim b);
/// Sum of two dims, same rules as dim_mul ("a+b").
Dim dim_add(Dim a, Dim b);

/// Dtype plus shape of one tensor value.
struct TensorSpec {
  DType dtype = DType::kF32;
  Shape shape;

  TensorSpec() = default;
  TensorSpec(DType d, Shape s) : dtype(d), shape(std::move(s)) {}
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

/// The output specs of a node: one, or one per element of a returned list.
using SpecList = SmallVec<TensorSpec, 1>;

}  // namespace kiln
