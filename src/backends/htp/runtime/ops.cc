// The HTP runtime's ops: each QNN op type prepared for fixed-point or float (fp16) execution.
//
// Fixed-point ops run the integer kernels (kernels.h). Data movement (Reshape, Transpose,
// Concat, StridedSlice) moves codes with the portable kernels, which copy bytes. Float and fp16
// ops run kiln's portable kernels; fp16 graphs round every output to IEEE half.
#include "ops.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

namespace kiln::htp {
namespace {

using portable::KernelArgs;
using portable::KernelAttr;
using portable::KernelInput;

Status op_error(const QnnOp& op, const std::string& what) {
  return invalid_argument("HTP op '{}' ({}): {}", op.name, op.type, what);
}

int64_t param_int(const QnnOp& op, std::string_view name, int64_t fallback) {
  const QnnParam* p = op.param(name);
  return p != nullptr && !p->ints.empty() ? p->ints[0] : fallback;
}
double param_float(const QnnOp& op, std::string_view name, double fallback) {
  const QnnParam* p = op.param(name);
  return p != nullptr && !p->floats.empty() ? p->floats[0] : fallback;
}
std::vector<int64_t> param_ints(const QnnOp& op, std::string_view name) {
  const QnnParam* p = op.param(name);
  return p != nullptr ? p->ints : std::vector<int64_t>{};
}

// Runs portable kernel `name` and moves its result into the planned output tensor.
Status call_kernel(Frame& f, std::string_view name, const std::vector<const Tensor*>& ins,
                   std::vector<KernelAttr> attrs, uint32_t out) {
  portable::KernelFn fn = portable::find_kernel(name);
  if (fn == nullptr) return internal_error("no portable kernel '{}'", name);
  KernelArgs args;
  for (const Tensor* t : ins) args.inputs.push_back(KernelInput::of(t));
  args.attrs = std::move(attrs);
  std::vector<Tensor> outs;
  KILN_RETURN_IF_ERROR(fn(*f.kernels, args, &outs));
  Tensor& dst = f.values[out];
  if (outs.size() != 1 || outs[0].nbytes() != dst.nbytes() || outs[0].dtype() != dst.dtype()) {
    return internal_error("portable kernel '{}' returned {} bytes of {}, the plan has {} bytes of {}", name,
                          outs.empty() ? 0 : outs[0].nbytes(), outs.empty() ? "nothing" : dtype_name(outs[0].dtype()),
                          dst.nbytes(), dtype_name(dst.dtype()));
  }
  if (outs[0].data() != dst.data() && dst.nbytes() > 0) std::memcpy(f.out(out), outs[0].data(), dst.nbytes());
  return Status::Ok();
}

// ---- float ops through the portable kernels

class KernelOp final : public PreparedOp {
 public:
  KernelOp(std::string kernel, std::vector<uint32_t> ins, uint32_t out, std::vector<KernelAttr> attrs, bool fp16)
      : kernel_(std::move(kernel)), ins_(std::move(ins)), out_(out), attrs_(std::move(attrs)), fp16_(fp16) {}

  Status run(Frame& f) override {
    std::vector<const Tensor*> ins;
    for (uint32_t id : ins_) ins.push_back(&f.in(id));
    KILN_RETURN_IF_ERROR(call_kernel(f, kernel_, ins, attrs_, out_));
    if (fp16_) round_to_half(static_cast<float*>(f.out(out_)), static_cast<size_t>(f.values[out_].numel()));
    return Status::Ok();
  }

 private:
  std::string kernel_;
  std::vector<uint32_t> ins_;
  uint32_t out_;
  std::vector<KernelAttr> attrs_;
  bool fp16_;
};

// ---- fixed-point ops

class LutOp final : public PreparedOp {
 public:
  LutOp(Lut lut, uint32_t in, uint32_t out) : lut_(std::move(lut)), in_(in), out_(out) {}
  Status run(Frame& f) override { return lut_.run(f.in(in_).data(), f.out(out_), f.in(in_).numel()); }

 private:
  Lut lut_;
  uint32_t in_, out_;
};

// An op whose prepared kernel reads two buffers and writes one: K::run(a, b, out).
template <typename K>
class BinaryKernelOp final : public PreparedOp {
 public:
  BinaryKernelOp(K k, uint32_t a, uint32_t b, uint32_t out) : k_(std::move(k)), a_(a), b_(b), out_(out) {}
  Status run(Frame& f) override { return k_.run(f.in(a_).data(), f.in(b_).data(), f.out(out_)); }

 private:
  K k_;
  uint32_t a_, b_, out_;
};
// An op whose prepared float kernel reads one buffer and writes one: K::run(const float*, float*).
template <typename K>
class FloatKernelOp final : public PreparedOp {
 public:
  FloatKernelOp(K k, uint32_t in, uint32_t out) : k_(std::move(k)), in_(in), out_(out) {}
  Status run(Frame& f) override { return k_.run(f.in(in_).data_as<float>(), static_cast<float*>(f.out(out_))); }

 private:
  K k_;
  uint32_t in_, out_;
};

// An op whose prepared kernel reads one buffer and writes one: K::run(in, out).
template <typename K>
class UnaryKernelOp final : public PreparedOp {
 public:
  UnaryKernelOp(K k, uint32_t in, uint32_t out) : k_(std::move(k)), in_(in), out_(out) {}
  Status run(Frame& f) override { return k_.run(f.in(in_).data(), f.out(out_)); }

 private:
  K k_;
  uint32_t in_, out_;
};

class QuantizeOp final : public PreparedOp {
 public:
  QuantizeOp(Encoding enc, uint32_t in, uint32_t out, bool to_codes) : enc_(std::move(enc)), in_(in), out_(out), to_codes_(to_codes) {}
  Status run(Frame& f) override {
    const Tensor& x = f.in(in_);
    if (to_codes_) return quantize(x.data_as<float>(), f.out(out_), x.shape(), enc_, f.threads);
    return dequantize(x.data(), static_cast<float*>(f.out(out_)), x.shape(), enc_, f.threads);
  }

 private:
  Encoding enc_;
  uint32_t in_, out_;
  bool to_codes_;
};

// ---- Transpose of codes
//
// The portable permute walks the output one innermost run at a time through a callback, which
// for NCHW -> NHWC of 3 channels is a call per 3 bytes. Here the permute is collapsed first
// (size-1 dims dropped, output-adjacent dims that stay adjacent in the input merged), then the
// last two output dims are a 2-d transpose: a loop with the column count known at compile time
// for up to 4 columns (the channel-inner case), 32x32 tiles otherwise, memcpy for runs.

// out[i * cols + j] = in[i * sr + j * sc] for a rows x cols block.
template <typename T, int kCols>
void transpose_narrow(const T* in, T* out, int64_t rows, int64_t sr, int64_t sc) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int j = 0; j < kCols; ++j) out[i * kCols + j] = in[i * sr + j * sc];
  }
}

template <typename T>
void transpose_2d(const T* in, T* out, int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  switch (cols) {
    case 2:
      return transpose_narrow<T, 2>(in, out, rows, sr, sc);
    case 3:
      return transpose_narrow<T, 3>(in, out, rows, sr, sc);
    case 4:
      return transpose_narrow<T, 4>(in, out, rows, sr, sc);
    default:
      break;
  }
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) out[i * cols + j] = in[i * sr + j * sc];
      }
    }
  }
}

// Permutes a dense tensor of `shape` (elements of T) by `perm` (output dim k is input dim
// perm[k], already checked).
template <typename T>
void permute_dense(const T* in, T* out, const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
  std::vector<int64_t> in_stride(shape.size());
  for (int64_t s = 1, d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    in_stride[static_cast<size_t>(d)] = s;
    s *= shape[static_cast<size_t>(d)];
  }
  std::vector<int64_t> size, stride;  // collapsed output dims and their input strides
  for (int64_t p : perm) {
    const int64_t n = shape[static_cast<size_t>(p)], st = in_stride[static_cast<size_t>(p)];
    if (n == 1) continue;
    if (!size.empty() && stride.back() == st * n) {
      size.back() *= n;
      stride.back() = st;
      continue;
    }
    size.push_back(n);
    stride.push_back(st);
  }
  if (size.empty()) {
    out[0] = in[0];
    return;
  }
  if (size.size() == 1) {  // stride 1: nothing moves
    std::memcpy(out, in, static_cast<size_t>(size[0]) * sizeof(T));
    return;
  }
  const size_t r = size.size();
  const int64_t rows = size[r - 2], cols = size[r - 1], block = rows * cols;
  int64_t outer = 1;
  for (size_t d = 0; d + 2 < r; ++d) outer *= size[d];
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t o = 0; o < outer; ++o) {
    T* dst = out + o * block;
    if (stride[r - 1] == 1) {
      for (int64_t i = 0; i < rows; ++i) {
        std::memcpy(dst + i * cols, in + off + i * stride[r - 2], static_cast<size_t>(cols) * sizeof(T));
      }
    } else {
      transpose_2d(in + off, dst, rows, cols, stride[r - 2], stride[r - 1]);
    }
    // Next outer index (odometer over dims r-3 .. 0).
    for (size_t d = r - 2; d-- > 0;) {
      off += stride[d];
      if (++idx[d] < size[d]) break;
      off -= stride[d] * size[d];
      idx[d] = 0;
    }
  }
}

class TransposeOp final : public PreparedOp {
 public:
  TransposeOp(std::vector<int64_t> perm, uint32_t in, uint32_t out) : perm_(std::move(perm)), in_(in), out_(out) {}
  Status run(Frame& f) override {
    const Tensor& x = f.in(in_);
    const int64_t r = static_cast<int64_t>(x.rank());
    const size_t esize = dtype_size(x.dtype());
    std::vector<int64_t> perm = perm_;
    bool ok = static_cast<int64_t>(perm.size()) == r && (esize == 1 || esize == 2 || esize == 4) &&
              f.values[out_].nbytes() == x.nbytes();
    std::vector<bool> seen(perm.size(), false);
    for (auto& p : perm) {
      if (p < 0) p += r;
      ok = ok && p >= 0 && p < r && !seen[static_cast<size_t>(p)];
      if (ok) seen[static_cast<size_t>(p)] = true;
    }
    if (!ok) {  // anything unusual: the portable kernel's checks and messages
      return call_kernel(f, "permute", {&x}, {{"dims", perm_}}, out_);
    }
    if (x.numel() == 0) return Status::Ok();
    const std::vector<int64_t> shape = x.shape();
    if (esize == 1) {
      permute_dense(x.data_as<uint8_t>(), static_cast<uint8_t*>(f.out(out_)), shape, perm);
    } else if (esize == 2) {
      permute_dense(x.data_as<uint16_t>(), static_cast<uint16_t*>(f.out(out_)), shape, perm);
    } else {
      permute_dense(x.data_as<uint32_t>(), static_cast<uint32_t*>(f.out(out_)), shape, perm);
    }
    return Status::Ok();
  }

 private:
  std::vector<int64_t> perm_;
  uint32_t in_, out_;
};

class ConvertOp final : public PreparedOp {
 public:
  ConvertOp(Requantize k, uint32_t in, uint32_t out) : k_(std::move(k)), in_(in), out_(out) {}
  Status run(Frame& f) override { return k_.run(f.in(in_).data(), f.out(out_), f.in(in_).numel()); }

 private:
  Requantize k_;
  uint32_t in_, out_;
};

// Dequantize the fixed-point inputs, run a float kernel, quantize the result: for the ops the
// HTP computes with its own fixed-point approximations (softmax, layer norm, matmul for now).
class FloatFallbackOp final : public PreparedOp {
 public:
  FloatFallbackOp(std::unique_ptr<KernelOp> inner, std::vector<uint32_t> ins, uint32_t out,
                  std::vector<std::optional<Encoding>> in_enc, Encoding out_enc)
      : inner_(std::move(inner)), ins_(std::move(ins)), out_(out), in_enc_(std::move(in_enc)),
        out_enc_(std::move(out_enc)) {}

  Status run(Frame& f) override {
    // The float kernel reads dequantized copies and writes a float temporary, swapped into the
    // frame for the call and swapped back after.
    std::vector<std::pair<uint32_t, Tensor>> saved;
    for (size_t i = 0; i < ins_.size(); ++i) {
      if (!in_enc_[i]) continue;
      bool done = false;
      for (const auto& sv : saved) done |= sv.first == ins_[i];
      if (done) continue;  // the same tensor read twice (matmul(x, x))
      const Tensor& q = f.in(ins_[i]);
      Tensor x(DType::kF32, q.shape());
      KILN_RETURN_IF_ERROR(dequantize(q.data(), x.mutable_data_as<float>(), q.shape(), *in_enc_[i], f.threads));
      saved.emplace_back(ins_[i], std::exchange(f.values[ins_[i]], std::move(x)));
    }
    Tensor codes = std::exchange(f.values[out_], Tensor(DType::kF32, f.values[out_].shape()));
    Status s = inner_->run(f);
    Tensor y = std::exchange(f.values[out_], std::move(codes));
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) f.values[it->first] = std::move(it->second);
    KILN_RETURN_IF_ERROR(s);
    return quantize(y.data_as<float>(), f.out(out_), y.shape(), out_enc_, f.threads);
  }

 private:
  std::unique_ptr<KernelOp> inner_;
  std::vector<uint32_t> ins_;
  uint32_t out_;
  std::vector<std::optional<Encoding>> in_enc_;
  Encoding out_enc_;
};

// Concat of codes: inputs in another encoding are converted to the output's first.
class ConcatOp final : public PreparedOp {
 public:
  ConcatOp(std::vector<uint32_t> ins, uint32_t out, int64_t axis, std::vector<std::optional<Requantize>> convert)
      : ins_(std::move(ins)), out_(out), axis_(axis), convert_(std::move(convert)) {}
  Status run(Frame& f) override {
    std::vector<Tensor> converted(ins_.size());
    std::vector<const Tensor*> parts;
    for (size_t i = 0; i < ins_.size(); ++i) {
      const Tensor& x = f.in(ins_[i]);
      if (convert_[i]) {
        converted[i] = Tensor(f.values[out_].dtype(), x.shape());
        KILN_RETURN_IF_ERROR(convert_[i]->run(x.data(), converted[i].mutable_data(), x.numel()));
        parts.push_back(&converted[i]);
      } else {
        parts.push_back(&x);
      }
    }
    portable::KernelFn fn = portable::find_kernel("cat");
    KernelArgs args;
    std::vector<const Tensor*> list(parts.begin(), parts.end());
    args.inputs.push_back(KernelInput::of_list(list));
    args.attrs.push_back({"dim", axis_});
    std::vector<Tensor> outs;
    KILN_RETURN_IF_ERROR(fn(*f.kernels, args, &outs));
    std::memcpy(f.out(out_), outs[0].data(), outs[0].nbytes());
    return Status::Ok();
  }

 private:
  std::vector<uint32_t> ins_;
  uint32_t out_;
  int64_t axis_;
  std::vector<std::optional<Requantize>> convert_;
};

class CopyOp final : public PreparedOp {
 public:
  CopyOp(uint32_t in, uint32_t out) : in_(in), out_(out) {}
  Status run(Frame& f) override {
    const Tensor& x = f.in(in_);
    if (x.nbytes() != f.values[out_].nbytes()) return internal_error("reshape: {} bytes into {}", x.nbytes(), f.values[out_].nbytes());
    if (x.data() != f.values[out_].data() && x.nbytes() > 0) std::memcpy(f.out(out_), x.data(), x.nbytes());
    return Status::Ok();
  }

 private:
  uint32_t in_, out_;
};

// StridedSlice as one slice per sliced dim (codes or floats alike), then a reshape to the output.
class SliceOp final : public PreparedOp {
 public:
  SliceOp(uint32_t in, uint32_t out, std::vector<int64_t> ranges) : in_(in), out_(out), ranges_(std::move(ranges)) {}
  Status run(Frame& f) override {
    Tensor cur = f.in(in_);
    for (size_t d = 0; d * 3 < ranges_.size(); ++d) {
      int64_t b = ranges_[d * 3], e = ranges_[d * 3 + 1], s = ranges_[d * 3 + 2];
      if (b == 0 && e == cur.dim(d) && s == 1) continue;
      KernelArgs args;
      args.inputs.push_back(KernelInput::of(&cur));
      args.attrs = {{"dim", static_cast<int64_t>(d)}, {"start", b}, {"end", e}, {"step", s}};
      std::vector<Tensor> outs;
      KILN_RETURN_IF_ERROR(portable::find_kernel("slice")(*f.kernels, args, &outs));
      cur = std::move(outs[0]);
    }
    if (cur.nbytes() != f.values[out_].nbytes()) {
      return internal_error("strided slice: {} bytes into {}", cur.nbytes(), f.values[out_].nbytes());
    }
    if (cur.nbytes() > 0) std::memcpy(f.out(out_), cur.data(), cur.nbytes());
    return Status::Ok();
  }

 private:
  uint32_t in_, out_;
  std::vector<int64_t> ranges_;
};

Result<UnaryFunction> unary_for(const QnnOp& op, float* alpha, float* beta) {
  const std::string& t = op.type;
  if (t == "Relu") return UnaryFunction::kRelu;
  if (t == "ReluMinMax") {
    *alpha = static_cast<float>(param_float(op, "min_value", 0));
    *beta = static_cast<float>(param_float(op, "max_value", 6));
    return UnaryFunction::kReluMinMax;
  }
  if (t == "Sigmoid") return UnaryFunction::kSigmoid;
  if (t == "Tanh") return UnaryFunction::kTanh;
  if (t == "Gelu") return param_int(op, "kiln_tanh_approximation", 0) ? UnaryFunction::kGeluTanh : UnaryFunction::kGelu;
  if (t == "HardSwish") return UnaryFunction::kHardSwish;
  if (t == "Prelu") {
    *alpha = static_cast<float>(param_float(op, "coefficient", 0.01));
    return UnaryFunction::kLeakyRelu;
  }
  if (t == "ElementWiseNeuron") {
    int64_t which = param_int(op, "operation", -1);
    if (which == 3) {
      *alpha = static_cast<float>(param_float(op, "alpha", 1.0 / 6));
      *beta = static_cast<float>(param_float(op, "beta", 0.5));
      return UnaryFunction::kHardSigmoid;
    }
    if (which == 7) return UnaryFunction::kSilu;
    return op_error(op, fmt::format("unknown neuron operation {}", which));
  }
  if (t == "ElementWiseExp") return UnaryFunction::kExp;
  if (t == "ElementWiseLog") return UnaryFunction::kLog;
  if (t == "ElementWiseSquareRoot") return UnaryFunction::kSqrt;
  if (t == "ElementWiseRsqrt") return UnaryFunction::kRsqrt;
  if (t == "ElementWiseNeg") return UnaryFunction::kNeg;
  if (t == "ElementWiseAbs") return UnaryFunction::kAbs;
  return not_found("not a unary op");
}

// The portable kernel (and attributes) for a float op.
Result<std::unique_ptr<KernelOp>> float_op(const QnnGraph& g, const QnnOp& op, bool fp16) {
  const std::string& t = op.type;
  uint32_t out = op.outputs[0];
  std::vector<uint32_t> ins = op.inputs;
  auto make = [&](std::string kernel, std::vector<KernelAttr> attrs) {
    return std::make_unique<KernelOp>(std::move(kernel), ins, out, std::move(attrs), fp16);
  };
  if (t == "FullyConnected") return make("linear", {});
  if (t == "MatMul") return make("matmul", {});
  if (t == "ElementWiseAdd") return make("add", {});
  if (t == "ElementWiseSubtract") return make("sub", {});
  if (t == "ElementWiseMultiply") return make("mul", {});
  if (t == "ElementWiseDivide") return make("div", {});
  if (t == "Relu") return make("relu", {});
  if (t == "ReluMinMax") {
    return make("clamp", {{"min", param_float(op, "min_value", 0)}, {"max", param_float(op, "max_value", 6)}});
  }
  if (t == "Sigmoid") return make("sigmoid", {});
  if (t == "Tanh") return make("tanh", {});
  if (t == "Gelu") return make("gelu", {{"approximate", std::string(param_int(op, "kiln_tanh_approximation", 0) ? "tanh" : "none")}});
  if (t == "HardSwish") return make("hardswish", {});
  if (t == "Prelu") return make("leaky_relu", {{"negative_slope", param_float(op, "coefficient", 0.01)}});
  if (t == "ElementWiseNeuron") {
    if (param_int(op, "operation", -1) == 3) {
      return make("hardsigmoid", {{"alpha", param_float(op, "alpha", 1.0 / 6)}, {"beta", param_float(op, "beta", 0.5)}});
    }
    if (param_int(op, "operation", -1) == 7) return make("silu", {});
  }
  if (t == "ElementWiseExp") return make("exp", {});
  if (t == "ElementWiseLog") return make("log", {});
  if (t == "ElementWiseSquareRoot") return make("sqrt", {});
  if (t == "ElementWiseRsqrt") return make("rsqrt", {});
  if (t == "ElementWiseNeg") return make("neg", {});
  if (t == "ElementWiseAbs") return make("abs", {});
  if (t == "ElementWiseErf") return make("erf", {});
  if (t == "Softmax" || t == "LogSoftmax") {
    return make(t == "Softmax" ? "softmax" : "log_softmax", {{"dim", param_int(op, "axis", -1)}});
  }
  if (t == "ReduceMean") return make("mean", {{"dim", param_ints(op, "axes")}, {"keepdim", param_int(op, "keep_dims", 0) != 0}});
  if (t == "LayerNorm") {
    std::vector<int64_t> normalized;
    for (int64_t a : param_ints(op, "axes")) normalized.push_back(g.tensors[op.inputs[0]].dims[a]);
    return make("layer_norm", {{"normalized_shape", normalized}, {"eps", param_float(op, "epsilon", 1e-5)}});
  }
  if (t == "Transpose") return make("permute", {{"dims", param_ints(op, "perm")}});
  return op_error(op, "no float implementation of this op type");
}

Result<Conv2dParams> conv_params(const QnnGraph& g, const QnnOp& op, int threads) {
  const QnnTensor& in0 = g.tensors[op.inputs[0]];
  const QnnTensor& out = g.tensors[op.outputs[0]];
  if (op.inputs.size() < 2) return op_error(op, "needs a weight");
  const QnnTensor& w = g.tensors[op.inputs[1]];
  if (in0.dims.size() != 4 || w.dims.size() != 4 || out.dims.size() != 4) return op_error(op, "needs 4-D NHWC input, HWIO weight and output");
  const std::string& t = op.type;
    Conv2dParams p;
    p.batch = in0.dims[0];
    p.in_h = in0.dims[1];
    p.in_w = in0.dims[2];
    p.in_c = in0.dims[3];
    p.kernel_h = w.dims[0];
    p.kernel_w = w.dims[1];
    p.out_c = w.dims[3];
    auto stride = param_ints(op, "stride"), dil = param_ints(op, "dilation"), pad = param_ints(op, "pad_amount");
    if (stride.size() != 2 || dil.size() != 2 || pad.size() != 4) return op_error(op, "needs stride [2], dilation [2], pad_amount [2, 2]");
    p.stride_h = stride[0];
    p.stride_w = stride[1];
    p.dilation_h = dil[0];
    p.dilation_w = dil[1];
    p.pad_top = pad[0];
    p.pad_bottom = pad[1];
    p.pad_left = pad[2];
    p.pad_right = pad[3];
    p.groups = t == "DepthWiseConv2d" ? p.in_c : param_int(op, "group", 1);
    p.threads = threads;
  return p;
}

Result<Pool2dParams> pool_params(const QnnGraph& g, const QnnOp& op, int threads) {
  const QnnTensor& in0 = g.tensors[op.inputs[0]];
  auto fs = param_ints(op, "filter_size"), stride = param_ints(op, "stride"), pad = param_ints(op, "pad_amount");
  if (in0.dims.size() != 4 || fs.size() != 2 || stride.size() != 2 || pad.size() != 4) return op_error(op, "needs NHWC input, filter_size, stride, pad_amount");
  Pool2dParams p;
  p.batch = in0.dims[0];
  p.in_h = in0.dims[1];
  p.in_w = in0.dims[2];
  p.channels = in0.dims[3];
  p.kernel_h = fs[0];
  p.kernel_w = fs[1];
  p.stride_h = stride[0];
  p.stride_w = stride[1];
  p.pad_top = pad[0];
  p.pad_bottom = pad[1];
  p.pad_left = pad[2];
  p.pad_right = pad[3];
  p.ceil_mode = param_int(op, "rounding_mode", 0) == 1;
  p.count_include_pad = param_int(op, "count_pad_for_edges", 1) != 0;
  p.threads = threads;
  return p;
}

}  // namespace

std::vector<int64_t> shape_of(const QnnTensor& t) { return {t.dims.begin(), t.dims.end()}; }

Encoding kernel_encoding(const QnnTensor& t) {
  Encoding e;
  e.dtype = storage_dtype(t.data_type);
  e.bitwidth = t.encoding.bitwidth;
  e.scales = t.encoding.scales;
  e.offsets = t.encoding.offsets;
  e.axis = t.encoding.per_axis() ? t.encoding.axis : -1;
  bool is_signed = e.dtype == DType::kI8 || e.dtype == DType::kI16 || e.dtype == DType::kI32;
  int bw = std::clamp(static_cast<int>(t.encoding.bitwidth), 1, 32);
  e.qmin = is_signed ? -(int64_t{1} << (bw - 1)) : 0;
  e.qmax = is_signed ? (int64_t{1} << (bw - 1)) - 1 : (int64_t{1} << bw) - 1;
  return e;
}

Result<std::unique_ptr<PreparedOp>> prepare_op(const QnnGraph& g, const QnnOp& op, const std::vector<Tensor>& statics,
                                               bool fp16, int threads, ConvAlgorithm conv) {
  if (op.outputs.size() != 1) return op_error(op, fmt::format("{} outputs, the HTP ops here have one", op.outputs.size()));
  if (op.inputs.empty()) return op_error(op, "no input");
  const QnnTensor& out = g.tensors[op.outputs[0]];
  const QnnTensor& in0 = g.tensors[op.inputs[0]];
  const std::string& t = op.type;
  auto status_of = [&](Status s) { return s.ok() ? s : s.with_context(fmt::format("HTP op '{}' ({})", op.name, t)); };

  // Type-independent data movement.
  if (t == "Reshape") return std::unique_ptr<PreparedOp>(new CopyOp(op.inputs[0], op.outputs[0]));
  if (t == "StridedSlice") {
    auto ranges = param_ints(op, "ranges");
    if (ranges.size() != in0.dims.size() * 3) return op_error(op, "ranges must be [rank, 3]");
    for (size_t d = 0; d < in0.dims.size(); ++d) {
      int64_t b = ranges[d * 3], e = ranges[d * 3 + 1], s = ranges[d * 3 + 2];
      if (s < 1 || b < 0 || e < b || e > static_cast<int64_t>(in0.dims[d])) {
        return op_error(op, fmt::format("range [{}, {}, {}] of dim {} (size {})", b, e, s, d, in0.dims[d]));
      }
    }
    return std::unique_ptr<PreparedOp>(new SliceOp(op.inputs[0], op.outputs[0], std::move(ranges)));
  }
  if (t == "Quantize" || t == "Dequantize") {
    bool to_codes = t == "Quantize";
    const QnnTensor& fixed = to_codes ? out : in0;
    if (!is_fixed_point(fixed.data_type)) return op_error(op, "its fixed-point side has no encoding");
    Encoding enc = kernel_encoding(fixed);
    KILN_RETURN_IF_ERROR(status_of(validate_encoding(enc, "encoding")));
    return std::unique_ptr<PreparedOp>(new QuantizeOp(enc, op.inputs[0], op.outputs[0], to_codes));
  }
  bool fixed = is_fixed_point(out.data_type);
  if (!fixed && (t == "Conv2d" || t == "DepthWiseConv2d")) {
    KILN_ASSIGN_OR_RETURN(Conv2dParams p, conv_params(g, op, threads));
    const Tensor& w = statics[op.inputs[1]];
    if (!w.defined() || w.dtype() != DType::kF32) return op_error(op, "its weight must be a static float tensor");
    std::span<const float> bias;
    if (op.inputs.size() > 2) {
      const Tensor& b = statics[op.inputs[2]];
      if (!b.defined() || b.dtype() != DType::kF32) return op_error(op, "its bias must be a static float tensor");
      bias = std::span<const float>(b.data_as<float>(), static_cast<size_t>(b.numel()));
    }
    auto k = FloatConv2d::prepare(p, std::span<const float>(w.data_as<float>(), static_cast<size_t>(w.numel())), bias, fp16);
    if (!k.ok()) return status_of(k.status());
    return std::unique_ptr<PreparedOp>(new FloatKernelOp<FloatConv2d>(std::move(k).value(), op.inputs[0], op.outputs[0]));
  }
  if (!fixed && (t == "PoolMax2d" || t == "PoolAvg2d")) {
    KILN_ASSIGN_OR_RETURN(Pool2dParams p, pool_params(g, op, threads));
    auto k = FloatPool2d::prepare(t == "PoolMax2d" ? PoolKind::kMax : PoolKind::kAverage, p, fp16);
    if (!k.ok()) return status_of(k.status());
    return std::unique_ptr<PreparedOp>(new FloatKernelOp<FloatPool2d>(std::move(k).value(), op.inputs[0], op.outputs[0]));
  }
  if (!fixed && t == "Concat") {
    std::vector<std::optional<Requantize>> none(op.inputs.size());
    return std::unique_ptr<PreparedOp>(new ConcatOp(op.inputs, op.outputs[0], param_int(op, "axis", 0), std::move(none)));
  }
  if (!fixed) {
    KILN_ASSIGN_OR_RETURN(auto k, float_op(g, op, fp16));
    return std::unique_ptr<PreparedOp>(std::move(k));
  }

  Encoding oe = kernel_encoding(out);
  // A relu folded into the producer narrows its output range (use_fold_relu).
  if (op.param("kiln_clamp_min") != nullptr) {
    double lo = param_float(op, "kiln_clamp_min", -INFINITY), hi = param_float(op, "kiln_clamp_max", INFINITY);
    if (std::isfinite(lo)) oe.qmin = std::max(oe.qmin, quantize_value(static_cast<float>(lo), oe.scale(), oe.zero_point(), oe.qmin, oe.qmax));
    if (std::isfinite(hi)) oe.qmax = std::min(oe.qmax, quantize_value(static_cast<float>(hi), oe.scale(), oe.zero_point(), oe.qmin, oe.qmax));
  }
  auto enc_of = [&](uint32_t id) -> Result<Encoding> {
    const QnnTensor& x = g.tensors[id];
    if (!is_fixed_point(x.data_type)) {
      return op_error(op, fmt::format("input '{}' is {} in a fixed-point op", x.name, qnn_data_type_name(x.data_type)));
    }
    return kernel_encoding(x);
  };
  KILN_ASSIGN_OR_RETURN(Encoding ie, enc_of(op.inputs[0]));

  if (t == "Convert") {
    KILN_ASSIGN_OR_RETURN(Requantize k, Requantize::prepare(ie, oe, threads));
    return std::unique_ptr<PreparedOp>(new ConvertOp(std::move(k), op.inputs[0], op.outputs[0]));
  }
  float alpha = 0, beta = 0;
  if (auto fn = unary_for(op, &alpha, &beta); fn.ok()) {
    auto lut = Lut::prepare(ie, oe, unary_function(*fn, alpha, beta), threads);
    if (!lut.ok()) return status_of(lut.status());
    return std::unique_ptr<PreparedOp>(new LutOp(std::move(lut).value(), op.inputs[0], op.outputs[0]));
  } else if (fn.status().code() != StatusCode::kNotFound) {
    return fn.status();
  }
  if (t == "ElementWiseErf") {
    auto lut = Lut::prepare(ie, oe, [](float x) { return static_cast<float>(std::erf(static_cast<double>(x))); }, threads);
    if (!lut.ok()) return status_of(lut.status());
    return std::unique_ptr<PreparedOp>(new LutOp(std::move(lut).value(), op.inputs[0], op.outputs[0]));
  }
  if (t.rfind("ElementWise", 0) == 0 && op.inputs.size() == 2) {
    BinaryOp bop;
    if (t == "ElementWiseAdd") bop = BinaryOp::kAdd;
    else if (t == "ElementWiseSubtract") bop = BinaryOp::kSubtract;
    else if (t == "ElementWiseMultiply") bop = BinaryOp::kMultiply;
    else if (t == "ElementWiseDivide") bop = BinaryOp::kDivide;
    else if (t == "ElementWiseMaximum") bop = BinaryOp::kMaximum;
    else if (t == "ElementWiseMinimum") bop = BinaryOp::kMinimum;
    else return op_error(op, "unknown elementwise op");
    KILN_ASSIGN_OR_RETURN(Encoding be, enc_of(op.inputs[1]));
    auto k = QuantBinary::prepare(bop, shape_of(in0), ie, shape_of(g.tensors[op.inputs[1]]), be, oe, threads);
    if (!k.ok()) return status_of(k.status());
    return std::unique_ptr<PreparedOp>(new BinaryKernelOp<QuantBinary>(std::move(k).value(), op.inputs[0], op.inputs[1], op.outputs[0]));
  }
  auto weight_bias = [&](std::span<const std::byte>* w, Encoding* we, std::vector<int32_t>* bias,
                         size_t out_channels) -> Status {
    const Tensor& wt = statics[op.inputs[1]];
    if (!wt.defined()) return op_error(op, "its weight is not static");
    KILN_ASSIGN_OR_RETURN(*we, enc_of(op.inputs[1]));
    *w = std::span<const std::byte>(static_cast<const std::byte*>(wt.data()), wt.nbytes());
    if (op.inputs.size() < 3) return Status::Ok();
    const Tensor& bt = statics[op.inputs[2]];
    const QnnTensor& bq = g.tensors[op.inputs[2]];
    if (!bt.defined() || bt.dtype() != DType::kI32 || static_cast<size_t>(bt.numel()) != out_channels) {
      return op_error(op, fmt::format("bias '{}' must be {} static int32 values", bq.name, out_channels));
    }
    // The bias must be in the accumulator's scale (input x weight); rescale it when it is not.
    Encoding benc = kernel_encoding(bq);
    bias->resize(out_channels);
    const int32_t* b = bt.data_as<int32_t>();
    for (size_t c = 0; c < out_channels; ++c) {
      double acc_scale = static_cast<double>(ie.scale()) * we->scale(c);
      double bs = benc.scales.empty() ? acc_scale : benc.scale(c);
      double v = (static_cast<double>(b[c]) + (benc.offsets.empty() ? 0 : benc.offsets[benc.is_per_axis() ? c : 0])) * bs / acc_scale;
      if (std::abs(bs / acc_scale - 1) < 1e-6) v = static_cast<double>(b[c]);
      (*bias)[c] = static_cast<int32_t>(std::clamp(std::nearbyint(v), -2147483648.0, 2147483647.0));
    }
    return Status::Ok();
  };
  if (t == "Conv2d" || t == "DepthWiseConv2d") {
    KILN_ASSIGN_OR_RETURN(Conv2dParams p, conv_params(g, op, threads));
    std::span<const std::byte> wb;
    Encoding we;
    std::vector<int32_t> bias;
    KILN_RETURN_IF_ERROR(weight_bias(&wb, &we, &bias, static_cast<size_t>(p.out_c)));
    auto k = QuantConv2d::prepare(p, ie, wb, we, bias, oe, conv);
    if (!k.ok()) return status_of(k.status());
    return std::unique_ptr<PreparedOp>(new UnaryKernelOp<QuantConv2d>(std::move(k).value(), op.inputs[0], op.outputs[0]));
  }
  if (t == "FullyConnected") {
    const QnnTensor& w = g.tensors[op.inputs[1]];
    if (w.dims.size() != 2 || in0.dims.empty() || in0.dims.back() != w.dims[1]) return op_error(op, "weight must be [N, K] with K the input's last dim");
    FullyConnectedParams p;
    p.k = w.dims[1];
    p.n = w.dims[0];
    p.m = static_cast<int64_t>(in0.num_elements()) / std::max<int64_t>(p.k, 1);
    p.threads = threads;
    std::span<const std::byte> wb;
    Encoding we;
    std::vector<int32_t> bias;
    KILN_RETURN_IF_ERROR(weight_bias(&wb, &we, &bias, static_cast<size_t>(p.n)));
    auto k = QuantFullyConnected::prepare(p, ie, wb, we, bias, oe);
    if (!k.ok()) return status_of(k.status());
    return std::unique_ptr<PreparedOp>(new UnaryKernelOp<QuantFullyConnected>(std::move(k).value(), op.inputs[0], op.outputs[0]));
  }
  if (t == "PoolMax2d" || t == "PoolAvg2d") {
    KILN_ASSIGN_OR_RETURN(Pool2dParams p, pool_params(g, op, threads));
    auto k = QuantPool2d::prepare(t == "PoolMax2d" ? PoolKind::kMax : PoolKind::kAverage, p, ie, oe);
    if (!k.ok()) return status_of(k.status());
    return std::unique_ptr<PreparedOp>(new UnaryKernelOp<QuantPool2d>(std::move(k).value(), op.inputs[0], op.outputs[0]));
  }
  if (t == "ReduceMean" || t == "ReduceSum") {
    auto k = QuantReduce::prepare(shape_of(in0), param_ints(op, "axes"), t == "ReduceMean",
                                  param_int(op, "keep_dims", 0) != 0, ie, oe, threads);
    if (!k.ok()) return status_of(k.status());
    return std::unique_ptr<PreparedOp>(new UnaryKernelOp<QuantReduce>(std::move(k).value(), op.inputs[0], op.outputs[0]));
  }
  if (t == "Transpose") {
    if (ie.scales != oe.scales || ie.offsets != oe.offsets) return op_error(op, "a transpose must keep its encoding");
    return std::unique_ptr<PreparedOp>(new TransposeOp(param_ints(op, "perm"), op.inputs[0], op.outputs[0]));
  }
  if (t == "Concat") {
    std::vector<std::optional<Requantize>> convert;
    for (uint32_t id : op.inputs) {
      KILN_ASSIGN_OR_RETURN(Encoding e, enc_of(id));
      if (e.dtype == oe.dtype && e.scales == oe.scales && e.offsets == oe.offsets) {
        convert.emplace_back();
        continue;
      }
      auto k = Requantize::prepare(e, oe, threads);
      if (!k.ok()) return status_of(k.status());
      convert.emplace_back(std::move(k).value());
    }
    return std::unique_ptr<PreparedOp>(new ConcatOp(op.inputs, op.outputs[0], param_int(op, "axis", 0), std::move(convert)));
  }
  if (t == "MatMul") {
    KILN_ASSIGN_OR_RETURN(Encoding be, enc_of(op.inputs[1]));
    MatMulParams p;
    p.a_shape = shape_of(in0);
    p.b_shape = shape_of(g.tensors[op.inputs[1]]);
    p.transpose_a = param_int(op, "transpose_in0", 0) != 0;
    p.transpose_b = param_int(op, "transpose_in1", 0) != 0;
    p.threads = threads;
    auto k = QuantMatMul::prepare(p, ie, be, oe);
    if (!k.ok()) return status_of(k.status());
    return std::unique_ptr<PreparedOp>(new BinaryKernelOp<QuantMatMul>(std::move(k).value(), op.inputs[0], op.inputs[1], op.outputs[0]));
  }
  if (t == "Softmax") {
    auto k = QuantSoftmax::prepare(shape_of(in0), param_int(op, "axis", -1), ie, oe,
                                   static_cast<float>(param_float(op, "beta", 1)), threads);
    if (!k.ok()) return status_of(k.status());
    return std::unique_ptr<PreparedOp>(new UnaryKernelOp<QuantSoftmax>(std::move(k).value(), op.inputs[0], op.outputs[0]));
  }
  if (t == "LayerNorm") {
    auto axes = param_ints(op, "axes");
    if (axes.empty()) return op_error(op, "no axes");
    for (size_t i = 1; i < axes.size(); ++i) {
      if (axes[i] != axes[i - 1] + 1 || axes.back() + 1 != static_cast<int64_t>(in0.dims.size())) {
        return op_error(op, "axes must be the trailing dims");
      }
    }
    // gamma and beta as floats (dequantized when they are fixed point).
    std::vector<float> params[2];
    for (size_t i = 1; i < op.inputs.size() && i <= 2; ++i) {
      const Tensor& v = statics[op.inputs[i]];
      const QnnTensor& qt = g.tensors[op.inputs[i]];
      if (!v.defined()) return op_error(op, fmt::format("'{}' must be static", qt.name));
      params[i - 1].resize(static_cast<size_t>(v.numel()));
      if (is_fixed_point(qt.data_type)) {
        KILN_RETURN_IF_ERROR(dequantize(v.data(), params[i - 1].data(), v.shape(), kernel_encoding(qt)));
      } else if (v.dtype() == DType::kF32) {
        std::copy(v.data_as<float>(), v.data_as<float>() + v.numel(), params[i - 1].begin());
      } else {
        return op_error(op, fmt::format("'{}' must be float or fixed point", qt.name));
      }
    }
    auto k = QuantLayerNorm::prepare(shape_of(in0), axes.front(), params[0], params[1],
                                     static_cast<float>(param_float(op, "epsilon", 1e-5)), ie, oe, false, threads);
    if (!k.ok()) return status_of(k.status());
    return std::unique_ptr<PreparedOp>(new UnaryKernelOp<QuantLayerNorm>(std::move(k).value(), op.inputs[0], op.outputs[0]));
  }
  // The rest (LogSoftmax, ...): float inside, as kernels.h documents for HTP's approximations.
  KILN_ASSIGN_OR_RETURN(auto inner, float_op(g, op, /*fp16=*/false));
  std::vector<std::optional<Encoding>> in_enc;
  for (uint32_t id : op.inputs) {
    if (is_fixed_point(g.tensors[id].data_type)) {
      in_enc.push_back(kernel_encoding(g.tensors[id]));
    } else {
      in_enc.emplace_back();
    }
  }
  return std::unique_ptr<PreparedOp>(new FloatFallbackOp(std::move(inner), op.inputs, op.outputs[0], std::move(in_enc), oe));
}

}  // namespace kiln::htp
