// remove_first_quant_and_last_dequant and replace_quantized_partition_with_op (utils.h).
#include <algorithm>
#include <unordered_set>

#include "kiln/lower/utils.h"

namespace kiln {

Result<bool> remove_first_quant_and_last_dequant(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* p : program.user_inputs()) {
    if (p == nullptr || p->num_uses() != 1 || !p->has_spec()) continue;
    Node* q = p->uses().begin()->user;
    if (!q->is_call(OpId::kQuantizePerTensor) || q->arg(0).node() != p) continue;
    QuantAttrs qa;
    qa.dtype = q->kwarg("dtype").to_dtype();
    qa.quant_min = q->kwarg_int("quant_min");
    qa.quant_max = q->kwarg_int("quant_max");
    qa.scales = {q->kwarg_float("scale")};
    qa.zero_points = {q->kwarg_int("zero_point")};
    g.replace_all_uses_with(q, p);
    g.erase(q);
    p->meta.val[0].dtype = qa.dtype;
    p->meta.quant = std::move(qa);
    changed = true;
  }
  Node* out = g.output_node();
  if (out == nullptr) return changed;
  std::vector<Node*> values = out->arg(0).nodes();
  const auto& specs = program.signature().outputs;
  std::vector<size_t> dequantized;
  for (size_t i = 0; i < values.size() && i < specs.size(); ++i) {
    if (specs[i].kind == OutputKind::kUserOutput && values[i]->is_call(OpId::kDequantizePerTensor)) {
      dequantized.push_back(i);
    }
  }
  if (dequantized.empty()) return changed;
  KILN_RETURN_IF_ERROR(return_codes_instead_of_dequantized(program, dequantized));
  return true;
}

Status return_codes_instead_of_dequantized(ExportedProgram& program, std::span<const size_t> indices) {
  Graph& g = program.graph();
  Node* out = g.output_node();
  if (out == nullptr || indices.empty()) return Status::Ok();
  std::vector<Node*> values = out->arg(0).nodes();
  std::vector<Node*> dequants;
  for (size_t i : indices) {
    if (i >= values.size() || !values[i]->is_call(OpId::kDequantizePerTensor)) {
      return invalid_argument("output {} is not returned by a dequantize node", i);
    }
    dequants.push_back(values[i]);
    values[i] = values[i]->arg(0).node();
  }
  KILN_RETURN_IF_ERROR(g.set_args(out, {Arg(values)}));
  for (Node* dq : dequants) {
    if (!dq->erased() && !dq->has_uses()) g.erase(dq);
  }
  return Status::Ok();
}

Result<QuantizedReplacement> replace_quantized_partition_with_op(ExportedProgram& program,
                                                                 const SourcePartition& partition,
                                                                 OpId op) {
  Graph& g = program.graph();
  std::unordered_set<const Node*> members(partition.nodes.begin(), partition.nodes.end());
  std::unordered_set<const Node*> params(partition.params.begin(), partition.params.end());

  // dq nodes feeding the partition and q nodes reading it, in first-seen order.
  std::vector<Node*> dequants, quants;
  std::unordered_set<const Node*> picked;
  for (Node* n : partition.nodes) {
    for (const Use& u : n->operands()) {
      Node* v = u.value;
      if (members.count(v) == 0 && v->is_call(OpId::kDequantizePerTensor) && picked.insert(v).second) {
        dequants.push_back(v);
      }
    }
  }
  for (Node* n : partition.nodes) {
    for (Node* user : n->users()) {
      if (members.count(user) == 0 && user->is_call(OpId::kQuantizePerTensor) &&
          picked.insert(user).second) {
        quants.push_back(user);
      }
    }
  }
  if (dequants.empty()) {
    return invalid_argument("replace_quantized_partition_with_op: dequant nodes missing in node "
                            "list to be replaced (no dequantize_per_tensor feeds the partition)");
  }
  if (quants.empty()) {
    return invalid_argument("replace_quantized_partition_with_op: quant nodes missing in node "
                            "list to be replaced (no quantize_per_tensor reads the partition)");
  }

  // dq + partition (without its params) + q, in graph order.
  std::vector<Node*> list = dequants;
  for (Node* n : partition.nodes) {
    if (params.count(n) == 0) list.push_back(n);
  }
  list.insert(list.end(), quants.begin(), quants.end());
  std::sort(list.begin(), list.end(), [](const Node* a, const Node* b) { return a->is_before(b); });
  std::unordered_set<const Node*> in(list.begin(), list.end());

  std::vector<Arg> args;
  std::unordered_set<const Node*> seen;
  for (Node* n : list) {
    for (const Use& u : n->operands()) {
      if (in.count(u.value) == 0 && seen.insert(u.value).second) args.emplace_back(u.value);
    }
  }
  std::vector<Node*> outputs;
  for (Node* n : list) {
    for (const Use& u : n->uses()) {
      if (in.count(u.user) == 0) {
        outputs.push_back(n);
        break;
      }
    }
  }
  if (outputs.size() != 1) {
    return invalid_argument("replace_quantized_partition_with_op: {} values leave the quantized "
                            "partition; '{}' returns one",
                            outputs.size(), op_name(op));
  }
  Node* result = outputs[0];
  Node* last = list.back();
  for (Node* user : result->users()) {
    if (in.count(user) == 0 && !last->is_before(user)) {
      return invalid_argument("replace_quantized_partition_with_op: node '{}' reads the partition "
                              "before its last node '{}'",
                              user->name(), last->name());
    }
  }

  const Schema& s = op_def(op).schema;
  std::vector<Arg> kwargs;
  for (const Param& p : s.keyword) {
    if (!p.has_default) {
      return invalid_argument("replace_quantized_partition_with_op: '{}' needs keyword argument "
                              "'{}', which has no default",
                              s.name, p.name);
    }
    kwargs.push_back(p.default_value);
  }
  Node* replaced = nullptr;
  {
    Graph::InsertGuard guard(g, last->next());
    auto r = g.add_call_exact(op, std::move(args), std::move(kwargs), s.name, /*infer=*/false);
    if (!r.ok()) return r.status().with_context("replace_quantized_partition_with_op");
    replaced = *r;
  }
  replaced->meta = result->meta;
  g.replace_all_uses_with_if(result, replaced, [&](Node* user) { return in.count(user) == 0; });
  QuantizedReplacement out;
  out.replaced = replaced;
  for (Node* n : dequants) out.dequant_nodes.push_back(n->name());
  for (Node* n : quants) out.quant_nodes.push_back(n->name());
  for (auto it = list.rbegin(); it != list.rend(); ++it) {
    if ((*it)->has_uses()) {
      return internal_error("replace_quantized_partition_with_op: node '{}' is still used",
                            (*it)->name());
    }
    g.erase(*it);
  }
  return out;
}

}  // namespace kiln
