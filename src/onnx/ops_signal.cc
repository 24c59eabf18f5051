// ONNX's signal-processing ops: the window functions (HannWindow, HammingWindow,
// BlackmanWindow) and DFT, built from kiln's element-wise ops and matrix products exactly as
// ONNX's reference computes them.
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "convert_util.h"
#include "onnx_tensor.h"

namespace kiln::onnx_import {
namespace {

// a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) for n in [0, size), N = size (periodic) or
// size - 1 (symmetric): Hann (0.5, 0.5, 0), Hamming (25/46, 21/46, 0), Blackman (0.42, 0.5, 0.08).
struct Window {
  double a0, a1, a2;
};

Status window(Importer& im, Window w) {
  KILN_ASSIGN_OR_RETURN(int64_t periodic, im.attr_int("periodic", 1));
  KILN_ASSIGN_OR_RETURN(int64_t out_type, im.attr_int("output_datatype", 1));
  const std::optional<DType> dtype = dtype_from_onnx(static_cast<int32_t>(out_type));
  if (!dtype || !(is_floating(*dtype) || is_integral(*dtype))) {
    return unsupported("attribute 'output_datatype': {} is not a numeric type",
                       onnx_type_name(static_cast<int32_t>(out_type)));
  }
  KILN_ASSIGN_OR_RETURN(TensorSpec ss, im.input_spec(0));
  if (ss.numel() != std::optional<int64_t>(1) || !is_integral(ss.dtype)) {
    return invalid_argument("input 'size': got {}, expected one integer", ss.to_string());
  }
  if (const Tensor* s = im.const_input(0)) {
    const double size = s->scalar_at(0);
    if (!(size >= 0) || size > static_cast<double>(int64_t{1} << 31)) {
      return invalid_argument("input 'size' is {}, expected a size in [0, 2^31]", size);
    }
    const auto n = static_cast<int64_t>(size);
    const double denom = static_cast<double>(periodic != 0 ? n : n - 1);
    Tensor t(*dtype, {n});
    for (int64_t i = 0; i < n; ++i) {
      const double a = 2 * std::numbers::pi * static_cast<double>(i) / denom;
      t.set_scalar_at(i, w.a0 - w.a1 * std::cos(a) + w.a2 * std::cos(2 * a));
    }
    im.set_output_const(0, std::move(t));
    return Status::Ok();
  }
  // The size is computed when the model runs: n from a run-time arange.
  KILN_ASSIGN_OR_RETURN(Node * size, im.input(0));
  KILN_ASSIGN_OR_RETURN(size, im.call(OpId::kReshape, {size}, {{"shape", std::vector<int64_t>{}}}));
  KILN_ASSIGN_OR_RETURN(size, im.call(OpId::kCast, {size}, {{"dtype", DType::kF32}}));
  auto scalar = [&](double v, const char* hint) {
    Tensor t(DType::kF32, {});
    t.set_scalar_at(0, v);
    return im.constant_node(std::move(t), hint);
  };
  KILN_ASSIGN_OR_RETURN(Node * n,
                        im.call(OpId::kDynamicArange, {scalar(0, "zero"), size, scalar(1, "one")}));
  Node* denom = size;
  if (periodic == 0) {
    KILN_ASSIGN_OR_RETURN(denom, im.call(OpId::kSub, {size, Arg(1.0)}));
  }
  KILN_ASSIGN_OR_RETURN(Node * a, im.call(OpId::kMul, {n, Arg(2 * std::numbers::pi)}));
  KILN_ASSIGN_OR_RETURN(a, im.call(OpId::kDiv, {a, denom}));
  KILN_ASSIGN_OR_RETURN(Node * c1, im.call(OpId::kCos, {a}));
  KILN_ASSIGN_OR_RETURN(Node * y, im.call(OpId::kMul, {c1, Arg(-w.a1)}));
  KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kAdd, {y, Arg(w.a0)}));
  if (w.a2 != 0) {
    KILN_ASSIGN_OR_RETURN(Node * a2, im.call(OpId::kMul, {a, Arg(2.0)}));
    KILN_ASSIGN_OR_RETURN(Node * c2, im.call(OpId::kCos, {a2}));
    KILN_ASSIGN_OR_RETURN(c2, im.call(OpId::kMul, {c2, Arg(w.a2)}));
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kAdd, {y, c2}));
  }
  if (*dtype != DType::kF32) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kCast, {y}, {{"dtype", *dtype}}));
  }
  im.set_output(0, y);
  return Status::Ok();
}

Status convert_hann_window(Importer& im) { return window(im, {0.5, 0.5, 0}); }
Status convert_hamming_window(Importer& im) { return window(im, {25.0 / 46, 21.0 / 46, 0}); }
Status convert_blackman_window(Importer& im) { return window(im, {0.42, 0.5, 0.08}); }

// DFT (opset 17) along a static axis of [batch, ..., n, 1 or 2] (real, or real and imaginary)
// as two matrix products with the cos and sin matrices: forward X[k] = sum x[m] e^(-2 pi i k m /
// L), inverse with e^(+...) / L. dft_length L pads with zeros or truncates; onesided keeps bins [0,
// L/2].
Status convert_dft(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 1));
  KILN_ASSIGN_OR_RETURN(int64_t inverse, im.attr_int("inverse", 0));
  KILN_ASSIGN_OR_RETURN(int64_t onesided, im.attr_int("onesided", 0));
  const auto rank = static_cast<int64_t>(xs.rank());
  if (rank < 2 || !xs.shape.back().is_static() ||
      (xs.shape.back().value() != 1 && xs.shape.back().value() != 2)) {
    return invalid_argument(
        "input 'input': got {}, expected [..., n, 1] (real) or [..., n, 2] (complex)",
        xs.to_string());
  }
  if (!is_floating(xs.dtype))
    return invalid_argument("input 'input': got {}, expected a float tensor", xs.to_string());
  if (axis < 0) axis += rank;
  if (axis < 1 || axis > rank - 2) {
    return invalid_argument("attribute 'axis': got {}, expected a signal axis in [1, {}]", axis,
                            rank - 2);
  }
  if (onesided != 0 && inverse != 0)
    return invalid_argument("attribute 'onesided': an inverse DFT cannot be one-sided");
  const Dim& nd = xs.shape[static_cast<size_t>(axis)];
  if (!nd.is_static())
    return unsupported("the signal length (dim {} of {}) must be known at import time", axis,
                       xs.to_string());
  const int64_t n = nd.value();
  int64_t length = n;
  if (im.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(auto l, im.require_ints(1, "input 'dft_length'"));
    if (l.size() != 1 || l[0] < 1 || l[0] > (int64_t{1} << 20)) {
      return invalid_argument("input 'dft_length': got {}, expected one length in [1, 2^20]",
                              fmt::join(l, ", "));
    }
    length = l[0];
  }
  const int64_t bins = onesided != 0 ? length / 2 + 1 : length;
  if (n * bins > (int64_t{1} << 26)) {
    return unsupported("a DFT of {} points into {} bins is too large for the matrix form", n, bins);
  }
  // cos and sin matrices [n, bins]; rows past the length (truncation) are zero.
  Tensor cos_m(DType::kF32, {n, bins}), sin_m(DType::kF32, {n, bins});
  const double sign = inverse != 0 ? 1.0 : -1.0,
               scale = inverse != 0 ? 1.0 / static_cast<double>(length) : 1.0;
  for (int64_t m = 0; m < n; ++m) {
    for (int64_t k = 0; k < bins; ++k) {
      double c = 0, s = 0;
      if (m < length) {
        const double a = 2 * std::numbers::pi * static_cast<double>((k * m) % length) /
                         static_cast<double>(length);
        c = std::cos(a) * scale;
        s = sign * std::sin(a) * scale;
      }
      cos_m.set_scalar_at(m * bins + k, c);
      sin_m.set_scalar_at(m * bins + k, s);
    }
  }
  Node* cm = im.constant_node(std::move(cos_m), "dft_cos", Role::kWeight);
  Node* sm = im.constant_node(std::move(sin_m), "dft_sin", Role::kWeight);
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  if (xs.dtype != DType::kF32) {
    KILN_ASSIGN_OR_RETURN(x, im.call(OpId::kCast, {x}, {{"dtype", DType::kF32}}));
  }
  // Real and imaginary parts [..., n] with the signal axis last.
  auto part = [&](int64_t index) -> Result<Node*> {
    KILN_ASSIGN_OR_RETURN(Node * p,
                          im.call(OpId::kSelect, {x}, {{"dim", rank - 1}, {"index", index}}));
    if (axis != rank - 2) {
      KILN_ASSIGN_OR_RETURN(p,
                            im.call(OpId::kTranspose, {p}, {{"dim0", axis}, {"dim1", rank - 2}}));
    }
    return p;
  };
  KILN_ASSIGN_OR_RETURN(Node * re, part(0));
  // (re + i im)(cos + i s) = (re cos - im s) + i (im cos + re s), s = sign * sin.
  KILN_ASSIGN_OR_RETURN(Node * out_re, im.call(OpId::kMatmul, {re, cm}));
  KILN_ASSIGN_OR_RETURN(Node * out_im, im.call(OpId::kMatmul, {re, sm}));
  if (xs.shape.back().value() == 2) {
    KILN_ASSIGN_OR_RETURN(Node * imag, part(1));
    KILN_ASSIGN_OR_RETURN(Node * is, im.call(OpId::kMatmul, {imag, sm}));
    KILN_ASSIGN_OR_RETURN(Node * ic, im.call(OpId::kMatmul, {imag, cm}));
    KILN_ASSIGN_OR_RETURN(out_re, im.call(OpId::kSub, {out_re, is}));
    KILN_ASSIGN_OR_RETURN(out_im, im.call(OpId::kAdd, {out_im, ic}));
  }
  KILN_ASSIGN_OR_RETURN(out_re, im.call(OpId::kUnsqueeze, {out_re}, {{"dim", rank - 1}}));
  KILN_ASSIGN_OR_RETURN(out_im, im.call(OpId::kUnsqueeze, {out_im}, {{"dim", rank - 1}}));
  KILN_ASSIGN_OR_RETURN(
      Node * y, im.call(OpId::kCat, {std::vector<Node*>{out_re, out_im}}, {{"dim", rank - 1}}));
  if (axis != rank - 2) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kTranspose, {y}, {{"dim0", axis}, {"dim1", rank - 2}}));
  }
  if (xs.dtype != DType::kF32) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kCast, {y}, {{"dtype", xs.dtype}}));
  }
  im.set_output(0, y);
  return Status::Ok();
}

constexpr OpEntry kSignalOps[] = {
    {"HannWindow", convert_hann_window},
    {"HammingWindow", convert_hamming_window},
    {"BlackmanWindow", convert_blackman_window},
    {"DFT", convert_dft},
};

}  // namespace

std::span<const OpEntry> signal_ops() { return kSignalOps; }

}  // namespace kiln::onnx_import
