// Shape and data-movement kernels. View-like ops (view, reshape, squeeze, unsqueeze, flatten,
// and slice/select/split over the outermost varying dim) share the input's bytes.
#include <algorithm>
#include <cstring>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable {

Result<std::vector<int64_t>> infer_view_shape(std::vector<int64_t> shape, int64_t numel,
                                              const char* op) {
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) return invalid_argument("{}: more than one -1 in shape [{}]", op, fmt::join(shape, ", "));
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return invalid_argument("{}: negative size in shape [{}]", op, fmt::join(shape, ", "));
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      return invalid_argument("{}: shape [{}] overflows", op, fmt::join(shape, ", "));
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      return invalid_argument("{}: shape [{}] is invalid for {} elements", op, fmt::join(shape, ", "), numel);
    }
    shape[static_cast<size_t>(infer)] = numel / known;
  } else if (known != numel) {
    return invalid_argument("{}: shape [{}] is invalid for {} elements", op, fmt::join(shape, ", "), numel);
  }
  return shape;
}

namespace k {
namespace {

Status view_impl(const KernelArgs& args, std::vector<Tensor>* outputs, const char* op,
                 const char* attr) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(auto shape, infer_view_shape(args.attr_ints(attr, {}), x.numel(), op));
  outputs->push_back(x.reshaped(std::move(shape)));
  return Status::Ok();
}

// A dense sub-block of x: dims before `dim` collapse to `outer`; returns the copy (or a view when
// outer == 1) of elements [start, start + count*step) along dim.
Tensor take_along(KernelContext& ctx, const Tensor& x, size_t dim, int64_t start, int64_t count,
                  int64_t step, std::vector<int64_t> out_shape) {
  const size_t es = dtype_size(x.dtype());
  int64_t outer = dims_product(x.shape(), 0, dim);
  int64_t n = x.dim(dim);
  int64_t inner = dims_product(x.shape(), dim + 1, x.rank());
  if ((outer == 1 || count == 0) && step == 1 && x.storage() != nullptr) {
    return Tensor(x.dtype(), std::move(out_shape), x.storage(),
                  x.storage_offset() + static_cast<size_t>(start * inner) * es);
  }
  Tensor out = ctx.allocate(x.dtype(), std::move(out_shape));
  const uint8_t* px = static_cast<const uint8_t*>(x.data());
  uint8_t* po = writable<uint8_t>(out);
  size_t row = static_cast<size_t>(inner) * es;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < count; ++i) {
      std::memcpy(po, px + ((o * n + start + i * step) * inner) * es, row);
      po += row;
    }
  }
  return out;
}

}  // namespace

Status view(KernelContext&, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return view_impl(args, outputs, "view", "size");
}
Status reshape(KernelContext&, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return view_impl(args, outputs, "reshape", "shape");
}

Status flatten(KernelContext&, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "flatten", "self"));
  const Tensor& x = args.tensor(0);
  int64_t r = static_cast<int64_t>(x.rank());
  if (r == 0) {
    outputs->push_back(x.reshaped({1}));
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(int64_t s, norm_dim(args.attr_int("start_dim", 0), r, "flatten"));
  KILN_ASSIGN_OR_RETURN(int64_t e, norm_dim(args.attr_int("end_dim", -1), r, "flatten"));
  if (s > e) return invalid_argument("flatten: start_dim {} is after end_dim {}", s, e);
  std::vector<int64_t> shape(x.shape().begin(), x.shape().begin() + s);
  shape.push_back(dims_product(x.shape(), static_cast<size_t>(s), static_cast<size_t>(e) + 1));
  shape.insert(shape.end(), x.shape().begin() + e + 1, x.shape().end());
  outputs->push_back(x.reshaped(shape));
  return Status::Ok();
}

Status unflatten(KernelContext&, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "unflatten", "self"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(
      int64_t d, norm_dim(args.attr_int("dim", 0), static_cast<int64_t>(x.rank()), "unflatten"));
  if (x.rank() == 0) return invalid_argument("unflatten: self is 0-d");
  KILN_ASSIGN_OR_RETURN(auto sizes, infer_view_shape(args.attr_ints("sizes", {}),
                                                     x.dim(static_cast<size_t>(d)), "unflatten"));
  std::vector<int64_t> shape(x.shape().begin(), x.shape().begin() + d);
  shape.insert(shape.end(), sizes.begin(), sizes.end());
  shape.insert(shape.end(), x.shape().begin() + d + 1, x.shape().end());
  outputs->push_back(x.reshaped(std::move(shape)));
  return Status::Ok();
}

Status squeeze(KernelContext&, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "squeeze", "self"));
  const Tensor& x = args.tensor(0);
  auto dims = args.attr_opt_ints("dim");
  std::vector<bool> drop(x.rank(), false);
  if (!dims) {
    for (size_t d = 0; d < x.rank(); ++d) drop[d] = x.dim(d) == 1;
  } else {
    for (int64_t d : *dims) {
      KILN_ASSIGN_OR_RETURN(int64_t nd, norm_dim(d, static_cast<int64_t>(x.rank()), "squeeze"));
      // torch ignores dims whose size is not 1.
      if (x.rank() > 0 && x.dim(static_cast<size_t>(nd)) == 1) drop[static_cast<size_t>(nd)] = true;
    }
  }
  std::vector<int64_t> shape;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (!drop[d]) shape.push_back(x.dim(d));
  }
  outputs->push_back(x.reshaped(shape));
  return Status::Ok();
}

Status unsqueeze(KernelContext&, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "unsqueeze", "self"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(int64_t d, norm_dim(args.attr_int("dim", 0), static_cast<int64_t>(x.rank()) + 1, "unsqueeze"));
  std::vector<int64_t> shape = x.shape();
  shape.insert(shape.begin() + d, 1);
  outputs->push_back(x.reshaped(shape));
  return Status::Ok();
}

Status permute(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "permute", "self"));
  const Tensor& x = args.tensor(0);
  auto dims = args.attr_ints("dims", {});
  const int64_t r = static_cast<int64_t>(x.rank());
  if (static_cast<int64_t>(dims.size()) != r) {
    return invalid_argument("permute: dims [{}] do not match rank {}", fmt::join(dims, ", "), r);
  }
  std::vector<bool> seen(x.rank(), false);
  for (auto& d : dims) {
    KILN_ASSIGN_OR_RETURN(d, norm_dim(d, r, "permute"));
    if (seen[static_cast<size_t>(d)]) return invalid_argument("permute: dim {} repeated", d);
    seen[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> shape(x.rank()), in_strides = dense_strides(x.shape()), strides(x.rank());
  for (size_t i = 0; i < x.rank(); ++i) {
    shape[i] = x.dim(static_cast<size_t>(dims[i]));
    strides[i] = in_strides[static_cast<size_t>(dims[i])];
  }
  bool identity = true;
  for (size_t i = 0; i < dims.size(); ++i) identity = identity && dims[i] == static_cast<int64_t>(i);
  if (identity) {
    outputs->push_back(x);
    return Status::Ok();
  }
  Tensor out = ctx.allocate(x.dtype(), shape);
  BroadcastIter it{shape, {strides}};
  it.coalesce();
  const int64_t row_len = it.shape.empty() ? 1 : it.shape.back();
  dispatch_all(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* px = x.data_as<T>();
    parallel_range(ctx, it.rows(), grain_for(row_len), [&](int64_t row_begin, int64_t row_end) {
      T* po = writable<T>(out) + row_begin * row_len;
      it.for_each_row(row_begin, row_end, [&](const int64_t* offs, int64_t n, const int64_t* inner) {
        const T* src = px + offs[0];
        const int64_t s = inner[0];
        for (int64_t i = 0; i < n; ++i) po[i] = src[i * s];
        po += n;
      });
    });
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status transpose(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "transpose", "self"));
  const Tensor& x = args.tensor(0);
  const int64_t r = static_cast<int64_t>(x.rank());
  if (r == 0) {
    outputs->push_back(x);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(int64_t d0, norm_dim(args.attr_int("dim0", 0), r, "transpose"));
  KILN_ASSIGN_OR_RETURN(int64_t d1, norm_dim(args.attr_int("dim1", 1), r, "transpose"));
  std::vector<int64_t> dims(x.rank());
  for (int64_t i = 0; i < r; ++i) dims[static_cast<size_t>(i)] = i;
  std::swap(dims[static_cast<size_t>(d0)], dims[static_cast<size_t>(d1)]);
  KernelArgs p;
  p.inputs.push_back(KernelInput::of(&x));
  p.attrs.push_back({"dims", dims});
  return permute(ctx, p, outputs);
}

Status expand(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "expand", "self"));
  const Tensor& x = args.tensor(0);
  auto size = args.attr_ints("size", {});
  if (size.size() < x.rank()) {
    return invalid_argument("expand: size [{}] has fewer dims than input [{}]", fmt::join(size, ", "), fmt::join(x.shape(), ", "));
  }
  size_t off = size.size() - x.rank();
  for (size_t i = 0; i < size.size(); ++i) {
    int64_t in = i < off ? 1 : x.dim(i - off);
    if (size[i] == -1) {
      if (i < off) return invalid_argument("expand: -1 is not allowed for a new leading dim");
      size[i] = in;
    }
    if (in != size[i] && in != 1) {
      return invalid_argument("expand: input [{}] cannot expand to [{}]", fmt::join(x.shape(), ", "), fmt::join(size, ", "));
    }
  }
  outputs->push_back(broadcast_to(ctx, x, size));
  return Status::Ok();
}

Status cat(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  if (args.inputs.empty() || args.inputs[0].kind != KernelInput::Kind::kTensorList) {
    return invalid_argument("cat: argument 'tensors' must be a tensor list");
  }
  std::vector<const Tensor*> parts;
  for (const Tensor* t : args.inputs[0].list) {
    // torch skips legacy empty 1-D tensors.
    if (!(t->rank() == 1 && t->numel() == 0)) parts.push_back(t);
  }
  if (parts.empty()) {
    if (args.inputs[0].list.empty()) return invalid_argument("cat: no tensors");
    outputs->push_back(*args.inputs[0].list[0]);
    return Status::Ok();
  }
  const Tensor& first = *parts[0];
  KILN_ASSIGN_OR_RETURN(int64_t dim, norm_dim(args.attr_int("dim", 0), static_cast<int64_t>(first.rank()), "cat"));
  DType dtype = first.dtype();
  for (const Tensor* t : parts) dtype = promote_types(dtype, t->dtype());
  std::vector<int64_t> shape = first.shape();
  shape[static_cast<size_t>(dim)] = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor* t = parts[i];
    if (t->rank() != first.rank()) return invalid_argument("cat: tensor {} has rank {}, expected {}", i, t->rank(), first.rank());
    for (size_t d = 0; d < first.rank(); ++d) {
      if (d != static_cast<size_t>(dim) && t->dim(d) != first.dim(d)) {
        return invalid_argument("cat: tensor {} has shape [{}], expected [{}] outside dim {}", i,
                                fmt::join(t->shape(), ", "), fmt::join(first.shape(), ", "), dim);
      }
    }
    shape[static_cast<size_t>(dim)] += t->dim(static_cast<size_t>(dim));
  }
  Tensor out = ctx.allocate(dtype, shape);
  const size_t es = dtype_size(dtype);
  int64_t outer = dims_product(shape, 0, static_cast<size_t>(dim));
  int64_t inner = dims_product(shape, static_cast<size_t>(dim) + 1, shape.size());
  uint8_t* po = writable<uint8_t>(out);
  size_t out_row = static_cast<size_t>(shape[static_cast<size_t>(dim)] * inner) * es;
  size_t col = 0;
  for (const Tensor* t : parts) {
    Tensor c = convert(ctx, *t, dtype);
    size_t row = static_cast<size_t>(t->dim(static_cast<size_t>(dim)) * inner) * es;
    const uint8_t* pc = static_cast<const uint8_t*>(c.data());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(po + static_cast<size_t>(o) * out_row + col, pc + static_cast<size_t>(o) * row, row);
    col += row;
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status split(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "split", "self"));
  const Tensor& x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(int64_t dim, norm_dim(args.attr_int("dim", 0), static_cast<int64_t>(x.rank()), "split"));
  auto sizes = args.attr_ints("split_sizes", {});
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return invalid_argument("split: negative split size");
    total += s;
  }
  if (x.rank() == 0 || total != x.dim(static_cast<size_t>(dim))) {
    return invalid_argument("split: sizes [{}] do not add up to dim {} of [{}]", fmt::join(sizes, ", "), dim, fmt::join(x.shape(), ", "));
  }
  int64_t start = 0;
  for (int64_t s : sizes) {
    std::vector<int64_t> shape = x.shape();
    shape[static_cast<size_t>(dim)] = s;
    outputs->push_back(take_along(ctx, x, static_cast<size_t>(dim), start, s, 1, shape));
    start += s;
  }
  return Status::Ok();
}

Status slice(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "slice", "self"));
  const Tensor& x = args.tensor(0);
  if (x.rank() == 0) return invalid_argument("slice: cannot slice a 0-d tensor");
  KILN_ASSIGN_OR_RETURN(int64_t dim, norm_dim(args.attr_int("dim", 0), static_cast<int64_t>(x.rank()), "slice"));
  int64_t n = x.dim(static_cast<size_t>(dim));
  int64_t step = args.attr_int("step", 1);
  if (step <= 0) return invalid_argument("slice: step must be positive, got {}", step);
  int64_t start = args.attr_opt_int("start").value_or(0);
  int64_t end = args.attr_opt_int("end").value_or(n);
  // Python slicing: negatives count from the end; out-of-range values clamp.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  int64_t count = (end - start + step - 1) / step;
  std::vector<int64_t> shape = x.shape();
  shape[static_cast<size_t>(dim)] = count;
  outputs->push_back(take_along(ctx, x, static_cast<size_t>(dim), start, count, step, shape));
  return Status::Ok();
}

Status select(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "select", "self"));
  const Tensor& x = args.tensor(0);
  if (x.rank() == 0) return invalid_argument("select: cannot select from a 0-d tensor");
  KILN_ASSIGN_OR_RETURN(int64_t dim, norm_dim(args.attr_int("dim", 0), static_cast<int64_t>(x.rank()), "select"));
  int64_t n = x.dim(static_cast<size_t>(dim));
  int64_t index = args.attr_int("index", 0);
  if (index < -n || index >= n) return invalid_argument("select: index {} is out of range for size {}", index, n);
  if (index < 0) index += n;
  std::vector<int64_t> shape = x.shape();
  shape.erase(shape.begin() + dim);
  outputs->push_back(take_along(ctx, x, static_cast<size_t>(dim), index, 1, 1, shape));
  return Status::Ok();
}

}  // namespace k
}  // namespace kiln::portable
