// Shape and data-movement ONNX ops: Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Concat,
// Split, Slice, Gather, Expand, Pad, reductions, ArgMax, CumSum, scatters and ND gathers, OneHot,
// EyeLike, and the ops whose output size depends on values (NonZero, Compress, NonMaxSuppression,
// Unique).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "convert_util.h"
#include "fold.h"
#include "onnx_tensor.h"
#include "shape_util.h"

namespace kiln::onnx_import {
namespace {

Status forward(Importer& im, Node* y) {
  im.set_output(0, y);
  return Status::Ok();
}

// torch's sum and cumsum widen integers to i64; ONNX keeps the input dtype.
Status forward_keep_dtype(Importer& im, Node* y, DType dtype) {
  if (y->has_spec() && y->spec().dtype != dtype) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kCast, {y}, {{"dtype", dtype}}));
  }
  return forward(im, y);
}

Status convert_flatten(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t rank, input_rank(im, 0));
  int64_t r = static_cast<int64_t>(rank);
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 1));
  if (axis < -r || axis > r) return invalid_argument("attribute 'axis' {} is out of range for rank {}", axis, r);
  if (axis < 0) axis += r;
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  // ONNX Flatten always gives [prod(d < axis), prod(d >= axis)]; build it from kiln flattens.
  if (axis == 0) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kUnsqueeze, {x}, {{"dim", int64_t{0}}}));
    axis = 1;
    ++r;
  }
  if (axis == r) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kUnsqueeze, {x}, {{"dim", r}}));
    ++r;
  }
  if (axis > 1) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kFlatten, {x}, {{"start_dim", int64_t{0}}, {"end_dim", axis - 1}}));
    r -= axis - 1;
  }
  if (r > 2) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kFlatten, {x}, {{"start_dim", int64_t{1}}, {"end_dim", int64_t{-1}}}));
  }
  return forward(im, x);
}

// Resolves an ONNX Reshape target against the input spec into kiln reshape sizes (-1 once).
Result<std::vector<int64_t>> reshape_target(const TensorSpec& in, const DimsValue& target,
                                            bool allowzero) {
  constexpr int64_t kInfer = -1;
  std::vector<Dim> t;
  bool has_infer = false;
  for (size_t d = 0; d < target.dims.size(); ++d) {
    Dim v = target.dims[d];
    if (v.is_static() && v.value() == 0 && !allowzero) {
      if (d >= in.rank()) return invalid_argument("0 at position {} has no input dim to copy", d);
      v = in.shape[d];
    }
    if (v.is_static() && v.value() == kInfer) {
      if (has_infer) return invalid_argument("shape has more than one -1");
      has_infer = true;
    } else if (v.is_static() && v.value() < 0) {
      return invalid_argument("shape has a negative size {}", v.value());
    }
    t.push_back(v);
  }
  std::vector<int64_t> out;
  size_t symbolic = 0;
  for (Dim v : t) symbolic += v.is_static() ? 0 : 1;
  if (symbolic == 0) {
    for (Dim v : t) out.push_back(v.value());
    if (auto s = in.static_shape()) {
      KILN_ASSIGN_OR_RETURN(out, resolve_reshape(*s, out, /*allowzero=*/true));
    }
    return out;
  }
  // Cancel each symbolic target entry against the same symbol in the input; what is left of the
  // input must be static to size a -1 exactly.
  std::vector<Dim> rest = in.shape;
  for (Dim v : t) {
    if (v.is_static()) continue;
    auto it = std::find(rest.begin(), rest.end(), v);
    if (it != rest.end()) rest.erase(it);
  }
  int64_t rest_numel = 1;
  bool rest_static = true;
  for (Dim d : rest) {
    if (!d.is_static()) rest_static = false; else rest_numel *= d.value();
  }
  if (has_infer) {
    if (!rest_static || symbolic != in.rank() - rest.size()) {
      return unsupported("reshape of {} to a shape with both -1 and symbolic dims", in.to_string());
    }
    int64_t known = 1;
    for (Dim v : t) {
      if (v.is_static() && v.value() != kInfer) known *= v.value();
    }
    if (known == 0 || rest_numel % known != 0) return invalid_argument("cannot infer -1 in reshape of {}", in.to_string());
    for (Dim v : t) {
      if (v.is_static() && v.value() == kInfer) v = Dim(rest_numel / known);
      out.push_back(v.is_static() ? v.value() : kInfer);
    }
    if (symbolic > 1) return unsupported("reshape of {} to more than one symbolic dim", in.to_string());
    return out;
  }
  if (symbolic > 1) return unsupported("reshape of {} to more than one symbolic dim", in.to_string());
  for (Dim v : t) out.push_back(v.is_static() ? v.value() : kInfer);
  return out;
}

// A reshape of a tensor with symbolic dims that one int list cannot state: one that only inserts
// or drops size-1 dims (squeeze / unsqueeze), or one that keeps the leading dims (given as
// themselves or as 0) and reshapes only static trailing dims (a flatten of the tail and an
// unflatten to the target's tail, one -1 allowed). This is how Paddle and torch exports reshape
// feature maps of symbolic size. Null when the target is of neither form.
Result<Node*> reshape_keeping_prefix(Importer& im, Node* x, const TensorSpec& xs,
                                     const DimsValue& target, bool allowzero) {
  if (xs.rank() == 0 || xs.static_shape()) return nullptr;
  const size_t rank = xs.rank();
  // Only size-1 dims inserted or dropped: squeeze, then unsqueeze.
  std::vector<Dim> t(target.dims.begin(), target.dims.end());
  for (size_t d = 0; d < t.size() && d < rank; ++d) {
    if (!allowzero && t[d] == Dim(0)) t[d] = xs.shape[d];
  }
  std::vector<int64_t> dropped, inserted;
  size_t i = 0, j = 0;
  while (i < rank || j < t.size()) {
    if (i < rank && j < t.size() && t[j] == xs.shape[i]) {
      ++i, ++j;
    } else if (j < t.size() && t[j] == Dim(1)) {
      inserted.push_back(static_cast<int64_t>(j++));
    } else if (i < rank && xs.shape[i] == Dim(1)) {
      dropped.push_back(static_cast<int64_t>(i++));
    } else {
      break;
    }
  }
  if (i == rank && j == t.size()) {
    Node* y = x;
    if (!dropped.empty()) {
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kSqueeze, {y}, {{"dim", dropped}}));
    }
    for (int64_t d : inserted) {
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kUnsqueeze, {y}, {{"dim", d}}));
    }
    return y;
  }
  // Kept leading dims, a reshaped static tail.
  size_t k = 0;
  while (k < target.dims.size() && k < rank &&
         (target.dims[k] == xs.shape[k] || (!allowzero && target.dims[k] == Dim(0)))) {
    ++k;
  }
  if (k == rank && target.dims.size() == rank) return x;  // the same shape
  k = std::min(k, rank - 1);
  std::vector<int64_t> tail;
  for (size_t d = k; d < target.dims.size(); ++d) {
    Dim v = target.dims[d];
    if (!allowzero && v == Dim(0) && d < rank) v = xs.shape[d];
    if (!v.is_static()) return nullptr;
    tail.push_back(v.value());
  }
  if (tail.empty()) return nullptr;
  if (tail == std::vector<int64_t>{-1}) {
    if (k + 1 == rank) return x;
    return im.call(OpId::kFlatten, {x}, {{"start_dim", static_cast<int64_t>(k)}});
  }
  for (size_t d = k; d < rank; ++d) {
    if (!xs.shape[d].is_static()) return nullptr;
  }
  Node* y = x;
  if (k + 1 < rank) {
    KILN_ASSIGN_OR_RETURN(y,
                          im.call(OpId::kFlatten, {y}, {{"start_dim", static_cast<int64_t>(k)}}));
  }
  return im.call(OpId::kUnflatten, {y}, {{"dim", static_cast<int64_t>(k)}, {"sizes", tail}});
}

Status convert_reshape(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(int64_t allowzero, im.attr_int("allowzero", 0));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (im.is_runtime_input(1)) {  // a shape the model computes: read when the program runs
    KILN_ASSIGN_OR_RETURN(Node * shape, im.input(1));
    KILN_ASSIGN_OR_RETURN(
        Node * y, im.call(OpId::kDynamicReshape, {x, shape}, {{"allowzero", allowzero != 0}}));
    return forward(im, y);
  }
  KILN_ASSIGN_OR_RETURN(DimsValue target, im.require_dims(1, "input 'shape'"));
  auto shape = reshape_target(xs, target, allowzero != 0);
  if (!shape.ok()) {  // one int list cannot say it; a flatten / unflatten pair may
    KILN_ASSIGN_OR_RETURN(Node * kept, reshape_keeping_prefix(im, x, xs, target, allowzero != 0));
    if (kept != nullptr) return forward(im, kept);
    return shape.status();
  }
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kReshape, {x}, {{"shape", *shape}}));
  return forward(im, y);
}

Status convert_transpose(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(auto perm, im.attr_ints("perm"));
  if (perm.empty()) {
    for (size_t d = r; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kPermute, {x}, {{"dims", perm}}));
  return forward(im, y);
}

Status convert_squeeze(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  if (im.opset() >= 13 && im.is_runtime_input(1)) {  // axes the model computes
    KILN_ASSIGN_OR_RETURN(TensorSpec as, im.input_spec(1));
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
    Node* y = nullptr;
    if (as.numel() == std::optional<int64_t>(0)) {  // no axes: every dim of size 1
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kSqueeze, {x}, {{"dim", Arg()}}));
    } else {
      KILN_ASSIGN_OR_RETURN(Node * axes, im.input(1));
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kDynamicSqueeze, {x, axes}));
    }
    return forward(im, y);
  }
  KILN_ASSIGN_OR_RETURN(auto axes, im.axes_attr_or_input("axes", 1, 13));
  Arg dim;
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  if (axes && !axes->empty()) {
    for (int64_t& a : *axes) {
      KILN_RETURN_IF_ERROR(normalize_axis(&a, r, "axes"));
      // ONNX refuses what torch's squeeze(dim) would leave alone.
      const Dim& d = xs.shape[static_cast<size_t>(a)];
      if (d.is_static() && d.value() != 1) {
        return invalid_argument(
            "axes: dim {} of input {} has size {}; Squeeze removes dims of "
            "size 1 only",
            a, xs.to_string(), d.value());
      }
    }
    dim = Arg(*axes);
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kSqueeze, {x}, {{"dim", dim}}));
  return forward(im, y);
}

Status convert_unsqueeze(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  if (im.opset() >= 13 && im.is_runtime_input(1)) {  // axes the model computes
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
    KILN_ASSIGN_OR_RETURN(Node * axes, im.input(1));
    KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kDynamicUnsqueeze, {x, axes}));
    return forward(im, y);
  }
  KILN_ASSIGN_OR_RETURN(auto axes, im.axes_attr_or_input("axes", 1, 13));
  if (!axes || axes->empty()) return invalid_argument("axes are missing");
  size_t out_rank = r + axes->size();
  for (int64_t& a : *axes) KILN_RETURN_IF_ERROR(normalize_axis(&a, out_rank, "axes"));
  std::sort(axes->begin(), axes->end());
  if (std::adjacent_find(axes->begin(), axes->end()) != axes->end()) return invalid_argument("axes repeat");
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  for (int64_t a : *axes) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kUnsqueeze, {x}, {{"dim", a}}));
  }
  return forward(im, x);
}

Status convert_concat(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  std::vector<Node*> parts;
  for (size_t i = 0; i < im.num_inputs(); ++i) {
    if (!im.has_input(i)) continue;
    KILN_ASSIGN_OR_RETURN(Node * p, im.input(i));
    parts.push_back(p);
  }
  if (parts.empty()) return invalid_argument("no inputs");
  if (parts.size() == 1) return forward(im, parts[0]);
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kCat, {parts}, {{"dim", axis}}));
  return forward(im, y);
}

// Split by sizes the model computes: output k is the slice between the running sums of the
// sizes before it and through it, read when the program runs.
Status runtime_split(Importer& im, int64_t axis) {
  KILN_ASSIGN_OR_RETURN(TensorSpec ss, im.input_spec(1));
  const size_t n = im.num_outputs();
  if (ss.rank() != 1 || ss.shape[0] != Dim(static_cast<int64_t>(n)) || !is_integral(ss.dtype)) {
    return invalid_argument("input 'split' is {}, expected {} integers (one per output)",
                            ss.to_string(), n);
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * sizes, im.input(1));
  if (ss.dtype != DType::kI64) {
    KILN_ASSIGN_OR_RETURN(sizes, im.call(OpId::kCast, {sizes}, {{"dtype", DType::kI64}}));
  }
  KILN_ASSIGN_OR_RETURN(Node * ends, im.call(OpId::kCumsum, {sizes}, {{"dim", int64_t{0}}}));
  auto ints = [&](int64_t v, const std::string& hint) {
    Tensor t(DType::kI64, {1});
    t.set_scalar_at(0, static_cast<double>(v));
    return im.constant_node(std::move(t), hint);
  };
  const std::string& base = im.node().output(0);
  Node* axes = ints(axis, base + "_axes");
  Node* steps = ints(1, base + "_steps");
  Node* start = ints(0, base + "_start");
  for (size_t k = 0; k < n; ++k) {
    KILN_ASSIGN_OR_RETURN(Node * end, im.call(OpId::kSlice, {ends},
                                              {{"dim", int64_t{0}},
                                               {"start", static_cast<int64_t>(k)},
                                               {"end", static_cast<int64_t>(k + 1)}}));
    KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kDynamicSlice, {x, start, end, axes, steps}));
    im.set_output(k, y);
    start = end;
  }
  return Status::Ok();
}

Status convert_split(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, xs.rank(), "attribute 'axis'"));
  if (im.opset() >= 13 && im.has_input(1) && im.is_runtime_input(1)) {
    return runtime_split(im, axis);
  }
  KILN_ASSIGN_OR_RETURN(auto sizes, im.axes_attr_or_input("split", 1, 13));
  size_t n = im.num_outputs();
  if (n == 0) return invalid_argument("no outputs");
  std::vector<int64_t> split;
  if (sizes && !sizes->empty()) {
    split = *sizes;
    if (split.size() != n) return invalid_argument("'split' has {} sizes for {} outputs", split.size(), n);
  } else {
    const Dim& d = xs.shape[static_cast<size_t>(axis)];
    if (!d.is_static()) return unsupported("equal split of a symbolic dim in {}", xs.to_string());
    int64_t total = d.value(), count = static_cast<int64_t>(n);
    if (im.opset() >= 18) {
      KILN_ASSIGN_OR_RETURN(int64_t num, im.attr_int("num_outputs", count));
      if (num != count) return invalid_argument("num_outputs {} but {} outputs", num, count);
      int64_t chunk = (total + count - 1) / count;
      for (int64_t k = 0; k < count; ++k) split.push_back(std::clamp<int64_t>(total - k * chunk, 0, chunk));
    } else {
      if (total % count != 0) return invalid_argument("dim {} does not split into {} equal parts", total, count);
      split.assign(n, total / count);
    }
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (n == 1) return forward(im, x);
  KILN_ASSIGN_OR_RETURN(Node * s, im.call(OpId::kSplit, {x}, {{"split_sizes", split}, {"dim", axis}}));
  for (size_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(Node * g, im.call(OpId::kGetitem, {s, static_cast<int64_t>(i)}));
    im.set_output(i, g);
  }
  return Status::Ok();
}

// Slice with operands computed when the model runs, or with negative steps: dynamic_slice, with
// ONNX's defaults (axes 0, 1, ...; steps 1) as constants.
Status dynamic_slice(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec ss, im.input_spec(1));
  const auto n = ss.numel();
  if (ss.rank() != 1 || !n) {
    return invalid_argument("input 'starts' ('{}'): got {}, expected a 1-D tensor of static length",
                            im.node().input(1), ss.to_string());
  }
  std::vector<Arg> args;
  for (size_t i = 0; i < 5; ++i) {
    if (im.has_input(i)) {
      KILN_ASSIGN_OR_RETURN(Node * v, im.input(i));
      args.emplace_back(v);
      continue;
    }
    Tensor t(DType::kI64, {*n});
    for (int64_t k = 0; k < *n; ++k) t.mutable_data_as<int64_t>()[k] = i == 3 ? k : 1;
    args.emplace_back(
        im.constant_node(std::move(t), im.node().output(0) + (i == 3 ? "_axes" : "_steps")));
  }
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kDynamicSlice, std::move(args)));
  return forward(im, y);
}

Status convert_slice(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  for (size_t i = 1; i < 5; ++i) {
    if (im.has_input(i) && im.is_runtime_input(i)) return dynamic_slice(im);
  }
  KILN_ASSIGN_OR_RETURN(auto starts, im.require_ints(1, "input 'starts'"));
  KILN_ASSIGN_OR_RETURN(auto ends, im.require_ints(2, "input 'ends'"));
  std::vector<int64_t> axes(starts.size()), steps(starts.size(), 1);
  std::iota(axes.begin(), axes.end(), 0);
  if (im.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(axes, im.require_ints(3, "input 'axes'"));
  }
  if (im.has_input(4)) {
    KILN_ASSIGN_OR_RETURN(steps, im.require_ints(4, "input 'steps'"));
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return invalid_argument("starts, ends, axes and steps differ in length");
  }
  // Negative steps follow ONNX's clamping rules, which dynamic_slice implements.
  if (std::any_of(steps.begin(), steps.end(), [](int64_t st) { return st < 0; })) {
    return dynamic_slice(im);
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a = axes[k];
    KILN_RETURN_IF_ERROR(normalize_axis(&a, xs.rank(), "input 'axes'"));
    int64_t s = starts[k], e = ends[k], st = steps[k];
    if (st == 0) return invalid_argument("input 'steps': a step is 0");
    const Dim& d = xs.shape[static_cast<size_t>(a)];
    Arg end = e >= kBig || (d.is_static() && e >= d.value()) ? Arg() : Arg(std::max(e, -kBig));
    Arg start = Arg(std::clamp(s, -kBig, kBig));
    if (s == 0 && end.is_none() && st == 1) continue;
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kSlice, {x},
                                     {{"dim", a}, {"start", start}, {"end", end}, {"step", st}}));
  }
  return forward(im, x);
}

Status convert_gather(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec is, im.input_spec(1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, xs.rank(), "attribute 'axis'"));
  if (!is_integral(is.dtype)) return invalid_argument("indices must be integers, got {}", dtype_name(is.dtype));
  const Dim& dim = xs.shape[static_cast<size_t>(axis)];
  const Tensor* idx = im.const_input(1);
  if (idx != nullptr) {
    Tensor fixed = idx->clone();
    for (int64_t i = 0; i < fixed.numel(); ++i) {
      int64_t v = fold::get_i64(fixed, i);
      if (dim.is_static() && (v < -dim.value() || v >= dim.value())) {
        return out_of_range("index {} is out of range for dim {} of size {}", v, axis, dim.value());
      }
      if (v < 0 && dim.is_static()) fixed.set_scalar_at(i, static_cast<double>(v + dim.value()));
    }
    if (fixed.rank() == 0) {
      KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
      KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kSelect, {x}, {{"dim", axis}, {"index", fold::get_i64(fixed, 0)}}));
      return forward(im, y);
    }
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
    Node* in = im.constant_node(fixed.reshaped({fixed.numel()}), im.node().input(1));
    KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kIndexSelect, {x, in}, {{"dim", axis}}));
    if (fixed.rank() != 1) {  // the gathered dim takes the indices' shape
      KILN_ASSIGN_OR_RETURN(
          y, im.call(OpId::kUnflatten, {y}, {{"dim", axis}, {"sizes", fixed.shape()}}));
    }
    return forward(im, y);
  }
  if (axis == 0 && xs.rank() == 2 && im.const_input(0) != nullptr) {
    KILN_ASSIGN_OR_RETURN(Node * w, im.input(0, Role::kWeight));
    KILN_ASSIGN_OR_RETURN(Node * i, im.input(1));
    KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kEmbedding, {w, i}));
    return forward(im, y);
  }
  // Indices of another rank: index_select of them flattened, then the gathered dim unflattened
  // to their shape (or dropped for a scalar index).
  std::vector<int64_t> sizes;
  for (const Dim& d : is.shape) {
    if (!d.is_static() && std::count(sizes.begin(), sizes.end(), -1) > 0) {
      return unsupported("runtime indices {} with more than one symbolic dim", is.to_string());
    }
    sizes.push_back(d.is_static() ? d.value() : -1);
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * i, im.input(1));
  if (is.rank() != 1) {
    KILN_ASSIGN_OR_RETURN(i, is.rank() == 0 ? im.call(OpId::kUnsqueeze, {i}, {{"dim", int64_t{0}}})
                                            : im.call(OpId::kFlatten, {i}));
  }
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kIndexSelect, {x, i}, {{"dim", axis}}));
  if (is.rank() == 0) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kSqueeze, {y}, {{"dim", std::vector<int64_t>{axis}}}));
  } else if (is.rank() > 1) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kUnflatten, {y}, {{"dim", axis}, {"sizes", sizes}}));
  }
  return forward(im, y);
}

// GatherElements is torch.gather (negative indices count from the end in both).
Status convert_gather_elements(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, r, "attribute 'axis'"));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * index, im.input(1));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kGather, {x, index}, {{"dim", axis}}));
  return forward(im, y);
}

// ReverseSequence: for batch entry b, the first sequence_lens[b] steps along the time axis in
// reverse order, the rest as they are; a gather along the time axis with index
// (t < len ? len - 1 - t : t).
Status convert_reverse_sequence(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(int64_t batch_axis, im.attr_int("batch_axis", 1));
  KILN_ASSIGN_OR_RETURN(int64_t time_axis, im.attr_int("time_axis", 0));
  if (xs.rank() < 2 || batch_axis < 0 || batch_axis > 1 || time_axis != 1 - batch_axis) {
    return invalid_argument(
        "attributes batch_axis {} and time_axis {}: expected 0 and 1 in some order (input {})",
        batch_axis, time_axis, xs.to_string());
  }
  KILN_ASSIGN_OR_RETURN(auto shape, im.static_input_shape(0, "the index tensor has its shape"));
  const int64_t steps = shape[static_cast<size_t>(time_axis)];
  std::vector<int64_t> t_shape(xs.rank(), 1), len_shape(xs.rank(), 1);
  t_shape[static_cast<size_t>(time_axis)] = steps;
  len_shape[static_cast<size_t>(batch_axis)] = shape[static_cast<size_t>(batch_axis)];
  Tensor t(DType::kI64, t_shape);
  for (int64_t i = 0; i < steps; ++i) t.mutable_data_as<int64_t>()[i] = i;
  Node* time = im.constant_node(std::move(t), "steps");
  KILN_ASSIGN_OR_RETURN(Node * len, im.input(1));
  KILN_ASSIGN_OR_RETURN(len, im.call(OpId::kCast, {len}, {{"dtype", DType::kI64}}));
  KILN_ASSIGN_OR_RETURN(len, im.call(OpId::kReshape, {len}, {{"shape", len_shape}}));
  KILN_ASSIGN_OR_RETURN(Node * inside, im.call(OpId::kLt, {time, len}));
  KILN_ASSIGN_OR_RETURN(Node * reversed, im.call(OpId::kSub, {len, Arg(int64_t{1})}));
  KILN_ASSIGN_OR_RETURN(reversed, im.call(OpId::kSub, {reversed, time}));
  KILN_ASSIGN_OR_RETURN(Node * index, im.call(OpId::kWhere, {inside, reversed, time}));
  KILN_ASSIGN_OR_RETURN(index, im.call(OpId::kExpand, {index}, {{"size", shape}}));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kGather, {x, index}, {{"dim", time_axis}}));
  return forward(im, y);
}

Status convert_expand(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  if (im.is_runtime_input(1)) {  // a shape the model computes: read when the program runs
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
    KILN_ASSIGN_OR_RETURN(Node * shape, im.input(1));
    KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kDynamicExpand, {x, shape}));
    return forward(im, y);
  }
  KILN_ASSIGN_OR_RETURN(DimsValue target, im.require_dims(1, "input 'shape'"));
  size_t r = std::max(xs.rank(), target.dims.size());
  std::vector<int64_t> size(r);
  bool same = xs.rank() == r;
  for (size_t k = 0; k < r; ++k) {
    bool has_in = k < xs.rank();
    bool has_t = k < target.dims.size();
    Dim in = has_in ? xs.shape[xs.rank() - 1 - k] : Dim(1);
    Dim t = has_t ? target.dims[target.dims.size() - 1 - k] : Dim(1);
    Dim out = t == Dim(1) ? in : t;
    if (!(in == Dim(1) || t == Dim(1) || in == t)) {
      return invalid_argument("cannot expand {} to the given shape", xs.to_string());
    }
    if (out != in) same = false;
    if (out.is_static()) {
      size[r - 1 - k] = out.value();
    } else if (has_in && out == in) {
      size[r - 1 - k] = -1;
    } else {
      return unsupported("expanding {} to a new symbolic dim {}", xs.to_string(), out.to_string());
    }
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (same) return forward(im, x);
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kExpand, {x}, {{"size", size}}));
  return forward(im, y);
}

Status convert_pad(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(std::string mode, im.attr_str("mode", "constant"));
  // ONNX's modes by the names kiln's pad takes.
  static constexpr std::pair<std::string_view, std::string_view> kModes[] = {
      {"constant", "constant"}, {"reflect", "reflect"}, {"edge", "replicate"}, {"wrap", "circular"}};
  auto found = std::find_if(std::begin(kModes), std::end(kModes),
                            [&](const auto& m) { return m.first == mode; });
  if (found == std::end(kModes)) {
    return invalid_argument("attribute 'mode': unknown value '{}'", mode);
  }
  const std::string kmode(found->second);
  std::vector<int64_t> axes(r);
  std::iota(axes.begin(), axes.end(), 0);
  if (im.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(axes, im.require_ints(3, "input 'axes'"));
    for (int64_t& a : axes) KILN_RETURN_IF_ERROR(normalize_axis(&a, r, "input 'axes'"));
  }
  // Pads or a value the model computes: read when the program runs.
  if (im.is_runtime_input(1) || (im.has_input(2) && im.is_runtime_input(2))) {
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
    KILN_ASSIGN_OR_RETURN(Node * pads, im.input(1));
    Arg value;
    if (im.has_input(2)) {
      KILN_ASSIGN_OR_RETURN(value, im.input(2));
    }
    KILN_ASSIGN_OR_RETURN(
        Node * y, im.call(OpId::kDynamicPad, {x, pads, value}, {{"axes", axes}, {"mode", kmode}}));
    return forward(im, y);
  }
  KILN_ASSIGN_OR_RETURN(auto pads, im.require_ints(1, "input 'pads'"));
  if (pads.size() != 2 * axes.size()) {
    return invalid_argument("input 'pads' has {} values, expected {}", pads.size(), 2 * axes.size());
  }
  std::vector<int64_t> begin(r, 0), end(r, 0);
  size_t n = axes.size();
  for (size_t k = 0; k < n; ++k) {
    begin[static_cast<size_t>(axes[k])] = pads[k];
    end[static_cast<size_t>(axes[k])] = pads[k + n];
  }
  double value = 0;
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(Tensor v, im.require_const(2, "input 'constant_value'"));
    if (v.numel() != 1) return invalid_argument("input 'constant_value' must be a scalar");
    value = fold::get_f64(v, 0);
  }
  // torch's pad list runs from the last dim backwards and may stop before the first dims.
  size_t first = r;
  for (size_t d = 0; d < r; ++d) {
    if (begin[d] != 0 || end[d] != 0) {
      first = d;
      break;
    }
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (first == r) return forward(im, x);
  std::vector<int64_t> list;
  for (size_t d = r; d-- > first;) {
    list.push_back(begin[d]);
    list.push_back(end[d]);
  }
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kPad, {x}, {{"pad", list}, {"mode", kmode}, {"value", value}}));
  return forward(im, y);
}

// What a Reduce* node asks: the dims (None: all), keepdims, and whether it is the identity
// (noop_with_empty_axes with no axes).
struct ReduceArgs {
  Arg dim;
  bool keepdim = true;
  bool noop = false;
};

Result<ReduceArgs> reduce_args(Importer& im, int64_t axes_input_from) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(auto axes, im.axes_attr_or_input("axes", 1, axes_input_from));
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, im.attr_int("keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t noop, im.attr_int("noop_with_empty_axes", 0));
  ReduceArgs ra;
  ra.keepdim = keepdims != 0;
  if (axes && !axes->empty()) {
    for (int64_t& a : *axes) KILN_RETURN_IF_ERROR(normalize_axis(&a, r, "axes"));
    ra.dim = Arg(*axes);
  } else {
    ra.noop = noop != 0;
  }
  return ra;
}

Status reduce(Importer& im, OpId op, int64_t axes_input_from) {
  KILN_ASSIGN_OR_RETURN(ReduceArgs ra, reduce_args(im, axes_input_from));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (ra.noop) return forward(im, x);
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(op, {x}, {{"dim", ra.dim}, {"keepdim", ra.keepdim}}));
  return forward_keep_dtype(im, y, xs.dtype);
}
Status convert_reduce_mean(Importer& im) { return reduce(im, OpId::kMean, 18); }
Status convert_reduce_sum(Importer& im) {
  if (im.opset() >= 13 && im.has_input(1) && im.is_runtime_input(1)) {  // axes the model computes
    KILN_ASSIGN_OR_RETURN(int64_t keepdims, im.attr_int("keepdims", 1));
    KILN_ASSIGN_OR_RETURN(int64_t noop, im.attr_int("noop_with_empty_axes", 0));
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
    KILN_ASSIGN_OR_RETURN(Node * axes, im.input(1));
    KILN_ASSIGN_OR_RETURN(
        Node * y, im.call(OpId::kDynamicSum, {x, axes},
                          {{"keepdim", keepdims != 0}, {"noop_with_empty_axes", noop != 0}}));
    return forward(im, y);
  }
  return reduce(im, OpId::kSum, 13);
}
Status convert_reduce_prod(Importer& im) { return reduce(im, OpId::kProd, 18); }
Status convert_reduce_max(Importer& im) { return reduce(im, OpId::kAmax, 18); }
Status convert_reduce_min(Importer& im) { return reduce(im, OpId::kAmin, 18); }

// The reductions ONNX defines by formula: a sum of f(x), then g of the sum.
enum class SumOf { kAbs, kSquare, kSelf };
Status reduce_sum_of(Importer& im, SumOf f, OpId after) {
  KILN_ASSIGN_OR_RETURN(ReduceArgs ra, reduce_args(im, 18));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (ra.noop) return forward(im, x);
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  Node* t = x;
  if (f == SumOf::kAbs) {
    KILN_ASSIGN_OR_RETURN(t, im.call(OpId::kAbs, {x}));
  }
  if (f == SumOf::kSquare) {
    KILN_ASSIGN_OR_RETURN(t, im.call(OpId::kMul, {x, x}));
  }
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kSum, {t}, {{"dim", ra.dim}, {"keepdim", ra.keepdim}}));
  if (after != OpId::kSum) {
    KILN_ASSIGN_OR_RETURN(y, im.call(after, {y}));
  }
  return forward_keep_dtype(im, y, xs.dtype);
}
Status convert_reduce_l1(Importer& im) { return reduce_sum_of(im, SumOf::kAbs, OpId::kSum); }
Status convert_reduce_l2(Importer& im) { return reduce_sum_of(im, SumOf::kSquare, OpId::kSqrt); }
Status convert_reduce_sum_square(Importer& im) { return reduce_sum_of(im, SumOf::kSquare, OpId::kSum); }
Status convert_reduce_log_sum(Importer& im) { return reduce_sum_of(im, SumOf::kSelf, OpId::kLog); }

// log(sum(exp(x - max))) + max: no overflow for large x.
Status convert_reduce_log_sum_exp(Importer& im) {
  KILN_ASSIGN_OR_RETURN(ReduceArgs ra, reduce_args(im, 18));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (ra.noop) return forward(im, x);
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(Node * m, im.call(OpId::kAmax, {x}, {{"dim", ra.dim}, {"keepdim", true}}));
  KILN_ASSIGN_OR_RETURN(Node * d, im.call(OpId::kSub, {x, m}));
  KILN_ASSIGN_OR_RETURN(d, im.call(OpId::kExp, {d}));
  KILN_ASSIGN_OR_RETURN(Node * s, im.call(OpId::kSum, {d}, {{"dim", ra.dim}, {"keepdim", ra.keepdim}}));
  KILN_ASSIGN_OR_RETURN(s, im.call(OpId::kLog, {s}));
  KILN_ASSIGN_OR_RETURN(Node * mr, im.call(OpId::kAmax, {x}, {{"dim", ra.dim}, {"keepdim", ra.keepdim}}));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kAdd, {s, mr}));
  return forward_keep_dtype(im, y, xs.dtype);
}

Status arg_extreme(Importer& im, OpId op) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, im.attr_int("keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t last, im.attr_int("select_last_index", 0));
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, r, "attribute 'axis'"));
  Kwargs kw = {{"dim", axis}, {"keepdim", keepdims != 0}};
  if (last != 0) kw.emplace_back("select_last", true);
  return unary(im, op, kw);
}
Status convert_argmax(Importer& im) { return arg_extreme(im, OpId::kArgmax); }
Status convert_argmin(Importer& im) { return arg_extreme(im, OpId::kArgmin); }

Status convert_cumsum(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(int64_t exclusive, im.attr_int("exclusive", 0));
  KILN_ASSIGN_OR_RETURN(int64_t reverse, im.attr_int("reverse", 0));
  if (im.is_runtime_input(1)) {  // an axis the model computes
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
    KILN_ASSIGN_OR_RETURN(Node * axis, im.input(1));
    KILN_ASSIGN_OR_RETURN(Node * y,
                          im.call(OpId::kDynamicCumsum, {x, axis},
                                  {{"exclusive", exclusive != 0}, {"reverse", reverse != 0}}));
    return forward(im, y);
  }
  KILN_ASSIGN_OR_RETURN(auto axis_v, im.require_ints(1, "input 'axis'"));
  if (axis_v.size() != 1) return invalid_argument("input 'axis' must hold one value");
  int64_t axis = axis_v[0];
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, r, "input 'axis'"));
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(
      Node * y, im.call(OpId::kCumsum, {x},
                        {{"dim", axis}, {"exclusive", exclusive != 0}, {"reverse", reverse != 0}}));
  return forward_keep_dtype(im, y, xs.dtype);
}

// TopK as kiln's topk (values and indices, always sorted: ONNX leaves the order free when
// sorted=0).
Status convert_top_k(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", -1));
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, r, "attribute 'axis'"));
  KILN_ASSIGN_OR_RETURN(int64_t largest, im.attr_int("largest", 1));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  Node* t = nullptr;
  if (im.is_runtime_input(1)) {  // a k the model computes
    KILN_ASSIGN_OR_RETURN(Node * k, im.input(1));
    KILN_ASSIGN_OR_RETURN(
        t, im.call(OpId::kDynamicTopk, {x, k}, {{"dim", axis}, {"largest", largest != 0}}));
  } else {
    KILN_ASSIGN_OR_RETURN(auto k, im.require_ints(1, "input 'K'"));
    if (k.size() != 1) return invalid_argument("input 'K' must hold one value");
    KILN_ASSIGN_OR_RETURN(
        t, im.call(OpId::kTopk, {x}, {{"k", k[0]}, {"dim", axis}, {"largest", largest != 0}}));
  }
  for (size_t i = 0; i < std::min<size_t>(im.num_outputs(), 2); ++i) {
    if (!im.output_used(i)) continue;
    KILN_ASSIGN_OR_RETURN(Node * g, im.call(OpId::kGetitem, {t, static_cast<int64_t>(i)}));
    im.set_output(i, g);
  }
  return Status::Ok();
}

// ScatterElements, ScatterND and GatherND as kiln's scatter / scatter_nd / gather_nd.
Status convert_scatter_elements(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, r, "attribute 'axis'"));
  KILN_ASSIGN_OR_RETURN(std::string reduction, im.attr_str("reduction", "none"));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * index, im.input(1));
  KILN_ASSIGN_OR_RETURN(Node * src, im.input(2));
  KILN_ASSIGN_OR_RETURN(
      Node * y, im.call(OpId::kScatter, {x, index, src}, {{"dim", axis}, {"reduce", reduction}}));
  return forward(im, y);
}

Status convert_scatter_nd(Importer& im) {
  KILN_ASSIGN_OR_RETURN(std::string reduction, im.attr_str("reduction", "none"));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * indices, im.input(1));
  KILN_ASSIGN_OR_RETURN(Node * updates, im.input(2));
  KILN_ASSIGN_OR_RETURN(Node * y,
                        im.call(OpId::kScatterNd, {x, indices, updates}, {{"reduce", reduction}}));
  return forward(im, y);
}

Status convert_gather_nd(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t batch_dims, im.attr_int("batch_dims", 0));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * indices, im.input(1));
  KILN_ASSIGN_OR_RETURN(Node * y,
                        im.call(OpId::kGatherNd, {x, indices}, {{"batch_dims", batch_dims}}));
  return forward(im, y);
}

// OneHot: values[1] where the (wrapped) index equals the position along the new axis, values[0]
// elsewhere; indices out of [-depth, depth) hit nothing. Float indices truncate to integers.
Status convert_one_hot(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec is, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec ds, im.input_spec(1));
  if (ds.rank() > 1 || ds.numel() != 1) {
    return invalid_argument("input 'depth' is {}, expected one value", ds.to_string());
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", -1));
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, is.rank() + 1, "attribute 'axis'"));
  // The depth as an i64 scalar (a number when known at import) and the positions 0..depth-1
  // along the new axis, broadcasting over the `trailing` dims after it.
  const size_t trailing = is.rank() - static_cast<size_t>(axis);
  Arg depth;
  Node* positions = nullptr;
  if (const Tensor* d = im.const_input(1)) {
    const double depth_v = d->scalar_at(0);
    if (!(depth_v >= 1) || depth_v > static_cast<double>(int64_t{1} << 31)) {
      return invalid_argument("input 'depth' is {}, expected a positive size", depth_v);
    }
    depth = static_cast<int64_t>(depth_v);
    std::vector<int64_t> shape(trailing + 1, 1);
    shape[0] = depth.to_int();
    Tensor p(DType::kI64, shape);
    for (int64_t i = 0; i < depth.to_int(); ++i) p.mutable_data_as<int64_t>()[i] = i;
    positions = im.constant_node(std::move(p), "positions");
  } else {  // computed when the model runs: positions from a run-time arange
    KILN_ASSIGN_OR_RETURN(Node * n, im.input(1));
    KILN_ASSIGN_OR_RETURN(n, im.call(OpId::kReshape, {n}, {{"shape", std::vector<int64_t>{}}}));
    if (ds.dtype != DType::kI64) {
      KILN_ASSIGN_OR_RETURN(n, im.call(OpId::kCast, {n}, {{"dtype", DType::kI64}}));
    }
    depth = n;
    auto scalar = [&](int64_t v, const char* hint) {
      Tensor t(DType::kI64, {});
      t.set_scalar_at(0, static_cast<double>(v));
      return im.constant_node(std::move(t), hint);
    };
    KILN_ASSIGN_OR_RETURN(positions,
                          im.call(OpId::kDynamicArange, {scalar(0, "zero"), n, scalar(1, "one")}));
    for (size_t d = 0; d < trailing; ++d) {
      KILN_ASSIGN_OR_RETURN(positions,
                            im.call(OpId::kUnsqueeze, {positions}, {{"dim", int64_t{-1}}}));
    }
  }
  KILN_ASSIGN_OR_RETURN(TensorSpec vs, im.input_spec(2));
  if (vs.rank() != 1 || !(vs.shape[0].is_static() && vs.shape[0].value() == 2)) {
    return invalid_argument("input 'values' is {}, expected [off, on]", vs.to_string());
  }
  KILN_ASSIGN_OR_RETURN(Node * index, im.input(0));
  if (is.dtype != DType::kI64) {
    KILN_ASSIGN_OR_RETURN(index, im.call(OpId::kCast, {index}, {{"dtype", DType::kI64}}));
  }
  KILN_ASSIGN_OR_RETURN(Node * negative, im.call(OpId::kLt, {index, int64_t{0}}));
  KILN_ASSIGN_OR_RETURN(Node * shifted, im.call(OpId::kAdd, {index, depth}));
  KILN_ASSIGN_OR_RETURN(index, im.call(OpId::kWhere, {negative, shifted, index}));
  KILN_ASSIGN_OR_RETURN(index, im.call(OpId::kUnsqueeze, {index}, {{"dim", axis}}));
  KILN_ASSIGN_OR_RETURN(Node * hit, im.call(OpId::kEq, {index, positions}));
  KILN_ASSIGN_OR_RETURN(Node * values, im.input(2));
  KILN_ASSIGN_OR_RETURN(
      Node * off, im.call(OpId::kSelect, {values}, {{"dim", int64_t{0}}, {"index", int64_t{0}}}));
  KILN_ASSIGN_OR_RETURN(
      Node * on, im.call(OpId::kSelect, {values}, {{"dim", int64_t{0}}, {"index", int64_t{1}}}));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kWhere, {hit, on, off}));
  return forward(im, y);
}

// EyeLike: ones on diagonal k of a matrix shaped like the input, a constant (the input's values
// are not read).
Status convert_eye_like(Importer& im) {
  KILN_ASSIGN_OR_RETURN(auto shape, im.static_input_shape(0, "EyeLike's output shape"));
  if (shape.size() != 2) return invalid_argument("input has rank {}, expected 2", shape.size());
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  DType dtype = xs.dtype;
  if (im.has_attr("dtype")) {
    KILN_ASSIGN_OR_RETURN(int64_t to, im.attr_int("dtype", 0));
    auto dt = dtype_from_onnx(static_cast<int32_t>(to));
    if (!dt)
      return unsupported("attribute 'dtype': type {} is not supported",
                         onnx_type_name(static_cast<int32_t>(to)));
    dtype = *dt;
  }
  KILN_ASSIGN_OR_RETURN(int64_t k, im.attr_int("k", 0));
  Tensor eye(dtype, shape);
  for (int64_t i = 0; i < shape[0]; ++i) {
    int64_t j = i + k;
    if (j >= 0 && j < shape[1]) eye.set_scalar_at(i * shape[1] + j, 1.0);
  }
  im.set_output_const(0, std::move(eye));
  return Status::Ok();
}

// Trilu: the upper (or lower) triangle from diagonal k of the last two dims, the rest zero; a
// constant mask over those dims selects it.
// Trilu keeps the elements on and above (upper) or on and below (lower) diagonal k: where
// column - row >= k (upper) or <= k (lower). A k known at import time makes the mask a constant;
// a k computed at run time is compared with a constant of column - row.
Status convert_trilu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(int64_t upper, im.attr_int("upper", 1));
  if (xs.rank() < 2) return invalid_argument("input {} has rank {}, expected at least 2", xs.to_string(), xs.rank());
  const Dim& rows = xs.shape[xs.rank() - 2];
  const Dim& cols = xs.shape[xs.rank() - 1];
  if (!rows.is_static() || !cols.is_static()) {
    return unsupported("Trilu over symbolic dims {}; fix them with a dim value option", xs.to_string());
  }
  int64_t k = 0;
  Node* k_node = nullptr;
  if (im.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(TensorSpec ks, im.input_spec(1));
    const auto kn = ks.numel();
    if (!is_integral(ks.dtype) || !kn || *kn != 1) {
      return invalid_argument("input 'k' ('{}'): got {}, expected one integer", im.node().input(1),
                              ks.to_string());
    }
    if (const Tensor* kt = im.const_input(1)) {
      k = fold::get_i64(*kt, 0);
    } else {
      KILN_ASSIGN_OR_RETURN(k_node, im.input(1));
      if (ks.dtype != DType::kI64) {
        KILN_ASSIGN_OR_RETURN(k_node, im.call(OpId::kCast, {k_node}, {{"dtype", DType::kI64}}));
      }
    }
  }
  const std::vector<int64_t> mshape = {rows.value(), cols.value()};
  const DType mdtype = k_node ? DType::kI64 : DType::kBool;
  KILN_ASSIGN_OR_RETURN(Tensor mask, Tensor::create(mdtype, mshape, "the Trilu mask"));
  for (int64_t i = 0; i < mshape[0]; ++i) {
    for (int64_t j = 0; j < mshape[1]; ++j) {
      const int64_t at = i * mshape[1] + j;
      if (k_node) {
        mask.mutable_data_as<int64_t>()[at] = j - i;
      } else {
        mask.mutable_data_as<uint8_t>()[at] = upper ? (j - i >= k) : (j - i <= k);
      }
    }
  }
  Node* m =
      im.constant_node(std::move(mask), im.node().output(0) + (k_node ? "_diagonal" : "_mask"));
  if (k_node) {
    KILN_ASSIGN_OR_RETURN(m, im.call(upper ? OpId::kGe : OpId::kLe, {m, k_node}));
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  Arg zero = is_floating(xs.dtype) ? Arg(0.0) : Arg(int64_t{0});
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kWhere, {m, x, zero}));
  return forward_keep_dtype(im, y, xs.dtype);
}

// Tile: repeats known at import time on a static shape become reshape / expand / reshape (x
// [d0, d1] -> [1, d0, 1, d1] -> [r0, d0, r1, d1] -> [r0*d0, r1*d1]); repeats the model computes
// (or a symbolic shape) become dynamic_tile.
Status convert_tile(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  const auto shape = xs.static_shape();
  if (!im.is_runtime_input(1) && shape) {
    KILN_ASSIGN_OR_RETURN(auto reps, im.require_ints(1, "input 'repeats'"));
    if (reps.size() != xs.rank()) {
      return invalid_argument("input 'repeats' has {} values, expected {} (the rank of {})",
                              reps.size(), xs.rank(), xs.to_string());
    }
    std::vector<int64_t> split, grown, out;
    for (size_t d = 0; d < reps.size(); ++d) {
      int64_t n = 0;
      if (reps[d] < 0 || __builtin_mul_overflow(reps[d], (*shape)[d], &n)) {
        return invalid_argument("input 'repeats': got [{}], invalid for {}", fmt::join(reps, ", "),
                                xs.to_string());
      }
      split.insert(split.end(), {1, (*shape)[d]});
      grown.insert(grown.end(), {reps[d], (*shape)[d]});
      out.push_back(n);
    }
    KILN_RETURN_IF_ERROR(check_shape(out, "Tile"));
    if (out == *shape) return forward(im, x);
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kReshape, {x}, {{"shape", split}}));
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kExpand, {x}, {{"size", grown}}));
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kReshape, {x}, {{"shape", out}}));
    return forward(im, x);
  }
  KILN_ASSIGN_OR_RETURN(Node * reps, im.input(1));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kDynamicTile, {x, reps}));
  return forward(im, y);
}

// NonZero: torch's nonzero ([n, rank]) transposed to ONNX's [rank, n].
Status convert_non_zero(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kNonzero, {x}));
  KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kPermute, {y}, {{"dims", std::vector<int64_t>{1, 0}}}));
  return forward(im, y);
}

// Compress: the slices along `axis` (of the flattened input without one) where the 1-D
// condition is true, gathered by the condition's non-zero positions.
Status convert_compress(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec cs, im.input_spec(1));
  if (cs.rank() != 1) {
    return invalid_argument("input 'condition' is {}, expected a 1-D tensor", cs.to_string());
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  int64_t axis = 0;
  if (im.has_attr("axis")) {
    KILN_ASSIGN_OR_RETURN(axis, im.attr_int("axis", 0));
    KILN_RETURN_IF_ERROR(normalize_axis(&axis, xs.rank(), "attribute 'axis'"));
  } else if (xs.rank() != 1) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kFlatten, {x}));
  }
  KILN_ASSIGN_OR_RETURN(Node * c, im.input(1));
  KILN_ASSIGN_OR_RETURN(Node * hits, im.call(OpId::kNonzero, {c}));
  KILN_ASSIGN_OR_RETURN(
      hits, im.call(OpId::kSelect, {hits}, {{"dim", int64_t{1}}, {"index", int64_t{0}}}));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kIndexSelect, {x, hits}, {{"dim", axis}}));
  return forward(im, y);
}

Status convert_non_max_suppression(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t center, im.attr_int("center_point_box", 0));
  std::vector<Arg> args;
  for (size_t i = 0; i < 5; ++i) {
    if (!im.has_input(i)) {
      args.emplace_back();
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Node * v, im.input(i));
    args.emplace_back(v);
  }
  KILN_ASSIGN_OR_RETURN(
      Node * y, im.call(OpId::kNonMaxSuppression, std::move(args), {{"center_point_box", center}}));
  return forward(im, y);
}

// Unique: values, first indices, inverse indices and counts, as the node lists them.
Status convert_unique(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t sorted, im.attr_int("sorted", 1));
  Arg dim;
  if (im.has_attr("axis")) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
    dim = axis;
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * u,
                        im.call(OpId::kUnique, {x}, {{"sorted", sorted != 0}, {"dim", dim}}));
  for (size_t i = 0; i < im.num_outputs() && i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(Node * item, im.call(OpId::kGetitem, {u, static_cast<int64_t>(i)}));
    im.set_output(i, item);
  }
  return Status::Ok();
}

constexpr OpEntry kTensorOps[] = {
    {"NonZero", convert_non_zero},
    {"Compress", convert_compress},
    {"NonMaxSuppression", convert_non_max_suppression},
    {"Unique", convert_unique},
    {"Tile", convert_tile},
    {"Flatten", convert_flatten},
    {"Reshape", convert_reshape},
    {"Transpose", convert_transpose},
    {"Squeeze", convert_squeeze},
    {"Unsqueeze", convert_unsqueeze},
    {"Concat", convert_concat},
    {"Split", convert_split},
    {"Slice", convert_slice},
    {"Gather", convert_gather},
    {"GatherElements", convert_gather_elements},
    {"Expand", convert_expand},
    {"Pad", convert_pad},
    {"ReduceMean", convert_reduce_mean},
    {"ReduceSum", convert_reduce_sum},
    {"ReduceProd", convert_reduce_prod},
    {"ReduceMax", convert_reduce_max},
    {"ReduceMin", convert_reduce_min},
    {"ReduceL1", convert_reduce_l1},
    {"ReduceL2", convert_reduce_l2},
    {"ReduceSumSquare", convert_reduce_sum_square},
    {"ReduceLogSum", convert_reduce_log_sum},
    {"ReduceLogSumExp", convert_reduce_log_sum_exp},
    {"ArgMax", convert_argmax},
    {"ArgMin", convert_argmin},
    {"ReverseSequence", convert_reverse_sequence},
    {"Trilu", convert_trilu},
    {"CumSum", convert_cumsum},
    {"OneHot", convert_one_hot},
    {"TopK", convert_top_k},
    {"ScatterElements", convert_scatter_elements},
    {"ScatterND", convert_scatter_nd},
    {"GatherND", convert_gather_nd},
    {"EyeLike", convert_eye_like},
};

}  // namespace

std::span<const OpEntry> tensor_ops() { return kTensorOps; }

}  // namespace kiln::onnx_import
