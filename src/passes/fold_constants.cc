// FoldConstants: calls whose inputs are all constants become constants (ONNX Runtime's constant
// folding; torch's freezing), evaluated once by the caller's evaluator.
#include "kiln/passes/optimize.h"
#include "kiln/passes/pass_util.h"

namespace kiln {
namespace {

// Calls that stay calls whatever their inputs: q/dq carry encodings a backend reads, delegates
// and their outputs are not the portable kernels' to run.
bool keeps(const Node* n) {
  switch (n->target()) {
    case OpId::kQuantizePerTensor:
    case OpId::kDequantizePerTensor:
    case OpId::kQuantizePerChannel:
    case OpId::kDequantizePerChannel:
    case OpId::kCallDelegate:
    case OpId::kCond:
    case OpId::kLoop:
    case OpId::kGetitem:
    case OpId::kContextLoader: return true;
    default: return false;
  }
}

}  // namespace

Result<bool> fold_constants(ExportedProgram& program, const NodeEvaluator& evaluate,
                            const FoldConstantsOptions& options) {
  if (!evaluate) return invalid_argument("fold_constants: no evaluator given");
  Graph& g = program.graph();
  const std::set<std::string> written = written_buffers(program);
  auto value_of = [&](const Node* m) { return frozen_constant(program, written, m); };
  bool changed = false;
  for (Node* n = g.first(); n != nullptr;) {
    Node* next = n->next();
    if (n->op() != OpKind::kCallFunction || keeps(n) || n->meta.val.size() != 1 || !n->has_uses()) {
      n = next;
      continue;
    }
    bool constant = true, returned = false;
    size_t input_bytes = 0;
    for (const Use& u : n->operands()) {
      const Tensor* t = value_of(u.value);
      constant = constant && t != nullptr;
      if (t != nullptr) input_bytes += t->nbytes();
    }
    for (const Use& u : n->uses()) returned = returned || u.user->op() == OpKind::kOutput;
    auto shape = n->spec().static_shape();
    auto numel = shape ? checked_numel(*shape) : std::nullopt;
    size_t bytes = numel ? static_cast<size_t>(*numel) * dtype_size(n->spec().dtype) : SIZE_MAX;
    if (!constant || returned || !numel || (bytes > options.max_result_bytes && bytes > input_bytes)) {
      n = next;
      continue;
    }
    // A node the evaluator cannot run (no kernel, an input it refuses) stays a node: whatever
    // runs the program reports it, or a delegate takes it.
    Result<std::vector<Tensor>> values = evaluate(*n, value_of);
    if (!values.ok() || values->size() != 1 || (*values)[0].dtype() != n->spec().dtype ||
        (*values)[0].shape() != *shape) {
      n = next;
      continue;
    }
    Node* c = add_lifted_constant(program, n->name() + "_folded", std::move((*values)[0]));
    g.replace_all_uses_with(n, c);
    g.erase(n);
    changed = true;
    n = next;
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln
