// EliminateDeadCode: calls nothing reads and constants nothing reads go (torch.fx's
// eliminate_dead_code, with the constants the graph lifted). Declared in pass_util.h: every pass
// that replaces nodes ends with it.
#include <algorithm>

#include "kiln/passes/pass_util.h"

namespace kiln {

Result<bool> eliminate_dead_code(ExportedProgram& program) {
  Graph& g = program.graph();
  const std::vector<std::string> mutated = program.mutated_buffers();
  auto written = [&](const Node* n) {
    const InputSpec* in = program.input_spec(n);
    return in->kind == InputKind::kBuffer && std::find(mutated.begin(), mutated.end(), in->target) != mutated.end();
  };
  bool changed = false;
  for (Node* n : g.nodes_reversed()) {
    if (n->has_uses()) continue;
    if (n->op() == OpKind::kCallFunction) {
      g.erase(n);
      changed = true;
    } else if (is_constant_placeholder(program, n) && !written(n)) {
      KILN_RETURN_IF_ERROR(program.erase_input(n));
      changed = true;
    }
  }
  return changed;
}

}  // namespace kiln
