// Shape inference: elementwise, comparison, creation, conversion and quantization ops.
#include <cmath>
#include <limits>

#include "shape_inference.h"
#include "shape_inference_util.h"

namespace kiln::shape {
namespace {

// Broadcast shape of the tensor operands among `ops` (numbers broadcast to anything).
Status operands_shape(const std::vector<ScalarOperand>& ops, Shape* out) {
  const ScalarOperand* first = nullptr;
  size_t tensors = 0;
  for (const auto& op : ops) {
    if (!op.spec) continue;
    if (++tensors == 1) {
      first = &op;
      *out = op.spec->shape;
      continue;
    }
    // The accumulated spec only differs from the first operand's after two broadcasts.
    // (broadcast_shapes reads its inputs fully before writing `out`.)
    if (tensors == 2) {
      KILN_RETURN_IF_ERROR(broadcast_shapes(*out, op.spec->shape, first->name, *first->spec,
                                            op.name, *op.spec, out));
    } else {
      Shape acc_shape = *out;
      TensorSpec acc(first->spec->dtype, acc_shape);
      KILN_RETURN_IF_ERROR(
          broadcast_shapes(acc_shape, op.spec->shape, first->name, acc, op.name, *op.spec, out));
    }
  }
  return Status::Ok();
}

bool is_one_of(OpId op, std::initializer_list<OpId> ids) {
  for (OpId id : ids) {
    if (op == id) return true;
  }
  return false;
}

Status check_quant_range(const Node& node, DType qdtype) {
  int64_t qmin = node.kwarg_int("quant_min"), qmax = node.kwarg_int("quant_max");
  if (!is_integral(qdtype)) {
    return invalid_argument("argument 'dtype': got {}, expected an integer type",
                            dtype_name(qdtype));
  }
  auto [lo, hi] = *integer_range(qdtype);
  if (qmin > qmax) {
    return invalid_argument("argument 'quant_min': got {}, expected at most quant_max {}", qmin,
                            qmax);
  }
  if (qmin < lo || qmax > hi) {
    return invalid_argument("argument 'quant_min': got range [{}, {}], expected within [{}, {}] of {}",
                            qmin, qmax, lo, hi, dtype_name(qdtype));
  }
  return Status::Ok();
}

Status check_per_channel_params(const Node& node, const TensorSpec& input, int64_t* axis) {
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("axis"), input.rank(), "axis", axis));
  const Dim& channels = input.shape[static_cast<size_t>(*axis)];
  for (size_t i = 1; i <= 2; ++i) {
    const TensorSpec& p = arg_spec(node, i);
    KILN_RETURN_IF_ERROR(expect_rank(arg_name(node, i), p, 1));
    if (!dims_compatible(p.shape[0], channels)) {
      return invalid_argument("argument '{}': got {}, expected {} values (input {} at axis {})",
                              arg_name(node, i), p.to_string(), channels.to_string(),
                              input.to_string(), *axis);
    }
  }
  KILN_RETURN_IF_ERROR(expect_floating("scales", arg_spec(node, 1)));
  const TensorSpec& zp = arg_spec(node, 2);
  if (!is_integral(zp.dtype)) {
    return invalid_argument("argument 'zero_points': got {}, expected an integer tensor",
                            zp.to_string());
  }
  return Status::Ok();
}

}  // namespace

Status infer_binary_arith(const Node& node, SpecList* out) {
  std::vector<ScalarOperand> ops = {scalar_arg(node, 0), scalar_arg(node, 1)};
  Shape shape;
  KILN_RETURN_IF_ERROR(operands_shape(ops, &shape));
  DType dtype = result_type(ops);
  if (dtype == DType::kBool && node.target() == OpId::kSub) {
    return invalid_argument("argument 'other': subtraction of bool tensors is not supported; "
                            "use logical_xor or cast first");
  }
  return single(out, dtype, std::move(shape));
}

Status infer_binary_div(const Node& node, SpecList* out) {
  const Arg& mode = node.kwarg("rounding_mode");
  if (!mode.is_none() && mode.to_str() != "trunc" && mode.to_str() != "floor") {
    return invalid_argument("argument 'rounding_mode': got \"{}\", expected None, \"trunc\" or "
                            "\"floor\"",
                            mode.to_str());
  }
  std::vector<ScalarOperand> ops = {scalar_arg(node, 0), scalar_arg(node, 1)};
  Shape shape;
  KILN_RETURN_IF_ERROR(operands_shape(ops, &shape));
  DType dtype = result_type(ops);
  // True division always yields a float; rounding division keeps the promoted type.
  if (mode.is_none() && !is_floating(dtype)) dtype = DType::kF32;
  return single(out, dtype, std::move(shape));
}

Status infer_bit_shift(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const TensorSpec& other = arg_spec(node, 1);
  if (!is_integral(self.dtype)) {
    return invalid_argument("argument 'self': got {}, expected an integer tensor",
                            self.to_string());
  }
  KILN_RETURN_IF_ERROR(expect_same_dtype("other", other, "self", self));
  Shape shape;
  KILN_RETURN_IF_ERROR(
      broadcast_shapes(self.shape, other.shape, "self", self, "other", other, &shape));
  return single(out, self.dtype, std::move(shape));
}

Status infer_unary_numeric(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_numeric("self", self));
  if (node.target() == OpId::kClamp) {
    const Arg& lo = node.kwarg("min");
    const Arg& hi = node.kwarg("max");
    if (lo.is_none() && hi.is_none()) {
      return invalid_argument("argument 'min': got None with max None, expected at least one bound");
    }
  }
  return single(out, self.dtype, self.shape);
}

Status infer_unary_float(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  // torch computes these math functions of integer tensors in the default float type, but has
  // no integer kernels at all for the activation functions.
  if (is_one_of(node.target(),
                {OpId::kSilu, OpId::kHardswish, OpId::kHardsigmoid, OpId::kLeakyRelu})) {
    KILN_RETURN_IF_ERROR(expect_floating("self", self));
  }
  return single(out, is_floating(self.dtype) ? self.dtype : DType::kF32, self.shape);
}

Status infer_gelu(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_floating("self", self));
  const std::string& approx = node.kwarg("approximate").to_str();
  if (approx != "none" && approx != "tanh") {
    return invalid_argument("argument 'approximate': got \"{}\", expected \"none\" or \"tanh\"",
                            approx);
  }
  return single(out, self.dtype, self.shape);
}

Status infer_prelu(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const TensorSpec& weight = arg_spec(node, 1);
  KILN_RETURN_IF_ERROR(expect_floating("self", self));
  KILN_RETURN_IF_ERROR(expect_same_dtype("weight", weight, "self", self));
  if (weight.rank() > 1) {
    return invalid_argument("argument 'weight': got {}, expected rank 0 or 1", weight.to_string());
  }
  Dim channels = self.rank() >= 2 ? self.shape[1] : Dim(1);
  if (weight.rank() == 1 && !(weight.shape[0] == Dim(1)) &&
      !dims_compatible(weight.shape[0], channels)) {
    return invalid_argument("argument 'weight': got {}, expected 1 or {} values (channels of "
                            "self {})",
                            weight.to_string(), channels.to_string(), self.to_string());
  }
  return single(out, self.dtype, self.shape);
}

Status infer_where(const Node& node, SpecList* out) {
  const TensorSpec& cond = arg_spec(node, 0);
  if (cond.dtype != DType::kBool) {
    return invalid_argument("argument 'condition': got {}, expected a bool tensor",
                            cond.to_string());
  }
  ScalarOperand c{"condition", &cond, DType::kBool};
  ScalarOperand a = scalar_arg(node, 1), b = scalar_arg(node, 2);
  Shape shape;
  KILN_RETURN_IF_ERROR(operands_shape({c, a, b}, &shape));
  return single(out, result_type({a, b}), std::move(shape));
}

Status infer_compare(const Node& node, SpecList* out) {
  std::vector<ScalarOperand> ops = {scalar_arg(node, 0), scalar_arg(node, 1)};
  Shape shape;
  KILN_RETURN_IF_ERROR(operands_shape(ops, &shape));
  return single(out, DType::kBool, std::move(shape));
}

Status infer_logical_unary(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  if (self.dtype != DType::kBool) {
    return invalid_argument("argument 'self': got {}, expected a bool tensor", self.to_string());
  }
  return single(out, DType::kBool, self.shape);
}

Status infer_logical_binary(const Node& node, SpecList* out) {
  const TensorSpec& a = arg_spec(node, 0);
  const TensorSpec& b = arg_spec(node, 1);
  for (size_t i = 0; i < 2; ++i) {
    const TensorSpec& s = i == 0 ? a : b;
    if (s.dtype != DType::kBool) {
      return invalid_argument("argument '{}': got {}, expected a bool tensor", arg_name(node, i),
                              s.to_string());
    }
  }
  Shape shape;
  KILN_RETURN_IF_ERROR(broadcast_shapes(a.shape, b.shape, "self", a, "other", b, &shape));
  return single(out, DType::kBool, std::move(shape));
}

Status infer_cast(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  return single(out, node.kwarg("dtype").to_dtype(), self.shape);
}

Status infer_full(const Node& node, SpecList* out) {
  const auto& size = node.kwarg("size").to_ints();
  for (int64_t s : size) {
    if (s < 0) {
      return invalid_argument("argument 'size': got {}, expected non-negative sizes",
                              ints_string(size));
    }
  }
  DType dtype = node.kwarg("dtype").to_dtype();
  double fill = node.kwarg_float("fill_value");
  if (!is_floating(dtype) && std::isfinite(fill) && fill != std::floor(fill)) {
    return invalid_argument("argument 'fill_value': got {}, which {} cannot hold exactly", fill,
                            dtype_name(dtype));
  }
  if (!is_floating(dtype) && !std::isfinite(fill)) {
    return invalid_argument("argument 'fill_value': got {}, which {} cannot hold", fill,
                            dtype_name(dtype));
  }
  out->assign(1, TensorSpec::of(dtype, size));
  return Status::Ok();
}

Status infer_arange(const Node& node, SpecList* out) {
  double start = node.kwarg_float("start"), end = node.kwarg_float("end");
  double step = node.kwarg_float("step");
  DType dtype = node.kwarg("dtype").to_dtype();
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
    return invalid_argument("argument 'end': got start {}, end {}, step {}, expected finite values",
                            start, end, step);
  }
  if (step == 0) return invalid_argument("argument 'step': got 0, expected a non-zero step");
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    return invalid_argument("argument 'step': got {}, which cannot reach end {} from start {}",
                            step, end, start);
  }
  if (dtype == DType::kBool) {
    return invalid_argument("argument 'dtype': got bool, expected a numeric type");
  }
  double n = std::ceil((end - start) / step);
  if (n > 9.0e15) return out_of_range("argument 'end': arange of {} elements is too large", n);
  out->assign(1, TensorSpec::of(dtype, {static_cast<int64_t>(n)}));
  return Status::Ok();
}

Status infer_quantize(const Node& node, SpecList* out) {
  const TensorSpec& input = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_floating("input", input));
  double scale = node.kwarg_float("scale");
  if (!(scale > 0) || !std::isfinite(scale)) {
    return invalid_argument("argument 'scale': got {}, expected a finite positive value", scale);
  }
  DType qdtype = node.kwarg("dtype").to_dtype();
  KILN_RETURN_IF_ERROR(check_quant_range(node, qdtype));
  return single(out, qdtype, input.shape);
}

Status infer_dequantize(const Node& node, SpecList* out) {
  const TensorSpec& input = arg_spec(node, 0);
  DType qdtype = node.kwarg("dtype").to_dtype();
  if (input.dtype != qdtype) {
    return invalid_argument("argument 'input': got {}, expected dtype {} as given by 'dtype'",
                            input.to_string(), dtype_name(qdtype));
  }
  KILN_RETURN_IF_ERROR(check_quant_range(node, qdtype));
  DType out_dtype = node.kwarg("out_dtype").to_dtype();
  if (!is_floating(out_dtype)) {
    return invalid_argument("argument 'out_dtype': got {}, expected a floating-point type",
                            dtype_name(out_dtype));
  }
  return single(out, out_dtype, input.shape);
}

Status infer_quantize_per_channel(const Node& node, SpecList* out) {
  const TensorSpec& input = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_floating("input", input));
  int64_t axis = 0;
  KILN_RETURN_IF_ERROR(check_per_channel_params(node, input, &axis));
  DType qdtype = node.kwarg("dtype").to_dtype();
  KILN_RETURN_IF_ERROR(check_quant_range(node, qdtype));
  return single(out, qdtype, input.shape);
}

Status infer_dequantize_per_channel(const Node& node, SpecList* out) {
  const TensorSpec& input = arg_spec(node, 0);
  DType qdtype = node.kwarg("dtype").to_dtype();
  if (input.dtype != qdtype) {
    return invalid_argument("argument 'input': got {}, expected dtype {} as given by 'dtype'",
                            input.to_string(), dtype_name(qdtype));
  }
  int64_t axis = 0;
  KILN_RETURN_IF_ERROR(check_per_channel_params(node, input, &axis));
  KILN_RETURN_IF_ERROR(check_quant_range(node, qdtype));
  DType out_dtype = node.kwarg("out_dtype").to_dtype();
  if (!is_floating(out_dtype)) {
    return invalid_argument("argument 'out_dtype': got {}, expected a floating-point type",
                            dtype_name(out_dtype));
  }
  return single(out, out_dtype, input.shape);
}

Status infer_getitem(const Node& node, SpecList* out) {
  const Node* src = node.arg(0).node();
  const auto& vals = src->meta.val;
  int64_t index = node.arg(1).to_int();
  auto n = static_cast<int64_t>(vals.size());
  if (index < -n || index >= n) {
    return invalid_argument("argument 'index': got {}, but node '{}' returns {} values", index,
                            src->name(), n);
  }
  out->assign(1, vals[static_cast<size_t>(index < 0 ? index + n : index)]);
  return Status::Ok();
}

}  // namespace kiln::shape
