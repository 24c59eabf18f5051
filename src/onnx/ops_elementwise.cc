// Elementwise ONNX ops: arithmetic, activations, comparisons, logic, Cast, Identity.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "convert_util.h"
#include "fold.h"
#include "onnx_tensor.h"

namespace kiln::onnx_import {

Result<size_t> input_rank(Importer& im, size_t i) {
  KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(i));
  return s.rank();
}

Result<Arg> scalar_or_node(Importer& im, size_t i, size_t max_rank) {
  const Tensor* t = im.const_input(i);
  if (t != nullptr && t->numel() == 1 && t->rank() <= max_rank) {
    if (is_floating(t->dtype())) return Arg(fold::get_f64(*t, 0));
    if (t->dtype() != DType::kBool) return Arg(fold::get_i64(*t, 0));
  }
  KILN_ASSIGN_OR_RETURN(Node * n, im.input(i));
  return Arg(n);
}

Status unary(Importer& im, OpId op, const Kwargs& kwargs) {
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(op, {x}, kwargs));
  im.set_output(0, y);
  return Status::Ok();
}

namespace {

// Binary op with a tensor `self` and a Scalar `other`; commutative ops move a constant scalar to
// the right.
Status binary(Importer& im, OpId op, bool commutative, const Kwargs& kwargs = {}) {
  if (im.num_inputs() != 2 || !im.has_input(0) || !im.has_input(1)) {
    return invalid_argument("expected 2 inputs, got {}", im.num_inputs());
  }
  KILN_ASSIGN_OR_RETURN(size_t r0, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(size_t r1, input_rank(im, 1));
  size_t a = 0, b = 1;
  const Tensor* c0 = im.const_input(0);
  if (commutative && c0 != nullptr && c0->numel() == 1 && c0->rank() <= r1 && im.const_input(1) == nullptr) {
    std::swap(a, b);
    std::swap(r0, r1);
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(a));
  KILN_ASSIGN_OR_RETURN(Arg y, scalar_or_node(im, b, r0));
  KILN_ASSIGN_OR_RETURN(Node * out, im.call(op, {x, y}, kwargs));
  im.set_output(0, out);
  return Status::Ok();
}

#define KILN_BINARY(Name, Op, Comm) \
  Status convert_##Name(Importer& im) { return binary(im, OpId::Op, Comm); }
KILN_BINARY(add, kAdd, true)
KILN_BINARY(sub, kSub, false)
KILN_BINARY(mul, kMul, true)
KILN_BINARY(equal, kEq, true)
KILN_BINARY(less, kLt, false)
KILN_BINARY(greater, kGt, false)
KILN_BINARY(less_equal, kLe, false)
KILN_BINARY(greater_equal, kGe, false)
#undef KILN_BINARY

// ONNX Div keeps the inputs' type: integers divide truncating.
Status convert_div(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(0));
  if (is_floating(s.dtype)) return binary(im, OpId::kDiv, false);
  return binary(im, OpId::kDiv, false, {{"rounding_mode", std::string("trunc")}});
}

// ONNX Pow has the base's type; an integer base with a float exponent is computed in f64 and
// truncated, as ONNX Runtime does.
Status convert_pow(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec es, im.input_spec(1));
  Node* out = nullptr;
  if (!is_floating(xs.dtype) && is_floating(es.dtype)) {
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
    KILN_ASSIGN_OR_RETURN(Node * e, im.input(1));
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kCast, {x}, {{"dtype", DType::kF64}}));
    KILN_ASSIGN_OR_RETURN(e, im.call(OpId::kCast, {e}, {{"dtype", DType::kF64}}));
    KILN_ASSIGN_OR_RETURN(out, im.call(OpId::kPow, {x, e}));
  } else {
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
    KILN_ASSIGN_OR_RETURN(Arg e, scalar_or_node(im, 1, xs.rank()));
    KILN_ASSIGN_OR_RETURN(out, im.call(OpId::kPow, {x, e}));
  }
  if (out->spec().dtype != xs.dtype) {
    KILN_ASSIGN_OR_RETURN(out, im.call(OpId::kCast, {out}, {{"dtype", xs.dtype}}));
  }
  im.set_output(0, out);
  return Status::Ok();
}

// Max, Min, Sum, Mean: any number of inputs, broadcast together, folded from the left.
Status variadic(Importer& im, OpId op, bool mean) {
  size_t n = im.num_inputs();
  if (n == 0) return invalid_argument("expected at least one input");
  KILN_ASSIGN_OR_RETURN(Node * acc, im.input(0));
  for (size_t i = 1; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(i));
    KILN_ASSIGN_OR_RETURN(acc, im.call(op, {acc, x}));
  }
  if (mean && n > 1) {
    KILN_ASSIGN_OR_RETURN(acc, im.call(OpId::kDiv, {acc, Arg(static_cast<double>(n))}));
  }
  im.set_output(0, acc);
  return Status::Ok();
}
Status convert_max(Importer& im) { return variadic(im, OpId::kMaximum, false); }
Status convert_min(Importer& im) { return variadic(im, OpId::kMinimum, false); }
Status convert_sum(Importer& im) { return variadic(im, OpId::kAdd, false); }
Status convert_mean(Importer& im) { return variadic(im, OpId::kAdd, true); }

// Mod: fmod=1 keeps the dividend's sign (C fmod), fmod=0 the divisor's (Python %).
Status convert_mod(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t fmod, im.attr_int("fmod", 0));
  return binary(im, fmod != 0 ? OpId::kFmod : OpId::kRemainder, false);
}

Status logical_binary(Importer& im, OpId op) {
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * y, im.input(1));
  KILN_ASSIGN_OR_RETURN(Node * out, im.call(op, {x, y}));
  im.set_output(0, out);
  return Status::Ok();
}
Status convert_bit_shift(Importer& im) {
  KILN_ASSIGN_OR_RETURN(std::string direction, im.attr_str("direction", ""));
  if (direction != "LEFT" && direction != "RIGHT") {
    return invalid_argument("attribute 'direction': got '{}', expected LEFT or RIGHT", direction);
  }
  return logical_binary(im,
                        direction == "LEFT" ? OpId::kBitwiseLeftShift : OpId::kBitwiseRightShift);
}
Status convert_and(Importer& im) { return logical_binary(im, OpId::kLogicalAnd); }
Status convert_xor(Importer& im) { return logical_binary(im, OpId::kNe); }
Status convert_or(Importer& im) { return logical_binary(im, OpId::kLogicalOr); }

#define KILN_UNARY(Name, Op) \
  Status convert_##Name(Importer& im) { return unary(im, OpId::Op); }
KILN_UNARY(relu, kRelu)
KILN_UNARY(sigmoid, kSigmoid)
KILN_UNARY(tanh, kTanh)
KILN_UNARY(erf, kErf)
KILN_UNARY(sqrt, kSqrt)
KILN_UNARY(exp, kExp)
KILN_UNARY(log, kLog)
KILN_UNARY(neg, kNeg)
KILN_UNARY(abs, kAbs)
KILN_UNARY(hardswish, kHardswish)
KILN_UNARY(not, kLogicalNot)
KILN_UNARY(sin, kSin)
KILN_UNARY(cos, kCos)
KILN_UNARY(tan, kTan)
KILN_UNARY(asin, kAsin)
KILN_UNARY(acos, kAcos)
KILN_UNARY(atan, kAtan)
KILN_UNARY(sinh, kSinh)
KILN_UNARY(cosh, kCosh)
KILN_UNARY(asinh, kAsinh)
KILN_UNARY(acosh, kAcosh)
KILN_UNARY(atanh, kAtanh)
KILN_UNARY(floor, kFloor)
KILN_UNARY(ceil, kCeil)
KILN_UNARY(round, kRound)
KILN_UNARY(sign, kSign)
#undef KILN_UNARY

Status convert_reciprocal(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(0));
  Tensor one(s.dtype, {});
  one.set_scalar_at(0, 1.0);
  Node* c = im.constant_node(std::move(one), im.node().output(0) + "_one");
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * out, im.call(OpId::kDiv, {c, x}));
  im.set_output(0, out);
  return Status::Ok();
}

Status convert_leaky_relu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(float alpha, im.attr_float("alpha", 0.01f));
  return unary(im, OpId::kLeakyRelu, {{"negative_slope", static_cast<double>(alpha)}});
}

Status convert_hard_sigmoid(Importer& im) {
  KILN_ASSIGN_OR_RETURN(float alpha, im.attr_float("alpha", 0.2f));
  KILN_ASSIGN_OR_RETURN(float beta, im.attr_float("beta", 0.5f));
  return unary(im, OpId::kHardsigmoid,
               {{"alpha", static_cast<double>(alpha)}, {"beta", static_cast<double>(beta)}});
}

Status convert_gelu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(std::string approx, im.attr_str("approximate", "none"));
  if (approx != "none" && approx != "tanh") {
    return invalid_argument("attribute 'approximate': got '{}', expected 'none' or 'tanh'", approx);
  }
  return unary(im, OpId::kGelu, {{"approximate", approx}});
}

// PRelu: slope * x where x < 0, x elsewhere, the slope broadcast to x as ONNX broadcasts (right
// aligned). A slope of one value, or of one per channel (dim 1), is torch's prelu weight; any
// other shape ([W], [C, H, W], ...) is computed element-wise.
Status convert_prelu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec ss, im.input_spec(1));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  const auto sshape = ss.static_shape();
  const auto n = ss.numel();
  bool per_channel = sshape && n && ss.rank() <= xs.rank();
  if (per_channel && *n != 1) {
    const size_t offset = xs.rank() - ss.rank();
    for (size_t j = 0; j < ss.rank(); ++j) {
      const int64_t d = (*sshape)[j];
      if (d != 1 && !(offset + j == 1 && xs.shape[1] == Dim(d))) per_channel = false;
    }
    // Before opset 7 a 1-D slope was one value per channel, and the version converter leaves
    // such a slope as it is: one that cannot broadcast against the last dim still means that.
    if (ss.rank() == 1 && xs.rank() >= 2 && xs.shape[1] == Dim(*n) && xs.shape.back() != Dim(*n)) {
      per_channel = true;
    }
  }
  if (!per_channel) {
    KILN_ASSIGN_OR_RETURN(Node * slope, im.input(1));
    KILN_ASSIGN_OR_RETURN(Node * neg, im.call(OpId::kLt, {x, Arg(0.0)}));
    KILN_ASSIGN_OR_RETURN(Node * scaled, im.call(OpId::kMul, {x, slope}));
    KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kWhere, {neg, scaled, x}));
    im.set_output(0, y);
    return Status::Ok();
  }
  // torch's prelu takes the slope as a 1-D weight: one value, or one per channel.
  Node* w = nullptr;
  if (const Tensor* slope = im.const_input(1)) {
    w = im.constant_node(slope->reshaped({*n}), im.node().input(1), Role::kWeight);
  } else {
    KILN_ASSIGN_OR_RETURN(w, im.input(1, Role::kWeight));
    if (ss.rank() != 1) {
      KILN_ASSIGN_OR_RETURN(w, im.call(OpId::kReshape, {w}, {{"shape", std::vector<int64_t>{*n}}}));
    }
  }
  KILN_ASSIGN_OR_RETURN(Node * out, im.call(OpId::kPrelu, {x, w}));
  im.set_output(0, out);
  return Status::Ok();
}

// Clip's bound at `input`: absent, a number known at import time, or a tensor computed at run
// time (a node).
struct ClipBound {
  std::optional<double> value;
  Node* node = nullptr;
};

Result<ClipBound> clip_bound(Importer& im, size_t input, std::string_view name) {
  ClipBound b;
  if (!im.has_input(input)) return b;
  KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(input));
  const auto n = s.numel();
  if (!n || *n != 1) {
    return invalid_argument("input '{}' ('{}'): got {}, expected a scalar", name,
                            im.node().input(static_cast<int>(input)), s.to_string());
  }
  if (const Tensor* t = im.const_input(input)) {
    b.value = fold::get_f64(*t, 0);
  } else {
    KILN_ASSIGN_OR_RETURN(b.node, im.input(input));
  }
  return b;
}

// Activations ONNX defines by formula, built from kiln ops on input 0.
Result<Node*> scalar_op(Importer& im, OpId op, Node* x, double v) { return im.call(op, {x, Arg(v)}); }

// alpha * (exp(x) - 1) where x <= 0, scaled by gamma: Elu (gamma 1) and Selu.
// gamma * (x > 0 ? x : alpha * (exp(x * inner) - 1)): Elu, Selu, and Celu (inner 1 / alpha).
Status exp_linear(Importer& im, float alpha, float gamma, double inner = 1.0) {
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * pos, scalar_op(im, OpId::kGt, x, 0.0));
  Node* e = x;
  if (inner != 1.0) {
    KILN_ASSIGN_OR_RETURN(e, scalar_op(im, OpId::kMul, x, inner));
  }
  KILN_ASSIGN_OR_RETURN(e, im.call(OpId::kExp, {e}));
  KILN_ASSIGN_OR_RETURN(e, scalar_op(im, OpId::kSub, e, 1.0));
  KILN_ASSIGN_OR_RETURN(e, scalar_op(im, OpId::kMul, e, alpha));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kWhere, {pos, x, e}));
  if (gamma != 1.0f) {
    KILN_ASSIGN_OR_RETURN(y, scalar_op(im, OpId::kMul, y, gamma));
  }
  im.set_output(0, y);
  return Status::Ok();
}
Status convert_elu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(float alpha, im.attr_float("alpha", 1.0f));
  return exp_linear(im, alpha, 1.0f);
}
Status convert_celu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(float alpha, im.attr_float("alpha", 1.0f));
  if (alpha == 0) return invalid_argument("attribute 'alpha' must not be 0");
  return exp_linear(im, alpha, 1.0f, 1.0 / static_cast<double>(alpha));
}
Status convert_selu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(float alpha, im.attr_float("alpha", 1.67326319217681884765625f));
  KILN_ASSIGN_OR_RETURN(float gamma, im.attr_float("gamma", 1.05070102214813232421875f));
  return exp_linear(im, alpha, gamma);
}

// log(1 + exp(x)) as relu(x) + log(1 + exp(-|x|)): no overflow for large x.
Status convert_softplus(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * r, im.call(OpId::kRelu, {x}));
  KILN_ASSIGN_OR_RETURN(Node * a, im.call(OpId::kAbs, {x}));
  KILN_ASSIGN_OR_RETURN(a, im.call(OpId::kNeg, {a}));
  KILN_ASSIGN_OR_RETURN(a, im.call(OpId::kExp, {a}));
  KILN_ASSIGN_OR_RETURN(a, scalar_op(im, OpId::kAdd, a, 1.0));
  KILN_ASSIGN_OR_RETURN(a, im.call(OpId::kLog, {a}));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kAdd, {r, a}));
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_softsign(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * a, im.call(OpId::kAbs, {x}));
  KILN_ASSIGN_OR_RETURN(a, scalar_op(im, OpId::kAdd, a, 1.0));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kDiv, {x, a}));
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_thresholded_relu(Importer& im) {
  KILN_ASSIGN_OR_RETURN(float alpha, im.attr_float("alpha", 1.0f));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * keep, scalar_op(im, OpId::kGt, x, alpha));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kWhere, {keep, x, Arg(0.0)}));
  im.set_output(0, y);
  return Status::Ok();
}

// x + bias below -lambd, x - bias above lambd, 0 between.
Status convert_shrink(Importer& im) {
  KILN_ASSIGN_OR_RETURN(float lambd, im.attr_float("lambd", 0.5f));
  KILN_ASSIGN_OR_RETURN(float bias, im.attr_float("bias", 0.0f));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * below, scalar_op(im, OpId::kLt, x, -static_cast<double>(lambd)));
  KILN_ASSIGN_OR_RETURN(Node * above, scalar_op(im, OpId::kGt, x, lambd));
  KILN_ASSIGN_OR_RETURN(Node * up, scalar_op(im, OpId::kAdd, x, bias));
  KILN_ASSIGN_OR_RETURN(Node * down, scalar_op(im, OpId::kSub, x, bias));
  KILN_ASSIGN_OR_RETURN(Node * hi, im.call(OpId::kWhere, {above, down, Arg(0.0)}));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kWhere, {below, up, hi}));
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_identity(Importer& im);

Status convert_clip(Importer& im) {
  KILN_ASSIGN_OR_RETURN(ClipBound lo, clip_bound(im, 1, "min"));
  KILN_ASSIGN_OR_RETURN(ClipBound hi, clip_bound(im, 2, "max"));
  if (!lo.value && !hi.value && !lo.node && !hi.node) return convert_identity(im);
  KILN_ASSIGN_OR_RETURN(Node * y, im.input(0));
  if (lo.value || hi.value) {
    Kwargs kw;
    if (lo.value) kw.emplace_back("min", *lo.value);
    if (hi.value) kw.emplace_back("max", *hi.value);
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kClamp, {y}, kw));
  }
  // Bounds known only at run time: min(max(x, min), max), as ONNX defines Clip.
  if (lo.node) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kMaximum, {y, lo.node}));
  }
  if (hi.node) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kMinimum, {y, hi.node}));
  }
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_where(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * c, im.input(0));
  KILN_ASSIGN_OR_RETURN(size_t rc, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(size_t rx, input_rank(im, 1));
  KILN_ASSIGN_OR_RETURN(size_t ry, input_rank(im, 2));
  // A scalar operand may only be a number if the other two already give the output's rank.
  KILN_ASSIGN_OR_RETURN(Arg x, scalar_or_node(im, 1, std::max(rc, ry)));
  KILN_ASSIGN_OR_RETURN(Arg y, scalar_or_node(im, 2, std::max(rc, rx)));
  if (!x.is_node() && !y.is_node()) {
    KILN_ASSIGN_OR_RETURN(Node * xn, im.input(1));
    x = Arg(xn);
  }
  KILN_ASSIGN_OR_RETURN(Node * out, im.call(OpId::kWhere, {c, x, y}));
  im.set_output(0, out);
  return Status::Ok();
}

Status convert_cast(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t to, im.attr_int("to", 0));
  auto dt = dtype_from_onnx(static_cast<int32_t>(to));
  if (!dt) {
    return unsupported("attribute 'to': type {} is not supported",
                       onnx_type_name(static_cast<int32_t>(to)));
  }
  KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (s.dtype == *dt) {
    im.set_output(0, x);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(Node * out, im.call(OpId::kCast, {x}, {{"dtype", *dt}}));
  im.set_output(0, out);
  return Status::Ok();
}

// CastLike: Cast to the second input's type.
Status convert_cast_like(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec like, im.input_spec(1));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (s.dtype != like.dtype) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kCast, {x}, {{"dtype", like.dtype}}));
  }
  im.set_output(0, x);
  return Status::Ok();
}

// Identity and inference-mode Dropout forward their input; Dropout's mask is not computed.
Status convert_identity(Importer& im) {
  Value* v = im.input_value(0);
  if (v == nullptr) return invalid_argument("input 0 is missing");
  if (v->constant) {
    im.set_output_const(0, *v->constant);
  } else if (v->dims) {
    im.set_output_dims(0, *v->dims);
  } else {
    im.set_output(0, v->node);
  }
  return Status::Ok();
}

Status convert_isnan(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kNe, {x, x}));
  im.set_output(0, y);
  return Status::Ok();
}

// IsInf: beyond the type's largest finite value (no infinity literal in the graph).
Status convert_isinf(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(int64_t neg, im.attr_int("detect_negative", 1));
  KILN_ASSIGN_OR_RETURN(int64_t pos, im.attr_int("detect_positive", 1));
  double big = std::numeric_limits<float>::max();
  if (xs.dtype == DType::kF64) big = std::numeric_limits<double>::max();
  if (xs.dtype == DType::kF16) big = 65504.0;
  if (xs.dtype == DType::kBF16) big = 3.3895313892515355e38;
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  Node* y = nullptr;
  if (neg != 0 && pos != 0) {
    KILN_ASSIGN_OR_RETURN(Node * a, im.call(OpId::kAbs, {x}));
    KILN_ASSIGN_OR_RETURN(y, scalar_op(im, OpId::kGt, a, big));
  } else if (pos != 0) {
    KILN_ASSIGN_OR_RETURN(y, scalar_op(im, OpId::kGt, x, big));
  } else if (neg != 0) {
    KILN_ASSIGN_OR_RETURN(y, scalar_op(im, OpId::kLt, x, -big));
  } else {  // detects nothing: x != x and x == x, false for every value
    KILN_ASSIGN_OR_RETURN(Node * ne, im.call(OpId::kNe, {x, x}));
    KILN_ASSIGN_OR_RETURN(Node * eq, im.call(OpId::kEq, {x, x}));
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kLogicalAnd, {ne, eq}));
  }
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_dropout(Importer& im) {
  if (im.has_input(2)) {
    const Tensor* training = im.const_input(2);
    if (training == nullptr || fold::get_f64(*training, 0) != 0.0) {
      return unsupported("training mode (input 'training_mode') is not supported");
    }
  }
  if (im.output_used(1)) return unsupported("output 'mask' is not supported");
  return convert_identity(im);
}

constexpr OpEntry kElementwiseOps[] = {
    {"Add", convert_add},
    {"Sub", convert_sub},
    {"Mul", convert_mul},
    {"Div", convert_div},
    {"Pow", convert_pow},
    {"Max", convert_max},
    {"Min", convert_min},
    {"Sum", convert_sum},
    {"Mean", convert_mean},
    {"Mod", convert_mod},
    {"BitShift", convert_bit_shift},
    {"Xor", convert_xor},
    {"Sin", convert_sin},
    {"Cos", convert_cos},
    {"Tan", convert_tan},
    {"Asin", convert_asin},
    {"Acos", convert_acos},
    {"Atan", convert_atan},
    {"Sinh", convert_sinh},
    {"Cosh", convert_cosh},
    {"Asinh", convert_asinh},
    {"Acosh", convert_acosh},
    {"Atanh", convert_atanh},
    {"Floor", convert_floor},
    {"Ceil", convert_ceil},
    {"Round", convert_round},
    {"Sign", convert_sign},
    {"Elu", convert_elu},
    {"Selu", convert_selu},
    {"Softplus", convert_softplus},
    {"Softsign", convert_softsign},
    {"ThresholdedRelu", convert_thresholded_relu},
    {"Shrink", convert_shrink},
    {"CastLike", convert_cast_like},
    {"Equal", convert_equal},
    {"Less", convert_less},
    {"Greater", convert_greater},
    {"LessOrEqual", convert_less_equal},
    {"GreaterOrEqual", convert_greater_equal},
    {"And", convert_and},
    {"Or", convert_or},
    {"Not", convert_not},
    {"Relu", convert_relu},
    {"Sigmoid", convert_sigmoid},
    {"Tanh", convert_tanh},
    {"Erf", convert_erf},
    {"Sqrt", convert_sqrt},
    {"Exp", convert_exp},
    {"Log", convert_log},
    {"Neg", convert_neg},
    {"Abs", convert_abs},
    {"Reciprocal", convert_reciprocal},
    {"HardSwish", convert_hardswish},
    {"HardSigmoid", convert_hard_sigmoid},
    {"LeakyRelu", convert_leaky_relu},
    {"PRelu", convert_prelu},
    {"Gelu", convert_gelu},
    {"Clip", convert_clip},
    {"Celu", convert_celu},
    {"IsNaN", convert_isnan},
    {"IsInf", convert_isinf},
    {"Where", convert_where},
    {"Cast", convert_cast},
    {"Identity", convert_identity},
    {"Dropout", convert_dropout},
};

}  // namespace

std::span<const OpEntry> elementwise_ops() { return kElementwiseOps; }

}  // namespace kiln::onnx_import
