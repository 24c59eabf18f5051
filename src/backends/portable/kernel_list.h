// The explicit list of portable kernels (internal). X(op_name, mode): mode kF32 means inputs of
// f16/bf16/f64 are computed in f32 and float outputs converted back; kF64 the same for f16/bf16
// while doubles are computed as doubles (ONNX's float64 arithmetic); kAny means the kernel
// handles every dtype itself (data movement, casts, quantization).
#pragma once

#include "kiln/backends/portable/kernels.h"

// clang-format off
#define KILN_PORTABLE_KERNELS(X)                                                           \
  X(add, kF64) X(sub, kF64) X(mul, kF64) X(div, kF64) X(pow, kF64)                         \
  X(maximum, kF64) X(minimum, kF64) X(remainder, kF64) X(fmod, kF64)                       \
  X(bitwise_left_shift, kAny) X(bitwise_right_shift, kAny) X(det, kF64)                     \
  X(grid_sample, kF32)                                                                     \
  X(neg, kF64) X(abs, kF64) X(exp, kF32) X(log, kF32) X(sqrt, kF32) X(rsqrt, kF32)         \
  X(erf, kF32) X(sigmoid, kF32) X(tanh, kF32) X(relu, kF64) X(relu6, kF64) X(gelu, kF32)   \
  X(silu, kF32) X(hardswish, kF32) X(hardsigmoid, kF32) X(leaky_relu, kF32)                \
  X(prelu, kF32) X(clamp, kF64)                                                            \
  X(sin, kF32) X(cos, kF32) X(tan, kF32) X(asin, kF32) X(acos, kF32) X(atan, kF32)         \
  X(sinh, kF32) X(cosh, kF32) X(asinh, kF32) X(acosh, kF32) X(atanh, kF32)                 \
  X(floor, kF64) X(ceil, kF64) X(round, kF64) X(sign, kF64)                                \
  X(where, kF64) X(eq, kF64) X(ne, kF64) X(lt, kF64) X(le, kF64) X(gt, kF64) X(ge, kF64)   \
  X(logical_not, kAny) X(logical_and, kAny) X(logical_or, kAny)                            \
  X(mm, kF32) X(bmm, kF32) X(matmul, kF32) X(linear, kF32) X(addmm, kF32)                  \
  X(convolution, kF32) X(conv_transpose2d, kF32) X(max_pool2d, kF32) X(avg_pool2d, kF32)   \
  X(adaptive_avg_pool2d, kF32)                                                             \
  X(batch_norm, kF32) X(layer_norm, kF32) X(group_norm, kF32) X(rms_norm, kF32)            \
  X(softmax, kF32) X(log_softmax, kF32)                                                    \
  X(mean, kF32) X(sum, kF32) X(prod, kF32) X(amax, kF32) X(amin, kF32) X(argmax, kF32)    \
  X(argmin, kF32) X(cumsum, kF32) X(topk, kF64)                                           \
  X(view, kAny) X(reshape, kAny) X(permute, kAny) X(transpose, kAny) X(squeeze, kAny)      \
  X(unsqueeze, kAny) X(flatten, kAny) X(unflatten, kAny) X(expand, kAny) X(cat, kAny)      \
  X(split, kAny)                                                                           \
  X(slice, kAny) X(select, kAny) X(index_select, kAny) X(gather, kAny) X(embedding, kAny)  \
  X(scatter, kAny) X(scatter_nd, kAny) X(gather_nd, kAny)                                  \
  X(pad, kAny) X(upsample_nearest2d, kAny) X(upsample_bilinear2d, kF32) X(resize, kF32)    \
  X(pixel_shuffle, kAny) X(pixel_unshuffle, kAny) X(index_put, kAny)                       \
  X(cast, kAny) X(full, kAny) X(arange, kAny)                                              \
  X(dynamic_reshape, kAny) X(dynamic_expand, kAny) X(dynamic_full, kAny)                   \
  X(dynamic_arange, kAny) X(dynamic_tile, kAny) X(dynamic_slice, kAny)                     \
  X(dynamic_unsqueeze, kAny) X(dynamic_squeeze, kAny) X(dynamic_sum, kAny)                 \
  X(dynamic_cumsum, kAny) X(dynamic_topk, kAny) X(dynamic_pad, kAny)                      \
  X(nonzero, kAny) X(non_max_suppression, kF32) X(unique, kAny)                            \
  X(quantize_per_tensor, kAny) X(dequantize_per_tensor, kAny)                              \
  X(quantize_per_channel, kAny) X(dequantize_per_channel, kAny)                            \
  X(scaled_dot_product_attention, kF32)                                                    \
  X(lstm, kF32) X(gru, kF32) X(rnn, kF32)
// clang-format on

namespace kiln::portable::k {
#define KILN_DECLARE_KERNEL(name, mode) \
  Status name(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs);
KILN_PORTABLE_KERNELS(KILN_DECLARE_KERNEL)
#undef KILN_DECLARE_KERNEL
}  // namespace kiln::portable::k
