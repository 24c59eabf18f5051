// From a kiln submodule to a graph of QNN ops (ExecuTorch's Qualcomm node visitors).
//
// The submodule is either captured (capture_program: q/dq folded into meta.quant, layout
// transformed) or a plain quantized program with q/dq pairs; the builder folds what is left:
//   - a dequantize of an integer constant makes the constant a quantized static tensor;
//   - a quantize of a computed value gives that value its encoding; the dequantize after it is
//     the same tensor (a quantize of a user input or of a float value is a real Quantize op, and
//     a dequantize that feeds a graph output a real Dequantize op);
//   - an op whose output is quantized only after a fused activation (conv -> relu -> q) takes the
//     activation's encoding; with use_fold_relu the activation disappears into the op's clamp.
#include "builder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <set>

#include "kiln/backends/htp/htp_backend.h"

namespace kiln::htp {
namespace {

bool is_dequantize(const Node* n) {
  return n->is_call(OpId::kDequantizePerTensor) || n->is_call(OpId::kDequantizePerChannel);
}

bool is_fused_activation(const Node* n) {
  return n->is_call(OpId::kRelu) || n->is_call(OpId::kRelu6) || n->is_call(OpId::kClamp);
}

// Ops whose output stage applies a folded activation's clamp (kiln_clamp_min/max).
bool takes_clamp(const Node* n) {
  return n->is_call(OpId::kConvolution) || n->is_call(OpId::kLinear) || n->is_call(OpId::kAdd) ||
         n->is_call(OpId::kSub);
}

// The QNN type of an unquantized value.
QnnDataType plain_type(DType dtype, bool fp16) {
  switch (dtype) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kF64:
      return fp16 ? QnnDataType::kFloat16 : QnnDataType::kFloat32;
    case DType::kI32: return QnnDataType::kInt32;
    case DType::kI64: return QnnDataType::kInt64;
    case DType::kI16: return QnnDataType::kInt16;
    case DType::kI8: return QnnDataType::kInt8;
    case DType::kU8: return QnnDataType::kUInt8;
    case DType::kU16: return QnnDataType::kUInt16;
    case DType::kU32: return QnnDataType::kUInt32;
    case DType::kBool: return QnnDataType::kBool8;
    case DType::kU64: break;  // HTP has no 64-bit unsigned type
  }
  return QnnDataType::kUnknown;
}

std::vector<uint32_t> u32(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

QuantAttrs attrs_from_kwargs(const Node* n) {
  QuantAttrs q;
  q.dtype = n->kwarg("dtype").to_dtype();
  q.quant_min = n->kwarg_int("quant_min");
  q.quant_max = n->kwarg_int("quant_max");
  q.scales = {n->kwarg_float("scale")};
  q.zero_points = {n->kwarg_int("zero_point")};
  return q;
}

class Builder {
 public:
  Builder(const ExportedProgram& ep, const Options& options, std::vector<StaticData>* statics)
      : ep_(ep), options_(options), statics_(statics),
        fp16_(options.backend_options.htp_options.precision == HtpPrecision::kFp16) {}

  Result<QnnGraph> build(std::string name);

 private:
  void name_io_after_the_model();
  Node* resolve(Node* n) const {
    while (alias_[n->id()] != nullptr) n = alias_[n->id()];
    return n;
  }
  const QuantAttrs* quant(const Node* n) const { return quant_[n->id()]; }
  Status fold();
  Result<uint32_t> value(Node* n);
  Result<QuantAttrs> per_channel_attrs(const Node* dq) const;
  Result<uint32_t> new_tensor(const Node* n, std::string name, std::vector<uint32_t> dims,
                              const QuantAttrs* q, DType dtype, TensorType type);
  Result<uint32_t> output(Node* n);
  Result<uint32_t> static_tensor(std::string name, const Tensor& data, const QuantAttrs* q,
                                 std::vector<uint32_t> dims, const std::vector<int64_t>& perm);
  uint32_t add_temp(const QnnTensor& like, std::string name, std::vector<uint32_t> dims);
  void add_op(const Node* n, std::string type, std::vector<uint32_t> ins, std::vector<uint32_t> outs,
              std::vector<QnnParam> params = {}, std::string suffix = "");
  Result<std::vector<uint32_t>> dims_of(const Node* n) const;
  Status emit(Node* n);
  Status emit_conv(Node* n);
  Status emit_pool(Node* n);
  Status emit_linear(Node* n);
  Status add_clamp_params(Node* act, std::vector<QnnParam>* params);

  const ExportedProgram& ep_;
  const Options& options_;
  std::vector<StaticData>* statics_;
  bool fp16_;
  QnnGraph g_;
  std::vector<Node*> alias_;
  std::vector<const QuantAttrs*> quant_;
  std::vector<int32_t> tensor_of_;
  std::deque<QuantAttrs> owned_quant_;  // quant_ points into it (a deque never moves them)
  std::vector<Node*> folded_act_;        // activation folded into its producer's clamp
  std::unordered_map<std::string, std::vector<size_t>> static_by_hash_;
};

Result<std::vector<uint32_t>> Builder::dims_of(const Node* n) const {
  if (!n->has_spec()) return invalid_argument("node '{}' has no shape", n->name());
  auto shape = n->spec().static_shape();
  if (!shape) {
    return invalid_argument("node '{}' has the symbolic shape {}: HTP graphs are static; bind the dims "
                            "(kiln compile --dim NAME=N..N)", n->name(), n->spec().to_string());
  }
  for (int64_t d : *shape) {
    if (d < 0 || d > INT32_MAX) return invalid_argument("node '{}': dim {} is out of range", n->name(), d);
  }
  return u32(*shape);
}

// A per-channel dequantize's parameters from its stored scales and zero points (an imported QDQ
// model's, which carry no quantization attributes).
Result<QuantAttrs> Builder::per_channel_attrs(const Node* dq) const {
  auto constant = [&](const Node* v) -> const Tensor* {
    const InputSpec* s = v->op() == OpKind::kPlaceholder ? ep_.input_spec(v) : nullptr;
    return s != nullptr && s->kind != InputKind::kUserInput ? ep_.constants().find(s->target) : nullptr;
  };
  const Tensor* scales = constant(dq->input(1));
  const Tensor* zps = constant(dq->input(2));
  if (scales == nullptr || zps == nullptr || scales->numel() != zps->numel()) {
    return invalid_argument("node '{}': a per-channel dequantize whose scales and zero points are not stored "
                            "constants of one size", dq->name());
  }
  QuantAttrs q;
  q.dtype = dq->kwarg("dtype").to_dtype();
  q.quant_min = dq->kwarg_int("quant_min");
  q.quant_max = dq->kwarg_int("quant_max");
  q.axis = dq->kwarg_int("axis");
  for (int64_t i = 0; i < scales->numel(); ++i) {
    q.scales.push_back(scales->scalar_at(i));
    q.zero_points.push_back(static_cast<int64_t>(zps->scalar_at(i)));
  }
  return q;
}

Status Builder::fold() {
  const Graph& graph = ep_.graph();
  size_t n_ids = 0;
  for (const Node* n : graph.nodes()) n_ids = std::max<size_t>(n_ids, n->id() + 1);
  alias_.assign(n_ids, nullptr);
  quant_.assign(n_ids, nullptr);
  tensor_of_.assign(n_ids, -1);
  folded_act_.assign(n_ids, nullptr);
  std::vector<bool> is_output(n_ids, false);
  if (const Node* out = graph.output_node()) {
    for (const Use& u : out->operands()) is_output[u.value->id()] = true;
  }
  for (Node* n : graph.nodes()) {
    if (n->meta.quant && !n->is_call(OpId::kQuantizePerTensor) && !is_dequantize(n)) quant_[n->id()] = &*n->meta.quant;
  }
  for (Node* n : graph.nodes()) {
    if (n->op() != OpKind::kCallFunction) continue;
    if (is_dequantize(n)) {
      Node* src = n->input(0);
      if (src->op() == OpKind::kPlaceholder && quant(src) == nullptr && src->has_spec() &&
          is_integral(src->spec().dtype)) {
        // A quantized constant, or codes coming in (a partition boundary after a quantize, or
        // I/O tagged quantized): the dequantize carries the attributes.
        if (n->meta.quant) {
          quant_[src->id()] = &*n->meta.quant;
        } else if (n->is_call(OpId::kDequantizePerTensor)) {
          owned_quant_.push_back(attrs_from_kwargs(n));
          quant_[src->id()] = &owned_quant_.back();
        } else {
          KILN_ASSIGN_OR_RETURN(QuantAttrs q, per_channel_attrs(n));
          owned_quant_.push_back(std::move(q));
          quant_[src->id()] = &owned_quant_.back();
        }
        if (!is_output[n->id()]) alias_[n->id()] = src;
      } else if (!is_output[n->id()] && quant(resolve(src)) != nullptr) {
        alias_[n->id()] = src;
      }
      continue;
    }
    if (n->is_call(OpId::kQuantizePerTensor)) {
      Node* src = resolve(n->input(0));
      // Codes of a value already stored in this encoding (a captured program's returned codes).
      if (src->op() == OpKind::kCallFunction && quant(src) != nullptr &&
          *quant(src) == (n->meta.quant ? *n->meta.quant : attrs_from_kwargs(n))) {
        alias_[n->id()] = src;
        continue;
      }
      bool computed = src->op() == OpKind::kCallFunction && !is_dequantize(src) &&
                      !src->is_call(OpId::kQuantizePerTensor) && quant(src) == nullptr;
      if (computed) {
        quant_[src->id()] = n->meta.quant ? &*n->meta.quant : (owned_quant_.push_back(attrs_from_kwargs(n)), &owned_quant_.back());
        alias_[n->id()] = src;
      } else if (!n->meta.quant) {
        owned_quant_.push_back(attrs_from_kwargs(n));
        quant_[n->id()] = &owned_quant_.back();
      } else {
        quant_[n->id()] = &*n->meta.quant;
      }
    }
  }
  if (fp16_) return Status::Ok();
  // conv/linear/add -> relu with only the activation quantized: the producer takes its encoding.
  for (Node* n : graph.nodes()) {
    if (n->op() != OpKind::kCallFunction || !is_fused_activation(n) || quant(n) == nullptr) continue;
    Node* src = n->input(0);
    if (src->op() != OpKind::kCallFunction || quant(src) != nullptr || src->num_users() != 1 ||
        is_dequantize(src) || src->is_call(OpId::kQuantizePerTensor)) {
      continue;
    }
    quant_[src->id()] = quant(n);
    if (options_.backend_options.htp_options.use_fold_relu && !is_output[src->id()]) {
      alias_[n->id()] = src;
      folded_act_[src->id()] = n;
    }
  }
  // conv/linear/add (-> q -> dq) -> relu/clamp -> q with one encoding throughout (a QDQ model): the
  // activation clamps the producer's codes, q(clamp(dq(c), lo, hi)) = clamp(c, q(lo), q(hi)),
  // so the producer's output stage does it, bit for bit.
  if (!options_.backend_options.htp_options.use_fold_relu) return Status::Ok();
  for (Node* n : graph.nodes()) {
    if (n->op() != OpKind::kCallFunction || !is_fused_activation(n) || quant(n) == nullptr) continue;
    Node* src = resolve(n->input(0));
    if (!takes_clamp(src) || quant(src) == nullptr || *quant(src) != *quant(n) ||
        folded_act_[src->id()] != nullptr || is_output[src->id()]) {
      continue;
    }
    bool chain = true;  // every value between the producer and the activation feeds only the next
    for (Node* x = n->input(0); x != nullptr; x = x == src ? nullptr : alias_[x->id()]) {
      chain = chain && x->num_users() == 1 && !is_output[x->id()];
    }
    if (!chain) continue;
    alias_[n->id()] = src;
    folded_act_[src->id()] = n;
  }
  return Status::Ok();
}

Result<uint32_t> Builder::new_tensor(const Node* n, std::string name, std::vector<uint32_t> dims,
                                     const QuantAttrs* q, DType dtype, TensorType type) {
  QnnTensor t;
  t.name = std::move(name);
  t.type = type;
  t.dims = std::move(dims);
  if (q != nullptr) {
    t.encoding = encoding_of(*q, &t.data_type);
    if (t.data_type == QnnDataType::kUnknown) {
      return unsupported("node '{}': quantized to {}, which the HTP does not take", n->name(), dtype_name(q->dtype));
    }
    if (t.encoding.per_axis() && static_cast<size_t>(t.encoding.axis) >= t.dims.size()) {
      return invalid_argument("node '{}': quantization axis {} is outside rank {}", n->name(), t.encoding.axis,
                              t.dims.size());
    }
  } else {
    t.data_type = plain_type(dtype, fp16_);
  }
  g_.tensors.push_back(std::move(t));
  return static_cast<uint32_t>(g_.tensors.size() - 1);
}

uint32_t Builder::add_temp(const QnnTensor& like, std::string name, std::vector<uint32_t> dims) {
  QnnTensor t = like;
  t.name = std::move(name);
  t.type = TensorType::kNative;
  t.dims = std::move(dims);
  t.static_index = -1;
  g_.tensors.push_back(std::move(t));
  return static_cast<uint32_t>(g_.tensors.size() - 1);
}

Result<uint32_t> Builder::static_tensor(std::string name, const Tensor& data, const QuantAttrs* q,
                                        std::vector<uint32_t> dims, const std::vector<int64_t>& perm) {
  if (data.elided()) return invalid_argument("constant '{}' has no data (an elided .kir)", name);
  QnnDataType qdt = QnnDataType::kUnknown;
  QnnEncoding enc;
  if (q != nullptr) enc = encoding_of(*q, &qdt);
  // Bytes in the tensor's element order, permuted when asked (OIHW -> HWIO).
  size_t es = dtype_size(data.dtype());
  std::vector<uint8_t> bytes(data.nbytes());
  const auto* src = static_cast<const uint8_t*>(data.data());
  if (perm.empty()) {
    if (!bytes.empty()) std::memcpy(bytes.data(), src, bytes.size());
  } else {
    const auto& shape = data.shape();
    size_t rank = shape.size();
    std::vector<int64_t> in_strides(rank, 1), out_shape(rank), out_strides(rank, 1);
    for (size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * shape[i];
    for (size_t i = 0; i < rank; ++i) out_shape[i] = shape[perm[i]];
    for (size_t i = rank; i-- > 1;) out_strides[i - 1] = out_strides[i] * out_shape[i];
    std::vector<int64_t> idx(rank, 0);
    for (int64_t o = 0; o < data.numel(); ++o) {
      int64_t from = 0;
      for (size_t i = 0; i < rank; ++i) from += idx[i] * in_strides[perm[i]];
      std::memcpy(bytes.data() + o * es, src + from * es, es);
      for (size_t i = rank; i-- > 0;) {
        if (++idx[i] < out_shape[i]) break;
        idx[i] = 0;
      }
    }
    if (enc.per_axis()) {
      for (size_t i = 0; i < rank; ++i) {
        if (perm[i] == enc.axis) {
          enc.axis = static_cast<int32_t>(i);
          break;
        }
      }
    }
  }
  QnnTensor t;
  t.name = std::move(name);
  t.type = TensorType::kStatic;
  t.dims = std::move(dims);
  t.encoding = enc;
  if (q != nullptr) {
    t.data_type = qdt;
  } else if (is_floating(data.dtype())) {
    if (data.dtype() != DType::kF32) return unsupported("constant '{}' is {}, the HTP takes f32", t.name, dtype_name(data.dtype()));
    t.data_type = fp16_ ? QnnDataType::kFloat16 : QnnDataType::kFloat32;
    if (fp16_) {
      std::vector<uint8_t> half(bytes.size() / 2);
      const auto* f = reinterpret_cast<const float*>(bytes.data());
      auto* h = reinterpret_cast<uint16_t*>(half.data());
      for (size_t i = 0; i < bytes.size() / 4; ++i) h[i] = float_to_half(f[i]);
      bytes = std::move(half);
    }
  } else {
    t.data_type = plain_type(data.dtype(), fp16_);
  }
  // Identical bytes are stored once in the context (weights shared by graphs or ops).
  std::string key(reinterpret_cast<const char*>(bytes.data()), std::min<size_t>(bytes.size(), 64));
  key += std::to_string(bytes.size());
  int32_t index = -1;
  for (size_t i : static_by_hash_[key]) {
    auto have = (*statics_)[i].bytes();
    if (have.size() == bytes.size() && std::equal(have.begin(), have.end(), bytes.begin())) {
      index = static_cast<int32_t>(i);
      break;
    }
  }
  if (index < 0) {
    index = static_cast<int32_t>(statics_->size());
    static_by_hash_[key].push_back(statics_->size());
    statics_->emplace_back(std::move(bytes));
  }
  t.static_index = index;
  g_.tensors.push_back(std::move(t));
  return static_cast<uint32_t>(g_.tensors.size() - 1);
}

// The tensor of a value read by an op.
Result<uint32_t> Builder::value(Node* n) {
  n = resolve(n);
  if (tensor_of_[n->id()] >= 0) return static_cast<uint32_t>(tensor_of_[n->id()]);
  if (n->op() != OpKind::kPlaceholder) {
    return invalid_argument("node '{}' is read before the HTP graph computes it", n->name());
  }
  const InputSpec* spec = ep_.input_spec(n);
  if (spec == nullptr) return invalid_argument("placeholder '{}' is not in the signature", n->name());
  KILN_ASSIGN_OR_RETURN(std::vector<uint32_t> dims, dims_of(n));
  uint32_t id;
  if (spec->kind == InputKind::kUserInput) {
    KILN_ASSIGN_OR_RETURN(id, new_tensor(n, n->name(), dims, quant(n), n->spec().dtype, TensorType::kAppWrite));
  } else {
    const Tensor* data = ep_.constants().find(spec->target);
    if (data == nullptr) return invalid_argument("constant '{}' of placeholder '{}' is not stored", spec->target, n->name());
    KILN_ASSIGN_OR_RETURN(id, static_tensor(n->name(), *data, quant(n), dims, {}));
  }
  tensor_of_[n->id()] = static_cast<int32_t>(id);
  return id;
}

// The tensor an op writes for node `n`.
Result<uint32_t> Builder::output(Node* n) {
  KILN_ASSIGN_OR_RETURN(std::vector<uint32_t> dims, dims_of(n));
  const QuantAttrs* q = quant(n);
  if (!fp16_ && q == nullptr && is_floating(n->spec().dtype) && !is_dequantize(n)) {
    return invalid_argument("node '{}' ({}) has a float output without quantization attributes in a "
                            "quantized HTP graph: quantize the model first (kiln quantize), or compile "
                            "with --precision fp16", n->name(), n->target_name());
  }
  KILN_ASSIGN_OR_RETURN(uint32_t id, new_tensor(n, n->name(), std::move(dims), q, n->spec().dtype, TensorType::kNative));
  tensor_of_[n->id()] = static_cast<int32_t>(id);
  return id;
}

void Builder::add_op(const Node* n, std::string type, std::vector<uint32_t> ins, std::vector<uint32_t> outs,
                     std::vector<QnnParam> params, std::string suffix) {
  QnnOp op;
  op.name = n->name() + suffix;
  op.type = std::move(type);
  op.inputs = std::move(ins);
  op.outputs = std::move(outs);
  op.params = std::move(params);
  op.debug_handle = n->meta.debug_handle;
  g_.ops.push_back(std::move(op));
}

Status Builder::add_clamp_params(Node* producer, std::vector<QnnParam>* params) {
  Node* act = folded_act_[producer->id()];
  if (act == nullptr) return Status::Ok();
  double lo = 0, hi = std::numeric_limits<double>::infinity();
  if (act->is_call(OpId::kRelu6)) hi = 6;
  if (act->is_call(OpId::kClamp)) {
    const Arg& mn = act->kwarg("min");
    const Arg& mx = act->kwarg("max");
    lo = mn.is_none() ? -std::numeric_limits<double>::infinity() : mn.to_float();
    if (!mx.is_none()) hi = mx.to_float();
  }
  params->push_back(QnnParam::scalar_float("kiln_clamp_min", lo));
  params->push_back(QnnParam::scalar_float("kiln_clamp_max", hi));
  return Status::Ok();
}

}  // namespace

namespace {

std::vector<int64_t> pair_of(const std::vector<int64_t>& v, int64_t fallback) {
  if (v.empty()) return {fallback, fallback};
  if (v.size() == 1) return {v[0], v[0]};
  return {v[0], v[1]};
}

QnnParam pads(const std::vector<int64_t>& p) {
  return QnnParam::uint_tensor("pad_amount", {p[0], p[0], p[1], p[1]}, {2, 2});
}

int64_t norm_axis(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

}  // namespace

Status Builder::emit_conv(Node* n) {
  Node* w = resolve(n->input(1));
  const InputSpec* ws = w->op() == OpKind::kPlaceholder ? ep_.input_spec(w) : nullptr;
  if (ws == nullptr || ws->kind == InputKind::kUserInput) {
    return unsupported("node '{}': the HTP needs a constant convolution weight, '{}' is computed", n->name(), w->name());
  }
  const Tensor* wdata = ep_.constants().find(ws->target);
  if (wdata == nullptr || wdata->rank() != 4) {
    return unsupported("node '{}': convolution weight '{}' must be a stored 4-D constant", n->name(), w->name());
  }
  int64_t groups = n->kwarg_int("groups");
  int64_t cout = wdata->dim(0), cin_g = wdata->dim(1), kh = wdata->dim(2), kw = wdata->dim(3);
  bool depthwise = groups > 1 && cin_g == 1 && cout % groups == 0;
  KILN_ASSIGN_OR_RETURN(uint32_t wt, static_tensor(w->name() + "_hwio", *wdata, quant(w),
                                                   u32({kh, kw, cin_g, cout}), {2, 3, 1, 0}));
  std::vector<uint32_t> ins;
  KILN_ASSIGN_OR_RETURN(uint32_t x, value(n->input(0)));
  ins.push_back(x);
  ins.push_back(wt);
  if (!n->arg(2).is_none()) {
    KILN_ASSIGN_OR_RETURN(uint32_t b, value(n->arg(2).node()));
    ins.push_back(b);
  }
  std::vector<QnnParam> params = {
      QnnParam::uint_tensor("stride", pair_of(n->kwarg("stride").to_ints(), 1), {2}),
      pads(pair_of(n->kwarg("padding").to_ints(), 0)),
      QnnParam::uint_tensor("dilation", pair_of(n->kwarg("dilation").to_ints(), 1), {2}),
  };
  if (!depthwise) params.push_back(QnnParam::scalar_uint("group", static_cast<uint64_t>(groups)));
  KILN_RETURN_IF_ERROR(add_clamp_params(n, &params));
  KILN_ASSIGN_OR_RETURN(uint32_t out, output(n));
  const char* type = depthwise ? "DepthWiseConv2d" : "Conv2d";
  if (n->meta.channels_last) {
    add_op(n, type, std::move(ins), {out}, std::move(params));
    return Status::Ok();
  }
  // NCHW around an NHWC op: Transpose in and out (LayoutTransform removes most of these).
  const QnnTensor xt = g_.tensors[x];
  const auto& xd = xt.dims;
  uint32_t x_nhwc = add_temp(xt, n->name() + "_in_nhwc", {xd[0], xd[2], xd[3], xd[1]});
  add_op(n, "Transpose", {x}, {x_nhwc}, {QnnParam::uint_tensor("perm", {0, 2, 3, 1}, {4})}, "_to_nhwc");
  ins[0] = x_nhwc;
  const auto od = g_.tensors[out].dims;
  uint32_t o_nhwc = add_temp(g_.tensors[out], n->name() + "_nhwc", {od[0], od[2], od[3], od[1]});
  add_op(n, type, std::move(ins), {o_nhwc}, std::move(params));
  add_op(n, "Transpose", {o_nhwc}, {out}, {QnnParam::uint_tensor("perm", {0, 3, 1, 2}, {4})}, "_to_nchw");
  return Status::Ok();
}

Status Builder::emit_pool(Node* n) {
  KILN_ASSIGN_OR_RETURN(uint32_t x, value(n->input(0)));
  KILN_ASSIGN_OR_RETURN(uint32_t out, output(n));
  std::string type;
  std::vector<QnnParam> params;
  if (n->is_call(OpId::kAdaptiveAvgPool2d)) {
    // Global average pooling (the only adaptive form the support check lets through).
    type = "ReduceMean";
    params.push_back(QnnParam::uint_tensor("axes", n->meta.channels_last ? std::vector<int64_t>{1, 2}
                                                                       : std::vector<int64_t>{2, 3}, {2}));
    params.push_back(QnnParam::scalar_bool("keep_dims", true));
    add_op(n, type, {x}, {out}, std::move(params));
    return Status::Ok();
  }
  auto kernel = pair_of(n->kwarg("kernel_size").to_ints(), 1);
  auto stride = n->kwarg("stride").to_ints().empty() ? kernel : pair_of(n->kwarg("stride").to_ints(), 1);
  params = {QnnParam::uint_tensor("filter_size", kernel, {2}), QnnParam::uint_tensor("stride", stride, {2}),
            pads(pair_of(n->kwarg("padding").to_ints(), 0)),
            QnnParam::scalar_uint("rounding_mode", n->kwarg_bool("ceil_mode") ? 1 : 0)};
  if (n->is_call(OpId::kMaxPool2d)) {
    type = "PoolMax2d";
  } else {
    type = "PoolAvg2d";
    params.push_back(QnnParam::scalar_bool("count_pad_for_edges", n->kwarg_bool("count_include_pad")));
  }
  if (n->meta.channels_last) {
    add_op(n, type, {x}, {out}, std::move(params));
    return Status::Ok();
  }
  const auto xd = g_.tensors[x].dims;
  uint32_t x_nhwc = add_temp(g_.tensors[x], n->name() + "_in_nhwc", {xd[0], xd[2], xd[3], xd[1]});
  add_op(n, "Transpose", {x}, {x_nhwc}, {QnnParam::uint_tensor("perm", {0, 2, 3, 1}, {4})}, "_to_nhwc");
  const auto od = g_.tensors[out].dims;
  uint32_t o_nhwc = add_temp(g_.tensors[out], n->name() + "_nhwc", {od[0], od[2], od[3], od[1]});
  add_op(n, type, {x_nhwc}, {o_nhwc}, std::move(params));
  add_op(n, "Transpose", {o_nhwc}, {out}, {QnnParam::uint_tensor("perm", {0, 3, 1, 2}, {4})}, "_to_nchw");
  return Status::Ok();
}

Status Builder::emit_linear(Node* n) {
  Node* w = resolve(n->input(1));
  KILN_ASSIGN_OR_RETURN(uint32_t x, value(n->input(0)));
  KILN_ASSIGN_OR_RETURN(uint32_t wt, value(w));
  std::vector<uint32_t> ins = {x, wt};
  if (!n->arg(2).is_none()) {
    KILN_ASSIGN_OR_RETURN(uint32_t b, value(n->arg(2).node()));
    ins.push_back(b);
  }
  std::vector<QnnParam> params = {QnnParam::scalar_bool("keep_dims", true)};
  KILN_RETURN_IF_ERROR(add_clamp_params(n, &params));
  KILN_ASSIGN_OR_RETURN(uint32_t out, output(n));
  add_op(n, "FullyConnected", std::move(ins), {out}, std::move(params));
  return Status::Ok();
}

Status Builder::emit(Node* n) {
  auto unary = [&](const char* type, std::vector<QnnParam> params = {}) -> Status {
    KILN_ASSIGN_OR_RETURN(uint32_t x, value(n->input(0)));
    KILN_ASSIGN_OR_RETURN(uint32_t out, output(n));
    add_op(n, type, {x}, {out}, std::move(params));
    return Status::Ok();
  };
  auto binary = [&](const char* type) -> Status {
    KILN_ASSIGN_OR_RETURN(uint32_t a, value(n->input(0)));
    uint32_t b;
    if (n->arg(1).is_node()) {
      KILN_ASSIGN_OR_RETURN(b, value(n->arg(1).node()));
    } else {
      // A number operand: a one-element static tensor that holds it exactly.
      double v = n->arg(1).to_float();
      Tensor t(DType::kF32, {1});
      QuantAttrs q;
      const QuantAttrs* qp = nullptr;
      if (!fp16_) {
        // Code 1 with scale |v| (or code 0 for zero): exact in any unsigned type.
        q.dtype = DType::kU8;
        q.quant_min = 0;
        q.quant_max = 255;
        q.scales = {v == 0 ? 1.0 : std::abs(v)};
        q.zero_points = {v < 0 ? 1 : 0};
        t = Tensor(DType::kU8, {1});
        t.mutable_data_as<uint8_t>()[0] = v > 0 ? 1 : 0;
        owned_quant_.push_back(q);
        qp = &owned_quant_.back();
      } else {
        t.mutable_data_as<float>()[0] = static_cast<float>(v);
      }
      KILN_ASSIGN_OR_RETURN(b, static_tensor(n->name() + "_scalar", t, qp, {1}, {}));
    }
    if (n->is_call(OpId::kAdd) || n->is_call(OpId::kSub)) {
      const Arg& alpha = n->kwarg("alpha");
      if (alpha.to_float() != 1) return unsupported("node '{}': alpha {} (the HTP adds with alpha 1)", n->name(), alpha.to_float());
    }
    std::vector<QnnParam> params;
    KILN_RETURN_IF_ERROR(add_clamp_params(n, &params));
    KILN_ASSIGN_OR_RETURN(uint32_t out, output(n));
    add_op(n, type, {a, b}, {out}, std::move(params));
    return Status::Ok();
  };
  size_t rank = n->has_spec() ? n->spec().rank() : 0;
  switch (n->target()) {
    case OpId::kConvolution: return emit_conv(n);
    case OpId::kMaxPool2d: case OpId::kAvgPool2d: case OpId::kAdaptiveAvgPool2d: return emit_pool(n);
    case OpId::kLinear: return emit_linear(n);
    case OpId::kMm: case OpId::kBmm: case OpId::kMatmul: {
      KILN_ASSIGN_OR_RETURN(uint32_t a, value(n->input(0)));
      KILN_ASSIGN_OR_RETURN(uint32_t b, value(n->input(1)));
      KILN_ASSIGN_OR_RETURN(uint32_t out, output(n));
      add_op(n, "MatMul", {a, b}, {out},
             {QnnParam::scalar_bool("transpose_in0", false), QnnParam::scalar_bool("transpose_in1", false)});
      return Status::Ok();
    }
    case OpId::kAdd: return binary("ElementWiseAdd");
    case OpId::kSub: return binary("ElementWiseSubtract");
    case OpId::kMul: return binary("ElementWiseMultiply");
    case OpId::kDiv:
      if (!n->kwarg("rounding_mode").is_none()) return unsupported("node '{}': div with a rounding mode", n->name());
      return binary("ElementWiseDivide");
    case OpId::kRelu: return unary("Relu");
    case OpId::kRelu6:
      return unary("ReluMinMax", {QnnParam::scalar_float("min_value", 0), QnnParam::scalar_float("max_value", 6)});
    case OpId::kClamp: {
      const Arg& mn = n->kwarg("min");
      const Arg& mx = n->kwarg("max");
      return unary("ReluMinMax",
                   {QnnParam::scalar_float("min_value", mn.is_none() ? -INFINITY : mn.to_float()),
                    QnnParam::scalar_float("max_value", mx.is_none() ? INFINITY : mx.to_float())});
    }
    case OpId::kSigmoid: return unary("Sigmoid");
    case OpId::kTanh: return unary("Tanh");
    case OpId::kGelu:
      return unary("Gelu", {QnnParam::scalar_bool("kiln_tanh_approximation", n->kwarg("approximate").to_str() == "tanh")});
    case OpId::kHardswish: return unary("HardSwish");
    case OpId::kHardsigmoid:
      return unary("ElementWiseNeuron", {QnnParam::scalar_uint("operation", 3 /*HARD_SIGMOID*/),
                                         QnnParam::scalar_float("alpha", n->kwarg_float("alpha")),
                                         QnnParam::scalar_float("beta", n->kwarg_float("beta"))});
    case OpId::kSilu: return unary("ElementWiseNeuron", {QnnParam::scalar_uint("operation", 7 /*SILU*/)});
    case OpId::kLeakyRelu: return unary("Prelu", {QnnParam::scalar_float("coefficient", n->kwarg_float("negative_slope"))});
    case OpId::kExp: return unary("ElementWiseExp");
    case OpId::kLog: return unary("ElementWiseLog");
    case OpId::kSqrt: return unary("ElementWiseSquareRoot");
    case OpId::kRsqrt: return unary("ElementWiseRsqrt");
    case OpId::kNeg: return unary("ElementWiseNeg");
    case OpId::kAbs: return unary("ElementWiseAbs");
    case OpId::kErf: return unary("ElementWiseErf");
    case OpId::kSoftmax: case OpId::kLogSoftmax:
      return unary(n->is_call(OpId::kSoftmax) ? "Softmax" : "LogSoftmax",
                   {QnnParam::scalar_uint("axis", static_cast<uint64_t>(norm_axis(n->kwarg_int("dim"), rank))),
                    QnnParam::scalar_float("beta", 1)});
    case OpId::kMean: {
      std::vector<int64_t> axes;
      const Arg& dims = n->kwarg("dim");
      size_t in_rank = n->input(0)->spec().rank();
      if (dims.is_none()) {
        for (size_t i = 0; i < in_rank; ++i) axes.push_back(static_cast<int64_t>(i));
      } else {
        for (int64_t d : dims.to_ints()) axes.push_back(norm_axis(d, in_rank));
      }
      uint32_t na = static_cast<uint32_t>(axes.size());
      return unary("ReduceMean", {QnnParam::uint_tensor("axes", std::move(axes), {na}),
                                  QnnParam::scalar_bool("keep_dims", n->kwarg_bool("keepdim"))});
    }
    case OpId::kLayerNorm: {
      KILN_ASSIGN_OR_RETURN(uint32_t x, value(n->input(0)));
      std::vector<uint32_t> ins = {x};
      for (size_t i = 1; i <= 2; ++i) {
        if (n->arg(i).is_none()) continue;
        KILN_ASSIGN_OR_RETURN(uint32_t t, value(n->arg(i).node()));
        ins.push_back(t);
      }
      if (ins.size() == 2) return unsupported("node '{}': layer_norm with a bias but no weight", n->name());
      size_t k = n->kwarg("normalized_shape").to_ints().size();
      std::vector<int64_t> axes;
      for (size_t i = rank - k; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
      KILN_ASSIGN_OR_RETURN(uint32_t out, output(n));
      add_op(n, "LayerNorm", std::move(ins), {out},
             {QnnParam::uint_tensor("axes", std::move(axes), {static_cast<uint32_t>(k)}),
              QnnParam::scalar_float("epsilon", n->kwarg_float("eps"))});
      return Status::Ok();
    }
    case OpId::kView:
    case OpId::kReshape:
    case OpId::kFlatten:
    case OpId::kUnflatten:
    case OpId::kSqueeze:
    case OpId::kUnsqueeze:
      return unary("Reshape");
    case OpId::kPermute: case OpId::kTranspose: {
      std::vector<int64_t> perm(rank);
      for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
      if (n->is_call(OpId::kPermute)) {
        perm = n->kwarg("dims").to_ints();
        for (int64_t& p : perm) p = norm_axis(p, rank);
      } else {
        std::swap(perm[norm_axis(n->kwarg_int("dim0"), rank)], perm[norm_axis(n->kwarg_int("dim1"), rank)]);
      }
      return unary("Transpose", {QnnParam::uint_tensor("perm", std::move(perm), {static_cast<uint32_t>(rank)})});
    }
    case OpId::kCat: {
      std::vector<uint32_t> ins;
      for (Node* in : n->arg(0).nodes()) {
        KILN_ASSIGN_OR_RETURN(uint32_t t, value(in));
        ins.push_back(t);
      }
      KILN_ASSIGN_OR_RETURN(uint32_t out, output(n));
      add_op(n, "Concat", std::move(ins), {out},
             {QnnParam::scalar_uint("axis", static_cast<uint64_t>(norm_axis(n->kwarg_int("dim"), rank)))});
      return Status::Ok();
    }
    case OpId::kSlice: case OpId::kSelect: {
      // StridedSlice over every dim: ranges [rank, 3] of begin, end, stride.
      const auto& in_dims = n->input(0)->spec().shape;
      size_t in_rank = in_dims.size();
      std::vector<int64_t> ranges;
      int64_t dim = norm_axis(n->kwarg_int("dim"), in_rank);
      for (size_t i = 0; i < in_rank; ++i) {
        int64_t size = in_dims[i].value();
        int64_t b = 0, e = size, s = 1;
        if (static_cast<int64_t>(i) == dim) {
          if (n->is_call(OpId::kSelect)) {
            b = n->kwarg_int("index");
            if (b < 0) b += size;
            e = b + 1;
          } else {
            const Arg& sa = n->kwarg("start");
            const Arg& ea = n->kwarg("end");
            b = sa.is_none() ? 0 : sa.to_int();
            e = ea.is_none() ? size : ea.to_int();
            if (b < 0) b += size;
            if (e < 0) e += size;
            b = std::clamp<int64_t>(b, 0, size);
            e = std::clamp<int64_t>(e, b, size);
            s = n->kwarg_int("step");
          }
        }
        ranges.insert(ranges.end(), {b, e, s});
      }
      return unary("StridedSlice", {QnnParam::int_tensor("ranges", std::move(ranges), {static_cast<uint32_t>(in_rank), 3}),
                                    QnnParam::scalar_bool("kiln_squeeze", n->is_call(OpId::kSelect))});
    }
    case OpId::kQuantizePerTensor: {
      KILN_ASSIGN_OR_RETURN(uint32_t x, value(n->input(0)));
      KILN_ASSIGN_OR_RETURN(std::vector<uint32_t> dims, dims_of(n));
      KILN_ASSIGN_OR_RETURN(uint32_t out, new_tensor(n, n->name(), std::move(dims), quant(n), n->spec().dtype, TensorType::kNative));
      tensor_of_[n->id()] = static_cast<int32_t>(out);
      // From float: Quantize; from another encoding (a requantization): Convert.
      add_op(n, is_fixed_point(g_.tensors[x].data_type) ? "Convert" : "Quantize", {x}, {out});
      return Status::Ok();
    }
    case OpId::kDequantizePerTensor: case OpId::kDequantizePerChannel:
      return unary("Dequantize");
    default:
      return unsupported("node '{}': op '{}' has no HTP builder", n->name(), n->target_name());
  }
}

Result<QnnGraph> Builder::build(std::string name) {
  g_.name = std::move(name);
  KILN_RETURN_IF_ERROR(fold());
  for (Node* n : ep_.user_inputs()) {
    KILN_ASSIGN_OR_RETURN(uint32_t id, value(n));
    g_.inputs.push_back(id);
  }
  for (Node* n : ep_.graph().nodes()) {
    if (n->op() != OpKind::kCallFunction || alias_[n->id()] != nullptr) continue;
    Status s = emit(n);
    if (!s.ok()) return s;
  }
  for (Node* n : ep_.user_outputs()) {
    KILN_ASSIGN_OR_RETURN(uint32_t id, value(n));
    const QnnTensor& t = g_.tensors[id];
    bool float_out = n->has_spec() && is_floating(n->spec().dtype) && is_fixed_point(t.data_type);
    if (t.type != TensorType::kNative || float_out) {
      // The graph returns a value of its own: real numbers where the program expects a float
      // (a folded value or weight at a partition boundary), else a copy of an input or constant.
      QnnTensor like = t;
      if (float_out) {
        like.data_type = fp16_ ? QnnDataType::kFloat16 : QnnDataType::kFloat32;
        like.encoding = {};
      }
      uint32_t copy = add_temp(like, n->name() + (float_out ? "_dq" : "_out"), like.dims);
      QnnOp op;
      op.name = n->name() + (float_out ? "_dequantize" : "_copy");
      op.type = float_out ? "Dequantize" : "Reshape";
      op.inputs = {id};
      op.outputs = {copy};
      op.debug_handle = n->meta.debug_handle;
      g_.ops.push_back(std::move(op));
      id = copy;
    }
    g_.tensors[id].type = TensorType::kAppRead;
    g_.outputs.push_back(id);
  }
  name_io_after_the_model();
  return std::move(g_);
}

// The graph's inputs and outputs take the names the program's callers know them by (an ONNX
// model's own I/O names, which lowering passes to the submodule), where no other tensor of the
// graph has that name: a context binary's I/O reads like the model's.
void Builder::name_io_after_the_model() {
  std::set<std::string> taken;
  for (const QnnTensor& t : g_.tensors) taken.insert(t.name);
  auto rename = [&](uint32_t id, const std::string& name) {
    if (name.empty() || name == g_.tensors[id].name || taken.count(name)) return;
    taken.erase(g_.tensors[id].name);
    g_.tensors[id].name = name;
    taken.insert(name);
  };
  std::vector<Node*> inputs = ep_.user_inputs();
  for (size_t i = 0; i < inputs.size() && i < g_.inputs.size(); ++i) {
    const InputSpec* spec = ep_.input_spec(inputs[i]);
    if (spec != nullptr) rename(g_.inputs[i], spec->name);
  }
  size_t k = 0;
  for (const OutputSpec& spec : ep_.signature().outputs) {
    if (spec.kind != OutputKind::kUserOutput) continue;
    if (k < g_.outputs.size()) rename(g_.outputs[k], spec.name);
    ++k;
  }
}

bool is_layout_sensitive(OpId op) {
  switch (op) {
    case OpId::kConvolution: case OpId::kMaxPool2d: case OpId::kAvgPool2d: case OpId::kAdaptiveAvgPool2d:
      return true;
    default:
      return false;
  }
}

bool has_builder(OpId op) {
  switch (op) {
    case OpId::kConvolution: case OpId::kMaxPool2d: case OpId::kAvgPool2d: case OpId::kAdaptiveAvgPool2d:
    case OpId::kLinear: case OpId::kMm: case OpId::kBmm: case OpId::kMatmul: case OpId::kAdd: case OpId::kSub:
    case OpId::kMul: case OpId::kDiv: case OpId::kRelu: case OpId::kRelu6: case OpId::kClamp:
    case OpId::kSigmoid: case OpId::kTanh: case OpId::kGelu: case OpId::kHardswish: case OpId::kHardsigmoid:
    case OpId::kSilu: case OpId::kLeakyRelu: case OpId::kExp: case OpId::kLog: case OpId::kSqrt:
    case OpId::kRsqrt: case OpId::kNeg: case OpId::kAbs: case OpId::kErf: case OpId::kSoftmax:
    case OpId::kLogSoftmax: case OpId::kMean: case OpId::kLayerNorm: case OpId::kView: case OpId::kReshape:
    case OpId::kFlatten:
    case OpId::kUnflatten:
    case OpId::kSqueeze:
    case OpId::kUnsqueeze:
    case OpId::kPermute:
    case OpId::kTranspose: case OpId::kCat: case OpId::kSlice: case OpId::kSelect:
    case OpId::kQuantizePerTensor: case OpId::kDequantizePerTensor: case OpId::kDequantizePerChannel:
      return true;
    default:
      return false;
  }
}

QnnEncoding encoding_of(const QuantAttrs& q, QnnDataType* data_type) {
  QnnEncoding e;
  bool per_axis = q.axis >= 0;
  e.axis = per_axis ? static_cast<int32_t>(q.axis) : -1;
  for (double s : q.scales) e.scales.push_back(static_cast<float>(s));
  for (int64_t z : q.zero_points) e.offsets.push_back(static_cast<int32_t>(-z));
  switch (q.dtype) {
    case DType::kU8: *data_type = QnnDataType::kUFixed8; e.bitwidth = 8; break;
    case DType::kU16: *data_type = QnnDataType::kUFixed16; e.bitwidth = 16; break;
    case DType::kI16: *data_type = QnnDataType::kSFixed16; e.bitwidth = 16; break;
    case DType::kI32: *data_type = QnnDataType::kSFixed32; e.bitwidth = 32; break;
    case DType::kI8:
      if (q.quant_min >= -8 && q.quant_max <= 7) {
        *data_type = QnnDataType::kSFixed4;
        e.bitwidth = 4;
      } else {
        *data_type = QnnDataType::kSFixed8;
        e.bitwidth = 8;
      }
      break;
    default:
      *data_type = QnnDataType::kUnknown;
      return e;
  }
  using K = QnnEncoding::Kind;
  e.kind = e.bitwidth == 4 ? (per_axis ? K::kBwAxisScaleOffset : K::kBwScaleOffset)
                           : (per_axis ? K::kAxisScaleOffset : K::kScaleOffset);
  return e;
}

Result<QnnGraph> build_qnn_graph(const ExportedProgram& submodule, const Options& options,
                                 std::string graph_name, std::vector<StaticData>* static_data) {
  Builder b(submodule, options, static_data);
  return b.build(std::move(graph_name));
}

}  // namespace kiln::htp
