// capture_program: the HTP pass pipeline, in ExecuTorch's order (utils.py's capture_program
// and _transform).
#include "kiln/backends/htp/capture.h"

#include "passes.h"

namespace kiln::htp {

Status capture_program(ExportedProgram& program, const std::set<std::string>& custom_pass_config,
                       const CaptureOptions& options) {
  for (const std::string& name : custom_pass_config) {
    if (name != kPassSkipAdvancedRequant && name != kPassExpandBroadcastShape) {
      return invalid_argument("capture_program: unknown custom pass config '{}' (expected '{}' or '{}')",
                              name, kPassSkipAdvancedRequant, kPassExpandBroadcastShape);
    }
  }
  const bool skip_advanced_requant = custom_pass_config.count(std::string(kPassSkipAdvancedRequant)) != 0;
  const bool expand_broadcast = custom_pass_config.count(std::string(kPassExpandBroadcastShape)) != 0;

  PassManager pm({.lint = options.lint, .lint_input = options.lint, .after_changed = options.after_pass});
  // torch.export's run_decompositions(get_decomp_table()), then the .Scalar -> .Tensor rewrite
  // capture_program runs before _transform.
  pm.add("Decompose", decompose_for_htp);
  pm.add("ConvertBinaryOpsWithScalar", convert_binary_ops_with_scalar);
  // _transform: recompose what the decompositions split and HTP has whole.
  pm.add("RemoveRedundancy", remove_redundancy);
  pm.add("RecomposePixelUnshuffle", recompose_pixel_unshuffle);
  pm.add("RecomposeRmsNorm", recompose_rms_norm);
  pm.add("ConvertToLinear", convert_to_linear);
  pm.add("ConvertPReLU", convert_prelu);
  pm.add("ConvertBmmToMatmul", convert_bmm_to_matmul);
  pm.add("ConvertInterpolateWithUpsample2D", convert_interpolate_with_upsample2d);
  pm.add("I64toI32", i64_to_i32);
  // Quantization parameters move from the q/dq nodes onto the values, then the pairs go.
  pm.add("AnnotateQuantAttrs", [skip_advanced_requant](ExportedProgram& p) {
    return annotate_quant_attrs(p, skip_advanced_requant);
  });
  pm.add("AnnotateAndQuantScalar", annotate_and_quant_scalar);
  pm.add("AnnotateDecomposed", annotate_decomposed);
  pm.add("FoldQDQ", fold_qdq);
  // Off by default: only layout-sensitive graphs need it, and it adds reshapes.
  if (expand_broadcast) pm.add("ExpandBroadcastTensorShape", expand_broadcast_tensor_shape);
  pm.add("LayoutTransform", layout_transform);
  pm.add("ReplaceIndexPutInput", replace_index_put_input);
  Result<bool> ran = pm.run(program);
  if (!ran.ok()) return ran.status();
  if (options.lint) {
    Status s = program.lint();
    if (!s.ok()) return invalid_argument("capture_program: the result does not lint: {}", s.message());
  }
  return Status::Ok();
}

Status recompose_for_partition(ExportedProgram& program) {
  PassManager pm;
  pm.add("RemoveRedundancy", remove_redundancy);
  pm.add("RecomposePixelUnshuffle", recompose_pixel_unshuffle);
  pm.add("RecomposeRmsNorm", recompose_rms_norm);
  pm.add("ConvertToLinear", convert_to_linear);
  pm.add("ConvertPReLU", convert_prelu);
  pm.add("ConvertBmmToMatmul", convert_bmm_to_matmul);
  pm.add("SplitSharedDequantize", split_shared_dequantize);
  Result<bool> ran = pm.run(program);
  return ran.ok() ? Status::Ok() : ran.status();
}

Status convert_linear_to_conv2d(ExportedProgram& program) {
  Result<bool> r = linear_to_conv2d(program);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace kiln::htp
