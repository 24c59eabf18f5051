// EliminateDeadCode: calls nothing reads and constants nothing reads go (torch.fx's
// eliminate_dead_code, with the constants the graph lifted). Declared in pass_util.h: every pass
// that replaces nodes ends with it.
#include "kiln/passes/pass_util.h"

namespace kiln {

Result<bool> eliminate_dead_code(ExportedProgram& program) {
  Graph& g = program.graph();
  const std::set<std::string> written = written_buffers(program);
  bool changed = false;
  std::vector<Node*> dead_inputs;  // erased together: one pass over the signature
  for (Node* n : g.nodes_reversed()) {
    if (n->has_uses()) continue;
    if (n->op() == OpKind::kCallFunction) {
      g.erase(n);
      changed = true;
    } else if (is_constant_placeholder(program, n) && !is_written_buffer(program, written, n)) {
      dead_inputs.push_back(n);
    }
  }
  if (dead_inputs.empty()) return changed;
  KILN_RETURN_IF_ERROR(program.erase_inputs(dead_inputs));
  return true;
}

}  // namespace kiln
