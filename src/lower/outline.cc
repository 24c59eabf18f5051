#include "outline.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace kiln::lower_detail {
namespace {

// A set of node ids that costs what it holds, not the graph's size: a stamp per id, a member
// when it equals the set's epoch. Each kind of set (`Slot`) has its own stamp array per thread,
// reused by every partition, so outlining 100k partitions of a 1M-node graph never clears 1M
// entries per partition. Ids past the array (nodes created later) are never members.
template <int Slot>
class NodeSet {
 public:
  explicit NodeSet(uint32_t bound) {
    Stamps& s = stamps();
    if (s.of.size() < bound) s.of.resize(bound, 0);
    if (++s.epoch == 0) {  // wrapped: no stale stamp may equal a new epoch
      std::fill(s.of.begin(), s.of.end(), 0);
      s.epoch = 1;
    }
    epoch_ = s.epoch;
  }
  void add(const Node* n) { stamps().of[n->id()] = epoch_; }
  bool has(const Node* n) const {
    const Stamps& s = stamps();
    return n->id() < s.of.size() && s.of[n->id()] == epoch_;
  }

 private:
  struct Stamps {
    std::vector<uint32_t> of;
    uint32_t epoch = 0;
  };
  static Stamps& stamps() {
    thread_local Stamps s;
    return s;
  }
  uint32_t epoch_ = 0;
};
using Membership = NodeSet<0>;

Status need_single_spec(const std::string& tag, const Node* v, const char* role) {
  if (v->meta.val.empty()) {
    return invalid_argument("to_backend: partition '{}': {} '{}' has no tensor spec (run shape "
                            "inference before lowering)",
                            tag, role, v->name());
  }
  if (v->meta.val.size() != 1) {
    return unsupported("to_backend: partition '{}': {} '{}' returns {} values; a delegate "
                       "boundary must carry single tensors (tag the getitem nodes with it)",
                       tag, role, v->name(), v->meta.val.size());
  }
  return Status::Ok();
}

}  // namespace

Result<size_t> outline_partition(ExportedProgram& owner, PartitionToLower& part,
                                 const std::string& module_name, int64_t& next_debug_handle) {
  Graph& g = owner.graph();
  const std::string& tag = part.tag;
  std::sort(part.nodes.begin(), part.nodes.end(),
            [](const Node* a, const Node* b) { return a->is_before(b); });
  Membership in(g.id_bound());
  std::vector<Node*> owned_inputs, body;
  for (Node* n : part.nodes) {
    in.add(n);
    (n->op() == OpKind::kPlaceholder ? owned_inputs : body).push_back(n);
  }
  KILN_CHECK(!body.empty());
  Node* last = body.back();

  // Nodes outside the partition that sit inside its span and read from it must move after the
  // delegate call. If the partition reads one of them back, it has a cycle through outside
  // nodes, which the partitioner promised never to produce.
  NodeSet<1> depends(g.id_bound());
  std::vector<Node*> to_move;
  for (Node* n = body.front()->next(); n != nullptr && n != last->next(); n = n->next()) {
    if (in.has(n)) {
      for (const Use& u : n->operands()) {
        if (depends.has(u.value)) {
          return invalid_argument("to_backend: partition '{}' forms a cycle: node '{}' reads '{}', "
                                  "which is outside the partition and depends on it",
                                  tag, n->name(), u.value->name());
        }
      }
      continue;
    }
    for (const Use& u : n->operands()) {
      if (in.has(u.value) || depends.has(u.value)) {
        depends.add(n);
        to_move.push_back(n);
        break;
      }
    }
  }

  // Values flowing in, in first-use order.
  std::vector<Node*> ext_inputs;
  NodeSet<2> seen(g.id_bound());
  for (Node* n : body) {
    for (const Use& u : n->operands()) {
      Node* v = u.value;
      if (in.has(v) || seen.has(v)) continue;
      seen.add(v);
      KILN_RETURN_IF_ERROR(need_single_spec(tag, v, "input"));
      ext_inputs.push_back(v);
    }
  }

  // Buffers the delegate owns, and the owning outputs that write them.
  std::set<std::string> owned_buffers;
  for (Node* p : owned_inputs) {
    const InputSpec* s = owner.input_spec(p);
    if (s == nullptr) return internal_error("to_backend: placeholder '{}' has no input spec", p->name());
    if (s->kind == InputKind::kBuffer) owned_buffers.insert(s->target);
  }
  Node* out = g.output_node();
  std::vector<Node*> out_values;
  if (out != nullptr) out_values = out->arg(0).nodes();
  const std::vector<OutputSpec>& out_specs = owner.signature().outputs;
  std::vector<size_t> owned_mutations;
  std::vector<char> is_owned_mutation(out_values.size(), 0);
  for (size_t i = 0; i < out_values.size() && i < out_specs.size(); ++i) {
    if (out_specs[i].kind != OutputKind::kBufferMutation) continue;
    if (owned_buffers.count(out_specs[i].target) == 0) continue;
    if (!in.has(out_values[i])) {
      return invalid_argument("to_backend: partition '{}' owns buffer '{}' but its new value '{}' "
                              "is computed outside the partition",
                              tag, out_specs[i].target, out_values[i]->name());
    }
    owned_mutations.push_back(i);
    is_owned_mutation[i] = 1;
  }

  // Values used outside (an owned buffer's write-back is not a use outside).
  std::vector<Node*> user_outputs;
  for (Node* n : body) {
    bool used_outside = false;
    for (const Use& u : n->uses()) {
      if (u.user == out && u.elem_index >= 0 &&
          is_owned_mutation[static_cast<size_t>(u.elem_index)]) {
        continue;
      }
      if (!in.has(u.user)) {
        used_outside = true;
        break;
      }
    }
    if (!used_outside) continue;
    KILN_RETURN_IF_ERROR(need_single_spec(tag, n, "output"));
    user_outputs.push_back(n);
  }
  for (size_t i : owned_mutations) {
    KILN_RETURN_IF_ERROR(need_single_spec(tag, out_values[i], "output"));
  }

  // ---- The submodule: owned constants, then user inputs; the body; mutations, then outputs.
  auto sub = std::make_shared<ExportedProgram>();
  std::unordered_map<uint32_t, Node*> map;  // owner node id -> its submodule node
  map.reserve(part.nodes.size() + ext_inputs.size());
  auto mapped = [&map](const Node* n) -> Node* {
    auto it = map.find(n->id());
    return it == map.end() ? nullptr : it->second;
  };
  for (Node* p : owned_inputs) {
    const InputSpec* s = owner.input_spec(p);
    const Tensor* t = owner.constants().find(s->target);
    if (t == nullptr) {
      return internal_error("to_backend: {} '{}' names constant '{}', which is not stored",
                            input_kind_name(s->kind), p->name(), s->target);
    }
    Node* c = nullptr;
    switch (s->kind) {
      case InputKind::kParameter: c = sub->add_parameter(p->name(), s->target, *t); break;
      case InputKind::kBuffer: c = sub->add_buffer(p->name(), s->target, *t, s->persistent); break;
      case InputKind::kConstantTensor: c = sub->add_constant(p->name(), s->target, *t); break;
      case InputKind::kUserInput:
        return internal_error("to_backend: user input '{}' is tagged", p->name());
    }
    c->meta = p->meta;
    c->meta.delegation_tag.clear();  // the whole submodule is the partition
    map[p->id()] = c;
  }
  for (Node* v : ext_inputs) {
    const InputSpec* spec = v->op() == OpKind::kPlaceholder ? owner.input_spec(v) : nullptr;
    std::string user_name = spec != nullptr && spec->kind == InputKind::kUserInput ? spec->name : std::string();
    map[v->id()] = sub->add_user_input(v->name(), v->meta.val[0], user_name);
  }
  auto remap = [&](const Arg& a) -> Arg {
    if (a.is_node()) return Arg(mapped(a.node()));
    if (a.is_node_list()) {
      std::vector<Node*> l;
      l.reserve(a.nodes().size());
      for (Node* v : a.nodes()) l.push_back(mapped(v));
      return Arg(std::move(l));
    }
    return a;
  };
  std::vector<std::string> attr_targets;
  size_t delegated_calls = 0;
  for (Node* n : body) {
    Node* c = nullptr;
    if (n->op() == OpKind::kGetAttr) {
      std::string target(n->target_name());
      const Tensor* t = owner.constants().find(target);
      if (t == nullptr) {
        return unsupported("to_backend: partition '{}': get_attr '{}' reads '{}', which is not a "
                           "constant",
                           tag, n->name(), target);
      }
      sub->constants().set(target, *t);
      c = sub->graph().add_get_attr(target, n->name());
      attr_targets.push_back(target);
    } else {
      std::vector<Arg> args;
      args.reserve(n->num_args());
      for (const Arg& a : n->args()) args.push_back(remap(a));
      std::vector<Arg> kwargs(n->kwargs().begin(), n->kwargs().end());
      auto r = sub->graph().add_call_exact(n->target(), std::move(args), std::move(kwargs), n->name(),
                                           /*infer=*/false);
      if (!r.ok()) return r.status().with_context(fmt::format("to_backend: partition '{}'", tag));
      c = *r;
      ++delegated_calls;
    }
    c->meta = n->meta;
    c->meta.delegation_tag.clear();
    map[n->id()] = c;
  }
  std::vector<Node*> sub_outputs;
  std::vector<OutputSpec> sub_specs;
  for (size_t i : owned_mutations) {
    sub_outputs.push_back(mapped(out_values[i]));
    sub_specs.push_back({OutputKind::kBufferMutation, out_specs[i].target});
  }
  for (Node* v : user_outputs) {
    sub_outputs.push_back(mapped(v));
    // A value the program returns keeps the name its callers know it by.
    std::string name;
    for (size_t i = 0; i < out_values.size() && i < out_specs.size(); ++i) {
      if (out_values[i] == v && out_specs[i].kind == OutputKind::kUserOutput) {
        name = out_specs[i].name;
        break;
      }
    }
    sub_specs.push_back({OutputKind::kUserOutput, "", std::move(name)});
  }
  KILN_RETURN_IF_ERROR(sub->set_outputs(sub_outputs, std::move(sub_specs)));
  if (Status st = sub->lint(); !st.ok()) {
    return internal_error("to_backend: submodule of partition '{}' is invalid: {}", tag, st.message());
  }

  // ---- Preprocess.
  auto pre = part.backend->preprocess(*sub, part.delegation->compile_specs);
  if (!pre.ok()) {
    return pre.status().with_context(
        fmt::format("to_backend: backend '{}' failed on partition '{}'", part.backend->id(), tag));
  }
  LoweredModule lm;
  lm.name = module_name;
  lm.backend_id = std::string(part.backend->id());
  lm.compile_specs = part.delegation->compile_specs;
  lm.processed_bytes = std::make_shared<const VectorStorage>(std::move(pre->processed_bytes));
  lm.original_module = sub;
  lm.debug_handle_map = std::move(pre->debug_handle_map);
  for (auto& [key, tensor] : pre->named_data) {
    std::string constant = fmt::format("{}.{}", module_name, key);
    if (owner.constants().contains(constant)) {
      return invalid_argument("to_backend: backend '{}' on partition '{}': named data '{}' would be "
                              "stored as constant '{}', which exists",
                              part.backend->id(), tag, key, constant);
    }
    owner.constants().set(constant, std::move(tensor));
    lm.named_data.emplace_back(key, std::move(constant));
  }
  owner.lowered_modules().push_back(std::move(lm));

  // ---- Rewrite the owning graph: the call goes where the partition's last node was.
  Node* after = last->next();
  std::vector<Node*> getitems;
  {
    Graph::InsertGuard guard(g, after);
    Node* attr = g.add_get_attr(module_name, module_name);
    std::vector<Arg> args{Arg(attr)};
    for (Node* v : ext_inputs) args.emplace_back(v);
    auto cd = g.add_call_exact(OpId::kCallDelegate, std::move(args), {}, {}, /*infer=*/false);
    if (!cd.ok()) return cd.status().with_context("to_backend: inserting the delegate call");
    Node* call = *cd;
    for (Node* v : user_outputs) call->meta.val.push_back(v->meta.val[0]);
    call->meta.debug_handle = next_debug_handle++;
    for (size_t i = 0; i < user_outputs.size(); ++i) {
      auto gi = g.add_call_exact(OpId::kGetitem, {Arg(call), Arg(static_cast<int64_t>(i))}, {}, {},
                                 /*infer=*/false);
      if (!gi.ok()) return gi.status().with_context("to_backend: inserting a getitem");
      (*gi)->meta.val = {user_outputs[i]->meta.val[0]};
      getitems.push_back(*gi);
    }
  }
  for (Node* n : to_move) g.move_before(n, after);
  for (auto it = owned_mutations.rbegin(); it != owned_mutations.rend(); ++it) {
    KILN_RETURN_IF_ERROR(owner.erase_output(*it));
  }
  for (size_t i = 0; i < user_outputs.size(); ++i) {
    g.replace_all_uses_with_if(user_outputs[i], getitems[i],
                               [&](Node* user) { return !in.has(user); });
  }
  for (auto it = body.rbegin(); it != body.rend(); ++it) {
    if ((*it)->has_uses()) {
      return internal_error("to_backend: partition '{}': node '{}' is still used after outlining",
                            tag, (*it)->name());
    }
    g.erase(*it);
  }
  for (Node* p : owned_inputs) KILN_RETURN_IF_ERROR(owner.erase_input(p));
  if (!attr_targets.empty()) {
    std::set<std::string> still_read;
    for (Node* n : g.nodes()) {
      if (n->op() == OpKind::kGetAttr) still_read.insert(std::string(n->target_name()));
    }
    for (const InputSpec& s : owner.signature().inputs) still_read.insert(s.target);
    for (const std::string& t : attr_targets) {
      if (still_read.count(t) == 0) owner.constants().erase(t);
    }
  }
  return delegated_calls;
}

}  // namespace kiln::lower_detail
