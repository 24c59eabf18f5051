// The HTP backend's kernel library: Qualcomm HTP numerics on the CPU (issue 11, "Execution").
//
// IR-free: kernels see raw buffers, shapes and QNN encodings, never graph nodes. Quantized ops
// compute in integers and are defined bit for bit by the arithmetic documented here (the tests'
// naive reference implements the same definitions); ops that HTP runs through its own fixed-point
// approximations (softmax, layer norm, division, the lookup-table functions) are computed here
// exactly in float between a dequantize and a quantize, and say so.
//
// Conventions shared with the executor:
//   - QNN encodings: real = scale * (q + offset), offset = -zero_point.
//   - Activations are NHWC. Conv weights are HWIO [KH, KW, Cin/groups, Cout] (depthwise: groups ==
//     Cin, [KH, KW, 1, Cin * multiplier]); fully-connected weights are [N, K] (out, in).
//   - Bias is int32 in the accumulator's scale (input scale * weight scale[c]), offset 0.
//   - Heavy ops are prepared objects: prepare() does every per-weight step once (checks, packing,
//     oneDNN primitive creation, per-channel multipliers, zero-point compensation); run() reuses
//     it. A prepared object owns scratch buffers: run() on one object is not reentrant (use one
//     object per concurrently executing thread). Bad parameters give a Status, never an abort.
//
// Threads: each prepared op takes its thread count at prepare. Debian's libdnnl 2.6.3 is built
// with DNNL_CPU_RUNTIME = DNNL_RUNTIME_OMP (GNU libgomp): oneDNN reads the calling thread's OpenMP
// nthreads ICV (omp_get_max_threads) when it creates a primitive (to choose its blocking) and when
// it executes one (the size of its parallel region). The kernels set that ICV to the op's thread
// count around primitive creation and execution (omp_set_num_threads, looked up in the loaded
// libgomp) and restore it afterwards, and run their own loops on the same OpenMP threads, so one
// op never uses more threads than it was prepared with and no second pool competes for the cores.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/core/status.h"

namespace kiln::htp {

// ---------------------------------------------------------------------------------------------
// Encodings and fixed-point arithmetic

/// A QNN quantization encoding: real = scale * (q + offset), offset = -zero_point.
struct Encoding {
  DType dtype = DType::kU8;      ///< storage: kU8, kI8, kU16, kI16 or kI32
  int bitwidth = 8;              ///< 4, 8, 16 or 32; 4-bit values live in 8-bit storage
  std::vector<float> scales;     ///< one per tensor, or one per slice of `axis`
  std::vector<int32_t> offsets;  ///< QNN offsets (-zero point), as many as scales
  int32_t axis = -1;             ///< -1: per tensor; else the dimension scales run along
  int64_t qmin = 0;              ///< smallest representable code (may be narrower than storage)
  int64_t qmax = 255;            ///< largest representable code

  /// True for a per-axis (per-channel) encoding.
  bool is_per_axis() const { return axis >= 0; }
  /// Number of (scale, offset) pairs.
  size_t size() const { return scales.size(); }
  /// Zero point of channel i (channel 0 for a per-tensor encoding): -offsets[i].
  int32_t zero_point(size_t i = 0) const { return -offsets[is_per_axis() ? i : 0]; }
  /// Scale of channel i (channel 0 for a per-tensor encoding).
  float scale(size_t i = 0) const { return scales[is_per_axis() ? i : 0]; }
};

/// A per-tensor encoding. bitwidth 0 means the storage's width (8 for kU8/kI8, ...).
Encoding make_encoding(DType dtype, float scale, int32_t zero_point, int64_t qmin, int64_t qmax,
                       int bitwidth = 0);
/// A per-tensor encoding over the storage's whole range.
Encoding make_encoding(DType dtype, float scale, int32_t zero_point);
/// A per-axis encoding (one scale and zero point per slice of `axis`).
Encoding make_per_axis_encoding(DType dtype, std::vector<float> scales,
                                std::vector<int32_t> zero_points, int32_t axis, int64_t qmin,
                                int64_t qmax, int bitwidth = 0);
/// Checks an encoding: a quantized storage dtype, a bitwidth that fits it, qmin <= qmax inside
/// the bitwidth's range, positive finite scales, matching counts, zero points inside the
/// storage range. `what` names the tensor in the message ("conv2d: weight encoding: ...").
Status validate_encoding(const Encoding& enc, std::string_view what);

/// A real multiplier as a Q31 mantissa and a power of two:
/// real ~= multiplier * 2^(shift - 31), multiplier in [2^30, 2^31) (0 for real == 0).
struct FixedPointMultiplier {
  int32_t multiplier = 0;  ///< Q31 mantissa
  int32_t shift = 0;       ///< power-of-two exponent (positive: the real value is >= 1)
};

/// The fixed-point form of `real` (TFLite's QuantizeMultiplier): frexp, mantissa rounded half
/// away from zero to 31 bits (a carry to 2^31 bumps the exponent). real must be finite and >= 0
/// (anything else gives {0, 0}); a real below 2^-62 gives {0, 0} too.
FixedPointMultiplier quantize_multiplier(double real);

/// acc * multiplier * 2^(shift - 31), rounded half away from zero, computed exactly with a
/// 128-bit intermediate and saturated to int64. This is the definition every quantized kernel
/// here requantizes with.
int64_t requantize(int64_t acc, FixedPointMultiplier m);

/// requantize(acc, m) + zero_point, clamped to [qmin, qmax]: one output code.
int64_t requantize_output(int64_t acc, FixedPointMultiplier m, int32_t zero_point, int64_t qmin,
                          int64_t qmax);

/// f32 -> code, bit for bit as kiln's portable quantize_per_tensor (torch 1.13's arithmetic):
/// clamp(float(zero_point) + nearbyint(x * (1.0f / scale)), qmin, qmax), every step in f32,
/// rounding half to even; NaN gives qmin, +inf qmax, -inf qmin.
int64_t quantize_value(float x, float scale, int32_t zero_point, int64_t qmin, int64_t qmax);
/// code -> f32: float(q - zero_point) * scale, in f32 (as the portable dequantize).
float dequantize_value(int64_t q, float scale, int32_t zero_point);

// ---------------------------------------------------------------------------------------------
// Quantize, dequantize, requantize (QNN Quantize, Dequantize, Convert)

/// Quantizes `shape`'s elements of `in` into `out` (storage of enc.dtype) with quantize_value;
/// a per-axis encoding applies scale[i] to the slice i of dimension enc.axis. Both buffers are
/// the caller's, valid for the call.
Status quantize(const float* in, void* out, std::span<const int64_t> shape, const Encoding& enc,
                int threads = 1);
/// Dequantizes codes (storage enc.dtype) into f32 with dequantize_value, per tensor or per axis.
Status dequantize(const void* in, float* out, std::span<const int64_t> shape, const Encoding& enc,
                  int threads = 1);

/// QNN Convert: codes in one per-tensor encoding to codes in another,
/// out = requantize_output(q - zp_in, quantize_multiplier(s_in / s_out), zp_out, qmin, qmax).
/// 8- and 16-bit inputs are served by a table built at prepare; 32-bit inputs are computed.
class Requantize {
 public:
  /// Checks both encodings (per tensor) and builds the table.
  static Result<Requantize> prepare(const Encoding& in, const Encoding& out, int threads = 1);
  /// Converts `count` codes; `in` and `out` are the caller's (they may not overlap unless equal
  /// and of one element size).
  Status run(const void* in, void* out, int64_t count) const;

 private:
  Encoding in_, out_;
  FixedPointMultiplier m_;
  std::vector<int32_t> table_;  // indexed by code - storage min; empty for 32-bit inputs
  int threads_ = 1;
};

// ---------------------------------------------------------------------------------------------
// Elementwise unary by lookup table

/// The float functions the executor builds lookup tables from.
enum class UnaryFunction {
  kIdentity,
  kRelu,        ///< max(x, 0)
  kReluMinMax,  ///< clamp(x, alpha, beta) (relu6: alpha 0, beta 6)
  kLeakyRelu,   ///< x >= 0 ? x : alpha * x
  kPRelu,       ///< as kLeakyRelu (a scalar slope)
  kElu,         ///< x > 0 ? x : alpha * (exp(x) - 1)
  kSigmoid,     ///< 1 / (1 + exp(-x))
  kTanh,
  kGelu,         ///< x * 0.5 * (1 + erf(x / sqrt 2)) (exact; torch's approximate="none")
  kGeluTanh,     ///< torch's approximate="tanh"
  kHardSigmoid,  ///< clamp(x / 6 + 0.5, 0, 1) (torch); alpha/beta given: clamp(alpha*x+beta, 0, 1)
  kHardSwish,    ///< x * relu6(x + 3) / 6
  kSilu,         ///< x * sigmoid(x)
  kMish,         ///< x * tanh(softplus(x))
  kSoftplus,     ///< log(1 + exp(x))
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kReciprocal,
  kAbs,
  kNeg,
  kSquare,
  kSin,
  kCos,
};

/// The float function for `fn`, evaluated in double and rounded to float (alpha/beta as the
/// enum says; unused otherwise).
std::function<float(float)> unary_function(UnaryFunction fn, float alpha = 0.0f, float beta = 0.0f);

/// An elementwise unary op as a table over every input code:
/// table[q] = quantize_value(f(dequantize_value(q))) in the output encoding. 256 entries for
/// 8-bit (and 4-bit) inputs, 65536 for 16-bit; 32-bit inputs are rejected.
class Lut {
 public:
  /// Evaluates f once per input code; f must be callable until prepare returns (not kept).
  static Result<Lut> prepare(const Encoding& in, const Encoding& out,
                             const std::function<float(float)>& f, int threads = 1);
  /// out[i] = table[in[i]] for `count` codes (buffers are the caller's).
  Status run(const void* in, void* out, int64_t count) const;
  /// The output code for input code q (q inside the input storage range).
  int64_t lookup(int64_t q) const { return table_[static_cast<size_t>(q - in_min_)]; }

 private:
  DType in_dtype_ = DType::kU8, out_dtype_ = DType::kU8;
  int64_t in_min_ = 0;
  std::vector<int32_t> table_;
  int threads_ = 1;
};

// ---------------------------------------------------------------------------------------------
// Elementwise binary with NumPy broadcasting

/// Binary elementwise ops.
enum class BinaryOp { kAdd, kSubtract, kMultiply, kMaximum, kMinimum, kDivide };

/// The NumPy broadcast of two shapes, or an error naming the mismatching dimension.
Result<std::vector<int64_t>> broadcast_shapes(std::span<const int64_t> a,
                                              std::span<const int64_t> b);

/// A quantized binary op; each input has its own per-tensor encoding, the output another.
///
/// Add, subtract, maximum, minimum (TFLite's scheme, in int64): with L = 20 when both inputs
/// have at most 8 bits, else 15, and S = 2 * max(s_a, s_b),
///   a' = requantize((q_a - zp_a) << L, qm(s_a / S)),  b' likewise,
///   r  = a' + b' | a' - b' | max(a', b') | min(a', b'),
///   out = requantize_output(r, qm(S / (2^L * s_out)), zp_out, qmin, qmax).
/// Multiply: out = requantize_output((q_a - zp_a) * (q_b - zp_b), qm(s_a * s_b / s_out), ...).
/// Divide goes through float: out = quantize_value(deq(a) / deq(b)) (a real 0 divisor gives
/// +-inf or NaN, which quantize to qmax / qmin).
/// (qm = quantize_multiplier.) When both inputs have at most 8 bits the whole op is a 64K-entry
/// table over (q_a, q_b) built at prepare from the same definition.
class QuantBinary {
 public:
  /// Checks the shapes broadcast and the encodings are per tensor.
  static Result<QuantBinary> prepare(BinaryOp op, std::span<const int64_t> a_shape,
                                     const Encoding& a, std::span<const int64_t> b_shape,
                                     const Encoding& b, const Encoding& out, int threads = 1);
  /// Computes the broadcast result into `out` (output_shape() elements).
  Status run(const void* a, const void* b, void* out) const;
  /// The broadcast output shape.
  const std::vector<int64_t>& output_shape() const { return out_shape_; }
  /// One output code from two input codes: the op's definition (tests, tables).
  int64_t compute(int64_t qa, int64_t qb) const;

 private:
  BinaryOp op_ = BinaryOp::kAdd;
  Encoding a_, b_, out_;
  std::vector<int64_t> out_shape_, a_strides_, b_strides_;
  int shift_ = 20;
  FixedPointMultiplier ma_, mb_, mo_;
  std::vector<uint16_t> table_;   // (qa - min_a) << 8 | (qb - min_b) -> code - out storage min
  std::vector<int64_t> ta_, tb_;  // a', b' per input code (add/sub/max/min, 16-bit inputs)
  int threads_ = 1;
};

// ---------------------------------------------------------------------------------------------
// Pooling and reductions (NHWC)

/// Pooling kinds.
enum class PoolKind { kMax, kAverage };

/// Geometry of a 2-d pooling over NHWC.
struct Pool2dParams {
  int64_t batch = 1, in_h = 1, in_w = 1, channels = 1;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool ceil_mode = false;         ///< output size rounds up (a window must start inside the
                                  ///< input or the top/left padding, as torch)
  bool count_include_pad = true;  ///< average: divide by the window clipped to the padded input
  int threads = 1;
  /// Output height (0 if the geometry is invalid; prepare checks it).
  int64_t out_h() const;
  /// Output width.
  int64_t out_w() const;
};

/// A quantized 2-d pooling.
///
/// Max: the maximum code of each window's input elements (padding never wins); when the output
/// encoding differs from the input's the maximum is then converted as Requantize does (monotone,
/// so max-then-convert equals convert-then-max). A window with no input element gives the
/// output zero point.
/// Average: s = sum of (q - zp_in) over the window's input elements (padding is real 0), then
/// out = requantize_output(s, qm(s_in / (s_out * count)), ...), one multiplier per possible count
/// (a single rounding: the division folds into the multiplier). count is the window clipped to
/// the padded input (count_include_pad) or the number of input elements in it.
class QuantPool2d {
 public:
  /// Checks geometry and encodings (per tensor, same dtype family).
  static Result<QuantPool2d> prepare(PoolKind kind, const Pool2dParams& p, const Encoding& in,
                                     const Encoding& out);
  /// NHWC in -> NHWC out ([batch, out_h, out_w, channels]).
  Status run(const void* in, void* out) const;

 private:
  PoolKind kind_ = PoolKind::kMax;
  Pool2dParams p_;
  Encoding in_, out_;
  std::vector<FixedPointMultiplier> count_m_;  // average: index = count
  std::vector<int32_t> convert_;               // max with a different output encoding
};

/// Quantized mean (or sum) over arbitrary axes: s = sum of (q - zp_in) over the reduced elements,
/// out = requantize_output(s, qm(s_in / (s_out * count)), ...) with count = 1 for a sum. The
/// global average pool is a mean over NHWC axes {1, 2}.
class QuantReduce {
 public:
  /// `axes` may be negative (counted from the end); duplicates are an error. `keep_dims` only
  /// affects output_shape().
  static Result<QuantReduce> prepare(std::span<const int64_t> shape, std::span<const int64_t> axes,
                                     bool mean, bool keep_dims, const Encoding& in,
                                     const Encoding& out, int threads = 1);
  /// Reduces `in` (shape elements) into `out` (output_shape() elements).
  Status run(const void* in, void* out) const;
  /// The output shape (reduced axes kept as 1 or dropped).
  const std::vector<int64_t>& output_shape() const { return out_shape_; }

 private:
  std::vector<int64_t> shape_, out_shape_;
  std::vector<bool> reduced_;
  int64_t count_ = 1;
  Encoding in_, out_;
  FixedPointMultiplier m_;
  int threads_ = 1;
};

// ---------------------------------------------------------------------------------------------
// Convolution and fully connected

/// How a quantized conv / fully connected / matmul computes its integer accumulators.
enum class ConvAlgorithm {
  kAuto,    ///< kOneDnn when exact for the operands (not for 16-bit depthwise), else kDirect
  kOneDnn,  ///< oneDNN u8s8s32 (VNNI); 16-bit operands split into 8-bit digits (exact)
  kDirect,  ///< kiln's own loops (int32/int64); depthwise has its own NHWC kernel
};

/// Geometry of a 2-d convolution over NHWC with HWIO weights.
struct Conv2dParams {
  int64_t batch = 1, in_h = 1, in_w = 1, in_c = 1;
  int64_t out_c = 1;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  int threads = 1;
  /// Output height (0 if the geometry is invalid; prepare checks it).
  int64_t out_h() const;
  /// Output width.
  int64_t out_w() const;
};

/// Name of an algorithm ("auto", "onednn", "direct").
std::string_view algorithm_name(ConvAlgorithm a);

struct ConvEngine;  // the prepared integer engine shared by conv and fully connected

/// A prepared quantized 2-d convolution.
///
/// acc[n,oh,ow,c] = bias[c] + sum over (kh, kw, ci) of (x - zp_x) * (w - zp_w[c]), where taps in
/// the padding read x = zp_x (real 0); integers are exact (int32 for 8-bit activations and
/// 8/4-bit weights, int64 otherwise); out = requantize_output(acc, qm(s_x * s_w[c] / s_out),
/// zp_out, qmin, qmax).
///
/// Activations u8/i8/u16/i16 (a signed input is shifted to unsigned with its zero point, which
/// changes nothing above); weights i8 (8- or 4-bit) or i16 (also u8/u16), per tensor or per
/// axis 3 (Cout); output any quantized dtype.
///
/// kOneDnn: the padded input is materialised once per run (padding = zp_x), split into 8-bit
/// planes (one for 8-bit activations, low and high bytes for 16-bit: x = 256 x_hi + x_lo); the
/// weights minus their zero points are split at prepare into balanced base-256 signed digits
/// (one digit when they fit s8; base 128 without VNNI, whose vpmaddubsw saturates int16 pairs).
/// Each (plane, digit) product is one oneDNN u8s8s32 convolution, exact in int32 because prepare
/// checks 255 * sum |digit| < 2^31 per output channel; the int64 combination
/// sum 256^p B^q raw_pq is the exact accumulator.
class QuantConv2d {
 public:
  /// Validates everything and prepares the engine. `weights` holds KH*KW*(Cin/groups)*Cout
  /// values of weight.dtype (HWIO), checked inside [qmin, qmax]; `bias` is empty or Cout int32
  /// values. Nothing is kept of the caller's buffers.
  static Result<QuantConv2d> prepare(const Conv2dParams& p, const Encoding& input,
                                     std::span<const std::byte> weights, const Encoding& weight,
                                     std::span<const int32_t> bias, const Encoding& output,
                                     ConvAlgorithm algorithm = ConvAlgorithm::kAuto);
  QuantConv2d();
  QuantConv2d(QuantConv2d&&) noexcept;
  QuantConv2d& operator=(QuantConv2d&&) noexcept;
  ~QuantConv2d();

  /// NHWC input codes [batch, in_h, in_w, in_c] -> NHWC output codes [batch, out_h, out_w,
  /// out_c]; buffers are the caller's.
  Status run(const void* input, void* output);
  /// The algorithm prepare chose.
  ConvAlgorithm algorithm() const;
  /// [batch, out_h, out_w, out_c].
  std::array<int64_t, 4> output_shape() const;

 private:
  std::unique_ptr<ConvEngine> engine_;
};

/// Geometry of a fully connected layer: [M, K] x [N, K]^T.
struct FullyConnectedParams {
  int64_t m = 1, k = 1, n = 1;
  int threads = 1;
};

/// A prepared quantized fully connected layer: out[m, n] = requantize_output(bias[n] +
/// sum_k (x[m,k] - zp_x) * (w[n,k] - zp_w[n]), qm(s_x * s_w[n] / s_out), ...). Weights [N, K],
/// per tensor or per axis 0. Same dtypes and algorithms as QuantConv2d (oneDNN inner product
/// for kOneDnn).
class QuantFullyConnected {
 public:
  /// As QuantConv2d::prepare; `weights` holds N*K values.
  static Result<QuantFullyConnected> prepare(const FullyConnectedParams& p, const Encoding& input,
                                             std::span<const std::byte> weights,
                                             const Encoding& weight, std::span<const int32_t> bias,
                                             const Encoding& output,
                                             ConvAlgorithm algorithm = ConvAlgorithm::kAuto);
  QuantFullyConnected();
  QuantFullyConnected(QuantFullyConnected&&) noexcept;
  QuantFullyConnected& operator=(QuantFullyConnected&&) noexcept;
  ~QuantFullyConnected();

  /// [M, K] codes -> [M, N] codes.
  Status run(const void* input, void* output);
  /// The algorithm prepare chose.
  ConvAlgorithm algorithm() const;

 private:
  std::unique_ptr<ConvEngine> engine_;
};

// ---------------------------------------------------------------------------------------------
// MatMul of two activations

/// Shapes of a batched matmul: a [..., M, K] (transpose_a: [..., K, M]) times b [..., K, N]
/// (transpose_b: [..., N, K]); the batch dimensions broadcast (NumPy), both ranks >= 2.
struct MatMulParams {
  std::vector<int64_t> a_shape, b_shape;
  bool transpose_a = false, transpose_b = false;
  int threads = 1;
};

struct MatMulEngine;

/// A prepared quantized matmul of two activations (attention's QK^T and PV):
/// acc[m, n] = sum_k (a[m, k] - zp_a) * (b[k, n] - zp_b), out = requantize_output(acc,
/// qm(s_a * s_b / s_out), zp_out, qmin, qmax). Per-tensor encodings, 8- or 16-bit inputs.
///
/// kOneDnn: a is made unsigned and split into 8-bit planes as in QuantConv2d; b (unsigned,
/// b_u) into base-B digits shifted to signed, b_u = sum_q B^q d_q + c_b; each (plane, digit)
/// product is a oneDNN u8s8s32 matmul, and the zero points enter through the row sums of a and
/// the column sums of the digits: acc = sum a_u D - z~ sum_k a_u - zu_a sum_k D + K zu_a z~, with
/// D = sum_q B^q d_q and z~ = zu_b - c_b (exact; prepare checks 255 * B/2 * K < 2^31).
class QuantMatMul {
 public:
  /// Checks shapes and encodings and creates the oneDNN primitive.
  static Result<QuantMatMul> prepare(const MatMulParams& p, const Encoding& a, const Encoding& b,
                                     const Encoding& out,
                                     ConvAlgorithm algorithm = ConvAlgorithm::kAuto);
  QuantMatMul();
  QuantMatMul(QuantMatMul&&) noexcept;
  QuantMatMul& operator=(QuantMatMul&&) noexcept;
  ~QuantMatMul();

  /// a, b codes -> out codes (output_shape()); buffers are the caller's.
  Status run(const void* a, const void* b, void* out);
  /// [broadcast batch..., M, N].
  const std::vector<int64_t>& output_shape() const;
  /// The algorithm prepare chose.
  ConvAlgorithm algorithm() const;

 private:
  std::unique_ptr<MatMulEngine> engine_;
};

// ---------------------------------------------------------------------------------------------
// Ops computed in float between a dequantize and a quantize
//
// HTP runs these through its own fixed-point approximations, which are not public; kiln computes
// them exactly in double from the dequantized codes and quantizes the result with
// quantize_value (so they are within half a step of the true result, plus the f32 rounding).

/// Quantized softmax along one axis: with x_i = s_in * (q_i - q_max) (q_max the row's largest
/// code), y_i = exp(beta * x_i) / sum_j exp(beta * x_j) in double, out = quantize_value(float(y)).
/// The exponentials come from a table over code differences built at prepare.
class QuantSoftmax {
 public:
  /// `axis` may be negative. Per-tensor 8- or 16-bit input.
  static Result<QuantSoftmax> prepare(std::span<const int64_t> shape, int64_t axis,
                                      const Encoding& in, const Encoding& out, float beta = 1.0f,
                                      int threads = 1);
  /// in -> out, both `shape` elements.
  Status run(const void* in, void* out) const;

 private:
  int64_t outer_ = 1, count_ = 1, inner_ = 1;
  Encoding in_, out_;
  std::vector<double> exp_;  // exp(beta * s_in * -d) for code difference d
  int threads_ = 1;
};

/// Quantized layer norm over the trailing dimensions from `axis`: with x = s_in * (q - zp_in)
/// and per row mean and population variance (double),
///   y = (x - mean) / sqrt(var + epsilon) * gamma + beta,   out = quantize_value(float(y));
/// rms: y = x / sqrt(mean(x^2) + epsilon) * gamma + beta (RMSNorm). gamma and beta hold one value
/// per normalized element (the product of the trailing dimensions) or are empty (1 and 0).
class QuantLayerNorm {
 public:
  /// Copies gamma and beta.
  static Result<QuantLayerNorm> prepare(std::span<const int64_t> shape, int64_t axis,
                                        std::span<const float> gamma, std::span<const float> beta,
                                        float epsilon, const Encoding& in, const Encoding& out,
                                        bool rms = false, int threads = 1);
  /// in -> out, both `shape` elements.
  Status run(const void* in, void* out) const;

 private:
  int64_t rows_ = 1, size_ = 1;
  std::vector<float> gamma_, beta_;
  double epsilon_ = 1e-5;
  bool rms_ = false;
  Encoding in_, out_;
  int threads_ = 1;
};

// ---------------------------------------------------------------------------------------------
// fp16

/// IEEE half (bits) -> float, exact.
float half_to_float(uint16_t h);
/// float -> IEEE half bits, rounding to nearest even (vcvtps2ph's rounding): overflow gives
/// +-inf, NaN stays NaN (quiet, sign and the top payload bits kept), subnormals are produced.
uint16_t float_to_half(float f);
/// Rounds n floats in place to the nearest half value (float_to_half then half_to_float), with
/// F16C vcvtps2ph when the CPU has it.
void round_to_half(float* data, size_t n);

struct FloatConvState;

/// A prepared float NHWC conv2d (HWIO weights, groups and depthwise as QuantConv2d) through
/// oneDNN's f32 convolution: zero padding, accumulation in f32 in oneDNN's order. With `fp16`
/// (HTP's fp16 precision) the weights and bias are rounded to half at prepare and every output
/// to half after the op; inputs are taken as given (the previous op already rounded them).
class FloatConv2d {
 public:
  /// `weights` holds KH*KW*(Cin/groups)*Cout floats (HWIO), `bias` is empty or Cout floats;
  /// both are copied (packed).
  static Result<FloatConv2d> prepare(const Conv2dParams& p, std::span<const float> weights,
                                     std::span<const float> bias, bool fp16);
  FloatConv2d();
  FloatConv2d(FloatConv2d&&) noexcept;
  FloatConv2d& operator=(FloatConv2d&&) noexcept;
  ~FloatConv2d();

  /// NHWC f32 in -> NHWC f32 out ([batch, out_h, out_w, out_c]); buffers are the caller's.
  Status run(const float* input, float* output);
  /// [batch, out_h, out_w, out_c].
  std::array<int64_t, 4> output_shape() const;

 private:
  std::unique_ptr<FloatConvState> state_;
};

/// A float NHWC pooling with the window rules of QuantPool2d (padding never wins a max; the
/// average divides a double sum by the same count). With `fp16` outputs are rounded to half.
class FloatPool2d {
 public:
  /// Checks the geometry.
  static Result<FloatPool2d> prepare(PoolKind kind, const Pool2dParams& p, bool fp16);
  /// NHWC in -> NHWC out; buffers are the caller's. A window with no input element gives 0.
  Status run(const float* in, float* out) const;

 private:
  PoolKind kind_ = PoolKind::kMax;
  Pool2dParams p_;
  bool fp16_ = false;
};

}  // namespace kiln::htp
