// The xnnpack backend's compile half: operator support and preprocess (submodule -> XNNPACK graph
// blob). Inside a delegate every rank-4 tensor is NHWC and every other tensor keeps its layout,
// so a value's layout follows from its rank alone; the support check only takes nodes for which
// that holds (a reshape that would reorder NHWC memory stays on the CPU).
#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "kiln/backends/xnnpack/xnnpack_backend.h"
#include "kiln/lower/delegate_mapping.h"
#include "xnnpack_graph_generated.h"

namespace kiln::xnnpack {
namespace {

constexpr uint32_t kAbsent = 0xFFFFFFFFu;

const Tensor* constant_of(const ExportedProgram& ep, const Node* v) {
  if (v == nullptr || v->op() != OpKind::kPlaceholder) return nullptr;
  const InputSpec* s = ep.input_spec(v);
  if (s == nullptr || s->kind == InputKind::kUserInput) return nullptr;
  return ep.constants().find(s->target);
}

std::vector<int64_t> static_shape(const Node& v) { return v.spec().static_shape().value_or(std::vector<int64_t>{}); }

// Whether `v` is known when compiling: a constant, a dequantize of constants (quantized weights
// and biases), or a 2-D transpose of one (a Gemm's weight).
bool foldable(const ExportedProgram& ep, const Node* v) {
  if (v == nullptr) return false;
  if (constant_of(ep, v) != nullptr) return true;
  if (v->is_call(OpId::kDequantizePerTensor)) return constant_of(ep, v->input(0)) != nullptr;
  if (v->is_call(OpId::kDequantizePerChannel)) {
    return constant_of(ep, v->input(0)) && constant_of(ep, v->input(1)) && constant_of(ep, v->input(2));
  }
  if (v->is_call(OpId::kPermute)) {
    return v->kwarg("dims").to_ints() == std::vector<int64_t>{1, 0} && foldable(ep, v->input(0));
  }
  return false;
}

// The value of a foldable `v` (see foldable): the constant itself, or the f32 tensor its
// dequantize or transpose computes.
std::optional<Tensor> fold(const ExportedProgram& ep, const Node* v) {
  if (const Tensor* c = constant_of(ep, v)) return *c;
  if (!foldable(ep, v)) return std::nullopt;
  if (v->is_call(OpId::kPermute)) {
    std::optional<Tensor> x = fold(ep, v->input(0));
    if (!x || x->rank() != 2 || x->dtype() != DType::kF32) return std::nullopt;
    const int64_t r = x->dim(0), c = x->dim(1);
    Tensor t(DType::kF32, {c, r});
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) t.mutable_data_as<float>()[j * r + i] = x->data_as<float>()[i * c + j];
    return t;
  }
  const Tensor& codes = *constant_of(ep, v->input(0));
  Tensor t(DType::kF32, codes.shape());
  float* out = t.mutable_data_as<float>();
  if (v->is_call(OpId::kDequantizePerTensor)) {
    const double scale = v->kwarg_float("scale"), zp = double(v->kwarg_int("zero_point"));
    for (int64_t i = 0; i < codes.numel(); ++i) out[i] = static_cast<float>((codes.scalar_at(i) - zp) * scale);
    return t;
  }
  const Tensor& scales = *constant_of(ep, v->input(1));
  const Tensor& zps = *constant_of(ep, v->input(2));
  int64_t axis = v->kwarg_int("axis");
  axis = axis < 0 ? axis + codes.rank() : axis;
  if (axis < 0 || axis >= codes.rank() || scales.numel() != codes.dim(axis) || zps.numel() != codes.dim(axis)) return std::nullopt;
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < codes.rank(); ++d) inner *= codes.dim(d);
  for (int64_t i = 0; i < codes.numel(); ++i) {
    const int64_t c = i / inner % codes.dim(axis);
    out[i] = static_cast<float>((codes.scalar_at(i) - zps.scalar_at(c)) * scales.scalar_at(c));
  }
  return t;
}

// ---- quantized activations ---------------------------------------------------------------------

// Per-tensor codes XNNPACK holds as qint8: int8, or uint8 shifted by 128, over the full range.
struct ActQuant {
  float scale = 1;
  int zero_point = 0;  // the model's
  bool uint8 = false;
  int xnn_zero_point() const { return zero_point - (uint8 ? 128 : 0); }
  bool operator==(const ActQuant& o) const { return scale == o.scale && zero_point == o.zero_point && uint8 == o.uint8; }
};

// The codes of a quantize_per_tensor or dequantize_per_tensor node, when XNNPACK can hold them.
std::optional<ActQuant> act_quant(const Node& n) {
  if (!n.is_call(OpId::kQuantizePerTensor) && !n.is_call(OpId::kDequantizePerTensor)) return std::nullopt;
  const DType t = n.kwarg("dtype").to_dtype();
  if (t != DType::kU8 && t != DType::kI8) return std::nullopt;
  const bool u8 = t == DType::kU8;
  const int64_t lo = u8 ? 0 : -128, hi = u8 ? 255 : 127, zp = n.kwarg_int("zero_point");
  const double scale = n.kwarg_float("scale");
  if (n.kwarg_int("quant_min") != lo || n.kwarg_int("quant_max") != hi || zp < lo || zp > hi) return std::nullopt;
  if (!(scale >= 1e-30 && scale <= 1e30)) return std::nullopt;
  if (n.is_call(OpId::kDequantizePerTensor) && n.kwarg("out_dtype").to_dtype() != DType::kF32) return std::nullopt;
  return ActQuant{static_cast<float>(scale), static_cast<int>(zp), u8};
}

// The fused activation's output range (relu, relu6, clamp, hardtanh), or nullopt for others.
std::optional<std::pair<float, float>> activation_range(const Node& n) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  auto bound = [&](const char* name, float dflt) {
    const Arg& a = n.kwarg(name);
    return a.is_none() ? dflt : static_cast<float>(a.to_float());
  };
  if (n.is_call(OpId::kRelu)) return std::make_pair(0.0f, inf);
  if (n.is_call(OpId::kRelu6)) return std::make_pair(0.0f, 6.0f);
  if (n.is_call(OpId::kClamp)) return std::make_pair(bound("min", -inf), bound("max", inf));
  return std::nullopt;
}

// The quantize node `op`'s result goes to, through at most one activation XNNPACK fuses (each
// the only user of what it reads); null when there is none. `act` gets the activation.
const Node* quant_sink(const Node& op, const Node** act) {
  *act = nullptr;
  if (op.num_users() != 1) return nullptr;
  const Node* u = op.users()[0];
  if (activation_range(*u) && u->input(0) == &op) {
    if (u->num_users() != 1) return nullptr;
    *act = u;
    u = u->users()[0];
  }
  return u->is_call(OpId::kQuantizePerTensor) && act_quant(*u) ? u : nullptr;
}

// Whether NCHW and NHWC hold a rank-4 shape's elements in the same order (one of C, H*W is 1),
// or the shape is not rank 4: a reshape between such shapes keeps the delegate's layout.
bool layout_neutral(const std::vector<int64_t>& s) { return s.size() != 4 || s[1] == 1 || s[2] * s[3] == 1; }

// A per-spatial-dim list (one value, or {h, w}); empty gives `dflt`.
std::optional<std::pair<int64_t, int64_t>> hw(const std::vector<int64_t>& v, int64_t dflt) {
  if (v.empty()) return std::make_pair(dflt, dflt);
  if (v.size() == 1) return std::make_pair(v[0], v[0]);
  if (v.size() == 2) return std::make_pair(v[0], v[1]);
  return std::nullopt;
}

struct Window {
  int64_t pt = 0, pr = 0, pb = 0, pl = 0;  // XNNPACK's order: top, right, bottom, left
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
};

// kiln's padding: one value, one per spatial dim, or {top, left, bottom, right}.
bool read_padding(const std::vector<int64_t>& p, Window* w) {
  if (p.empty() || p.size() == 1 || p.size() == 2) {
    auto v = hw(p, 0);
    w->pt = w->pb = v->first;
    w->pl = w->pr = v->second;
  } else if (p.size() == 4) {
    w->pt = p[0], w->pl = p[1], w->pb = p[2], w->pr = p[3];
  } else {
    return false;
  }
  return w->pt >= 0 && w->pl >= 0 && w->pb >= 0 && w->pr >= 0;
}

int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, bool ceil_mode) {
  int64_t span = in + p0 + p1 - d * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // PyTorch: the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * s >= in + p0) --out;
  return out;
}

// Pooling window of a max_pool2d / avg_pool2d node; nullopt with `why` if XNNPACK cannot run it.
std::optional<Window> pool_window(const Node& n, std::string* why) {
  Window w;
  auto k = hw(n.kwarg("kernel_size").to_ints(), 1);
  if (!k || n.kwarg("kernel_size").to_ints().empty()) return *why = "its kernel_size is not 1 or 2 values", std::nullopt;
  w.kh = k->first, w.kw = k->second;
  auto s = hw(n.kwarg("stride").to_ints(), 0);
  if (!s) return *why = "its stride is not 1 or 2 values", std::nullopt;
  w.sh = s->first ? s->first : w.kh, w.sw = s->second ? s->second : w.kw;
  if (n.is_call(OpId::kMaxPool2d)) {
    auto d = hw(n.kwarg("dilation").to_ints(), 1);
    if (!d) return *why = "its dilation is not 1 or 2 values", std::nullopt;
    w.dh = d->first, w.dw = d->second;
  }
  if (!read_padding(n.kwarg("padding").to_ints(), &w)) return *why = "its padding is not 1, 2 or 4 non-negative values", std::nullopt;
  if (w.kh < 1 || w.kw < 1 || w.sh < 1 || w.sw < 1 || w.dh < 1 || w.dw < 1) return *why = "a window size below 1", std::nullopt;
  if (w.kh * w.kw == 1) return *why = "XNNPACK pools windows of more than one element", std::nullopt;
  if (n.kwarg_bool("ceil_mode")) {
    // Floor and ceil agree on this input: run it as floor.
    auto in = static_shape(*n.input(0));
    bool same = window_out(in[2], w.kh, w.sh, w.dh, w.pt, w.pb, true) == window_out(in[2], w.kh, w.sh, w.dh, w.pt, w.pb, false) &&
                window_out(in[3], w.kw, w.sw, w.dw, w.pl, w.pr, true) == window_out(in[3], w.kw, w.sw, w.dw, w.pl, w.pr, false);
    if (!same) return *why = "ceil_mode changes its output size (XNNPACK rounds down)", std::nullopt;
  }
  if (n.is_call(OpId::kAvgPool2d) && (w.pt || w.pl || w.pb || w.pr)) {
    return *why = "average pooling with padding (XNNPACK excludes the padding from the count)", std::nullopt;
  }
  return w;
}

std::optional<Window> conv_window(const Node& n, std::string* why) {
  Window w;
  auto s = hw(n.kwarg("stride").to_ints(), 1);
  auto d = hw(n.kwarg("dilation").to_ints(), 1);
  if (!s || !d) return *why = "its stride or dilation is not 1 or 2 values", std::nullopt;
  w.sh = s->first, w.sw = s->second, w.dh = d->first, w.dw = d->second;
  if (!read_padding(n.kwarg("padding").to_ints(), &w)) return *why = "its padding is not 1, 2 or 4 non-negative values", std::nullopt;
  if (w.sh < 1 || w.sw < 1 || w.dh < 1 || w.dw < 1) return *why = "a stride or dilation below 1", std::nullopt;
  auto ws = static_shape(*n.input(1));
  w.kh = ws[2], w.kw = ws[3];
  return w;
}

// A 2-D convolution in XNNPACK's terms: its kind (depthwise or not), integer parameters, and
// filter in XNNPACK's layout ([1, kh, kw, O] for depthwise, else [O, kh, kw, I/g]) made from
// the model's [O, I/g, kh, kw] elements (floats, or int8 codes).
template <typename T>
struct XnnConv {
  fb::NodeKind kind = fb::NodeKind::Convolution2d;
  std::vector<int64_t> ints;
  std::vector<uint64_t> filter_dims;
  std::vector<T> filter;
  uint32_t channel_dim = 0;  // the filter's output-channel dim
};

template <typename T>
XnnConv<T> xnn_conv(const Node& n, const T* weight, int64_t o, int64_t ipg) {
  std::string why;
  const Window w = *conv_window(n, &why);
  const int64_t groups = n.kwarg_int("groups"), cin = static_shape(*n.input(0))[1], k = w.kh * w.kw;
  XnnConv<T> c;
  c.ints = {w.pt, w.pr, w.pb, w.pl, w.kh, w.kw, w.sh, w.sw, w.dh, w.dw};
  c.filter.resize(static_cast<size_t>(o * ipg * k));
  if (groups == cin && ipg == 1 && groups > 1) {
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t i = 0; i < k; ++i) c.filter[size_t(i * o + oc)] = weight[oc * k + i];
    c.kind = fb::NodeKind::DepthwiseConvolution2d;
    c.filter_dims = {1, uint64_t(w.kh), uint64_t(w.kw), uint64_t(o)};
    c.channel_dim = 3;
    c.ints.push_back(o / cin);  // depth multiplier
    c.ints.push_back(cin);
  } else {
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t ic = 0; ic < ipg; ++ic)
        for (int64_t i = 0; i < k; ++i) c.filter[size_t((oc * k + i) * ipg + ic)] = weight[(oc * ipg + ic) * k + i];
    c.filter_dims = {uint64_t(o), uint64_t(w.kh), uint64_t(w.kw), uint64_t(ipg)};
    c.ints.push_back(groups);
    c.ints.push_back(ipg);
    c.ints.push_back(o / groups);
  }
  return c;
}

bool is_mean_over_hw(const Node& n) {
  if (!n.is_call(OpId::kMean) || n.kwarg("dim").is_none()) return false;
  std::vector<int64_t> dims = n.kwarg("dim").to_ints();
  for (int64_t& d : dims) d = d < 0 ? d + 4 : d;
  std::sort(dims.begin(), dims.end());
  return dims == std::vector<int64_t>{2, 3};
}

bool is_unary(const Node& n) {
  switch (n.target()) {
    case OpId::kRelu: case OpId::kRelu6: case OpId::kClamp: case OpId::kSigmoid: case OpId::kHardswish:
    case OpId::kHardsigmoid: case OpId::kLeakyRelu: case OpId::kAbs: case OpId::kNeg: case OpId::kSqrt:
      return true;
    default:
      return false;
  }
}

SupportResult no(std::string why) { return SupportResult::no(std::move(why)); }

SupportResult check_node(const ExportedProgram& ep, const Node& n) {
  if (n.is_call(OpId::kCallDelegate) || n.is_call(OpId::kGetitem)) return no(fmt::format("op '{}' is not an XNNPACK op", n.target_name()));
  if (n.fused_activation() != "none") {
    return no(fmt::format("it ends in the fused activation '{}' (fuse_activations runs after partitioning)",
                          n.fused_activation()));
  }
  // Quantized graphs: weights are dequantized when compiling; activations stay int8 codes.
  if (n.is_call(OpId::kDequantizePerTensor) || n.is_call(OpId::kDequantizePerChannel) || n.is_call(OpId::kPermute)) {
    if (foldable(ep, &n)) return SupportResult::yes();
    if (n.is_call(OpId::kPermute)) return no("a permute of other than a constant matrix (XNNPACK here has no transpose)");
    if (!n.is_call(OpId::kDequantizePerTensor) || !act_quant(n)) {
      return no("a dequantize of other than int8 or uint8 codes over their full range, per tensor");
    }
    const Node* codes = n.input(0);
    if (codes->is_call(OpId::kQuantizePerTensor) && !(act_quant(*codes) == act_quant(n))) {
      return no(fmt::format("it reads the codes of '{}' with another scale or zero point", codes->name()));
    }
  } else if (n.is_call(OpId::kQuantizePerTensor) && !act_quant(n)) {
    return no("a quantize to other than int8 or uint8 codes over their full range");
  }
  const bool quant = n.is_call(OpId::kQuantizePerTensor) || n.is_call(OpId::kDequantizePerTensor);
  // Static fp32 tensors in and out.
  auto check_value = [quant](const Node& v, const char* what) -> std::string {
    if (!v.has_spec()) return fmt::format("{} '{}' has no known shape", what, v.name());
    if (v.meta.val.size() != 1) return fmt::format("{} '{}' is a tuple", what, v.name());
    if (!v.spec().is_static()) {
      return fmt::format("{} '{}' has the symbolic shape {} (XNNPACK graphs are static: bind it with --dim)", what,
                         v.name(), v.spec().to_string());
    }
    if (v.spec().dtype != DType::kF32 && !quant) return fmt::format("{} '{}' is {}, not f32", what, v.name(), dtype_name(v.spec().dtype));
    if (v.spec().rank() == 0 || v.spec().rank() > 6) return fmt::format("{} '{}' has rank {} (XNNPACK takes 1 to 6)", what, v.name(), v.spec().rank());
    return {};
  };
  for (const Use& u : n.operands()) {
    if (auto why = check_value(*u.value, "input"); !why.empty()) return no(why);
  }
  if (auto why = check_value(n, "output"); !why.empty()) return no(why);
  const std::vector<int64_t> out = static_shape(n);
  const size_t rank = out.size();
  std::string why;
  if (quant) return SupportResult::yes();
  switch (n.target()) {
    case OpId::kConvolution: {
      if (rank != 4) return no("only 2-D convolutions run on XNNPACK");
      if (!foldable(ep, n.input(1))) return no("its weight is not a constant");
      if (!n.arg(2).is_none() && !foldable(ep, n.arg(2).node())) return no("its bias is not a constant");
      if (!conv_window(n, &why)) return no(why);
      return SupportResult::yes();
    }
    case OpId::kConvTranspose2d: {
      if (!foldable(ep, n.input(1))) return no("its weight is not a constant");
      if (!n.arg(2).is_none() && !foldable(ep, n.arg(2).node())) return no("its bias is not a constant");
      auto w = conv_window(n, &why);
      if (!w) return no(why);
      auto adj = hw(n.kwarg("output_padding").to_ints(), 0);
      if (!adj || adj->first < 0 || adj->second < 0) return no("its output_padding is not 1 or 2 non-negative values");
      if (adj->first >= w->sh || adj->second >= w->sw) return no("an output_padding not below the stride (XNNPACK's adjustment)");
      return SupportResult::yes();
    }
    case OpId::kBatchNorm: {
      for (size_t i = 1; i < 5; ++i) {
        if (!n.arg(i).is_none() && !foldable(ep, n.arg(i).node())) return no("its statistics or affine parameters are not constants");
      }
      if (rank < 2) return no("batch norm of a tensor of rank below 2");
      return SupportResult::yes();
    }
    case OpId::kLinear:
      if (rank == 4) return no("a fully-connected layer on a rank-4 input (NHWC inside the delegate)");
      if (!foldable(ep, n.input(1))) return no("its weight is not a constant");
      if (!n.arg(2).is_none() && !foldable(ep, n.arg(2).node())) return no("its bias is not a constant");
      return SupportResult::yes();
    case OpId::kAddmm: {
      if (n.kwarg_float("beta") != 1 || n.kwarg_float("alpha") != 1) return no("addmm with beta or alpha other than 1");
      const Node* bias = n.arg(0).node();
      if (!foldable(ep, n.arg(2).node()) || !foldable(ep, bias)) return no("its weight or bias is not a constant");
      auto bs = static_shape(*bias);
      if (std::accumulate(bs.begin(), bs.end(), int64_t{1}, std::multiplies<>()) != out[1]) return no("its bias is not one value per output column");
      return SupportResult::yes();
    }
    case OpId::kMatmul:
    case OpId::kMm: {
      const Node* b = n.arg(1).node();
      if (!foldable(ep, b) || static_shape(*b).size() != 2) return no("its second operand is not a 2-D constant (XNNPACK has no batched matmul)");
      size_t ra = static_shape(*n.arg(0).node()).size();
      if (ra < 2 || ra > 3) return no("a matmul whose first operand is not 2-D or 3-D");
      return SupportResult::yes();
    }
    case OpId::kMaxPool2d:
    case OpId::kAvgPool2d:
      if (rank != 4) return no("only 2-D pooling runs on XNNPACK");
      if (!pool_window(n, &why)) return no(why);
      return SupportResult::yes();
    case OpId::kAdaptiveAvgPool2d:
      if (rank != 4 || out[2] != 1 || out[3] != 1) return no("adaptive pooling to other than 1x1");
      return SupportResult::yes();
    case OpId::kMean:
      if (static_shape(*n.input(0)).size() != 4 || !is_mean_over_hw(n)) return no("a mean other than over H and W of a rank-4 tensor");
      return SupportResult::yes();
    case OpId::kSoftmax: {
      int64_t dim = n.kwarg_int("dim");
      dim = dim < 0 ? dim + static_cast<int64_t>(rank) : dim;
      if (rank == 4 ? dim != 1 : dim != static_cast<int64_t>(rank) - 1) {
        return no(rank == 4 ? "softmax over other than channels of a rank-4 tensor" : "softmax over other than the last dim");
      }
      return SupportResult::yes();
    }
    case OpId::kPrelu: {
      std::optional<Tensor> slope = fold(ep, n.input(1));
      if (!slope) return no("its slope is not a constant");
      if (rank != 2 && rank != 4) return no("prelu on other than rank 2 or 4 (XNNPACK's slope runs along the channels)");
      if (slope->numel() != 1 && slope->numel() != out[1]) return no("its slope is not one value per channel");
      return SupportResult::yes();
    }
    case OpId::kAdd:
    case OpId::kSub:
    case OpId::kMul:
    case OpId::kDiv:
      if ((n.is_call(OpId::kAdd) || n.is_call(OpId::kSub)) && n.kwarg_float("alpha") != 1) return no("alpha other than 1");
      if (n.is_call(OpId::kDiv) && !n.kwarg("rounding_mode").is_none()) return no("div with a rounding mode");
      if (rank == 4) {
        for (size_t i = 0; i < 2; ++i) {
          const Node* v = n.arg(i).is_node() ? n.arg(i).node() : nullptr;
          if (v == nullptr || foldable(ep, v)) continue;
          auto s = static_shape(*v);
          if (s.size() != 4 && std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()) != 1) {
            return no(fmt::format("operand '{}' of rank {} broadcasts against a rank-4 tensor (NHWC inside the delegate)", v->name(), s.size()));
          }
        }
      }
      return SupportResult::yes();
    case OpId::kReshape:
    case OpId::kView:
    case OpId::kFlatten:
    case OpId::kUnflatten:
      if (!layout_neutral(static_shape(*n.input(0))) || !layout_neutral(out)) {
        return no("a reshape to or from a rank-4 shape that would reorder the delegate's NHWC data");
      }
      return SupportResult::yes();
    default:
      if (is_unary(n)) return SupportResult::yes();
      return no(fmt::format("op '{}' has no XNNPACK operator in this version", n.target_name()));
  }
}

// ---- preprocess ------------------------------------------------------------------------------

std::vector<uint64_t> xnn_dims(const std::vector<int64_t>& s) {
  std::vector<uint64_t> d(s.begin(), s.end());
  if (s.size() == 4) d = {uint64_t(s[0]), uint64_t(s[2]), uint64_t(s[3]), uint64_t(s[1])};
  return d;
}

// NCHW -> NHWC of a rank-4 float array.
std::vector<float> to_nhwc(const float* x, const std::vector<int64_t>& s) {
  const int64_t n = s[0], c = s[1], hw = s[2] * s[3];
  std::vector<float> y(static_cast<size_t>(n * c * hw));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < hw; ++i) y[static_cast<size_t>((b * hw + i) * c + ch)] = x[(b * c + ch) * hw + i];
  return y;
}

class Builder {
 public:
  explicit Builder(const ExportedProgram& ep) : ep_(ep) {}

  Result<std::vector<uint8_t>> build(const std::vector<Node*>& order) {
    for (Node* in : ep_.user_inputs()) {
      if (!in->has_spec() || !in->spec().is_static()) return fail(*in, "a delegate input must have a static shape");
      auto s = static_shape(*in);
      uint32_t id;
      if (in->spec().dtype == DType::kF32) {
        id = add_value(xnn_dims(s));
        ids_[in] = id;
      } else {
        // Int8 or uint8 codes, read by dequantize nodes that agree on their parameters.
        std::optional<ActQuant> q;
        for (const Node* u : in->users()) {
          std::optional<ActQuant> uq = u->is_call(OpId::kDequantizePerTensor) ? act_quant(*u) : std::nullopt;
          if (!uq || (q && !(*q == *uq))) return fail(*in, "a delegate input of codes must be read by dequantize nodes of one scale and zero point");
          q = uq;
        }
        if (!q) return fail(*in, "a delegate input of codes is not dequantized");
        id = add_qint8(xnn_dims(s), *q);
        values_[id].caller_uint8 = q->uint8;
        qids_[in] = id;
      }
      values_[id].input_index = static_cast<int>(inputs_.size());
      values_[id].nchw = s.size() == 4;
      inputs_.push_back(id);
    }
    for (Node* n : order) {
      if (n->op() != OpKind::kCallFunction || fused_.count(n)) continue;
      if (SupportResult r = check_node(ep_, *n); !r.supported) return fail(*n, r.reason);
      KILN_RETURN_IF_ERROR(define(*n));
    }
    for (Node* out : ep_.user_outputs()) {
      if (out->op() != OpKind::kCallFunction) return fail(*out, "a delegate output must be computed by the delegate");
      uint32_t id;
      if (auto q = qids_.find(out); q != qids_.end()) {
        id = q->second;
        values_[id].caller_uint8 = act_quant(*out)->uint8;
      } else if (ids_.count(out) || out->is_call(OpId::kDequantizePerTensor)) {
        KILN_ASSIGN_OR_RETURN(id, float_of(*out, out));
      } else {
        return fail(*out, "a delegate output must be computed by the delegate");
      }
      ValueDesc& v = values_[id];
      if (v.output_index >= 0 || v.input_index >= 0 || v.size != 0) return fail(*out, "the delegate returns it twice, or returns an input or constant");
      v.output_index = static_cast<int>(outputs_.size());
      v.nchw = v.dims.size() == 4;
      outputs_.push_back(id);
    }
    return finish();
  }

 private:
  struct ValueDesc {
    std::vector<uint64_t> dims;
    uint64_t offset = 0, size = 0;
    int input_index = -1, output_index = -1;
    bool nchw = false;
    fb::DataType dtype = fb::DataType::Fp32;
    float scale = 1;
    int zero_point = 0;
    std::vector<float> channel_scales;
    uint32_t channel_dim = 0;
    bool caller_uint8 = false;
  };
  struct NodeDesc {
    fb::NodeKind kind;
    std::vector<uint32_t> inputs, outputs;
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::string name;
  };

  Status fail(const Node& n, const std::string& why) const {
    return invalid_argument("xnnpack backend: node '{}' ({}): {}", n.name(), n.target_name(), why);
  }

  uint32_t add_value(std::vector<uint64_t> dims) {
    values_.push_back(ValueDesc{std::move(dims)});
    return static_cast<uint32_t>(values_.size() - 1);
  }

  template <typename T>
  uint32_t add_static(std::vector<uint64_t> dims, const T* data, size_t count) {
    uint32_t id = add_value(std::move(dims));
    data_.resize((data_.size() + 63) / 64 * 64);
    values_[id].offset = data_.size();
    values_[id].size = count * sizeof(T);
    data_.resize(data_.size() + count * sizeof(T));
    if (count) std::memcpy(data_.data() + values_[id].offset, data, count * sizeof(T));
    return id;
  }

  uint32_t add_qint8(std::vector<uint64_t> dims, const ActQuant& q) {
    uint32_t id = add_value(std::move(dims));
    values_[id].dtype = fb::DataType::QInt8;
    values_[id].scale = q.scale;
    values_[id].zero_point = q.xnn_zero_point();
    return id;
  }

  // The qint8 value of quantized codes `v`: a quantize node defined earlier, or a delegate input.
  Result<uint32_t> codes_of(const Node& user, const Node* v) {
    if (auto it = qids_.find(v); it != qids_.end()) return it->second;
    return fail(user, fmt::format("operand '{}' has no int8 codes in the delegate", v->name()));
  }

  // The f32 value of `v`. A dequantize of codes becomes a convert, made once.
  Result<uint32_t> float_of(const Node& user, const Node* v) {
    if (auto it = ids_.find(v); it != ids_.end()) return it->second;
    if (v->is_call(OpId::kDequantizePerTensor) && !foldable(ep_, v)) {
      KILN_ASSIGN_OR_RETURN(uint32_t codes, codes_of(user, v->input(0)));
      uint32_t id = add_value(values_[codes].dims);
      emit(fb::NodeKind::Convert, *v, {codes}, {id});
      ids_[v] = id;
      return id;
    }
    return value_of(user, v);
  }

  // The f32 value of `v`: computed by an earlier node, a delegate input, a dequantize of codes,
  // or a constant (folded; rank 4: NHWC).
  Result<uint32_t> value_of(const Node& user, const Node* v) {
    if (auto it = ids_.find(v); it != ids_.end()) return it->second;
    if (v->is_call(OpId::kDequantizePerTensor) && !foldable(ep_, v)) return float_of(user, v);
    std::optional<Tensor> folded = fold(ep_, v);
    const Tensor* c = folded ? &*folded : nullptr;
    if (c == nullptr) return fail(user, fmt::format("operand '{}' is neither computed in the delegate nor a constant", v->name()));
    if (c->dtype() != DType::kF32) return fail(user, fmt::format("constant '{}' is {}, not f32", v->name(), dtype_name(c->dtype())));
    std::vector<int64_t> s = c->shape();
    if (s.empty()) s = {1};
    uint32_t id = s.size() == 4 ? add_static(xnn_dims(s), to_nhwc(c->data_as<float>(), s).data(), size_t(c->numel()))
                                : add_static(xnn_dims(s), c->data_as<float>(), size_t(c->numel()));
    ids_[v] = id;
    return id;
  }

  // An elementwise operand: a number, or a value; a constant of lower rank broadcast against a
  // rank-4 result is expanded to rank 4 first, so that it is permuted into NHWC like the result.
  Result<uint32_t> operand(const Node& n, const Arg& a, size_t out_rank) {
    if (!a.is_node()) {
      float x = static_cast<float>(a.to_float());
      return add_static({1}, &x, 1);
    }
    const Node* v = a.node();
    std::optional<Tensor> folded = foldable(ep_, v) ? fold(ep_, v) : std::nullopt;
    const Tensor* c = folded ? &*folded : nullptr;
    if (c == nullptr || out_rank != 4 || c->rank() == 4) return value_of(n, v);
    if (c->dtype() != DType::kF32) return fail(n, fmt::format("constant '{}' is {}, not f32", v->name(), dtype_name(c->dtype())));
    std::vector<int64_t> s(4 - c->rank(), 1);
    s.insert(s.end(), c->shape().begin(), c->shape().end());
    return add_static(xnn_dims(s), to_nhwc(c->data_as<float>(), s).data(), size_t(c->numel()));
  }

  Result<Tensor> folded(const Node& user, const Node* v) {
    std::optional<Tensor> t = fold(ep_, v);
    if (!t) return fail(user, fmt::format("operand '{}' is not known when compiling", v->name()));
    return std::move(*t);
  }

  uint32_t output_of(const Node& n) {
    uint32_t id = add_value(xnn_dims(static_shape(n)));
    ids_[&n] = id;
    return id;
  }

  void emit(fb::NodeKind kind, const Node& n, std::vector<uint32_t> ins, std::vector<uint32_t> outs,
            std::vector<int64_t> ints = {}, std::vector<float> floats = {}) {
    nodes_.push_back(NodeDesc{kind, std::move(ins), std::move(outs), std::move(ints), std::move(floats), n.name()});
  }

  static constexpr float kInf = std::numeric_limits<float>::infinity();

  // Quantize: fused into the operator that produced its input, or a convert of f32 to codes.
  // Dequantize: nothing until an f32 reader asks (float_of). Weights fold when compiling.
  Status define_quant(const Node& n) {
    if (n.is_call(OpId::kQuantizePerTensor)) {
      KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
      uint32_t id = add_qint8(xnn_dims(static_shape(n)), *act_quant(n));
      emit(fb::NodeKind::Convert, n, {x}, {id});
      qids_[&n] = id;
    }
    return Status::Ok();
  }

  // Quantized weights, scale per output channel: the int8 codes of a dequantize (per channel
  // along dim 0, or per tensor) of constants with zero points 0, or of its 2-D transpose.
  struct QWeight {
    Tensor codes;  // i8, as the model stores them ([O, ...])
    std::vector<float> scales;
  };
  std::optional<QWeight> qweight(const Node* w, bool transposed) {
    if (transposed) {
      if (w == nullptr || !w->is_call(OpId::kPermute) || w->kwarg("dims").to_ints() != std::vector<int64_t>{1, 0}) return std::nullopt;
      w = w->input(0);
    }
    if (w == nullptr || !foldable(ep_, w)) return std::nullopt;
    const bool per_tensor = w->is_call(OpId::kDequantizePerTensor);
    if (!per_tensor && !w->is_call(OpId::kDequantizePerChannel)) return std::nullopt;
    const Tensor& codes = *constant_of(ep_, w->input(0));
    if (codes.dtype() != DType::kI8 || codes.rank() < 1) return std::nullopt;
    const int64_t o = codes.dim(0);
    QWeight q{codes, std::vector<float>(static_cast<size_t>(o))};
    if (per_tensor) {
      if (w->kwarg_int("zero_point") != 0) return std::nullopt;
      std::fill(q.scales.begin(), q.scales.end(), static_cast<float>(w->kwarg_float("scale")));
    } else {
      const Tensor& scales = *constant_of(ep_, w->input(1));
      const Tensor& zps = *constant_of(ep_, w->input(2));
      if (w->kwarg_int("axis") != 0 || scales.numel() != o || zps.numel() != o) return std::nullopt;
      for (int64_t c = 0; c < o; ++c) {
        if (zps.scalar_at(c) != 0) return std::nullopt;
        q.scales[size_t(c)] = static_cast<float>(scales.scalar_at(c));
      }
    }
    for (float x : q.scales) {
      if (!(x > 0) || !std::isfinite(x)) return std::nullopt;
    }
    return q;
  }

  // The codes a quantized operator reads: a dequantize of codes the delegate holds.
  std::optional<ActQuant> quantized_input(const Node* v) {
    if (v == nullptr || !v->is_call(OpId::kDequantizePerTensor) || foldable(ep_, v)) return std::nullopt;
    if (!qids_.count(v->input(0))) return std::nullopt;
    return act_quant(*v);
  }

  // Defines `n` on int8 codes when it reads dequantized codes, its result is quantized (through
  // at most one fused activation) and XNNPACK's limits allow it; false: define it in f32.
  Result<bool> define_quantized(const Node& n) {
    const Node* act = nullptr;
    const Node* sink = nullptr;
    if (activation_range(n)) {
      // A lone activation (one that follows a quantized operator was fused into it): a clamp
      // between a dequantize and a quantize of the same codes.
      if (n.num_users() != 1) return false;
      sink = n.users()[0];
      if (!sink->is_call(OpId::kQuantizePerTensor) || !act_quant(*sink)) return false;
      act = &n;
    } else {
      sink = quant_sink(n, &act);
      if (sink == nullptr) return false;
    }
    const ActQuant oq = *act_quant(*sink);
    constexpr float inf = std::numeric_limits<float>::infinity();
    auto [lo, hi] = act ? *activation_range(*act) : std::make_pair(-inf, inf);
    const auto out = static_shape(*sink);
    auto finish = [&](uint32_t id) {
      qids_[sink] = id;
      if (act != nullptr) fused_.insert(act);
      fused_.insert(sink);
      return true;
    };
    auto ratio_in = [](float r, float min, float max) { return r >= min && r < max; };
    if (act == &n) {
      std::optional<ActQuant> iq = quantized_input(n.input(0));
      if (!iq || !(*iq == oq)) return false;
      uint32_t y = add_qint8(xnn_dims(out), oq);
      emit(fb::NodeKind::Clamp, n, {qids_[n.input(0)->input(0)]}, {y}, {}, {lo, hi});
      return finish(y);
    }
    switch (n.target()) {
      case OpId::kConvolution:
      case OpId::kLinear:
      case OpId::kAddmm: {
        const bool addmm = n.is_call(OpId::kAddmm), conv = n.is_call(OpId::kConvolution);
        const Node* xn = addmm ? n.arg(1).node() : n.input(0);
        std::optional<ActQuant> iq = quantized_input(xn);
        std::optional<QWeight> w = qweight(addmm ? n.arg(2).node() : n.input(1), addmm);
        const Arg& bias_arg = n.arg(addmm ? 0 : 2);
        const Node* bias = bias_arg.is_node() ? bias_arg.node() : nullptr;
        if (addmm && bias == nullptr) return false;
        if (!iq || !w || (bias != nullptr && !foldable(ep_, bias))) return false;
        const auto in_shape = static_shape(*xn);
        if (!conv && in_shape.size() != 2) return false;
        for (float ws : w->scales) {
          if (!ratio_in(iq->scale * ws / oq.scale, 0x1.0p-32f, 256.0f)) return false;
        }
        const int64_t o = w->codes.dim(0);
        std::vector<int32_t> b(static_cast<size_t>(o), 0);
        std::vector<float> bias_scales(b.size());
        std::optional<Tensor> bf = bias ? fold(ep_, bias) : std::nullopt;
        if (bias != nullptr && (!bf || bf->dtype() != DType::kF32 || bf->numel() != o)) return false;
        for (int64_t c = 0; c < o; ++c) {
          bias_scales[size_t(c)] = iq->scale * w->scales[size_t(c)];
          if (bf) {
            double q = std::nearbyint(double(bf->data_as<float>()[c]) / bias_scales[size_t(c)]);
            if (std::abs(q) > 2147483647.0) return false;
            b[size_t(c)] = static_cast<int32_t>(q);
          }
        }
        uint32_t x = qids_[xn->input(0)];
        const int8_t* codes = w->codes.data_as<int8_t>();
        XnnConv<int8_t> c;
        if (conv) {
          c = xnn_conv(n, codes, o, w->codes.dim(1));
        } else {
          // A fully-connected layer as a 1x1 convolution over [N, 1, 1, K] (this XNNPACK has no
          // per-channel int8 fully-connected operator).
          const int64_t kdim = w->codes.dim(1);
          if (w->codes.rank() != 2 || kdim != in_shape[1]) return false;
          c.filter.assign(codes, codes + w->codes.numel());
          c.filter_dims = {uint64_t(o), 1, 1, uint64_t(kdim)};
          c.ints = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, kdim, o};
          uint32_t x4 = add_qint8({uint64_t(in_shape[0]), 1, 1, uint64_t(kdim)}, *iq);
          emit(fb::NodeKind::StaticReshape, n, {x}, {x4}, {in_shape[0], 1, 1, kdim});
          x = x4;
        }
        uint32_t filter = add_static(c.filter_dims, c.filter.data(), c.filter.size());
        values_[filter].dtype = fb::DataType::QCInt8;
        values_[filter].channel_scales = w->scales;
        values_[filter].channel_dim = c.channel_dim;
        uint32_t bv = add_static({uint64_t(o)}, b.data(), b.size());
        values_[bv].dtype = fb::DataType::QCInt32;
        values_[bv].channel_scales = bias_scales;
        if (conv) {
          uint32_t y = add_qint8(xnn_dims(out), oq);
          emit(c.kind, n, {x, filter, bv}, {y}, c.ints, {lo, hi});
          return finish(y);
        }
        uint32_t y4 = add_qint8({uint64_t(out[0]), 1, 1, uint64_t(o)}, oq);
        emit(c.kind, n, {x, filter, bv}, {y4}, c.ints, {lo, hi});
        uint32_t y = add_qint8(xnn_dims(out), oq);
        emit(fb::NodeKind::StaticReshape, n, {y4}, {y}, {out[0], o});
        return finish(y);
      }
      case OpId::kMaxPool2d: {
        std::optional<ActQuant> iq = quantized_input(n.input(0));
        if (!iq || !(*iq == oq)) return false;
        std::string why;
        Window w = *pool_window(n, &why);
        uint32_t y = add_qint8(xnn_dims(out), oq);
        emit(fb::NodeKind::MaxPooling2d, n, {qids_[n.input(0)->input(0)]}, {y},
             {w.pt, w.pr, w.pb, w.pl, w.kh, w.kw, w.sh, w.sw, w.dh, w.dw}, {lo, hi});
        return finish(y);
      }
      case OpId::kAdd: {
        if (!n.arg(0).is_node() || !n.arg(1).is_node() || n.kwarg_float("alpha") != 1) return false;
        std::optional<ActQuant> a = quantized_input(n.arg(0).node()), b = quantized_input(n.arg(1).node());
        if (!a || !b || !ratio_in(a->scale / oq.scale, 0x1.0p-10f, 256.0f) || !ratio_in(b->scale / oq.scale, 0x1.0p-10f, 256.0f)) return false;
        if (static_shape(*n.arg(0).node()) != out || static_shape(*n.arg(1).node()) != out) return false;
        uint32_t y = add_qint8(xnn_dims(out), oq);
        emit(fb::NodeKind::Add, n, {qids_[n.arg(0).node()->input(0)], qids_[n.arg(1).node()->input(0)]}, {y}, {}, {lo, hi});
        return finish(y);
      }
      case OpId::kAdaptiveAvgPool2d:
      case OpId::kMean: {
        std::optional<ActQuant> iq = quantized_input(n.input(0));
        if (!iq || out.size() != 4 || !ratio_in(iq->scale / oq.scale, 0x1.0p-8f, 256.0f)) return false;
        uint32_t y = add_qint8(xnn_dims(out), oq);
        emit(fb::NodeKind::GlobalAveragePooling2d, n, {qids_[n.input(0)->input(0)]}, {y}, {}, {lo, hi});
        return finish(y);
      }
      case OpId::kReshape:
      case OpId::kView:
      case OpId::kFlatten:
      case OpId::kUnflatten: {
        std::optional<ActQuant> iq = quantized_input(n.input(0));
        if (!iq || !(*iq == oq) || act != nullptr) return false;
        auto dims = xnn_dims(out);
        uint32_t y = add_qint8(dims, oq);
        emit(fb::NodeKind::StaticReshape, n, {qids_[n.input(0)->input(0)]}, {y}, std::vector<int64_t>(dims.begin(), dims.end()));
        return finish(y);
      }
      default:
        return false;
    }
  }

  Status define(const Node& n) {
    if (n.is_call(OpId::kQuantizePerTensor) || n.is_call(OpId::kDequantizePerTensor) ||
        n.is_call(OpId::kDequantizePerChannel) || n.is_call(OpId::kPermute)) {
      return define_quant(n);
    }
    KILN_ASSIGN_OR_RETURN(bool quantized, define_quantized(n));
    if (quantized) return Status::Ok();
    const auto out = static_shape(n);
    std::string why;
    switch (n.target()) {
      case OpId::kConvolution: {
        KILN_ASSIGN_OR_RETURN(Tensor wt, folded(n, n.input(1)));
        XnnConv<float> c = xnn_conv(n, wt.data_as<float>(), wt.dim(0), wt.dim(1));
        KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
        uint32_t bias = kAbsent;
        if (!n.arg(2).is_none()) {
          KILN_ASSIGN_OR_RETURN(bias, value_of(n, n.arg(2).node()));
        }
        uint32_t filter = add_static(c.filter_dims, c.filter.data(), c.filter.size());
        emit(c.kind, n, {x, filter, bias}, {output_of(n)}, c.ints, {-kInf, kInf});
        return Status::Ok();
      }
      case OpId::kConvTranspose2d: {
        Window w = *conv_window(n, &why);
        auto adj = *hw(n.kwarg("output_padding").to_ints(), 0);
        KILN_ASSIGN_OR_RETURN(Tensor wt, folded(n, n.input(1)));
        if (wt.dtype() != DType::kF32) return fail(n, "its weight is not f32");
        // [I, O/g, kh, kw] -> [O, kh, kw, I/g].
        const int64_t groups = n.kwarg_int("groups"), cin = wt.dim(0), opg = wt.dim(1), ipg = cin / groups;
        const int64_t k = w.kh * w.kw;
        std::vector<float> f(static_cast<size_t>(wt.numel()));
        const float* src = wt.data_as<float>();
        for (int64_t g = 0; g < groups; ++g)
          for (int64_t ic = 0; ic < ipg; ++ic)
            for (int64_t oc = 0; oc < opg; ++oc)
              for (int64_t i = 0; i < k; ++i) {
                f[static_cast<size_t>(((g * opg + oc) * k + i) * ipg + ic)] = src[((g * ipg + ic) * opg + oc) * k + i];
              }
        KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
        uint32_t filter = add_static({uint64_t(groups * opg), uint64_t(w.kh), uint64_t(w.kw), uint64_t(ipg)}, f.data(), f.size());
        uint32_t bias = kAbsent;
        if (!n.arg(2).is_none()) {
          KILN_ASSIGN_OR_RETURN(bias, value_of(n, n.arg(2).node()));
        }
        emit(fb::NodeKind::Deconvolution2d, n, {x, filter, bias}, {output_of(n)},
             {w.pt, w.pr, w.pb, w.pl, adj.first, adj.second, w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, groups, ipg, opg}, {-kInf, kInf});
        return Status::Ok();
      }
      case OpId::kBatchNorm: {
        // Inference batch norm: x * scale + shift, one pair per channel (the last dim in NHWC).
        const int64_t c = out[1];
        auto param = [&](size_t i) -> Result<const float*> {
          if (n.arg(i).is_none()) return nullptr;
          KILN_ASSIGN_OR_RETURN(Tensor t, folded(n, n.arg(i).node()));
          if (t.dtype() != DType::kF32 || t.numel() != c) return fail(n, fmt::format("'{}' is not {} f32 values", n.arg(i).node()->name(), c));
          return t.data_as<float>();
        };
        KILN_ASSIGN_OR_RETURN(const float* weight, param(1));
        KILN_ASSIGN_OR_RETURN(const float* bias, param(2));
        KILN_ASSIGN_OR_RETURN(const float* mean, param(3));
        KILN_ASSIGN_OR_RETURN(const float* var, param(4));
        if (mean == nullptr || var == nullptr) return fail(n, "its running statistics are missing");
        const float eps = static_cast<float>(n.kwarg_float("eps"));
        std::vector<float> scale(static_cast<size_t>(c)), shift(scale.size());
        for (int64_t i = 0; i < c; ++i) {
          scale[size_t(i)] = (weight ? weight[i] : 1.0f) / std::sqrt(var[i] + eps);
          shift[size_t(i)] = (bias ? bias[i] : 0.0f) - mean[i] * scale[size_t(i)];
        }
        std::vector<uint64_t> dims(out.size(), 1);
        dims[out.size() == 4 ? 3 : 1] = uint64_t(c);
        KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
        uint32_t scaled = add_value(xnn_dims(out));
        emit(fb::NodeKind::Multiply, n, {x, add_static(dims, scale.data(), scale.size())}, {scaled}, {}, {-kInf, kInf});
        emit(fb::NodeKind::Add, n, {scaled, add_static(dims, shift.data(), shift.size())}, {output_of(n)}, {}, {-kInf, kInf});
        return Status::Ok();
      }
      case OpId::kLinear: {
        KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
        KILN_ASSIGN_OR_RETURN(uint32_t w, value_of(n, n.input(1)));
        uint32_t bias = kAbsent;
        if (!n.arg(2).is_none()) {
          KILN_ASSIGN_OR_RETURN(bias, value_of(n, n.arg(2).node()));
        }
        emit(fb::NodeKind::FullyConnected, n, {x, w, bias}, {output_of(n)}, {}, {-kInf, kInf});
        return Status::Ok();
      }
      case OpId::kAddmm:
      case OpId::kMatmul:
      case OpId::kMm: {
        // x @ B with B a [K, O] constant: a fully-connected layer with the filter B^T.
        const bool addmm = n.is_call(OpId::kAddmm);
        KILN_ASSIGN_OR_RETURN(Tensor b, folded(n, n.arg(addmm ? 2 : 1).node()));
        if (b.dtype() != DType::kF32) return fail(n, "its weight is not f32");
        const int64_t k = b.dim(0), o = b.dim(1);
        std::vector<float> t(static_cast<size_t>(k * o));
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < o; ++j) t[static_cast<size_t>(j * k + i)] = b.data_as<float>()[i * o + j];
        KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.arg(addmm ? 1 : 0).node()));
        uint32_t w = add_static({uint64_t(o), uint64_t(k)}, t.data(), t.size());
        uint32_t bias = kAbsent;
        if (addmm) {
          KILN_ASSIGN_OR_RETURN(Tensor bt, folded(n, n.arg(0).node()));
          if (bt.dtype() != DType::kF32) return fail(n, "its bias is not f32");
          bias = add_static({uint64_t(o)}, bt.data_as<float>(), size_t(o));
        }
        emit(fb::NodeKind::FullyConnected, n, {x, w, bias}, {output_of(n)}, {}, {-kInf, kInf});
        return Status::Ok();
      }
      case OpId::kMaxPool2d:
      case OpId::kAvgPool2d: {
        Window w = *pool_window(n, &why);
        KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
        bool max = n.is_call(OpId::kMaxPool2d);
        emit(max ? fb::NodeKind::MaxPooling2d : fb::NodeKind::AveragePooling2d, n, {x}, {output_of(n)},
             {w.pt, w.pr, w.pb, w.pl, w.kh, w.kw, w.sh, w.sw, w.dh, w.dw}, {-kInf, kInf});
        return Status::Ok();
      }
      case OpId::kAdaptiveAvgPool2d:
      case OpId::kMean: {
        KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
        if (out.size() == 4) {
          emit(fb::NodeKind::GlobalAveragePooling2d, n, {x}, {output_of(n)}, {}, {-kInf, kInf});
          return Status::Ok();
        }
        // mean without keepdim: pool to [N, 1, 1, C], then drop the unit dims.
        auto in = static_shape(*n.input(0));
        uint32_t pooled = add_value({uint64_t(in[0]), 1, 1, uint64_t(in[1])});
        emit(fb::NodeKind::GlobalAveragePooling2d, n, {x}, {pooled}, {}, {-kInf, kInf});
        uint32_t y = output_of(n);
        emit(fb::NodeKind::StaticReshape, n, {pooled}, {y}, std::vector<int64_t>(out.begin(), out.end()));
        return Status::Ok();
      }
      case OpId::kSoftmax: {
        KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
        emit(fb::NodeKind::Softmax, n, {x}, {output_of(n)});
        return Status::Ok();
      }
      case OpId::kPrelu: {
        KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
        KILN_ASSIGN_OR_RETURN(Tensor s, folded(n, n.input(1)));
        std::vector<float> slope(static_cast<size_t>(out[1]), s.data_as<float>()[0]);
        if (s.numel() == out[1]) std::memcpy(slope.data(), s.data_as<float>(), slope.size() * sizeof(float));
        uint32_t sv = add_static({uint64_t(out[1])}, slope.data(), slope.size());
        emit(fb::NodeKind::Prelu, n, {x, sv}, {output_of(n)});
        return Status::Ok();
      }
      case OpId::kAdd:
      case OpId::kSub:
      case OpId::kMul:
      case OpId::kDiv: {
        KILN_ASSIGN_OR_RETURN(uint32_t a, operand(n, n.arg(0), out.size()));
        KILN_ASSIGN_OR_RETURN(uint32_t b, operand(n, n.arg(1), out.size()));
        fb::NodeKind kind = n.is_call(OpId::kAdd) ? fb::NodeKind::Add
                            : n.is_call(OpId::kSub) ? fb::NodeKind::Subtract
                            : n.is_call(OpId::kMul) ? fb::NodeKind::Multiply
                                                    : fb::NodeKind::Divide;
        emit(kind, n, {a, b}, {output_of(n)}, {}, {-kInf, kInf});
        return Status::Ok();
      }
      case OpId::kReshape:
      case OpId::kView:
      case OpId::kFlatten:
      case OpId::kUnflatten: {
        KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
        auto dims = xnn_dims(out);
        emit(fb::NodeKind::StaticReshape, n, {x}, {output_of(n)}, std::vector<int64_t>(dims.begin(), dims.end()));
        return Status::Ok();
      }
      default:
        break;
    }
    // Unary.
    KILN_ASSIGN_OR_RETURN(uint32_t x, value_of(n, n.input(0)));
    auto clamp = [&](float lo, float hi) { emit(fb::NodeKind::Clamp, n, {x}, {output_of(n)}, {}, {lo, hi}); };
    auto bound = [&](const char* name, float dflt) {
      const Arg& a = n.kwarg(name);
      return a.is_none() ? dflt : static_cast<float>(a.to_float());
    };
    switch (n.target()) {
      case OpId::kRelu: clamp(0, kInf); break;
      case OpId::kRelu6: clamp(0, 6); break;
      case OpId::kClamp: clamp(bound("min", -kInf), bound("max", kInf)); break;
      case OpId::kSigmoid: emit(fb::NodeKind::Sigmoid, n, {x}, {output_of(n)}); break;
      case OpId::kHardswish: emit(fb::NodeKind::Hardswish, n, {x}, {output_of(n)}); break;
      case OpId::kHardsigmoid: {
        // clamp(alpha * x + beta, 0, 1): a multiply, then an add clamped to [0, 1].
        const float alpha = static_cast<float>(n.kwarg_float("alpha")), beta = static_cast<float>(n.kwarg_float("beta"));
        uint32_t scaled = add_value(xnn_dims(out));
        emit(fb::NodeKind::Multiply, n, {x, add_static({1}, &alpha, 1)}, {scaled}, {}, {-kInf, kInf});
        emit(fb::NodeKind::Add, n, {scaled, add_static({1}, &beta, 1)}, {output_of(n)}, {}, {0, 1});
        break;
      }
      case OpId::kLeakyRelu:
        emit(fb::NodeKind::LeakyRelu, n, {x}, {output_of(n)}, {}, {static_cast<float>(n.kwarg_float("negative_slope"))});
        break;
      case OpId::kAbs: emit(fb::NodeKind::Abs, n, {x}, {output_of(n)}); break;
      case OpId::kNeg: emit(fb::NodeKind::Negate, n, {x}, {output_of(n)}); break;
      case OpId::kSqrt: emit(fb::NodeKind::SquareRoot, n, {x}, {output_of(n)}); break;
      default: return fail(n, "no XNNPACK operator");
    }
    return Status::Ok();
  }

  Result<std::vector<uint8_t>> finish() {
    flatbuffers::FlatBufferBuilder fbb(1024 + data_.size());
    std::vector<flatbuffers::Offset<fb::Value>> values;
    for (const ValueDesc& v : values_) {
      auto dims = fbb.CreateVector(v.dims);
      flatbuffers::Offset<flatbuffers::Vector<float>> channel_scales;
      if (!v.channel_scales.empty()) channel_scales = fbb.CreateVector(v.channel_scales);
      fb::ValueBuilder b(fbb);
      b.add_dtype(v.dtype);
      b.add_dims(dims);
      b.add_data_offset(v.offset);
      b.add_data_size(v.size);
      b.add_input_index(v.input_index);
      b.add_output_index(v.output_index);
      b.add_nchw(v.nchw);
      b.add_caller_uint8(v.caller_uint8);
      if (v.dtype != fb::DataType::Fp32) {
        b.add_scale(v.scale);
        b.add_zero_point(v.zero_point);
        if (channel_scales.o != 0) b.add_channel_scales(channel_scales);
        b.add_channel_dim(v.channel_dim);
      }
      values.push_back(b.Finish());
    }
    std::vector<flatbuffers::Offset<fb::Node>> nodes;
    for (const NodeDesc& d : nodes_) {
      nodes.push_back(fb::CreateNode(fbb, d.kind, fbb.CreateVector(d.inputs), fbb.CreateVector(d.outputs),
                                     fbb.CreateVector(d.ints), fbb.CreateVector(d.floats), fbb.CreateString(d.name)));
    }
    auto values_v = fbb.CreateVector(values);
    auto nodes_v = fbb.CreateVector(nodes);
    auto ins = fbb.CreateVector(inputs_);
    auto outs = fbb.CreateVector(outputs_);
    fbb.ForceVectorAlignment(data_.size(), 1, 64);
    auto data = fbb.CreateVector(data_);
    fbb.Finish(fb::CreateGraph(fbb, kBlobVersion, values_v, nodes_v, ins, outs, data), "KXNN");
    return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }

  const ExportedProgram& ep_;
  std::vector<ValueDesc> values_;
  std::vector<NodeDesc> nodes_;
  std::vector<uint32_t> inputs_, outputs_;
  std::vector<uint8_t> data_;
  std::unordered_map<const Node*, uint32_t> ids_;   // f32 values
  std::unordered_map<const Node*, uint32_t> qids_;  // int8 codes: quantize nodes, delegate inputs
  std::unordered_set<const Node*> fused_;           // activations and quantizes folded into an operator
};

}  // namespace

OperatorSupportPtr xnnpack_operator_support() {
  return support_fn([](const ExportedProgram& ep, const Node& n) { return check_node(ep, n); });
}

std::string xnnpack_partition_worth(const ExportedProgram& /*program*/, std::span<Node* const> nodes) {
  size_t calls = 0;
  for (const Node* n : nodes) {
    if (n->op() != OpKind::kCallFunction || n->is_call(OpId::kGetitem)) continue;
    ++calls;
    switch (n->target()) {
      case OpId::kConvolution: case OpId::kConvTranspose2d: case OpId::kLinear: case OpId::kAddmm:
      case OpId::kMatmul: case OpId::kMm: case OpId::kMaxPool2d: case OpId::kAvgPool2d:
      case OpId::kAdaptiveAvgPool2d: case OpId::kMean: case OpId::kSoftmax:
        return {};
      default:
        break;
    }
  }
  return fmt::format("its partition of {} elementwise op(s) and reshape(s) would cost more to copy in and out of "
                     "XNNPACK than to run in the portable kernels",
                     calls);
}

Result<PreprocessResult> XnnpackBackend::preprocess(const ExportedProgram& submodule,
                                                    const std::vector<CompileSpec>& /*compile_specs*/) const {
  std::vector<Node*> order;
  DelegateMappingBuilder mapping(/*generated_identifiers=*/true);
  for (Node* n : submodule.graph().nodes()) {
    order.push_back(n);
    if (n->op() != OpKind::kCallFunction || n->meta.debug_handle < 0) continue;
    auto id = mapping.insert({n});
    if (!id.ok()) return id.status().with_context("xnnpack backend");
  }
  Builder builder(submodule);
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> blob, builder.build(order));
  PreprocessResult result;
  result.processed_bytes = std::move(blob);
  KILN_ASSIGN_OR_RETURN(result.debug_handle_map, mapping.get_integer_delegate_mapping());
  return result;
}

Status register_xnnpack_backend(BackendRegistry& registry) {
  return registry.add(std::make_unique<XnnpackBackend>());
}

}  // namespace kiln::xnnpack
