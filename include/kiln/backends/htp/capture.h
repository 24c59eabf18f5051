// HTP capture: the pass pipeline between an exported (optionally quantized) program and the HTP
// partitioner / preprocess (ExecuTorch's backends/qualcomm/utils/utils.py: capture_program,
// _transform, convert_linear_to_conv2d).
//
// The program capture_program leaves behind (what preprocess consumes):
//  (a) ops HTP has no builder for are decomposed where kiln can do so exactly (relu6 -> clamp,
//      transpose -> permute, view / flatten -> reshape, float silu and rms_norm), while
//      pixel_shuffle, pixel_unshuffle, hardsigmoid, hardswish and softmax stay whole, and the
//      torch decompositions of pixel_unshuffle, rms_norm, linear, prelu, matmul and interpolate
//      are recomposed; binary ops read lifted 0-d constants instead of numbers; no i64 tensors
//      run inside the graph (casts at the user inputs / outputs keep the signature's dtypes).
//  (b) quantized programs carry their parameters in NodeMeta::quant: on every producer that
//      was quantized and on every integer constant (per-channel: axis and all scales). The
//      q/dq pairs are gone; consumers read producers and integer constants directly, and a
//      lifted scalar read by a quantized binary op is stored quantized.
//  (c) a user input's quantize and a user output's dequantize stay (QNN Quantize /
//      Dequantize); an output that returns codes keeps its quantize, an input that takes codes
//      (tag_quant_io) is an integer placeholder with meta.quant; a change of encoding between two ops stays as an explicit quantize of the
//      producer (QNN Convert), unless skip_advanced_requant dropped it (same dtype only).
//  (d) activations keep their float spec dtype; meta.quant says how they are stored.
//  (e) around convolution, pooling, batch norm, pixel (un)shuffle and upsample the graph is
//      NHWC: those ops and the layout-agnostic ops joining them have meta.channels_last, NHWC
//      specs and axis arguments naming NHWC axes; conv weights stay OIHW; `permute` nodes
//      ([0, 2, 3, 1] in, [0, 3, 1, 2] out) sit only where such a region meets the rest.
//  (f) a quantized mutable buffer updated by index_put is read and written in its encoding.
// The result lints (ExportedProgram::lint) but is not runnable by the portable interpreter
// once it holds folded quantized values or NHWC regions.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"
#include "kiln/passes/pass_manager.h"

namespace kiln::htp {

/// custom_pass_config name: drop requantizations that only change scale or zero point.
inline constexpr std::string_view kPassSkipAdvancedRequant = "skip_advanced_requant";
/// custom_pass_config name: run ExpandBroadcastTensorShape (off by default: extra reshapes).
inline constexpr std::string_view kPassExpandBroadcastShape = "expand_broadcast_shape";

/// How capture_program runs its passes.
struct CaptureOptions {
  /// Called after each pass that changed the program (e.g. to print the .kir); the program
  /// reference is valid during the call only. Empty: nothing.
  AfterPassFn after_pass;
  /// Lint after each pass that changed the program and once at the end.
  bool lint = true;
};

/// Runs the HTP capture pipeline on `program` in place (the contract above). Every name in
/// `custom_pass_config` must be one of the kPass* names; an unknown one is an error naming it,
/// and the program is then untouched. On a pass error the message names the pass and the
/// program is as that pass left it.
[[nodiscard]] Status capture_program(ExportedProgram& program,
                                     const std::set<std::string>& custom_pass_config = {},
                                     const CaptureOptions& options = {});

/// The capture passes that only recompose what an export decomposed (RemoveRedundancy,
/// RecomposePixelUnshuffle, RecomposeRmsNorm, ConvertToLinear, ConvertPReLU, ConvertBmmToMatmul),
/// for the whole program before it is partitioned, as ExecuTorch captures the whole program
/// first: the partitioner then sees linear instead of permute + addmm, and so on. The result
/// stays runnable by the portable interpreter, with the same outputs.
[[nodiscard]] Status recompose_for_partition(ExportedProgram& program);

/// Every linear(x, w[N, K], b) with x of rank 2 or 3 becomes a 1x1 convolution between
/// reshapes / transposes (ExecuTorch's convert_linear_to_conv2d); outputs unchanged.
[[nodiscard]] Status convert_linear_to_conv2d(ExportedProgram& program);

/// What tag_quant_io asks of a user input placeholder or of a value a user output returns: the
/// dtype of the codes it carries (u8 or u16), or nullopt to leave it real.
using QuantIoDtypeFn = std::function<std::optional<DType>(const Node&)>;

/// One input or output that tag_quant_io turned into codes, with the encoding callers quantize
/// to (inputs) or dequantize from (outputs): real = scale * (code - zero_point).
struct QuantizedIo {
  enum Kind { kInput, kOutput } kind = kInput;
  std::string name;  ///< the signature's name (the model's own)
  QuantAttrs quant;
};

/// ExecuTorch's tag_quant_io, applied: every user input for which `dtype_of` names a dtype takes
/// that dtype's codes instead of real numbers (its quantize is removed; the program's input spec
/// becomes that dtype), and every user output for which it names one returns the codes its
/// dequantize read (the dequantize is removed). The HTP partition then moves the codes through
/// with no Quantize / Dequantize op around them. `dtype_of` is called with each user input
/// placeholder and each node a user output returns. Errors name the input or output: one that
/// is not quantized, that is also read as real numbers, or whose codes are of another dtype than
/// asked; the program is then unchanged.
[[nodiscard]] Result<std::vector<QuantizedIo>> tag_quant_io(ExportedProgram& program,
                                                            const QuantIoDtypeFn& dtype_of);

}  // namespace kiln::htp
