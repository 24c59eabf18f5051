// Elementwise ops: unary lookup tables and binary ops with NumPy broadcasting.
#include <cmath>
#include <numbers>

#include "internal.h"
#include "simd_avx512.h"

namespace kiln::htp {

using detail::Range;

// ---- unary

std::function<float(float)> unary_function(UnaryFunction fn, float alpha, float beta) {
  const double a = alpha, b = beta;
  auto wrap = [](auto f) {
    return [f](float x) { return static_cast<float>(f(static_cast<double>(x))); };
  };
  auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  switch (fn) {
    case UnaryFunction::kIdentity:
      return wrap([](double x) { return x; });
    case UnaryFunction::kRelu:
      return wrap([](double x) { return x > 0 ? x : 0.0; });
    case UnaryFunction::kReluMinMax:
      return wrap([a, b](double x) { return x < a ? a : (x > b ? b : x); });
    case UnaryFunction::kLeakyRelu:
    case UnaryFunction::kPRelu:
      return wrap([a](double x) { return x >= 0 ? x : a * x; });
    case UnaryFunction::kElu:
      return wrap([a](double x) { return x > 0 ? x : a * std::expm1(x); });
    case UnaryFunction::kSigmoid:
      return wrap(sigmoid);
    case UnaryFunction::kTanh:
      return wrap([](double x) { return std::tanh(x); });
    case UnaryFunction::kGelu:
      return wrap([](double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); });
    case UnaryFunction::kGeluTanh:
      return wrap([](double x) {
        const double k = std::sqrt(2.0 / std::numbers::pi);
        return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
      });
    case UnaryFunction::kHardSigmoid:
      if (alpha != 0.0f) {
        return wrap([a, b](double x) { return std::clamp(a * x + b, 0.0, 1.0); });
      }
      return wrap([](double x) { return std::clamp(x / 6.0 + 0.5, 0.0, 1.0); });
    case UnaryFunction::kHardSwish:
      return wrap([](double x) { return x * std::clamp(x + 3.0, 0.0, 6.0) / 6.0; });
    case UnaryFunction::kSilu:
      return wrap([sigmoid](double x) { return x * sigmoid(x); });
    case UnaryFunction::kMish:
      return wrap([](double x) { return x * std::tanh(std::log1p(std::exp(x))); });
    case UnaryFunction::kSoftplus:
      return wrap([](double x) { return x > 30 ? x : std::log1p(std::exp(x)); });
    case UnaryFunction::kExp:
      return wrap([](double x) { return std::exp(x); });
    case UnaryFunction::kLog:
      return wrap([](double x) { return std::log(x); });
    case UnaryFunction::kSqrt:
      return wrap([](double x) { return std::sqrt(x); });
    case UnaryFunction::kRsqrt:
      return wrap([](double x) { return 1.0 / std::sqrt(x); });
    case UnaryFunction::kReciprocal:
      return wrap([](double x) { return 1.0 / x; });
    case UnaryFunction::kAbs:
      return wrap([](double x) { return std::fabs(x); });
    case UnaryFunction::kNeg:
      return wrap([](double x) { return -x; });
    case UnaryFunction::kSquare:
      return wrap([](double x) { return x * x; });
    case UnaryFunction::kSin:
      return wrap([](double x) { return std::sin(x); });
    case UnaryFunction::kCos:
      return wrap([](double x) { return std::cos(x); });
  }
  return wrap([](double x) { return x; });
}

Result<Lut> Lut::prepare(const Encoding& in, const Encoding& out,
                         const std::function<float(float)>& f, int threads) {
  KILN_RETURN_IF_ERROR(validate_encoding(in, "lut: input"));
  KILN_RETURN_IF_ERROR(validate_encoding(out, "lut: output"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(in, "lut: input"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(out, "lut: output"));
  if (detail::storage_bits(in.dtype) > 16) {
    return unsupported("lut: input dtype {} has more than 16 bits (a table needs 2^32 entries)",
                       dtype_name(in.dtype));
  }
  if (!f) return invalid_argument("lut: no function");
  Lut lut;
  lut.in_dtype_ = in.dtype;
  lut.out_dtype_ = out.dtype;
  lut.threads_ = std::max(1, threads);
  const Range r = detail::storage_range(in.dtype);
  lut.in_min_ = r.lo;
  lut.table_.resize(static_cast<size_t>(r.hi - r.lo + 1));
  for (int64_t q = r.lo; q <= r.hi; ++q) {
    const float y = f(dequantize_value(q, in.scale(), in.zero_point()));
    lut.table_[static_cast<size_t>(q - r.lo)] =
        static_cast<int32_t>(quantize_value(y, out.scale(), out.zero_point(), out.qmin, out.qmax));
  }
  return lut;
}

Status Lut::run(const void* in, void* out, int64_t count) const {
  if (count < 0) return invalid_argument("lut: count {} is negative", count);
  if (table_.empty()) return invalid_argument("lut: run on an unprepared table");
  detail::dispatch_storage(in_dtype_, [&](auto itag) {
    using I = decltype(itag);
    detail::dispatch_storage(out_dtype_, [&](auto otag) {
      using O = decltype(otag);
      const I* pi = static_cast<const I*>(in);
      O* po = static_cast<O*>(out);
      const int32_t* t = table_.data() - in_min_;
      detail::parallel_for(threads_, count, 32768, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) po[i] = static_cast<O>(t[pi[i]]);
      });
    });
  });
  return Status::Ok();
}

// ---- binary

Result<std::vector<int64_t>> broadcast_shapes(std::span<const int64_t> a,
                                              std::span<const int64_t> b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da < 0 || db < 0) return invalid_argument("broadcast: negative dimension {}", i);
    if (da != db && da != 1 && db != 1) {
      return invalid_argument("broadcast: dimension {} is {} in one shape and {} in the other", i,
                              da, db);
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "add";
    case BinaryOp::kSubtract:
      return "subtract";
    case BinaryOp::kMultiply:
      return "multiply";
    case BinaryOp::kMaximum:
      return "maximum";
    case BinaryOp::kMinimum:
      return "minimum";
    case BinaryOp::kDivide:
      return "divide";
  }
  return "binary";
}

// Strides of `shape` broadcast to the rank-r output (0 along broadcast dimensions).
std::vector<int64_t> broadcast_strides(std::span<const int64_t> shape, size_t r) {
  std::vector<int64_t> s(r, 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    const size_t o = r - shape.size() + i;
    s[o] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return s;
}

// ---- the AVX-512 form of add / subtract / maximum / minimum / multiply
//
// The same integers as compute(), 16 lanes at a time: a' = requantize((q_a - zp_a) << L, ma) is
// round_half_away((q_a - zp_a) * M' / 2^t) with the trailing zero bits of the Q31 mantissa
// shifted out (M = M' 2^z, t = 31 - shift - L - z), through vpmuldq; r = a' op b' fits int32
// (|a'|, |b'| <= 2^30 - 2^14); the output stage is requantize_fast on r, clamped in int64.

// How one input's a' is computed from d = q - zp.
struct InputRq {
  enum Kind { kNone, kZero, kMul, kRound } kind = kNone;  // kNone: no exact vector form
  int64_t c = 0;  // kMul: a' = d * c; kRound: round_half_away(d * c / 2^t)
  int64_t t = 0;
};

InputRq input_rq(FixedPointMultiplier m, int shift_l) {
  InputRq r;
  const int64_t n = 31 - static_cast<int64_t>(m.shift);
  // |(d << L) * M| < 2^62 <= 2^(n-1): requantize rounds it to 0.
  if (m.multiplier == 0 || n >= 63) {
    r.kind = InputRq::kZero;
    return r;
  }
  if (m.multiplier < 0 || n < 1) return r;
  int64_t c = m.multiplier, t = n - shift_l;
  while (t > 0 && (c & 1) == 0) {
    c >>= 1;
    --t;
  }
  if (t <= 0) {
    if (-t > 30 || (c << -t) >= (int64_t{1} << 31)) return r;
    r.kind = InputRq::kMul;
    r.c = c << -t;
    return r;
  }
  if (t > 62) return r;
  r.kind = InputRq::kRound;
  r.c = c;
  r.t = t;
  return r;
}

struct BinaryVec {
  BinaryOp op = BinaryOp::kAdd;
  InputRq ra, rb;
  int32_t zpa = 0, zpb = 0;
  int64_t mult = 0, n = 0;  // the output multiplier's fast form
  int32_t zo = 0;
  int64_t qmin = 0, qmax = 0;
};

struct InputVec {
  InputRq::Kind kind;
  __m512i zp, c, half;
  __m128i t;
};

KILN_AVX512 inline InputVec input_vec(const InputRq& r, int32_t zp) {
  InputVec v;
  v.kind = r.kind;
  v.zp = _mm512_set1_epi32(zp);
  v.c = _mm512_set1_epi32(static_cast<int32_t>(r.c));
  v.half = _mm512_set1_epi64(r.kind == InputRq::kRound ? int64_t{1} << (r.t - 1) : 0);
  v.t = _mm_cvtsi64_si128(r.t);
  return v;
}

// a' of 16 codes (int32 lanes).
KILN_AVX512 inline __m512i scale_input(__m512i q, const InputVec& v) {
  const __m512i d = _mm512_sub_epi32(q, v.zp);
  switch (v.kind) {
    case InputRq::kMul:
      return _mm512_mullo_epi32(d, v.c);
    case InputRq::kRound: {
      __m512i e, o;
      detail::avx512::mul_round_shift(d, v.c, v.half, v.t, &e, &o);
      return detail::avx512::pack_even_odd(e, o);
    }
    default:
      return _mm512_setzero_si512();
  }
}

// One row: a and b advance with the output or stay on their first element (splat).
template <typename A, typename B, typename O>
KILN_AVX512 void binary_row_avx512(const BinaryVec& bv, const A* xa, bool a_splat, const B* xb,
                                   bool b_splat, O* y, int64_t len) {
  namespace v = detail::avx512;
  const InputVec va = input_vec(bv.ra, bv.zpa), vb = input_vec(bv.rb, bv.zpb);
  const v::OutputRq orq = v::output_rq(bv.mult, bv.n, bv.zo, bv.qmin, bv.qmax);
  const bool mul = bv.op == BinaryOp::kMultiply;
  // A splat input's operand is computed once.
  __m512i sa = _mm512_set1_epi32(static_cast<int32_t>(xa[0]));
  __m512i sb = _mm512_set1_epi32(static_cast<int32_t>(xb[0]));
  sa = mul ? _mm512_sub_epi32(sa, va.zp) : scale_input(sa, va);
  sb = mul ? _mm512_sub_epi32(sb, vb.zp) : scale_input(sb, vb);
  for (int64_t i = 0; i < len; i += 16) {
    const __mmask16 k = v::lanes16(len - i);
    __m512i x = sa, z = sb;
    if (!a_splat) {
      x = v::load16(xa + i, k);
      x = mul ? _mm512_sub_epi32(x, va.zp) : scale_input(x, va);
    }
    if (!b_splat) {
      z = v::load16(xb + i, k);
      z = mul ? _mm512_sub_epi32(z, vb.zp) : scale_input(z, vb);
    }
    __m512i r;
    switch (bv.op) {
      case BinaryOp::kAdd:
        r = _mm512_add_epi32(x, z);
        break;
      case BinaryOp::kSubtract:
        r = _mm512_sub_epi32(x, z);
        break;
      case BinaryOp::kMaximum:
        r = _mm512_max_epi32(x, z);
        break;
      case BinaryOp::kMinimum:
        r = _mm512_min_epi32(x, z);
        break;
      default:
        r = _mm512_mullo_epi32(x, z);
        break;
    }
    v::store16(y + i, v::requantize_output16(r, orq), k);
  }
}

}  // namespace

Result<QuantBinary> QuantBinary::prepare(BinaryOp op, std::span<const int64_t> a_shape,
                                         const Encoding& a, std::span<const int64_t> b_shape,
                                         const Encoding& b, const Encoding& out, int threads) {
  const std::string name = binary_name(op);
  KILN_RETURN_IF_ERROR(validate_encoding(a, name + ": input a"));
  KILN_RETURN_IF_ERROR(validate_encoding(b, name + ": input b"));
  KILN_RETURN_IF_ERROR(validate_encoding(out, name + ": output"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(a, name + ": input a"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(b, name + ": input b"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(out, name + ": output"));
  for (const Encoding* e : {&a, &b}) {
    if (detail::storage_bits(e->dtype) > 16) {
      return unsupported("{}: input dtype {} is not supported (8- and 16-bit inputs)", name,
                         dtype_name(e->dtype));
    }
  }
  auto shape = broadcast_shapes(a_shape, b_shape);
  if (!shape.ok()) return shape.status().with_context(name);
  KILN_ASSIGN_OR_RETURN(int64_t numel, detail::checked_numel(*shape, name));
  (void)numel;
  KILN_ASSIGN_OR_RETURN(int64_t na, detail::checked_numel(a_shape, name));
  KILN_ASSIGN_OR_RETURN(int64_t nb, detail::checked_numel(b_shape, name));
  (void)na;
  (void)nb;

  QuantBinary q;
  q.op_ = op;
  q.a_ = a;
  q.b_ = b;
  q.out_ = out;
  q.threads_ = std::max(1, threads);
  q.out_shape_ = *shape;
  q.a_strides_ = broadcast_strides(a_shape, shape->size());
  q.b_strides_ = broadcast_strides(b_shape, shape->size());
  const bool small = detail::storage_bits(a.dtype) <= 8 && detail::storage_bits(b.dtype) <= 8;
  q.shift_ = small ? 20 : 15;
  const double sa = a.scale(), sb = b.scale(), so = out.scale();
  const double twice_max = 2.0 * std::max(sa, sb);
  q.ma_ = quantize_multiplier(sa / twice_max);
  q.mb_ = quantize_multiplier(sb / twice_max);
  q.mo_ = op == BinaryOp::kMultiply
              ? quantize_multiplier(sa * sb / so)
              : quantize_multiplier(twice_max / (std::ldexp(1.0, q.shift_) * so));
  const Range ra = detail::storage_range(a.dtype), rb = detail::storage_range(b.dtype);
  q.ta_.resize(static_cast<size_t>(ra.hi - ra.lo + 1));
  for (int64_t v = ra.lo; v <= ra.hi; ++v) {
    q.ta_[static_cast<size_t>(v - ra.lo)] = requantize((v - a.zero_point()) << q.shift_, q.ma_);
  }
  q.tb_.resize(static_cast<size_t>(rb.hi - rb.lo + 1));
  for (int64_t v = rb.lo; v <= rb.hi; ++v) {
    q.tb_[static_cast<size_t>(v - rb.lo)] = requantize((v - b.zero_point()) << q.shift_, q.mb_);
  }
  if (small && detail::storage_bits(out.dtype) <= 16) {
    const Range ro = detail::storage_range(out.dtype);
    q.table_.resize(size_t{1} << 16);
    for (int64_t x = ra.lo; x <= ra.hi; ++x) {
      for (int64_t y = rb.lo; y <= rb.hi; ++y) {
        q.table_[static_cast<size_t>((x - ra.lo) << 8 | (y - rb.lo))] =
            static_cast<uint16_t>(q.compute(x, y) - ro.lo);
      }
    }
  }
  return q;
}

int64_t QuantBinary::compute(int64_t qa, int64_t qb) const {
  const int32_t zo = out_.zero_point();
  switch (op_) {
    case BinaryOp::kAdd:
    case BinaryOp::kSubtract:
    case BinaryOp::kMaximum:
    case BinaryOp::kMinimum: {
      const int64_t x = ta_[static_cast<size_t>(qa - detail::storage_range(a_.dtype).lo)];
      const int64_t y = tb_[static_cast<size_t>(qb - detail::storage_range(b_.dtype).lo)];
      const int64_t r = op_ == BinaryOp::kAdd        ? x + y
                        : op_ == BinaryOp::kSubtract ? x - y
                        : op_ == BinaryOp::kMaximum  ? std::max(x, y)
                                                     : std::min(x, y);
      return requantize_output(r, mo_, zo, out_.qmin, out_.qmax);
    }
    case BinaryOp::kMultiply:
      return requantize_output((qa - a_.zero_point()) * (qb - b_.zero_point()), mo_, zo, out_.qmin,
                               out_.qmax);
    case BinaryOp::kDivide: {
      const float x = dequantize_value(qa, a_.scale(), a_.zero_point());
      const float y = dequantize_value(qb, b_.scale(), b_.zero_point());
      return quantize_value(x / y, out_.scale(), zo, out_.qmin, out_.qmax);
    }
  }
  return 0;
}

Status QuantBinary::run(const void* a, const void* b, void* out) const {
  if (ta_.empty()) return invalid_argument("binary: run on an unprepared op");
  if (a == nullptr || b == nullptr || out == nullptr)
    return invalid_argument("binary: null buffer");
  // Collapse dimensions that stay contiguous in both inputs.
  std::vector<int64_t> size, sa, sb;
  for (size_t i = 0; i < out_shape_.size(); ++i) {
    if (out_shape_[i] == 1) continue;
    if (!size.empty() && sa.back() == a_strides_[i] * out_shape_[i] &&
        sb.back() == b_strides_[i] * out_shape_[i]) {
      size.back() *= out_shape_[i];
      sa.back() = a_strides_[i];
      sb.back() = b_strides_[i];
      continue;
    }
    size.push_back(out_shape_[i]);
    sa.push_back(a_strides_[i]);
    sb.push_back(b_strides_[i]);
  }
  if (size.empty()) {
    size = {1};
    sa = {0};
    sb = {0};
  }
  const int64_t inner = size.back(), ia = sa.back(), ib = sb.back();
  int64_t outer = 1;
  for (size_t i = 0; i + 1 < size.size(); ++i) outer *= size[i];
  if (outer * inner == 0) return Status::Ok();
  const int64_t lo_a = detail::storage_range(a_.dtype).lo,
                lo_b = detail::storage_range(b_.dtype).lo;
  const int64_t lo_o = detail::storage_range(out_.dtype).lo;
  const bool fast_sum =
      op_ != BinaryOp::kMultiply && op_ != BinaryOp::kDivide && detail::fast_requant_ok(mo_);
  // The AVX-512 form, when every step has an exact vector form (see binary_row_avx512).
  BinaryVec bv;
  bv.op = op_;
  bv.ra = input_rq(ma_, shift_);
  bv.rb = input_rq(mb_, shift_);
  bv.zpa = a_.zero_point();
  bv.zpb = b_.zero_point();
  bv.mult = mo_.multiplier;
  bv.n = 31 - mo_.shift;
  bv.zo = out_.zero_point();
  bv.qmin = out_.qmin;
  bv.qmax = out_.qmax;
  bool vec = detail::has_avx512() && detail::fast_requant_ok(mo_) && (ia | 1) == 1 &&
             (ib | 1) == 1;
  if (op_ == BinaryOp::kMultiply) {
    // |(q_a - zp_a) (q_b - zp_b)| < 2^31 over the storage ranges (the product is int32).
    const auto centered = [](const Encoding& e) {
      const Range r = detail::storage_range(e.dtype);
      return std::max<int64_t>(r.hi - e.zero_point(), e.zero_point() - r.lo);
    };
    vec = vec && centered(a_) * centered(b_) < (int64_t{1} << 31);
  } else if (op_ == BinaryOp::kDivide) {
    vec = false;
  } else {
    vec = vec && bv.ra.kind != InputRq::kNone && bv.rb.kind != InputRq::kNone;
  }
  detail::dispatch_storage(a_.dtype, [&](auto ta) {
    using A = decltype(ta);
    detail::dispatch_storage(b_.dtype, [&](auto tb) {
      using B = decltype(tb);
      detail::dispatch_storage(out_.dtype, [&](auto to) {
        using O = decltype(to);
        const A* pa = static_cast<const A*>(a);
        const B* pb = static_cast<const B*>(b);
        O* po = static_cast<O*>(out);
        // Chunks of the flat output, so one long row splits across threads too.
        // The vector form does ~16 elements per few ns: bigger chunks keep small tensors on
        // one thread.
        const int64_t min_chunk = vec ? 65536 : 16384;
        detail::parallel_for(threads_, outer * inner, min_chunk, [&](int64_t begin, int64_t end) {
          for (int64_t pos = begin; pos < end;) {
            const int64_t o = pos / inner, i0 = pos % inner;
            const int64_t i1 = std::min(inner, i0 + (end - pos));
            pos += i1 - i0;
            int64_t oa = 0, ob = 0, rest = o;
            for (size_t d = size.size() - 1; d-- > 0;) {
              const int64_t idx = rest % size[d];
              rest /= size[d];
              oa += idx * sa[d];
              ob += idx * sb[d];
            }
            const A* xa = pa + oa + i0 * ia;
            const B* xb = pb + ob + i0 * ib;
            O* y = po + o * inner + i0;
            const int64_t len = i1 - i0;
            if (vec) {
              binary_row_avx512(bv, xa, ia == 0, xb, ib == 0, y, len);
            } else if (!table_.empty()) {
              const uint16_t* t = table_.data();
              for (int64_t i = 0; i < len; ++i) {
                const size_t k =
                    static_cast<size_t>((xa[i * ia] - lo_a) << 8 | (xb[i * ib] - lo_b));
                y[i] = static_cast<O>(t[k] + lo_o);
              }
            } else if (fast_sum) {
              const int64_t* tx = ta_.data() - lo_a;
              const int64_t* ty = tb_.data() - lo_b;
              const int64_t mult = mo_.multiplier, n = 31 - mo_.shift, zo = out_.zero_point();
              for (int64_t i = 0; i < len; ++i) {
                const int64_t u = tx[xa[i * ia]], v = ty[xb[i * ib]];
                const int64_t r = op_ == BinaryOp::kAdd        ? u + v
                                  : op_ == BinaryOp::kSubtract ? u - v
                                  : op_ == BinaryOp::kMaximum  ? std::max(u, v)
                                                               : std::min(u, v);
                // |r| < 2^31: |u|, |v| < 2^30 (|q - zp| < 2^16, shifted by 15, times <= 1/2).
                const int64_t q = detail::requantize_fast(r, mult, n) + zo;
                y[i] = static_cast<O>(std::clamp(q, out_.qmin, out_.qmax));
              }
            } else {
              for (int64_t i = 0; i < len; ++i) {
                y[i] = static_cast<O>(compute(xa[i * ia], xb[i * ib]));
              }
            }
          }
        });
      });
    });
  });
  return Status::Ok();
}

}  // namespace kiln::htp
