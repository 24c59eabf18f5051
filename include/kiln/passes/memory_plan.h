// Memory planning (ExecuTorch's MemoryPlanningPass with a greedy-by-size placement): gives every
// tensor value of a program a home, and every value the program computes into reused memory an
// offset into one activation arena per method.
//
// Needs: a program that passes lint, with an output spec (meta.val) on every call_function node.
// Guarantees: two arena values whose lifetimes intersect never share a byte; every arena offset is
// a multiple of `alignment`; lower_bound_bytes <= arena_bytes <= no_reuse_bytes.
//
// Homes:
//   - placeholders: kInput (user inputs, also mutated ones), kConstant (parameters, lifted
//     constants, buffers no output mutates), kBuffer (buffers a buffer-mutation output updates).
//   - get_attr constants: kConstant. Nodes without a spec (a lowered module's get_attr, the output
//     node) have no value.
//   - getitem: always kAlias of the list element it selects (it names that tensor; no copy).
//   - view-like ops (may_alias_input below) are kAlias of their input where the portable kernel
//     is certain to return a view for the node's static specs (view, reshape, flatten, squeeze,
//     unsqueeze always; permute/transpose only when the permutation is the identity; expand to
//     the same shape; slice/select/split only when the dims before `dim` are statically 1; cast
//     to the same dtype; a reduction of a 0-d tensor). Where a view depends on sizes the planner
//     cannot see, the value is planned in the arena: a kernel that returns a view anyway has its
//     result copied into or out of the arena by the runtime right after the call (the input is
//     live then), so the plan is never wrong, only a copy dearer.
//   - values returned as user outputs: kOutput (allocated per run outside the arena, handed to the
//     caller). A user output that is an alias stays kAlias; its root, when the program computes
//     it (kArena), becomes kOutput too, so the returned view lives in caller-owned memory and
//     needs no copy. A user output whose root is an input, constant or buffer is a view of memory
//     the caller does not own: the runtime must copy it out (a buffer's view would otherwise see
//     the buffer's update at the end of the run).
//   - everything else a call_function computes: kArena.
//
// Lifetimes are inclusive node positions in graph order: a value lives from its defining node to
// its last user; a root lives until the last user of any of its aliases; values the output node
// returns (user outputs and buffer / user-input mutations, which the runtime copies after the last
// instruction) live to the last position. Values are never planned in place: a node's output
// never shares memory with its inputs unless it is an alias.
//
// Placement: arena values sorted by size (largest first; ties: earlier first), each placed at the
// best aligned gap among the already placed values whose lifetimes intersect its own, found
// through an interval tree over positions (no pairwise scan). Two gap rules are tried (lowest
// offset first-fit, and best-fit: the tightest gap that holds the value) and the smaller arena
// kept. Symbolic dims are planned at their upper bounds (MemoryPlanOptions::dim_bounds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

struct MemoryPlanOptions {
  /// Every arena offset is a multiple of this (a power of two >= 1; else an error).
  size_t alignment = 64;
  /// Upper bounds of symbolic dims, by symbol name ("batch" -> 8). A derived dim ("batch*12",
  /// "(h-1)/2+1") is bounded by evaluating its expression over the bounds of its symbols, unless
  /// its whole name has a bound here. A value whose shape has a symbolic dim with no bound is an
  /// error naming the value (node name), its spec and the dim.
  std::map<std::string, int64_t, std::less<>> dim_bounds;
  /// A value whose size has a symbolic dim without a bound is kDynamic (allocated when it is
  /// computed, outside the arena) instead of an error. For delegates compiled without dim ranges.
  /// A dim that names a symbol no placeholder carries (a size the program computes, such as
  /// dynamic_reshape's) is kDynamic either way.
  bool unbounded_dims_dynamic = false;
};

/// Where a value's bytes live at run time.
enum class ValueHome : uint8_t {
  kArena,     ///< planned: `offset` into the method's activation arena
  kInput,     ///< a user input (the caller's tensor)
  kConstant,  ///< a parameter / lifted constant / non-mutated buffer placeholder, or a get_attr
  kBuffer,    ///< a mutated buffer placeholder (persistent state, updated by buffer mutations)
  kOutput,    ///< returned as a user output (or the root of such a view): allocated per run
              ///< outside the arena, owned by the caller
  kAlias,     ///< a view: shares the memory of value `alias_of`
  kDynamic,   ///< its size has an unbounded symbolic dim: allocated when computed, not planned
};

/// "arena", "input", "constant", "buffer", "output", "alias", "dynamic".
const char* value_home_name(ValueHome home);

/// One tensor value: a node's output, or one element of a list-returning node's output.
struct PlannedValue {
  /// The defining node; owned by the planned program's graph, valid while that graph lives and
  /// the node is not erased.
  const Node* node = nullptr;
  uint32_t index = 0;       ///< element of a list-returning node (split, call_delegate), else 0
  ValueHome home = ValueHome::kArena;
  size_t bytes = 0;         ///< at the dims' upper bounds
  int64_t offset = -1;      ///< kArena only (0 for a zero-byte value)
  int32_t alias_of = -1;    ///< kAlias only: index into MemoryPlan::values of the root, never an alias
  int64_t first = 0;        ///< lifetime in node positions (inclusive); a root's extends over
  int64_t last = 0;         ///< the uses of its aliases
  bool dynamic = false;     ///< its shape has symbolic dims (planned at the upper bound)
};

struct MemoryPlan {
  std::vector<PlannedValue> values;     ///< in node order, list elements in index order
  std::vector<int32_t> first_value;     ///< node id -> index of its first value, -1 if none
  size_t arena_bytes = 0;               ///< the largest offset + bytes of the placement
  size_t lower_bound_bytes = 0;         ///< max over node positions of the live arena bytes
  size_t no_reuse_bytes = 0;            ///< sum of all arena values' bytes, each aligned up
  size_t dynamic_values = 0;            ///< arena values planned at dim upper bounds
};

/// Plans `program`'s memory. The plan points at its nodes (see PlannedValue::node). Errors: a bad
/// alignment or bound, a symbolic dim without a bound, a size that overflows, a getitem that
/// selects no element, a call without an output spec; each names the node and its spec.
[[nodiscard]] Result<MemoryPlan> plan_memory(const ExportedProgram& program,
                                             const MemoryPlanOptions& options = {});

/// "arena 1.2 MiB (lower bound 1.1 MiB, 1.04x; no reuse 9.9 MiB), 3 values planned at dim upper
/// bounds (batch<=8)"; the last part only when some arena value is dynamic.
std::string format_memory_plan(const MemoryPlan& plan, const MemoryPlanOptions& options);

/// Whether `op`'s portable kernel may return a tensor sharing the storage of one of its inputs
/// (for some inputs; see the kernels in src/backends/portable/: shape_ops.cc view_impl, flatten,
/// squeeze, unsqueeze reshape their input; permute and transpose return it for the identity;
/// expand returns it through broadcast_to for the same shape; slice, select and split view it
/// through take_along when the dims before `dim` are 1; cat returns its first tensor when every
/// tensor is a legacy empty 1-D one; index_ops.cc cast returns it through convert for the same
/// dtype; norm_reduce.cc reduce returns a reshaped 0-d input). The one list of such ops: the
/// planner and the runtime both read it.
bool may_alias_input(OpId op);

}  // namespace kiln
