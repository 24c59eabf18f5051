// Quantized matmul of two activations (batched, broadcasting, optional transposes).
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <type_traits>

#include "conv_engine.h"

namespace kiln::htp {

using detail::Range;

struct MatMulEngine {
  MatMulParams p;
  Encoding a, b, out;
  std::vector<int64_t> batch, out_shape;  // broadcast batch dims
  std::vector<int64_t> a_bstride, b_bstride;
  int64_t m = 0, k = 0, n = 0;
  ConvAlgorithm algo = ConvAlgorithm::kAuto;
  int64_t shift_a = 0, shift_b = 0, zu_a = 0, zu_b = 0;
  int planes = 1, digits = 1;
  int64_t base = 256, cb = 128;
  detail::OutputStage stage;
  // oneDNN
  dnnl::engine engine;
  dnnl::stream stream;
  dnnl::primitive prim;
  dnnl::memory::desc src_md, w_md, dst_md;
  // scratch
  std::vector<uint8_t> a_planes;
  std::vector<int8_t> b_digits;
  std::vector<int32_t> raw;
  std::vector<int64_t> row_sum, col_sum, col_coef;
  std::vector<int64_t> acc64;

  Status prepare(ConvAlgorithm requested);
  Status run(const void* pa, const void* pb, void* po);

 private:
  template <typename A>
  void prep_a(const A* x, bool direct);
  template <typename B>
  void prep_b(const B* x);
  template <typename A, typename B>
  void direct(const A* x, const B* y, int64_t b0, void* po);
};

Status MatMulEngine::prepare(ConvAlgorithm requested) {
  const char* op = "matmul";
  KILN_RETURN_IF_ERROR(validate_encoding(a, "matmul: input a"));
  KILN_RETURN_IF_ERROR(validate_encoding(b, "matmul: input b"));
  KILN_RETURN_IF_ERROR(validate_encoding(out, "matmul: output"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(a, "matmul: input a"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(b, "matmul: input b"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(out, "matmul: output"));
  for (const Encoding* e : {&a, &b}) {
    if (detail::storage_bits(e->dtype) > 16) {
      return unsupported("{}: input dtype {} is not supported (8- and 16-bit)", op,
                         dtype_name(e->dtype));
    }
  }
  if (p.a_shape.size() < 2 || p.b_shape.size() < 2) {
    return invalid_argument("{}: inputs of rank {} and {}, expected rank >= 2 each", op,
                            p.a_shape.size(), p.b_shape.size());
  }
  if (p.threads < 1) return invalid_argument("{}: threads is {}, expected >= 1", op, p.threads);
  KILN_ASSIGN_OR_RETURN(int64_t na, detail::checked_numel(p.a_shape, "matmul: a"));
  KILN_ASSIGN_OR_RETURN(int64_t nb, detail::checked_numel(p.b_shape, "matmul: b"));
  (void)na;
  (void)nb;
  const size_t ra = p.a_shape.size(), rb = p.b_shape.size();
  m = p.transpose_a ? p.a_shape[ra - 1] : p.a_shape[ra - 2];
  k = p.transpose_a ? p.a_shape[ra - 2] : p.a_shape[ra - 1];
  const int64_t kb = p.transpose_b ? p.b_shape[rb - 1] : p.b_shape[rb - 2];
  n = p.transpose_b ? p.b_shape[rb - 2] : p.b_shape[rb - 1];
  if (k != kb) {
    return invalid_argument("{}: a has {} columns (K) and b has {} rows, expected equal", op, k,
                            kb);
  }
  if (m < 1 || k < 1 || n < 1) {
    return invalid_argument("{}: M {}, K {}, N {}: each must be >= 1", op, m, k, n);
  }
  std::span<const int64_t> ab(p.a_shape.data(), ra - 2), bb(p.b_shape.data(), rb - 2);
  auto bs = broadcast_shapes(ab, bb);
  if (!bs.ok()) return bs.status().with_context("matmul: batch dimensions");
  batch = *bs;
  out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  KILN_ASSIGN_OR_RETURN(int64_t no, detail::checked_numel(out_shape, "matmul: output"));
  (void)no;
  // Batch strides of a and b (in matrices), 0 along broadcast dimensions.
  auto strides = [&](std::span<const int64_t> s) {
    std::vector<int64_t> st(batch.size(), 0);
    int64_t stride = 1;
    for (size_t i = s.size(); i-- > 0;) {
      st[batch.size() - s.size() + i] = s[i] == 1 ? 0 : stride;
      stride *= s[i];
    }
    return st;
  };
  a_bstride = strides(ab);
  b_bstride = strides(bb);

  shift_a = -detail::storage_range(a.dtype).lo;
  shift_b = -detail::storage_range(b.dtype).lo;
  zu_a = a.zero_point() + shift_a;
  zu_b = b.zero_point() + shift_b;
  const int64_t max_acc = detail::max_abs_centered(a) * detail::max_abs_centered(b) * k;
  if (max_acc >= (int64_t{1} << 62)) {
    return unsupported("{}: accumulators could reach {} (> 2^62) with K = {}", op, max_acc, k);
  }
  stage.set_output({static_cast<double>(a.scale()) * b.scale() / out.scale()}, out);
  stage.m.resize(static_cast<size_t>(n), stage.m[0]);
  stage.mult.resize(static_cast<size_t>(n), stage.mult[0]);
  stage.rshift.resize(static_cast<size_t>(n), stage.rshift[0]);
  stage.max_abs_acc = max_acc;
  stage.fast = false;
  stage.finish();

  algo = requested == ConvAlgorithm::kAuto ? ConvAlgorithm::kOneDnn : requested;
  if (algo == ConvAlgorithm::kOneDnn) {
    base = detail::dnnl_has_vnni() ? 256 : 128;
    if (255 * (base / 2) * k >= (int64_t{1} << 31)) {
      if (requested == ConvAlgorithm::kOneDnn) {
        return unsupported("{}: onednn: K = {} could overflow int32", op, k);
      }
      algo = ConvAlgorithm::kDirect;
    }
  }
  if (algo == ConvAlgorithm::kDirect) {
    stage.c0.assign(static_cast<size_t>(n), 0);
    return Status::Ok();
  }
  planes = detail::storage_bits(a.dtype) > 8 ? 2 : 1;
  const int bits_b = detail::storage_bits(b.dtype);
  digits = 1;
  for (int64_t span = base; span < (int64_t{1} << bits_b); span *= base) ++digits;
  cb = 0;
  for (int64_t q = 0, pw = 1; q < digits; ++q, pw *= base) cb += (base / 2) * pw;
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  try {
    detail::OmpThreadsScope threads(p.threads);
    engine = detail::cpu_engine();
    stream = dnnl::stream(engine);
    src_md = dnnl::memory::desc({planes * m, k}, dt::u8, tag::ab);
    w_md = dnnl::memory::desc({k, n}, dt::s8, tag::ab);
    dst_md = dnnl::memory::desc({planes * m, n}, dt::s32, tag::ab);
    dnnl::matmul::desc d(src_md, w_md, dst_md);
    dnnl::matmul::primitive_desc pd(d, engine);
    prim = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    return unsupported("{}: onednn: {}", op, e.what());
  }
  a_planes.assign(static_cast<size_t>(planes * m * k), 0);
  b_digits.assign(static_cast<size_t>(digits * k * n), 0);
  raw.assign(static_cast<size_t>(digits * planes * m * n), 0);
  row_sum.assign(static_cast<size_t>(m), 0);
  col_sum.assign(static_cast<size_t>(n), 0);
  col_coef.assign(static_cast<size_t>(n), -(zu_b - cb));
  stage.c0.assign(static_cast<size_t>(n), 0);
  return Status::Ok();
}

template <typename A>
void MatMulEngine::prep_a(const A* x, bool direct_src) {
  for (int64_t i = 0; i < m; ++i) {
    int64_t s = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t v = static_cast<int64_t>(x[p.transpose_a ? j * m + i : i * k + j]) + shift_a;
      s += v;
      if (direct_src) continue;
      a_planes[static_cast<size_t>(i * k + j)] = static_cast<uint8_t>(v & 255);
      if (planes > 1) a_planes[static_cast<size_t>((m + i) * k + j)] = static_cast<uint8_t>(v >> 8);
    }
    row_sum[static_cast<size_t>(i)] = s;
  }
}

template <typename B>
void MatMulEngine::prep_b(const B* y) {
  std::fill(col_sum.begin(), col_sum.end(), 0);
  const int64_t half = base / 2;
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t c = 0; c < n; ++c) {
      int64_t v = static_cast<int64_t>(y[p.transpose_b ? c * k + j : j * n + c]) + shift_b;
      col_sum[static_cast<size_t>(c)] += v - cb;
      for (int q = 0; q < digits; ++q) {
        b_digits[static_cast<size_t>((q * k + j) * n + c)] = static_cast<int8_t>(v % base - half);
        v /= base;
      }
    }
  }
}

template <typename A, typename B>
void MatMulEngine::direct(const A* x, const B* y, int64_t b0, void* po) {
  detail::parallel_for(p.threads, m, 1, [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> acc(static_cast<size_t>(n));
    for (int64_t i = r0; i < r1; ++i) {
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t av =
            static_cast<int64_t>(x[p.transpose_a ? j * m + i : i * k + j]) - a.zero_point();
        for (int64_t c = 0; c < n; ++c) {
          acc[c] += av * (static_cast<int64_t>(y[p.transpose_b ? c * k + j : j * n + c]) -
                          b.zero_point());
        }
      }
      stage.store64(acc.data(), 1, n, po, b0 * m + i);
    }
  });
}

Status MatMulEngine::run(const void* pa, const void* pb, void* po) {
  if (pa == nullptr || pb == nullptr || po == nullptr) {
    return invalid_argument("matmul: null buffer");
  }
  int64_t nbatch = 1;
  for (int64_t d : batch) nbatch *= d;
  Status status;
  detail::dispatch_storage(a.dtype, [&](auto ta) {
    using A = decltype(ta);
    detail::dispatch_storage(b.dtype, [&](auto tb) {
      using B = decltype(tb);
      const A* xa = static_cast<const A*>(pa);
      const B* xb = static_cast<const B*>(pb);
      int64_t last_a = -1, last_b = -1;
      for (int64_t bi = 0; bi < nbatch && status.ok(); ++bi) {
        int64_t oa = 0, ob = 0, rest = bi;
        for (size_t d = batch.size(); d-- > 0;) {
          const int64_t idx = rest % batch[d];
          rest /= batch[d];
          oa += idx * a_bstride[d];
          ob += idx * b_bstride[d];
        }
        const A* x = xa + oa * m * k;
        const B* y = xb + ob * k * n;
        if (algo == ConvAlgorithm::kDirect) {
          direct(x, y, bi, po);
          continue;
        }
        // A broadcast operand is prepared once for the batches that share it.
        const bool direct_src = std::is_same_v<A, uint8_t> && !p.transpose_a;
        if (oa != last_a) prep_a(x, direct_src);
        if (ob != last_b) prep_b(y);
        last_a = oa;
        last_b = ob;
        const uint8_t* src = direct_src ? reinterpret_cast<const uint8_t*>(x) : a_planes.data();
        try {
          detail::OmpThreadsScope threads(p.threads);
          dnnl::memory src_mem(src_md, engine, const_cast<uint8_t*>(src));
          for (int q = 0; q < digits; ++q) {
            dnnl::memory w_mem(w_md, engine, b_digits.data() + q * k * n);
            dnnl::memory dst_mem(dst_md, engine, raw.data() + q * planes * m * n);
            prim.execute(
                stream,
                {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, dst_mem}});
          }
          stream.wait();
        } catch (const dnnl::error& e) {
          status = internal_error("matmul: onednn execution failed: {}", e.what());
          return;
        }
        const int64_t zt = zu_b - cb;
        for (int64_t c = 0; c < n; ++c) {
          stage.c0[c] = -zu_a * col_sum[c] + k * zu_a * zt;
        }
        std::vector<const int32_t*> raws;
        std::vector<int64_t> coef;
        int64_t wq = 1;
        for (int q = 0; q < digits; ++q, wq *= base) {
          for (int pl = 0; pl < planes; ++pl) {
            raws.push_back(raw.data() + (q * planes + pl) * m * n);
            coef.push_back(wq << (8 * pl));
          }
        }
        void* dst = static_cast<char*>(po) + bi * m * n * dtype_size(out.dtype);
        stage.run(raws, coef, m, n, n, row_sum.data(), col_coef.data(), dst, p.threads);
      }
    });
  });
  return status;
}

QuantMatMul::QuantMatMul() = default;
QuantMatMul::QuantMatMul(QuantMatMul&&) noexcept = default;
QuantMatMul& QuantMatMul::operator=(QuantMatMul&&) noexcept = default;
QuantMatMul::~QuantMatMul() = default;

Result<QuantMatMul> QuantMatMul::prepare(const MatMulParams& p, const Encoding& a,
                                         const Encoding& b, const Encoding& out,
                                         ConvAlgorithm algorithm) {
  auto engine = std::make_unique<MatMulEngine>();
  engine->p = p;
  engine->a = a;
  engine->b = b;
  engine->out = out;
  KILN_RETURN_IF_ERROR(engine->prepare(algorithm));
  QuantMatMul mm;
  mm.engine_ = std::move(engine);
  return mm;
}

Status QuantMatMul::run(const void* a, const void* b, void* out) {
  if (!engine_) return invalid_argument("matmul: run on an unprepared object");
  return engine_->run(a, b, out);
}

const std::vector<int64_t>& QuantMatMul::output_shape() const {
  static const std::vector<int64_t> kEmpty;
  return engine_ ? engine_->out_shape : kEmpty;
}

ConvAlgorithm QuantMatMul::algorithm() const {
  return engine_ ? engine_->algo : ConvAlgorithm::kAuto;
}

}  // namespace kiln::htp
