// RecomposePixelUnshuffle: torch's reshape / permute / reshape decomposition of pixel_unshuffle
// becomes the op again (QNN has SpaceToDepth).
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {

Result<bool> recompose_pixel_unshuffle(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* r2 = g.first(); r2 != nullptr;) {
    Node* next = r2->next();
    if (!r2->is_call(OpId::kReshape)) {
      r2 = next;
      continue;
    }
    Node* p = before_qdq(r2->arg(0).node());
    Node* r1 = p->is_call(OpId::kPermute) ? before_qdq(p->arg(0).node()) : nullptr;
    auto out = static_shape_of(r2);
    auto mid = r1 != nullptr && r1->is_call(OpId::kReshape) ? static_shape_of(r1) : std::nullopt;
    auto in = mid ? static_shape_of(r1->arg(0).node()) : std::nullopt;
    bool match = in && in->size() == 4 && mid->size() == 6 && out && out->size() == 4 &&
                 p->kwarg("dims").to_ints() == std::vector<int64_t>{0, 1, 3, 5, 2, 4};
    if (match) {
      int64_t n = (*in)[0], c = (*in)[1], h = (*in)[2], w = (*in)[3], b = (*mid)[3];
      match = b > 0 && h % b == 0 && w % b == 0 &&
              *mid == std::vector<int64_t>{n, c, h / b, b, w / b, b} && (*mid)[5] == b &&
              *out == std::vector<int64_t>{n, c * b * b, h / b, w / b};
      if (match) {
        KILN_ASSIGN_OR_RETURN(Node * ps, add_call_at(g, r2, OpId::kPixelUnshuffle, {r1->arg(0).node()},
                                                     {{"downscale_factor", b}}));
        g.replace_all_uses_with(r2, ps);
        std::string name = r2->name();
        g.erase(r2);
        g.rename(ps, name);
        changed = true;
      }
    }
    r2 = next;
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln::htp
