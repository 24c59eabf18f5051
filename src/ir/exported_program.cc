#include "kiln/ir/exported_program.h"

#include <algorithm>
#include <unordered_set>

#include "kiln/ir/spec_match.h"

namespace kiln {
namespace {
constexpr const char* kInputKindNames[] = {"user_input", "parameter", "buffer", "constant_tensor"};
constexpr const char* kOutputKindNames[] = {"user_output", "buffer_mutation",
                                            "user_input_mutation"};
}  // namespace

const char* input_kind_name(InputKind kind) { return kInputKindNames[static_cast<int>(kind)]; }
const char* output_kind_name(OutputKind kind) { return kOutputKindNames[static_cast<int>(kind)]; }

std::optional<InputKind> input_kind_from_name(std::string_view name) {
  for (int i = 0; i < 4; ++i) {
    if (name == kInputKindNames[i]) return static_cast<InputKind>(i);
  }
  return std::nullopt;
}

std::optional<OutputKind> output_kind_from_name(std::string_view name) {
  for (int i = 0; i < 3; ++i) {
    if (name == kOutputKindNames[i]) return static_cast<OutputKind>(i);
  }
  return std::nullopt;
}

void name_user_outputs(const std::vector<Node*>& values, std::vector<OutputSpec>& specs) {
  std::unordered_set<std::string> taken;
  for (const OutputSpec& s : specs) {
    if (s.kind == OutputKind::kUserOutput && !s.name.empty()) taken.insert(s.name);
  }
  for (size_t i = 0; i < specs.size() && i < values.size(); ++i) {
    OutputSpec& s = specs[i];
    if (s.kind != OutputKind::kUserOutput || !s.name.empty()) continue;
    std::string name = values[i]->name();
    for (int k = 1; taken.count(name) != 0; ++k) name = fmt::format("{}_{}", values[i]->name(), k);
    taken.insert(name);
    s.name = std::move(name);
  }
}

void ConstantStore::set(const std::string& name, Tensor t) { tensors_[name] = std::move(t); }

const Tensor* ConstantStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Tensor* ConstantStore::find_mutable(const std::string& name) {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

size_t ConstantStore::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, t] : tensors_) total += t.nbytes();
  return total;
}

ExportedProgram::ExportedProgram() : graph_(std::make_unique<Graph>()) {}
ExportedProgram::~ExportedProgram() = default;
ExportedProgram::ExportedProgram(ExportedProgram&&) noexcept = default;
ExportedProgram& ExportedProgram::operator=(ExportedProgram&&) noexcept = default;

const Subgraph* ExportedProgram::find_subgraph(std::string_view name) const {
  for (const Subgraph& sg : subgraphs_) {
    if (sg.name == name) return &sg;
  }
  return nullptr;
}

namespace {

// The specs of a control-flow node's tensor operands, from argument `first` on.
Status operand_specs(const Node& n, size_t first, std::vector<const TensorSpec*>& out) {
  for (size_t i = first; i < n.num_args(); ++i) {
    const Arg& a = n.arg(i);
    std::vector<const Node*> nodes;
    if (a.is_node()) nodes.push_back(a.node());
    if (a.is_node_list()) nodes.assign(a.nodes().begin(), a.nodes().end());
    for (const Node* m : nodes) {
      if (!m->has_spec()) {
        return internal_error("lint: node '{}' ({}): operand '{}' has no spec", n.name(),
                              op_name(n.target()), m->name());
      }
      out.push_back(&m->spec());
    }
  }
  return Status::Ok();
}

std::string spec_text(const Node* n) { return n->has_spec() ? n->spec().to_string() : "unknown"; }

}  // namespace

// A loop reads a body whose user inputs are (iteration, condition, operands...) and whose user
// outputs are (condition, carried..., scan elements...): the carried values keep their specs
// through the body (a symbolic dim coming out may be the one going in: the run checks), and each
// scan result is its element's spec under one more leading dim.
Status ExportedProgram::lint_loop(const Node& n) const {
  auto fail = [&](std::string_view what) {
    return internal_error("lint: node '{}' (loop): {}", n.name(), what);
  };
  if (n.num_args() < 4 || n.arg(3).kind() != Arg::Kind::kInt) {
    return fail("expected trip_count, cond, body and num_carried");
  }
  const Node* attr = n.arg(2).is_node() ? n.arg(2).node() : nullptr;
  const Subgraph* sg = attr != nullptr && attr->op() == OpKind::kGetAttr
                           ? find_subgraph(attr->target_name())
                           : nullptr;
  if (sg == nullptr || sg->program == nullptr) return fail("body does not name a subgraph");
  std::vector<const TensorSpec*> operands;
  KILN_RETURN_IF_ERROR(operand_specs(n, 4, operands));
  int64_t carried = n.arg(3).to_int();
  if (carried < 0 || static_cast<size_t>(carried) > operands.size()) {
    return fail(fmt::format("num_carried is {} with {} operands", carried, operands.size()));
  }
  auto nc = static_cast<size_t>(carried);
  std::vector<Node*> ins = sg->program->user_inputs();
  std::vector<Node*> outs = sg->program->user_outputs();
  if (ins.size() != operands.size() + 2) {
    return fail(
        fmt::format("body '{}' takes {} inputs, the loop passes {} (with the iteration and "
                    "the condition)",
                    sg->name, ins.size(), operands.size() + 2));
  }
  const TensorSpec scalar_i64(DType::kI64, {}), scalar_bool(DType::kBool, {});
  if (!ins[0]->has_spec() || ins[0]->spec() != scalar_i64 || !ins[1]->has_spec() ||
      ins[1]->spec() != scalar_bool) {
    return fail(
        fmt::format("body '{}' must take an i64[] iteration and a bool[] condition, it "
                    "takes {} and {}",
                    sg->name, spec_text(ins[0]), spec_text(ins[1])));
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!ins[i + 2]->has_spec() || ins[i + 2]->spec() != *operands[i]) {
      return fail(fmt::format("body '{}': input {} is {}, the operand is {}", sg->name, i + 2,
                              spec_text(ins[i + 2]), operands[i]->to_string()));
    }
  }
  if (outs.size() < nc + 1 || outs.size() - 1 != n.meta.val.size()) {
    return fail(fmt::format("body '{}' returns {} values, the loop {} (and the condition)",
                            sg->name, outs.size(), n.meta.val.size()));
  }
  if (!outs[0]->has_spec() || outs[0]->spec() != scalar_bool) {
    return fail(fmt::format("body '{}' returns a {} condition, expected bool[]", sg->name,
                            spec_text(outs[0])));
  }
  for (size_t i = 0; i < nc; ++i) {
    if (!outs[i + 1]->has_spec() || !may_equal(outs[i + 1]->spec(), *operands[i]) ||
        n.meta.val[i] != *operands[i]) {
      return fail(fmt::format(
          "carried value {} is {} going in, {} out of the body and {} out of "
          "the loop",
          i, operands[i]->to_string(), spec_text(outs[i + 1]), n.meta.val[i].to_string()));
    }
  }
  for (size_t i = nc; i < n.meta.val.size(); ++i) {
    const TensorSpec& r = n.meta.val[i];
    const Node* e = outs[i + 1];
    bool ok = e->has_spec() && r.dtype == e->spec().dtype &&
              r.shape.size() == e->spec().shape.size() + 1 &&
              std::equal(e->spec().shape.begin(), e->spec().shape.end(), r.shape.begin() + 1);
    if (!ok) {
      return fail(
          fmt::format("scan output {} is {}, its element {}", i - nc, r.to_string(), spec_text(e)));
    }
  }
  return Status::Ok();
}

// A cond reads two subgraphs whose user inputs take its operands and whose user outputs are its
// results, spec for spec.
Status ExportedProgram::lint_cond(const Node& n) const {
  auto fail = [&](std::string_view what) {
    return internal_error("lint: node '{}' (cond): {}", n.name(), what);
  };
  if (n.num_args() < 3) return fail("expected pred, true_branch and false_branch");
  std::vector<const TensorSpec*> operands;
  KILN_RETURN_IF_ERROR(operand_specs(n, 3, operands));
  for (size_t b = 1; b <= 2; ++b) {
    const Arg& a = n.arg(b);
    const Node* attr = a.is_node() ? a.node() : nullptr;
    const Subgraph* sg = attr != nullptr && attr->op() == OpKind::kGetAttr
                             ? find_subgraph(attr->target_name())
                             : nullptr;
    const char* which = b == 1 ? "true_branch" : "false_branch";
    if (sg == nullptr) return fail(fmt::format("{} does not name a subgraph", which));
    if (sg->program == nullptr) continue;  // cannot run on these shapes: nothing to match
    std::vector<Node*> ins = sg->program->user_inputs();
    std::vector<Node*> outs = sg->program->user_outputs();
    if (ins.size() != operands.size()) {
      return fail(fmt::format("{} '{}' takes {} inputs, the cond passes {}", which, sg->name,
                              ins.size(), operands.size()));
    }
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!ins[i]->has_spec() || ins[i]->spec() != *operands[i]) {
        return fail(fmt::format("{} '{}': input {} is {}, the operand is {}", which, sg->name, i,
                                ins[i]->has_spec() ? ins[i]->spec().to_string() : "unknown",
                                operands[i]->to_string()));
      }
    }
    if (outs.size() != n.meta.val.size()) {
      return fail(fmt::format("{} '{}' returns {} values, the cond {}", which, sg->name,
                              outs.size(), n.meta.val.size()));
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i]->has_spec() || outs[i]->spec() != n.meta.val[i]) {
        return fail(fmt::format("{} '{}': output {} is {}, the cond's result is {}", which,
                                sg->name, i,
                                outs[i]->has_spec() ? outs[i]->spec().to_string() : "unknown",
                                n.meta.val[i].to_string()));
      }
    }
  }
  return Status::Ok();
}

const LoweredModule* ExportedProgram::find_lowered_module(std::string_view name) const {
  auto hit = [&]() -> const LoweredModule* {
    auto it = lowered_index_.find(std::string(name));
    if (it == lowered_index_.end() || it->second >= lowered_.size()) return nullptr;
    const LoweredModule& m = lowered_[it->second];
    return m.name == name ? &m : nullptr;
  };
  if (const LoweredModule* m = hit()) return m;
  if (lowered_indexed_ > lowered_.size() || lowered_index_.count(std::string(name)) > 0) {
    // Modules were removed, or this entry went stale (renamed or reordered): index anew.
    lowered_index_.clear();
    lowered_indexed_ = 0;
  }
  if (lowered_indexed_ < lowered_.size()) {
    for (size_t i = lowered_indexed_; i < lowered_.size(); ++i) lowered_index_[lowered_[i].name] = i;
    lowered_indexed_ = lowered_.size();
    return hit();
  }
  // Nothing appended: a miss is certain unless a module was renamed in place.
  for (size_t i = 0; i < lowered_.size(); ++i) {
    if (lowered_[i].name == name) {
      lowered_index_[lowered_[i].name] = i;
      return &lowered_[i];
    }
  }
  return nullptr;
}

Node* ExportedProgram::add_user_input(std::string_view name, TensorSpec spec,
                                      std::string user_name) {
  Node* n = graph_->add_placeholder(name, std::move(spec));
  if (user_name.empty()) user_name = n->name();
  signature_.inputs.push_back({InputKind::kUserInput, n->name(), "", true, std::move(user_name)});
  return n;
}

namespace {
TensorSpec spec_of(const Tensor& t) { return TensorSpec::of(t.dtype(), t.shape()); }
}  // namespace

Node* ExportedProgram::add_parameter(std::string_view name, const std::string& target,
                                     Tensor value) {
  Node* n = graph_->add_placeholder(name, spec_of(value));
  constants_.set(target, std::move(value));
  signature_.inputs.push_back({InputKind::kParameter, n->name(), target, true});
  return n;
}

Node* ExportedProgram::add_buffer(std::string_view name, const std::string& target, Tensor value,
                                  bool persistent) {
  Node* n = graph_->add_placeholder(name, spec_of(value));
  constants_.set(target, std::move(value));
  signature_.inputs.push_back({InputKind::kBuffer, n->name(), target, persistent});
  return n;
}

Node* ExportedProgram::add_constant(std::string_view name, const std::string& target,
                                    Tensor value) {
  Node* n = graph_->add_placeholder(name, spec_of(value));
  constants_.set(target, std::move(value));
  signature_.inputs.push_back({InputKind::kConstantTensor, n->name(), target, true});
  return n;
}

Status ExportedProgram::set_outputs(const std::vector<Node*>& values,
                                    std::vector<OutputSpec> specs) {
  if (values.size() != specs.size()) {
    return invalid_argument("set_outputs: {} values but {} output specs", values.size(),
                            specs.size());
  }
  name_user_outputs(values, specs);
  graph_->set_output(values);
  signature_.outputs = std::move(specs);
  return Status::Ok();
}

Status ExportedProgram::erase_input(Node* node) {
  if (node->op() != OpKind::kPlaceholder) {
    return invalid_argument("erase_input: node '{}' is not a placeholder", node->name());
  }
  if (node->has_uses()) {
    return invalid_argument("erase_input: placeholder '{}' still has {} users", node->name(),
                            node->num_users());
  }
  auto& ins = signature_.inputs;
  auto it = std::find_if(ins.begin(), ins.end(), [&](const InputSpec& s) { return s.arg == node->name(); });
  if (it == ins.end()) {
    return invalid_argument("erase_input: placeholder '{}' has no input spec", node->name());
  }
  std::string target = it->target;
  ins.erase(it);
  graph_->erase(node);
  if (!target.empty()) {
    bool still_named = std::any_of(ins.begin(), ins.end(),
                                   [&](const InputSpec& s) { return s.target == target; });
    if (!still_named) constants_.erase(target);
  }
  return Status::Ok();
}

Status ExportedProgram::erase_inputs(std::span<Node* const> nodes) {
  std::unordered_set<std::string_view> names;
  for (Node* node : nodes) {
    if (node->op() != OpKind::kPlaceholder) {
      return invalid_argument("erase_inputs: node '{}' is not a placeholder", node->name());
    }
    if (node->has_uses()) {
      return invalid_argument("erase_inputs: placeholder '{}' still has {} users", node->name(), node->num_users());
    }
    if (input_spec(node) == nullptr) return invalid_argument("erase_inputs: placeholder '{}' has no input spec", node->name());
    if (!names.insert(node->name()).second) return invalid_argument("erase_inputs: placeholder '{}' is given twice", node->name());
  }
  auto& ins = signature_.inputs;
  std::unordered_set<std::string> targets;  // of the erased specs
  std::erase_if(ins, [&](const InputSpec& s) {
    if (!names.count(s.arg)) return false;
    if (!s.target.empty()) targets.insert(s.target);
    return true;
  });
  input_index_.clear();
  inputs_indexed_ = 0;
  for (Node* node : nodes) graph_->erase(node);
  for (const InputSpec& s : ins) targets.erase(s.target);  // still named by another input
  for (const std::string& t : targets) constants_.erase(t);
  return Status::Ok();
}

Status ExportedProgram::erase_output(size_t index) {
  Node* out = graph_->output_node();
  if (out == nullptr || index >= signature_.outputs.size()) {
    return invalid_argument("erase_output: no output {}", index);
  }
  std::vector<Node*> values = out->arg(0).nodes();
  if (index >= values.size()) return invalid_argument("erase_output: no output {}", index);
  values.erase(values.begin() + static_cast<std::ptrdiff_t>(index));
  KILN_RETURN_IF_ERROR(graph_->set_args(out, {Arg(values)}));
  signature_.outputs.erase(signature_.outputs.begin() + static_cast<std::ptrdiff_t>(index));
  return Status::Ok();
}

const InputSpec* ExportedProgram::input_spec(const Node* node) const {
  // O(1) through input_index_: extended when inputs are appended, rebuilt when an entry went
  // stale (signature() hands out the vector itself; erasing shifts positions).
  const auto& ins = signature_.inputs;
  auto hit = [&]() -> const InputSpec* {
    auto it = input_index_.find(node->name());
    if (it == input_index_.end() || it->second >= ins.size()) return nullptr;
    const InputSpec& s = ins[it->second];
    return s.arg == node->name() ? &s : nullptr;
  };
  if (node->op() != OpKind::kPlaceholder) return nullptr;
  if (const InputSpec* s = hit()) return s;
  if (inputs_indexed_ > ins.size() || input_index_.count(node->name()) > 0) {
    input_index_.clear();
    inputs_indexed_ = 0;
  }
  if (inputs_indexed_ < ins.size()) {
    for (size_t i = inputs_indexed_; i < ins.size(); ++i) input_index_.emplace(ins[i].arg, i);
    inputs_indexed_ = ins.size();
    if (const InputSpec* s = hit()) return s;
  }
  // Not indexed under its name: a spec renamed in place, or none (a program that does not lint).
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].arg == node->name()) {
      input_index_[ins[i].arg] = i;
      return &ins[i];
    }
  }
  return nullptr;
}

std::vector<Node*> ExportedProgram::user_inputs() const {
  std::vector<Node*> out;
  for (const auto& s : signature_.inputs) {
    if (s.kind == InputKind::kUserInput) out.push_back(graph_->find(s.arg));
  }
  return out;
}

std::vector<Node*> ExportedProgram::user_outputs() const {
  std::vector<Node*> out;
  const Node* o = graph_->output_node();
  if (o == nullptr) return out;
  const auto& values = o->arg(0).nodes();
  for (size_t i = 0; i < values.size() && i < signature_.outputs.size(); ++i) {
    if (signature_.outputs[i].kind == OutputKind::kUserOutput) out.push_back(values[i]);
  }
  return out;
}

std::vector<std::string> ExportedProgram::user_input_names() const {
  std::vector<std::string> out;
  for (const auto& s : signature_.inputs) {
    if (s.kind == InputKind::kUserInput) out.push_back(s.name);
  }
  return out;
}

std::vector<std::string> ExportedProgram::user_output_names() const {
  std::vector<std::string> out;
  for (const auto& s : signature_.outputs) {
    if (s.kind == OutputKind::kUserOutput) out.push_back(s.name);
  }
  return out;
}

std::vector<std::string> ExportedProgram::mutated_buffers() const {
  std::vector<std::string> out;
  for (const auto& s : signature_.outputs) {
    if (s.kind == OutputKind::kBufferMutation) out.push_back(s.target);
  }
  return out;
}

Status ExportedProgram::lint() const {
  KILN_RETURN_IF_ERROR(graph_->lint());
  auto ph = graph_->placeholders();
  const auto& ins = signature_.inputs;
  if (ph.size() != ins.size()) {
    return internal_error("lint: graph has {} placeholders but the signature lists {} inputs",
                          ph.size(), ins.size());
  }
  std::unordered_set<std::string> buffers, user_inputs, names;
  for (size_t i = 0; i < ph.size(); ++i) {
    const InputSpec& s = ins[i];
    if (ph[i]->name() != s.arg) {
      return internal_error("lint: input {} is placeholder '{}' but the signature names '{}'", i,
                            ph[i]->name(), s.arg);
    }
    if (s.kind == InputKind::kUserInput) {
      if (s.name.empty() || !names.insert(s.name).second) {
        return internal_error("lint: user input '{}' has {} name '{}'", s.arg,
                              s.name.empty() ? "an empty" : "a repeated", s.name);
      }
      user_inputs.insert(s.arg);
      continue;
    }
    const Tensor* t = constants_.find(s.target);
    if (t == nullptr) {
      return internal_error("lint: {} '{}' names constant '{}', which is not in the store",
                            input_kind_name(s.kind), s.arg, s.target);
    }
    if (ph[i]->has_spec() && ph[i]->spec() != spec_of(*t)) {
      return internal_error("lint: placeholder '{}' is {} but constant '{}' is {}", s.arg,
                            ph[i]->spec().to_string(), s.target, spec_of(*t).to_string());
    }
    if (s.kind == InputKind::kBuffer) buffers.insert(s.target);
  }
  for (const LoweredModule& m : lowered_) {
    for (const auto& [key, constant] : m.named_data) {
      if (!constants_.contains(constant)) {
        return internal_error("lint: lowered module '{}': named data '{}' names constant '{}', "
                              "which is not stored",
                              m.name, key, constant);
      }
    }
  }
  const Node* out = graph_->output_node();
  size_t n_out = out ? out->arg(0).nodes().size() : 0;
  if (n_out != signature_.outputs.size()) {
    return internal_error("lint: graph returns {} values but the signature lists {} outputs",
                          n_out, signature_.outputs.size());
  }
  names.clear();
  for (size_t i = 0; i < signature_.outputs.size(); ++i) {
    const OutputSpec& s = signature_.outputs[i];
    if (s.kind == OutputKind::kUserOutput && (s.name.empty() || !names.insert(s.name).second)) {
      return internal_error("lint: user output {} has {} name '{}'", i,
                            s.name.empty() ? "an empty" : "a repeated", s.name);
    }
    if (s.kind == OutputKind::kBufferMutation && buffers.count(s.target) == 0) {
      return internal_error("lint: output {} mutates '{}', which is not a buffer input", i,
                            s.target);
    }
    if (s.kind == OutputKind::kUserInputMutation && user_inputs.count(s.target) == 0) {
      return internal_error("lint: output {} mutates '{}', which is not a user input", i, s.target);
    }
  }
  for (Node* n : graph_->nodes()) {
    if (n->op() != OpKind::kGetAttr) continue;
    std::string target(n->target_name());
    if (!constants_.contains(target) && find_lowered_module(target) == nullptr &&
        find_subgraph(target) == nullptr) {
      return internal_error(
          "lint: get_attr '{}' reads '{}', which is neither a constant, a "
          "lowered module nor a subgraph",
          n->name(), target);
    }
  }
  for (const Subgraph& sg : subgraphs_) {
    if (sg.program == nullptr) {
      if (sg.error.empty()) return internal_error("lint: subgraph '{}' has no program", sg.name);
      continue;
    }
    Status st = sg.program->lint();
    if (!st.ok()) return st.with_context(fmt::format("subgraph '{}'", sg.name));
  }
  for (Node* n : graph_->nodes()) {
    if (n->is_call(OpId::kCond)) KILN_RETURN_IF_ERROR(lint_cond(*n));
    if (n->is_call(OpId::kLoop)) KILN_RETURN_IF_ERROR(lint_loop(*n));
  }
  return Status::Ok();
}

ExportedProgram ExportedProgram::clone() const {
  ExportedProgram ep;
  Graph& g = *ep.graph_;
  std::vector<Node*> map(graph_->id_bound(), nullptr);
  auto remap = [&](const Arg& a) -> Arg {
    if (a.is_node()) return Arg(map[a.node()->id()]);
    if (a.is_node_list()) {
      std::vector<Node*> l;
      for (Node* v : a.nodes()) l.push_back(map[v->id()]);
      return Arg(std::move(l));
    }
    return a;
  };
  for (Node* n : graph_->nodes()) {
    Node* c = nullptr;
    switch (n->op()) {
      case OpKind::kPlaceholder: c = g.add_placeholder(n->name(), TensorSpec()); break;
      case OpKind::kGetAttr: c = g.add_get_attr(n->target_name(), n->name()); break;
      case OpKind::kOutput: c = g.set_output(remap(n->arg(0)).nodes()); break;
      case OpKind::kCallFunction: {
        std::vector<Arg> args;
        for (const Arg& a : n->args()) args.push_back(remap(a));
        std::vector<Arg> kw(n->kwargs().begin(), n->kwargs().end());
        auto r = g.add_call_exact(n->target(), std::move(args), std::move(kw), n->name(), false);
        KILN_CHECK(r.ok());
        c = *r;
        break;
      }
    }
    c->meta = n->meta;
    map[n->id()] = c;
  }
  ep.signature_ = signature_;
  ep.constants_ = constants_;
  ep.lowered_ = lowered_;
  for (const Subgraph& sg : subgraphs_) {
    ep.subgraphs_.push_back(
        {sg.name, sg.program ? std::make_shared<ExportedProgram>(sg.program->clone()) : nullptr,
         sg.error});
  }
  return ep;
}

}  // namespace kiln
