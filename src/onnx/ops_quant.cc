// Quantized ONNX ops. QuantizeLinear / DequantizeLinear become kiln's quantize / dequantize ops
// (per tensor or per axis); the integer ops become dequantize + float op (+ quantize):
//   QLinearConv   dq(x), dq(w) (per tensor or per output channel), dq(B: i32, scale x_scale *
//                 w_scale, zero point 0) -> convolution -> quantize(y_scale, y_zero_point)
//   QLinearMatMul dq(a) (per tensor or per row), dq(b) (per tensor or per column) -> matmul ->
//                 quantize (per tensor or per row)
//   ConvInteger   dq(x, scale 1, x_zero_point), dq(w, scale 1, w_zero_point) -> convolution ->
//                 cast to i32
//   MatMulInteger the same with matmul (zero points per tensor, per row of A, per column of B)
// This keeps the q/dq form that delegates match (as ExecuTorch does); the portable kernels compute
// the float op in f32.
//
// Exactness. ConvInteger / MatMulInteger: (x - zx) and (w - zw) are integers of at most 255 in
// magnitude (exact in f32), their products at most 65025; every partial sum is exact while it
// stays below 2^24, which a reduction of K <= 258 terms (C/group * kernel elements, or the
// shared dim of the matmul) guarantees for any data. Past that the i32 result can be off by the
// f32 rounding of the sum (relative 2^-24 of its size) where ONNX Runtime's integer sum is exact.
// QLinearConv / QLinearMatMul compute in f32 where ONNX Runtime accumulates in i32 and
// requantizes with x_scale * w_scale / y_scale: results can differ by one quantization step where
// a value lies within f32 rounding of a rounding boundary. docs/quantized-ops.md has the figures.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "convert_util.h"
#include "fold.h"
#include "onnx_tensor.h"
#include "shape_util.h"

namespace kiln::onnx_import {
namespace {

// How errors name input `i`: "input 'x_scale' ('/conv/Constant_1_output_0')".
std::string input_what(Importer& im, size_t i, std::string_view name) {
  if (!im.has_input(i)) return fmt::format("input '{}'", name);
  return fmt::format("input '{}' ('{}')", name, im.node().input(static_cast<int>(i)));
}

// The storage range of a quantized dtype.
Result<std::pair<int64_t, int64_t>> quant_range(DType dt) {
  auto range = dt == DType::kI64 ? std::nullopt : integer_range(dt);
  if (!range) return unsupported("quantized dtype {} is not supported", dtype_name(dt));
  return *range;
}

// Checks that `dt`, the element type of `what`, is one of `allowed`, or 16-bit where the opset
// allows it (QuantizeLinear / DequantizeLinear take int16 / uint16 from opset 21).
Status check_storage(Importer& im, DType dt, const std::string& what,
                     std::initializer_list<DType> allowed, bool sixteen_from_21) {
  for (DType a : allowed) {
    if (dt == a) return Status::Ok();
  }
  std::vector<std::string> names;
  for (DType a : allowed) names.emplace_back(dtype_name(a));
  if (sixteen_from_21 && (dt == DType::kU16 || dt == DType::kI16)) {
    if (im.opset() >= 21) return Status::Ok();
    return unsupported(
        "{}: element type {} needs opset 21 (the model imports opset {}); before "
        "it the type is one of {}",
        what, dtype_name(dt), im.opset(), fmt::join(names, ", "));
  }
  if (sixteen_from_21) {
    names.emplace_back("u16 and i16 (opset 21)");
  }
  return unsupported("{}: element type {} is not supported (expected {})", what, dtype_name(dt),
                     fmt::join(names, ", "));
}

// Quantization parameters of one tensor: scales (f32, one or one per channel), zero points (i64,
// as many), storage dtype, and the channel axis (per tensor when < 0).
struct QParams {
  Tensor scale;
  Tensor zp;
  DType dtype = DType::kU8;
  DType scale_dtype = DType::kF32;  // as the model gives it (f16 from opset 19)
  int64_t axis = -1;
  std::string scale_hint, zp_hint;  // names of the per-channel constants
  // Computed at run time (a scale or zero point that is not a constant): the scale and the zero
  // point (null when absent) as nodes, `scale` and `zp` unset.
  bool runtime = false;
  Node* scale_node = nullptr;
  Node* zp_node = nullptr;
  int64_t count = 1;  // values: 1 (per tensor) or one per channel
};

// Where one tensor's parameters are: scale input `si`, zero point input `zi` (optional: zeros of
// dtype `dflt`). `storage` names what gives the dtype the zero point must have (empty: the zero
// point decides). `channels` > 0 allows one value per channel of `axis` besides one per tensor.
struct ParamSpec {
  size_t si = 0, zi = 0;
  std::string_view scale_name, zp_name;
  DType dflt = DType::kU8;
  std::string storage;
  int64_t channels = 0;
  int64_t axis = -1;
  std::string_view channel_what;  // what the channels are, for errors
};

// Scale at input `si`, zero point at `si` + 1, per tensor.
ParamSpec param_spec(size_t si, std::string_view scale_name, std::string_view zp_name, DType dflt,
                     std::string storage) {
  ParamSpec p;
  p.si = si;
  p.zi = si + 1;
  p.scale_name = scale_name;
  p.zp_name = zp_name;
  p.dflt = dflt;
  p.storage = std::move(storage);
  return p;
}

// `t` (1 or n values) as n values of dtype `to`.
Result<Tensor> spread(const Tensor& t, int64_t n, DType to) {
  KILN_ASSIGN_OR_RETURN(Tensor c, fold::cast(t, to));
  c = c.reshaped({c.numel()});
  if (c.numel() == n) return c;
  return fold::expand(c, std::vector<int64_t>{n});
}

// The number of values of scale or zero point input `i`: one, or a 1-D tensor of static size.
Result<int64_t> param_count(Importer& im, size_t i, const std::string& what, bool floating) {
  KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(i));
  if (floating ? !is_floating(s.dtype) : !is_integral(s.dtype)) {
    return invalid_argument("{}: element type {} is not {} type", what, dtype_name(s.dtype),
                            floating ? "a float" : "an integer");
  }
  const auto n = s.numel();
  if (s.rank() > 1 || !n || *n == 0) {
    return invalid_argument("{}: got {}, expected a scalar or a 1-D tensor", what, s.to_string());
  }
  return *n;
}

Result<QParams> read_params(Importer& im, const ParamSpec& p) {
  const std::string sw = input_what(im, p.si, p.scale_name);
  const std::string zw = input_what(im, p.zi, p.zp_name);
  const bool has_zp = im.has_input(p.zi);
  if (!im.has_input(p.si)) return invalid_argument("{} is missing", sw);
  KILN_ASSIGN_OR_RETURN(const int64_t scale_n, param_count(im, p.si, sw, true));
  int64_t zp_n = 1;
  QParams q;
  q.dtype = p.dflt;
  KILN_ASSIGN_OR_RETURN(TensorSpec ss, im.input_spec(p.si));
  q.scale_dtype = ss.dtype;
  q.scale_hint = im.node().input(static_cast<int>(p.si));
  q.zp_hint = im.node().output(0) + "_" + std::string(p.zp_name);
  if (has_zp) {
    KILN_ASSIGN_OR_RETURN(zp_n, param_count(im, p.zi, zw, false));
    KILN_ASSIGN_OR_RETURN(TensorSpec zs, im.input_spec(p.zi));
    if (!p.storage.empty() && zs.dtype != p.dflt) {
      return invalid_argument("{}: element type {} differs from {}", zw, dtype_name(zs.dtype),
                              p.storage);
    }
    q.dtype = zs.dtype;
    q.zp_hint = im.node().input(static_cast<int>(p.zi));
  }
  const int64_t n = std::max(scale_n, zp_n);
  if (scale_n != n || zp_n != n) {
    // One of them per tensor, the other per channel: the single value applies to every channel.
    if (scale_n != 1 && zp_n != 1) {
      return invalid_argument("{}: has {} values, {} has {}", zw, zp_n, sw, scale_n);
    }
  }
  if (n != 1 && (p.channels <= 0 || n != p.channels)) {
    const std::string& w = scale_n == n ? sw : zw;
    if (p.channels <= 0) {
      return invalid_argument("{}: has {} values, expected one (per-tensor quantization)", w, n);
    }
    return invalid_argument("{}: has {} values, expected 1 or {} ({})", w, n, p.channels,
                            p.channel_what);
  }
  q.axis = n == 1 ? -1 : p.axis;
  q.count = n;
  const Tensor* scale = im.const_input(p.si);
  const Tensor* zp = has_zp ? im.const_input(p.zi) : nullptr;
  if (scale == nullptr || (has_zp && zp == nullptr)) {
    q.runtime = true;
    KILN_ASSIGN_OR_RETURN(q.scale_node, im.input(p.si));
    if (has_zp) {
      KILN_ASSIGN_OR_RETURN(q.zp_node, im.input(p.zi));
    }
    return q;
  }
  for (int64_t i = 0; i < scale->numel(); ++i) {
    double v = fold::get_f64(*scale, i);
    if (!(v > 0) || !std::isfinite(v)) {
      return invalid_argument("{}: value {} at index {} is not positive and finite", sw, v, i);
    }
  }
  KILN_ASSIGN_OR_RETURN(q.scale, spread(*scale, n, DType::kF32));
  KILN_ASSIGN_OR_RETURN(q.zp, spread(zp ? *zp : Tensor(DType::kI64, {1}), n, DType::kI64));
  return q;
}

// Scale or zero point `v` (one value, or one per slice of `axis`) shaped to broadcast against a
// rank-`rank` operand, as `dtype`.
Result<Node*> along_axis(Importer& im, Node* v, int64_t axis, size_t rank, DType dtype) {
  std::vector<int64_t> shape;  // one value: a scalar
  if (axis >= 0) {
    shape.assign(rank - static_cast<size_t>(axis), 1);
    shape[0] = -1;
  }
  KILN_ASSIGN_OR_RETURN(v, im.call(OpId::kReshape, {v}, {{"shape", shape}}));
  if (v->spec().dtype == dtype) return v;
  return im.call(OpId::kCast, {v}, {{"dtype", dtype}});
}

// q's scale as a node of f32 values (a constant when it is known at import time).
Result<Node*> scale_node(Importer& im, const QParams& q) {
  Node* s = q.runtime ? q.scale_node : im.constant_node(q.scale, q.scale_hint);
  if (s->spec().dtype == DType::kF32) return s;
  return im.call(OpId::kCast, {s}, {{"dtype", DType::kF32}});
}

// Quantization with parameters computed at run time, in element-wise ops as ONNX (and ONNX
// Runtime) define it: quantize saturate(round_half_even(x / scale) + zero_point), dequantize
// (x - zero_point) * scale with the difference in int32.
Result<Node*> emit_runtime(Importer& im, Node* x, const QParams& q, bool quantize, DType out) {
  const size_t rank = x->spec().rank();
  Node* scale = nullptr;  // none: scale 1
  if (q.scale_node != nullptr) {
    KILN_ASSIGN_OR_RETURN(scale, along_axis(im, q.scale_node, q.axis, rank, DType::kF32));
  }
  if (quantize) {
    if (scale == nullptr) return internal_error("a run-time quantize without a scale");
    KILN_ASSIGN_OR_RETURN(auto range, quant_range(q.dtype));
    Node* v = x;
    if (v->spec().dtype != DType::kF32) {
      KILN_ASSIGN_OR_RETURN(v, im.call(OpId::kCast, {v}, {{"dtype", DType::kF32}}));
    }
    KILN_ASSIGN_OR_RETURN(v, im.call(OpId::kDiv, {v, scale}));
    KILN_ASSIGN_OR_RETURN(v, im.call(OpId::kRound, {v}));
    if (q.zp_node != nullptr) {
      KILN_ASSIGN_OR_RETURN(Node * zp, along_axis(im, q.zp_node, q.axis, rank, DType::kF32));
      KILN_ASSIGN_OR_RETURN(v, im.call(OpId::kAdd, {v, zp}));
    }
    KILN_ASSIGN_OR_RETURN(v, im.call(OpId::kClamp, {v},
                                     {{"min", static_cast<double>(range.first)},
                                      {"max", static_cast<double>(range.second)}}));
    return im.call(OpId::kCast, {v}, {{"dtype", q.dtype}});
  }
  KILN_ASSIGN_OR_RETURN(Node * v, im.call(OpId::kCast, {x}, {{"dtype", DType::kI32}}));
  if (q.zp_node != nullptr) {
    KILN_ASSIGN_OR_RETURN(Node * zp, along_axis(im, q.zp_node, q.axis, rank, DType::kI32));
    KILN_ASSIGN_OR_RETURN(v, im.call(OpId::kSub, {v, zp}));
  }
  KILN_ASSIGN_OR_RETURN(v, im.call(OpId::kCast, {v}, {{"dtype", DType::kF32}}));
  if (scale != nullptr) {
    KILN_ASSIGN_OR_RETURN(v, im.call(OpId::kMul, {v, scale}));
  }
  if (out == DType::kF32) return v;
  return im.call(OpId::kCast, {v}, {{"dtype", out}});
}

// quantize (or dequantize) of `x` with `q`; dequantize gives `out` (f32 unless a scale says
// otherwise).
Result<Node*> emit(Importer& im, Node* x, const QParams& q, bool quantize,
                   DType out = DType::kF32) {
  if (q.runtime) return emit_runtime(im, x, q, quantize, out);
  KILN_ASSIGN_OR_RETURN(auto range, quant_range(q.dtype));
  Kwargs kw{{"quant_min", range.first}, {"quant_max", range.second}, {"dtype", q.dtype}};
  if (!quantize && out != DType::kF32) kw.emplace_back("out_dtype", out);
  if (q.axis < 0) {
    kw.emplace_back("scale", fold::get_f64(q.scale, 0));
    kw.emplace_back("zero_point", fold::get_i64(q.zp, 0));
    return im.call(quantize ? OpId::kQuantizePerTensor : OpId::kDequantizePerTensor, {x}, kw);
  }
  Node* sn = im.constant_node(q.scale, q.scale_hint);
  Node* zn = im.constant_node(q.zp, q.zp_hint);
  kw.emplace_back("axis", q.axis);
  return im.call(quantize ? OpId::kQuantizePerChannel : OpId::kDequantizePerChannel, {x, sn, zn},
                 kw);
}

// Scale 1 and the zero points of `zp` (per tensor, or per channel on `axis`).
QParams unit_scale(Tensor zp, DType dtype, int64_t axis, std::string hint) {
  QParams q;
  const int64_t n = zp.numel();
  q.scale = Tensor(DType::kF32, {n});
  for (int64_t i = 0; i < n; ++i) q.scale.mutable_data_as<float>()[i] = 1.0f;
  q.zp = std::move(zp);
  q.dtype = dtype;
  q.axis = n == 1 ? -1 : axis;
  q.scale_hint = hint + "_scale";
  q.zp_hint = std::move(hint);
  return q;
}

// ---- QuantizeLinear / DequantizeLinear.

Status convert_qdq(Importer& im, bool quantize) {
  const std::string_view scale_name = quantize ? "y_scale" : "x_scale";
  const std::string_view zp_name = quantize ? "y_zero_point" : "x_zero_point";
  KILN_ASSIGN_OR_RETURN(int64_t block, im.attr_int("block_size", 0));
  if (block != 0) {
    return unsupported("blocked quantization (block_size={}) is not supported", block);
  }
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  const std::string xw = input_what(im, 0, "x");
  ParamSpec p = param_spec(1, scale_name, zp_name, xs.dtype, "");
  if (quantize) {
    if (!is_floating(xs.dtype)) {
      return invalid_argument("{}: element type {} is not a float type", xw, dtype_name(xs.dtype));
    }
    p.dflt = DType::kU8;
    if (im.has_attr("output_dtype")) {
      KILN_ASSIGN_OR_RETURN(int64_t od, im.attr_int("output_dtype", 0));
      auto dt = dtype_from_onnx(static_cast<int32_t>(od));
      if (!dt) {
        return unsupported("attribute 'output_dtype': type {} is not supported",
                           onnx_type_name(static_cast<int32_t>(od)));
      }
      p.dflt = *dt;
      p.storage = fmt::format("attribute 'output_dtype' ({})", dtype_name(*dt));
    }
  } else {
    p.storage = fmt::format("{} ({})", xw, dtype_name(xs.dtype));
  }
  // Per-axis parameters (opset 13): one per slice of `axis`.
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 1));
  KILN_ASSIGN_OR_RETURN(TensorSpec ss, im.input_spec(1));
  const std::optional<int64_t> scale_n = ss.numel();
  const bool per_axis = scale_n && *scale_n != 1;
  if (per_axis) {
    if (im.opset() < 13) {
      return unsupported("{}: per-axis quantization needs opset 13 (the model imports opset {})",
                         input_what(im, 1, scale_name), im.opset());
    }
    KILN_RETURN_IF_ERROR(normalize_axis(&axis, xs.rank(), "attribute 'axis'"));
    const Dim& d = xs.shape[static_cast<size_t>(axis)];
    p.channels = d.is_static() ? d.value() : *scale_n;
    p.axis = axis;
  }
  std::string what = fmt::format("dim {} of {} {}", axis, xw, xs.to_string());
  p.channel_what = what;
  KILN_ASSIGN_OR_RETURN(QParams q, read_params(im, p));
  const std::string qw = quantize ? (im.has_input(2) ? input_what(im, 2, zp_name)
                                                     : std::string("the quantized output"))
                                  : xw;
  if (quantize) {
    KILN_RETURN_IF_ERROR(check_storage(im, q.dtype, qw, {DType::kU8, DType::kI8}, true));
  } else {
    // i32 (a bias) is a DequantizeLinear input at every opset, never a QuantizeLinear output.
    KILN_RETURN_IF_ERROR(
        check_storage(im, q.dtype, qw, {DType::kU8, DType::kI8, DType::kI32}, true));
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  // From opset 19 the output of DequantizeLinear has the scale's type (f16 / bf16 too).
  const DType out = q.scale_dtype == DType::kF64 ? DType::kF32 : q.scale_dtype;
  KILN_ASSIGN_OR_RETURN(Node * y, emit(im, x, q, quantize, out));
  im.set_output(0, y);
  return Status::Ok();
}
Status convert_quantize(Importer& im) { return convert_qdq(im, true); }
Status convert_dequantize(Importer& im) { return convert_qdq(im, false); }

// ---- QLinearConv, QLinearMatMul.

// The spec of quantized input `i`, whose element type must be u8 or i8.
Result<TensorSpec> quantized_spec(Importer& im, size_t i, std::string_view name) {
  KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(i));
  KILN_RETURN_IF_ERROR(
      check_storage(im, s.dtype, input_what(im, i, name), {DType::kU8, DType::kI8}, false));
  return s;
}

// Parameters of the quantized input at `xi` with scale at xi+1 and zero point at xi+2.
ParamSpec input_params(Importer& im, size_t xi, std::string_view name, std::string_view scale_name,
                       std::string_view zp_name, DType dtype) {
  return param_spec(xi + 1, scale_name, zp_name, dtype,
                    fmt::format("{} ({})", input_what(im, xi, name), dtype_name(dtype)));
}

// y's parameters (inputs `si`, `si` + 1): the zero point gives its dtype (u8 when absent).
Result<QParams> output_params(Importer& im, size_t si, int64_t channels, int64_t axis,
                              std::string_view channel_what) {
  ParamSpec p = param_spec(si, "y_scale", "y_zero_point", DType::kU8, "");
  p.channels = channels;
  p.axis = axis;
  p.channel_what = channel_what;
  KILN_ASSIGN_OR_RETURN(QParams q, read_params(im, p));
  KILN_RETURN_IF_ERROR(check_storage(im, q.dtype, input_what(im, si + 1, "y_zero_point"),
                                     {DType::kU8, DType::kI8}, false));
  return q;
}

Status convert_qlinear_conv(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, quantized_spec(im, 0, "x"));
  KILN_ASSIGN_OR_RETURN(TensorSpec ws, quantized_spec(im, 3, "w"));
  if (ws.rank() < 3 || !ws.shape[0].is_static()) {
    return invalid_argument("{}: got {}, expected [M, C/group, kernel...] with a static M",
                            input_what(im, 3, "w"), ws.to_string());
  }
  const int64_t m = ws.shape[0].value();
  const std::string channel_what = fmt::format("output channels of input 'w' {}", ws.to_string());
  KILN_ASSIGN_OR_RETURN(
      QParams xq, read_params(im, input_params(im, 0, "x", "x_scale", "x_zero_point", xs.dtype)));
  ParamSpec wp = input_params(im, 3, "w", "w_scale", "w_zero_point", ws.dtype);
  wp.channels = m;
  wp.axis = 0;
  wp.channel_what = channel_what;
  KILN_ASSIGN_OR_RETURN(QParams wq, read_params(im, wp));
  KILN_ASSIGN_OR_RETURN(QParams yq, output_params(im, 6, 0, -1, ""));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * w, im.input(3, Role::kWeight));
  KILN_ASSIGN_OR_RETURN(Node * dx, emit(im, x, xq, false));
  KILN_ASSIGN_OR_RETURN(Node * dw, emit(im, w, wq, false));
  Arg bias;
  if (im.has_input(8)) {
    const std::string bw = input_what(im, 8, "B");
    KILN_ASSIGN_OR_RETURN(TensorSpec bs, im.input_spec(8));
    if (bs.dtype != DType::kI32 || bs.rank() != 1 || !(bs.shape[0] == Dim(m))) {
      return invalid_argument("{}: got {}, expected i32[{}] (one per output channel)", bw,
                              bs.to_string(), m);
    }
    // The bias is in the accumulator's units: scale x_scale * w_scale (in f32, as ONNX Runtime
    // computes it), zero point 0.
    QParams bq;
    bq.dtype = DType::kI32;
    bq.axis = wq.axis;
    if (xq.runtime || wq.runtime) {
      bq.runtime = true;
      bq.count = wq.count;
      KILN_ASSIGN_OR_RETURN(Node * xs_node, scale_node(im, xq));
      KILN_ASSIGN_OR_RETURN(Node * ws_node, scale_node(im, wq));
      KILN_ASSIGN_OR_RETURN(bq.scale_node, im.call(OpId::kMul, {xs_node, ws_node}));
    } else {
      const int64_t n = wq.scale.numel();
      bq.scale = Tensor(DType::kF32, {n});
      const float xscale = static_cast<float>(fold::get_f64(xq.scale, 0));
      for (int64_t c = 0; c < n; ++c) {
        bq.scale.mutable_data_as<float>()[c] =
            xscale * static_cast<float>(fold::get_f64(wq.scale, c));
      }
      bq.zp = Tensor(DType::kI64, {n});
      bq.scale_hint = im.node().output(0) + "_bias_scale";
      bq.zp_hint = im.node().output(0) + "_bias_zero_point";
    }
    KILN_ASSIGN_OR_RETURN(Node * b, im.input(8));
    KILN_ASSIGN_OR_RETURN(Node * db, emit(im, b, bq, false));
    bias = Arg(db);
  }
  KILN_ASSIGN_OR_RETURN(Node * conv, conv_call(im, xs, ws, dx, dw, bias));
  KILN_ASSIGN_OR_RETURN(Node * y, emit(im, conv, yq, true));
  im.set_output(0, y);
  return Status::Ok();
}

// The number of rows (dim rank-2) or columns (dim rank-1) of a matmul operand, or 0 when it has
// no such static dim.
int64_t matrix_dim(const TensorSpec& s, bool rows) {
  if (s.rank() < 2) return 0;
  const Dim& d = s.shape[s.rank() - (rows ? 2 : 1)];
  return d.is_static() ? d.value() : 0;
}

Status convert_qlinear_matmul(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec as, quantized_spec(im, 0, "a"));
  KILN_ASSIGN_OR_RETURN(TensorSpec bs, quantized_spec(im, 3, "b"));
  const std::string rows_what = fmt::format("rows of input 'a' {}", as.to_string());
  const std::string cols_what = fmt::format("columns of input 'b' {}", bs.to_string());
  ParamSpec ap = input_params(im, 0, "a", "a_scale", "a_zero_point", as.dtype);
  ap.channels = matrix_dim(as, true);
  ap.axis = static_cast<int64_t>(as.rank()) - 2;
  ap.channel_what = rows_what;
  ParamSpec bp = input_params(im, 3, "b", "b_scale", "b_zero_point", bs.dtype);
  bp.channels = matrix_dim(bs, false);
  bp.axis = static_cast<int64_t>(bs.rank()) - 1;
  bp.channel_what = cols_what;
  KILN_ASSIGN_OR_RETURN(QParams aq, read_params(im, ap));
  KILN_ASSIGN_OR_RETURN(QParams bq, read_params(im, bp));
  KILN_ASSIGN_OR_RETURN(Node * a, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * b, im.input(3, Role::kWeight));
  KILN_ASSIGN_OR_RETURN(Node * da, emit(im, a, aq, false));
  KILN_ASSIGN_OR_RETURN(Node * db, emit(im, b, bq, false));
  KILN_ASSIGN_OR_RETURN(Node * mm, im.call(OpId::kMatmul, {da, db}));
  const TensorSpec& ys = mm->spec();
  KILN_ASSIGN_OR_RETURN(
      QParams yq, output_params(im, 6, matrix_dim(ys, true), static_cast<int64_t>(ys.rank()) - 2,
                                fmt::format("rows of the output {}", ys.to_string())));
  KILN_ASSIGN_OR_RETURN(Node * y, emit(im, mm, yq, true));
  im.set_output(0, y);
  return Status::Ok();
}

// ---- ConvInteger, MatMulInteger.

// Scale 1 and zero point input `i` of quantized input `xi`: a scalar, or (when `channels` > 0)
// one per channel of `axis`; zeros when absent. A zero point computed at run time (as
// DynamicQuantizeLinear gives MatMulInteger) is subtracted by element-wise ops.
Result<QParams> zero_point_params(Importer& im, size_t i, std::string_view name, size_t xi,
                                  std::string_view x_name, DType dtype, int64_t channels,
                                  int64_t axis, std::string_view channel_what) {
  const std::string hint = fmt::format("{}_{}", im.node().output(0), name);
  if (!im.has_input(i)) return unit_scale(Tensor(DType::kI64, {1}), dtype, -1, hint);
  const std::string zw = input_what(im, i, name);
  KILN_ASSIGN_OR_RETURN(TensorSpec zs, im.input_spec(i));
  if (zs.dtype != dtype) {
    return invalid_argument("{}: element type {} differs from {} ({})", zw, dtype_name(zs.dtype),
                            input_what(im, xi, x_name), dtype_name(dtype));
  }
  const auto n = zs.numel();
  if (zs.rank() > 1 || !n || *n == 0 || (*n != 1 && *n != channels)) {
    if (channels <= 0) {
      return unsupported("{}: got {}, expected a scalar (per-tensor zero point)", zw,
                         zs.to_string());
    }
    return unsupported("{}: got {}, expected a scalar or {} values ({})", zw, zs.to_string(),
                       channels, channel_what);
  }
  if (const Tensor* z = im.const_input(i)) {
    KILN_ASSIGN_OR_RETURN(Tensor zi, fold::cast(*z, DType::kI64));
    return unit_scale(zi.reshaped({zi.numel()}), dtype, axis, hint);
  }
  QParams q;
  q.runtime = true;
  q.dtype = dtype;
  q.count = *n;
  q.axis = *n == 1 ? -1 : axis;
  KILN_ASSIGN_OR_RETURN(q.zp_node, im.input(i));
  return q;
}

Result<Node*> to_i32(Importer& im, Node* y) {
  return im.call(OpId::kCast, {y}, {{"dtype", DType::kI32}});
}

Status convert_conv_integer(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, quantized_spec(im, 0, "x"));
  KILN_ASSIGN_OR_RETURN(TensorSpec ws, quantized_spec(im, 1, "w"));
  if (ws.rank() < 3 || !ws.shape[0].is_static()) {
    return invalid_argument("{}: got {}, expected [M, C/group, kernel...] with a static M",
                            input_what(im, 1, "w"), ws.to_string());
  }
  const int64_t m = ws.shape[0].value();
  KILN_ASSIGN_OR_RETURN(QParams xq,
                        zero_point_params(im, 2, "x_zero_point", 0, "x", xs.dtype, 0, -1, ""));
  KILN_ASSIGN_OR_RETURN(QParams wq, zero_point_params(im, 3, "w_zero_point", 1, "w", ws.dtype, m, 0,
                                                      fmt::format("output channels of input 'w' {}",
                                                                  ws.to_string())));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * w, im.input(1, Role::kWeight));
  KILN_ASSIGN_OR_RETURN(Node * dx, emit(im, x, xq, false));
  KILN_ASSIGN_OR_RETURN(Node * dw, emit(im, w, wq, false));
  KILN_ASSIGN_OR_RETURN(Node * conv, conv_call(im, xs, ws, dx, dw, Arg()));
  KILN_ASSIGN_OR_RETURN(Node * y, to_i32(im, conv));
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_matmul_integer(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec as, quantized_spec(im, 0, "A"));
  KILN_ASSIGN_OR_RETURN(TensorSpec bs, quantized_spec(im, 1, "B"));
  // Per-row zero points of A (one per row, M) and per-column ones of B (N), as 1-D tensors.
  KILN_ASSIGN_OR_RETURN(
      QParams aq, zero_point_params(im, 2, "a_zero_point", 0, "A", as.dtype, matrix_dim(as, true),
                                    static_cast<int64_t>(as.rank()) - 2,
                                    fmt::format("rows of input 'A' {}", as.to_string())));
  KILN_ASSIGN_OR_RETURN(
      QParams bq, zero_point_params(im, 3, "b_zero_point", 1, "B", bs.dtype, matrix_dim(bs, false),
                                    static_cast<int64_t>(bs.rank()) - 1,
                                    fmt::format("columns of input 'B' {}", bs.to_string())));
  KILN_ASSIGN_OR_RETURN(Node * a, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * b, im.input(1, Role::kWeight));
  KILN_ASSIGN_OR_RETURN(Node * da, emit(im, a, aq, false));
  KILN_ASSIGN_OR_RETURN(Node * db, emit(im, b, bq, false));
  KILN_ASSIGN_OR_RETURN(Node * mm, im.call(OpId::kMatmul, {da, db}));
  KILN_ASSIGN_OR_RETURN(Node * y, to_i32(im, mm));
  im.set_output(0, y);
  return Status::Ok();
}

// DynamicQuantizeLinear: u8 quantization of x over the range of its values widened to hold 0,
// found when the model runs (ONNX's definition):
//   scale = (max(max(x), 0) - min(min(x), 0)) / 255,
//   zero_point = saturate(round(-min(min(x), 0) / scale)),
//   y = saturate(round(x / scale) + zero_point).
Status convert_dynamic_quantize(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  if (xs.dtype != DType::kF32) {
    return invalid_argument("{}: element type {} is not f32", input_what(im, 0, "x"),
                            dtype_name(xs.dtype));
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * lo, im.call(OpId::kAmin, {x}));
  KILN_ASSIGN_OR_RETURN(lo, im.call(OpId::kMinimum, {lo, Arg(0.0)}));
  KILN_ASSIGN_OR_RETURN(Node * hi, im.call(OpId::kAmax, {x}));
  KILN_ASSIGN_OR_RETURN(hi, im.call(OpId::kMaximum, {hi, Arg(0.0)}));
  KILN_ASSIGN_OR_RETURN(Node * scale, im.call(OpId::kSub, {hi, lo}));
  KILN_ASSIGN_OR_RETURN(scale, im.call(OpId::kDiv, {scale, Arg(255.0)}));
  KILN_ASSIGN_OR_RETURN(Node * zp, im.call(OpId::kNeg, {lo}));
  KILN_ASSIGN_OR_RETURN(zp, im.call(OpId::kDiv, {zp, scale}));
  KILN_ASSIGN_OR_RETURN(zp, im.call(OpId::kRound, {zp}));
  KILN_ASSIGN_OR_RETURN(zp, im.call(OpId::kClamp, {zp}, {{"min", 0.0}, {"max", 255.0}}));
  KILN_ASSIGN_OR_RETURN(zp, im.call(OpId::kCast, {zp}, {{"dtype", DType::kU8}}));
  QParams q;
  q.runtime = true;
  q.dtype = DType::kU8;
  q.scale_node = scale;
  q.zp_node = zp;
  KILN_ASSIGN_OR_RETURN(Node * y, emit(im, x, q, true));
  im.set_output(0, y);
  im.set_output(1, scale);
  im.set_output(2, zp);
  return Status::Ok();
}

constexpr OpEntry kQuantOps[] = {
    {"DynamicQuantizeLinear", convert_dynamic_quantize},
    {"QuantizeLinear", convert_quantize},
    {"DequantizeLinear", convert_dequantize},
    {"QLinearConv", convert_qlinear_conv},
    {"QLinearMatMul", convert_qlinear_matmul},
    {"ConvInteger", convert_conv_integer},
    {"MatMulInteger", convert_matmul_integer},
};

}  // namespace

std::span<const OpEntry> quant_ops() { return kQuantOps; }

}  // namespace kiln::onnx_import
