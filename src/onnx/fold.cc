#include "fold.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "onnx_tensor.h"

namespace kiln::onnx_import::fold {
namespace {

bool is_int_like(DType d) { return is_integral(d) || d == DType::kBool; }

void set_i64(Tensor& t, int64_t i, int64_t v) {
  void* p = static_cast<uint8_t*>(t.mutable_data()) + i * static_cast<int64_t>(dtype_size(t.dtype()));
  switch (t.dtype()) {
    case DType::kI64: std::memcpy(p, &v, 8); return;
    case DType::kI32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); return; }
    case DType::kI16: { int16_t x = static_cast<int16_t>(v); std::memcpy(p, &x, 2); return; }
    case DType::kU16: { uint16_t x = static_cast<uint16_t>(v); std::memcpy(p, &x, 2); return; }
    case DType::kU32: { uint32_t x = static_cast<uint32_t>(v); std::memcpy(p, &x, 4); return; }
    case DType::kU64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(p, &x, 8); return; }
    case DType::kI8: { int8_t x = static_cast<int8_t>(v); std::memcpy(p, &x, 1); return; }
    case DType::kU8: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(p, &x, 1); return; }
    case DType::kBool: { uint8_t x = v != 0; std::memcpy(p, &x, 1); return; }
    default: t.set_scalar_at(i, static_cast<double>(v)); return;
  }
}

void set_f64(Tensor& t, int64_t i, double v) {
  if (is_int_like(t.dtype())) {
    if (t.dtype() == DType::kBool) { set_i64(t, i, v != 0.0); return; }
    // Out-of-range float-to-int casts are undefined in C++; saturate instead.
    if (!(v == v)) v = 0;
    if (v >= 9.2e18) v = 9.2e18;
    if (v <= -9.2e18) v = -9.2e18;
    set_i64(t, i, static_cast<int64_t>(v));
    return;
  }
  t.set_scalar_at(i, v);
}

// For each element of `out_shape`, the linear index into a tensor of `in_shape` broadcast to it.
std::vector<int64_t> broadcast_index(std::span<const int64_t> out_shape,
                                     std::span<const int64_t> in_shape) {
  size_t r = out_shape.size();
  std::vector<int64_t> stride(r, 0);
  int64_t s = 1;
  for (size_t k = 0; k < in_shape.size(); ++k) {
    size_t in_d = in_shape.size() - 1 - k;
    size_t out_d = r - 1 - k;
    stride[out_d] = in_shape[in_d] == 1 ? 0 : s;
    s *= in_shape[in_d];
  }
  int64_t n = checked_numel(out_shape).value_or(0);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<int64_t> pos(r, 0);
  int64_t cur = 0;
  for (int64_t i = 0; i < n; ++i) {
    idx[static_cast<size_t>(i)] = cur;
    for (size_t d = r; d-- > 0;) {
      ++pos[d];
      cur += stride[d];
      if (pos[d] < out_shape[d]) break;
      cur -= stride[d] * pos[d];
      pos[d] = 0;
    }
  }
  return idx;
}

Result<Tensor> make(DType dtype, std::vector<int64_t> shape) {
  KILN_RETURN_IF_ERROR(check_shape(shape, "folded constant"));
  return Tensor::create(dtype, std::move(shape));
}

Status check_axis(int64_t* axis, size_t rank, const char* what) {
  int64_t r = static_cast<int64_t>(rank);
  if (*axis < -r || *axis >= r) {
    return invalid_argument("{}: axis {} is out of range for rank {}", what, *axis, r);
  }
  if (*axis < 0) *axis += r;
  return Status::Ok();
}

}  // namespace

int64_t get_i64(const Tensor& t, int64_t i) {
  const uint8_t* p = static_cast<const uint8_t*>(t.data()) + i * static_cast<int64_t>(dtype_size(t.dtype()));
  switch (t.dtype()) {
    case DType::kI64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case DType::kI32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::kI16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::kU16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::kU32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::kU64: {  // values above INT64_MAX saturate
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
    }
    case DType::kI8: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case DType::kU8: return *p;
    case DType::kBool: return *p != 0;
    default: {
      double d = t.scalar_at(i);
      if (!(d == d)) return 0;
      if (d >= 9.2e18) return INT64_MAX;
      if (d <= -9.2e18) return INT64_MIN;
      return static_cast<int64_t>(d);
    }
  }
}

double get_f64(const Tensor& t, int64_t i) {
  if (is_int_like(t.dtype())) return static_cast<double>(get_i64(t, i));
  return t.scalar_at(i);
}

std::vector<int64_t> to_i64_vector(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = get_i64(t, i);
  return out;
}

Tensor i64_tensor(std::span<const int64_t> values, bool scalar) {
  std::vector<int64_t> shape;
  if (!scalar) shape.push_back(static_cast<int64_t>(values.size()));
  Tensor t(DType::kI64, shape);
  if (!values.empty()) std::memcpy(t.mutable_data(), values.data(), values.size() * 8);
  return t;
}

Result<std::vector<int64_t>> broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t k = 0; k < r; ++k) {
    int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t y = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (x != y && x != 1 && y != 1) {
      return invalid_argument("shapes [{}] and [{}] do not broadcast", fmt::join(a, ", "),
                              fmt::join(b, ", "));
    }
    out[r - 1 - k] = x == 1 ? y : x;
  }
  return out;
}

Result<Tensor> binary(BinOp op, const Tensor& a, const Tensor& b) {
  KILN_ASSIGN_OR_RETURN(auto shape, broadcast_shapes(a.shape(), b.shape()));
  bool compare = op == BinOp::kEq || op == BinOp::kLt || op == BinOp::kGt || op == BinOp::kLe ||
                 op == BinOp::kGe || op == BinOp::kAnd || op == BinOp::kOr;
  KILN_ASSIGN_OR_RETURN(Tensor out, make(compare ? DType::kBool : a.dtype(), shape));
  auto ia = broadcast_index(shape, a.shape());
  auto ib = broadcast_index(shape, b.shape());
  bool ints = is_int_like(a.dtype()) && is_int_like(b.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t pa = ia[static_cast<size_t>(i)], pb = ib[static_cast<size_t>(i)];
    if (ints) {
      int64_t x = get_i64(a, pa), y = get_i64(b, pb), r = 0;
      bool overflow = false;
      switch (op) {
        case BinOp::kAdd: overflow = __builtin_add_overflow(x, y, &r); break;
        case BinOp::kSub: overflow = __builtin_sub_overflow(x, y, &r); break;
        case BinOp::kMul: overflow = __builtin_mul_overflow(x, y, &r); break;
        case BinOp::kDiv:
          if (y == 0) return invalid_argument("integer division by zero");
          if (x == INT64_MIN && y == -1) { overflow = true; break; }
          r = x / y;
          break;
        case BinOp::kEq: r = x == y; break;
        case BinOp::kLt: r = x < y; break;
        case BinOp::kGt: r = x > y; break;
        case BinOp::kLe: r = x <= y; break;
        case BinOp::kGe: r = x >= y; break;
        case BinOp::kAnd: r = (x != 0) && (y != 0); break;
        case BinOp::kOr: r = (x != 0) || (y != 0); break;
      }
      if (overflow) return out_of_range("integer overflow in a folded constant");
      set_i64(out, i, r);
    } else {
      double x = get_f64(a, pa), y = get_f64(b, pb), r = 0;
      switch (op) {
        case BinOp::kAdd: r = x + y; break;
        case BinOp::kSub: r = x - y; break;
        case BinOp::kMul: r = x * y; break;
        case BinOp::kDiv: r = x / y; break;
        case BinOp::kEq: r = x == y; break;
        case BinOp::kLt: r = x < y; break;
        case BinOp::kGt: r = x > y; break;
        case BinOp::kLe: r = x <= y; break;
        case BinOp::kGe: r = x >= y; break;
        case BinOp::kAnd: r = (x != 0) && (y != 0); break;
        case BinOp::kOr: r = (x != 0) || (y != 0); break;
      }
      set_f64(out, i, r);
    }
  }
  return out;
}

Result<Tensor> logical_not(const Tensor& a) {
  KILN_ASSIGN_OR_RETURN(Tensor out, make(DType::kBool, a.shape()));
  for (int64_t i = 0; i < a.numel(); ++i) set_i64(out, i, get_f64(a, i) == 0.0);
  return out;
}

Result<Tensor> where(const Tensor& cond, const Tensor& x, const Tensor& y) {
  KILN_ASSIGN_OR_RETURN(auto s1, broadcast_shapes(cond.shape(), x.shape()));
  KILN_ASSIGN_OR_RETURN(auto shape, broadcast_shapes(s1, y.shape()));
  if (x.dtype() != y.dtype()) return invalid_argument("Where: X and Y have different dtypes");
  KILN_ASSIGN_OR_RETURN(Tensor out, make(x.dtype(), shape));
  auto ic = broadcast_index(shape, cond.shape());
  auto ix = broadcast_index(shape, x.shape());
  auto iy = broadcast_index(shape, y.shape());
  size_t es = dtype_size(x.dtype());
  auto* dst = static_cast<uint8_t*>(out.mutable_data());
  for (int64_t i = 0; i < out.numel(); ++i) {
    size_t u = static_cast<size_t>(i);
    bool c = get_f64(cond, ic[u]) != 0.0;
    const auto* src = static_cast<const uint8_t*>(c ? x.data() : y.data());
    std::memcpy(dst + u * es, src + static_cast<size_t>(c ? ix[u] : iy[u]) * es, es);
  }
  return out;
}

Result<Tensor> cast(const Tensor& a, DType to) {
  if (a.dtype() == to) return a;
  KILN_ASSIGN_OR_RETURN(Tensor out, make(to, a.shape()));
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (is_int_like(a.dtype()) && is_int_like(to)) {
      set_i64(out, i, get_i64(a, i));
    } else {
      set_f64(out, i, get_f64(a, i));
    }
  }
  return out;
}

Result<Tensor> concat(std::span<const Tensor> parts, int64_t axis) {
  if (parts.empty()) return invalid_argument("Concat: no inputs");
  const Tensor& first = parts[0];
  KILN_RETURN_IF_ERROR(check_axis(&axis, first.rank(), "Concat"));
  std::vector<int64_t> shape = first.shape();
  shape[static_cast<size_t>(axis)] = 0;
  for (const Tensor& p : parts) {
    if (p.rank() != first.rank() || p.dtype() != first.dtype()) {
      return invalid_argument("Concat: inputs differ in rank or dtype");
    }
    for (size_t d = 0; d < p.rank(); ++d) {
      if (static_cast<int64_t>(d) != axis && p.dim(d) != first.dim(d)) {
        return invalid_argument("Concat: input shapes differ in dim {}", d);
      }
    }
    shape[static_cast<size_t>(axis)] += p.dim(static_cast<size_t>(axis));
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, make(first.dtype(), shape));
  size_t es = dtype_size(first.dtype());
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  auto* dst = static_cast<uint8_t*>(out.mutable_data());
  size_t off = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor& p : parts) {
      size_t chunk = static_cast<size_t>(p.dim(static_cast<size_t>(axis)) * inner) * es;
      if (chunk == 0) continue;
      std::memcpy(dst + off, static_cast<const uint8_t*>(p.data()) + static_cast<size_t>(o) * chunk, chunk);
      off += chunk;
    }
  }
  return out;
}

Result<Tensor> gather(const Tensor& data, const Tensor& indices, int64_t axis) {
  KILN_RETURN_IF_ERROR(check_axis(&axis, data.rank(), "Gather"));
  if (!is_integral(indices.dtype())) return invalid_argument("Gather: indices are not integers");
  size_t ax = static_cast<size_t>(axis);
  std::vector<int64_t> shape(data.shape().begin(), data.shape().begin() + axis);
  shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
  shape.insert(shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  KILN_ASSIGN_OR_RETURN(Tensor out, make(data.dtype(), shape));
  int64_t outer = 1, inner = 1, n = data.dim(ax);
  for (size_t d = 0; d < ax; ++d) outer *= data.dim(d);
  for (size_t d = ax + 1; d < data.rank(); ++d) inner *= data.dim(d);
  size_t es = dtype_size(data.dtype());
  size_t chunk = static_cast<size_t>(inner) * es;
  auto* dst = static_cast<uint8_t*>(out.mutable_data());
  const auto* src = static_cast<const uint8_t*>(data.data());
  size_t off = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < indices.numel(); ++k) {
      int64_t j = get_i64(indices, k);
      if (j < -n || j >= n) {
        return out_of_range("Gather: index {} is out of range for a dim of size {}", j, n);
      }
      if (j < 0) j += n;
      if (chunk) std::memcpy(dst + off, src + static_cast<size_t>(o * n + j) * chunk, chunk);
      off += chunk;
    }
  }
  return out;
}

namespace {

// Element strides of `data`'s row-major layout.
std::vector<int64_t> row_major_strides(const Tensor& data) {
  std::vector<int64_t> stride(data.rank(), 1);
  for (size_t d = data.rank(); d-- > 1;) stride[d - 1] = stride[d] * data.dim(d);
  return stride;
}

// A tensor of `shape` whose element at position pos reads data[offset + sum(pos[d] * strides[d])]
// (slice and transpose are both this walk).
Result<Tensor> strided_gather(const Tensor& data, const std::vector<int64_t>& shape,
                              int64_t offset, const std::vector<int64_t>& strides) {
  KILN_ASSIGN_OR_RETURN(Tensor out, make(data.dtype(), shape));
  size_t r = shape.size();
  size_t es = dtype_size(data.dtype());
  std::vector<int64_t> pos(r, 0);
  auto* dst = static_cast<uint8_t*>(out.mutable_data());
  const auto* src = static_cast<const uint8_t*>(data.data());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t lin = offset;
    for (size_t d = 0; d < r; ++d) lin += pos[d] * strides[d];
    std::memcpy(dst + static_cast<size_t>(i) * es, src + static_cast<size_t>(lin) * es, es);
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
  return out;
}

}  // namespace

Result<Tensor> slice(const Tensor& data, std::span<const int64_t> starts,
                     std::span<const int64_t> ends, std::span<const int64_t> axes,
                     std::span<const int64_t> steps) {
  size_t r = data.rank();
  std::vector<int64_t> start(r, 0), step(r, 1), shape = data.shape();
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t a = static_cast<size_t>(axes[k]);
    int64_t dim = data.dim(a), s = starts[k], e = ends[k], st = steps[k];
    if (st == 0) return invalid_argument("Slice: step 0");
    if (s < 0) s = s < -dim ? -1 : s + dim;  // clamped below
    if (e < 0) e = e < -dim ? -1 : e + dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      shape[a] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      int64_t neg = -st;
      shape[a] = s > e ? (s - e + neg - 1) / neg : 0;
    }
    start[a] = s;
    step[a] = st;
  }
  std::vector<int64_t> in_stride = row_major_strides(data);
  int64_t offset = 0;
  std::vector<int64_t> strides(r);
  for (size_t d = 0; d < r; ++d) {
    offset += start[d] * in_stride[d];
    strides[d] = step[d] * in_stride[d];
  }
  return strided_gather(data, shape, offset, strides);
}

Result<Tensor> transpose(const Tensor& data, std::span<const int64_t> perm) {
  size_t r = data.rank();
  if (perm.size() != r) return invalid_argument("Transpose: perm has {} entries for rank {}", perm.size(), r);
  std::vector<bool> seen(r, false);
  std::vector<int64_t> shape(r);
  for (size_t d = 0; d < r; ++d) {
    if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(r) || seen[static_cast<size_t>(perm[d])]) {
      return invalid_argument("Transpose: perm [{}] is not a permutation", fmt::join(perm, ", "));
    }
    seen[static_cast<size_t>(perm[d])] = true;
    shape[d] = data.dim(static_cast<size_t>(perm[d]));
  }
  std::vector<int64_t> in_stride = row_major_strides(data);
  std::vector<int64_t> strides(r);
  for (size_t d = 0; d < r; ++d) strides[d] = in_stride[static_cast<size_t>(perm[d])];
  return strided_gather(data, shape, 0, strides);
}

Result<Tensor> expand(const Tensor& data, std::span<const int64_t> shape) {
  KILN_ASSIGN_OR_RETURN(auto out_shape, broadcast_shapes(data.shape(), shape));
  KILN_ASSIGN_OR_RETURN(Tensor out, make(data.dtype(), out_shape));
  auto idx = broadcast_index(out_shape, data.shape());
  size_t es = dtype_size(data.dtype());
  auto* dst = static_cast<uint8_t*>(out.mutable_data());
  const auto* src = static_cast<const uint8_t*>(data.data());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::memcpy(dst + static_cast<size_t>(i) * es, src + static_cast<size_t>(idx[static_cast<size_t>(i)]) * es, es);
  }
  return out;
}

Result<Tensor> fill(std::span<const int64_t> shape, const Tensor& value) {
  if (value.numel() < 1) return invalid_argument("fill value has no elements");
  KILN_ASSIGN_OR_RETURN(Tensor out, make(value.dtype(), {shape.begin(), shape.end()}));
  size_t es = dtype_size(value.dtype());
  auto* dst = static_cast<uint8_t*>(out.mutable_data());
  for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(dst + static_cast<size_t>(i) * es, value.data(), es);
  return out;
}

Result<Tensor> range(const Tensor& start, const Tensor& limit, const Tensor& delta,
                     int64_t max_elements) {
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1) {
    return invalid_argument("Range: start, limit and delta must be scalars");
  }
  DType dt = start.dtype();
  double s = get_f64(start, 0), l = get_f64(limit, 0), d = get_f64(delta, 0);
  if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d)) {
    return invalid_argument("Range: delta is zero or a bound is not finite");
  }
  double count = std::max(std::ceil((l - s) / d), 0.0);
  if (count > static_cast<double>(max_elements)) {
    return out_of_range("Range: {} elements is over the folding limit {}", count, max_elements);
  }
  int64_t n = static_cast<int64_t>(count);
  KILN_ASSIGN_OR_RETURN(Tensor out, make(dt, {n}));
  if (is_int_like(dt)) {
    int64_t si = get_i64(start, 0), di = get_i64(delta, 0), v = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (__builtin_mul_overflow(i, di, &v) || __builtin_add_overflow(si, v, &v)) {
        return out_of_range("Range: integer overflow");
      }
      set_i64(out, i, v);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) set_f64(out, i, s + static_cast<double>(i) * d);
  }
  return out;
}

}  // namespace kiln::onnx_import::fold
