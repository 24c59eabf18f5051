// Matrix products (through OpenBLAS sgemm) and scaled dot-product attention.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable::k {
namespace {

// C[m,n] = alpha * op(A) op(B) + beta * C, row-major, contiguous; split over ctx's threads, or
// on the calling thread alone when ctx is null.
void gemm(KernelContext* ctx, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t kk,
          float alpha, const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  if (kk == 0) {
    for (int64_t i = 0; i < m * n; ++i) c[i] = beta == 0 ? 0.0f : beta * c[i];
    return;
  }
  const int64_t lda = trans_a ? m : kk, ldb = trans_b ? kk : n;
  if (ctx) {
    sgemm(*ctx, trans_a, trans_b, m, n, kk, alpha, a, lda, b, ldb, beta, c, n);
  } else {
    sgemm_serial(trans_a, trans_b, m, n, kk, alpha, a, lda, b, ldb, beta, c, n);
  }
}

// Batched product with numpy broadcasting of the batch dims; a is [..., m, k], b is [..., k, n].
Result<Tensor> batched_matmul(KernelContext& ctx, const Tensor& a, const Tensor& b,
                              const char* op) {
  const size_t ra = a.rank(), rb = b.rank();
  int64_t m = a.dim(ra - 2), kk = a.dim(ra - 1), n = b.dim(rb - 1);
  if (b.dim(rb - 2) != kk) {
    return invalid_argument("{}: inner dims do not match: [{}] @ [{}]", op,
                            fmt::join(a.shape(), ", "), fmt::join(b.shape(), ", "));
  }
  std::vector<int64_t> ba(a.shape().begin(), a.shape().end() - 2);
  std::vector<int64_t> bb(b.shape().begin(), b.shape().end() - 2);
  KILN_ASSIGN_OR_RETURN(auto batch, broadcast_shapes(ba, bb, op));
  std::vector<int64_t> out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = ctx.allocate(DType::kF32, out_shape);
  float* po = writable<float>(out);
  const float* pa = a.data_as<float>();
  const float* pb = b.data_as<float>();
  int64_t nb = dims_product(batch, 0, batch.size());
  // [..., m, k] @ [k, n]: fold the batch into m (one big GEMM).
  if (rb == 2) {
    gemm(&ctx, false, false, nb * m, n, kk, 1.0f, pa, pb, 0.0f, po);
    return out;
  }
  const auto sa = BroadcastIter::strides_for(ba, batch);
  const auto sb = BroadcastIter::strides_for(bb, batch);
  // Product i of the batch; `split` spreads it over the threads.
  auto product = [&](int64_t i, bool split) {
    int64_t oa = 0, ob = 0;
    for (int64_t rest = i, d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      int64_t at = rest % batch[d];
      rest /= batch[d];
      oa += at * sa[d];
      ob += at * sb[d];
    }
    gemm(split ? &ctx : nullptr, false, false, m, n, kk, 1.0f, pa + oa * m * kk, pb + ob * kk * n,
         0.0f, po + i * m * n);
  };
  // Many small products (attention's heads): whole products per thread.
  if (nb >= ctx.num_threads() && m * n * kk < (int64_t{1} << 20)) {
    parallel_range(ctx, nb, grain_for(m * n * kk / 4), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) product(i, false);
    });
  } else {
    for (int64_t i = 0; i < nb; ++i) product(i, true);
  }
  return out;
}

}  // namespace

Status mm(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "mm", "self"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, "mm", "mat2"));
  const Tensor &a = args.tensor(0), &b = args.tensor(1);
  KILN_RETURN_IF_ERROR(need_f32(a, "mm", "self"));
  KILN_RETURN_IF_ERROR(need_f32(b, "mm", "mat2"));
  if (a.rank() != 2 || b.rank() != 2) return invalid_argument("mm: expected 2-D operands");
  KILN_ASSIGN_OR_RETURN(Tensor out, batched_matmul(ctx, a, b, "mm"));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status bmm(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "bmm", "self"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, "bmm", "mat2"));
  const Tensor &a = args.tensor(0), &b = args.tensor(1);
  KILN_RETURN_IF_ERROR(need_f32(a, "bmm", "self"));
  KILN_RETURN_IF_ERROR(need_f32(b, "bmm", "mat2"));
  if (a.rank() != 3 || b.rank() != 3 || a.dim(0) != b.dim(0)) {
    return invalid_argument("bmm: expected 3-D operands with equal batch, got [{}] and [{}]",
                            fmt::join(a.shape(), ", "), fmt::join(b.shape(), ", "));
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, batched_matmul(ctx, a, b, "bmm"));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status matmul(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "matmul", "self"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, "matmul", "other"));
  Tensor a = args.tensor(0), b = args.tensor(1);
  KILN_RETURN_IF_ERROR(need_f32(a, "matmul", "self"));
  KILN_RETURN_IF_ERROR(need_f32(b, "matmul", "other"));
  if (a.rank() == 0 || b.rank() == 0) return invalid_argument("matmul: operands must be at least 1-D");
  // 1-D operands get a unit dim that is removed from the result (torch.matmul).
  bool va = a.rank() == 1, vb = b.rank() == 1;
  if (va) a = a.reshaped({1, a.dim(0)});
  if (vb) b = b.reshaped({b.dim(0), 1});
  KILN_ASSIGN_OR_RETURN(Tensor out, batched_matmul(ctx, a, b, "matmul"));
  std::vector<int64_t> shape = out.shape();
  if (vb) shape.erase(shape.end() - 1);
  if (va) shape.erase(shape.end() - 1 - (vb ? 0 : 1));
  outputs->push_back(out.reshaped(shape));
  return Status::Ok();
}

Status linear(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "linear", "input"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, "linear", "weight"));
  const Tensor &x = args.tensor(0), &w = args.tensor(1);
  KILN_RETURN_IF_ERROR(need_f32(x, "linear", "input"));
  KILN_RETURN_IF_ERROR(need_f32(w, "linear", "weight"));
  KILN_ASSIGN_OR_RETURN(Epilogue epilogue, read_epilogue(args, "linear"));
  if (x.rank() < 1 || w.rank() != 2 || x.dim(x.rank() - 1) != w.dim(1)) {
    return invalid_argument("linear: input [{}] does not fit weight [{}]",
                            fmt::join(x.shape(), ", "), fmt::join(w.shape(), ", "));
  }
  int64_t kk = w.dim(1), n = w.dim(0), m = x.numel() / std::max<int64_t>(kk, 1);
  if (kk == 0) m = dims_product(x.shape(), 0, x.rank() - 1);
  std::vector<int64_t> shape = x.shape();
  shape.back() = n;
  Tensor out = ctx.allocate(DType::kF32, shape);
  float* po = writable<float>(out);
  float beta = 0.0f;
  if (args.has_tensor(2)) {
    Tensor bias = args.tensor(2);
    KILN_RETURN_IF_ERROR(need_f32(bias, "linear", "bias"));
    if (bias.numel() != n && bias.numel() != 1) {
      return invalid_argument("linear: bias has {} elements, expected {}", bias.numel(), n);
    }
    const float* pb = bias.data_as<float>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) po[i * n + j] = pb[bias.numel() == 1 ? 0 : j];
    }
    beta = 1.0f;
  }
  gemm(&ctx, false, true, m, n, kk, 1.0f, x.data_as<float>(), w.data_as<float>(), beta, po);
  apply_epilogue(ctx, epilogue, po, out.numel());
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status addmm(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  for (size_t i = 0; i < 3; ++i) {
    KILN_RETURN_IF_ERROR(need_tensor(args, i, "addmm", i == 0 ? "self" : i == 1 ? "mat1" : "mat2"));
  }
  const Tensor &c = args.tensor(0), &a = args.tensor(1), &b = args.tensor(2);
  KILN_RETURN_IF_ERROR(need_f32(c, "addmm", "self"));
  KILN_RETURN_IF_ERROR(need_f32(a, "addmm", "mat1"));
  KILN_RETURN_IF_ERROR(need_f32(b, "addmm", "mat2"));
  KILN_ASSIGN_OR_RETURN(Epilogue epilogue, read_epilogue(args, "addmm"));
  if (a.rank() != 2 || b.rank() != 2 || a.dim(1) != b.dim(0)) {
    return invalid_argument("addmm: mat1 [{}] and mat2 [{}] do not multiply",
                            fmt::join(a.shape(), ", "), fmt::join(b.shape(), ", "));
  }
  float beta = static_cast<float>(args.attr_float("beta", 1.0));
  float alpha = static_cast<float>(args.attr_float("alpha", 1.0));
  std::vector<int64_t> shape{a.dim(0), b.dim(1)};
  KILN_ASSIGN_OR_RETURN(auto bs, broadcast_shapes(c.shape(), shape, "addmm"));
  if (bs != shape) return invalid_argument("addmm: self [{}] does not broadcast to [{}]", fmt::join(c.shape(), ", "), fmt::join(shape, ", "));
  Tensor out = ctx.allocate(DType::kF32, shape);
  Tensor cb = broadcast_to(ctx, c, shape);
  float* po = writable<float>(out);
  std::copy(cb.data_as<float>(), cb.data_as<float>() + out.numel(), po);
  gemm(&ctx, false, false, a.dim(0), b.dim(1), a.dim(1), alpha, a.data_as<float>(), b.data_as<float>(),
       beta, po);
  apply_epilogue(ctx, epilogue, po, out.numel());
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status scaled_dot_product_attention(KernelContext& ctx, const KernelArgs& args,
                                    std::vector<Tensor>* outputs) {
  const char* op = "scaled_dot_product_attention";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "query"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, op, "key"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 2, op, "value"));
  const Tensor &q = args.tensor(0), &kt = args.tensor(1), &v = args.tensor(2);
  KILN_RETURN_IF_ERROR(need_f32(q, op, "query"));
  KILN_RETURN_IF_ERROR(need_f32(kt, op, "key"));
  KILN_RETURN_IF_ERROR(need_f32(v, op, "value"));
  if (q.rank() < 2 || kt.rank() != q.rank() || v.rank() != q.rank()) {
    return invalid_argument("{}: query, key and value must have the same rank >= 2", op);
  }
  const size_t r = q.rank();
  int64_t l = q.dim(r - 2), e = q.dim(r - 1), s = kt.dim(r - 2), ev = v.dim(r - 1);
  if (kt.dim(r - 1) != e || v.dim(r - 2) != s) {
    return invalid_argument("{}: key [{}] / value [{}] do not fit query [{}]", op,
                            fmt::join(kt.shape(), ", "), fmt::join(v.shape(), ", "),
                            fmt::join(q.shape(), ", "));
  }
  std::vector<int64_t> batch(q.shape().begin(), q.shape().end() - 2);
  for (size_t d = 0; d + 2 < r; ++d) {
    if (kt.dim(d) != batch[d] || v.dim(d) != batch[d]) {
      return invalid_argument("{}: batch dims of query, key and value differ", op);
    }
  }
  bool causal = args.attr_bool("is_causal", false);
  float scale = static_cast<float>(args.attr_opt_float("scale").value_or(1.0 / std::sqrt(static_cast<double>(e))));
  int64_t nb = dims_product(batch, 0, batch.size());
  std::vector<int64_t> score_shape = batch;
  score_shape.push_back(l);
  score_shape.push_back(s);
  Tensor mask;
  bool bool_mask = false;
  if (args.has_tensor(3)) {
    const Tensor& m = args.tensor(3);
    bool_mask = m.dtype() == DType::kBool;
    KILN_ASSIGN_OR_RETURN(auto bs, broadcast_shapes(m.shape(), score_shape, op));
    if (bs != score_shape) return invalid_argument("{}: attn_mask [{}] does not broadcast to [{}]", op, fmt::join(m.shape(), ", "), fmt::join(score_shape, ", "));
    mask = broadcast_to(ctx, bool_mask ? m : convert(ctx, m, DType::kF32), score_shape);
  }
  std::vector<int64_t> out_shape = batch;
  out_shape.push_back(l);
  out_shape.push_back(ev);
  Tensor out = ctx.allocate(DType::kF32, out_shape);
  const float ninf = -std::numeric_limits<float>::infinity();
  // One head: scores = q k^T * scale, masked, softmax, @ v; `split` spreads its products over
  // the threads, otherwise it runs on the calling thread with that thread's own scores.
  auto head = [&](int64_t bi, bool split) {
    float* scores = scratch_floats(static_cast<size_t>(l * s));
    const float* pq = q.data_as<float>() + bi * l * e;
    const float* pk = kt.data_as<float>() + bi * s * e;
    const float* pv = v.data_as<float>() + bi * s * ev;
    gemm(split ? &ctx : nullptr, false, true, l, s, e, scale, pq, pk, 0.0f, scores);
    for (int64_t i = 0; i < l; ++i) {
      float* row = scores + i * s;
      if (mask.defined() && mask.numel() > 0) {
        if (bool_mask) {
          const uint8_t* pm = mask.data_as<uint8_t>() + (bi * l + i) * s;
          for (int64_t j = 0; j < s; ++j) if (!pm[j]) row[j] = ninf;
        } else {
          const float* pm = mask.data_as<float>() + (bi * l + i) * s;
          for (int64_t j = 0; j < s; ++j) row[j] += pm[j];
        }
      }
      if (causal) {
        for (int64_t j = i + 1; j < s; ++j) row[j] = ninf;
      }
      float mx = ninf;
      for (int64_t j = 0; j < s; ++j) mx = std::max(mx, row[j]);
      float sum = 0;
      for (int64_t j = 0; j < s; ++j) {
        row[j] = mx == ninf ? 0.0f : std::exp(row[j] - mx);
        sum += row[j];
      }
      // A fully masked row gives NaN in torch; keep that behaviour visible.
      float inv = sum > 0 ? 1.0f / sum : std::numeric_limits<float>::quiet_NaN();
      for (int64_t j = 0; j < s; ++j) row[j] *= inv;
    }
    gemm(split ? &ctx : nullptr, false, false, l, ev, s, 1.0f, scores, pv, 0.0f,
         writable<float>(out) + bi * l * ev);
  };
  if (nb >= ctx.num_threads() && l * s * std::max(e, ev) < (int64_t{1} << 20)) {
    parallel_range(ctx, nb, grain_for(l * s * (e + ev) / 4), [&](int64_t begin, int64_t end) {
      for (int64_t bi = begin; bi < end; ++bi) head(bi, false);
    });
  } else {
    for (int64_t bi = 0; bi < nb; ++bi) head(bi, true);
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

// The determinant of each [n, n] matrix by LU decomposition with partial pivoting, in double.
Status det(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "det", "self"));
  const Tensor& x = args.tensor(0);
  const size_t r = x.rank();
  if (r < 2 || x.dim(r - 1) != x.dim(r - 2)) {
    return invalid_argument("det: self {}: expected [..., n, n] square matrices",
                            format_shape(x.dtype(), x.shape()));
  }
  const int64_t n = x.dim(r - 1);
  std::vector<int64_t> batch_shape(x.shape().begin(), x.shape().end() - 2);
  Tensor out = ctx.allocate(x.dtype(), batch_shape);
  const int64_t batch = out.numel();
  bool ok = dispatch_arith(x.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_floating_point_v<T>) {
      const T* src = x.data_as<T>();
      T* dst = out.mutable_data_as<T>();
      std::vector<double> a(static_cast<size_t>(n * n));
      for (int64_t b = 0; b < batch; ++b) {
        std::copy(src + b * n * n, src + (b + 1) * n * n, a.begin());
        double d = 1;
        for (int64_t k = 0; k < n && d != 0; ++k) {
          int64_t p = k;
          for (int64_t i = k + 1; i < n; ++i) {
            if (std::abs(a[static_cast<size_t>(i * n + k)]) >
                std::abs(a[static_cast<size_t>(p * n + k)]))
              p = i;
          }
          const double pivot = a[static_cast<size_t>(p * n + k)];
          if (pivot == 0) {
            d = 0;
            break;
          }
          if (p != k) {
            std::swap_ranges(a.begin() + p * n, a.begin() + (p + 1) * n, a.begin() + k * n);
            d = -d;
          }
          d *= pivot;
          for (int64_t i = k + 1; i < n; ++i) {
            const double f = a[static_cast<size_t>(i * n + k)] / pivot;
            for (int64_t j = k + 1; j < n; ++j)
              a[static_cast<size_t>(i * n + j)] -= f * a[static_cast<size_t>(k * n + j)];
          }
        }
        dst[b] = static_cast<T>(d);
      }
    }
  });
  if (!ok || !is_floating(x.dtype()))
    return unsupported("det: dtype {} is not supported", dtype_name(x.dtype()));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace kiln::portable::k
