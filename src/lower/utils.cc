#include "kiln/lower/utils.h"

#include <iostream>

#include "kiln/ir/kir.h"

namespace kiln {
namespace {

constexpr std::string_view kIndent = "  ";
constexpr std::string_view kLoweredPrefix = "lowered_module_";

// ExecuTorch's _get_item_from_executorch_call_delegate. Its other two checks (two args, an int
// index) are getitem's schema, which every kiln node obeys.
bool is_delegate_getitem(const Node* n) {
  return n->is_call(OpId::kGetitem) && n->arg(0).is_node() &&
         n->arg(0).node()->is_call(OpId::kCallDelegate);
}

// How ExecuTorch finds a delegate: a get_attr node named lowered_module_*.
bool is_delegate_attr(const Node* n) {
  return n->op() == OpKind::kGetAttr && n->name().starts_with(kLoweredPrefix);
}

// The lowered module a delegate get_attr reads (by its target, which the node's name follows
// for every get_attr to_backend makes), or null.
const LoweredModule* module_of(const ExportedProgram& program, const Node* n) {
  return is_delegate_attr(n) ? program.find_lowered_module(n->target_name()) : nullptr;
}

void append_indented(std::string& out, std::string_view text, size_t depth) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty()) {
      for (size_t i = 0; i < depth; ++i) out += kIndent;
      out += line;
    }
    out += '\n';
    start = end + 1;
  }
}

void append_module(std::string& out, const LoweredModule& m, size_t depth) {
  for (size_t i = 0; i < depth; ++i) out += kIndent;
  out += fmt::format("backend_id: {}\n", m.backend_id);
  if (m.original_module == nullptr) return;
  // fx prints "graph():" first; ExecuTorch's delegated graph calls it "lowered graph():".
  std::string text = print_graph(m.original_module->graph());
  if (text.rfind("graph", 0) == 0) text.insert(0, "lowered ");
  append_indented(out, text, depth);
}

// Name of the node a printed graph line defines ("  %add : ..." -> "add"), or empty.
std::string_view defined_name(std::string_view line) {
  size_t p = line.find_first_not_of(' ');
  if (p == std::string_view::npos || line[p] != '%') return {};
  size_t e = line.find_first_of(" :", p + 1);
  return line.substr(p + 1, e == std::string_view::npos ? std::string_view::npos : e - p - 1);
}

}  // namespace

std::string format_delegated_graph(const ExportedProgram& program) {
  std::string graph_text = print_graph(program.graph());
  std::string out;
  std::vector<char> printed(program.lowered_modules().size(), 0);
  size_t start = 0;
  while (start < graph_text.size()) {
    size_t end = graph_text.find('\n', start);
    if (end == std::string::npos) end = graph_text.size();
    std::string_view line(graph_text.data() + start, end - start);
    out += line;
    out += '\n';
    std::string_view name = defined_name(line);
    if (!name.empty()) {
      const Node* n = program.graph().find(name);
      const LoweredModule* m = n != nullptr ? module_of(program, n) : nullptr;
      size_t i = m != nullptr ? static_cast<size_t>(m - program.lowered_modules().data()) : 0;
      if (m != nullptr && !printed[i]) {
        size_t depth = (line.find_first_not_of(' ') / kIndent.size()) + 2;
        append_module(out, *m, depth);
        printed[i] = 1;
      }
    }
    start = end + 1;
  }
  const auto& mods = program.lowered_modules();
  for (size_t i = 0; i < mods.size(); ++i) {
    if (printed[i]) continue;
    out += fmt::format("{}:\n", mods[i].name.empty() ? "<unnamed lowered module>" : mods[i].name);
    append_module(out, mods[i], 2);  // one level of the graph's layout (4 spaces)
  }
  return out;
}

void print_delegated_graph(const ExportedProgram& program, std::ostream& os) {
  os << format_delegated_graph(program) << '\n';
}

void print_delegated_graph(const ExportedProgram& program) {
  print_delegated_graph(program, std::cout);
}

std::vector<Node*> get_non_lowered_nodes(const Graph& graph) {
  std::vector<Node*> out;
  for (Node* n : graph.nodes()) {
    if (n->op() != OpKind::kCallFunction || n->is_call(OpId::kCallDelegate) ||
        is_delegate_getitem(n)) {
      continue;
    }
    out.push_back(n);
  }
  return out;
}

std::vector<Node*> get_delegates(const Graph& graph) {
  std::vector<Node*> out;
  for (Node* n : graph.nodes()) {
    if (is_delegate_attr(n)) out.push_back(n);
  }
  return out;
}

std::map<std::string, DelegatedPayload> get_delegated_payload(const ExportedProgram& program) {
  std::map<std::string, DelegatedPayload> out;
  for (Node* n : program.graph().nodes()) {
    const LoweredModule* m = module_of(program, n);
    if (m == nullptr) continue;
    out[n->name()] = DelegatedPayload{m->backend_id, m->compile_specs, m->processed_bytes};
  }
  return out;
}

}  // namespace kiln
