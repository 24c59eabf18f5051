// The kernel table, argument accessors and shared helpers.
#include "kiln/backends/portable/kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable {

// ---- KernelArgs accessors.

const AttrValue* KernelArgs::attr(std::string_view name) const {
  for (const auto& a : attrs) {
    if (a.name == name) return std::holds_alternative<std::monostate>(a.value) ? nullptr : &a.value;
  }
  return nullptr;
}

int64_t KernelArgs::attr_int(std::string_view name, int64_t fallback) const {
  auto v = attr_opt_int(name);
  return v ? *v : fallback;
}

std::optional<int64_t> KernelArgs::attr_opt_int(std::string_view name) const {
  const AttrValue* v = attr(name);
  if (v == nullptr) return std::nullopt;
  if (auto* i = std::get_if<int64_t>(v)) return *i;
  if (auto* d = std::get_if<double>(v)) return static_cast<int64_t>(*d);
  if (auto* b = std::get_if<bool>(v)) return *b ? 1 : 0;
  return std::nullopt;
}

double KernelArgs::attr_float(std::string_view name, double fallback) const {
  auto v = attr_opt_float(name);
  return v ? *v : fallback;
}

std::optional<double> KernelArgs::attr_opt_float(std::string_view name) const {
  const AttrValue* v = attr(name);
  if (v == nullptr) return std::nullopt;
  if (auto* d = std::get_if<double>(v)) return *d;
  if (auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return std::nullopt;
}

bool KernelArgs::attr_bool(std::string_view name, bool fallback) const {
  const AttrValue* v = attr(name);
  if (v == nullptr) return fallback;
  if (auto* b = std::get_if<bool>(v)) return *b;
  if (auto* i = std::get_if<int64_t>(v)) return *i != 0;
  return fallback;
}

std::string KernelArgs::attr_str(std::string_view name, std::string_view fallback) const {
  const AttrValue* v = attr(name);
  if (v != nullptr) {
    if (auto* s = std::get_if<std::string>(v)) return *s;
  }
  return std::string(fallback);
}

std::vector<int64_t> KernelArgs::attr_ints(std::string_view name,
                                           std::vector<int64_t> fallback) const {
  auto v = attr_opt_ints(name);
  return v ? *v : fallback;
}

std::optional<std::vector<int64_t>> KernelArgs::attr_opt_ints(std::string_view name) const {
  const AttrValue* v = attr(name);
  if (v == nullptr) return std::nullopt;
  if (auto* l = std::get_if<std::vector<int64_t>>(v)) return *l;
  if (auto* i = std::get_if<int64_t>(v)) return std::vector<int64_t>{*i};
  if (auto* d = std::get_if<std::vector<double>>(v)) {
    std::vector<int64_t> out;
    for (double x : *d) out.push_back(static_cast<int64_t>(x));
    return out;
  }
  return std::nullopt;
}

std::optional<std::vector<double>> KernelArgs::attr_opt_floats(std::string_view name) const {
  const AttrValue* v = attr(name);
  if (v == nullptr) return std::nullopt;
  if (auto* d = std::get_if<std::vector<double>>(v)) return *d;
  if (auto* l = std::get_if<std::vector<int64_t>>(v)) return std::vector<double>(l->begin(), l->end());
  if (auto* f = std::get_if<double>(v)) return std::vector<double>{*f};
  return std::nullopt;
}

DType KernelArgs::attr_dtype(std::string_view name, DType fallback) const {
  const AttrValue* v = attr(name);
  if (v == nullptr) return fallback;
  if (auto* d = std::get_if<DType>(v)) return *d;
  return fallback;
}

// ---- Shared helpers.

Status need_tensor(const KernelArgs& args, size_t i, const char* op, const char* what) {
  if (!args.has_tensor(i)) {
    return invalid_argument("{}: argument '{}' (#{}) must be a tensor", op, what, i);
  }
  return Status::Ok();
}

Result<std::vector<int64_t>> int_values(const KernelArgs& args, size_t i, const char* op,
                                        const char* what) {
  KILN_RETURN_IF_ERROR(need_tensor(args, i, op, what));
  const Tensor& t = args.tensor(i);
  if (t.rank() != 1 || (t.dtype() != DType::kI64 && t.dtype() != DType::kI32)) {
    return invalid_argument("{}: '{}' is {}, expected a 1-D i64 or i32 tensor", op, what,
                            format_shape(t.dtype(), t.shape()));
  }
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t k = 0; k < v.size(); ++k) {
    v[k] = t.dtype() == DType::kI64 ? t.data_as<int64_t>()[k] : t.data_as<int32_t>()[k];
  }
  return v;
}

Status need_f32(const Tensor& t, const char* op, const char* what) {
  if (t.dtype() != DType::kF32) {
    return unsupported("{}: argument '{}' has dtype {}; only floating types are supported", op,
                       what, dtype_name(t.dtype()));
  }
  return Status::Ok();
}

Result<Epilogue> read_epilogue(const KernelArgs& args, const char* op) {
  Epilogue e;
  std::string name = args.attr_str("activation", "none");
  auto kind = fused_activation_from_name(name);
  if (!kind) return invalid_argument("{}: unknown fused activation '{}'", op, name);
  e.kind = *kind;
  auto lo = args.attr_opt_float("clamp_min");
  auto hi = args.attr_opt_float("clamp_max");
  if (e.kind != FusedActivation::kClamp && (lo || hi)) {
    return invalid_argument("{}: clamp_min / clamp_max given with activation '{}'", op, name);
  }
  if (lo) e.lo = static_cast<float>(*lo);
  if (hi) e.hi = static_cast<float>(*hi);
  return e;
}

void apply_epilogue(const Epilogue& e, float* p, int64_t n) {
  auto each = [p, n](auto fn) {
    for (int64_t i = 0; i < n; ++i) p[i] = fn(p[i]);
  };
  switch (e.kind) {
    case FusedActivation::kNone: return;
    case FusedActivation::kRelu: return each(act::relu);
    case FusedActivation::kRelu6: return each(act::relu6);
    case FusedActivation::kClamp: return each([lo = e.lo, hi = e.hi](float x) { return std::min(std::max(x, lo), hi); });
    case FusedActivation::kHardswish: return each(act::hardswish);
    case FusedActivation::kSigmoid: return each(act::sigmoid);
    case FusedActivation::kSilu: return each(act::silu);
    case FusedActivation::kTanh: return each(act::tanh);
    case FusedActivation::kGelu: return each(act::gelu);
  }
}

void apply_epilogue(KernelContext& ctx, const Epilogue& e, float* p, int64_t n) {
  if (e.kind == FusedActivation::kNone) return;
  constexpr int64_t kChunk = 16384;  // below this, one thread: a split costs more than it saves
  if (n < 2 * kChunk || ctx.num_threads() == 1) return apply_epilogue(e, p, n);
  ctx.parallel_for((n + kChunk - 1) / kChunk, [&](int64_t begin, int64_t end) {
    int64_t first = begin * kChunk;
    apply_epilogue(e, p + first, std::min(end * kChunk, n) - first);
  });
}

Result<int64_t> norm_dim(int64_t dim, int64_t rank, const char* op) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) {
    return invalid_argument("{}: dim {} is out of range for rank {}", op, dim, rank);
  }
  return dim < 0 ? dim + r : dim;
}

Result<std::vector<int64_t>> broadcast_shapes(const std::vector<int64_t>& a,
                                              const std::vector<int64_t>& b, const char* op) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) {
      return invalid_argument("{}: shapes [{}] and [{}] do not broadcast (dim {}: {} vs {})", op,
                              fmt::join(a, ", "), fmt::join(b, ", "), i, da, db);
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> BroadcastIter::strides_for(const std::vector<int64_t>& op_shape,
                                                const std::vector<int64_t>& out_shape) {
  std::vector<int64_t> s(out_shape.size(), 0);
  int64_t stride = 1;
  size_t off = out_shape.size() - op_shape.size();
  for (size_t i = op_shape.size(); i-- > 0;) {
    s[i + off] = op_shape[i] == 1 ? 0 : stride;
    stride *= op_shape[i];
  }
  return s;
}

void BroadcastIter::coalesce() {
  if (shape.size() < 2) return;
  std::vector<int64_t> new_shape{shape.back()};
  std::vector<std::vector<int64_t>> new_strides(strides.size());
  for (size_t k = 0; k < strides.size(); ++k) new_strides[k] = {strides[k].back()};
  for (size_t d = shape.size() - 1; d-- > 0;) {
    if (shape[d] == 1) continue;  // never stepped
    if (new_shape.back() == 1) {  // a size-1 block is never stepped: dim d takes its place
      new_shape.back() = shape[d];
      for (size_t k = 0; k < strides.size(); ++k) new_strides[k].back() = strides[k][d];
      continue;
    }
    bool merge = true;  // dim d steps every operand by exactly one whole row of the dims after it
    for (size_t k = 0; k < strides.size() && merge; ++k) {
      merge = strides[k][d] == new_strides[k].back() * new_shape.back();
    }
    if (merge) {
      new_shape.back() *= shape[d];
      continue;
    }
    new_shape.push_back(shape[d]);
    for (size_t k = 0; k < strides.size(); ++k) new_strides[k].push_back(strides[k][d]);
  }
  std::reverse(new_shape.begin(), new_shape.end());
  for (auto& s : new_strides) std::reverse(s.begin(), s.end());
  shape = std::move(new_shape);
  strides = std::move(new_strides);
}

int64_t BroadcastIter::rows() const {
  return shape.empty() ? 1 : dims_product(shape, 0, shape.size() - 1);
}

int64_t dims_product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i) p *= shape[i];
  return p;
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

namespace {

template <typename S, typename D>
void convert_loop(const S* src, D* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<D>(src[i]);
}

// Loads element i of a tensor as float/double without a per-element switch in hot loops.
template <typename D>
void convert_to(const Tensor& src, D* dst) {
  int64_t n = src.numel();
  switch (src.dtype()) {
    case DType::kF32: convert_loop(src.data_as<float>(), dst, n); break;
    case DType::kF64: convert_loop(src.data_as<double>(), dst, n); break;
    case DType::kI64: convert_loop(src.data_as<int64_t>(), dst, n); break;
    case DType::kI32: convert_loop(src.data_as<int32_t>(), dst, n); break;
    case DType::kI16: convert_loop(src.data_as<int16_t>(), dst, n); break;
    case DType::kU16: convert_loop(src.data_as<uint16_t>(), dst, n); break;
    case DType::kU32: convert_loop(src.data_as<uint32_t>(), dst, n); break;
    case DType::kU64: convert_loop(src.data_as<uint64_t>(), dst, n); break;
    case DType::kI8: convert_loop(src.data_as<int8_t>(), dst, n); break;
    case DType::kU8: convert_loop(src.data_as<uint8_t>(), dst, n); break;
    case DType::kBool: {
      const uint8_t* s = src.data_as<uint8_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<D>(s[i] != 0);
      break;
    }
    case DType::kF16: {
      const uint16_t* s = src.data_as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<D>(half_to_float(s[i]));
      break;
    }
    case DType::kBF16: {
      const uint16_t* s = src.data_as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<D>(bf16_to_float(s[i]));
      break;
    }
  }
}

// Float-to-integer conversion as torch does it for in-range values (truncation); out-of-range
// values saturate instead of being undefined behaviour.
template <typename D>
D float_to_int(double v) {
  if (v != v) return 0;
  if (v <= static_cast<double>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
  if (v >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

}  // namespace

Tensor convert(KernelContext& ctx, const Tensor& src, DType dtype) {
  if (src.dtype() == dtype) return src;
  Tensor out = ctx.allocate(dtype, src.shape());
  int64_t n = src.numel();
  switch (dtype) {
    case DType::kF32: convert_to(src, writable<float>(out)); break;
    case DType::kF64: convert_to(src, writable<double>(out)); break;
    case DType::kF16:
    case DType::kBF16: {
      std::vector<float> tmp(static_cast<size_t>(n));
      convert_to(src, tmp.data());
      uint16_t* d = writable<uint16_t>(out);
      for (int64_t i = 0; i < n; ++i) {
        d[i] = dtype == DType::kF16 ? float_to_half(tmp[i]) : float_to_bf16(tmp[i]);
      }
      break;
    }
    case DType::kBool: {
      std::vector<double> tmp(static_cast<size_t>(n));
      convert_to(src, tmp.data());
      uint8_t* d = writable<uint8_t>(out);
      for (int64_t i = 0; i < n; ++i) d[i] = tmp[i] != 0;
      break;
    }
    default: {
      if (is_floating(src.dtype())) {
        std::vector<double> tmp(static_cast<size_t>(n));
        convert_to(src, tmp.data());
        dispatch_all(dtype, [&](auto t) {
          using T = decltype(t);
          T* d = writable<T>(out);
          for (int64_t i = 0; i < n; ++i) d[i] = float_to_int<T>(tmp[i]);
        });
      } else {
        // Integer to integer wraps (two's complement), as torch's .to() does.
        std::vector<int64_t> tmp(static_cast<size_t>(n));
        convert_to(src, tmp.data());
        dispatch_all(dtype, [&](auto t) {
          using T = decltype(t);
          T* d = writable<T>(out);
          for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(tmp[i]);
        });
      }
    }
  }
  return out;
}

Tensor broadcast_to(KernelContext& ctx, const Tensor& src, const std::vector<int64_t>& shape) {
  if (src.shape() == shape) return src;
  Tensor out = ctx.allocate(src.dtype(), shape);
  size_t es = dtype_size(src.dtype());
  BroadcastIter it{shape, {BroadcastIter::strides_for(src.shape(), shape)}};
  const uint8_t* s = static_cast<const uint8_t*>(src.data());
  uint8_t* d = writable<uint8_t>(out);
  it.for_each_row([&](const int64_t* offs, int64_t n, const int64_t* inner) {
    if (inner[0] == 1) {
      std::memcpy(d, s + offs[0] * es, static_cast<size_t>(n) * es);
    } else {
      for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * es, s + offs[0] * es, es);
    }
    d += n * static_cast<int64_t>(es);
  });
  return out;
}

Tensor scalar_tensor(double v, DType dtype) {
  Tensor t(dtype, {});
  t.set_scalar_at(0, v);
  return t;
}

float* scratch_floats(size_t n) {
  struct Buffer {
    float* data = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buf;
  if (buf.size < n) {
    std::free(buf.data);
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    buf.data = static_cast<float*>(std::aligned_alloc(64, bytes));
    KILN_CHECK(buf.data != nullptr);
    buf.size = n;
  }
  return buf.data;
}

void set_blas_threads(int n) { openblas_set_num_threads(std::max(1, n)); }

void sgemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void sgemm(KernelContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
           float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
           float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // The context's threads split the product, each running single-threaded OpenBLAS on a block
  // of rows or columns of C (the larger side), in steps of kStep: one pool for every kernel,
  // sized per call, instead of OpenBLAS's process-wide threads spinning beside it. Products
  // below kSerialMacs stay on the calling thread.
  constexpr int64_t kStep = 16;
  constexpr int64_t kSerialMacs = int64_t{1} << 18;
  const int threads = ctx.num_threads();
  if (threads <= 1 || m * n * k < kSerialMacs || std::max(m, n) < 2 * kStep) {
    sgemm_serial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (n >= m) {
    ctx.parallel_for((n + kStep - 1) / kStep, [&](int64_t begin, int64_t end) {
      const int64_t j0 = begin * kStep, j1 = std::min(n, end * kStep);
      sgemm_serial(trans_a, trans_b, m, j1 - j0, k, alpha, a, lda, trans_b ? b + j0 * ldb : b + j0, ldb, beta, c + j0, ldc);
    });
  } else {
    ctx.parallel_for((m + kStep - 1) / kStep, [&](int64_t begin, int64_t end) {
      const int64_t i0 = begin * kStep, i1 = std::min(m, end * kStep);
      sgemm_serial(trans_a, trans_b, i1 - i0, n, k, alpha, trans_a ? a + i0 : a + i0 * lda, lda, b, ldb, beta,
                  c + i0 * ldc, ldc);
    });
  }
}

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "unknown";
}

const char* better_blas_core() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || blas_core_name() != "Prescott") return nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    return "SKYLAKEX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "HASWELL";
  return nullptr;
}

// ---- Reduced-precision floats computed in f32.

namespace {

// f16 and bf16 always; f64 too unless the kernel computes doubles itself (kF64 kernels).
bool is_reduced_float(DType d, bool keep_f64) {
  return d == DType::kF16 || d == DType::kBF16 || (d == DType::kF64 && !keep_f64);
}

template <KernelFn F, bool KeepF64>
Status via_f32(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  std::optional<DType> reduced;
  auto check = [&](const Tensor* t) {
    if (t != nullptr && is_reduced_float(t->dtype(), KeepF64) && !reduced) reduced = t->dtype();
  };
  for (const auto& in : args.inputs) {
    check(in.tensor);
    for (const Tensor* t : in.list) check(t);
  }
  if (!reduced) return F(ctx, args, outputs);
  KernelArgs conv = args;
  std::deque<Tensor> temps;  // stable addresses: conv.inputs point into it
  for (auto& in : conv.inputs) {
    auto fix = [&](const Tensor*& t) {
      if (t == nullptr || !is_reduced_float(t->dtype(), KeepF64)) return;
      temps.push_back(convert(ctx, *t, DType::kF32));
      t = &temps.back();
    };
    fix(in.tensor);
    for (auto& t : in.list) fix(t);
  }
  size_t first = outputs->size();
  KILN_RETURN_IF_ERROR(F(ctx, conv, outputs));
  for (size_t i = first; i < outputs->size(); ++i) {
    Tensor& o = (*outputs)[i];
    if (o.dtype() == DType::kF32) o = convert(ctx, o, *reduced);
  }
  return Status::Ok();
}

constexpr KernelEntry kTable[] = {
#define KILN_ENTRY(name, mode) \
  {#name, mode == kAny ? &k::name : mode == kF64 ? &via_f32<&k::name, true> : &via_f32<&k::name, false>},
#define kF32 1
#define kF64 2
#define kAny 0
    KILN_PORTABLE_KERNELS(KILN_ENTRY)
#undef kF32
#undef kF64
#undef kAny
#undef KILN_ENTRY
};

}  // namespace

std::span<const KernelEntry> kernel_table() { return kTable; }

KernelFn find_kernel(std::string_view op_name) {
  for (const auto& e : kTable) {
    if (e.op_name == op_name) return e.fn;
  }
  return nullptr;
}

}  // namespace kiln::portable
