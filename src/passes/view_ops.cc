// Which ops' portable kernels return views of their inputs, and when the planner can be sure.
#include "view_ops.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "kiln/passes/memory_plan.h"

namespace kiln {

// The kernels (src/backends/portable/) that can hand back an input's storage:
//   shape_ops.cc    view_impl (view, reshape), flatten, squeeze, unsqueeze: x.reshaped(...)
//                   permute: the input itself for the identity; transpose: rank 0 or dim0 == dim1
//                   expand: broadcast_to (kernels.cc) returns the input for the same shape
//                   take_along (slice, select, split): a view when the dims before `dim` are 1
//                     (or nothing is taken) and step is 1
//                   cat: the first tensor when every tensor is a legacy empty 1-D one
//   index_ops.cc    cast: convert (kernels.cc) returns the input for the same dtype
//   norm_reduce.cc  reduce (mean, sum, amax, amin): a 0-d input reduces nothing and comes back
//                   reshaped
// tests/passes/view_ops_test.cc runs every kernel and fails if one not listed here shares an
// input's bytes.
bool may_alias_input(OpId op) {
  switch (op) {
    case OpId::kView:
    case OpId::kReshape:
    case OpId::kFlatten:
    case OpId::kUnflatten:
    case OpId::kSqueeze:
    case OpId::kUnsqueeze:
    case OpId::kPermute:
    case OpId::kTranspose:
    case OpId::kExpand:
    case OpId::kSlice:
    case OpId::kSelect:
    case OpId::kSplit:
    case OpId::kCat:
    case OpId::kCast:
    case OpId::kMean:
    case OpId::kSum:
    case OpId::kAmax:
    case OpId::kAmin:
    // Not a kernel: it names an element of its input's list.
    case OpId::kGetitem:
      return true;
    default:
      return false;
  }
}

namespace passes {
namespace {

const TensorSpec* input_spec(const Node& node) {
  if (node.num_args() == 0 || !node.arg(0).is_node()) return nullptr;
  const Node* in = node.arg(0).node();
  return in->meta.val.size() == 1 ? &in->meta.val[0] : nullptr;
}

bool is_static_one(const Dim& d) { return d.is_static() && d.value() == 1; }
bool is_static_zero(const Dim& d) { return d.is_static() && d.value() == 0; }

// take_along's view condition: the dims before `dim` are statically 1 (outer == 1), or nothing
// is taken; step 1.
bool take_along_views(const TensorSpec& in, int64_t dim, const Dim& taken, int64_t step) {
  int64_t rank = static_cast<int64_t>(in.rank());
  if (rank == 0 || step != 1) return false;
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) return false;
  if (is_static_zero(taken)) return true;
  for (int64_t d = 0; d < dim; ++d) {
    if (!is_static_one(in.shape[static_cast<size_t>(d)])) return false;
  }
  return true;
}

// Keyword values read defensively: a program that skipped lint must not throw here.
std::optional<int64_t> int_kwarg(const Node& node, std::string_view name) {
  int k = node.schema().keyword_index(name);
  if (k < 0 || static_cast<size_t>(k) >= node.kwargs().size()) return std::nullopt;
  const Arg& a = node.kwargs()[static_cast<size_t>(k)];
  if (a.kind() != Arg::Kind::kInt) return std::nullopt;
  return a.to_int();
}
const Arg* kwarg_of(const Node& node, std::string_view name, Arg::Kind kind) {
  int k = node.schema().keyword_index(name);
  if (k < 0 || static_cast<size_t>(k) >= node.kwargs().size()) return nullptr;
  const Arg& a = node.kwargs()[static_cast<size_t>(k)];
  return a.kind() == kind ? &a : nullptr;
}

bool is_identity(const std::vector<int64_t>& dims, int64_t rank) {
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i] < 0 ? dims[i] + rank : dims[i];
    if (d != static_cast<int64_t>(i)) return false;
  }
  return true;
}

}  // namespace

const Node* certain_view_source(const Node& node, uint32_t index) {
  if (node.op() != OpKind::kCallFunction || !may_alias_input(node.target())) return nullptr;
  if (index >= node.meta.val.size()) return nullptr;
  const OpId op = node.target();
  if (op == OpId::kCat) {
    // cat returns tensors[0] itself when every tensor is a legacy empty 1-D one.
    if (node.num_args() == 0 || !node.arg(0).is_node_list() || node.arg(0).nodes().empty()) {
      return nullptr;
    }
    for (const Node* m : node.arg(0).nodes()) {
      if (m->meta.val.size() != 1) return nullptr;
      const TensorSpec& s = m->meta.val[0];
      if (s.rank() != 1 || !is_static_zero(s.shape[0])) return nullptr;
    }
    return node.arg(0).nodes()[0];
  }
  const TensorSpec* in = input_spec(node);
  if (in == nullptr) return nullptr;
  const Node* src = node.arg(0).node();
  const TensorSpec& out = node.meta.val[index];
  switch (op) {
    case OpId::kView:
    case OpId::kReshape:
    case OpId::kFlatten:
    case OpId::kUnflatten:
    case OpId::kSqueeze:
    case OpId::kUnsqueeze:
      return src;
    case OpId::kPermute: {
      const Arg* dims = kwarg_of(node, "dims", Arg::Kind::kIntList);
      return dims != nullptr && is_identity(dims->to_ints(), static_cast<int64_t>(in->rank()))
                 ? src
                 : nullptr;
    }
    case OpId::kTranspose: {
      int64_t rank = static_cast<int64_t>(in->rank());
      if (rank == 0) return src;
      auto dim0 = int_kwarg(node, "dim0"), dim1 = int_kwarg(node, "dim1");
      if (!dim0 || !dim1) return nullptr;
      int64_t d0 = *dim0, d1 = *dim1;
      if (d0 < 0) d0 += rank;
      if (d1 < 0) d1 += rank;
      return d0 == d1 ? src : nullptr;
    }
    case OpId::kExpand:
      return in->shape == out.shape ? src : nullptr;
    case OpId::kSlice: {
      auto dim = int_kwarg(node, "dim"), step = int_kwarg(node, "step");
      int64_t rank = static_cast<int64_t>(out.rank());
      if (!dim || !step || rank != static_cast<int64_t>(in->rank())) return nullptr;
      int64_t d = *dim < 0 ? *dim + rank : *dim;
      if (d < 0 || d >= rank) return nullptr;
      return take_along_views(*in, d, out.shape[static_cast<size_t>(d)], *step) ? src : nullptr;
    }
    case OpId::kSelect: {
      auto dim = int_kwarg(node, "dim");
      return dim && take_along_views(*in, *dim, Dim(1), 1) ? src : nullptr;
    }
    case OpId::kSplit: {
      const Arg* sizes = kwarg_of(node, "split_sizes", Arg::Kind::kIntList);
      auto dim = int_kwarg(node, "dim");
      if (sizes == nullptr || !dim || index >= sizes->to_ints().size()) return nullptr;
      return take_along_views(*in, *dim, Dim(sizes->to_ints()[index]), 1) ? src : nullptr;
    }
    case OpId::kCast: {
      const Arg* dtype = kwarg_of(node, "dtype", Arg::Kind::kDType);
      return dtype != nullptr && in->dtype == dtype->to_dtype() ? src : nullptr;
    }
    case OpId::kMean:
    case OpId::kSum:
    case OpId::kAmax:
    case OpId::kAmin: {
      // A 0-d input comes back reshaped unless a dtype conversion intervenes: reduced floats run
      // through f32 (kernels.cc via_f32), bools are widened, integer sums accumulate in i64.
      DType t = in->dtype;
      bool converted = t == DType::kF16 || t == DType::kBF16 || t == DType::kF64 || t == DType::kBool;
      return in->rank() == 0 && !converted && out.dtype == t ? src : nullptr;
    }
    default:
      return nullptr;
  }
}

}  // namespace passes
}  // namespace kiln
