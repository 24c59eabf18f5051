// Kernels of the ops whose output shape is the value of a tensor computed when the program runs
// (ONNX's Reshape, Expand, ConstantOfShape, Range, Tile, Slice, Unsqueeze, Squeeze, ReduceSum,
// CumSum and TopK fed by run-time tensors). Every size read from a tensor is checked before
// anything is allocated.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable::k {
namespace {

constexpr int64_t kMaxDynamicElements = int64_t{1} << 32;

// Checks that `shape`, read from tensor `what`, is a shape kiln can allocate.
Status check_dynamic_shape(const std::vector<int64_t>& shape, const char* op, const char* what) {
  for (int64_t d : shape) {
    if (d < 0) {
      return invalid_argument("{}: '{}' holds [{}], a negative size", op, what,
                              fmt::join(shape, ", "));
    }
  }
  auto n = checked_numel(shape);
  if (!n || *n > kMaxDynamicElements) {
    return out_of_range("{}: '{}' holds [{}], more than 2^32 elements", op, what,
                        fmt::join(shape, ", "));
  }
  return Status::Ok();
}

// One value of scalar integer tensor input `i` (i64, i32 or i16).
Result<int64_t> int_scalar(const KernelArgs& args, size_t i, const char* op, const char* what) {
  KILN_RETURN_IF_ERROR(need_tensor(args, i, op, what));
  const Tensor& t = args.tensor(i);
  if (t.numel() == 1) {
    switch (t.dtype()) {
      case DType::kI64: return t.data_as<int64_t>()[0];
      case DType::kI32: return t.data_as<int32_t>()[0];
      case DType::kI16: return t.data_as<int16_t>()[0];
      default: break;
    }
  }
  return invalid_argument("{}: '{}' is {}, expected one i64, i32 or i16 value", op, what,
                          format_shape(t.dtype(), t.shape()));
}

}  // namespace

Status dynamic_expand(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "dynamic_expand", "self"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(auto shape, int_values(args, 1, "dynamic_expand", "shape"));
  const size_t rank = std::max(shape.size(), x.rank());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const size_t xl = rank - x.rank(), sl = rank - shape.size();
    const int64_t a = i < xl ? 1 : x.dim(i - xl);
    const int64_t b = i < sl ? 1 : shape[i - sl];
    if (b < 0) {
      return invalid_argument("dynamic_expand: shape [{}] holds a negative size",
                              fmt::join(shape, ", "));
    }
    if (a != b && a != 1 && b != 1) {
      return invalid_argument("dynamic_expand: input [{}] does not broadcast with shape [{}]",
                              fmt::join(x.shape(), ", "), fmt::join(shape, ", "));
    }
    out[i] = a == 1 ? b : a;
  }
  KILN_RETURN_IF_ERROR(check_dynamic_shape(out, "dynamic_expand", "shape"));
  outputs->push_back(broadcast_to(ctx, x, out));
  return Status::Ok();
}

Status dynamic_full(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_ASSIGN_OR_RETURN(auto size, int_values(args, 0, "dynamic_full", "size"));
  KILN_RETURN_IF_ERROR(check_dynamic_shape(size, "dynamic_full", "size"));
  Tensor one =
      scalar_tensor(args.attr_float("fill_value", 0.0), args.attr_dtype("dtype", DType::kF32));
  outputs->push_back(broadcast_to(ctx, one, size));
  return Status::Ok();
}

// ONNX Range: integers are counted exactly; floats as ONNX Runtime does, start + i * step.
Status dynamic_arange(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* names[] = {"start", "end", "step"};
  for (size_t i = 0; i < 3; ++i) {
    KILN_RETURN_IF_ERROR(need_tensor(args, i, "dynamic_arange", names[i]));
    if (args.tensor(i).numel() != 1) {
      return invalid_argument("dynamic_arange: '{}' holds {} values, expected one", names[i],
                              args.tensor(i).numel());
    }
  }
  const DType dtype = args.tensor(0).dtype();
  int64_t count = 0;
  if (is_floating(dtype)) {
    const double start = args.tensor(0).scalar_at(0), end = args.tensor(1).scalar_at(0),
                 step = args.tensor(2).scalar_at(0);
    if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
      return invalid_argument("dynamic_arange: start {}, end {}, step {} are invalid", start, end,
                              step);
    }
    const double n = std::ceil((end - start) / step);
    if (n > static_cast<double>(kMaxDynamicElements)) {
      return out_of_range("dynamic_arange: {} elements are too many", n);
    }
    count = n > 0 ? static_cast<int64_t>(n) : 0;  // a step leading away: empty
    Tensor out = ctx.allocate(dtype, {count});
    for (int64_t i = 0; i < count; ++i) out.set_scalar_at(i, start + static_cast<double>(i) * step);
    outputs->push_back(std::move(out));
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(int64_t start, int_scalar(args, 0, "dynamic_arange", "start"));
  KILN_ASSIGN_OR_RETURN(int64_t end, int_scalar(args, 1, "dynamic_arange", "end"));
  KILN_ASSIGN_OR_RETURN(int64_t step, int_scalar(args, 2, "dynamic_arange", "step"));
  if (step == 0) return invalid_argument("dynamic_arange: step is 0");
  // ceil((end - start) / step) without overflow: the span in 128 bits.
  const __int128 span = static_cast<__int128>(end) - start;
  const __int128 n =
      span == 0 || (span > 0) != (step > 0) ? 0 : (span + step - (step > 0 ? 1 : -1)) / step;
  if (n > kMaxDynamicElements) {
    return out_of_range("dynamic_arange: start {}, end {}, step {} give more than 2^32 elements",
                        start, end, step);
  }
  count = static_cast<int64_t>(n);
  Tensor out = ctx.allocate(dtype, {count});
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = start + i * step;  // within [start, end): no overflow
    switch (dtype) {
      case DType::kI64:
        writable<int64_t>(out)[i] = v;
        break;
      case DType::kI32:
        writable<int32_t>(out)[i] = static_cast<int32_t>(v);
        break;
      default:
        writable<int16_t>(out)[i] = static_cast<int16_t>(v);
        break;
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status dynamic_reshape(KernelContext&, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "dynamic_reshape", "self"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(auto shape, int_values(args, 1, "dynamic_reshape", "shape"));
  const bool allowzero = args.attr_bool("allowzero", false);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 0 || allowzero) continue;
    if (i >= x.rank()) {
      return invalid_argument(
          "dynamic_reshape: shape [{}] copies dim {} (a 0), but the input [{}] has rank {}",
          fmt::join(shape, ", "), i, fmt::join(x.shape(), ", "), x.rank());
    }
    shape[i] = x.dim(i);
  }
  KILN_ASSIGN_OR_RETURN(shape, infer_view_shape(std::move(shape), x.numel(), "dynamic_reshape"));
  outputs->push_back(x.reshaped(std::move(shape)));
  return Status::Ok();
}

namespace {

// Axes read from input `i`, each wrapped into [0, rank); repeats are errors.
Result<std::vector<int64_t>> axes_values(const KernelArgs& args, size_t i, int64_t rank,
                                         const char* op) {
  KILN_ASSIGN_OR_RETURN(auto axes, int_values(args, i, op, "axes"));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) {
      return invalid_argument("{}: axis {} is out of range for rank {}", op, a, rank);
    }
    if (a < 0) a += rank;
    if (seen[static_cast<size_t>(a)]) return invalid_argument("{}: axis {} repeats", op, a);
    seen[static_cast<size_t>(a)] = true;
  }
  return axes;
}

// Runs kernel `op` on `x` with `attrs`: an op whose attribute the program reads from a tensor.
// The result keeps `keep`'s dtype (ONNX's reductions and CumSum keep it; torch's widen ints).
Status run_with_attrs(KernelContext& ctx, const char* op, const Tensor& x,
                      std::vector<KernelAttr> attrs, std::vector<Tensor>* outputs,
                      bool keep_dtype) {
  KernelArgs a;
  a.inputs.push_back(KernelInput::of(&x));
  a.attrs = std::move(attrs);
  KILN_RETURN_IF_ERROR(find_kernel(op)(ctx, a, outputs));
  if (keep_dtype && !outputs->empty() && (*outputs)[0].dtype() != x.dtype()) {
    (*outputs)[0] = convert(ctx, (*outputs)[0], x.dtype());
  }
  return Status::Ok();
}

// out[i...] = x[start + i * step ...] for every output index (out's shape gives the counts).
void strided_copy(const Tensor& x, Tensor& out, const std::vector<int64_t>& start,
                  const std::vector<int64_t>& step) {
  const size_t rank = x.rank(), es = dtype_size(x.dtype());
  if (out.numel() == 0) return;
  const std::vector<int64_t> xs = dense_strides(x.shape());
  std::vector<int64_t> idx(rank, 0);
  const uint8_t* px = static_cast<const uint8_t*>(x.data());
  uint8_t* po = writable<uint8_t>(out);
  for (int64_t n = 0; n < out.numel(); ++n) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src += (start[d] + idx[d] * step[d]) * xs[d];
    std::memcpy(po + static_cast<size_t>(n) * es, px + static_cast<size_t>(src) * es, es);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < out.dim(d)) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

Status dynamic_tile(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "dynamic_tile", "self"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(auto repeats, int_values(args, 1, "dynamic_tile", "repeats"));
  if (repeats.size() != x.rank()) {
    return invalid_argument("dynamic_tile: 'repeats' holds {} values, the input [{}] has rank {}",
                            repeats.size(), fmt::join(x.shape(), ", "), x.rank());
  }
  std::vector<int64_t> shape(x.rank());
  for (size_t d = 0; d < x.rank(); ++d) {
    if (repeats[d] < 0 || __builtin_mul_overflow(x.dim(d), repeats[d], &shape[d])) {
      return invalid_argument("dynamic_tile: 'repeats' holds [{}], invalid for input [{}]",
                              fmt::join(repeats, ", "), fmt::join(x.shape(), ", "));
    }
  }
  KILN_RETURN_IF_ERROR(check_dynamic_shape(shape, "dynamic_tile", "repeats"));
  Tensor out = ctx.allocate(x.dtype(), shape);
  if (out.numel() > 0) {
    // Output element i... reads x at i mod the input's dims.
    const size_t rank = x.rank(), es = dtype_size(x.dtype());
    const std::vector<int64_t> xs = dense_strides(x.shape());
    std::vector<int64_t> idx(rank, 0);
    const uint8_t* px = static_cast<const uint8_t*>(x.data());
    uint8_t* po = writable<uint8_t>(out);
    for (int64_t n = 0; n < out.numel(); ++n) {
      int64_t src = 0;
      for (size_t d = 0; d < rank; ++d) src += (idx[d] % x.dim(d)) * xs[d];
      std::memcpy(po + static_cast<size_t>(n) * es, px + static_cast<size_t>(src) * es, es);
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

// ONNX Slice: negative starts / ends count from the end; they are clamped to [0, dim] for a
// positive step and to [-1, dim - 1] for a negative one.
Status dynamic_slice(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "dynamic_slice";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  const Tensor& x = args.tensor(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  KILN_ASSIGN_OR_RETURN(auto starts, int_values(args, 1, op, "starts"));
  KILN_ASSIGN_OR_RETURN(auto ends, int_values(args, 2, op, "ends"));
  KILN_ASSIGN_OR_RETURN(auto axes, axes_values(args, 3, rank, op));
  KILN_ASSIGN_OR_RETURN(auto steps, int_values(args, 4, op, "steps"));
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return invalid_argument("{}: starts, ends, axes and steps hold {}, {}, {} and {} values", op,
                            starts.size(), ends.size(), axes.size(), steps.size());
  }
  std::vector<int64_t> start(x.rank(), 0), step(x.rank(), 1), shape = x.shape();
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t a = static_cast<size_t>(axes[k]);
    const int64_t d = x.dim(a), st = steps[k];
    if (st == 0) return invalid_argument("{}: step 0 on axis {}", op, a);
    int64_t b = starts[k], e = ends[k];
    if (b < 0) b = b < -d ? -d - 1 : b + d;  // no overflow near INT64_MIN
    if (e < 0) e = e < -d ? -d - 1 : e + d;
    const int64_t lo = st > 0 ? 0 : -1, hi = st > 0 ? d : d - 1;
    b = std::clamp(b, lo, hi);
    e = std::clamp(e, lo, hi);
    const int64_t span = st > 0 ? e - b : b - e, by = st > 0 ? st : -st;
    shape[a] = span <= 0 ? 0 : (span + by - 1) / by;
    start[a] = b;
    step[a] = st;
  }
  Tensor out = ctx.allocate(x.dtype(), shape);
  strided_copy(x, out, start, step);
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status dynamic_unsqueeze(KernelContext&, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "dynamic_unsqueeze", "self"));
  const Tensor& x = args.tensor(0);
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, "dynamic_unsqueeze", "axes"));
  // The output rank: one new dim per axis (axes_values checks the axes against it).
  const int64_t rank = static_cast<int64_t>(x.rank()) + args.tensor(1).numel();
  KILN_ASSIGN_OR_RETURN(auto axes, axes_values(args, 1, rank, "dynamic_unsqueeze"));
  std::vector<bool> unit(static_cast<size_t>(rank), false);
  for (int64_t a : axes) unit[static_cast<size_t>(a)] = true;
  std::vector<int64_t> shape;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) {
    shape.push_back(unit[static_cast<size_t>(d)] ? 1 : x.dim(next++));
  }
  outputs->push_back(x.reshaped(std::move(shape)));
  return Status::Ok();
}

Status dynamic_squeeze(KernelContext&, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "dynamic_squeeze", "self"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(auto axes,
                        axes_values(args, 1, static_cast<int64_t>(x.rank()), "dynamic_squeeze"));
  std::vector<bool> drop(x.rank(), false);
  for (int64_t a : axes) {
    if (x.dim(static_cast<size_t>(a)) != 1) {
      return invalid_argument("dynamic_squeeze: dim {} of the input [{}] is not 1", a,
                              fmt::join(x.shape(), ", "));
    }
    drop[static_cast<size_t>(a)] = true;
  }
  std::vector<int64_t> shape;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (!drop[d]) shape.push_back(x.dim(d));
  }
  outputs->push_back(x.reshaped(std::move(shape)));
  return Status::Ok();
}

Status dynamic_sum(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "dynamic_sum", "self"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(auto axes,
                        axes_values(args, 1, static_cast<int64_t>(x.rank()), "dynamic_sum"));
  const bool keepdim = args.attr_bool("keepdim", true);
  if (axes.empty()) {
    if (args.attr_bool("noop_with_empty_axes", false)) {
      outputs->push_back(x);
      return Status::Ok();
    }
    for (int64_t d = 0; d < static_cast<int64_t>(x.rank()); ++d) axes.push_back(d);
  }
  return run_with_attrs(ctx, "sum", x, {{"dim", axes}, {"keepdim", keepdim}}, outputs, true);
}

Status dynamic_cumsum(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "dynamic_cumsum", "self"));
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_scalar(args, 1, "dynamic_cumsum", "axis"));
  return run_with_attrs(ctx, "cumsum", args.tensor(0),
                        {{"dim", axis},
                         {"exclusive", args.attr_bool("exclusive", false)},
                         {"reverse", args.attr_bool("reverse", false)}},
                        outputs, true);
}

Status dynamic_pad(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "dynamic_pad";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(auto pads, int_values(args, 1, op, "pads"));
  const auto r = static_cast<int64_t>(x.rank());
  std::vector<int64_t> axes(static_cast<size_t>(r));
  std::iota(axes.begin(), axes.end(), 0);
  if (args.attr("axes") != nullptr) axes = args.attr_ints("axes", {});
  if (pads.size() != 2 * axes.size()) {
    return invalid_argument("{}: 'pads' holds {} values, expected {}", op, pads.size(),
                            2 * axes.size());
  }
  std::vector<int64_t> begin(static_cast<size_t>(r), 0), end(static_cast<size_t>(r), 0),
      shape = x.shape();
  for (size_t k = 0; k < axes.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(int64_t d, norm_dim(axes[k], r, op));
    const int64_t b = pads[k], e = pads[k + axes.size()];
    if (b > kMaxDynamicElements || b < -kMaxDynamicElements || e > kMaxDynamicElements ||
        e < -kMaxDynamicElements) {
      return out_of_range("{}: 'pads' holds {} and {} for dim {}, more than 2^32", op, b, e, d);
    }
    begin[static_cast<size_t>(d)] = b;
    end[static_cast<size_t>(d)] = e;
    shape[static_cast<size_t>(d)] += b + e;
  }
  KILN_RETURN_IF_ERROR(check_dynamic_shape(shape, op, "pads"));
  double value = 0;
  if (args.has_tensor(2)) {
    const Tensor& v = args.tensor(2);
    if (v.numel() != 1) {
      return invalid_argument("{}: 'value' is {}, expected one value", op,
                              format_shape(v.dtype(), v.shape()));
    }
    value = v.scalar_at(0);
  }
  // pad's list runs from the last dim backwards, a (begin, end) pair each.
  std::vector<int64_t> list;
  for (int64_t d = r; d-- > 0;) {
    list.push_back(begin[static_cast<size_t>(d)]);
    list.push_back(end[static_cast<size_t>(d)]);
  }
  return run_with_attrs(
      ctx, "pad", x, {{"pad", list}, {"mode", args.attr_str("mode", "constant")}, {"value", value}},
      outputs, false);
}

Status dynamic_topk(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "dynamic_topk", "self"));
  KILN_ASSIGN_OR_RETURN(int64_t k, int_scalar(args, 1, "dynamic_topk", "k"));
  return run_with_attrs(
      ctx, "topk", args.tensor(0),
      {{"k", k}, {"dim", args.attr_int("dim", -1)}, {"largest", args.attr_bool("largest", true)}},
      outputs, false);
}

}  // namespace kiln::portable::k
