// Shape inference: linear algebra, convolution, pooling, normalization, attention.
#include <algorithm>
#include <cmath>
#include <string>

#include "shape_inference.h"
#include "shape_inference_util.h"

namespace kiln::shape {
namespace {

// Same dtype, numeric, as torch's matmul family requires (no implicit promotion).
Status matmul_dtypes(std::string_view a_name, const TensorSpec& a, std::string_view b_name,
                     const TensorSpec& b) {
  KILN_RETURN_IF_ERROR(expect_numeric(a_name, a));
  return expect_same_dtype(b_name, b, a_name, a);
}

Status inner_dims(std::string_view a_name, const TensorSpec& a, const Dim& a_inner,
                  std::string_view b_name, const TensorSpec& b, const Dim& b_inner) {
  if (dims_compatible(a_inner, b_inner)) return Status::Ok();
  return invalid_argument("argument '{}': got {}, expected {} rows to match {} {}", b_name,
                          b.to_string(), a_inner.to_string(), a_name, a.to_string());
}

// Spatial output size of a convolution or pooling window.
Status window_out(std::string_view what, const Dim& in, int64_t pad_total, int64_t kernel,
                  int64_t stride, int64_t dilation, bool ceil_mode, int64_t pad_begin, Dim* out) {
  int64_t span = dilation * (kernel - 1) + 1;
  if (!in.is_static()) {
    *out = stride == 1 ? dim_offset(in, pad_total - span + 1)
                       : dim_affine_div(in, pad_total - span + (ceil_mode ? stride - 1 : 0),
                                        stride, 1);
    return Status::Ok();
  }
  int64_t num = in.value() + pad_total - span;
  if (num < 0) {
    return invalid_argument("argument '{}': input size {} (padded {}) is smaller than the "
                            "window {}",
                            what, in.value(), in.value() + pad_total, span);
  }
  int64_t o = (ceil_mode ? (num + stride - 1) / stride : num / stride) + 1;
  // torch: the last window must start inside the input or the left padding.
  if (ceil_mode && (o - 1) * stride >= in.value() + pad_begin) --o;
  *out = Dim(o);
  return Status::Ok();
}

Status positive_ints(std::string_view arg, const std::vector<int64_t>& v) {
  for (int64_t x : v) {
    if (x <= 0) {
      return invalid_argument("argument '{}': got {}, expected positive values", arg,
                              ints_string(v));
    }
  }
  return Status::Ok();
}

Status pool2d(const Node& node, bool is_max, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  if (self.rank() != 3 && self.rank() != 4) {
    return invalid_argument("argument 'self': got {}, expected rank 3 or 4", self.to_string());
  }
  if (is_max) {
    KILN_RETURN_IF_ERROR(expect_numeric("self", self));
  } else {
    KILN_RETURN_IF_ERROR(expect_floating("self", self));
  }
  std::vector<int64_t> kernel, stride, dilation, pb, pe;
  KILN_RETURN_IF_ERROR(per_dim_ints("kernel_size", node.kwarg("kernel_size").to_ints(), 2, &kernel));
  KILN_RETURN_IF_ERROR(positive_ints("kernel_size", kernel));
  const auto& stride_arg = node.kwarg("stride").to_ints();
  if (stride_arg.empty()) {
    stride = kernel;
  } else {
    KILN_RETURN_IF_ERROR(per_dim_ints("stride", stride_arg, 2, &stride));
    KILN_RETURN_IF_ERROR(positive_ints("stride", stride));
  }
  if (is_max) {
    KILN_RETURN_IF_ERROR(per_dim_ints("dilation", node.kwarg("dilation").to_ints(), 2, &dilation));
    KILN_RETURN_IF_ERROR(positive_ints("dilation", dilation));
  } else {
    dilation = {1, 1};
  }
  const auto& padding = node.kwarg("padding").to_ints();
  KILN_RETURN_IF_ERROR(begin_end_padding("padding", padding, 2, &pb, &pe));
  bool ceil_mode = node.kwarg_bool("ceil_mode");
  Shape shape = self.shape;
  size_t first = self.rank() - 2;
  for (size_t i = 0; i < 2; ++i) {
    int64_t eff = dilation[i] * (kernel[i] - 1) + 1;
    if (pb[i] > eff / 2 || pe[i] > eff / 2) {
      return invalid_argument("argument 'padding': got {}, expected at most half the kernel "
                              "({}) on each side",
                              ints_string(padding), eff / 2);
    }
    KILN_RETURN_IF_ERROR(window_out("kernel_size", self.shape[first + i], pb[i] + pe[i],
                                    kernel[i], stride[i], dilation[i], ceil_mode, pb[i],
                                    &shape[first + i]));
  }
  return single(out, self.dtype, std::move(shape));
}

// Checks an optional per-channel parameter (weight/bias) of a normalization.
Status norm_param(const Node& node, size_t i, const TensorSpec& input,
                  const Shape& expected) {
  const TensorSpec* p = opt_arg_spec(node, i);
  if (!p) return Status::Ok();
  KILN_RETURN_IF_ERROR(expect_floating(arg_name(node, i), *p));
  bool ok = p->rank() == expected.size();
  for (size_t d = 0; ok && d < expected.size(); ++d) ok = dims_compatible(p->shape[d], expected[d]);
  if (!ok) {
    return invalid_argument("argument '{}': got {}, expected shape {} for input {}",
                            arg_name(node, i), p->to_string(), shape_string(expected),
                            input.to_string());
  }
  return Status::Ok();
}

Status normalized_tail(const Node& node, const TensorSpec& input, Shape* norm_shape) {
  const auto& ns = node.kwarg("normalized_shape").to_ints();
  if (ns.empty()) {
    return invalid_argument("argument 'normalized_shape': got [], expected at least one dim");
  }
  bool ok = ns.size() <= input.rank();
  for (size_t i = 0; ok && i < ns.size(); ++i) {
    ok = dims_compatible(input.shape[input.rank() - ns.size() + i], Dim(ns[i]));
  }
  if (!ok) {
    return invalid_argument("argument 'normalized_shape': got {}, expected the trailing dims of "
                            "input {}",
                            ints_string(ns), input.to_string());
  }
  norm_shape->assign(ns.begin(), ns.end());
  return Status::Ok();
}

}  // namespace

Status infer_mm(const Node& node, SpecList* out) {
  const TensorSpec& a = arg_spec(node, 0);
  const TensorSpec& b = arg_spec(node, 1);
  KILN_RETURN_IF_ERROR(expect_rank("self", a, 2));
  KILN_RETURN_IF_ERROR(expect_rank("mat2", b, 2));
  KILN_RETURN_IF_ERROR(matmul_dtypes("self", a, "mat2", b));
  KILN_RETURN_IF_ERROR(inner_dims("self", a, a.shape[1], "mat2", b, b.shape[0]));
  return single(out, a.dtype, {a.shape[0], b.shape[1]});
}

Status infer_bmm(const Node& node, SpecList* out) {
  const TensorSpec& a = arg_spec(node, 0);
  const TensorSpec& b = arg_spec(node, 1);
  KILN_RETURN_IF_ERROR(expect_rank("self", a, 3));
  KILN_RETURN_IF_ERROR(expect_rank("mat2", b, 3));
  KILN_RETURN_IF_ERROR(matmul_dtypes("self", a, "mat2", b));
  if (!dims_compatible(a.shape[0], b.shape[0])) {
    return invalid_argument("argument 'mat2': got {}, expected batch {} to match self {}",
                            b.to_string(), a.shape[0].to_string(), a.to_string());
  }
  KILN_RETURN_IF_ERROR(inner_dims("self", a, a.shape[2], "mat2", b, b.shape[1]));
  return single(out, a.dtype, {merge_dims(a.shape[0], b.shape[0]), a.shape[1], b.shape[2]});
}

Status infer_matmul(const Node& node, SpecList* out) {
  const TensorSpec& a = arg_spec(node, 0);
  const TensorSpec& b = arg_spec(node, 1);
  if (a.rank() == 0 || b.rank() == 0) {
    return invalid_argument("argument '{}': got {}, expected rank at least 1",
                            a.rank() == 0 ? "self" : "other",
                            (a.rank() == 0 ? a : b).to_string());
  }
  KILN_RETURN_IF_ERROR(matmul_dtypes("self", a, "other", b));
  // Vectors act as a row (self) or a column (other) that is dropped again afterwards.
  Shape sa = a.shape, sb = b.shape;
  if (a.rank() == 1) sa.insert(sa.begin(), Dim(1));
  if (b.rank() == 1) sb.push_back(Dim(1));
  KILN_RETURN_IF_ERROR(
      inner_dims("self", a, sa[sa.size() - 1], "other", b, sb[sb.size() - 2]));
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape shape;
  KILN_RETURN_IF_ERROR(broadcast_shapes(ba, bb, "self", a, "other", b, &shape));
  if (a.rank() > 1) shape.push_back(sa[sa.size() - 2]);
  if (b.rank() > 1) shape.push_back(sb.back());
  return single(out, a.dtype, std::move(shape));
}

Status infer_det(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_floating("self", self));
  if (self.rank() < 2 ||
      !dims_compatible(self.shape[self.rank() - 1], self.shape[self.rank() - 2])) {
    return invalid_argument("argument 'self': got {}, expected [..., n, n] square matrices",
                            self.to_string());
  }
  return single(out, self.dtype, Shape(self.shape.begin(), self.shape.end() - 2));
}

Status infer_linear(const Node& node, SpecList* out) {
  KILN_RETURN_IF_ERROR(check_fused_activation(node));
  const TensorSpec& input = arg_spec(node, 0);
  const TensorSpec& weight = arg_spec(node, 1);
  if (input.rank() == 0) {
    return invalid_argument("argument 'input': got {}, expected rank at least 1", input.to_string());
  }
  if (weight.rank() != 1 && weight.rank() != 2) {
    return invalid_argument("argument 'weight': got {}, expected rank 1 or 2", weight.to_string());
  }
  KILN_RETURN_IF_ERROR(matmul_dtypes("input", input, "weight", weight));
  const Dim& in_features = input.shape.back();
  if (!dims_compatible(weight.shape.back(), in_features)) {
    return invalid_argument("argument 'weight': got {}, expected {} input features to match "
                            "input {}",
                            weight.to_string(), in_features.to_string(), input.to_string());
  }
  Shape shape(input.shape.begin(), input.shape.end() - 1);
  if (weight.rank() == 2) shape.push_back(weight.shape[0]);
  if (const TensorSpec* bias = opt_arg_spec(node, 2)) {
    KILN_RETURN_IF_ERROR(expect_same_dtype("bias", *bias, "input", input));
    TensorSpec res(input.dtype, shape);
    Shape b;
    KILN_RETURN_IF_ERROR(broadcast_shapes(shape, bias->shape, "output", res, "bias", *bias, &b));
    if (b != shape) {
      return invalid_argument("argument 'bias': got {}, expected a shape that broadcasts to {}",
                              bias->to_string(), shape_string(shape));
    }
  }
  return single(out, input.dtype, std::move(shape));
}

Status infer_addmm(const Node& node, SpecList* out) {
  KILN_RETURN_IF_ERROR(check_fused_activation(node));
  const TensorSpec& self = arg_spec(node, 0);
  const TensorSpec& a = arg_spec(node, 1);
  const TensorSpec& b = arg_spec(node, 2);
  KILN_RETURN_IF_ERROR(expect_rank("mat1", a, 2));
  KILN_RETURN_IF_ERROR(expect_rank("mat2", b, 2));
  KILN_RETURN_IF_ERROR(matmul_dtypes("mat1", a, "mat2", b));
  KILN_RETURN_IF_ERROR(expect_same_dtype("self", self, "mat1", a));
  KILN_RETURN_IF_ERROR(inner_dims("mat1", a, a.shape[1], "mat2", b, b.shape[0]));
  Shape shape = {a.shape[0], b.shape[1]};
  Shape bshape;
  TensorSpec res(a.dtype, shape);
  KILN_RETURN_IF_ERROR(broadcast_shapes(shape, self.shape, "mm result", res, "self", self, &bshape));
  if (bshape.size() != 2 || !dims_compatible(bshape[0], shape[0]) ||
      !dims_compatible(bshape[1], shape[1])) {
    return invalid_argument("argument 'self': got {}, expected a shape that broadcasts to {}",
                            self.to_string(), shape_string(shape));
  }
  return single(out, a.dtype, std::move(shape));
}

Status infer_convolution(const Node& node, SpecList* out) {
  KILN_RETURN_IF_ERROR(check_fused_activation(node));
  const TensorSpec& input = arg_spec(node, 0);
  const TensorSpec& weight = arg_spec(node, 1);
  if (weight.rank() < 3 || weight.rank() > 5) {
    return invalid_argument(
        "argument 'weight': got {}, expected rank 3 (conv1d), 4 (conv2d) or 5 "
        "(conv3d)",
        weight.to_string());
  }
  size_t spatial = weight.rank() - 2;
  if (input.rank() != weight.rank()) {
    const char* dims[] = {", L", ", H, W", ", D, H, W"};
    return invalid_argument("argument 'input': got {}, expected rank {} ([N, C{}]) for weight {}",
                            input.to_string(), weight.rank(), dims[spatial - 1],
                            weight.to_string());
  }
  KILN_RETURN_IF_ERROR(expect_floating("input", input));
  KILN_RETURN_IF_ERROR(expect_same_dtype("weight", weight, "input", input));
  int64_t groups = node.kwarg_int("groups");
  if (groups <= 0) return invalid_argument("argument 'groups': got {}, expected >= 1", groups);
  const Dim& out_ch = weight.shape[0];
  if (out_ch.is_static() && out_ch.value() % groups != 0) {
    return invalid_argument("argument 'weight': got {}, expected out channels divisible by "
                            "groups {}",
                            weight.to_string(), groups);
  }
  if (!dims_compatible(input.shape[1], dim_mul(weight.shape[1], Dim(groups)))) {
    return invalid_argument("argument 'input': got {}, expected {} channels (weight {} with "
                            "groups {})",
                            input.to_string(), dim_mul(weight.shape[1], Dim(groups)).to_string(),
                            weight.to_string(), groups);
  }
  if (const TensorSpec* bias = opt_arg_spec(node, 2)) {
    KILN_RETURN_IF_ERROR(expect_same_dtype("bias", *bias, "input", input));
    if (bias->rank() != 1 || !dims_compatible(bias->shape[0], out_ch)) {
      return invalid_argument("argument 'bias': got {}, expected [{}]", bias->to_string(),
                              out_ch.to_string());
    }
  }
  std::vector<int64_t> stride, dilation, pb, pe;
  KILN_RETURN_IF_ERROR(per_dim_ints("stride", node.kwarg("stride").to_ints(), spatial, &stride));
  KILN_RETURN_IF_ERROR(positive_ints("stride", stride));
  KILN_RETURN_IF_ERROR(per_dim_ints("dilation", node.kwarg("dilation").to_ints(), spatial, &dilation));
  KILN_RETURN_IF_ERROR(positive_ints("dilation", dilation));
  KILN_RETURN_IF_ERROR(
      begin_end_padding("padding", node.kwarg("padding").to_ints(), spatial, &pb, &pe));
  Shape shape = {input.shape[0], out_ch};
  for (size_t i = 0; i < spatial; ++i) {
    const Dim& k = weight.shape[2 + i];
    if (!k.is_static() || k.value() <= 0) {
      return invalid_argument("argument 'weight': got {}, expected static positive kernel sizes",
                              weight.to_string());
    }
    Dim o;
    KILN_RETURN_IF_ERROR(window_out("input", input.shape[2 + i], pb[i] + pe[i], k.value(),
                                    stride[i], dilation[i], false, pb[i], &o));
    shape.push_back(o);
  }
  return single(out, input.dtype, std::move(shape));
}

Status infer_conv_transpose2d(const Node& node, SpecList* out) {
  KILN_RETURN_IF_ERROR(check_fused_activation(node));
  const TensorSpec& input = arg_spec(node, 0);
  const TensorSpec& weight = arg_spec(node, 1);
  KILN_RETURN_IF_ERROR(expect_rank("input", input, 4));
  KILN_RETURN_IF_ERROR(expect_rank("weight", weight, 4));
  KILN_RETURN_IF_ERROR(expect_floating("input", input));
  KILN_RETURN_IF_ERROR(expect_same_dtype("weight", weight, "input", input));
  int64_t groups = node.kwarg_int("groups");
  if (groups <= 0) return invalid_argument("argument 'groups': got {}, expected >= 1", groups);
  if (!dims_compatible(input.shape[1], weight.shape[0])) {
    return invalid_argument("argument 'weight': got {}, expected {} input channels to match "
                            "input {}",
                            weight.to_string(), input.shape[1].to_string(), input.to_string());
  }
  if (weight.shape[0].is_static() && weight.shape[0].value() % groups != 0) {
    return invalid_argument("argument 'weight': got {}, expected input channels divisible by "
                            "groups {}",
                            weight.to_string(), groups);
  }
  Dim out_ch = dim_mul(weight.shape[1], Dim(groups));
  if (const TensorSpec* bias = opt_arg_spec(node, 2)) {
    KILN_RETURN_IF_ERROR(expect_same_dtype("bias", *bias, "input", input));
    if (bias->rank() != 1 || !dims_compatible(bias->shape[0], out_ch)) {
      return invalid_argument("argument 'bias': got {}, expected [{}]", bias->to_string(),
                              out_ch.to_string());
    }
  }
  std::vector<int64_t> stride, dilation, out_pad, pb, pe;
  KILN_RETURN_IF_ERROR(per_dim_ints("stride", node.kwarg("stride").to_ints(), 2, &stride));
  KILN_RETURN_IF_ERROR(positive_ints("stride", stride));
  KILN_RETURN_IF_ERROR(per_dim_ints("dilation", node.kwarg("dilation").to_ints(), 2, &dilation));
  KILN_RETURN_IF_ERROR(positive_ints("dilation", dilation));
  KILN_RETURN_IF_ERROR(
      per_dim_ints("output_padding", node.kwarg("output_padding").to_ints(), 2, &out_pad));
  KILN_RETURN_IF_ERROR(begin_end_padding("padding", node.kwarg("padding").to_ints(), 2, &pb, &pe));
  Shape shape = {input.shape[0], out_ch};
  for (size_t i = 0; i < 2; ++i) {
    if (out_pad[i] < 0 || (out_pad[i] >= stride[i] && out_pad[i] >= dilation[i])) {
      return invalid_argument("argument 'output_padding': got {}, expected values below stride "
                              "or dilation",
                              ints_string(node.kwarg("output_padding").to_ints()));
    }
    const Dim& k = weight.shape[2 + i];
    if (!k.is_static() || k.value() <= 0) {
      return invalid_argument("argument 'weight': got {}, expected static positive kernel sizes",
                              weight.to_string());
    }
    int64_t extra = dilation[i] * (k.value() - 1) + out_pad[i] + 1 - pb[i] - pe[i];
    const Dim& in = input.shape[2 + i];
    Dim o;
    if (in.is_static()) {
      o = Dim((in.value() - 1) * stride[i] + extra);
      if (o.value() <= 0) {
        return invalid_argument("argument 'padding': got {}, which leaves output size {} for "
                                "input {}",
                                ints_string(node.kwarg("padding").to_ints()), o.value(),
                                input.to_string());
      }
    } else {
      o = dim_offset(dim_mul(dim_offset(in, -1), Dim(stride[i])), extra);
    }
    shape.push_back(o);
  }
  return single(out, input.dtype, std::move(shape));
}

Status infer_max_pool2d(const Node& node, SpecList* out) {
  return pool2d(node, true, out);
}

Status infer_avg_pool2d(const Node& node, SpecList* out) {
  return pool2d(node, false, out);
}

Status infer_adaptive_avg_pool2d(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  if (self.rank() != 3 && self.rank() != 4) {
    return invalid_argument("argument 'self': got {}, expected rank 3 or 4", self.to_string());
  }
  KILN_RETURN_IF_ERROR(expect_floating("self", self));
  std::vector<int64_t> size;
  KILN_RETURN_IF_ERROR(per_dim_ints("output_size", node.kwarg("output_size").to_ints(), 2, &size));
  KILN_RETURN_IF_ERROR(positive_ints("output_size", size));
  Shape shape = self.shape;
  shape[shape.size() - 2] = size[0];
  shape[shape.size() - 1] = size[1];
  return single(out, self.dtype, std::move(shape));
}

Status infer_batch_norm(const Node& node, SpecList* out) {
  const TensorSpec& input = arg_spec(node, 0);
  if (input.rank() < 2) {
    return invalid_argument("argument 'input': got {}, expected rank at least 2 ([N, C, ...])",
                            input.to_string());
  }
  KILN_RETURN_IF_ERROR(expect_floating("input", input));
  Shape channels = {input.shape[1]};
  for (size_t i = 1; i <= 4; ++i) KILN_RETURN_IF_ERROR(norm_param(node, i, input, channels));
  if (!(node.kwarg_float("eps") >= 0)) {
    return invalid_argument("argument 'eps': got {}, expected a non-negative value",
                            node.kwarg_float("eps"));
  }
  return single(out, input.dtype, input.shape);
}

Status infer_layer_norm(const Node& node, SpecList* out) {
  const TensorSpec& input = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_floating("input", input));
  Shape norm;
  KILN_RETURN_IF_ERROR(normalized_tail(node, input, &norm));
  for (size_t i = 1; i <= 2; ++i) KILN_RETURN_IF_ERROR(norm_param(node, i, input, norm));
  return single(out, input.dtype, input.shape);
}

Status infer_rms_norm(const Node& node, SpecList* out) {
  const TensorSpec& input = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_floating("input", input));
  Shape norm;
  KILN_RETURN_IF_ERROR(normalized_tail(node, input, &norm));
  KILN_RETURN_IF_ERROR(norm_param(node, 1, input, norm));
  return single(out, input.dtype, input.shape);
}

Status infer_group_norm(const Node& node, SpecList* out) {
  const TensorSpec& input = arg_spec(node, 0);
  if (input.rank() < 2) {
    return invalid_argument("argument 'input': got {}, expected rank at least 2 ([N, C, ...])",
                            input.to_string());
  }
  KILN_RETURN_IF_ERROR(expect_floating("input", input));
  int64_t groups = node.kwarg_int("num_groups");
  if (groups <= 0) return invalid_argument("argument 'num_groups': got {}, expected >= 1", groups);
  const Dim& c = input.shape[1];
  if (c.is_static() && c.value() % groups != 0) {
    return invalid_argument("argument 'num_groups': got {}, which does not divide the {} "
                            "channels of input {}",
                            groups, c.value(), input.to_string());
  }
  for (size_t i = 1; i <= 2; ++i) KILN_RETURN_IF_ERROR(norm_param(node, i, input, {c}));
  return single(out, input.dtype, input.shape);
}

Status infer_softmax(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_floating("self", self));
  int64_t dim = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &dim, true));
  return single(out, self.dtype, self.shape);
}

Status infer_sdpa(const Node& node, SpecList* out) {
  const TensorSpec& q = arg_spec(node, 0);
  const TensorSpec& k = arg_spec(node, 1);
  const TensorSpec& v = arg_spec(node, 2);
  for (size_t i = 0; i < 3; ++i) {
    const TensorSpec& s = arg_spec(node, i);
    if (s.rank() < 2) {
      return invalid_argument("argument '{}': got {}, expected rank at least 2 ([..., L, E])",
                              arg_name(node, i), s.to_string());
    }
  }
  KILN_RETURN_IF_ERROR(expect_floating("query", q));
  KILN_RETURN_IF_ERROR(expect_same_dtype("key", k, "query", q));
  KILN_RETURN_IF_ERROR(expect_same_dtype("value", v, "query", q));
  if (!dims_compatible(k.shape.back(), q.shape.back())) {
    return invalid_argument("argument 'key': got {}, expected embedding size {} to match query {}",
                            k.to_string(), q.shape.back().to_string(), q.to_string());
  }
  const Dim& s_len = k.shape[k.rank() - 2];
  if (!dims_compatible(v.shape[v.rank() - 2], s_len)) {
    return invalid_argument("argument 'value': got {}, expected sequence length {} to match key {}",
                            v.to_string(), s_len.to_string(), k.to_string());
  }
  Shape batch(q.shape.begin(), q.shape.end() - 2);
  Shape kb(k.shape.begin(), k.shape.end() - 2), vb(v.shape.begin(), v.shape.end() - 2);
  KILN_RETURN_IF_ERROR(broadcast_shapes(batch, kb, "query", q, "key", k, &batch));
  KILN_RETURN_IF_ERROR(broadcast_shapes(batch, vb, "query", q, "value", v, &batch));
  const Dim& l_len = q.shape[q.rank() - 2];
  if (const TensorSpec* mask = opt_arg_spec(node, 3)) {
    if (node.kwarg_bool("is_causal")) {
      return invalid_argument("argument 'attn_mask': got {} with is_causal=True, expected one "
                              "of them only",
                              mask->to_string());
    }
    if (mask->dtype != DType::kBool && mask->dtype != q.dtype) {
      return invalid_argument("argument 'attn_mask': got {}, expected bool or {}",
                              mask->to_string(), dtype_name(q.dtype));
    }
    Shape scores = batch;
    scores.push_back(l_len);
    scores.push_back(s_len);
    Shape b;
    TensorSpec sc(q.dtype, scores);
    KILN_RETURN_IF_ERROR(broadcast_shapes(scores, mask->shape, "scores", sc, "attn_mask", *mask, &b));
    if (b.size() != scores.size()) {
      return invalid_argument("argument 'attn_mask': got {}, expected a shape that broadcasts "
                              "to {}",
                              mask->to_string(), shape_string(scores));
    }
  }
  double p = node.kwarg_float("dropout_p");
  if (!(p >= 0 && p < 1)) {
    return invalid_argument("argument 'dropout_p': got {}, expected a value in [0, 1)", p);
  }
  const Arg& scale = node.kwarg("scale");
  if (!scale.is_none() && !std::isfinite(scale.to_float())) {
    return invalid_argument("argument 'scale': got {}, expected a finite value", scale.to_float());
  }
  Shape shape = batch;
  shape.push_back(l_len);
  shape.push_back(v.shape.back());
  return single(out, q.dtype, std::move(shape));
}

Status infer_embedding(const Node& node, SpecList* out) {
  const TensorSpec& weight = arg_spec(node, 0);
  const TensorSpec& indices = arg_spec(node, 1);
  KILN_RETURN_IF_ERROR(expect_rank("weight", weight, 2));
  KILN_RETURN_IF_ERROR(expect_index("indices", indices));
  Shape shape = indices.shape;
  shape.push_back(weight.shape[1]);
  return single(out, weight.dtype, std::move(shape));
}

Status infer_upsample2d(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_rank("self", self, 4));
  if (node.target() == OpId::kUpsampleBilinear2d) {
    KILN_RETURN_IF_ERROR(expect_floating("self", self));
  } else {
    KILN_RETURN_IF_ERROR(expect_numeric("self", self));
  }
  const Arg& size = node.kwarg("output_size");
  const Arg& scales = node.kwarg("scales");
  if (size.is_none() == scales.is_none()) {
    return invalid_argument("argument 'output_size': expected exactly one of output_size and "
                            "scales, got {}",
                            size.is_none() ? "neither" : "both");
  }
  Shape shape = self.shape;
  if (!size.is_none()) {
    std::vector<int64_t> s;
    KILN_RETURN_IF_ERROR(per_dim_ints("output_size", size.to_ints(), 2, &s));
    KILN_RETURN_IF_ERROR(positive_ints("output_size", s));
    shape[2] = s[0];
    shape[3] = s[1];
    return single(out, self.dtype, std::move(shape));
  }
  std::vector<double> sc = scales.to_floats();
  if (sc.size() == 1) sc.push_back(sc[0]);
  if (sc.size() != 2) {
    return invalid_argument("argument 'scales': got {} values, expected 1 or 2",
                            scales.to_floats().size());
  }
  for (size_t i = 0; i < 2; ++i) {
    if (!(sc[i] > 0) || !std::isfinite(sc[i])) {
      return invalid_argument("argument 'scales': got {}, expected finite positive values", sc[i]);
    }
    const Dim& in = self.shape[2 + i];
    if (in.is_static()) {
      double o = std::floor(static_cast<double>(in.value()) * sc[i]);
      if (o > 9.0e15) {
        return out_of_range("argument 'scales': scale {} of size {} is too large", sc[i],
                            in.value());
      }
      shape[2 + i] = static_cast<int64_t>(o);
    } else if (sc[i] == std::floor(sc[i])) {
      shape[2 + i] = dim_mul(in, Dim(static_cast<int64_t>(sc[i])));
    } else {
      return unsupported("argument 'scales': fractional scale {} of symbolic dim {} is not "
                         "supported",
                         sc[i], in.to_string());
    }
  }
  return single(out, self.dtype, std::move(shape));
}

Status infer_recurrent(const Node& node, SpecList* out) {
  const bool lstm = node.is_call(OpId::kLstm), gru = node.is_call(OpId::kGru);
  const int64_t gates = lstm ? 4 : gru ? 3 : 1;
  const size_t functions = lstm ? 3 : gru ? 2 : 1;
  const TensorSpec& input = arg_spec(node, 0);
  const TensorSpec& w = arg_spec(node, 1);
  const TensorSpec& r = arg_spec(node, 2);
  KILN_RETURN_IF_ERROR(expect_floating("input", input));
  KILN_RETURN_IF_ERROR(expect_rank("input", input, 3));
  KILN_RETURN_IF_ERROR(expect_same_dtype("w", w, "input", input));
  KILN_RETURN_IF_ERROR(expect_same_dtype("r", r, "input", input));
  const int64_t hidden = node.kwarg_int("hidden_size");
  if (hidden <= 0 || hidden > kMaxAttr) {
    return invalid_argument("argument 'hidden_size': got {}, expected a positive size", hidden);
  }
  const std::string& direction = node.kwarg("direction").to_str();
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return invalid_argument(
        "argument 'direction': got '{}', expected forward, reverse or "
        "bidirectional",
        direction);
  }
  const Dim dirs(direction == "bidirectional" ? 2 : 1), h(hidden), gh(gates * hidden);
  const Dim &seq = input.shape[0], &batch = input.shape[1];
  KILN_RETURN_IF_ERROR(expect_shape("w", w, {dirs, gh, input.shape[2]}));
  KILN_RETURN_IF_ERROR(expect_shape("r", r, {dirs, gh, h}));
  if (const TensorSpec* bias = opt_arg_spec(node, 3)) {
    KILN_RETURN_IF_ERROR(expect_same_dtype("bias", *bias, "input", input));
    KILN_RETURN_IF_ERROR(expect_shape("bias", *bias, {dirs, Dim(2 * gates * hidden)}));
  }
  if (const TensorSpec* lens = opt_arg_spec(node, 4)) {
    KILN_RETURN_IF_ERROR(expect_index("sequence_lens", *lens));
    KILN_RETURN_IF_ERROR(expect_shape("sequence_lens", *lens, {batch}));
  }
  const size_t states = lstm ? 2 : 1;
  for (size_t i = 0; i < states; ++i) {
    if (const TensorSpec* s = opt_arg_spec(node, 5 + i)) {
      std::string_view name = arg_name(node, 5 + i);
      KILN_RETURN_IF_ERROR(expect_same_dtype(name, *s, "input", input));
      KILN_RETURN_IF_ERROR(expect_shape(name, *s, {dirs, batch, h}));
    }
  }
  if (const TensorSpec* p = lstm ? opt_arg_spec(node, 7) : nullptr) {
    KILN_RETURN_IF_ERROR(expect_same_dtype("peepholes", *p, "input", input));
    KILN_RETURN_IF_ERROR(expect_shape("peepholes", *p, {dirs, Dim(3 * hidden)}));
  }
  // Each function that has an alpha (beta) takes the next value of activation_alpha (_beta).
  struct Fn {
    std::string_view name;
    bool alpha, beta;
  };
  static constexpr Fn kFunctions[] = {
      {"relu", false, false},     {"tanh", false, false},      {"sigmoid", false, false},
      {"affine", true, true},     {"leakyrelu", true, false},  {"thresholdedrelu", true, false},
      {"scaledtanh", true, true}, {"hardsigmoid", true, true}, {"elu", true, false},
      {"softsign", false, false}, {"softplus", false, false}};
  size_t names = 0, alphas = 0, betas = 0;
  std::string_view rest = node.kwarg("activations").to_str();
  for (; !rest.empty(); ++names) {
    size_t comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    auto fn = std::find_if(std::begin(kFunctions), std::end(kFunctions),
                           [&](const Fn& f) { return f.name == name; });
    if (fn == std::end(kFunctions)) {
      return invalid_argument("argument 'activations': unknown function '{}'", name);
    }
    alphas += fn->alpha;
    betas += fn->beta;
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  const size_t per_run = functions * static_cast<size_t>(dirs.value());
  if (names != functions && names != per_run) {
    return invalid_argument(
        "argument 'activations': got {} functions, expected {} (or {} for each "
        "direction)",
        names, per_run, functions);
  }
  for (auto [arg, most] : {std::pair<std::string_view, size_t>{"activation_alpha", alphas},
                           std::pair<std::string_view, size_t>{"activation_beta", betas}}) {
    const Arg& v = node.kwarg(arg);
    if (!v.is_none() && v.to_floats().size() > most) {
      return invalid_argument("argument '{}': got {} values, but the activations take {}", arg,
                              v.to_floats().size(), most);
    }
  }
  const Arg& clip = node.kwarg("clip");
  if (!clip.is_none() && !(clip.to_float() > 0)) {
    return invalid_argument("argument 'clip': got {}, expected a positive bound", clip.to_float());
  }
  out->clear();
  out->emplace_back(input.dtype, Shape{seq, dirs, batch, h});
  for (size_t i = 0; i < states; ++i) out->emplace_back(input.dtype, Shape{dirs, batch, h});
  return Status::Ok();
}

}  // namespace kiln::shape

namespace kiln::shape {

Status infer_grid_sample(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const TensorSpec& grid = arg_spec(node, 1);
  KILN_RETURN_IF_ERROR(expect_floating("self", self));
  KILN_RETURN_IF_ERROR(expect_rank("self", self, 4));
  KILN_RETURN_IF_ERROR(expect_same_dtype("grid", grid, "self", self));
  if (grid.rank() != 4 || !(grid.shape[3] == Dim(2)) ||
      !dims_compatible(grid.shape[0], self.shape[0])) {
    return invalid_argument("argument 'grid': got {}, expected [{}, Ho, Wo, 2] (self {})",
                            grid.to_string(), self.shape[0].to_string(), self.to_string());
  }
  const std::string& mode = node.kwarg("mode").to_str();
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") {
    return invalid_argument("argument 'mode': got '{}', expected bilinear, nearest or bicubic",
                            mode);
  }
  const std::string& padding = node.kwarg("padding_mode").to_str();
  if (padding != "zeros" && padding != "border" && padding != "reflection") {
    return invalid_argument(
        "argument 'padding_mode': got '{}', expected zeros, border or reflection", padding);
  }
  return single(
      out, self.dtype,
      {merge_dims(self.shape[0], grid.shape[0]), self.shape[1], grid.shape[1], grid.shape[2]});
}

Status infer_resize(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_floating("self", self));
  const size_t rank = self.rank();
  // scales (float) and sizes (integer) hold one value per dim; roi starts then ends.
  const struct {
    size_t index;
    bool floating;
    size_t count;
  } operands[] = {{1, true, rank}, {2, false, rank}, {3, true, 2 * rank}};
  for (const auto& o : operands) {
    const TensorSpec* s = opt_arg_spec(node, o.index);
    if (s == nullptr) continue;
    const bool type_ok = o.floating ? is_floating(s->dtype) : is_integral(s->dtype);
    if (!type_ok || s->rank() != 1 || !(s->shape[0] == Dim(static_cast<int64_t>(o.count)))) {
      return invalid_argument("argument '{}': got {}, expected a 1-D {} tensor of {} values",
                              arg_name(node, o.index), s->to_string(),
                              o.floating ? "float" : "integer", o.count);
    }
  }
  if (opt_arg_spec(node, 1) == nullptr && opt_arg_spec(node, 2) == nullptr) {
    return invalid_argument("argument 'scales': expected scales or sizes, got neither");
  }
  const std::string& mode = node.kwarg("mode").to_str();
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
    return invalid_argument("argument 'mode': got '{}', expected nearest, linear or cubic", mode);
  }
  static constexpr std::string_view kCoords[] = {"half_pixel",         "half_pixel_symmetric",
                                                 "pytorch_half_pixel", "align_corners",
                                                 "asymmetric",         "tf_crop_and_resize"};
  const std::string& coord = node.kwarg("coordinate_transformation_mode").to_str();
  if (std::find(std::begin(kCoords), std::end(kCoords), coord) == std::end(kCoords)) {
    return invalid_argument("argument 'coordinate_transformation_mode': got '{}'", coord);
  }
  if (coord == "tf_crop_and_resize" && opt_arg_spec(node, 3) == nullptr) {
    return invalid_argument("argument 'roi': tf_crop_and_resize needs the roi");
  }
  static constexpr std::string_view kNearest[] = {"round_prefer_floor", "round_prefer_ceil",
                                                  "floor", "ceil"};
  const std::string& nearest = node.kwarg("nearest_mode").to_str();
  if (std::find(std::begin(kNearest), std::end(kNearest), nearest) == std::end(kNearest)) {
    return invalid_argument("argument 'nearest_mode': got '{}'", nearest);
  }
  const Arg& size = node.kwarg("output_size");
  Shape shape;
  if (size.is_none()) {
    for (size_t d = 0; d < rank; ++d) {
      shape.push_back(Dim::symbol(fmt::format("{}_d{}", node.name(), d)));
    }
    return single(out, self.dtype, std::move(shape));
  }
  const auto& s = size.to_ints();
  if (s.size() != rank) {
    return invalid_argument("argument 'output_size': got {}, expected {} sizes", ints_string(s),
                            rank);
  }
  for (int64_t v : s) {
    if (v < 0) return invalid_argument("argument 'output_size': got {}", ints_string(s));
    shape.push_back(v);
  }
  return single(out, self.dtype, std::move(shape));
}

}  // namespace kiln::shape
