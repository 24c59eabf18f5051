// Normalizations, softmax and reductions.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable::k {
namespace {

// Optional per-channel/per-element parameter; null when absent.
Result<const float*> opt_param(const KernelArgs& args, size_t i, int64_t expect, const char* op,
                               const char* what) {
  if (!args.has_tensor(i)) return static_cast<const float*>(nullptr);
  const Tensor& t = args.tensor(i);
  KILN_RETURN_IF_ERROR(need_f32(t, op, what));
  if (t.numel() != expect) {
    return invalid_argument("{}: '{}' has {} elements, expected {}", op, what, t.numel(), expect);
  }
  return t.data_as<float>();
}

// Normalizes rows of `inner` elements: y = (x - mean) * rstd * w + b (w/b per element or per row
// group via `param_of`).
template <typename ParamIndex>
void normalize_rows(KernelContext& ctx, const float* x, float* y, int64_t rows, int64_t inner,
                    float eps, const float* w, const float* b, bool center, ParamIndex param_of) {
  parallel_range(ctx, rows, grain_for(3 * inner), [&](int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* xr = x + r * inner;
    float* yr = y + r * inner;
    double mean = 0, var = 0;
    if (center) {
      for (int64_t i = 0; i < inner; ++i) mean += xr[i];
      mean /= static_cast<double>(inner);
    }
    for (int64_t i = 0; i < inner; ++i) {
      double d = xr[i] - mean;
      var += d * d;
    }
    var /= static_cast<double>(inner);
    float rstd = static_cast<float>(1.0 / std::sqrt(var + eps));
    float m = static_cast<float>(mean);
    for (int64_t i = 0; i < inner; ++i) {
      int64_t p = param_of(r, i);
      float v = (xr[i] - m) * rstd;
      if (w) v *= w[p];
      if (b) v += b[p];
      yr[i] = v;
    }
  }
  });
}

}  // namespace

Status batch_norm(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "batch_norm";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "input"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 3, op, "running_mean"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 4, op, "running_var"));
  const Tensor& x = args.tensor(0);
  KILN_RETURN_IF_ERROR(need_f32(x, op, "input"));
  if (x.rank() < 2) return invalid_argument("{}: input must be at least 2-D", op);
  int64_t c = x.dim(1);
  KILN_ASSIGN_OR_RETURN(const float* w, opt_param(args, 1, c, op, "weight"));
  KILN_ASSIGN_OR_RETURN(const float* b, opt_param(args, 2, c, op, "bias"));
  KILN_ASSIGN_OR_RETURN(const float* mean, opt_param(args, 3, c, op, "running_mean"));
  KILN_ASSIGN_OR_RETURN(const float* var, opt_param(args, 4, c, op, "running_var"));
  float eps = static_cast<float>(args.attr_float("eps", 1e-5));
  int64_t inner = dims_product(x.shape(), 2, x.rank()), outer = x.dim(0);
  Tensor out = ctx.allocate(DType::kF32, x.shape());
  const float* px = x.data_as<float>();
  float* po = writable<float>(out);
  parallel_range(ctx, outer * c, grain_for(inner), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      int64_t ch = plane % c;
      float scale = (w ? w[ch] : 1.0f) / std::sqrt(var[ch] + eps);
      float shift = (b ? b[ch] : 0.0f) - mean[ch] * scale;
      const float* xi = px + plane * inner;
      float* yi = po + plane * inner;
      for (int64_t i = 0; i < inner; ++i) yi[i] = xi[i] * scale + shift;
    }
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

namespace {
// Elements per normalized row: the product of `normalized_shape`, which must end x's shape.
Result<int64_t> normalized_size(const KernelArgs& args, const Tensor& x, const char* op) {
  auto ns = args.attr_ints("normalized_shape", {});
  if (ns.size() > x.rank() || !std::equal(ns.begin(), ns.end(), x.shape().end() - static_cast<long>(ns.size()))) {
    return invalid_argument("{}: normalized_shape [{}] does not end input [{}]", op,
                            fmt::join(ns, ", "), fmt::join(x.shape(), ", "));
  }
  return dims_product(ns, 0, ns.size());
}

// layer_norm (centred, with bias) and rms_norm (neither) over the trailing normalized_shape dims.
Status normalize_trailing(KernelContext& ctx, const KernelArgs& args, const char* op, float eps,
                          bool layer, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "input"));
  const Tensor& x = args.tensor(0);
  KILN_RETURN_IF_ERROR(need_f32(x, op, "input"));
  KILN_ASSIGN_OR_RETURN(int64_t inner, normalized_size(args, x, op));
  int64_t rows = inner == 0 ? 0 : x.numel() / inner;
  KILN_ASSIGN_OR_RETURN(const float* w, opt_param(args, 1, inner, op, "weight"));
  const float* b = nullptr;
  if (layer) {
    KILN_ASSIGN_OR_RETURN(b, opt_param(args, 2, inner, op, "bias"));
  }
  Tensor out = ctx.allocate(DType::kF32, x.shape());
  normalize_rows(ctx, x.data_as<float>(), writable<float>(out), rows, inner, eps, w, b, layer,
                 [](int64_t, int64_t i) { return i; });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace

Status layer_norm(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  float eps = static_cast<float>(args.attr_float("eps", 1e-5));
  return normalize_trailing(ctx, args, "layer_norm", eps, /*layer=*/true, outputs);
}

Status rms_norm(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  // torch: eps None means the dtype's machine epsilon.
  float eps = static_cast<float>(
      args.attr_opt_float("eps").value_or(std::numeric_limits<float>::epsilon()));
  return normalize_trailing(ctx, args, "rms_norm", eps, /*layer=*/false, outputs);
}

Status group_norm(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "group_norm";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "input"));
  const Tensor& x = args.tensor(0);
  KILN_RETURN_IF_ERROR(need_f32(x, op, "input"));
  if (x.rank() < 2) return invalid_argument("{}: input must be at least 2-D", op);
  int64_t groups = args.attr_int("num_groups", 1);
  int64_t c = x.dim(1);
  if (groups <= 0 || c % groups != 0) {
    return invalid_argument("{}: {} channels do not split into {} groups", op, c, groups);
  }
  KILN_ASSIGN_OR_RETURN(const float* w, opt_param(args, 1, c, op, "weight"));
  KILN_ASSIGN_OR_RETURN(const float* b, opt_param(args, 2, c, op, "bias"));
  float eps = static_cast<float>(args.attr_float("eps", 1e-5));
  int64_t spatial = dims_product(x.shape(), 2, x.rank());
  int64_t inner = c / groups * spatial;
  int64_t rows = x.dim(0) * groups;
  Tensor out = ctx.allocate(DType::kF32, x.shape());
  normalize_rows(ctx, x.data_as<float>(), writable<float>(out), rows, inner, eps, w, b, true,
                 [=](int64_t r, int64_t i) { return (r % groups) * (c / groups) + i / std::max<int64_t>(spatial, 1); });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

namespace {

Status softmax_impl(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs,
                    bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  Tensor x = args.tensor(0);
  if (x.dtype() != DType::kF32) x = convert(ctx, x, DType::kF32);
  KILN_ASSIGN_OR_RETURN(int64_t dim, norm_dim(args.attr_int("dim", -1), static_cast<int64_t>(x.rank()), op));
  int64_t n = x.rank() == 0 ? 1 : x.dim(static_cast<size_t>(dim));
  int64_t inner = dims_product(x.shape(), static_cast<size_t>(dim) + 1, x.rank());
  int64_t outer = dims_product(x.shape(), 0, static_cast<size_t>(dim));
  Tensor out = ctx.allocate(DType::kF32, x.shape());
  const float* px = x.data_as<float>();
  float* po = writable<float>(out);
  // One softmax per (outer, inner) position, each over n elements `inner` apart.
  parallel_range(ctx, outer * inner, grain_for(4 * n), [&](int64_t begin, int64_t end) {
    std::vector<float> col(static_cast<size_t>(n));
    for (int64_t j = begin; j < end; ++j) {
      const int64_t o = j / inner, in = j % inner;
      const float* xs = px + o * n * inner + in;
      float* ys = po + o * n * inner + in;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, xs[i * inner]);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        col[i] = std::exp(xs[i * inner] - mx);
        sum += col[i];
      }
      if (log) {
        float lse = static_cast<float>(std::log(sum));
        for (int64_t i = 0; i < n; ++i) ys[i * inner] = xs[i * inner] - mx - lse;
      } else {
        float inv = static_cast<float>(1.0 / sum);
        for (int64_t i = 0; i < n; ++i) ys[i * inner] = col[i] * inv;
      }
    }
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

enum class Reduce { kSum, kProd, kMean, kMax, kMin };

// Reduces `dim` of x (dense) keeping it with size 1.
template <typename T, typename Acc>
Tensor reduce_one(KernelContext& ctx, const Tensor& x, size_t dim, Reduce kind, DType out_dtype) {
  std::vector<int64_t> shape = x.shape();
  int64_t n = shape[dim];
  int64_t inner = dims_product(shape, dim + 1, shape.size()), outer = dims_product(shape, 0, dim);
  shape[dim] = 1;
  Tensor out = ctx.allocate(out_dtype, shape);
  const T* px = x.data_as<T>();
  using O = std::conditional_t<std::is_same_v<Acc, double> || std::is_floating_point_v<T>, T, Acc>;
  O* po = writable<O>(out);
  parallel_range(ctx, outer * inner, grain_for(n), [&](int64_t begin, int64_t end) {
  for (int64_t j = begin; j < end; ++j) {
      const int64_t o = j / inner, in = j % inner;
      const T* xs = px + o * n * inner + in;
      if (kind == Reduce::kMax || kind == Reduce::kMin) {
        T m = xs[0];
        for (int64_t i = 1; i < n; ++i) {
          T v = xs[i * inner];
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(v)) { m = v; break; }
          }
          if (kind == Reduce::kMax ? v > m : v < m) m = v;
        }
        po[o * inner + in] = static_cast<O>(m);
      } else if (kind == Reduce::kProd) {
        Acc s = 1;
        for (int64_t i = 0; i < n; ++i) s *= static_cast<Acc>(xs[i * inner]);
        po[o * inner + in] = static_cast<O>(s);
      } else {
        Acc s = 0;
        for (int64_t i = 0; i < n; ++i) s += static_cast<Acc>(xs[i * inner]);
        if (kind == Reduce::kMean) s = static_cast<Acc>(s / static_cast<Acc>(n));
        po[o * inner + in] = static_cast<O>(s);
      }
  }
  });
  return out;
}

Status reduce(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs,
              Reduce kind, const char* op) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  Tensor x = args.tensor(0);
  if (kind == Reduce::kMean && x.dtype() != DType::kF32) {
    if (!is_floating(x.dtype())) return unsupported("{}: integer input; cast it to a float type first", op);
    x = convert(ctx, x, DType::kF32);
  }
  const bool accumulates = kind == Reduce::kSum || kind == Reduce::kProd;
  if (x.dtype() == DType::kBool) x = convert(ctx, x, accumulates ? DType::kI64 : DType::kU8);
  bool keepdim = args.attr_bool("keepdim", false);
  auto dims_opt = args.attr_opt_ints("dim");
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<bool> reduced(x.rank(), false);
  if (!dims_opt || dims_opt->empty()) {
    std::fill(reduced.begin(), reduced.end(), true);
  } else {
    for (int64_t d : *dims_opt) {
      KILN_ASSIGN_OR_RETURN(int64_t nd, norm_dim(d, rank, op));
      if (rank > 0) reduced[static_cast<size_t>(nd)] = true;
    }
  }
  for (size_t d = 0; d < x.rank(); ++d) {
    if (reduced[d] && x.dim(d) == 0 && (kind == Reduce::kMax || kind == Reduce::kMin)) {
      return invalid_argument("{}: cannot reduce dim {} of size 0", op, d);
    }
  }
  // sum and prod of integers accumulate and return int64 (torch).
  DType out_dtype = accumulates && !is_floating(x.dtype()) ? DType::kI64 : x.dtype();
  Tensor cur = x;
  bool ok = true;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (!reduced[d]) continue;
    ok = dispatch_arith(cur.dtype(), [&](auto t) {
      using T = decltype(t);
      if constexpr (std::is_floating_point_v<T>) {
        cur = reduce_one<T, double>(ctx, cur, d, kind, cur.dtype());
      } else if (accumulates) {
        cur = reduce_one<T, int64_t>(ctx, cur, d, kind, DType::kI64);
      } else {
        cur = reduce_one<T, T>(ctx, cur, d, kind, cur.dtype());
      }
    }) && ok;
  }
  if (!ok) return unsupported("{}: dtype {} is not supported", op, dtype_name(x.dtype()));
  if (x.rank() == 0 && cur.dtype() != out_dtype) cur = convert(ctx, cur, out_dtype);
  std::vector<int64_t> shape;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (!reduced[d]) {
      shape.push_back(x.dim(d));
    } else if (keepdim) {
      shape.push_back(1);
    }
  }
  outputs->push_back(cur.reshaped(shape));
  return Status::Ok();
}

}  // namespace

Status softmax(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return softmax_impl(ctx, args, outputs, false);
}
Status log_softmax(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return softmax_impl(ctx, args, outputs, true);
}
Status mean(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return reduce(ctx, args, outputs, Reduce::kMean, "mean");
}
Status sum(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return reduce(ctx, args, outputs, Reduce::kSum, "sum");
}
Status prod(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return reduce(ctx, args, outputs, Reduce::kProd, "prod");
}
Status amax(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return reduce(ctx, args, outputs, Reduce::kMax, "amax");
}
Status amin(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return reduce(ctx, args, outputs, Reduce::kMin, "amin");
}

namespace {

// argmax / argmin: the first index of the extreme value (the last with select_last, ONNX's
// select_last_index); a NaN is the extreme (torch, ONNX Runtime).
template <bool Max>
Status arg_extreme(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = Max ? "argmax" : "argmin";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  Tensor x = args.tensor(0);
  if (x.dtype() == DType::kBool) x = convert(ctx, x, DType::kU8);
  auto dim_opt = args.attr_opt_int("dim");
  bool keepdim = args.attr_bool("keepdim", false);
  const bool last = args.attr_bool("select_last", false);
  std::vector<int64_t> in_shape = x.shape();
  int64_t dim = 0;
  if (!dim_opt) {
    in_shape = {x.numel()};
  } else {
    KILN_ASSIGN_OR_RETURN(dim, norm_dim(*dim_opt, static_cast<int64_t>(x.rank()), op));
    if (x.rank() == 0) in_shape = {1};
  }
  int64_t n = in_shape[static_cast<size_t>(dim)];
  if (n == 0) return invalid_argument("{}: cannot reduce an empty dim", op);
  int64_t inner = dims_product(in_shape, static_cast<size_t>(dim) + 1, in_shape.size());
  int64_t outer = dims_product(in_shape, 0, static_cast<size_t>(dim));
  std::vector<int64_t> shape;
  if (!dim_opt) {
    if (keepdim) shape.assign(x.rank(), 1);
  } else {
    shape = x.shape();
    if (x.rank() > 0) {
      if (keepdim) {
        shape[static_cast<size_t>(dim)] = 1;
      } else {
        shape.erase(shape.begin() + dim);
      }
    }
  }
  Tensor out = ctx.allocate(DType::kI64, shape);
  int64_t* po = writable<int64_t>(out);
  bool ok = dispatch_arith(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* px = x.data_as<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        const T* xs = px + o * n * inner + in;
        int64_t best = 0;
        T m = xs[0];
        for (int64_t i = 1; i < n; ++i) {
          T v = xs[i * inner];
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(m)) break;
            if (std::isnan(v)) { best = i; m = v; break; }
          }
          if (Max ? (v > m || (last && v == m)) : (v < m || (last && v == m))) {
            m = v;
            best = i;
          }
        }
        po[o * inner + in] = best;
      }
    }
  });
  if (!ok) return unsupported("{}: dtype {} is not supported", op, dtype_name(x.dtype()));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace

Status argmax(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return arg_extreme<true>(ctx, args, outputs);
}

Status argmin(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return arg_extreme<false>(ctx, args, outputs);
}

Status topk(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "topk", "self"));
  Tensor x = args.tensor(0);
  if (x.dtype() == DType::kBool) x = convert(ctx, x, DType::kU8);
  KILN_ASSIGN_OR_RETURN(int64_t dim,
                        norm_dim(args.attr_int("dim", -1), static_cast<int64_t>(x.rank()), "topk"));
  const int64_t k = args.attr_int("k", 0);
  const bool largest = args.attr_bool("largest", true);
  const size_t d = static_cast<size_t>(dim);
  const int64_t n = x.rank() == 0 ? 1 : x.dim(d);
  if (k < 0 || k > n) {
    return invalid_argument("topk: k {} is outside [0, {}] for dim {} of [{}]", k, n, dim,
                            fmt::join(x.shape(), ", "));
  }
  std::vector<int64_t> shape = x.shape();
  if (!shape.empty()) shape[d] = k;
  Tensor values = ctx.allocate(x.dtype(), shape);
  Tensor indices = ctx.allocate(DType::kI64, shape);
  const int64_t inner = dims_product(x.shape(), d + 1, x.rank()),
                outer = dims_product(x.shape(), 0, d);
  bool ok = dispatch_arith(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* px = x.data_as<T>();
    T* pv = writable<T>(values);
    int64_t* pi = writable<int64_t>(indices);
    // Larger first (NaN largest), equal values by lower index; reversed for the smallest.
    auto before = [&](const T* row, int64_t a, int64_t b) {
      T va = row[a * inner], vb = row[b * inner];
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(va) || std::isnan(vb)) {
          if (std::isnan(va) && std::isnan(vb)) return a < b;
          return largest == static_cast<bool>(std::isnan(va));
        }
      }
      if (va != vb) return largest ? va > vb : va < vb;
      return a < b;
    };
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        const T* row = px + o * n * inner + in;
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int64_t a, int64_t b) { return before(row, a, b); });
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = (o * k + j) * inner + in;
          pv[at] = row[order[static_cast<size_t>(j)] * inner];
          pi[at] = order[static_cast<size_t>(j)];
        }
      }
    }
  });
  if (!ok) return unsupported("topk: dtype {} is not supported", dtype_name(x.dtype()));
  if (values.dtype() != args.tensor(0).dtype()) {
    values = convert(ctx, values, args.tensor(0).dtype());
  }
  outputs->push_back(std::move(values));
  outputs->push_back(std::move(indices));
  return Status::Ok();
}

Status cumsum(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "cumsum", "self"));
  Tensor x = args.tensor(0);
  // torch promotes integer (and bool) inputs to int64.
  if (!is_floating(x.dtype())) x = convert(ctx, x, DType::kI64);
  KILN_ASSIGN_OR_RETURN(int64_t dim, norm_dim(args.attr_int("dim", 0), static_cast<int64_t>(x.rank()), "cumsum"));
  std::vector<int64_t> sh = x.rank() == 0 ? std::vector<int64_t>{1} : x.shape();
  int64_t n = sh[static_cast<size_t>(dim)];
  int64_t inner = dims_product(sh, static_cast<size_t>(dim) + 1, sh.size()),
          outer = dims_product(sh, 0, static_cast<size_t>(dim));
  const bool exclusive = args.attr_bool("exclusive", false),
             reverse = args.attr_bool("reverse", false);
  Tensor out = ctx.allocate(x.dtype(), x.shape());
  bool ok = dispatch_arith(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* px = x.data_as<T>();
    T* po = writable<T>(out);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
        Acc s = 0;
        for (int64_t step = 0; step < n; ++step) {
          int64_t i = reverse ? n - 1 - step : step;
          int64_t off = (o * n + i) * inner + in;
          if (exclusive) {
            po[off] = static_cast<T>(s);
            s += static_cast<Acc>(px[off]);
          } else {
            s += static_cast<Acc>(px[off]);
            po[off] = static_cast<T>(s);
          }
        }
      }
    }
  });
  if (!ok) return unsupported("cumsum: dtype {} is not supported", dtype_name(x.dtype()));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace kiln::portable::k
