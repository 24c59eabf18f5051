// The pipeline of graph passes kiln runs before partitioning.
#include "kiln/passes/optimize.h"

#include "kiln/passes/pass_util.h"

namespace kiln {

Result<std::vector<PassRecord>> optimize(ExportedProgram& program, const OptimizeOptions& options) {
  PassManager pm({.lint = options.lint, .lint_input = false, .after_changed = options.after_changed});
  if (options.evaluate) {
    pm.add("FoldConstants", [&options](ExportedProgram& p) { return fold_constants(p, options.evaluate); });
  }
  pm.add("FoldIntoConv", fold_into_conv);
  pm.add("RecomposeGelu", recompose_gelu);
  pm.add("RecomposeHardswish", recompose_hardswish);
  pm.add("RecomposeLayerNorm", recompose_layer_norm);
  pm.add("CancelTransposes", cancel_transposes);
  pm.add("EliminateDeadCode", eliminate_dead_code);
  KILN_ASSIGN_OR_RETURN(bool changed, pm.run(program));
  (void)changed;
  return pm.records();
}

}  // namespace kiln
