// Elementwise kernels: arithmetic, activations, comparisons, selection, logic.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable::k {
namespace {

// An operand as a tensor: a number becomes a 0-d tensor of the type torch would give it.
struct Operand {
  Tensor tensor;
  bool from_number = false;
  bool number_is_int = false;
};

Result<Operand> operand(const KernelArgs& args, size_t i, const char* op, const char* what) {
  if (i >= args.inputs.size()) return invalid_argument("{}: missing argument '{}'", op, what);
  const KernelInput& in = args.inputs[i];
  if (in.kind == KernelInput::Kind::kTensor) return Operand{*in.tensor, false, false};
  if (in.kind == KernelInput::Kind::kNumber) {
    DType d = in.number_is_int ? DType::kI64 : DType::kF32;
    return Operand{scalar_tensor(in.number, d), true, in.number_is_int};
  }
  return invalid_argument("{}: argument '{}' must be a tensor or a number", op, what);
}

// torch's result_type: numbers (and 0-d tensors) only lift the category of dimensioned tensors.
DType result_type(const std::vector<const Operand*>& ops) {
  std::optional<DType> dim_t, zero_t, num_t;
  auto merge = [](std::optional<DType>& acc, DType d) { acc = acc ? promote_types(*acc, d) : d; };
  for (const Operand* o : ops) {
    if (o->from_number) {
      merge(num_t, o->tensor.dtype());
    } else if (o->tensor.rank() == 0) {
      merge(zero_t, o->tensor.dtype());
    } else {
      merge(dim_t, o->tensor.dtype());
    }
  }
  auto category = [](DType d) { return d == DType::kBool ? 0 : is_floating(d) ? 2 : 1; };
  DType r = dim_t ? *dim_t : zero_t ? *zero_t : num_t ? *num_t : DType::kF32;
  auto lift = [&](std::optional<DType> other, bool is_number) {
    if (!other || category(*other) <= category(r)) return;
    if (category(*other) == 2) {
      r = is_number ? DType::kF32 : *other;
    } else {
      r = is_number ? DType::kI64 : *other;
    }
  };
  lift(zero_t, false);
  lift(num_t, true);
  return r;
}

// out = fn(a, b) with numpy broadcasting, split over ctx's threads when large.
template <typename A, typename B, typename O, typename Fn>
void binary_loop(KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out, Fn fn) {
  const A* pa = a.data_as<A>();
  const B* pb = b.data_as<B>();
  O* po = writable<O>(out);
  const int64_t n = out.numel();
  if (a.shape() == out.shape() && b.shape() == out.shape()) {
    parallel_range(ctx, n, kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = fn(pa[i], pb[i]);
    });
    return;
  }
  if (a.shape() == out.shape() && b.numel() == 1) {
    const B s = pb[0];
    parallel_range(ctx, n, kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = fn(pa[i], s);
    });
    return;
  }
  if (b.shape() == out.shape() && a.numel() == 1) {
    const A s = pa[0];
    parallel_range(ctx, n, kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = fn(s, pb[i]);
    });
    return;
  }
  BroadcastIter it{out.shape(),
                   {BroadcastIter::strides_for(a.shape(), out.shape()),
                    BroadcastIter::strides_for(b.shape(), out.shape())}};
  it.coalesce();
  const int64_t row_len = it.shape.empty() ? 1 : it.shape.back();
  parallel_range(ctx, it.rows(), grain_for(row_len), [&](int64_t row_begin, int64_t row_end) {
    O* o = po + row_begin * row_len;
    it.for_each_row(row_begin, row_end, [&](const int64_t* offs, int64_t cnt, const int64_t* inner) {
      const A* ra = pa + offs[0];
      const B* rb = pb + offs[1];
      const int64_t sa = inner[0], sb = inner[1];
      if (sa == 1 && sb == 1) {
        for (int64_t i = 0; i < cnt; ++i) o[i] = fn(ra[i], rb[i]);
      } else if (sa == 1 && sb == 0) {
        const B s = rb[0];
        for (int64_t i = 0; i < cnt; ++i) o[i] = fn(ra[i], s);
      } else if (sa == 0 && sb == 1) {
        const A s = ra[0];
        for (int64_t i = 0; i < cnt; ++i) o[i] = fn(s, rb[i]);
      } else {
        for (int64_t i = 0; i < cnt; ++i) o[i] = fn(ra[i * sa], rb[i * sb]);
      }
      o += cnt;
    });
  });
}

// Prepares both operands converted to their common type and the broadcast output shape.
struct Prepared {
  Tensor a, b;
  DType common;
  std::vector<int64_t> shape;
};

Result<Prepared> prepare_binary(KernelContext& ctx, const KernelArgs& args, const char* op,
                                const char* what_b) {
  KILN_ASSIGN_OR_RETURN(Operand a, operand(args, 0, op, "self"));
  KILN_ASSIGN_OR_RETURN(Operand b, operand(args, 1, op, what_b));
  DType common = result_type({&a, &b});
  KILN_ASSIGN_OR_RETURN(auto shape, broadcast_shapes(a.tensor.shape(), b.tensor.shape(), op));
  return Prepared{convert(ctx, a.tensor, common), convert(ctx, b.tensor, common), common,
                  std::move(shape)};
}

Status bad_dtype(const char* op, DType d) {
  return unsupported("{}: dtype {} is not supported", op, dtype_name(d));
}

template <typename MakeFn>
Status arith(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs,
             const char* op, const char* what_b, MakeFn make) {
  KILN_ASSIGN_OR_RETURN(Prepared p, prepare_binary(ctx, args, op, what_b));
  Tensor out = ctx.allocate(p.common, p.shape);
  bool ok = dispatch_arith(p.common, [&](auto t) {
    using T = decltype(t);
    binary_loop<T, T, T>(ctx, p.a, p.b, out, make(T{}));
  });
  if (!ok) return bad_dtype(op, p.common);
  outputs->push_back(std::move(out));
  return Status::Ok();
}

template <typename T>
T int_pow(T base, T exp) {
  if (exp < 0) return base == 1 ? 1 : (base == static_cast<T>(-1) ? ((exp & 1) ? -1 : 1) : 0);
  T r = 1;
  while (exp > 0) {
    if (exp & 1) r = static_cast<T>(r * base);
    base = static_cast<T>(base * base);
    exp = static_cast<T>(exp >> 1);
  }
  return r;
}

}  // namespace

Status add(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  double alpha = args.attr_float("alpha", 1.0);
  return arith(ctx, args, outputs, "add", "other", [alpha](auto t) {
    using T = decltype(t);
    T al = static_cast<T>(alpha);
    return [al, alpha](T x, T y) { return alpha == 1.0 ? static_cast<T>(x + y) : static_cast<T>(x + al * y); };
  });
}

Status sub(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  double alpha = args.attr_float("alpha", 1.0);
  return arith(ctx, args, outputs, "sub", "other", [alpha](auto t) {
    using T = decltype(t);
    T al = static_cast<T>(alpha);
    return [al](T x, T y) { return static_cast<T>(x - al * y); };
  });
}

Status mul(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return arith(ctx, args, outputs, "mul", "other", [](auto t) {
    using T = decltype(t);
    return [](T x, T y) { return static_cast<T>(x * y); };
  });
}

Status div(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  std::string mode = args.attr_str("rounding_mode", "");
  KILN_ASSIGN_OR_RETURN(Prepared p, prepare_binary(ctx, args, "div", "other"));
  if (mode.empty() && !is_floating(p.common)) {
    // True division of integers gives the default float type.
    p.a = convert(ctx, p.a, DType::kF32);
    p.b = convert(ctx, p.b, DType::kF32);
    p.common = DType::kF32;
  }
  if (!mode.empty() && mode != "trunc" && mode != "floor") {
    return invalid_argument("div: rounding_mode '{}' (expected None, 'trunc' or 'floor')", mode);
  }
  Tensor out = ctx.allocate(p.common, p.shape);
  std::atomic<bool> div_by_zero{false};
  bool ok = dispatch_arith(p.common, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_floating_point_v<T>) {
      if (mode.empty()) {
        binary_loop<T, T, T>(ctx, p.a, p.b, out, [](T x, T y) { return x / y; });
      } else if (mode == "trunc") {
        binary_loop<T, T, T>(ctx, p.a, p.b, out, [](T x, T y) { return std::trunc(x / y); });
      } else {
        binary_loop<T, T, T>(ctx, p.a, p.b, out, [](T x, T y) { return std::floor(x / y); });
      }
    } else {
      bool floor = mode == "floor";
      binary_loop<T, T, T>(ctx, p.a, p.b, out, [&div_by_zero, floor](T x, T y) -> T {
        if (y == 0) {
          div_by_zero.store(true, std::memory_order_relaxed);
          return 0;
        }
        if (std::is_signed_v<T> && y == static_cast<T>(-1)) return static_cast<T>(-static_cast<int64_t>(x));
        T q = static_cast<T>(x / y);
        if (floor && (x % y != 0) && ((x < 0) != (y < 0))) --q;
        return q;
      });
    }
  });
  if (!ok) return bad_dtype("div", p.common);
  if (div_by_zero) return invalid_argument("div: integer division by zero");
  outputs->push_back(std::move(out));
  return Status::Ok();
}

namespace {

// maximum / minimum propagate NaN (torch.maximum, ONNX Max).
template <bool Max>
Status extreme(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return arith(ctx, args, outputs, Max ? "maximum" : "minimum", "other", [](auto t) {
    using T = decltype(t);
    return [](T x, T y) -> T {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
      }
      return (Max ? x < y : y < x) ? y : x;
    };
  });
}

}  // namespace

Status maximum(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return extreme<true>(ctx, args, outputs);
}

Status minimum(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return extreme<false>(ctx, args, outputs);
}

namespace {

// remainder (the sign of the divisor, Python's %) and fmod (the sign of the dividend, C's fmod);
// integer division by zero is an error.
Status modulo(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs, const char* op,
              bool sign_of_divisor) {
  KILN_ASSIGN_OR_RETURN(Prepared p, prepare_binary(ctx, args, op, "other"));
  Tensor out = ctx.allocate(p.common, p.shape);
  std::atomic<bool> by_zero{false};
  bool ok = dispatch_arith(p.common, [&](auto t) {
    using T = decltype(t);
    binary_loop<T, T, T>(ctx, p.a, p.b, out, [&by_zero, sign_of_divisor](T x, T y) -> T {
      T r;
      if constexpr (std::is_floating_point_v<T>) {
        r = std::fmod(x, y);
      } else {
        if (y == 0) {
          by_zero.store(true, std::memory_order_relaxed);
          return 0;
        }
        if (std::is_signed_v<T> && y == static_cast<T>(-1)) return 0;
        r = static_cast<T>(x % y);
      }
      if constexpr (std::is_signed_v<T> || std::is_floating_point_v<T>) {
        if (sign_of_divisor && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
      }
      return r;
    });
  });
  if (!ok) return bad_dtype(op, p.common);
  if (by_zero) return invalid_argument("{}: integer division by zero", op);
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace

Status remainder(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return modulo(ctx, args, outputs, "remainder", true);
}

Status fmod(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return modulo(ctx, args, outputs, "fmod", false);
}

namespace {

// A shift by the type's width or more (or by a negative amount) gives 0; a right shift of a
// negative signed value is arithmetic.
template <bool Left>
Status bit_shift(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = Left ? "bitwise_left_shift" : "bitwise_right_shift";
  KILN_ASSIGN_OR_RETURN(Prepared p, prepare_binary(ctx, args, op, "other"));
  if (!is_integral(p.common)) return bad_dtype(op, p.common);
  Tensor out = ctx.allocate(p.common, p.shape);
  dispatch_arith(p.common, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_integral_v<T>) {
      binary_loop<T, T, T>(ctx, p.a, p.b, out, [](T x, T s) -> T {
        using U = std::make_unsigned_t<T>;
        constexpr int64_t kBits = sizeof(T) * 8;
        const auto n = static_cast<int64_t>(s);
        if (n < 0 || n >= kBits) {
          if constexpr (std::is_signed_v<T>) {
            if (!Left && x < 0) return static_cast<T>(-1);
          }
          return T{0};
        }
        if constexpr (Left) return static_cast<T>(static_cast<U>(x) << n);
        return static_cast<T>(x >> n);
      });
    }
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace

Status bitwise_left_shift(KernelContext& ctx, const KernelArgs& args,
                          std::vector<Tensor>* outputs) {
  return bit_shift<true>(ctx, args, outputs);
}

Status bitwise_right_shift(KernelContext& ctx, const KernelArgs& args,
                           std::vector<Tensor>* outputs) {
  return bit_shift<false>(ctx, args, outputs);
}

Status pow(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return arith(ctx, args, outputs, "pow", "exponent", [](auto t) {
    using T = decltype(t);
    return [](T x, T y) -> T {
      if constexpr (std::is_floating_point_v<T>) {
        if (y == T(2)) return x * x;
        return std::pow(x, y);
      } else {
        return int_pow<T>(x, y);
      }
    };
  });
}

namespace {

template <typename Fn>
Status unary_float(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs,
                   const char* op, Fn fn) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  Tensor x = args.tensor(0);
  if (x.dtype() != DType::kF32) x = convert(ctx, x, DType::kF32);  // ints give floats
  Tensor out = ctx.allocate(DType::kF32, x.shape());
  const float* px = x.data_as<float>();
  float* po = writable<float>(out);
  parallel_range(ctx, x.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = fn(px[i]);
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

template <typename MakeFn>
Status unary_numeric(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs,
                     const char* op, MakeFn make) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  const Tensor& x = args.tensor(0);
  Tensor out = ctx.allocate(x.dtype(), x.shape());
  bool ok = dispatch_arith(x.dtype(), [&](auto t) {
    using T = decltype(t);
    auto fn = make(T{});
    const T* px = x.data_as<T>();
    T* po = writable<T>(out);
    parallel_range(ctx, x.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = fn(px[i]);
    });
  });
  if (!ok) return bad_dtype(op, x.dtype());
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace

Status neg(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_numeric(ctx, args, outputs, "neg", [](auto t) {
    using T = decltype(t);
    return [](T x) { return static_cast<T>(-x); };
  });
}
Status abs(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_numeric(ctx, args, outputs, "abs", [](auto t) {
    using T = decltype(t);
    return [](T x) { return x < T(0) ? static_cast<T>(-x) : x; };
  });
}
Status relu(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_numeric(ctx, args, outputs, "relu", [](auto t) {
    using T = decltype(t);
    return [](T x) { return x > T(0) ? x : T(0); };
  });
}
Status relu6(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_numeric(ctx, args, outputs, "relu6", [](auto t) {
    using T = decltype(t);
    return [](T x) { return x < T(0) ? T(0) : (x > T(6) ? T(6) : x); };
  });
}
Status clamp(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  auto lo = args.attr_opt_float("min");
  auto hi = args.attr_opt_float("max");
  return unary_numeric(ctx, args, outputs, "clamp", [lo, hi](auto t) {
    using T = decltype(t);
    T l = std::numeric_limits<T>::lowest(), h = std::numeric_limits<T>::max();
    if constexpr (std::is_floating_point_v<T>) {
      l = -std::numeric_limits<T>::infinity();
      h = std::numeric_limits<T>::infinity();
    }
    if (lo) l = static_cast<T>(std::max<double>(*lo, static_cast<double>(std::numeric_limits<T>::lowest())));
    if (hi) h = static_cast<T>(std::min<double>(*hi, static_cast<double>(std::numeric_limits<T>::max())));
    // torch: min is applied first, then max wins when min > max.
    return [l, h](T x) { return std::min(std::max(x, l), h); };
  });
}

Status exp(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_float(ctx, args, outputs, "exp", [](float x) { return std::exp(x); });
}
Status log(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_float(ctx, args, outputs, "log", [](float x) { return std::log(x); });
}
Status sqrt(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_float(ctx, args, outputs, "sqrt", [](float x) { return std::sqrt(x); });
}
Status rsqrt(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_float(ctx, args, outputs, "rsqrt", [](float x) { return 1.0f / std::sqrt(x); });
}
Status erf(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_float(ctx, args, outputs, "erf", [](float x) { return std::erf(x); });
}
#define KILN_MATH(name)                                                                  \
  Status name(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) { \
    return unary_float(ctx, args, outputs, #name, [](float x) { return std::name(x); });  \
  }
KILN_MATH(sin)
KILN_MATH(cos)
KILN_MATH(tan)
KILN_MATH(asin)
KILN_MATH(acos)
KILN_MATH(atan)
KILN_MATH(sinh)
KILN_MATH(cosh)
KILN_MATH(asinh)
KILN_MATH(acosh)
KILN_MATH(atanh)
#undef KILN_MATH

// Rounding is the identity on integers; round is half to even (ONNX Round, torch.round).
#define KILN_ROUNDING(name, expr)                                                         \
  Status name(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) { \
    return unary_numeric(ctx, args, outputs, #name, [](auto t) {                          \
      using T = decltype(t);                                                              \
      return [](T x) -> T {                                                               \
        if constexpr (std::is_floating_point_v<T>) {                                      \
          return expr;                                                                    \
        } else {                                                                          \
          return x;                                                                       \
        }                                                                                 \
      };                                                                                  \
    });                                                                                   \
  }
KILN_ROUNDING(floor, std::floor(x))
KILN_ROUNDING(ceil, std::ceil(x))
KILN_ROUNDING(round, std::nearbyint(x))
#undef KILN_ROUNDING

Status sign(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_numeric(ctx, args, outputs, "sign", [](auto t) {
    using T = decltype(t);
    return [](T x) -> T {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(x)) return x;
      }
      return static_cast<T>((T(0) < x) - (x < T(0)));
    };
  });
}

Status sigmoid(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_float(ctx, args, outputs, "sigmoid", act::sigmoid);
}
Status tanh(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_float(ctx, args, outputs, "tanh", act::tanh);
}
Status silu(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_float(ctx, args, outputs, "silu", act::silu);
}
Status hardswish(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return unary_float(ctx, args, outputs, "hardswish", act::hardswish);
}
Status hardsigmoid(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  float alpha = static_cast<float>(args.attr_float("alpha", 1.0 / 6.0));
  float beta = static_cast<float>(args.attr_float("beta", 0.5));
  return unary_float(ctx, args, outputs, "hardsigmoid", [alpha, beta](float x) {
    return std::min(std::max(alpha * x + beta, 0.0f), 1.0f);
  });
}
Status leaky_relu(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  float slope = static_cast<float>(args.attr_float("negative_slope", 0.01));
  return unary_float(ctx, args, outputs, "leaky_relu",
                     [slope](float x) { return x > 0 ? x : x * slope; });
}
Status gelu(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  std::string approx = args.attr_str("approximate", "none");
  if (approx == "tanh") {
    return unary_float(ctx, args, outputs, "gelu", [](float x) {
      const float k = 0.7978845608028654f;  // sqrt(2/pi)
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    });
  }
  if (approx != "none") return invalid_argument("gelu: approximate '{}' (expected none or tanh)", approx);
  return unary_float(ctx, args, outputs, "gelu", act::gelu);
}

Status prelu(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "prelu", "self"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, "prelu", "weight"));
  Tensor x = convert(ctx, args.tensor(0), DType::kF32);
  Tensor w = convert(ctx, args.tensor(1), DType::kF32);
  Tensor out = ctx.allocate(DType::kF32, x.shape());
  const float* px = x.data_as<float>();
  const float* pw = w.data_as<float>();
  float* po = writable<float>(out);
  // torch: weight has 1 element or one per channel (dim 1); otherwise it broadcasts (ONNX).
  if (w.numel() == 1 || (x.rank() >= 2 && w.rank() <= 1 && w.numel() == x.dim(1))) {
    int64_t c = w.numel() == 1 ? 1 : x.dim(1);
    int64_t inner = x.rank() >= 2 ? dims_product(x.shape(), 2, x.rank()) : 1;
    parallel_range(ctx, x.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float a = pw[c == 1 ? 0 : (i / inner) % c];
        po[i] = px[i] > 0 ? px[i] : a * px[i];
      }
    });
  } else {
    KILN_ASSIGN_OR_RETURN(auto shape, broadcast_shapes(x.shape(), w.shape(), "prelu"));
    if (shape != x.shape()) return invalid_argument("prelu: weight [{}] does not broadcast to input [{}]", fmt::join(w.shape(), ", "), fmt::join(x.shape(), ", "));
    binary_loop<float, float, float>(ctx, x, w, out, [](float v, float a) { return v > 0 ? v : a * v; });
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

// ---- Comparison, selection, logic.

namespace {

template <typename MakeFn>
Status compare(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs,
               const char* op, MakeFn make) {
  KILN_ASSIGN_OR_RETURN(Prepared p, prepare_binary(ctx, args, op, "other"));
  if (p.common == DType::kBool) {
    p.a = convert(ctx, p.a, DType::kU8);
    p.b = convert(ctx, p.b, DType::kU8);
    p.common = DType::kU8;
  }
  Tensor out = ctx.allocate(DType::kBool, p.shape);
  bool ok = dispatch_arith(p.common, [&](auto t) {
    using T = decltype(t);
    binary_loop<T, T, uint8_t>(ctx, p.a, p.b, out, make(T{}));
  });
  if (!ok) return bad_dtype(op, p.common);
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace

#define KILN_COMPARE(name, expr)                                                        \
  Status name(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) { \
    return compare(ctx, args, outputs, #name, [](auto t) {                              \
      using T = decltype(t);                                                            \
      return [](T x, T y) -> uint8_t { return (expr) ? 1 : 0; };                        \
    });                                                                                 \
  }
KILN_COMPARE(eq, x == y)
KILN_COMPARE(ne, x != y)
KILN_COMPARE(lt, x < y)
KILN_COMPARE(le, x <= y)
KILN_COMPARE(gt, x > y)
KILN_COMPARE(ge, x >= y)
#undef KILN_COMPARE

Status where(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "where", "condition"));
  Tensor cond = convert(ctx, args.tensor(0), DType::kBool);
  KILN_ASSIGN_OR_RETURN(Operand a, operand(args, 1, "where", "self"));
  KILN_ASSIGN_OR_RETURN(Operand b, operand(args, 2, "where", "other"));
  DType common = result_type({&a, &b});
  KILN_ASSIGN_OR_RETURN(auto s1, broadcast_shapes(cond.shape(), a.tensor.shape(), "where"));
  KILN_ASSIGN_OR_RETURN(auto shape, broadcast_shapes(s1, b.tensor.shape(), "where"));
  Tensor ta = convert(ctx, a.tensor, common), tb = convert(ctx, b.tensor, common);
  Tensor out = ctx.allocate(common, shape);
  BroadcastIter it{shape,
                   {BroadcastIter::strides_for(cond.shape(), shape),
                    BroadcastIter::strides_for(ta.shape(), shape),
                    BroadcastIter::strides_for(tb.shape(), shape)}};
  const uint8_t* pc = cond.data_as<uint8_t>();
  const uint8_t* pa = static_cast<const uint8_t*>(ta.data());
  const uint8_t* pb = static_cast<const uint8_t*>(tb.data());
  uint8_t* po = writable<uint8_t>(out);
  it.coalesce();
  const int64_t row_len = it.shape.empty() ? 1 : it.shape.back();
  dispatch_all(common, [&](auto t) {
    using T = decltype(t);
    const T* xa = reinterpret_cast<const T*>(pa);
    const T* xb = reinterpret_cast<const T*>(pb);
    parallel_range(ctx, it.rows(), grain_for(row_len), [&](int64_t row_begin, int64_t row_end) {
      T* xo = reinterpret_cast<T*>(po) + row_begin * row_len;
      it.for_each_row(row_begin, row_end, [&](const int64_t* offs, int64_t cnt, const int64_t* inner) {
        for (int64_t i = 0; i < cnt; ++i) {
          xo[i] = pc[offs[0] + i * inner[0]] ? xa[offs[1] + i * inner[1]] : xb[offs[2] + i * inner[2]];
        }
        xo += cnt;
      });
    });
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status logical_not(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "logical_not", "self"));
  Tensor x = convert(ctx, args.tensor(0), DType::kBool);
  Tensor out = ctx.allocate(DType::kBool, x.shape());
  const uint8_t* px = x.data_as<uint8_t>();
  uint8_t* po = writable<uint8_t>(out);
  for (int64_t i = 0; i < x.numel(); ++i) po[i] = px[i] ? 0 : 1;
  outputs->push_back(std::move(out));
  return Status::Ok();
}

namespace {
template <typename Fn>
Status logical_binary(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs,
                      const char* op, Fn fn) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, op, "other"));
  Tensor a = convert(ctx, args.tensor(0), DType::kBool);
  Tensor b = convert(ctx, args.tensor(1), DType::kBool);
  KILN_ASSIGN_OR_RETURN(auto shape, broadcast_shapes(a.shape(), b.shape(), op));
  Tensor out = ctx.allocate(DType::kBool, shape);
  binary_loop<uint8_t, uint8_t, uint8_t>(ctx, a, b, out, fn);
  outputs->push_back(std::move(out));
  return Status::Ok();
}
}  // namespace

Status logical_and(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return logical_binary(ctx, args, outputs, "logical_and",
                        [](uint8_t x, uint8_t y) -> uint8_t { return x && y; });
}
Status logical_or(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return logical_binary(ctx, args, outputs, "logical_or",
                        [](uint8_t x, uint8_t y) -> uint8_t { return x || y; });
}

}  // namespace kiln::portable::k
