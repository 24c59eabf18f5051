#include "kiln/ir/graph.h"

#include <algorithm>
#include <bit>
#include <memory>

namespace kiln {
namespace {

constexpr uint64_t kOrderGap = uint64_t{1} << 20;
constexpr uint64_t kPlaceholderGap = kOrderGap << 20;  // room for 2^20 placeholders; 2^40 of 2^64

bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string sanitize(std::string_view base) {
  std::string s;
  s.reserve(base.size() + 1);
  for (char c : base) s.push_back(is_ident_char(c) ? c : '_');
  if (s.empty()) s = "node";
  if (s[0] >= '0' && s[0] <= '9') s.insert(s.begin(), '_');
  return s;
}

}  // namespace

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kPlaceholder: return "placeholder";
    case OpKind::kGetAttr: return "get_attr";
    case OpKind::kCallFunction: return "call_function";
    case OpKind::kOutput: return "output";
  }
  return "?";
}

std::string_view Node::target_name() const {
  if (op_ == OpKind::kCallFunction) return op_name(target_);
  if (op_ == OpKind::kOutput) return "output";
  if (op_ == OpKind::kGetAttr) return *attr_target_;
  return name_;  // a placeholder's target is its name
}

const Arg& Node::kwarg(std::string_view name) const {
  int idx = schema().keyword_index(name);
  KILN_CHECK(idx >= 0 && static_cast<uint32_t>(idx) < num_kwargs_);
  return args_[num_args_ + static_cast<uint32_t>(idx)];
}

std::string_view Node::fused_activation() const {
  if (op_ != OpKind::kCallFunction) return "none";
  int idx = schema().keyword_index("activation");
  if (idx < 0 || static_cast<uint32_t>(idx) >= num_kwargs_) return "none";
  const Arg& a = args_[num_args_ + static_cast<uint32_t>(idx)];
  return a.kind() == Arg::Kind::kStr ? std::string_view(a.to_str()) : std::string_view("none");
}

std::vector<Node*> Node::input_nodes() const {
  std::vector<Node*> out;
  for (uint32_t i = 0; i < num_uses_; ++i) {
    Node* v = uses_[i].value;
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

std::vector<Node*> Node::users() const {
  std::vector<Node*> out;
  for (const Use* u = first_use_; u != nullptr; u = u->next) out.push_back(u->user);
  std::sort(out.begin(), out.end(), [](Node* a, Node* b) { return a->order_ < b->order_; });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

size_t Node::num_users() const {
  if (use_count_ <= 1) return use_count_;
  return users().size();
}

const TensorSpec& Node::spec() const {
  KILN_CHECK(meta.val.size() == 1);
  return meta.val[0];
}

bool is_shape_dynamic(const Node& node) {
  for (const TensorSpec& s : node.meta.val) {
    if (!s.is_static()) return true;
  }
  return false;
}

Graph::Graph() = default;

Graph::~Graph() {
  for (uint32_t id = 0; id < next_id_; ++id) {
    Node* n = slot(id);
    free_args_storage(n);
    use_pool_.give(n->uses_, n->num_uses_);
    n->~Node();
  }
}

Node* Graph::slot(uint32_t id) const {
  uint32_t x = id + (1u << kFirstChunkBits);
  auto msb = static_cast<uint32_t>(std::bit_width(x) - 1);
  return chunks_[msb - kFirstChunkBits] + (x - (1u << msb));
}

void Graph::set_args_storage(Node* n, std::span<Arg> args, std::span<Arg> kwargs) {
  free_args_storage(n);
  auto total = static_cast<uint32_t>(args.size() + kwargs.size());
  if (total == 0) return;
  n->args_ = arg_pool_.take(total);
  std::uninitialized_move(args.begin(), args.end(), n->args_);
  std::uninitialized_move(kwargs.begin(), kwargs.end(), n->args_ + args.size());
  n->num_args_ = static_cast<uint32_t>(args.size());
  n->num_kwargs_ = static_cast<uint32_t>(kwargs.size());
}

void Graph::free_args_storage(Node* n) {
  uint32_t total = n->num_args_ + n->num_kwargs_;
  std::destroy_n(n->args_, total);
  arg_pool_.give(n->args_, total);
  n->args_ = nullptr;
  n->num_args_ = n->num_kwargs_ = 0;
}

// Names `n` after `base_in` (sanitized), or base_N with the next free N.
namespace {
bool clean_name(std::string_view name) {
  return !name.empty() && !(name[0] >= '0' && name[0] <= '9') && std::all_of(name.begin(), name.end(), is_ident_char);
}
}  // namespace

void Graph::assign_unique_name(Node* n, std::string_view base_in) {
  n->name_ = clean_name(base_in) ? names_.insert_unique(base_in, n) : names_.insert_unique(sanitize(base_in), n);
}

Node* Graph::new_node(OpKind kind, std::string_view name) {
  uint32_t id = next_id_++;
  if (std::bit_width(id + (1u << kFirstChunkBits)) - 1 - kFirstChunkBits == chunks_.size()) {
    size_t count = size_t{1} << (kFirstChunkBits + chunks_.size());
    chunks_.push_back(static_cast<Node*>(arena_.allocate(count * sizeof(Node), alignof(Node))));
  }
  Node* n = ::new (static_cast<void*>(slot(id))) Node();
  n->id_ = id;
  n->op_ = kind;
  n->graph_ = this;
  assign_unique_name(n, name);
  ++live_count_;
  return n;
}

void Graph::renumber() {
  // Placeholders are all inserted at one point, after the last one: a wide gap there lets passes
  // add 2^20 constants (kOrderGap apart, see assign_order) before the next renumbering, instead
  // of halving a normal gap 20 times (which made adding 100k constants quadratic).
  uint64_t k = kOrderGap;
  for (Node* n = first_; n != nullptr; n = n->next_, k += kOrderGap) {
    n->order_ = k;
    if (n == last_placeholder_) k += kPlaceholderGap;
  }
}

void Graph::assign_order(Node* n) {
  uint64_t lo = n->prev_ ? n->prev_->order_ : 0;
  if (n->next_ == nullptr) {
    n->order_ = lo + kOrderGap;
    return;
  }
  uint64_t hi = n->next_->order_;
  if (hi - lo < 2) {
    renumber();
    return;
  }
  n->order_ = lo + std::min(kOrderGap, (hi - lo) / 2);
}

void Graph::link_before(Node* n, Node* pos) {
  if (pos == nullptr) {
    n->prev_ = last_;
    n->next_ = nullptr;
    if (last_) last_->next_ = n; else first_ = n;
    last_ = n;
  } else {
    n->next_ = pos;
    n->prev_ = pos->prev_;
    if (pos->prev_) pos->prev_->next_ = n; else first_ = n;
    pos->prev_ = n;
  }
  assign_order(n);
}

void Graph::unlink(Node* n) {
  if (n->prev_) n->prev_->next_ = n->next_; else first_ = n->next_;
  if (n->next_) n->next_->prev_ = n->prev_; else last_ = n->prev_;
  n->prev_ = n->next_ = nullptr;
}

void Graph::add_use(Use* u) {
  Node* v = u->value;
  u->prev = nullptr;
  u->next = v->first_use_;
  if (v->first_use_) v->first_use_->prev = u;
  v->first_use_ = u;
  ++v->use_count_;
}

void Graph::remove_use(Use* u) {
  Node* v = u->value;
  if (u->prev) u->prev->next = u->next; else v->first_use_ = u->next;
  if (u->next) u->next->prev = u->prev;
  u->prev = u->next = nullptr;
  --v->use_count_;
}

void Graph::build_uses(Node* n) {
  uint32_t count = 0;
  for (const Arg& a : n->args()) {
    if (a.is_node()) ++count;
    else if (a.is_node_list()) count += static_cast<uint32_t>(a.nodes().size());
  }
  n->uses_ = count ? use_pool_.take(count) : nullptr;
  n->num_uses_ = count;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n->num_args_; ++i) {
    const Arg& a = n->args_[i];
    if (a.is_node()) {
      n->uses_[k] = Use{a.node(), n, nullptr, nullptr, i, -1};
      add_use(&n->uses_[k++]);
    } else if (a.is_node_list()) {
      for (size_t j = 0; j < a.nodes().size(); ++j) {
        n->uses_[k] = Use{a.nodes()[j], n, nullptr, nullptr, i, static_cast<int32_t>(j)};
        add_use(&n->uses_[k++]);
      }
    }
  }
}

void Graph::drop_uses(Node* n) {
  for (uint32_t i = 0; i < n->num_uses_; ++i) remove_use(&n->uses_[i]);
  use_pool_.give(n->uses_, n->num_uses_);
  n->uses_ = nullptr;
  n->num_uses_ = 0;
}

Node* Graph::set_insert_point(Node* before) {
  Node* prev = insert_point_;
  insert_point_ = before;
  return prev;
}

Node* Graph::add_placeholder(std::string_view name, TensorSpec spec) {
  Node* n = new_node(OpKind::kPlaceholder, name);
  n->meta.val.push_back(std::move(spec));
  Node* pos = last_placeholder_ ? last_placeholder_->next_ : first_;
  last_placeholder_ = n;  // before linking: a renumbering while linking leaves its gap after n
  link_before(n, pos);
  return n;
}

Node* Graph::add_get_attr(std::string_view target, std::string_view name) {
  Node* n = new_node(OpKind::kGetAttr, name.empty() ? target : name);
  n->attr_target_ = std::make_unique<std::string>(target);
  link_before(n, insert_point_ ? insert_point_ : output_);
  return n;
}

Node* Graph::set_output(std::vector<Node*> values) {
  if (output_ != nullptr) {
    KILN_CHECK(set_args(output_, {Arg(std::move(values))}).ok());
    return output_;
  }
  Node* n = new_node(OpKind::kOutput, "output");
  Arg arg(std::move(values));
  set_args_storage(n, {&arg, 1}, {});
  link_before(n, nullptr);
  build_uses(n);
  output_ = n;
  return n;
}

Status Graph::check_schema(Node* n, std::vector<Arg>& args, std::vector<Arg>& kwargs) const {
  const Schema& s = op_def(n->target_).schema;
  auto where = [&]() { return fmt::format("node '{}' ({})", n->name_, s.name); };
  bool variadic = !s.positional.empty() && s.positional.back().type == ParamType::kVariadicTensor;
  size_t fixed = variadic ? s.positional.size() - 1 : s.positional.size();
  if (!variadic && args.size() > fixed) {
    return invalid_argument("{}: got {} positional arguments, expected at most {}", where(),
                            args.size(), fixed);
  }
  for (size_t i = 0; i < std::max(fixed, args.size()); ++i) {
    const Param& p = s.positional[std::min(i, s.positional.size() - 1)];
    if (i >= args.size()) {
      if (!p.has_default) return invalid_argument("{}: missing argument '{}'", where(), p.name);
      args.push_back(p.default_value);
      continue;
    }
    if (auto err = coerce_arg(p.type, &args[i])) {
      return invalid_argument("{}: argument '{}': {}", where(), p.name, *err);
    }
  }
  if (kwargs.size() != s.keyword.size()) {
    return invalid_argument("{}: got {} keyword arguments, expected {}", where(), kwargs.size(),
                            s.keyword.size());
  }
  for (size_t i = 0; i < kwargs.size(); ++i) {
    if (auto err = coerce_arg(s.keyword[i].type, &kwargs[i])) {
      return invalid_argument("{}: argument '{}': {}", where(), s.keyword[i].name, *err);
    }
  }
  for (const Arg& a : args) {
    auto check_node = [&](Node* v) -> Status {
      if (v == nullptr) return invalid_argument("{}: null node in arguments", where());
      if (v->graph_ != this || v->erased_) {
        return invalid_argument("{}: argument node '{}' is not in this graph", where(), v->name_);
      }
      return Status::Ok();
    };
    if (a.is_node()) KILN_RETURN_IF_ERROR(check_node(a.node()));
    if (a.is_node_list()) {
      for (Node* v : a.nodes()) KILN_RETURN_IF_ERROR(check_node(v));
    }
  }
  return Status::Ok();
}

// Allocation-free form of check_schema for lint: stored args are already coerced and complete.
bool Graph::args_fit_schema(const Node* n) const {
  const Schema& s = op_def(n->target_).schema;
  bool variadic = !s.positional.empty() && s.positional.back().type == ParamType::kVariadicTensor;
  size_t fixed = variadic ? s.positional.size() - 1 : s.positional.size();
  if (n->num_args_ < fixed || (!variadic && n->num_args_ > fixed)) return false;
  if (n->num_kwargs_ != s.keyword.size()) return false;
  for (size_t i = 0; i < n->num_args_; ++i) {
    const Param& p = s.positional[std::min(i, s.positional.size() - 1)];
    if (!arg_fits(p.type, n->args_[i])) return false;
  }
  std::span<const Arg> kwargs = n->kwargs();
  for (size_t i = 0; i < kwargs.size(); ++i) {
    if (!arg_fits(s.keyword[i].type, kwargs[i])) return false;
  }
  return true;
}

Result<Node*> Graph::add_call(OpId op, std::vector<Arg> args, const Kwargs& kwargs,
                              std::string_view name, bool infer_spec) {
  if (op >= OpId::kNumOps) return invalid_argument("add_call: unknown op id {}", static_cast<int>(op));
  const Schema& s = op_def(op).schema;
  std::vector<Arg> kw(s.keyword.size());
  KILN_CHECK(kw.size() <= 64);
  uint64_t given = 0;
  std::string_view shown = name.empty() ? std::string_view(s.name) : name;
  for (const auto& [key, value] : kwargs) {
    int idx = s.keyword_index(key);
    if (idx < 0) {
      return invalid_argument("node '{}' ({}): unknown keyword argument '{}'", shown, s.name, key);
    }
    kw[static_cast<size_t>(idx)] = value;
    given |= uint64_t{1} << idx;
  }
  for (size_t i = 0; i < kw.size(); ++i) {
    if (given >> i & 1) continue;
    if (!s.keyword[i].has_default) {
      return invalid_argument("node '{}' ({}): missing argument '{}'", shown, s.name,
                              s.keyword[i].name);
    }
    kw[i] = s.keyword[i].default_value;
  }
  return add_call_exact(op, std::move(args), std::move(kw), name.empty() ? s.name : name,
                        infer_spec);
}

Result<Node*> Graph::add_call_exact(OpId op, std::vector<Arg> args, std::vector<Arg> kwargs,
                                    std::string_view name, bool infer_spec) {
  if (op >= OpId::kNumOps) return invalid_argument("add_call: unknown op id {}", static_cast<int>(op));
  Node* n = new_node(OpKind::kCallFunction, name.empty() ? op_name(op) : name);
  n->target_ = op;
  Status st = check_schema(n, args, kwargs);
  if (st.ok()) {
    set_args_storage(n, args, kwargs);
    link_before(n, insert_point_ ? insert_point_ : output_);
    build_uses(n);
    for (uint32_t i = 0; i < n->num_uses_ && st.ok(); ++i) {
      if (!n->uses_[i].value->is_before(n)) {
        st = invalid_argument("node '{}' ({}): input '{}' comes after the insertion point",
                              n->name_, op_name(op), n->uses_[i].value->name_);
      }
    }
    if (st.ok() && infer_spec) st = infer(n);
  }
  if (!st.ok()) {
    if (n->prev_ != nullptr || n->next_ != nullptr || first_ == n) {
      erase(n);
    } else {
      names_.erase(n->name_);
      n->erased_ = true;
      --live_count_;
    }
    return st;
  }
  return n;
}

Status Graph::infer(Node* n) {
  if (n->op_ != OpKind::kCallFunction) return Status::Ok();
  const OpDef& def = op_def(n->target_);
  if (def.infer == nullptr) return Status::Ok();
  const Schema& s = def.schema;
  for (uint32_t i = 0; i < n->num_uses_; ++i) {
    const Use& u = n->uses_[i];
    Node* v = u.value;
    const Param& p = s.positional[std::min<size_t>(u.arg_index, s.positional.size() - 1)];
    if (v->meta.val.empty()) return Status::Ok();  // unknown input: leave the spec unknown
    if (p.type != ParamType::kAny && v->meta.val.size() != 1) {
      return invalid_argument("node '{}' ({}): argument '{}': node '{}' returns {} values; read "
                              "one with getitem",
                              n->name_, s.name, p.name, v->name_, v->meta.val.size());
    }
  }
  SpecList out;
  Status st = def.infer(*n, &out);
  if (!st.ok()) return st.with_context(fmt::format("node '{}' ({})", n->name_, s.name));
  n->meta.val = std::move(out);
  return Status::Ok();
}

void Graph::replace_all_uses_with(Node* from, Node* to) {
  replace_all_uses_with_if(from, to, nullptr);
}

void Graph::replace_all_uses_with_if(Node* from, Node* to,
                                     const std::function<bool(Node*)>& pred) {
  if (from == to) return;
  Use* u = from->first_use_;
  while (u != nullptr) {
    Use* next = u->next;
    if (!pred || pred(u->user)) {
      Arg& a = u->user->args_[u->arg_index];
      if (u->elem_index < 0) a.node_ref() = to;
      else a.nodes_ref()[static_cast<size_t>(u->elem_index)] = to;
      remove_use(u);
      u->value = to;
      add_use(u);
    }
    u = next;
  }
}

Status Graph::set_arg(Node* node, size_t i, Arg value) {
  if (i >= node->num_args_) {
    return invalid_argument("node '{}': no positional argument {}", node->name_, i);
  }
  std::vector<Arg> args(node->args().begin(), node->args().end());
  args[i] = std::move(value);
  return set_args(node, std::move(args));
}

Status Graph::set_args(Node* node, std::vector<Arg> args) {
  std::vector<Arg> kw(node->kwargs().begin(), node->kwargs().end());
  if (node->op_ == OpKind::kCallFunction) {
    KILN_RETURN_IF_ERROR(check_schema(node, args, kw));
  } else if (node->op_ == OpKind::kOutput) {
    if (args.size() != 1 || !args[0].is_node_list()) {
      return invalid_argument("output node takes one list of nodes");
    }
  } else {
    return invalid_argument("node '{}' ({}) takes no arguments", node->name_,
                            op_kind_name(node->op_));
  }
  drop_uses(node);
  set_args_storage(node, args, kw);
  build_uses(node);
  return Status::Ok();
}

Status Graph::set_kwarg(Node* node, std::string_view name, Arg value) {
  if (node->op_ != OpKind::kCallFunction) {
    return invalid_argument("node '{}' ({}) has no keyword arguments", node->name_,
                            op_kind_name(node->op_));
  }
  const Schema& s = node->schema();
  int idx = s.keyword_index(name);
  if (idx < 0) {
    return invalid_argument("node '{}' ({}): unknown keyword argument '{}'", node->name_, s.name,
                            name);
  }
  if (auto err = coerce_arg(s.keyword[static_cast<size_t>(idx)].type, &value)) {
    return invalid_argument("node '{}' ({}): argument '{}': {}", node->name_, s.name, name, *err);
  }
  node->args_[node->num_args_ + static_cast<uint32_t>(idx)] = std::move(value);
  return Status::Ok();
}

void Graph::erase(Node* n) {
  KILN_CHECK(n->graph_ == this && !n->erased_);
  KILN_CHECK(n->first_use_ == nullptr);
  drop_uses(n);
  if (insert_point_ == n) insert_point_ = n->next_;
  if (output_ == n) output_ = nullptr;
  if (last_placeholder_ == n) {
    Node* p = n->prev_;
    last_placeholder_ = (p != nullptr && p->op_ == OpKind::kPlaceholder) ? p : nullptr;
  }
  unlink(n);
  names_.erase(n->name_);
  n->erased_ = true;
  free_args_storage(n);
  n->meta = NodeMeta();
  --live_count_;
}

void Graph::move_before(Node* node, Node* pos) {
  KILN_CHECK(node != pos);
  if (node == last_placeholder_) {
    Node* p = node->prev_;
    last_placeholder_ = (p != nullptr && p->op_ == OpKind::kPlaceholder) ? p : nullptr;
  }
  unlink(node);
  link_before(node, pos);
}

void Graph::move_after(Node* node, Node* pos) {
  KILN_CHECK(node != pos);
  if (pos->next_ == nullptr) {
    unlink(node);
    link_before(node, nullptr);
  } else {
    move_before(node, pos->next_);
  }
}

const std::string& Graph::rename(Node* node, std::string_view name) {
  std::string wanted(name);  // may view node's own name
  names_.erase(node->name_);
  // A free name is given as is, also one an erased node had (insert_unique would go on numbering
  // a stem that was taken once): a pass that replaces a node keeps its name.
  if (clean_name(wanted) && names_.find(wanted) == nullptr) {
    node->name_ = std::move(wanted);
    if (names_.insert(node->name_, node)) return node->name_;
    wanted = node->name_;
  }
  assign_unique_name(node, wanted);
  return node->name_;
}

std::vector<Node*> Graph::nodes_reversed() const {
  std::vector<Node*> out;
  out.reserve(live_count_);
  for (Node* n = last_; n != nullptr; n = n->prev_) out.push_back(n);
  return out;
}

std::vector<Node*> Graph::placeholders() const {
  std::vector<Node*> out;
  for (Node* n = first_; n != nullptr && n->op_ == OpKind::kPlaceholder; n = n->next_) {
    out.push_back(n);
  }
  return out;
}

Node* Graph::find(std::string_view name) const {
  return names_.find(name);
}

Node* Graph::node_by_id(uint32_t id) const {
  if (id >= next_id_) return nullptr;
  Node* n = slot(id);
  return n->erased_ ? nullptr : n;
}

namespace {

std::string specs_string(const SpecList& val) {
  if (val.size() == 1) return val[0].to_string();
  std::string s = "(";
  for (size_t i = 0; i < val.size(); ++i) {
    if (i) s += ", ";
    s += val[i].to_string();
  }
  return s + ")";
}

// Where a spec may legitimately differ from inference over the input specs: a channels-last
// node (its spec is the NHWC shape), or a node reading a value stored quantized (meta.quant after
// the HTP FoldQDQ: an integer constant or a quantize read directly, a float-typed producer read
// by a dequantize), whose spec dtype is not the dtype it is read as.
bool spec_may_differ(const Node* n) {
  if (n->meta.channels_last) return true;
  for (const Use& u : n->operands()) {
    if (u.value->meta.quant) return true;
  }
  return false;
}

// Re-infers a call node whose inputs all have specs and reports a spec that no longer follows
// from them (a pass changed an input without re-inferring its users).
Status check_spec_drift(const Node* n) {
  const OpDef& def = op_def(n->target());
  if (def.infer == nullptr || n->meta.val.empty()) return Status::Ok();
  const Schema& s = def.schema;
  for (const Use& u : n->operands()) {
    const Param& p = s.positional[std::min<size_t>(u.arg_index, s.positional.size() - 1)];
    if (u.value->meta.val.empty()) return Status::Ok();
    if (p.type != ParamType::kAny && u.value->meta.val.size() != 1) return Status::Ok();
  }
  SpecList out;
  Status st = def.infer(*n, &out);
  if ((!st.ok() || (!out.empty() && out != n->meta.val)) && spec_may_differ(n)) {
    return Status::Ok();
  }
  if (!st.ok()) {
    return internal_error("lint: node '{}' ({}) has spec {} but its inputs fail inference: {}",
                          n->name(), s.name, specs_string(n->meta.val), st.message());
  }
  // Empty: the op's specs are set by its creator (call_delegate).
  if (!out.empty() && out != n->meta.val) {
    return internal_error("lint: node '{}' ({}) has spec {} but its inputs give {}", n->name(),
                          s.name, specs_string(n->meta.val), specs_string(out));
  }
  return Status::Ok();
}

}  // namespace

Status Graph::lint() const {
  size_t count = 0;
  bool seen_non_placeholder = false;
  Node* prev = nullptr;
  for (Node* n = first_; n != nullptr; prev = n, n = n->next_) {
    ++count;
    if (n->erased_) return internal_error("lint: erased node '{}' is still linked", n->name_);
    if (n->graph_ != this) return internal_error("lint: node '{}' belongs to another graph", n->name_);
    if (n->prev_ != prev) return internal_error("lint: broken links at node '{}'", n->name_);
    if (prev && prev->order_ >= n->order_) {
      return internal_error("lint: order keys not increasing at node '{}'", n->name_);
    }
    if (names_.find(n->name_) != n) {
      return internal_error("lint: node '{}' is missing from the name table", n->name_);
    }
    if (n->op_ == OpKind::kPlaceholder) {
      if (seen_non_placeholder) {
        return internal_error("lint: placeholder '{}' comes after other nodes", n->name_);
      }
    } else {
      seen_non_placeholder = true;
    }
    if (n->op_ == OpKind::kOutput && (n != output_ || n->next_ != nullptr)) {
      return internal_error("lint: output node '{}' is not the single last node", n->name_);
    }
    if (n->op_ == OpKind::kOutput && n->first_use_ != nullptr) {
      return internal_error("lint: output node has users");
    }
    // Operands: every use points back at its slot and its value precedes this node.
    uint32_t expect = 0;
    for (const Arg& a : n->args()) {
      if (a.is_node()) ++expect;
      else if (a.is_node_list()) expect += static_cast<uint32_t>(a.nodes().size());
    }
    if (expect != n->num_uses_) {
      return internal_error("lint: node '{}' has {} operand uses for {} node arguments", n->name_,
                            n->num_uses_, expect);
    }
    for (uint32_t i = 0; i < n->num_uses_; ++i) {
      const Use& u = n->uses_[i];
      if (u.user != n) return internal_error("lint: operand {} of node '{}' has a wrong user", i, n->name_);
      const Arg& a = n->args_[u.arg_index];
      Node* slot = u.elem_index < 0 ? a.node() : a.nodes()[static_cast<size_t>(u.elem_index)];
      if (slot != u.value) {
        return internal_error("lint: operand {} of node '{}' disagrees with its argument", i,
                              n->name_);
      }
      if (u.value->erased_ || u.value->graph_ != this) {
        return internal_error("lint: node '{}' reads erased or foreign node '{}'", n->name_,
                              u.value->name_);
      }
      if (!u.value->is_before(n)) {
        return internal_error("lint: node '{}' reads '{}', which comes after it", n->name_,
                              u.value->name_);
      }
    }
    // Use-list: exact count, every use is a live operand slot of its user.
    uint32_t uses = 0;
    for (const Use* u = n->first_use_; u != nullptr; u = u->next) {
      ++uses;
      if (u->value != n) return internal_error("lint: use-list of '{}' holds a foreign use", n->name_);
      const Node* user = u->user;
      if (user->erased_ || u < user->uses_ || u >= user->uses_ + user->num_uses_) {
        return internal_error("lint: use-list of '{}' holds a stale use", n->name_);
      }
    }
    if (uses != n->use_count_) {
      return internal_error("lint: node '{}' counts {} uses, its list holds {}", n->name_,
                            n->use_count_, uses);
    }
    if (n->op_ == OpKind::kCallFunction) {
      if (!args_fit_schema(n)) {
        // Rerun the full check on a copy only to produce its message.
        std::vector<Arg> args(n->args().begin(), n->args().end());
        std::vector<Arg> kw(n->kwargs().begin(), n->kwargs().end());
        Status st = check_schema(n, args, kw);
        if (!st.ok()) return Status(StatusCode::kInternal, "lint: " + st.message());
        return internal_error("lint: node '{}' lacks defaulted arguments", n->name_);
      }
      KILN_RETURN_IF_ERROR(check_spec_drift(n));
    } else if (n->num_args_ != 0 && n->op_ != OpKind::kOutput) {
      return internal_error("lint: {} node '{}' has arguments", op_kind_name(n->op_), n->name_);
    }
  }
  if (prev != last_) return internal_error("lint: last-node pointer is stale");
  if (count != live_count_ || names_.size() != live_count_) {
    return internal_error("lint: {} nodes linked, {} counted live, {} named", count, live_count_,
                          names_.size());
  }
  return Status::Ok();
}

}  // namespace kiln
