// Indexing, padding, creation, casts and quantization kernels.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable::k {
namespace {

// Index tensor as int64 values, as they are.
Result<std::vector<int64_t>> read_index_values(const Tensor& idx, const char* op) {
  if (!is_integral(idx.dtype())) {
    return invalid_argument("{}: index dtype {} is not an integer type", op, dtype_name(idx.dtype()));
  }
  std::vector<int64_t> out(static_cast<size_t>(idx.numel()));
  dispatch_all(idx.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* p = idx.data_as<T>();
    for (int64_t i = 0; i < idx.numel(); ++i) out[static_cast<size_t>(i)] = static_cast<int64_t>(p[i]);
  });
  return out;
}

// Index tensor as int64 values, checked against `bound` (negatives wrap once, as in torch).
Result<std::vector<int64_t>> read_indices(const Tensor& idx, int64_t bound, const char* op) {
  KILN_ASSIGN_OR_RETURN(auto out, read_index_values(idx, op));
  for (auto& v : out) {
    if (v < -bound || v >= bound) {
      return invalid_argument("{}: index {} is out of range for size {}", op, v, bound);
    }
    if (v < 0) v += bound;
  }
  return out;
}

}  // namespace

Status index_select(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "index_select";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, op, "index"));
  const Tensor &x = args.tensor(0), &index = args.tensor(1);
  if (index.rank() > 1) return invalid_argument("{}: index must be 0-D or 1-D", op);
  KILN_ASSIGN_OR_RETURN(int64_t dim, norm_dim(args.attr_int("dim", 0), static_cast<int64_t>(x.rank()), op));
  std::vector<int64_t> xs = x.rank() == 0 ? std::vector<int64_t>{1} : x.shape();
  int64_t n = xs[static_cast<size_t>(dim)];
  KILN_ASSIGN_OR_RETURN(auto idx, read_indices(index, n, op));
  std::vector<int64_t> shape = x.shape();
  if (x.rank() > 0) shape[static_cast<size_t>(dim)] = static_cast<int64_t>(idx.size());
  Tensor out = ctx.allocate(x.dtype(), shape);
  const size_t es = dtype_size(x.dtype());
  int64_t outer = dims_product(xs, 0, static_cast<size_t>(dim)),
          inner = dims_product(xs, static_cast<size_t>(dim) + 1, xs.size());
  size_t row = static_cast<size_t>(inner) * es;
  const uint8_t* px = static_cast<const uint8_t*>(x.data());
  uint8_t* po = writable<uint8_t>(out);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i : idx) {
      std::memcpy(po, px + static_cast<size_t>(o * n + i) * row, row);
      po += row;
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status embedding(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "embedding", "weight"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, "embedding", "indices"));
  const Tensor &w = args.tensor(0), &index = args.tensor(1);
  if (w.rank() != 2) return invalid_argument("embedding: weight must be 2-D, got [{}]", fmt::join(w.shape(), ", "));
  KILN_ASSIGN_OR_RETURN(auto idx, read_indices(index, w.dim(0), "embedding"));
  std::vector<int64_t> shape = index.shape();
  shape.push_back(w.dim(1));
  Tensor out = ctx.allocate(w.dtype(), shape);
  size_t row = static_cast<size_t>(w.dim(1)) * dtype_size(w.dtype());
  const uint8_t* pw = static_cast<const uint8_t*>(w.data());
  uint8_t* po = writable<uint8_t>(out);
  for (int64_t i : idx) {
    std::memcpy(po, pw + static_cast<size_t>(i) * row, row);
    po += row;
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status gather(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "gather";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, op, "index"));
  const Tensor &x = args.tensor(0), &index = args.tensor(1);
  if (index.rank() != x.rank()) return invalid_argument("{}: index rank {} differs from input rank {}", op, index.rank(), x.rank());
  KILN_ASSIGN_OR_RETURN(int64_t dim, norm_dim(args.attr_int("dim", 0), static_cast<int64_t>(x.rank()), op));
  for (size_t d = 0; d < x.rank(); ++d) {
    if (d != static_cast<size_t>(dim) && index.dim(d) > x.dim(d)) {
      return invalid_argument("{}: index [{}] is larger than input [{}] at dim {}", op, fmt::join(index.shape(), ", "), fmt::join(x.shape(), ", "), d);
    }
  }
  int64_t n = x.rank() == 0 ? 1 : x.dim(static_cast<size_t>(dim));
  KILN_ASSIGN_OR_RETURN(auto idx, read_indices(index, n, op));
  Tensor out = ctx.allocate(x.dtype(), index.shape());
  const size_t es = dtype_size(x.dtype());
  auto xstr = dense_strides(x.shape());
  std::vector<int64_t> pos(index.rank(), 0);
  const uint8_t* px = static_cast<const uint8_t*>(x.data());
  uint8_t* po = writable<uint8_t>(out);
  for (int64_t i = 0; i < index.numel(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < pos.size(); ++d) off += (d == static_cast<size_t>(dim) ? idx[static_cast<size_t>(i)] : pos[d]) * xstr[d];
    std::memcpy(po + static_cast<size_t>(i) * es, px + static_cast<size_t>(off) * es, es);
    for (size_t d = pos.size(); d-- > 0;) {
      if (++pos[d] < index.dim(d)) break;
      pos[d] = 0;
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status index_put(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "index_put";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 2, op, "values"));
  if (args.inputs.size() < 2 || args.inputs[1].kind != KernelInput::Kind::kTensorList) {
    return invalid_argument("{}: argument 'indices' must be a tensor list", op);
  }
  const Tensor& x = args.tensor(0);
  const auto& ilist = args.inputs[1].list;
  if (ilist.empty() || ilist.size() > x.rank()) {
    return invalid_argument("{}: {} index tensors for a rank-{} input", op, ilist.size(), x.rank());
  }
  // A single bool mask over the leading dims becomes the coordinates of its true elements.
  std::vector<Tensor> idx_tensors;
  if (ilist.size() == 1 && ilist[0]->dtype() == DType::kBool) {
    const Tensor& m = *ilist[0];
    if (m.rank() > x.rank()) return invalid_argument("{}: mask rank exceeds input rank", op);
    for (size_t d = 0; d < m.rank(); ++d) {
      if (m.dim(d) != x.dim(d)) return invalid_argument("{}: mask [{}] does not match input [{}]", op, fmt::join(m.shape(), ", "), fmt::join(x.shape(), ", "));
    }
    const uint8_t* pm = m.data_as<uint8_t>();
    int64_t count = 0;
    for (int64_t i = 0; i < m.numel(); ++i) count += pm[i] != 0;
    auto ms = dense_strides(m.shape());
    for (size_t d = 0; d < m.rank(); ++d) idx_tensors.emplace_back(DType::kI64, std::vector<int64_t>{count});
    int64_t k = 0;
    for (int64_t i = 0; i < m.numel(); ++i) {
      if (!pm[i]) continue;
      for (size_t d = 0; d < m.rank(); ++d) idx_tensors[d].mutable_data_as<int64_t>()[k] = (i / ms[d]) % m.dim(d);
      ++k;
    }
  } else {
    for (const Tensor* t : ilist) idx_tensors.push_back(*t);
  }
  std::vector<int64_t> ishape;
  for (const auto& t : idx_tensors) {
    KILN_ASSIGN_OR_RETURN(ishape, broadcast_shapes(ishape, t.shape(), op));
  }
  const size_t k = idx_tensors.size();
  std::vector<std::vector<int64_t>> coords;
  for (size_t d = 0; d < k; ++d) {
    Tensor b = broadcast_to(ctx, idx_tensors[d], ishape);
    KILN_ASSIGN_OR_RETURN(auto c, read_indices(b, x.dim(d), op));
    coords.push_back(std::move(c));
  }
  int64_t count = dims_product(ishape, 0, ishape.size());
  int64_t inner = dims_product(x.shape(), k, x.rank());
  std::vector<int64_t> vshape = ishape;
  vshape.insert(vshape.end(), x.shape().begin() + static_cast<long>(k), x.shape().end());
  Tensor values = convert(ctx, args.tensor(2), x.dtype());
  KILN_ASSIGN_OR_RETURN(auto vb, broadcast_shapes(values.shape(), vshape, op));
  if (vb != vshape) return invalid_argument("{}: values [{}] do not broadcast to [{}]", op, fmt::join(values.shape(), ", "), fmt::join(vshape, ", "));
  values = broadcast_to(ctx, values, vshape);
  bool accumulate = args.attr_bool("accumulate", false);
  Tensor out = ctx.allocate(x.dtype(), x.shape());
  if (x.nbytes() > 0) std::memcpy(writable<uint8_t>(out), x.data(), x.nbytes());
  auto xstr = dense_strides(x.shape());
  Status st = Status::Ok();
  dispatch_all(x.dtype(), [&](auto t) {
    using T = decltype(t);
    if (accumulate && (x.dtype() == DType::kF16 || x.dtype() == DType::kBF16 || x.dtype() == DType::kBool)) {
      st = unsupported("{}: accumulate for dtype {}", op, dtype_name(x.dtype()));
      return;
    }
    T* po = writable<T>(out);
    const T* pv = values.data_as<T>();
    for (int64_t i = 0; i < count; ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < k; ++d) off += coords[d][static_cast<size_t>(i)] * xstr[d];
      for (int64_t j = 0; j < inner; ++j) {
        if (accumulate) {
          po[off + j] = static_cast<T>(po[off + j] + pv[i * inner + j]);
        } else {
          po[off + j] = pv[i * inner + j];
        }
      }
    }
  });
  KILN_RETURN_IF_ERROR(st);
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status pad(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "pad", "self"));
  const Tensor& x = args.tensor(0);
  auto p = args.attr_ints("pad", {});
  std::string mode = args.attr_str("mode", "constant");
  double value = args.attr_float("value", 0.0);
  if (p.size() % 2 != 0 || p.size() / 2 > x.rank()) {
    return invalid_argument("pad: 'pad' has {} values for a rank-{} input", p.size(), x.rank());
  }
  int mode_id = mode == "constant" ? 0 : mode == "reflect" ? 1 : mode == "replicate" ? 2 : mode == "circular" ? 3 : -1;
  if (mode_id < 0) return invalid_argument("pad: mode '{}' (expected constant, reflect, replicate or circular)", mode);
  const size_t r = x.rank();
  std::vector<int64_t> before(r, 0), shape = x.shape();
  // torch order: last dim first, (begin, end) pairs.
  for (size_t i = 0; i < p.size() / 2; ++i) {
    size_t d = r - 1 - i;
    before[d] = p[2 * i];
    shape[d] += p[2 * i] + p[2 * i + 1];
    if (shape[d] < 0) return invalid_argument("pad: dim {} becomes negative", d);
    if (mode_id == 1 && (p[2 * i] >= x.dim(d) || p[2 * i + 1] >= x.dim(d))) {
      return invalid_argument("pad: reflect padding must be smaller than dim {} (size {})", d, x.dim(d));
    }
    if (mode_id != 0 && x.dim(d) == 0) return invalid_argument("pad: cannot {}-pad an empty dim", mode);
  }
  Tensor out = ctx.allocate(x.dtype(), shape);
  const size_t es = dtype_size(x.dtype());
  Tensor fill = scalar_tensor(value, x.dtype());
  auto xstr = dense_strides(x.shape());
  std::vector<int64_t> pos(r, 0);
  const uint8_t* px = static_cast<const uint8_t*>(x.data());
  uint8_t* po = writable<uint8_t>(out);
  int64_t total = dims_product(shape, 0, r);
  for (int64_t i = 0; i < total; ++i) {
    int64_t off = 0;
    bool inside = true;
    for (size_t d = 0; d < r && inside; ++d) {
      int64_t c = pos[d] - before[d], n = x.dim(d);
      if (c < 0 || c >= n) {
        switch (mode_id) {
          case 0: inside = false; break;
          case 1: {
            int64_t period = 2 * (n - 1);
            c = period == 0 ? 0 : ((c % period) + period) % period;
            if (c >= n) c = period - c;
            break;
          }
          case 2: c = std::clamp<int64_t>(c, 0, n - 1); break;
          default: c = ((c % n) + n) % n;
        }
      }
      off += c * xstr[d];
    }
    std::memcpy(po + static_cast<size_t>(i) * es, inside ? px + static_cast<size_t>(off) * es : static_cast<const uint8_t*>(fill.data()), es);
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status cast(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "cast", "self"));
  outputs->push_back(convert(ctx, args.tensor(0), args.attr_dtype("dtype", DType::kF32)));
  return Status::Ok();
}

Status full(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  auto size = args.attr_ints("size", {});
  auto n = checked_numel(size);
  if (!n || *n > (int64_t{1} << 32)) return invalid_argument("full: size [{}] is invalid", fmt::join(size, ", "));
  DType dtype = args.attr_dtype("dtype", DType::kF32);
  Tensor one = scalar_tensor(args.attr_float("fill_value", 0.0), dtype);
  outputs->push_back(broadcast_to(ctx, one, size));
  return Status::Ok();
}

Status arange(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  double start = args.attr_float("start", 0.0);
  auto end = args.attr_opt_float("end");
  double step = args.attr_float("step", 1.0);
  if (!end) return invalid_argument("arange: 'end' is required");
  if (step == 0 || !std::isfinite(start) || !std::isfinite(*end) || !std::isfinite(step)) {
    return invalid_argument("arange: start {}, end {}, step {} are invalid", start, *end, step);
  }
  double count_d = std::ceil((*end - start) / step);
  if (count_d > static_cast<double>(int64_t{1} << 32)) return invalid_argument("arange: too many elements ({})", count_d);
  int64_t count = count_d > 0 ? static_cast<int64_t>(count_d) : 0;  // no cast of a huge negative
  DType dtype = args.attr_dtype("dtype", DType::kI64);
  Tensor out = ctx.allocate(dtype, {count});
  for (int64_t i = 0; i < count; ++i) out.set_scalar_at(i, start + static_cast<double>(i) * step);
  outputs->push_back(std::move(out));
  return Status::Ok();
}

// ---- Quantization (ExecuTorch's quantized_decomposed ops, with PyTorch's arithmetic).
//
// Bit for bit what Debian's torch 1.13 computes (ATen's quantize_val / dequantize kernels,
// checked against torch.quantize_per_tensor / quantize_per_channel and their dequantize by
// tests/backends/portable/quantize_test.cc on a golden file torch wrote):
//   quantize:   q = clamp(float(zp) + nearbyint(x * (1.0f / float(scale))), qmin, qmax), every
//               step in f32 (1.0f / float(scale), not float(1.0 / scale): they differ for scales
//               that are not f32 values, and torch uses the former); nearbyint rounds half to
//               even; the zero point is added in f32, which matters only past 2^24 (i32).
//   dequantize: per tensor  float(q - zp) * float(scale), in f32;
//               per channel double(float(q) - float(zp)) * scale[c], rounded to f32 (ATen reads
//               the scales tensor as f64; for f32 scales this equals the f32 product).
// Where torch has undefined behaviour (casting NaN, infinity or a float beyond int64 to an
// integer; on x86 that gives quant_min), kiln defines it: NaN gives quant_min (as torch on x86
// and onnxruntime do), +inf and large positive values quant_max, -inf quant_min.

namespace {

struct QParams {
  int64_t qmin, qmax;
  DType dtype;
};

Result<QParams> qparams(const KernelArgs& args, const char* op) {
  QParams q{args.attr_int("quant_min", -128), args.attr_int("quant_max", 127),
            args.attr_dtype("dtype", DType::kI8)};
  auto range = integer_range(q.dtype);
  if (!range) {
    return invalid_argument("{}: quantized dtype {} is not one of u8, i8, u16, i16, i32, i64", op,
                            dtype_name(q.dtype));
  }
  if (q.qmin > q.qmax)
    return invalid_argument("{}: quant_min {} > quant_max {}", op, q.qmin, q.qmax);
  if (q.qmin < range->first || q.qmax > range->second) {
    return invalid_argument("{}: quant range [{}, {}] does not fit {} [{}, {}]", op, q.qmin, q.qmax,
                            dtype_name(q.dtype), range->first, range->second);
  }
  return q;
}

// (scale, zero point) per channel: one pair, or one per slice of `axis`; elements are walked as
// [outer, count, inner].
struct Channels {
  std::vector<double> scales;
  std::vector<int64_t> zps;
  int64_t outer = 1, count = 1, inner = 1;
};

Result<Channels> channels(const KernelArgs& args, const Tensor& x, DType qdtype, bool per_channel,
                          const char* op) {
  Channels c;
  if (!per_channel) {
    c.scales = {args.attr_float("scale", 1.0)};
    c.zps = {args.attr_int("zero_point", 0)};
    c.inner = x.numel();
  } else {
    KILN_RETURN_IF_ERROR(need_tensor(args, 1, op, "scales"));
    KILN_RETURN_IF_ERROR(need_tensor(args, 2, op, "zero_points"));
    KILN_ASSIGN_OR_RETURN(int64_t axis,
                          norm_dim(args.attr_int("axis", 0), static_cast<int64_t>(x.rank()), op));
    c.count = x.rank() == 0 ? 1 : x.dim(static_cast<size_t>(axis));
    c.outer = dims_product(x.shape(), 0, static_cast<size_t>(axis));
    c.inner = dims_product(x.shape(), static_cast<size_t>(axis) + 1, x.rank());
    const Tensor &s = args.tensor(1), &z = args.tensor(2);
    if (s.numel() != c.count || z.numel() != c.count) {
      return invalid_argument("{}: {} scales and {} zero points for {} channels", op, s.numel(),
                              z.numel(), c.count);
    }
    if (!is_floating(s.dtype()) || !is_integral(z.dtype())) {
      return invalid_argument(
          "{}: scales {} and zero points {}: expected float and integer tensors", op,
          dtype_name(s.dtype()), dtype_name(z.dtype()));
    }
    for (int64_t i = 0; i < c.count; ++i) {
      c.scales.push_back(s.scalar_at(i));
      double zv = z.scalar_at(i);
      // An i64 zero point past 2^63 cannot be in any storage range; keep the cast defined.
      c.zps.push_back(std::fabs(zv) < 9.0e18 ? static_cast<int64_t>(zv)
                                             : std::numeric_limits<int64_t>::max());
    }
  }
  for (double s : c.scales) {
    if (!(s > 0) || !std::isfinite(s))
      return invalid_argument("{}: scale {} must be positive and finite", op, s);
  }
  auto range = integer_range(qdtype);
  for (int64_t zp : c.zps) {
    // Keeps q - zp from overflowing; ONNX and torch zero points are storage values too.
    if (range && (zp < range->first || zp > range->second)) {
      return invalid_argument("{}: zero point {} is outside the range of {} [{}, {}]", op, zp,
                              dtype_name(qdtype), range->first, range->second);
    }
  }
  return c;
}

// float(zp) + r as an integer in [qmin, qmax], defined for every float (NaN gives qmin).
int64_t saturate(float v, int64_t qmin, int64_t qmax) {
  double d = static_cast<double>(v);
  if (!(d > static_cast<double>(qmin))) return qmin;
  if (d >= static_cast<double>(qmax)) return qmax;
  return std::clamp(static_cast<int64_t>(d), qmin, qmax);
}

Status quantize_impl(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs,
                     bool per_channel, const char* op) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "input"));
  if (!is_floating(args.tensor(0).dtype())) {
    return invalid_argument("{}: input dtype {} is not a float type", op,
                            dtype_name(args.tensor(0).dtype()));
  }
  Tensor x = convert(ctx, args.tensor(0), DType::kF32);
  KILN_ASSIGN_OR_RETURN(QParams q, qparams(args, op));
  KILN_ASSIGN_OR_RETURN(Channels c, channels(args, x, q.dtype, per_channel, op));
  Tensor out = ctx.allocate(q.dtype, x.shape());
  const float* px = x.data_as<float>();
  dispatch_all(q.dtype, [&](auto t) {
    using T = decltype(t);
    T* po = writable<T>(out);
    for (int64_t o = 0; o < c.outer; ++o) {
      for (int64_t ch = 0; ch < c.count; ++ch) {
        const size_t k = static_cast<size_t>(ch);
        const float inv_scale = 1.0f / static_cast<float>(c.scales[k]);
        const float zp = static_cast<float>(c.zps[k]);
        const int64_t base = (o * c.count + ch) * c.inner;
        for (int64_t i = base; i < base + c.inner; ++i) {
          // nearbyint: half to even in the default rounding mode, as torch's Round.
          float v = zp + std::nearbyint(px[i] * inv_scale);
          po[i] = static_cast<T>(saturate(v, q.qmin, q.qmax));
        }
      }
    }
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

// q - zp as f32; exact integer subtraction (as ATen), through f64 only where i64 would overflow.
template <typename T>
float minus_zero_point(T q, int64_t zp) {
  if constexpr (sizeof(T) == sizeof(int64_t)) {
    int64_t d;
    if (__builtin_sub_overflow(static_cast<int64_t>(q), zp, &d)) {
      return static_cast<float>(static_cast<double>(q) - static_cast<double>(zp));
    }
    return static_cast<float>(d);
  } else {
    return static_cast<float>(static_cast<int64_t>(q) - zp);
  }
}

Status dequantize_impl(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs,
                       bool per_channel, const char* op) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "input"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(QParams q, qparams(args, op));
  if (x.dtype() != q.dtype) {
    return invalid_argument("{}: input dtype {} differs from the quantized dtype {}", op,
                            dtype_name(x.dtype()), dtype_name(q.dtype));
  }
  KILN_ASSIGN_OR_RETURN(Channels c, channels(args, x, q.dtype, per_channel, op));
  DType out_dtype = args.attr_dtype("out_dtype", DType::kF32);
  if (!is_floating(out_dtype))
    return invalid_argument("{}: out_dtype {} is not a float type", op, dtype_name(out_dtype));
  Tensor out = ctx.allocate(DType::kF32, x.shape());
  float* po = writable<float>(out);
  dispatch_all(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* px = x.data_as<T>();
    for (int64_t o = 0; o < c.outer; ++o) {
      for (int64_t ch = 0; ch < c.count; ++ch) {
        const size_t k = static_cast<size_t>(ch);
        const int64_t zp = c.zps[k];
        const int64_t base = (o * c.count + ch) * c.inner;
        if (!per_channel) {
          const float scale = static_cast<float>(c.scales[k]);
          for (int64_t i = base; i < base + c.inner; ++i) {
            po[i] = minus_zero_point(px[i], zp) * scale;
          }
        } else {
          const double scale = c.scales[k];
          const float zpf = static_cast<float>(zp);
          for (int64_t i = base; i < base + c.inner; ++i) {
            po[i] =
                static_cast<float>(static_cast<double>(static_cast<float>(px[i]) - zpf) * scale);
          }
        }
      }
    }
  });
  outputs->push_back(out_dtype == DType::kF32 ? std::move(out) : convert(ctx, out, out_dtype));
  return Status::Ok();
}

}  // namespace

Status quantize_per_tensor(KernelContext& ctx, const KernelArgs& args,
                           std::vector<Tensor>* outputs) {
  return quantize_impl(ctx, args, outputs, false, "quantize_per_tensor");
}
Status dequantize_per_tensor(KernelContext& ctx, const KernelArgs& args,
                             std::vector<Tensor>* outputs) {
  return dequantize_impl(ctx, args, outputs, false, "dequantize_per_tensor");
}
Status quantize_per_channel(KernelContext& ctx, const KernelArgs& args,
                            std::vector<Tensor>* outputs) {
  return quantize_impl(ctx, args, outputs, true, "quantize_per_channel");
}
Status dequantize_per_channel(KernelContext& ctx, const KernelArgs& args,
                              std::vector<Tensor>* outputs) {
  return dequantize_impl(ctx, args, outputs, true, "dequantize_per_channel");
}

namespace {

// How scatter / scatter_nd combine an update with the element it lands on.
enum class Combine { kNone, kAdd, kMul, kMax, kMin };

Result<Combine> read_combine(const KernelArgs& args, const char* op) {
  const std::string r = args.attr_str("reduce", "none");
  if (r == "none") return Combine::kNone;
  if (r == "add") return Combine::kAdd;
  if (r == "mul") return Combine::kMul;
  if (r == "max") return Combine::kMax;
  if (r == "min") return Combine::kMin;
  return invalid_argument("{}: reduce '{}' is not none, add, mul, max or min", op, r);
}

// A copy of `self` (a fresh output) and a function that combines element `from` of `src` into
// element `to` of it; null when the dtype has no arithmetic (only kNone works then).
// Scatter's updates: recorded in order by add(), then applied by finish() with the dtype
// dispatched once (later updates of one element apply after earlier ones).
struct Scatterer {
  Tensor out;
  const Tensor* src;
  Combine combine;
  size_t es;
  std::vector<std::pair<int64_t, int64_t>> moves;  // (to, from) element indices

  void add(int64_t to, int64_t from) { moves.emplace_back(to, from); }

  Tensor finish() {
    uint8_t* po = writable<uint8_t>(out);
    const uint8_t* ps = static_cast<const uint8_t*>(src->data());
    if (combine == Combine::kNone) {
      for (auto [to, from] : moves) {
        std::memcpy(po + static_cast<size_t>(to) * es, ps + static_cast<size_t>(from) * es, es);
      }
      return std::move(out);
    }
    dispatch_arith(out.dtype(), [&](auto t) {
      using T = decltype(t);
      T* o = reinterpret_cast<T*>(po);
      const T* v = reinterpret_cast<const T*>(ps);
      auto run = [&](auto f) {
        for (auto [to, from] : moves) o[to] = f(o[to], v[from]);
      };
      switch (combine) {
        case Combine::kAdd:
          run([](T a, T b) { return static_cast<T>(a + b); });
          break;
        case Combine::kMul:
          run([](T a, T b) { return static_cast<T>(a * b); });
          break;
        case Combine::kMax:
          run([](T a, T b) { return std::max(a, b); });
          break;
        case Combine::kMin:
          run([](T a, T b) { return std::min(a, b); });
          break;
        case Combine::kNone:
          break;
      }
    });
    return std::move(out);
  }
};

Result<Scatterer> make_scatterer(KernelContext& ctx, const KernelArgs& args, const char* op) {
  const Tensor &x = args.tensor(0), &src = args.tensor(2);
  if (src.dtype() != x.dtype()) {
    return invalid_argument("{}: updates are {}, self is {}", op, dtype_name(src.dtype()),
                            dtype_name(x.dtype()));
  }
  KILN_ASSIGN_OR_RETURN(Combine combine, read_combine(args, op));
  if (combine != Combine::kNone &&
      (x.dtype() == DType::kBool || !dispatch_arith(x.dtype(), [](auto) {}))) {
    return unsupported("{}: reduce on dtype {} is not supported", op, dtype_name(x.dtype()));
  }
  Scatterer s{ctx.allocate(x.dtype(), x.shape()), &src, combine, dtype_size(x.dtype())};
  std::memcpy(writable<uint8_t>(s.out), x.data(), x.nbytes());
  return s;
}

}  // namespace

// ONNX ScatterElements (torch scatter / scatter_reduce): out = self, then for every position p of
// index, out[p with p[dim] = index[p]] = src[p] (or combined with it by `reduce`), in order.
Status scatter(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "scatter";
  for (size_t i = 0; i < 3; ++i)
    KILN_RETURN_IF_ERROR(need_tensor(args, i, op, i == 0 ? "self" : i == 1 ? "index" : "src"));
  const Tensor &x = args.tensor(0), &index = args.tensor(1), &src = args.tensor(2);
  KILN_ASSIGN_OR_RETURN(int64_t dim,
                        norm_dim(args.attr_int("dim", 0), static_cast<int64_t>(x.rank()), op));
  if (index.rank() != x.rank() || src.rank() != x.rank()) {
    return invalid_argument("{}: index [{}] and src [{}] must have self's rank {}", op,
                            fmt::join(index.shape(), ", "), fmt::join(src.shape(), ", "), x.rank());
  }
  for (size_t d = 0; d < x.rank(); ++d) {
    if (index.dim(d) > src.dim(d) || (d != static_cast<size_t>(dim) && index.dim(d) > x.dim(d))) {
      return invalid_argument("{}: index [{}] is larger than src [{}] or self [{}] at dim {}", op,
                              fmt::join(index.shape(), ", "), fmt::join(src.shape(), ", "),
                              fmt::join(x.shape(), ", "), d);
    }
  }
  int64_t n = x.rank() == 0 ? 1 : x.dim(static_cast<size_t>(dim));
  KILN_ASSIGN_OR_RETURN(auto idx, read_indices(index, n, op));
  KILN_ASSIGN_OR_RETURN(Scatterer s, make_scatterer(ctx, args, op));
  auto xstr = dense_strides(x.shape()), sstr = dense_strides(src.shape());
  std::vector<int64_t> pos(index.rank(), 0);
  for (int64_t i = 0; i < index.numel(); ++i) {
    int64_t to = 0, from = 0;
    for (size_t d = 0; d < pos.size(); ++d) {
      to += (d == static_cast<size_t>(dim) ? idx[static_cast<size_t>(i)] : pos[d]) * xstr[d];
      from += pos[d] * sstr[d];
    }
    s.add(to, from);
    for (size_t d = pos.size(); d-- > 0;) {
      if (++pos[d] < index.dim(d)) break;
      pos[d] = 0;
    }
  }
  outputs->push_back(s.finish());
  return Status::Ok();
}

// ONNX ScatterND: indices [..., k] address slices self[i0, ..., ik-1] that the matching slices of
// updates (shape indices.shape[:-1] + self.shape[k:]) replace or combine into, in order.
Status scatter_nd(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "scatter_nd";
  for (size_t i = 0; i < 3; ++i)
    KILN_RETURN_IF_ERROR(need_tensor(args, i, op,
                                     i == 0   ? "self"
                                     : i == 1 ? "indices"
                                              : "updates"));
  const Tensor &x = args.tensor(0), &indices = args.tensor(1), &updates = args.tensor(2);
  const size_t k = indices.rank() == 0 ? 0 : static_cast<size_t>(indices.dim(indices.rank() - 1));
  std::vector<int64_t> want;
  if (indices.rank() > 0) want.assign(indices.shape().begin(), indices.shape().end() - 1);
  if (indices.rank() == 0 || k > x.rank()) {
    return invalid_argument("{}: indices [{}] do not address self [{}]", op,
                            fmt::join(indices.shape(), ", "), fmt::join(x.shape(), ", "));
  }
  want.insert(want.end(), x.shape().begin() + static_cast<std::ptrdiff_t>(k), x.shape().end());
  if (updates.shape() != want) {
    return invalid_argument("{}: updates are [{}], expected [{}]", op,
                            fmt::join(updates.shape(), ", "), fmt::join(want, ", "));
  }
  KILN_ASSIGN_OR_RETURN(auto idx, read_index_values(indices, op));
  KILN_ASSIGN_OR_RETURN(Scatterer s, make_scatterer(ctx, args, op));
  const int64_t slice = dims_product(x.shape(), k, x.rank());
  const int64_t count = dims_product(indices.shape(), 0, indices.rank() - 1);  // index tuples
  auto xstr = dense_strides(x.shape());
  for (int64_t i = 0; i < count; ++i) {
    int64_t base = 0;
    for (size_t d = 0; d < k; ++d) {
      int64_t v = idx[static_cast<size_t>(i) * k + d], n = x.dim(d);
      if (v < -n || v >= n)
        return invalid_argument("{}: index {} is out of range for size {} (dim {})", op, v, n, d);
      base += (v < 0 ? v + n : v) * xstr[d];
    }
    for (int64_t j = 0; j < slice; ++j) s.add(base + j, i * slice + j);
  }
  outputs->push_back(s.finish());
  return Status::Ok();
}

// ONNX GatherND: the slices self[b..., i0, ..., ik-1] that indices [..., k] address, the first
// `batch_dims` dims shared by both.
Status gather_nd(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "gather_nd";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, op, "indices"));
  const Tensor &x = args.tensor(0), &indices = args.tensor(1);
  const int64_t b = args.attr_int("batch_dims", 0);
  const size_t r = indices.rank();
  if (r == 0 || b < 0 || static_cast<size_t>(b) >= r || static_cast<size_t>(b) > x.rank() ||
      b + indices.dim(r - 1) > static_cast<int64_t>(x.rank()) ||
      !std::equal(x.shape().begin(), x.shape().begin() + b, indices.shape().begin())) {
    return invalid_argument("{}: indices [{}] do not address self [{}] with batch_dims {}", op,
                            fmt::join(indices.shape(), ", "), fmt::join(x.shape(), ", "), b);
  }
  const size_t k = static_cast<size_t>(indices.dim(r - 1)), bd = static_cast<size_t>(b);
  std::vector<int64_t> shape(indices.shape().begin(), indices.shape().end() - 1);
  shape.insert(shape.end(), x.shape().begin() + static_cast<std::ptrdiff_t>(bd + k),
               x.shape().end());
  KILN_ASSIGN_OR_RETURN(auto idx, read_index_values(indices, op));
  Tensor out = ctx.allocate(x.dtype(), shape);
  const size_t es = dtype_size(x.dtype());
  const int64_t slice = dims_product(x.shape(), bd + k, x.rank());
  const int64_t batches = dims_product(x.shape(), 0, bd);
  const int64_t per_batch = dims_product(indices.shape(), bd, r - 1);  // index tuples per batch
  const int64_t batch_stride = dims_product(x.shape(), bd, x.rank());
  auto xstr = dense_strides(x.shape());
  const uint8_t* px = static_cast<const uint8_t*>(x.data());
  uint8_t* po = writable<uint8_t>(out);
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t t = 0; t < per_batch; ++t) {
      const int64_t tuple = bi * per_batch + t;
      int64_t base = bi * batch_stride;
      for (size_t d = 0; d < k; ++d) {
        int64_t v = idx[static_cast<size_t>(tuple) * k + d], n = x.dim(bd + d);
        if (v < -n || v >= n)
          return invalid_argument("{}: index {} is out of range for size {} (dim {})", op, v, n,
                                  bd + d);
        base += (v < 0 ? v + n : v) * xstr[bd + d];
      }
      std::memcpy(po + static_cast<size_t>(tuple * slice) * es, px + static_cast<size_t>(base) * es,
                  static_cast<size_t>(slice) * es);
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace kiln::portable::k
