// Helpers shared by the graph passes (and the HTP backend's).
#include "kiln/passes/pass_util.h"

#include <string>

namespace kiln {

const Tensor* constant_of(const ExportedProgram& program, const Node* n) {
  if (n->op() != OpKind::kPlaceholder) return nullptr;
  const InputSpec* in = program.input_spec(n);
  if (in == nullptr || in->kind == InputKind::kUserInput) return nullptr;
  return program.constants().find(in->target);
}

bool is_constant_placeholder(const ExportedProgram& program, const Node* n) {
  if (n->op() != OpKind::kPlaceholder) return false;
  const InputSpec* in = program.input_spec(n);
  return in != nullptr && in->kind != InputKind::kUserInput;
}

std::set<std::string> written_buffers(const ExportedProgram& program) {
  std::vector<std::string> names = program.mutated_buffers();
  return {names.begin(), names.end()};
}

bool is_written_buffer(const ExportedProgram& program, const std::set<std::string>& written, const Node* n) {
  const InputSpec* in = n->op() == OpKind::kPlaceholder ? program.input_spec(n) : nullptr;
  return in != nullptr && in->kind == InputKind::kBuffer && written.count(in->target) != 0;
}

const Tensor* frozen_constant(const ExportedProgram& program, const std::set<std::string>& written, const Node* n) {
  return is_written_buffer(program, written, n) ? nullptr : constant_of(program, n);
}

Node* after(const Graph& graph, Node* n) {
  if (n->op() != OpKind::kPlaceholder) return n->next();
  for (Node* m : graph.nodes()) {
    if (m->op() != OpKind::kPlaceholder) return m;
  }
  return nullptr;
}

Result<Node*> add_call_with_spec(Graph& g, Node* before, OpId op, std::vector<Arg> args,
                                 const Kwargs& kwargs, std::string_view name, TensorSpec spec) {
  Graph::InsertGuard guard(g, before);
  KILN_ASSIGN_OR_RETURN(Node * n, g.add_call(op, std::move(args), kwargs, name, /*infer_spec=*/false));
  n->meta.val.clear();
  n->meta.val.push_back(std::move(spec));
  return n;
}

Result<Node*> add_call_at(Graph& g, Node* before, OpId op, std::vector<Arg> args,
                          const Kwargs& kwargs, std::string_view name) {
  Graph::InsertGuard guard(g, before);
  return g.add_call(op, std::move(args), kwargs, name);
}

Node* add_lifted_constant(ExportedProgram& program, std::string_view base, Tensor value) {
  std::string target(base);
  for (int i = 1; program.constants().contains(target) || program.graph().find(target) != nullptr;
       ++i) {
    target = fmt::format("{}_{}", base, i);
  }
  return program.add_constant(target, target, std::move(value));
}

std::optional<std::vector<int64_t>> static_shape_of(const Node* n) {
  if (!n->has_spec() || n->meta.val.size() != 1) return std::nullopt;
  return n->spec().static_shape();
}

std::optional<double> scalar_value(const ExportedProgram& program, const Arg& a) {
  if (a.is_number()) return a.to_float();
  if (!a.is_node()) return std::nullopt;
  const Tensor* t = constant_of(program, a.node());
  if (t == nullptr || t->numel() != 1 || t->dtype() == DType::kBool) return std::nullopt;
  return t->scalar_at(0);
}

std::optional<size_t> other_operand(const Node* n, const Node* v) {
  if (n->num_args() < 2) return std::nullopt;
  if (n->arg(0).is_node() && n->arg(0).node() == v) return 1;
  if (n->arg(1).is_node() && n->arg(1).node() == v) return 0;
  return std::nullopt;
}

void replace_node(Graph& g, Node* old, Node* replacement) {
  if (replacement->meta.source.empty()) replacement->meta.source = old->meta.source;
  g.replace_all_uses_with(old, replacement);
  std::string name = old->name();
  g.erase(old);
  g.rename(replacement, name);
}

}  // namespace kiln
