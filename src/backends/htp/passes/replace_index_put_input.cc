// ReplaceIndexPutInput: an index_put updating a buffer reads the buffer, stored quantized.
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {

Result<bool> replace_index_put_input(ExportedProgram& program) {
  Graph& g = program.graph();
  const Node* out = g.output_node();
  if (out == nullptr) return false;
  std::vector<Node*> values = out->arg(0).nodes();
  std::vector<OutputSpec> specs = program.signature().outputs;
  bool changed = false;
  bool outputs_changed = false;
  for (size_t i = 0; i < values.size() && i < specs.size(); ++i) {
    if (specs[i].kind != OutputKind::kBufferMutation) continue;
    // FoldQDQ leaves the written value behind a Dequantize (it keeps one for every output).
    Node* written = values[i];
    Node* n = written->is_call(OpId::kDequantizePerTensor) ? written->arg(0).node() : written;
    if (!n->is_call(OpId::kIndexPut)) continue;
    Node* q = n->arg(0).node();
    if (!q->is_call(OpId::kQuantizePerTensor)) continue;
    Node* buffer = q->arg(0).node();
    const InputSpec* in = program.input_spec(buffer);
    if (in == nullptr || in->kind != InputKind::kBuffer || in->target != specs[i].target) continue;
    KILN_ASSIGN_OR_RETURN(QuantAttrs attrs, qdq_attrs(program, q));
    // The buffer is read and written in one encoding: the update writes the index_put's stored
    // value itself when it has that encoding (the quantizer shares it), not its dequantization.
    if (written != n && n->meta.quant && *n->meta.quant == attrs) {
      values[i] = n;
      outputs_changed = true;
    }
    buffer->meta.quant = std::move(attrs);
    KILN_RETURN_IF_ERROR(g.set_arg(n, 0, buffer));
    if (!q->has_uses()) g.erase(q);
    changed = true;
  }
  if (outputs_changed) {
    KILN_RETURN_IF_ERROR(program.set_outputs(values, std::move(specs)));
    KILN_RETURN_IF_ERROR(remove_dead(program));
  }
  return changed;
}

}  // namespace kiln::htp
