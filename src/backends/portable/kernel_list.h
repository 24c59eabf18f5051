// The explicit list of portable kernels (internal). X(op_name, mode): mode kF32 means inputs of
// f16/bf16/f64 are computed in f32 and float outputs converted back; kAny means the kernel
// handles every dtype itself (data movement, casts, quantization).
#pragma once

#include "kiln/backends/portable/kernels.h"

#define KILN_PORTABLE_KERNELS(X)                                                           \
  X(add, kF32) X(sub, kF32) X(mul, kF32) X(div, kF32) X(pow, kF32)                         \
  X(neg, kF32) X(abs, kF32) X(exp, kF32) X(log, kF32) X(sqrt, kF32) X(rsqrt, kF32)         \
  X(erf, kF32) X(sigmoid, kF32) X(tanh, kF32) X(relu, kF32) X(relu6, kF32) X(gelu, kF32)   \
  X(silu, kF32) X(hardswish, kF32) X(hardsigmoid, kF32) X(leaky_relu, kF32)                \
  X(prelu, kF32) X(clamp, kF32)                                                            \
  X(where, kF32) X(eq, kF32) X(ne, kF32) X(lt, kF32) X(le, kF32) X(gt, kF32) X(ge, kF32)   \
  X(logical_not, kAny) X(logical_and, kAny) X(logical_or, kAny)                            \
  X(mm, kF32) X(bmm, kF32) X(matmul, kF32) X(linear, kF32) X(addmm, kF32)                  \
  X(convolution, kF32) X(conv_transpose2d, kF32) X(max_pool2d, kF32) X(avg_pool2d, kF32)   \
  X(adaptive_avg_pool2d, kF32)                                                             \
  X(batch_norm, kF32) X(layer_norm, kF32) X(group_norm, kF32) X(rms_norm, kF32)            \
  X(softmax, kF32) X(log_softmax, kF32)                                                    \
  X(mean, kF32) X(sum, kF32) X(amax, kF32) X(amin, kF32) X(argmax, kF32) X(cumsum, kF32)   \
  X(view, kAny) X(reshape, kAny) X(permute, kAny) X(transpose, kAny) X(squeeze, kAny)      \
  X(unsqueeze, kAny) X(flatten, kAny) X(expand, kAny) X(cat, kAny) X(split, kAny)          \
  X(slice, kAny) X(select, kAny) X(index_select, kAny) X(gather, kAny) X(embedding, kAny)  \
  X(pad, kAny) X(upsample_nearest2d, kAny) X(upsample_bilinear2d, kF32)                    \
  X(pixel_shuffle, kAny) X(pixel_unshuffle, kAny) X(index_put, kAny)                       \
  X(cast, kAny) X(full, kAny) X(arange, kAny)                                              \
  X(quantize_per_tensor, kAny) X(dequantize_per_tensor, kAny)                              \
  X(quantize_per_channel, kAny) X(dequantize_per_channel, kAny)                            \
  X(scaled_dot_product_attention, kF32)

namespace kiln::portable::k {
#define KILN_DECLARE_KERNEL(name, mode) \
  Status name(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs);
KILN_PORTABLE_KERNELS(KILN_DECLARE_KERNEL)
#undef KILN_DECLARE_KERNEL
}  // namespace kiln::portable::k
