// Neural-network ONNX ops: convolution, pooling, linear algebra, normalization, softmax,
// resizing, depth/space rearrangement.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "convert_util.h"
#include "fold.h"
#include "onnx_tensor.h"
#include "shape_util.h"

namespace kiln::onnx_import {
namespace {

std::vector<int64_t> ones(size_t n) { return std::vector<int64_t>(n, 1); }

Result<std::vector<int64_t>> ints_or(Importer& im, std::string_view name, std::vector<int64_t> dflt,
                                     size_t expect) {
  KILN_ASSIGN_OR_RETURN(auto v, im.attr_ints(name));
  if (v.empty()) v = std::move(dflt);
  if (v.size() != expect) {
    return invalid_argument("attribute '{}' has {} values, expected {}", name, v.size(), expect);
  }
  return v;
}

// kiln padding: one value per spatial dim when symmetric, else [begin..., end...].
std::vector<int64_t> compact_pads(const std::vector<int64_t>& pads) {
  size_t n = pads.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    if (pads[i] != pads[i + n]) return pads;
  }
  return {pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n)};
}

// Resolves pads / auto_pad of a conv or pool over the spatial dims of `xs`.
Result<std::vector<int64_t>> resolve_pads(Importer& im, const TensorSpec& xs,
                                          const std::vector<int64_t>& kernel,
                                          const std::vector<int64_t>& strides,
                                          const std::vector<int64_t>& dilations) {
  size_t n = kernel.size();
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, im.attr_str("auto_pad", "NOTSET"));
  std::vector<int64_t> pads(2 * n, 0);
  if (auto_pad == "NOTSET") {
    KILN_ASSIGN_OR_RETURN(pads, ints_or(im, "pads", pads, 2 * n));
    for (int64_t p : pads) {
      if (p < 0) return invalid_argument("attribute 'pads' has a negative value {}", p);
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      const Dim& d = xs.shape[2 + i];
      if (!d.is_static()) {
        return unsupported("auto_pad {} needs static spatial dims, got {}", auto_pad, xs.to_string());
      }
      int64_t in = d.value(), s = strides[i];
      int64_t out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + (kernel[i] - 1) * dilations[i] + 1 - in);
      int64_t small = total / 2;
      pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      pads[i + n] = total - pads[i];
    }
  } else if (auto_pad != "VALID") {
    return invalid_argument("attribute 'auto_pad': unknown value '{}'", auto_pad);
  }
  return compact_pads(pads);
}

Status check_positive(const std::vector<int64_t>& v, std::string_view name) {
  for (int64_t x : v) {
    if (x <= 0) return invalid_argument("attribute '{}' has a non-positive value {}", name, x);
  }
  return Status::Ok();
}

Result<Arg> optional_weight(Importer& im, size_t i) {
  if (!im.has_input(i)) return Arg();
  KILN_ASSIGN_OR_RETURN(Node * n, im.input(i, Role::kWeight));
  return Arg(n);
}

}  // namespace

Result<Node*> conv_call(Importer& im, const TensorSpec& xs, const TensorSpec& ws, Node* x, Node* w,
                        Arg b) {
  if (ws.rank() < 3 || xs.rank() != ws.rank()) {
    return invalid_argument("input X {} and weight W {} do not fit a convolution", xs.to_string(),
                            ws.to_string());
  }
  size_t n = ws.rank() - 2;
  std::vector<int64_t> kdefault;
  for (size_t i = 0; i < n; ++i) kdefault.push_back(ws.shape[2 + i].is_static() ? ws.shape[2 + i].value() : 1);
  KILN_ASSIGN_OR_RETURN(auto kernel, ints_or(im, "kernel_shape", kdefault, n));
  KILN_ASSIGN_OR_RETURN(auto strides, ints_or(im, "strides", ones(n), n));
  KILN_ASSIGN_OR_RETURN(auto dilations, ints_or(im, "dilations", ones(n), n));
  KILN_RETURN_IF_ERROR(check_positive(strides, "strides"));
  KILN_RETURN_IF_ERROR(check_positive(dilations, "dilations"));
  KILN_ASSIGN_OR_RETURN(int64_t group, im.attr_int("group", 1));
  KILN_ASSIGN_OR_RETURN(auto pads, resolve_pads(im, xs, kernel, strides, dilations));
  return im.call(OpId::kConvolution, {x, w, b},
                 {{"stride", strides}, {"padding", pads}, {"dilation", dilations}, {"groups", group}});
}

namespace {

Status convert_conv(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec ws, im.input_spec(1));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * w, im.input(1, Role::kWeight));
  KILN_ASSIGN_OR_RETURN(Arg b, optional_weight(im, 2));
  KILN_ASSIGN_OR_RETURN(Node * y, conv_call(im, xs, ws, x, w, b));
  im.set_output(0, y);
  return Status::Ok();
}

// ConvTranspose in 2-D, and in 1-D as a 2-D one over [N, C, 1, L].
Status convert_conv_transpose(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec ws, im.input_spec(1));
  const bool one_d = ws.rank() == 3 && xs.rank() == 3;
  if (!one_d && (ws.rank() != 4 || xs.rank() != 4)) {
    return unsupported("only 1-D and 2-D ConvTranspose are supported (X {}, W {})", xs.to_string(),
                       ws.to_string());
  }
  if (one_d) {
    xs.shape.insert(xs.shape.begin() + 2, Dim(1));
    ws.shape.insert(ws.shape.begin() + 2, Dim(1));
  }
  auto wshape = ws.static_shape();
  if (!wshape) return unsupported("weight W has a symbolic shape {}", ws.to_string());
  const size_t n = 2;
  // Attribute `name` with 2-D default `dflt`. A 1-D node's values are the second spatial dim's,
  // the first's being `first` (the [.., 1, L] image's height).
  auto ints_2d = [&](std::string_view name, std::vector<int64_t> dflt,
                     int64_t first) -> Result<std::vector<int64_t>> {
    if (!one_d) return ints_or(im, name, dflt, dflt.size());
    std::vector<int64_t> d1;
    for (size_t i = 1; i < dflt.size(); i += 2) d1.push_back(dflt[i]);
    KILN_ASSIGN_OR_RETURN(auto v, ints_or(im, name, d1, d1.size()));
    if (v.size() == 1) return std::vector<int64_t>{first, v[0]};
    return std::vector<int64_t>{first, v[0], first, v[1]};  // pads: begins, then ends
  };
  KILN_ASSIGN_OR_RETURN(auto kernel, ints_2d("kernel_shape", {(*wshape)[2], (*wshape)[3]}, 1));
  KILN_ASSIGN_OR_RETURN(auto strides, ints_2d("strides", ones(n), 1));
  KILN_ASSIGN_OR_RETURN(auto dilations, ints_2d("dilations", ones(n), 1));
  KILN_ASSIGN_OR_RETURN(auto out_pad, ints_2d("output_padding", {0, 0}, 0));
  KILN_RETURN_IF_ERROR(check_positive(strides, "strides"));
  KILN_RETURN_IF_ERROR(check_positive(dilations, "dilations"));
  KILN_ASSIGN_OR_RETURN(int64_t group, im.attr_int("group", 1));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, im.attr_str("auto_pad", "NOTSET"));
  KILN_ASSIGN_OR_RETURN(auto output_shape, im.attr_ints("output_shape"));
  std::vector<int64_t> pads(2 * n, 0);
  if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const size_t given = one_d ? 1 : n;  // spatial sizes, after N and C when those are given too
    if (output_shape.size() > given)
      output_shape.erase(output_shape.begin(), output_shape.end() - static_cast<int64_t>(given));
    if (!output_shape.empty() && output_shape.size() != given) {
      return invalid_argument("attribute 'output_shape' has {} values, expected {}",
                              output_shape.size(), given);
    }
    if (one_d && !output_shape.empty()) output_shape.insert(output_shape.begin(), 1);
    for (size_t i = 0; i < n; ++i) {
      const Dim& d = xs.shape[2 + i];
      if (!d.is_static()) return unsupported("output_shape/auto_pad need static spatial dims");
      int64_t in = d.value();
      int64_t target = output_shape.empty() ? in * strides[i] : output_shape[i];
      int64_t total = strides[i] * (in - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - target;
      if (total < 0) {  // a larger output than the full convolution: extra rows at the end
        out_pad[i] -= total;
        total = 0;
      }
      bool upper = auto_pad != "SAME_LOWER";
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[i + n] = total - pads[i];
    }
  } else if (auto_pad == "NOTSET") {
    KILN_ASSIGN_OR_RETURN(pads, ints_2d("pads", pads, 0));
  } else if (auto_pad != "VALID") {
    return invalid_argument("attribute 'auto_pad': unknown value '{}'", auto_pad);
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * w, im.input(1, Role::kWeight));
  if (one_d) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kUnsqueeze, {x}, {{"dim", int64_t{2}}}));
    KILN_ASSIGN_OR_RETURN(w, im.call(OpId::kUnsqueeze, {w}, {{"dim", int64_t{2}}}));
  }
  KILN_ASSIGN_OR_RETURN(Arg b, optional_weight(im, 2));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kConvTranspose2d, {x, w, b},
                                          {{"stride", strides}, {"padding", compact_pads(pads)},
                                           {"output_padding", out_pad}, {"groups", group},
                                           {"dilation", dilations}}));
  if (one_d) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kSqueeze, {y}, {{"dim", std::vector<int64_t>{2}}}));
  }
  im.set_output(0, y);
  return Status::Ok();
}

Result<Node*> transpose2d(Importer& im, Node* x) {
  return im.call(OpId::kPermute, {x}, {{"dims", std::vector<int64_t>{1, 0}}});
}

Status convert_gemm(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, im.attr_int("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, im.attr_int("transB", 0));
  KILN_ASSIGN_OR_RETURN(float alpha, im.attr_float("alpha", 1.0f));
  KILN_ASSIGN_OR_RETURN(float beta, im.attr_float("beta", 1.0f));
  KILN_ASSIGN_OR_RETURN(TensorSpec as, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec bs, im.input_spec(1));
  if (as.rank() != 2 || bs.rank() != 2) {
    return invalid_argument("A {} and B {} must be 2-D", as.to_string(), bs.to_string());
  }
  KILN_ASSIGN_OR_RETURN(Node * a, im.input(0));
  if (trans_a) {
    KILN_ASSIGN_OR_RETURN(a, transpose2d(im, a));
  }
  const Tensor* b_const = im.const_input(1);
  const Tensor* c_const = im.const_input(2);
  const bool has_c = im.has_input(2) && beta != 0.0f;
  Node* y = nullptr;
  if (b_const != nullptr && is_floating(b_const->dtype())) {
    // linear() takes an [N, K] weight: transB=1 is that layout; transB=0 is folded into it.
    Tensor w = *b_const;
    if (alpha != 1.0f) {
      Tensor s(w.dtype(), {});
      s.set_scalar_at(0, alpha);
      KILN_ASSIGN_OR_RETURN(w, fold::binary(fold::BinOp::kMul, w, s));
    }
    if (!trans_b) {
      KILN_ASSIGN_OR_RETURN(w, fold::transpose(w, std::vector<int64_t>{1, 0}));
    }
    Node* wn = nullptr;
    if (trans_b && alpha == 1.0f) {
      KILN_ASSIGN_OR_RETURN(wn, im.input(1, Role::kWeight));
    } else {
      wn = im.constant_node(std::move(w), im.node().input(1), Role::kWeight);
    }
    Arg bias;
    bool bias_done = !has_c;
    int64_t n_out = bs.shape[trans_b ? 0 : 1].is_static() ? bs.shape[trans_b ? 0 : 1].value() : -1;
    if (has_c && c_const != nullptr && c_const->numel() == n_out && c_const->rank() >= 1 &&
        (c_const->rank() == 1 || (c_const->rank() == 2 && c_const->dim(0) == 1))) {
      Tensor c = c_const->reshaped({n_out});
      if (beta != 1.0f) {
        Tensor s(c.dtype(), {});
        s.set_scalar_at(0, beta);
        KILN_ASSIGN_OR_RETURN(c, fold::binary(fold::BinOp::kMul, c, s));
        bias = Arg(im.constant_node(std::move(c), im.node().input(2), Role::kWeight));
      } else if (c_const->rank() == 1) {
        KILN_ASSIGN_OR_RETURN(Node * cn, im.input(2, Role::kWeight));
        bias = Arg(cn);
      } else {
        bias = Arg(im.constant_node(std::move(c), im.node().input(2), Role::kWeight));
      }
      bias_done = true;
    }
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kLinear, {a, wn, bias}));
    if (!bias_done) {
      KILN_ASSIGN_OR_RETURN(Node * c, im.input(2, Role::kWeight));
      if (beta != 1.0f) {
        KILN_ASSIGN_OR_RETURN(c, im.call(OpId::kMul, {c, static_cast<double>(beta)}));
      }
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kAdd, {y, c}));
    }
  } else {
    KILN_ASSIGN_OR_RETURN(Node * b, im.input(1, Role::kWeight));
    if (trans_b) {
      KILN_ASSIGN_OR_RETURN(b, transpose2d(im, b));
    }
    if (has_c) {
      KILN_ASSIGN_OR_RETURN(Node * c, im.input(2, Role::kWeight));
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kAddmm, {c, a, b},
                                       {{"beta", static_cast<double>(beta)},
                                        {"alpha", static_cast<double>(alpha)}}));
    } else {
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kMm, {a, b}));
      if (alpha != 1.0f) {
        KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kMul, {y, static_cast<double>(alpha)}));
      }
    }
  }
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_matmul(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * a, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * b, im.input(1, Role::kWeight));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kMatmul, {a, b}));
  im.set_output(0, y);
  return Status::Ok();
}

// ---- Einsum: operands contracted pairwise, each pair as one batched matmul between permutes,
// flattens and unflattens (symbolic sizes welcome, one per group of labels).

// An operand of an einsum: its node, a label per dim and the dims' sizes.
struct EinsumTerm {
  Node* node = nullptr;
  std::vector<int> labels;
  std::vector<Dim> shape;
};

// Sizes of `dims` for unflatten: static values, at most one symbolic (-1).
Result<std::vector<int64_t>> unflatten_sizes(const std::vector<Dim>& dims) {
  std::vector<int64_t> sizes;
  for (const Dim& d : dims) {
    if (!d.is_static() && std::count(sizes.begin(), sizes.end(), -1) > 0) {
      return unsupported("einsum groups two symbolic dims ({}) together",
                         TensorSpec(DType::kF32, Shape(dims.begin(), dims.end())).to_string());
    }
    sizes.push_back(d.is_static() ? d.value() : -1);
  }
  return sizes;
}

// Sums out the labels of `t` that `keep` does not hold.
Result<EinsumTerm> einsum_sum_out(Importer& im, EinsumTerm t, const std::vector<int>& keep) {
  std::vector<int64_t> dims;
  EinsumTerm out{nullptr, {}, {}};
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (std::find(keep.begin(), keep.end(), t.labels[i]) == keep.end()) {
      dims.push_back(static_cast<int64_t>(i));
    } else {
      out.labels.push_back(t.labels[i]);
      out.shape.push_back(t.shape[i]);
    }
  }
  if (dims.empty()) return t;
  KILN_ASSIGN_OR_RETURN(out.node,
                        im.call(OpId::kSum, {t.node}, {{"dim", dims}, {"keepdim", false}}));
  return out;
}

// t permuted to `order` (labels), as a node.
Result<Node*> einsum_permute(Importer& im, const EinsumTerm& t, const std::vector<int>& order) {
  std::vector<int64_t> perm;
  for (int l : order) {
    perm.push_back(std::find(t.labels.begin(), t.labels.end(), l) - t.labels.begin());
  }
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    identity = identity && perm[i] == static_cast<int64_t>(i);
  }
  if (identity) return t.node;
  return im.call(OpId::kPermute, {t.node}, {{"dims", perm}});
}

// Dims [start, start + count) of x as one: a flatten, or a new size-1 dim when count is 0.
Result<Node*> einsum_group(Importer& im, Node* x, int64_t start, size_t count) {
  if (count == 0) return im.call(OpId::kUnsqueeze, {x}, {{"dim", start}});
  if (count == 1) return x;
  return im.call(OpId::kFlatten, {x},
                 {{"start_dim", start}, {"end_dim", start + static_cast<int64_t>(count) - 1}});
}

// Undoes einsum_group on dim `at` of x for a group of `dims`.
Result<Node*> einsum_ungroup(Importer& im, Node* x, int64_t at, const std::vector<Dim>& dims) {
  if (dims.empty()) return im.call(OpId::kSqueeze, {x}, {{"dim", std::vector<int64_t>{at}}});
  if (dims.size() == 1) return x;
  KILN_ASSIGN_OR_RETURN(auto sizes, unflatten_sizes(dims));
  return im.call(OpId::kUnflatten, {x}, {{"dim", at}, {"sizes", sizes}});
}

// a x b over their shared labels, keeping the labels in `keep` (the output's and later
// operands'): [batch, m, k] @ [batch, k, n] -> [batch, m, n].
Result<EinsumTerm> einsum_contract(Importer& im, EinsumTerm a, EinsumTerm b,
                                   const std::vector<int>& keep) {
  auto has = [](const std::vector<int>& v, int l) {
    return std::find(v.begin(), v.end(), l) != v.end();
  };
  std::vector<int> keep_a = keep, keep_b = keep;
  keep_a.insert(keep_a.end(), b.labels.begin(), b.labels.end());
  keep_b.insert(keep_b.end(), a.labels.begin(), a.labels.end());
  KILN_ASSIGN_OR_RETURN(a, einsum_sum_out(im, std::move(a), keep_a));
  KILN_ASSIGN_OR_RETURN(b, einsum_sum_out(im, std::move(b), keep_b));
  std::vector<int> batch, m, k, n;
  std::vector<Dim> batch_dims, m_dims, n_dims;
  for (size_t i = 0; i < a.labels.size(); ++i) {
    int l = a.labels[i];
    if (!has(b.labels, l)) {
      m.push_back(l);
      m_dims.push_back(a.shape[i]);
    } else if (has(keep, l)) {
      batch.push_back(l);
      const Dim& bd = b.shape[std::find(b.labels.begin(), b.labels.end(), l) - b.labels.begin()];
      batch_dims.push_back(a.shape[i] == Dim(1) ? bd : a.shape[i]);
    } else {
      k.push_back(l);
    }
  }
  for (size_t i = 0; i < b.labels.size(); ++i) {
    if (!has(a.labels, b.labels[i])) {
      n.push_back(b.labels[i]);
      n_dims.push_back(b.shape[i]);
    }
  }
  const int64_t nb = static_cast<int64_t>(batch.size());
  std::vector<int> order_a = batch, order_b = batch;
  order_a.insert(order_a.end(), m.begin(), m.end());
  order_a.insert(order_a.end(), k.begin(), k.end());
  order_b.insert(order_b.end(), k.begin(), k.end());
  order_b.insert(order_b.end(), n.begin(), n.end());
  KILN_ASSIGN_OR_RETURN(Node * x, einsum_permute(im, a, order_a));
  KILN_ASSIGN_OR_RETURN(x, einsum_group(im, x, nb, m.size()));
  KILN_ASSIGN_OR_RETURN(x, einsum_group(im, x, nb + 1, k.size()));
  KILN_ASSIGN_OR_RETURN(Node * y, einsum_permute(im, b, order_b));
  KILN_ASSIGN_OR_RETURN(y, einsum_group(im, y, nb, k.size()));
  KILN_ASSIGN_OR_RETURN(y, einsum_group(im, y, nb + 1, n.size()));
  KILN_ASSIGN_OR_RETURN(Node * p, im.call(OpId::kMatmul, {x, y}));
  KILN_ASSIGN_OR_RETURN(p, einsum_ungroup(im, p, nb + 1, n_dims));
  KILN_ASSIGN_OR_RETURN(p, einsum_ungroup(im, p, nb, m_dims));
  EinsumTerm out{p, batch, batch_dims};
  out.labels.insert(out.labels.end(), m.begin(), m.end());
  out.labels.insert(out.labels.end(), n.begin(), n.end());
  out.shape.insert(out.shape.end(), m_dims.begin(), m_dims.end());
  out.shape.insert(out.shape.end(), n_dims.begin(), n_dims.end());
  return out;
}

// Labels of one side of an einsum equation: letters as 0..51, the dims an ellipsis covers as
// kEllipsis + k (k counted so that they align right across operands).
constexpr int kEllipsis = 100;

Result<std::vector<int>> einsum_labels(std::string_view side, size_t rank, size_t ellipsis_dims,
                                       std::string_view what) {
  std::vector<int> labels;
  size_t dots = side.find("...");
  size_t letters = side.size() - (dots == std::string_view::npos ? 0 : 3);
  if (dots == std::string_view::npos ? letters != rank : letters > rank) {
    return invalid_argument("einsum {} '{}' does not fit rank {}", what, side, rank);
  }
  const size_t covered = rank - letters;
  for (size_t i = 0; i < side.size(); ++i) {
    if (i == dots) {
      for (size_t j = 0; j < covered; ++j) {
        labels.push_back(kEllipsis + static_cast<int>(ellipsis_dims - covered + j));
      }
      i += 2;
      continue;
    }
    char c = side[i];
    if (c >= 'a' && c <= 'z') {
      labels.push_back(c - 'a');
    } else if (c >= 'A' && c <= 'Z') {
      labels.push_back(26 + c - 'A');
    } else {
      return invalid_argument("einsum {} '{}' has '{}', expected letters and one '...'", what, side,
                              c);
    }
  }
  return labels;
}

Status convert_einsum(Importer& im) {
  KILN_ASSIGN_OR_RETURN(std::string eq, im.attr_str("equation", ""));
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> sides;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    sides.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (sides.size() != im.num_inputs()) {
    return invalid_argument("equation '{}' has {} operands for {} inputs", eq, sides.size(),
                            im.num_inputs());
  }
  std::vector<EinsumTerm> terms;
  size_t ellipsis_dims = 0;
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < sides.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(i));
    size_t dots = sides[i].find("...");
    if (dots != std::string::npos && s.rank() + 3 >= sides[i].size()) {
      ellipsis_dims = std::max(ellipsis_dims, s.rank() + 3 - sides[i].size());
    }
    specs.push_back(s);
  }
  std::vector<int> count(kEllipsis + 64, 0);
  for (size_t i = 0; i < sides.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(auto labels,
                          einsum_labels(sides[i], specs[i].rank(), ellipsis_dims, "operand"));
    KILN_ASSIGN_OR_RETURN(Node * n, im.input(i));
    std::vector<Dim> dims(specs[i].shape.begin(), specs[i].shape.end());
    for (int l : labels) ++count[static_cast<size_t>(l)];  // "ii" alone is a trace: i counts twice
    // A label repeated within the operand takes its diagonal: the two dims masked with the
    // identity, then the second summed away.
    for (size_t q = 1; q < labels.size(); ++q) {
      const auto p = static_cast<size_t>(
          std::find(labels.begin(), labels.begin() + static_cast<std::ptrdiff_t>(q), labels[q]) -
          labels.begin());
      if (p == q) continue;
      if (!dims[p].is_static() || !(dims[p] == dims[q])) {
        return unsupported(
            "equation '{}': the diagonal of operand {} needs equal static dims, got {}", eq, i,
            specs[i].to_string());
      }
      const int64_t size = dims[p].value();
      std::vector<int64_t> mask_shape(labels.size(), 1);
      mask_shape[p] = mask_shape[q] = size;
      Tensor eye(specs[i].dtype, mask_shape);
      for (int64_t k = 0; k < size * size; ++k) eye.set_scalar_at(k, k / size == k % size ? 1 : 0);
      KILN_ASSIGN_OR_RETURN(n,
                            im.call(OpId::kMul, {n, im.constant_node(std::move(eye), "diagonal")}));
      KILN_ASSIGN_OR_RETURN(
          n, im.call(OpId::kSum, {n}, {{"dim", std::vector<int64_t>{static_cast<int64_t>(q)}}}));
      labels.erase(labels.begin() + static_cast<std::ptrdiff_t>(q));
      dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(q));
      --q;
    }
    terms.push_back({n, labels, dims});
  }
  // The output: as written, or the ellipsis dims then the labels used once, alphabetically.
  std::vector<int> out;
  if (arrow != std::string::npos) {
    std::string rhs = eq.substr(arrow + 2);
    size_t letters = rhs.size() - (rhs.find("...") == std::string::npos ? 0 : 3);
    KILN_ASSIGN_OR_RETURN(
        out,
        einsum_labels(rhs, letters + (rhs.find("...") == std::string::npos ? 0 : ellipsis_dims),
                      ellipsis_dims, "output"));
  } else {
    for (size_t j = 0; j < ellipsis_dims; ++j) out.push_back(kEllipsis + static_cast<int>(j));
    for (int l = 0; l < 52; ++l) {
      if (count[static_cast<size_t>(l)] == 1) out.push_back(l);
    }
  }
  for (int l : out) {
    if (count[static_cast<size_t>(l)] == 0) {
      return invalid_argument("equation '{}' outputs a label no operand has", eq);
    }
  }
  // Contract left to right, keeping what the output and the operands still to come need.
  EinsumTerm acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    std::vector<int> keep = out;
    for (size_t j = i + 1; j < terms.size(); ++j) {
      keep.insert(keep.end(), terms[j].labels.begin(), terms[j].labels.end());
    }
    KILN_ASSIGN_OR_RETURN(acc, einsum_contract(im, std::move(acc), terms[i], keep));
  }
  KILN_ASSIGN_OR_RETURN(acc, einsum_sum_out(im, std::move(acc), out));
  KILN_ASSIGN_OR_RETURN(Node * y, einsum_permute(im, acc, out));
  im.set_output(0, y);
  return Status::Ok();
}

Status no_extra_outputs(Importer& im, std::string_view what) {
  for (size_t i = 1; i < im.num_outputs(); ++i) {
    if (im.output_used(i)) return unsupported("output {} ({}) is not supported", i, what);
  }
  return Status::Ok();
}

// BatchNormalization with training_mode=1 (opset 14+): normalizes with the batch's own mean
// and (population) variance over every dim but the channels, and returns the running statistics
// updated with them: running * momentum + batch * (1 - momentum).
Status batch_norm_training(Importer& im, float eps) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(float momentum, im.attr_float("momentum", 0.9f));
  if (xs.rank() < 2)
    return invalid_argument("input 'X': got {}, expected [N, C, ...]", xs.to_string());
  std::vector<int64_t> dims{0}, channel_shape{-1};
  for (int64_t d = 2; d < static_cast<int64_t>(xs.rank()); ++d) {
    dims.push_back(d);
    channel_shape.push_back(1);
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  Kwargs reduce = {{"dim", dims}, {"keepdim", true}};
  KILN_ASSIGN_OR_RETURN(Node * mean, im.call(OpId::kMean, {x}, reduce));
  KILN_ASSIGN_OR_RETURN(Node * d, im.call(OpId::kSub, {x, mean}));
  KILN_ASSIGN_OR_RETURN(Node * sq, im.call(OpId::kMul, {d, d}));
  KILN_ASSIGN_OR_RETURN(Node * var, im.call(OpId::kMean, {sq}, reduce));
  KILN_ASSIGN_OR_RETURN(Node * inv, im.call(OpId::kAdd, {var, Arg(static_cast<double>(eps))}));
  KILN_ASSIGN_OR_RETURN(inv, im.call(OpId::kRsqrt, {inv}));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kMul, {d, inv}));
  for (size_t i = 1; i <= 2; ++i) {  // scale, then bias
    KILN_ASSIGN_OR_RETURN(Node * p, im.input(i));
    KILN_ASSIGN_OR_RETURN(p, im.call(OpId::kReshape, {p}, {{"shape", channel_shape}}));
    KILN_ASSIGN_OR_RETURN(y, im.call(i == 1 ? OpId::kMul : OpId::kAdd, {y, p}));
  }
  im.set_output(0, y);
  Node* batch_stats[] = {mean, var};
  for (size_t i = 1; i <= 2 && i < im.num_outputs(); ++i) {
    if (!im.output_used(i)) continue;
    KILN_ASSIGN_OR_RETURN(Node * running, im.input(2 + i));
    KILN_ASSIGN_OR_RETURN(running,
                          im.call(OpId::kMul, {running, Arg(static_cast<double>(momentum))}));
    KILN_ASSIGN_OR_RETURN(Node * s, im.call(OpId::kReshape, {batch_stats[i - 1]},
                                            {{"shape", std::vector<int64_t>{-1}}}));
    KILN_ASSIGN_OR_RETURN(s, im.call(OpId::kMul, {s, Arg(1.0 - static_cast<double>(momentum))}));
    KILN_ASSIGN_OR_RETURN(running, im.call(OpId::kAdd, {running, s}));
    im.set_output(i, running);
  }
  return Status::Ok();
}

Status convert_batch_norm(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t training, im.attr_int("training_mode", 0));
  KILN_ASSIGN_OR_RETURN(float eps, im.attr_float("epsilon", 1e-5f));
  if (training) return batch_norm_training(im, eps);
  KILN_RETURN_IF_ERROR(no_extra_outputs(im, "running statistics"));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  std::vector<Arg> args{x};
  for (size_t i = 1; i <= 4; ++i) {
    KILN_ASSIGN_OR_RETURN(Node * p, im.input(i, Role::kWeight));
    args.push_back(p);
  }
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kBatchNorm, args, {{"eps", static_cast<double>(eps)}}));
  im.set_output(0, y);
  return Status::Ok();
}

// LayerNormalization's Mean and InvStdDev outputs (kept dims), computed in f32 (stash_type 1,
// the default) or in the input's type (stash_type 0).
Status layer_norm_stats(Importer& im, Node* x, const TensorSpec& xs, int64_t axis, float eps) {
  KILN_ASSIGN_OR_RETURN(int64_t stash, im.attr_int("stash_type", 1));
  if (stash == 1 && xs.dtype != DType::kF32) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kCast, {x}, {{"dtype", DType::kF32}}));
  }
  std::vector<int64_t> dims;
  for (int64_t d = axis; d < static_cast<int64_t>(xs.rank()); ++d) dims.push_back(d);
  Kwargs reduce = {{"dim", dims}, {"keepdim", true}};
  KILN_ASSIGN_OR_RETURN(Node * mean, im.call(OpId::kMean, {x}, reduce));
  KILN_ASSIGN_OR_RETURN(Node * d, im.call(OpId::kSub, {x, mean}));
  KILN_ASSIGN_OR_RETURN(d, im.call(OpId::kMul, {d, d}));
  KILN_ASSIGN_OR_RETURN(Node * var, im.call(OpId::kMean, {d}, reduce));
  KILN_ASSIGN_OR_RETURN(var, im.call(OpId::kAdd, {var, Arg(static_cast<double>(eps))}));
  KILN_ASSIGN_OR_RETURN(Node * inv, im.call(OpId::kRsqrt, {var}));
  im.set_output(1, mean);
  im.set_output(2, inv);
  return Status::Ok();
}

Status convert_layer_norm(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(float eps, im.attr_float("epsilon", 1e-5f));
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, xs.rank(), "attribute 'axis'"));
  std::vector<int64_t> normalized;
  for (size_t d = static_cast<size_t>(axis); d < xs.rank(); ++d) {
    if (!xs.shape[d].is_static()) {
      return unsupported("normalized dim {} of {} is symbolic", d, xs.to_string());
    }
    normalized.push_back(xs.shape[d].value());
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Arg w, optional_weight(im, 1));
  KILN_ASSIGN_OR_RETURN(Arg b, optional_weight(im, 2));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kLayerNorm, {x, w, b},
                                          {{"normalized_shape", normalized},
                                           {"eps", static_cast<double>(eps)}}));
  im.set_output(0, y);
  if (im.output_used(1) || im.output_used(2)) return layer_norm_stats(im, x, xs, axis, eps);
  return Status::Ok();
}

Status convert_instance_norm(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(float eps, im.attr_float("epsilon", 1e-5f));
  if (xs.rank() < 3 || !xs.shape[1].is_static()) {
    return unsupported("input {} needs rank >= 3 and a static channel dim", xs.to_string());
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Arg w, optional_weight(im, 1));
  KILN_ASSIGN_OR_RETURN(Arg b, optional_weight(im, 2));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kGroupNorm, {x, w, b},
                                          {{"num_groups", xs.shape[1].value()},
                                           {"eps", static_cast<double>(eps)}}));
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_global_avg_pool(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  if (r < 3) return invalid_argument("input must have rank >= 3, got {}", r);
  if (r == 4) return unary(im, OpId::kAdaptiveAvgPool2d, {{"output_size", std::vector<int64_t>{1, 1}}});
  std::vector<int64_t> dims;
  for (size_t d = 2; d < r; ++d) dims.push_back(static_cast<int64_t>(d));
  return unary(im, OpId::kMean, {{"dim", dims}, {"keepdim", true}});
}

Status convert_global_max_pool(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  if (r < 3) return invalid_argument("input must have rank >= 3, got {}", r);
  std::vector<int64_t> dims;
  for (size_t d = 2; d < r; ++d) dims.push_back(static_cast<int64_t>(d));
  return unary(im, OpId::kAmax, {{"dim", dims}, {"keepdim", true}});
}

// MeanVarianceNormalization: (x - mean) / sqrt(var + 1e-9) over `axes` (ONNX's function body).
Status convert_mean_variance_normalization(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t r, input_rank(im, 0));
  KILN_ASSIGN_OR_RETURN(auto axes, im.attr_ints("axes"));
  if (!im.has_attr("axes")) axes = {0, 2, 3};
  for (int64_t& a : axes) KILN_RETURN_IF_ERROR(normalize_axis(&a, r, "attribute 'axes'"));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  Kwargs over{{"dim", axes}, {"keepdim", true}};
  KILN_ASSIGN_OR_RETURN(Node * mean, im.call(OpId::kMean, {x}, over));
  KILN_ASSIGN_OR_RETURN(Node * centered, im.call(OpId::kSub, {x, mean}));
  KILN_ASSIGN_OR_RETURN(Node * sq, im.call(OpId::kMul, {centered, centered}));
  KILN_ASSIGN_OR_RETURN(Node * var, im.call(OpId::kMean, {sq}, over));
  KILN_ASSIGN_OR_RETURN(Node * eps, im.call(OpId::kAdd, {var, 1e-9}));
  KILN_ASSIGN_OR_RETURN(Node * sd, im.call(OpId::kSqrt, {eps}));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kDiv, {centered, sd}));
  im.set_output(0, y);
  return Status::Ok();
}

// LRN: x / (bias + alpha / size * sum of x^2 over `size` channels around c)^beta. The window sum
// is an average pool over [N, 1, C, H*W] with count_include_pad (the average times size).
Status convert_lrn(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  if (xs.rank() < 3) return invalid_argument("input must have rank >= 3, got {}", xs.to_string());
  KILN_ASSIGN_OR_RETURN(int64_t size, im.attr_int("size", 0));
  if (size <= 0) return invalid_argument("attribute 'size' must be positive, got {}", size);
  KILN_ASSIGN_OR_RETURN(float alpha, im.attr_float("alpha", 1e-4f));
  KILN_ASSIGN_OR_RETURN(float beta, im.attr_float("beta", 0.75f));
  KILN_ASSIGN_OR_RETURN(float bias, im.attr_float("bias", 1.0f));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * sq, im.call(OpId::kMul, {x, x}));
  KILN_ASSIGN_OR_RETURN(Node * planes, im.call(OpId::kUnsqueeze, {sq}, {{"dim", int64_t{1}}}));
  if (xs.rank() != 3) {
    KILN_ASSIGN_OR_RETURN(planes, im.call(OpId::kFlatten, {planes}, {{"start_dim", int64_t{3}}}));
  } else {
    KILN_ASSIGN_OR_RETURN(planes, im.call(OpId::kUnsqueeze, {planes}, {{"dim", int64_t{3}}}));
  }
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  KILN_ASSIGN_OR_RETURN(Node * avg, im.call(OpId::kAvgPool2d, {planes},
                                            {{"kernel_size", std::vector<int64_t>{size, 1}},
                                             {"stride", std::vector<int64_t>{1, 1}},
                                             {"padding", compact_pads({before, 0, after, 0})},
                                             {"count_include_pad", true}}));
  KILN_ASSIGN_OR_RETURN(Node * back,
                        im.call(OpId::kSqueeze, {avg}, {{"dim", std::vector<int64_t>{1}}}));
  if (xs.rank() == 3) {
    KILN_ASSIGN_OR_RETURN(back,
                          im.call(OpId::kSqueeze, {back}, {{"dim", std::vector<int64_t>{2}}}));
  } else if (xs.rank() > 3) {  // the spatial dims back from their product
    std::vector<int64_t> sizes;
    for (size_t d = 2; d < xs.rank(); ++d) {
      const Dim& s = xs.shape[d];
      if (!s.is_static() && std::count(sizes.begin(), sizes.end(), -1) > 0) {
        return unsupported("LRN over more than one symbolic spatial dim: {}", xs.to_string());
      }
      sizes.push_back(s.is_static() ? s.value() : -1);
    }
    KILN_ASSIGN_OR_RETURN(
        back, im.call(OpId::kUnflatten, {back}, {{"dim", int64_t{2}}, {"sizes", sizes}}));
  }
  KILN_ASSIGN_OR_RETURN(Node * scaled, im.call(OpId::kMul, {back, static_cast<double>(alpha)}));
  KILN_ASSIGN_OR_RETURN(Node * base, im.call(OpId::kAdd, {scaled, static_cast<double>(bias)}));
  KILN_ASSIGN_OR_RETURN(Node * denom, im.call(OpId::kPow, {base, -static_cast<double>(beta)}));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kMul, {x, denom}));
  im.set_output(0, y);
  return Status::Ok();
}

Result<Node*> reshape_dims(Importer& im, Node* x, const std::vector<Dim>& dims);

// 3-D pooling as two 2-D ones: the window is a box, so its max (or its mean, whose divisor is a
// product of per-dim counts with or without the padding) is the one over (H, W) of each depth
// slice, then the one over D. `kw` holds the attributes both share (ceil_mode,
// count_include_pad); the rest are ONNX's, three values each (pads six, or three when both ends
// are the same).
Status pool_3d(Importer& im, const TensorSpec& xs, OpId op, const Kwargs& kw,
               const std::vector<int64_t>& k, const std::vector<int64_t>& s,
               const std::vector<int64_t>& d, std::vector<int64_t> p) {
  if (p.size() == 3) p = {p[0], p[1], p[2], p[0], p[1], p[2]};  // compact: both ends the same
  const bool is_max = op == OpId::kMaxPool2d;
  auto pool = [&](Node* x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> dilation, std::vector<int64_t> pads) -> Result<Node*> {
    // A 1-wide window with stride 1 and no padding (MaxPool3d((1, 2, 2))'s pool over D) is
    // the identity.
    auto one = [](const std::vector<int64_t>& v) {
      return std::all_of(v.begin(), v.end(), [](int64_t i) { return i == 1; });
    };
    auto zero = [](const std::vector<int64_t>& v) {
      return std::all_of(v.begin(), v.end(), [](int64_t i) { return i == 0; });
    };
    if (one(kernel) && one(stride) && zero(pads)) return x;
    Kwargs all = kw;
    all.emplace_back("kernel_size", std::move(kernel));
    all.emplace_back("stride", std::move(stride));
    all.emplace_back("padding", compact_pads(pads));
    if (is_max) all.emplace_back("dilation", std::move(dilation));
    return im.call(op, {x}, all);
  };
  const Dim n = xs.shape[0], c = xs.shape[1], depth = xs.shape[2];
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(x, reshape_dims(im, x, {n, dim_mul(c, depth), xs.shape[3], xs.shape[4]}));
  KILN_ASSIGN_OR_RETURN(
      x, pool(x, {k[1], k[2]}, {s[1], s[2]}, {d[1], d[2]}, {p[1], p[2], p[4], p[5]}));
  const Dim h = x->spec().shape[2], w = x->spec().shape[3];
  KILN_ASSIGN_OR_RETURN(x, reshape_dims(im, x, {n, c, depth, dim_mul(h, w)}));
  KILN_ASSIGN_OR_RETURN(x, pool(x, {k[0], 1}, {s[0], 1}, {d[0], 1}, {p[0], 0, p[3], 0}));
  KILN_ASSIGN_OR_RETURN(x, reshape_dims(im, x, {n, c, x->spec().shape[2], h, w}));
  im.set_output(0, x);
  return Status::Ok();
}

// MaxPool / AveragePool in 2-D, in 1-D as 2-D over [N, C, 1, L], in 3-D as two 2-D ones.
Status convert_pool(Importer& im, bool is_max) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  const bool one_d = xs.rank() == 3;
  if (xs.rank() < 3 || xs.rank() > 5) {
    return unsupported(
        "only 1-D, 2-D and 3-D pooling (rank-3 to rank-5 input) is supported, "
        "got {}",
        xs.to_string());
  }
  if (is_max) KILN_RETURN_IF_ERROR(no_extra_outputs(im, "Indices"));
  const size_t n = xs.rank() - 2;
  KILN_ASSIGN_OR_RETURN(auto kernel, im.attr_ints("kernel_shape"));
  if (kernel.size() != n) return invalid_argument("attribute 'kernel_shape' must have {} values", n);
  KILN_RETURN_IF_ERROR(check_positive(kernel, "kernel_shape"));
  KILN_ASSIGN_OR_RETURN(auto strides, ints_or(im, "strides", ones(n), n));
  KILN_ASSIGN_OR_RETURN(auto dilations, ints_or(im, "dilations", ones(n), n));
  KILN_RETURN_IF_ERROR(check_positive(strides, "strides"));
  KILN_RETURN_IF_ERROR(check_positive(dilations, "dilations"));
  KILN_ASSIGN_OR_RETURN(int64_t ceil_mode, im.attr_int("ceil_mode", 0));
  KILN_ASSIGN_OR_RETURN(auto pads, resolve_pads(im, xs, kernel, strides, dilations));
  if (!is_max && dilations != ones(n)) {
    return unsupported("AveragePool with dilations is not supported");
  }
  if (n == 3) {
    Kwargs kw{{"ceil_mode", ceil_mode != 0}};
    if (is_max) {
      KILN_ASSIGN_OR_RETURN(int64_t order, im.attr_int("storage_order", 0));
      if (order != 0) return unsupported("storage_order=1 is not supported");
    } else {
      KILN_ASSIGN_OR_RETURN(int64_t include_pad, im.attr_int("count_include_pad", 0));
      kw.emplace_back("count_include_pad", include_pad != 0);
    }
    return pool_3d(im, xs, is_max ? OpId::kMaxPool2d : OpId::kAvgPool2d, kw, kernel, strides,
                   dilations, pads);
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (one_d) {  // a height of 1 with no window or padding along it
    const int64_t begin = pads[0], end = pads.size() == 2 ? pads[1] : pads[0];
    kernel.insert(kernel.begin(), 1);
    strides.insert(strides.begin(), 1);
    dilations.insert(dilations.begin(), 1);
    pads = compact_pads({0, begin, 0, end});
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kUnsqueeze, {x}, {{"dim", int64_t{2}}}));
  }
  KILN_ASSIGN_OR_RETURN(int64_t include_pad, im.attr_int("count_include_pad", 0));
  // Padding wider than half the (dilated) window, which the pool ops do not take, is written
  // out: -inf for max, zeros for average (divided by the pooled mask of real elements when the
  // padding does not count).
  Node* mask = nullptr;
  if (pads.size() == 2) pads = {pads[0], pads[1], pads[0], pads[1]};
  bool wide = false;
  for (size_t i = 0; i < 4; ++i) wide |= pads[i] > (dilations[i % 2] * (kernel[i % 2] - 1) + 1) / 2;
  if (wide) {
    const std::vector<int64_t> list{pads[1], pads[3], pads[0], pads[2]};  // W then H
    double fill = 0;  // max pools pad with the type's lowest value
    if (is_max && is_floating(xs.dtype)) {
      fill = -std::numeric_limits<double>::infinity();
    } else if (auto range = integer_range(xs.dtype); is_max && range) {
      fill = static_cast<double>(range->first);
    }
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kPad, {x}, {{"pad", list}, {"value", fill}}));
    if (!is_max && include_pad == 0) {
      KILN_ASSIGN_OR_RETURN(auto shape,
                            im.static_input_shape(0, "padding wider than half the window"));
      const int64_t h = one_d ? 1 : shape[2], w = shape.back();
      Tensor ones(xs.dtype, {1, 1, h + pads[0] + pads[2], w + pads[1] + pads[3]});
      for (int64_t r = 0; r < h; ++r) {
        for (int64_t c = 0; c < w; ++c)
          ones.set_scalar_at((r + pads[0]) * ones.dim(3) + c + pads[1], 1);
      }
      mask = im.constant_node(std::move(ones), "pool_mask");
    }
    pads = {0, 0, 0, 0};
  }
  Kwargs kw{{"kernel_size", kernel},
            {"stride", strides},
            {"padding", compact_pads(pads)},
            {"ceil_mode", ceil_mode != 0}};
  OpId op = OpId::kMaxPool2d;
  if (is_max) {
    KILN_ASSIGN_OR_RETURN(int64_t order, im.attr_int("storage_order", 0));
    if (order != 0) return unsupported("storage_order=1 is not supported");
    kw.emplace_back("dilation", dilations);
  } else {
    kw.emplace_back("count_include_pad", include_pad != 0);
    op = OpId::kAvgPool2d;
  }
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(op, {x}, kw));
  if (mask != nullptr) {
    KILN_ASSIGN_OR_RETURN(Node * share, im.call(op, {mask}, kw));
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kDiv, {y, share}));
  }
  if (one_d) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kSqueeze, {y}, {{"dim", std::vector<int64_t>{2}}}));
  }
  im.set_output(0, y);
  return Status::Ok();
}
Status convert_max_pool(Importer& im) { return convert_pool(im, true); }
Status convert_avg_pool(Importer& im) { return convert_pool(im, false); }

// Reshape with static entries and at most one symbolic entry (given as -1).
Result<Node*> reshape_dims(Importer& im, Node* x, const std::vector<Dim>& dims) {
  std::vector<int64_t> shape;
  bool inferred = false;
  for (Dim d : dims) {
    if (d.is_static()) {
      shape.push_back(d.value());
    } else if (!inferred) {
      shape.push_back(-1);
      inferred = true;
    } else {
      return unsupported("reshape to [{}] has more than one symbolic dim",
                         TensorSpec(DType::kF32, dims).to_string());
    }
  }
  return im.call(OpId::kReshape, {x}, {{"shape", shape}});
}

// Hardmax along `dim` of x (spec xs): 1 where argmax (the first maximum) is, 0 elsewhere.
Result<Node*> hardmax(Importer& im, Node* x, const TensorSpec& xs, int64_t dim) {
  const Dim& n = xs.shape[static_cast<size_t>(dim)];
  if (!n.is_static())
    return unsupported("hardmax along symbolic dim {} of {}", n.to_string(), xs.to_string());
  KILN_ASSIGN_OR_RETURN(Node * index,
                        im.call(OpId::kArgmax, {x}, {{"dim", dim}, {"keepdim", true}}));
  // Positions 0..n-1 along `dim`, broadcasting over the dims after it.
  std::vector<int64_t> shape(xs.rank() - static_cast<size_t>(dim), 1);
  shape[0] = n.value();
  Tensor positions(DType::kI64, shape);
  for (int64_t i = 0; i < n.value(); ++i) positions.mutable_data_as<int64_t>()[i] = i;
  Node* pos = im.constant_node(std::move(positions), "positions");
  KILN_ASSIGN_OR_RETURN(Node * hit, im.call(OpId::kEq, {index, pos}));
  return im.call(OpId::kCast, {hit}, {{"dtype", xs.dtype}});
}

// Softmax, LogSoftmax (op) and Hardmax (op kNone) along the node's axis.
Status convert_softmax(Importer& im, OpId op) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  int64_t r = static_cast<int64_t>(xs.rank());
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", im.opset() >= 13 ? -1 : 1));
  if (r == 0) return invalid_argument("input must have rank >= 1");
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, xs.rank(), "attribute 'axis'"));
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  auto along = [&](Node* in, const TensorSpec& spec, int64_t dim) -> Result<Node*> {
    if (op == OpId::kNone) return hardmax(im, in, spec, dim);
    return im.call(op, {in}, {{"dim", dim}});
  };
  if (im.opset() >= 13 || axis == r - 1) {
    KILN_ASSIGN_OR_RETURN(Node * y, along(x, xs, axis));
    im.set_output(0, y);
    return Status::Ok();
  }
  // Before opset 13 the input is flattened to [prod(d < axis), prod(d >= axis)] and normalized
  // over the second dim.
  Dim inner = 1;
  for (int64_t d = axis; d < r; ++d) inner = dim_mul(inner, xs.shape[static_cast<size_t>(d)]);
  if (!inner.is_static()) return unsupported("softmax over symbolic dims {} (opset < 13)", xs.to_string());
  KILN_ASSIGN_OR_RETURN(Node * flat, reshape_dims(im, x, {Dim::symbol("outer"), inner}));
  KILN_ASSIGN_OR_RETURN(Node * y, along(flat, flat->spec(), 1));
  KILN_ASSIGN_OR_RETURN(Node * back, reshape_dims(im, y, xs.shape));
  im.set_output(0, back);
  return Status::Ok();
}
Status convert_softmax(Importer& im) { return convert_softmax(im, OpId::kSoftmax); }
Status convert_hardmax(Importer& im) { return convert_softmax(im, OpId::kNone); }
Status convert_log_softmax(Importer& im) { return convert_softmax(im, OpId::kLogSoftmax); }

// Resize: the upsample ops where their arithmetic is ONNX's (4-D, batch and channels kept,
// nearest asymmetric floor; linear half_pixel / pytorch_half_pixel with every resized dim above
// 1, or align_corners with sizes given), which the delegates take; every other case, and scales
// or sizes the model computes, becomes the resize op over any rank.
Status convert_resize(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  const size_t rank = xs.rank();
  KILN_ASSIGN_OR_RETURN(std::string mode, im.attr_str("mode", "nearest"));
  KILN_ASSIGN_OR_RETURN(std::string coord, im.attr_str("coordinate_transformation_mode", "half_pixel"));
  KILN_ASSIGN_OR_RETURN(std::string nearest, im.attr_str("nearest_mode", "round_prefer_floor"));
  KILN_ASSIGN_OR_RETURN(float cubic_a, im.attr_float("cubic_coeff_a", -0.75f));
  KILN_ASSIGN_OR_RETURN(int64_t exclude, im.attr_int("exclude_outside", 0));
  KILN_ASSIGN_OR_RETURN(float extrapolation, im.attr_float("extrapolation_value", 0.0f));
  KILN_ASSIGN_OR_RETURN(int64_t antialias, im.attr_int("antialias", 0));
  KILN_ASSIGN_OR_RETURN(auto axes, im.attr_ints("axes"));
  KILN_ASSIGN_OR_RETURN(std::string policy, im.attr_str("keep_aspect_ratio_policy", "stretch"));
  if (antialias != 0) return unsupported("antialias=1 is not supported");
  if (policy != "stretch") return unsupported("keep_aspect_ratio_policy '{}' is not supported", policy);
  // Which dims the scales / sizes cover: all, or `axes` (opset 18).
  if (axes.empty()) {
    for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  }
  for (int64_t& a : axes) KILN_RETURN_IF_ERROR(normalize_axis(&a, rank, "attribute 'axes'"));
  const bool full = axes.size() == rank && std::is_sorted(axes.begin(), axes.end());
  auto given = [&](size_t i) -> Result<bool> {
    if (!im.has_input(i)) return false;
    KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(i));
    return s.numel() != std::optional<int64_t>(0);  // an empty tensor stands for "not given"
  };
  KILN_ASSIGN_OR_RETURN(bool use_sizes, given(3));
  KILN_ASSIGN_OR_RETURN(bool use_scales, given(2));
  use_scales = use_scales && !use_sizes;
  if (!use_sizes && !use_scales) return invalid_argument("needs input 'scales' or 'sizes'");
  const size_t pi = use_sizes ? 3 : 2;
  const std::string what = use_sizes ? "input 'sizes'" : "input 'scales'";
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  const bool crop = coord == "tf_crop_and_resize";
  // Values the model computes: the resize op reads them when it runs (all dims given).
  if (im.is_runtime_input(pi) || (crop && im.is_runtime_input(1))) {
    if (!full) return unsupported("attribute 'axes' with {} computed at run time", what);
    KILN_ASSIGN_OR_RETURN(Node * p, im.input(pi));
    Arg roi;
    if (crop) {
      KILN_ASSIGN_OR_RETURN(Node * r, im.input(1));
      roi = Arg(r);
    }
    KILN_ASSIGN_OR_RETURN(
        Node * y,
        im.call(OpId::kResize, {x, use_sizes ? Arg() : Arg(p), use_sizes ? Arg(p) : Arg(), roi},
                {{"mode", mode},
                 {"coordinate_transformation_mode", coord},
                 {"nearest_mode", nearest},
                 {"cubic_coeff_a", static_cast<double>(cubic_a)},
                 {"exclude_outside", exclude != 0},
                 {"extrapolation_value", static_cast<double>(extrapolation)}}));
    im.set_output(0, y);
    return Status::Ok();
  }
  // Known at import time: one scale and one size per dim.
  std::vector<double> scales(rank, 1.0);
  std::vector<int64_t> sizes(rank, -1);
  if (use_sizes) {
    KILN_ASSIGN_OR_RETURN(auto v, im.require_ints(3, what));
    if (v.size() != axes.size()) {
      return invalid_argument("{} has {} values, expected {}", what, v.size(), axes.size());
    }
    for (size_t k = 0; k < v.size(); ++k) {
      if (v[k] < 0) return invalid_argument("{}: got a negative size {}", what, v[k]);
      sizes[static_cast<size_t>(axes[k])] = v[k];
    }
  } else {
    KILN_ASSIGN_OR_RETURN(Tensor t, im.require_const(2, what));
    if (static_cast<size_t>(t.numel()) != axes.size()) {
      return invalid_argument("{} has {} values, expected {}", what, t.numel(), axes.size());
    }
    for (size_t k = 0; k < axes.size(); ++k) {
      // The scale as ONNX's reference uses it: the f32 value, widened.
      const double v = static_cast<float>(fold::get_f64(t, static_cast<int64_t>(k)));
      if (!(v > 0) || !std::isfinite(v))
        return invalid_argument("{}: scale {} is not positive", what, v);
      scales[static_cast<size_t>(axes[k])] = v;
    }
  }
  // Output dims (when the input's are static) and each dim's scale.
  std::optional<std::vector<int64_t>> out = std::vector<int64_t>(rank);
  for (size_t d = 0; d < rank; ++d) {
    const Dim& in = xs.shape[d];
    if (sizes[d] < 0 && scales[d] == 1.0 && !crop) {
      if (in.is_static())
        (*out)[d] = in.value();
      else
        out.reset();
      if (!out) break;
      continue;
    }
    if (!in.is_static()) {
      out.reset();
      break;
    }
    if (sizes[d] >= 0) {
      (*out)[d] = sizes[d];
      if (in.value() > 0)
        scales[d] = static_cast<double>(sizes[d]) / static_cast<double>(in.value());
    } else {
      const double o = std::floor(static_cast<double>(in.value()) * scales[d]);
      if (o > 9.0e15)
        return out_of_range("{}: scale {} of size {} is too large", what, scales[d], in.value());
      (*out)[d] = static_cast<int64_t>(o);
    }
  }
  // The upsample ops, where their arithmetic is ONNX's.
  const bool nc_kept = rank == 4 && out && (*out)[0] == xs.shape[0].value() &&
                       (*out)[1] == xs.shape[1].value() && scales[0] == 1.0 && scales[1] == 1.0;
  if (nc_kept && (*out)[2] > 0 && (*out)[3] > 0) {
    Arg output_size, scale_arg;
    if (use_sizes) {
      output_size = Arg(std::vector<int64_t>{(*out)[2], (*out)[3]});
    } else {
      scale_arg = Arg(std::vector<double>{scales[2], scales[3]});
    }
    const bool above_one = (*out)[2] > 1 && (*out)[3] > 1;
    if (mode == "nearest" && coord == "asymmetric" && nearest == "floor") {
      KILN_ASSIGN_OR_RETURN(Node * y,
                            im.call(OpId::kUpsampleNearest2d, {x},
                                    {{"output_size", output_size}, {"scales", scale_arg}}));
      im.set_output(0, y);
      return Status::Ok();
    }
    const bool half = (coord == "half_pixel" || coord == "pytorch_half_pixel") && above_one;
    const bool corners = coord == "align_corners" && use_sizes;
    if (mode == "linear" && (half || corners)) {
      KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kUpsampleBilinear2d, {x},
                                              {{"output_size", output_size},
                                               {"align_corners", corners},
                                               {"scales", scale_arg}}));
      im.set_output(0, y);
      return Status::Ok();
    }
  }
  // The resize op, with the scales (or sizes) and roi as constants.
  Node* params = nullptr;
  if (use_sizes) {
    Tensor t(DType::kI64, {static_cast<int64_t>(rank)});
    for (size_t d = 0; d < rank; ++d) {
      t.mutable_data_as<int64_t>()[d] = sizes[d] >= 0 ? sizes[d] : xs.shape[d].value();
    }
    if (!out) return unsupported("{} with symbolic dims {} left unresized", what, xs.to_string());
    params = im.constant_node(std::move(t), im.node().output(0) + "_sizes");
  } else {
    Tensor t(DType::kF32, {static_cast<int64_t>(rank)});
    for (size_t d = 0; d < rank; ++d) t.mutable_data_as<float>()[d] = static_cast<float>(scales[d]);
    params = im.constant_node(std::move(t), im.node().output(0) + "_scales");
  }
  Arg roi;
  if (crop) {
    KILN_ASSIGN_OR_RETURN(Tensor r, im.require_const(1, "input 'roi'"));
    if (static_cast<size_t>(r.numel()) != 2 * axes.size()) {
      return invalid_argument("input 'roi' has {} values, expected {}", r.numel(), 2 * axes.size());
    }
    Tensor full_roi(DType::kF32, {static_cast<int64_t>(2 * rank)});
    float* pr = full_roi.mutable_data_as<float>();
    for (size_t d = 0; d < rank; ++d) {
      pr[d] = 0;
      pr[rank + d] = 1;
    }
    for (size_t k = 0; k < axes.size(); ++k) {
      pr[axes[k]] = static_cast<float>(fold::get_f64(r, static_cast<int64_t>(k)));
      pr[rank + static_cast<size_t>(axes[k])] =
          static_cast<float>(fold::get_f64(r, static_cast<int64_t>(axes.size() + k)));
    }
    roi = Arg(im.constant_node(std::move(full_roi), im.node().output(0) + "_roi"));
  }
  Kwargs kw{{"mode", mode},
            {"coordinate_transformation_mode", coord},
            {"nearest_mode", nearest},
            {"cubic_coeff_a", static_cast<double>(cubic_a)},
            {"exclude_outside", exclude != 0},
            {"extrapolation_value", static_cast<double>(extrapolation)}};
  if (out) kw.emplace_back("output_size", *out);
  KILN_ASSIGN_OR_RETURN(
      Node * y,
      im.call(OpId::kResize,
              {x, use_sizes ? Arg() : Arg(params), use_sizes ? Arg(params) : Arg(), roi}, kw));
  im.set_output(0, y);
  return Status::Ok();
}

Result<std::vector<int64_t>> static_nchw(Importer& im, int64_t b) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  if (xs.rank() != 4) return invalid_argument("input must be 4-D, got {}", xs.to_string());
  if (b <= 0) return invalid_argument("attribute 'blocksize' must be positive, got {}", b);
  std::vector<int64_t> chw;
  for (size_t d = 1; d < 4; ++d) {
    if (!xs.shape[d].is_static()) return unsupported("input {} needs static C, H, W", xs.to_string());
    chw.push_back(xs.shape[d].value());
  }
  return chw;
}

Status convert_depth_to_space(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t b, im.attr_int("blocksize", 0));
  KILN_ASSIGN_OR_RETURN(std::string mode, im.attr_str("mode", "DCR"));
  KILN_ASSIGN_OR_RETURN(auto chw, static_nchw(im, b));
  if (b > (int64_t{1} << 20) || chw[0] % (b * b) != 0) {
    return invalid_argument("channels {} are not divisible by blocksize^2 ({})", chw[0], b);
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  Node* y = nullptr;
  if (mode == "CRD") {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kPixelShuffle, {x}, {{"upscale_factor", b}}));
  } else if (mode == "DCR") {
    int64_t c = chw[0] / (b * b), h = chw[1], w = chw[2];
    KILN_ASSIGN_OR_RETURN(Node * r1, im.call(OpId::kReshape, {x}, {{"shape", std::vector<int64_t>{-1, b, b, c, h, w}}}));
    KILN_ASSIGN_OR_RETURN(Node * p, im.call(OpId::kPermute, {r1}, {{"dims", std::vector<int64_t>{0, 3, 4, 1, 5, 2}}}));
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kReshape, {p}, {{"shape", std::vector<int64_t>{-1, c, h * b, w * b}}}));
  } else {
    return invalid_argument("attribute 'mode': got '{}', expected 'DCR' or 'CRD'", mode);
  }
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_space_to_depth(Importer& im) {
  KILN_ASSIGN_OR_RETURN(int64_t b, im.attr_int("blocksize", 0));
  KILN_ASSIGN_OR_RETURN(auto chw, static_nchw(im, b));
  int64_t c = chw[0], h = chw[1], w = chw[2];
  if (b > (int64_t{1} << 20) || h % b != 0 || w % b != 0) {
    return invalid_argument("spatial dims {}x{} are not divisible by blocksize {}", h, w, b);
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * r1, im.call(OpId::kReshape, {x}, {{"shape", std::vector<int64_t>{-1, c, h / b, b, w / b, b}}}));
  KILN_ASSIGN_OR_RETURN(Node * p, im.call(OpId::kPermute, {r1}, {{"dims", std::vector<int64_t>{0, 3, 5, 1, 2, 4}}}));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kReshape, {p}, {{"shape", std::vector<int64_t>{-1, c * b * b, h / b, w / b}}}));
  im.set_output(0, y);
  return Status::Ok();
}

// NegativeLogLikelihoodLoss of `x` ([N, C, d...] log-probabilities) against integer class
// indices (input 1, [N, d...]) with optional class weights (input 2, [C]), from gathers:
// loss = -x[n, t, d...] * w[t], 0 where t == ignore_index; reduced by sum, or by the sum of the
// weights that count (mean), or not (none). SoftmaxCrossEntropyLoss shares it.
Result<Node*> nll_loss(Importer& im, Node* x) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec ts, im.input_spec(1));
  KILN_ASSIGN_OR_RETURN(std::string reduction, im.attr_str("reduction", "mean"));
  if (reduction != "mean" && reduction != "sum" && reduction != "none") {
    return invalid_argument("attribute 'reduction': unknown value '{}'", reduction);
  }
  if (xs.rank() < 2 || ts.rank() != xs.rank() - 1 || !is_integral(ts.dtype)) {
    return invalid_argument("expected scores [N, C, d...] and integer labels [N, d...], got {} and {}",
                            xs.to_string(), ts.to_string());
  }
  KILN_ASSIGN_OR_RETURN(Node * t, im.input(1));
  Node* valid = nullptr;
  if (im.has_attr("ignore_index")) {
    KILN_ASSIGN_OR_RETURN(int64_t ignore, im.attr_int("ignore_index", 0));
    KILN_ASSIGN_OR_RETURN(valid, im.call(OpId::kNe, {t, Arg(ignore)}));
    KILN_ASSIGN_OR_RETURN(t, im.call(OpId::kWhere, {valid, t, Arg(int64_t{0})}));
  }
  KILN_ASSIGN_OR_RETURN(Node * index, im.call(OpId::kUnsqueeze, {t}, {{"dim", int64_t{1}}}));
  KILN_ASSIGN_OR_RETURN(Node * picked, im.call(OpId::kGather, {x, index}, {{"dim", int64_t{1}}}));
  KILN_ASSIGN_OR_RETURN(picked, im.call(OpId::kSqueeze, {picked}, {{"dim", std::vector<int64_t>{1}}}));
  KILN_ASSIGN_OR_RETURN(Node * loss, im.call(OpId::kNeg, {picked}));
  Node* w = nullptr;  // each element's weight, when there are weights
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(Node * weight, im.input(2));
    KILN_ASSIGN_OR_RETURN(Node * column, im.call(OpId::kUnsqueeze, {weight}, {{"dim", int64_t{1}}}));
    KILN_ASSIGN_OR_RETURN(w, im.call(OpId::kEmbedding, {column, t}));
    KILN_ASSIGN_OR_RETURN(w, im.call(OpId::kSqueeze, {w}, {{"dim", std::vector<int64_t>{-1}}}));
    KILN_ASSIGN_OR_RETURN(loss, im.call(OpId::kMul, {loss, w}));
  }
  if (valid != nullptr) {
    KILN_ASSIGN_OR_RETURN(loss, im.call(OpId::kWhere, {valid, loss, Arg(0.0)}));
    if (w != nullptr) {
      KILN_ASSIGN_OR_RETURN(w, im.call(OpId::kWhere, {valid, w, Arg(0.0)}));
    } else {
      KILN_ASSIGN_OR_RETURN(w, im.call(OpId::kCast, {valid}, {{"dtype", xs.dtype}}));
    }
  }
  if (reduction == "none") return loss;
  KILN_ASSIGN_OR_RETURN(Node * total, im.call(OpId::kSum, {loss}));
  if (reduction == "sum") return total;
  if (w == nullptr) return im.call(OpId::kMean, {loss});
  KILN_ASSIGN_OR_RETURN(Node * count, im.call(OpId::kSum, {w}));
  return im.call(OpId::kDiv, {total, count});
}

Status convert_nll_loss(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * loss, nll_loss(im, x));
  im.set_output(0, loss);
  return Status::Ok();
}

// SoftmaxCrossEntropyLoss: the NLL loss of log_softmax over the class dim; output 1, when asked
// for, is that log_softmax.
Status convert_softmax_cross_entropy_loss(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * log_prob, im.call(OpId::kLogSoftmax, {x}, {{"dim", int64_t{1}}}));
  KILN_ASSIGN_OR_RETURN(Node * loss, nll_loss(im, log_prob));
  im.set_output(0, loss);
  im.set_output(1, log_prob);
  return Status::Ok();
}

// LSTM, GRU and RNN as kiln's lstm / gru / rnn (ONNX's layout 0); layout 1 (batch first) is the
// same call between permutes. `states` is the number of state inputs / outputs (h, and LSTM's c).
Status convert_recurrent(Importer& im, OpId op, size_t states) {
  KILN_ASSIGN_OR_RETURN(int64_t layout, im.attr_int("layout", 0));
  if (layout != 0 && layout != 1) return invalid_argument("layout {} is not 0 or 1", layout);
  const bool batch_first = layout == 1;
  const std::vector<int64_t> swap01{1, 0, 2};
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (batch_first) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kPermute, {x}, {{"dims", swap01}}));
  }
  // X W R B sequence_lens initial_h, then LSTM's initial_c and P.
  std::vector<Arg> args{x};
  const size_t count = op == OpId::kLstm ? 8 : 6;
  for (size_t i = 1; i < count; ++i) {
    if (!im.has_input(i)) {
      args.emplace_back();
      continue;
    }
    const bool weight = i <= 3 || i == 7;
    KILN_ASSIGN_OR_RETURN(Node * n, im.input(i, weight ? Role::kWeight : Role::kActivation));
    if (batch_first && (i == 5 || i == 6)) {  // initial states [batch, dirs, hidden]
      KILN_ASSIGN_OR_RETURN(n, im.call(OpId::kPermute, {n}, {{"dims", swap01}}));
    }
    args.emplace_back(n);
  }
  // hidden_size may be left out: R is [dirs, gates*hidden, hidden].
  KILN_ASSIGN_OR_RETURN(TensorSpec rs, im.input_spec(2));
  int64_t hidden_dflt = rs.rank() == 3 && rs.shape[2].is_static() ? rs.shape[2].value() : -1;
  KILN_ASSIGN_OR_RETURN(int64_t hidden, im.attr_int("hidden_size", hidden_dflt));
  KILN_ASSIGN_OR_RETURN(std::string direction, im.attr_str("direction", "forward"));
  Kwargs kw{{"hidden_size", hidden}, {"direction", direction}};
  if (const onnx::AttributeProto* a = im.attr("activations")) {
    std::string names;
    for (const std::string& name : a->strings()) {
      if (!names.empty()) names += ',';
      for (char ch : name) names += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    kw.emplace_back("activations", names);
  }
  for (std::string_view name : {"activation_alpha", "activation_beta"}) {
    KILN_ASSIGN_OR_RETURN(auto values, im.attr_floats(name));
    if (!values.empty()) kw.emplace_back(name, std::vector<double>(values.begin(), values.end()));
  }
  if (im.has_attr("clip")) {
    KILN_ASSIGN_OR_RETURN(float clip, im.attr_float("clip", 0));
    kw.emplace_back("clip", clip);
  }
  if (op == OpId::kLstm) {
    KILN_ASSIGN_OR_RETURN(int64_t input_forget, im.attr_int("input_forget", 0));
    kw.emplace_back("input_forget", input_forget != 0);
  }
  if (op == OpId::kGru) {
    KILN_ASSIGN_OR_RETURN(int64_t lbr, im.attr_int("linear_before_reset", 0));
    kw.emplace_back("linear_before_reset", lbr != 0);
  }
  KILN_ASSIGN_OR_RETURN(Node * rec, im.call(op, std::move(args), kw));
  for (size_t i = 0; i < std::min(im.num_outputs(), 1 + states); ++i) {
    if (!im.output_used(i)) continue;
    KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kGetitem, {rec, static_cast<int64_t>(i)}));
    if (batch_first) {  // Y [batch, seq, dirs, hidden]; states [batch, dirs, hidden]
      std::vector<int64_t> dims = i == 0 ? std::vector<int64_t>{2, 0, 1, 3} : swap01;
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kPermute, {y}, {{"dims", dims}}));
    }
    im.set_output(i, y);
  }
  return Status::Ok();
}
Status convert_lstm(Importer& im) { return convert_recurrent(im, OpId::kLstm, 2); }
Status convert_gru(Importer& im) { return convert_recurrent(im, OpId::kGru, 1); }
Status convert_rnn(Importer& im) { return convert_recurrent(im, OpId::kRnn, 1); }

Status convert_grid_sample(Importer& im) {
  KILN_ASSIGN_OR_RETURN(std::string mode, im.attr_str("mode", "bilinear"));
  KILN_ASSIGN_OR_RETURN(std::string padding, im.attr_str("padding_mode", "zeros"));
  KILN_ASSIGN_OR_RETURN(int64_t align, im.attr_int("align_corners", 0));
  // Opset 20 renamed the modes after their N-D forms.
  if (mode == "linear") mode = "bilinear";
  if (mode == "cubic") mode = "bicubic";
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  if (xs.rank() != 4) return unsupported("only 2-D GridSample is supported (X {})", xs.to_string());
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * grid, im.input(1));
  KILN_ASSIGN_OR_RETURN(
      Node * y,
      im.call(OpId::kGridSample, {x, grid},
              {{"mode", mode}, {"padding_mode", padding}, {"align_corners", align != 0}}));
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_det(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kDet, {x}));
  im.set_output(0, y);
  return Status::Ok();
}

// MaxUnpool: X's values written at their MaxPool indices (flat over the whole tensor) into
// zeros of the default shape, (in - 1) * stride - pads + kernel per spatial dim; an output_shape
// (a constant, or computed when the model runs) pads that with zeros at the end of each dim.
Status convert_max_unpool(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(auto in, im.static_input_shape(0, "the output shape is computed from it"));
  if (in.size() < 3)
    return invalid_argument("input 'X': got {}, expected [N, C, spatial...]", xs.to_string());
  const size_t n = in.size() - 2;
  KILN_ASSIGN_OR_RETURN(auto kernel, ints_or(im, "kernel_shape", {}, n));
  KILN_ASSIGN_OR_RETURN(auto strides, ints_or(im, "strides", ones(n), n));
  KILN_ASSIGN_OR_RETURN(auto pads, ints_or(im, "pads", std::vector<int64_t>(2 * n, 0), 2 * n));
  KILN_RETURN_IF_ERROR(check_positive(kernel, "kernel_shape"));
  KILN_RETURN_IF_ERROR(check_positive(strides, "strides"));
  std::vector<int64_t> shape{in[0], in[1]};
  int64_t total = in[0] * in[1];
  for (size_t d = 0; d < n; ++d) {
    const int64_t v = (in[d + 2] - 1) * strides[d] - pads[d] - pads[d + n] + kernel[d];
    if (v < 1 || v > (int64_t{1} << 40) / std::max<int64_t>(total, 1)) {
      return invalid_argument("the unpooled size of dim {} ({}) is not a valid size", d + 2, v);
    }
    shape.push_back(v);
    total *= v;
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * index, im.input(1));
  KILN_ASSIGN_OR_RETURN(Node * values, im.call(OpId::kFlatten, {x}));
  KILN_ASSIGN_OR_RETURN(index, im.call(OpId::kFlatten, {index}));
  KILN_ASSIGN_OR_RETURN(
      Node * zeros,
      im.call(OpId::kFull, {},
              {{"size", std::vector<int64_t>{total}}, {"fill_value", 0.0}, {"dtype", xs.dtype}}));
  KILN_ASSIGN_OR_RETURN(Node * y,
                        im.call(OpId::kScatter, {zeros, index, values}, {{"dim", int64_t{0}}}));
  KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kReshape, {y}, {{"shape", shape}}));
  if (im.has_input(2) && im.is_runtime_input(2)) {  // pads at the end: output_shape - shape
    KILN_ASSIGN_OR_RETURN(Node * out, im.input(2));
    Tensor base(DType::kI64, {static_cast<int64_t>(shape.size())});
    for (size_t d = 0; d < shape.size(); ++d) base.mutable_data_as<int64_t>()[d] = shape[d];
    KILN_ASSIGN_OR_RETURN(
        Node * ends,
        im.call(OpId::kSub, {out, im.constant_node(std::move(base), "unpooled_shape")}));
    Node* begins =
        im.constant_node(Tensor(DType::kI64, {static_cast<int64_t>(shape.size())}), "no_pads");
    KILN_ASSIGN_OR_RETURN(Node * all, im.call(OpId::kCat, {std::vector<Node*>{begins, ends}}));
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kDynamicPad, {y, all}));
  } else if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(auto out, im.require_ints(2, "input 'output_shape'"));
    if (out.size() != shape.size()) {
      return invalid_argument("input 'output_shape' [{}] does not have X's rank ({})",
                              fmt::join(out, ", "), xs.to_string());
    }
    std::vector<int64_t> list;  // torch order: the last dim first
    bool any = false;
    for (size_t d = shape.size(); d-- > 0;) {
      if (out[d] < shape[d] || out[d] > (int64_t{1} << 31)) {
        return invalid_argument("input 'output_shape' [{}] is smaller than the unpooled [{}]",
                                fmt::join(out, ", "), fmt::join(shape, ", "));
      }
      list.push_back(0);
      list.push_back(out[d] - shape[d]);
      any |= out[d] != shape[d];
    }
    if (any) {
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kPad, {y}, {{"pad", list}}));
    }
  }
  im.set_output(0, y);
  return Status::Ok();
}

constexpr OpEntry kNnOps[] = {
    {"Conv", convert_conv},
    {"NegativeLogLikelihoodLoss", convert_nll_loss},
    {"SoftmaxCrossEntropyLoss", convert_softmax_cross_entropy_loss},
    {"ConvTranspose", convert_conv_transpose},
    {"Gemm", convert_gemm},
    {"MatMul", convert_matmul},
    {"Einsum", convert_einsum},
    {"BatchNormalization", convert_batch_norm},
    {"LayerNormalization", convert_layer_norm},
    {"InstanceNormalization", convert_instance_norm},
    {"GlobalAveragePool", convert_global_avg_pool},
    {"GlobalMaxPool", convert_global_max_pool},
    {"MeanVarianceNormalization", convert_mean_variance_normalization},
    {"LRN", convert_lrn},
    {"AveragePool", convert_avg_pool},
    {"MaxPool", convert_max_pool},
    {"Softmax", convert_softmax},
    {"LogSoftmax", convert_log_softmax},
    {"Hardmax", convert_hardmax},
    {"Resize", convert_resize},
    {"GridSample", convert_grid_sample},
    {"Det", convert_det},
    {"MaxUnpool", convert_max_unpool},
    {"DepthToSpace", convert_depth_to_space},
    {"SpaceToDepth", convert_space_to_depth},
    {"LSTM", convert_lstm},
    {"GRU", convert_gru},
    {"RNN", convert_rnn},
};

}  // namespace

std::span<const OpEntry> nn_ops() { return kNnOps; }

}  // namespace kiln::onnx_import
