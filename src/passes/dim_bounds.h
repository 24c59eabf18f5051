// Upper bounds of symbolic dims (internal to the memory planner).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kiln/core/status.h"
#include "kiln/ir/tensor_spec.h"

namespace kiln::passes {

/// Evaluates the upper bound of derived dim text, as the IR prints it: symbols and integers
/// joined by `+`, `*` (dim_add, dim_mul), `-k` and `/k` with an integer k (dim_offset, dim_div in
/// shape inference), and parentheses. `+` binds loosest; `*`, `/k` and `-k` apply left to right
/// (dim_mul leaves an operand like "h-2" unwrapped: "h-2*480" is (h-2)*480). Every operation is
/// monotone in its symbols, so the bound of the expression is its value at the symbols' bounds;
/// subexpressions are clamped at 0 (a dim is never negative). Errors name the dim: a symbol
/// without a bound, a form kiln never derives (a symbolic subtrahend or divisor, a negative
/// factor, `/` right after `-k`, stray characters), an overflow.
Result<int64_t> eval_dim_bound(std::string_view text,
                               const std::map<std::string, int64_t, std::less<>>& bounds);

/// Bounds of a program's dims, each symbol evaluated once.
class DimBounds {
 public:
  /// `bounds` must outlive this object.
  explicit DimBounds(const std::map<std::string, int64_t, std::less<>>& bounds) : bounds_(bounds) {}

  /// The dim's size if static, else its upper bound.
  Result<int64_t> bound(const Dim& d);

 private:
  const std::map<std::string, int64_t, std::less<>>& bounds_;
  // Keyed by the interned name's address: one entry per distinct symbol.
  std::unordered_map<const char*, Result<int64_t>> cache_;
};

}  // namespace kiln::passes
