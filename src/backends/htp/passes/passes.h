// The HTP capture passes (ExecuTorch's backends/qualcomm/_passes), one per file. Each takes the
// program, returns whether it changed it, and states what it needs and guarantees. capture.cc
// lists them in order; tests call them one by one.
#pragma once

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln::htp {

/// Decomposes the kiln ops that HTP has no single op for into ops it has, as torch's core ATen
/// decomposition table does for ExecuTorch (get_decomp_table), keeping pixel_shuffle,
/// pixel_unshuffle, hardsigmoid, hardswish and softmax whole. 1:1 rewrites (relu6 -> clamp,
/// transpose -> permute, view/flatten -> reshape) apply everywhere; 1:n ones (silu -> x *
/// sigmoid(x), rms_norm -> pow/mean/add/rsqrt/mul, which RecomposeRmsNorm folds back) only to
/// float nodes: a node that reads a dequantize or feeds a quantize stays whole, since its pieces
/// would have no quantization parameters.
/// Needs: a linted program. Guarantees: same outputs.
Result<bool> decompose_for_htp(ExportedProgram& program);

/// add/sub/mul/div with a number operand read a lifted 0-d constant instead (a constant_tensor
/// placeholder named `_lifted_tensor_constant<N>`), with alpha folded into it; ExecuTorch's
/// ConvertBinaryOpsWithScalar (aten's .Scalar overloads become .Tensor ones).
/// Needs: a linted program. Guarantees: same outputs; no binary arithmetic op reads a number.
Result<bool> convert_binary_ops_with_scalar(ExportedProgram& program);

/// Removes ops that do nothing: cast to the same dtype, reshape/view/flatten/expand to the same
/// shape, identity permute/transpose, a slice over the whole dim, an all-zero constant pad.
/// Needs: specs on the nodes. Guarantees: same outputs.
Result<bool> remove_redundancy(ExportedProgram& program);

/// reshape [N,C,H,W]->[N,C,H/b,b,W/b,b] -> permute [0,1,3,5,2,4] -> reshape [N,C*b*b,H/b,W/b]
/// (torch's pixel_unshuffle decomposition) becomes pixel_unshuffle(b). Quantize/dequantize
/// pairs between the three are looked through. Guarantees: same outputs.
Result<bool> recompose_pixel_unshuffle(ExportedProgram& program);

/// mul(x, rsqrt(add(mean(pow(x, 2) | mul(x, x), dims=last k, keepdim), eps))) [* weight]
/// becomes rms_norm(x, weight, normalized_shape, eps). eps may be a number or a 0-d constant;
/// quantize/dequantize pairs between the pieces are looked through. Guarantees: same outputs.
Result<bool> recompose_rms_norm(ExportedProgram& program);

/// addmm(bias, x, permute(w, [1, 0])) (beta = alpha = 1) and mm(x, permute(w, [1, 0])) become
/// linear(x, w[, bias]): the form torch decomposes nn.Linear into and ONNX Gemm with a
/// non-constant B imports as. Guarantees: same outputs.
Result<bool> convert_to_linear(ExportedProgram& program);

/// where(gt(x, 0), x, mul(a, x)) with a constant slope `a` (a scalar, [C] or [C,1,...,1] for
/// channels at dim 1) becomes prelu(x, a as [C]): torch's prelu decomposition recomposed.
/// Guarantees: same outputs.
Result<bool> convert_prelu(ExportedProgram& program);

/// bmm becomes matmul; reshape(a: [..., M, K] -> [B, M, K]) and reshape(b) around a bmm whose
/// result is reshaped back to [..., M, N] become one matmul of the originals (torch's matmul
/// decomposition recomposed). Guarantees: same outputs.
Result<bool> convert_bmm_to_matmul(ExportedProgram& program);

/// A dequantize read by several calls becomes one dequantize per call, so that the partitioner
/// can place each with its reader: a partition then reads codes at its boundary, never the
/// dequantized float of another partition. Not part of capture_program. Guarantees: same outputs.
Result<bool> split_shared_dequantize(ExportedProgram& program);

/// upsample_nearest2d / upsample_bilinear2d given `scales` get the `output_size` the scales
/// give, where input size times scale is a whole number (the sampling is then identical).
/// Guarantees: same outputs.
Result<bool> convert_interpolate_with_upsample2d(ExportedProgram& program);

/// HTP has no 64-bit integers: i64 user inputs are cast to i32 on entry, i64 constants that
/// are data (not quantization parameters) are stored as i32, ops that produce i64 (argmax,
/// arange, cumsum, full, cast to i64) are followed by a cast to i32, and an i64 user output is
/// cast back to i64 at the end (ExecuTorch's I64toI32 and its output-dtype preservation).
/// Index operands (gather, index_select, embedding, index_put) read i64 again through a cast.
/// Guarantees: same outputs.
Result<bool> i64_to_i32(ExportedProgram& program);

/// Copies quantization parameters from the q/dq nodes onto the values they quantize: each
/// call_function (or getitem) producer read by a quantize_per_tensor gets meta.quant = that
/// quantize's parameters; each integer constant placeholder read by a dequantize gets the
/// dequantize's (per channel: axis, every scale and zero point). A dequantize -> quantize chain
/// is a requantization: with equal parameters it is dropped (users read the first quantize);
/// with different ones it stays (FoldQDQ turns it into an explicit requantize), except that
/// with `skip_advanced_requant` only a change of dtype stays and a change of scale or zero
/// point is dropped (users read the first encoding). A float user input gets no meta.quant:
/// its quantize stays; an integer user input read only by dequantizes of one encoding (codes
/// coming in: tag_quant_io, a partition boundary) gets theirs, like a constant. Guarantees: outputs unchanged unless skip_advanced_requant dropped a requant.
Result<bool> annotate_quant_attrs(ExportedProgram& program, bool skip_advanced_requant);

/// A quantized add/sub/mul/div (output with meta.quant) that reads a 0-d float constant (a
/// lifted scalar) reads it quantized: the constant becomes an integer 0-d tensor in the
/// operation's dtype with meta.quant scale = |v| / (qmax - qmin), zero point 0 (v >= 0) or qmax
/// (v < 0), so it holds exactly qmax - qmin + qmin (or qmin): ExecuTorch's AnnotateAndQuantScalar.
/// Needs: AnnotateQuantAttrs. The result is not runnable by the interpreter.
Result<bool> annotate_and_quant_scalar(ExportedProgram& program);

/// Multi-output ops (split) read through a dequantize get the input's parameters on the op and
/// on every getitem without its own: ExecuTorch's AnnotateDecomposed (unbind / stack).
/// Needs: AnnotateQuantAttrs.
Result<bool> annotate_decomposed(ExportedProgram& program);

/// Erases the q/dq nodes whose parameters now live in meta.quant (capture.h states the exact
/// result); a quantize a user output returns stays, since the output is codes. Needs: AnnotateQuantAttrs. The result is not runnable by the interpreter.
Result<bool> fold_qdq(ExportedProgram& program);

/// Binary elementwise ops whose operands differ in rank read the lower-rank operand through a
/// reshape with leading 1s, so both have the same rank. Guarantees: same outputs.
Result<bool> expand_broadcast_tensor_shape(ExportedProgram& program);

/// NCHW -> NHWC around layout-sensitive ops with the fewest permutes (capture.h states the
/// exact result). The result is not runnable by the interpreter.
Result<bool> layout_transform(ExportedProgram& program);

/// An index_put that writes a mutated buffer but reads the buffer through a kept quantize
/// reads the buffer placeholder itself, which takes the quantize's meta.quant (the KV cache is
/// stored quantized): ExecuTorch's ReplaceIndexPutInput. Needs: FoldQDQ.
Result<bool> replace_index_put_input(ExportedProgram& program);

/// linear(x, w[N, K], b) with x of rank 2 or 3 becomes a 1x1 convolution between transposes,
/// as the seed's Conv2D wrapper: rank 3 unsqueeze(-1) -> transpose(1, 2) -> conv -> transpose(1,
/// 2) -> squeeze(-1); rank 2 reshape(1, M, K, 1) -> ... -> reshape(M, N). A constant weight is
/// stored as [N, K, 1, 1]; any other weight is reshaped in the graph. Guarantees: same outputs.
Result<bool> linear_to_conv2d(ExportedProgram& program);

}  // namespace kiln::htp
