// Helpers shared by the shape-inference files (internal to src/ir).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/core/status.h"
#include "kiln/ir/node.h"
#include "kiln/ir/tensor_spec.h"

namespace kiln::shape {

/// Name of positional parameter `i` of the node's schema.
std::string_view arg_name(const Node& node, size_t i);
/// Spec of positional tensor argument `i` (must hold a node with one spec).
const TensorSpec& arg_spec(const Node& node, size_t i);
/// Spec of an optional tensor argument, or null when it is None.
const TensorSpec* opt_arg_spec(const Node& node, size_t i);

/// One operand of a `Scalar` parameter: a tensor (node) or a plain number.
struct ScalarOperand {
  std::string_view name;
  const TensorSpec* spec = nullptr;  ///< null for a number
  DType number_kind = DType::kI64;   ///< kI64, kF32 or kBool for a number
};
ScalarOperand scalar_arg(const Node& node, size_t i);
/// Sets `out` to the one spec (dtype, shape) and returns Ok.
Status single(SpecList* out, DType dtype, Shape shape);
/// Dtype of tensor operands promoted together, with numbers only lifting the category
/// (bool < integral < floating) as torch's result_type does.
DType result_type(const std::vector<ScalarOperand>& ops);

/// Wraps a possibly negative dim into [0, rank). A rank-0 tensor accepts dims -1 and 0 when
/// `scalar_ok`, as torch does for reductions and softmax.
Status normalize_dim(int64_t dim, size_t rank, std::string_view arg, int64_t* out,
                     bool scalar_ok = false);

/// True when two dims may be equal at run time (equal, or either is symbolic).
bool dims_compatible(const Dim& a, const Dim& b);
/// Merges two dims known to be compatible, preferring a static value, then the first.
Dim merge_dims(const Dim& a, const Dim& b);

/// torch broadcasting with symbolic dims (see ops.inc). On failure the message names
/// `b_name` as the argument and shows both specs.
Status broadcast_shapes(const Shape& a, const Shape& b,
                        std::string_view a_name, const TensorSpec& a_spec,
                        std::string_view b_name, const TensorSpec& b_spec,
                        Shape* out);

/// d + k, written "d-2" for negative k on symbols.
Dim dim_offset(const Dim& d, int64_t k);
/// floor((d + add) / div) + add2 for a static d; a derived symbol otherwise.
Dim dim_affine_div(const Dim& d, int64_t add, int64_t div, int64_t add2);
/// d / k for a static d (caller checked divisibility); "d/k" for a symbol.
Dim dim_div(const Dim& d, int64_t k);
/// Product of dims[begin, end).
Dim dim_product(const Shape& dims, size_t begin, size_t end);

/// Shape text "[2, batch]".
std::string shape_string(const Shape& dims);
/// "[1, 2]" for an int list.
std::string ints_string(const std::vector<int64_t>& v);

/// The fused activation of a linear / addmm / convolution / conv_transpose2d call: a name
/// fused_activation_known() takes, and clamp bounds with clamp only (at least one, min <= max).
Status check_fused_activation(const Node& node);
Status expect_floating(std::string_view arg, const TensorSpec& s);
Status expect_numeric(std::string_view arg, const TensorSpec& s);  ///< not bool
Status expect_index(std::string_view arg, const TensorSpec& s);    ///< i32 or i64
Status expect_rank(std::string_view arg, const TensorSpec& s, size_t rank);
Status expect_same_dtype(std::string_view arg, const TensorSpec& s, std::string_view ref_name,
                         const TensorSpec& ref);
/// Fails unless `s` has `want`'s rank and dims that may equal it.
Status expect_shape(std::string_view arg, const TensorSpec& s, const Shape& want);

/// Largest magnitude accepted for window, padding and size attributes, so that the arithmetic
/// on them cannot overflow.
inline constexpr int64_t kMaxAttr = int64_t{1} << 32;
/// Rejects values beyond kMaxAttr.
Status bounded_ints(std::string_view arg, const std::vector<int64_t>& v);
/// Expands an int list of 1 or n values to n values (per spatial dim); error otherwise.
Status per_dim_ints(std::string_view arg, const std::vector<int64_t>& v, size_t n,
                    std::vector<int64_t>* out);
/// Padding as [begin..., end...] from 1, n or 2n values.
Status begin_end_padding(std::string_view arg, const std::vector<int64_t>& v, size_t n,
                         std::vector<int64_t>* begin, std::vector<int64_t>* end);

}  // namespace kiln::shape
