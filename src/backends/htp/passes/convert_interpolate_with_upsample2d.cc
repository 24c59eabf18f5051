// ConvertInterpolateWithUpsample2D: upsampling by scales becomes upsampling to an output size.
#include <cmath>

#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {

Result<bool> convert_interpolate_with_upsample2d(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (!n->is_call(OpId::kUpsampleNearest2d) && !n->is_call(OpId::kUpsampleBilinear2d)) continue;
    if (n->kwarg("scales").is_none()) continue;
    auto in = static_shape_of(n->arg(0).node());
    if (!in || in->size() != 4) continue;
    std::vector<double> scales = n->kwarg("scales").to_floats();
    if (scales.size() == 1) scales.push_back(scales[0]);
    std::vector<int64_t> size;
    for (size_t i = 0; i < 2; ++i) {
      double out = static_cast<double>((*in)[2 + i]) * scales[i];
      // Sampling by scale and by size agree only when the size is exactly input * scale.
      if (out != std::floor(out) || out < 1) break;
      size.push_back(static_cast<int64_t>(out));
    }
    if (size.size() != 2) continue;
    KILN_RETURN_IF_ERROR(g.set_kwarg(n, "scales", Arg()));
    KILN_RETURN_IF_ERROR(g.set_kwarg(n, "output_size", size));
    changed = true;
  }
  return changed;
}

}  // namespace kiln::htp
