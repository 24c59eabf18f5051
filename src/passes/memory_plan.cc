// The memory planning pass: values, homes, lifetimes, then greedy-by-size placement.
#include "kiln/passes/memory_plan.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>
#include <unordered_map>

#include "dim_bounds.h"
#include "greedy_placement.h"
#include "kiln/core/memory.h"
#include "view_ops.h"

namespace kiln {

const char* value_home_name(ValueHome home) {
  switch (home) {
    case ValueHome::kArena: return "arena";
    case ValueHome::kInput: return "input";
    case ValueHome::kConstant: return "constant";
    case ValueHome::kBuffer: return "buffer";
    case ValueHome::kOutput: return "output";
    case ValueHome::kAlias: return "alias";
    case ValueHome::kDynamic: return "dynamic";
  }
  return "?";
}

namespace {

using passes::Block;
using passes::DimBounds;
using passes::GapRule;

// "node 'split' (#4) output 1 f32[2, batch]" / "node 'x' (#0) f32[batch, 3]".
std::string value_text(const Node& n, uint32_t index) {
  const TensorSpec& spec = n.meta.val[index];
  if (n.meta.val.size() > 1) {
    return fmt::format("node '{}' (#{}) output {} {}", n.name(), n.id(), index, spec.to_string());
  }
  return fmt::format("node '{}' (#{}) {}", n.name(), n.id(), spec.to_string());
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

// The symbols a dim's text names ("(h-1)/2+w" -> h, w).
std::vector<std::string_view> dim_symbols(std::string_view text) {
  std::vector<std::string_view> out;
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < text.size();) {
    if (!ident(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && ident(text[j])) ++j;
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

// Bytes of one value at its dims' bounds (checked), and whether a dim is symbolic. An unbounded
// dim makes a computed value kDynamic when `unbounded_dynamic`, or when it names a symbol no
// input carries: a size the program computes when it runs (dynamic_reshape and the other ops
// whose shape is a tensor's value), which no range can bound.
Status value_bytes(const Node& n, uint32_t index, DimBounds& bounds, bool unbounded_dynamic,
                   const std::set<std::string, std::less<>>& input_symbols, PlannedValue* v) {
  const TensorSpec& spec = n.meta.val[index];
  uint64_t bytes = dtype_size(spec.dtype);
  for (const Dim& d : spec.shape) {
    if (!d.is_static()) v->dynamic = true;
    auto b = bounds.bound(d);
    bool computed = false;
    if (!b.ok() && !d.is_static()) {
      for (std::string_view sym : dim_symbols(d.symbol_name())) {
        computed = computed || !input_symbols.count(sym);
      }
    }
    if (!b.ok() && (unbounded_dynamic || computed) && !d.is_static() &&
        n.op() == OpKind::kCallFunction) {
      v->home = ValueHome::kDynamic;
      v->bytes = 0;
      return Status::Ok();
    }
    if (!b.ok() && unbounded_dynamic && !d.is_static() && n.op() == OpKind::kPlaceholder) {
      bytes = 0;  // the caller's tensor: its size is whatever the caller gives
      break;
    }
    if (!b.ok()) return b.status().with_context(value_text(n, index));
    if (*b < 0) {
      return invalid_argument("{}: dim {} is negative", value_text(n, index), *b);
    }
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(*b), &bytes) ||
        bytes > static_cast<uint64_t>(INT64_MAX)) {
      return out_of_range("{}: its size at the dim bounds overflows 2^63 bytes",
                          value_text(n, index));
    }
  }
  v->bytes = static_cast<size_t>(bytes);
  return Status::Ok();
}

class Planner {
 public:
  Planner(const ExportedProgram& program, const MemoryPlanOptions& options)
      : program_(program), graph_(program.graph()), options_(options), bounds_(options.dim_bounds) {}

  Result<MemoryPlan> run() {
    KILN_RETURN_IF_ERROR(check_options());
    KILN_RETURN_IF_ERROR(make_values());
    KILN_RETURN_IF_ERROR(link_aliases());
    KILN_RETURN_IF_ERROR(mark_outputs());
    compute_lifetimes();
    KILN_RETURN_IF_ERROR(place());
    return std::move(plan_);
  }

 private:
  Status check_options() const {
    size_t a = options_.alignment;
    if (a == 0 || (a & (a - 1)) != 0 || a > (size_t{1} << 40)) {
      return invalid_argument("memory plan: alignment {} is not a power of two in [1, 2^40]", a);
    }
    for (const auto& [name, bound] : options_.dim_bounds) {
      if (bound < 0) {
        return invalid_argument("memory plan: the bound of dim '{}' is {}, expected >= 0", name,
                                bound);
      }
    }
    return Status::Ok();
  }

  // One value per spec of every node that has one, in node order; homes from the signature.
  Status make_values() {
    const GraphSignature& sig = program_.signature();
    std::unordered_map<std::string_view, const InputSpec*> input_of;
    for (const InputSpec& s : sig.inputs) input_of.emplace(s.arg, &s);
    std::set<std::string_view> mutated;
    for (const OutputSpec& s : sig.outputs) {
      if (s.kind == OutputKind::kBufferMutation) mutated.insert(s.target);
    }
    plan_.first_value.assign(graph_.id_bound(), -1);
    pos_.assign(graph_.id_bound(), 0);
    int64_t pos = 0;
    for (const Node* n : graph_.nodes()) {
      pos_[n->id()] = pos;
      int64_t p = pos++;
      if (n->op() == OpKind::kOutput) continue;
      if (!n->has_spec()) {
        // A delegate whose every result stays inside it (its own buffers) returns nothing.
        if (n->op() == OpKind::kCallFunction && !n->is_call(OpId::kCallDelegate)) {
          return invalid_argument("memory plan: node '{}' (#{}, {}) has no output spec", n->name(),
                                  n->id(), op_name(n->target()));
        }
        continue;  // a lowered module's get_attr
      }
      ValueHome home = ValueHome::kArena;
      if (n->op() == OpKind::kPlaceholder) {
        auto it = input_of.find(n->name());
        if (it == input_of.end()) {
          return invalid_argument("memory plan: placeholder '{}' (#{}) has no input spec",
                                  n->name(), n->id());
        }
        switch (it->second->kind) {
          case InputKind::kUserInput: home = ValueHome::kInput; break;
          case InputKind::kBuffer:
            home = mutated.count(it->second->target) ? ValueHome::kBuffer : ValueHome::kConstant;
            break;
          default: home = ValueHome::kConstant; break;
        }
      } else if (n->op() == OpKind::kGetAttr) {
        home = ValueHome::kConstant;
      }
      plan_.first_value[n->id()] = static_cast<int32_t>(plan_.values.size());
      for (uint32_t i = 0; i < n->meta.val.size(); ++i) {
        PlannedValue v;
        v.node = n;
        v.index = i;
        v.home = home;
        v.first = v.last = p;
        if (n->op() == OpKind::kPlaceholder) {
          for (const Dim& d : n->meta.val[i].shape) {
            for (std::string_view sym : dim_symbols(d.symbol_name())) input_symbols_.emplace(sym);
          }
        }
        KILN_RETURN_IF_ERROR(
            value_bytes(*n, i, bounds_, options_.unbounded_dims_dynamic, input_symbols_, &v));
        plan_.values.push_back(v);
      }
    }
    last_pos_ = pos > 0 ? pos - 1 : 0;
    if (plan_.values.size() > static_cast<size_t>(INT32_MAX)) {
      return out_of_range("memory plan: {} values, more than 2^31", plan_.values.size());
    }
    return Status::Ok();
  }

  int32_t root_of(int32_t v) const {
    const PlannedValue& pv = plan_.values[static_cast<size_t>(v)];
    return pv.home == ValueHome::kAlias ? pv.alias_of : v;
  }

  // getitem and certain views become aliases of their source's root. Sources precede users, so
  // every source's own alias is already resolved.
  Status link_aliases() {
    for (size_t k = 0; k < plan_.values.size(); ++k) {
      PlannedValue& v = plan_.values[k];
      const Node* n = v.node;
      if (n->op() != OpKind::kCallFunction) continue;
      int32_t src = -1;
      if (n->target() == OpId::kGetitem) {
        KILN_ASSIGN_OR_RETURN(src, getitem_source(*n));
      } else if (const Node* s = passes::certain_view_source(*n, v.index)) {
        int32_t f = plan_.first_value[s->id()];
        // A view of a whole list (or of a node without a value) is no view the planner knows.
        if (f >= 0 && s->meta.val.size() == 1) src = f;
      }
      if (src < 0) continue;
      v.home = ValueHome::kAlias;
      v.alias_of = root_of(src);
    }
    return Status::Ok();
  }

  Result<int32_t> getitem_source(const Node& n) const {
    const Node* list = n.num_args() > 0 && n.arg(0).is_node() ? n.arg(0).node() : nullptr;
    bool has_index = n.num_args() > 1 && n.arg(1).kind() == Arg::Kind::kInt;
    int64_t given = has_index ? n.arg(1).to_int() : 0;
    int64_t count = list != nullptr ? static_cast<int64_t>(list->meta.val.size()) : 0;
    int64_t index = given < 0 ? given + count : given;
    if (list == nullptr || !has_index || plan_.first_value[list->id()] < 0 || index < 0 ||
        index >= count) {
      return invalid_argument("memory plan: node '{}' (#{}, getitem) selects element {} of '{}', "
                              "which has {} value(s)",
                              n.name(), n.id(), has_index ? std::to_string(given) : "?",
                              list != nullptr ? list->name() : "?", count);
    }
    return plan_.first_value[list->id()] + static_cast<int32_t>(index);
  }

  // User outputs leave the arena: the value itself, or the root of a returned view.
  Status mark_outputs() {
    const Node* out = graph_.output_node();
    if (out == nullptr) return Status::Ok();
    const auto& outputs = program_.signature().outputs;
    size_t k = 0;
    for (const Use& u : out->operands()) {
      OutputKind kind = k < outputs.size() ? outputs[k].kind : OutputKind::kUserOutput;
      ++k;
      if (kind != OutputKind::kUserOutput) continue;
      int32_t f = plan_.first_value[u.value->id()];
      if (f < 0) continue;
      for (size_t i = 0; i < u.value->meta.val.size(); ++i) {
        PlannedValue& v = plan_.values[static_cast<size_t>(f) + i];
        PlannedValue& r = plan_.values[static_cast<size_t>(root_of(f + static_cast<int32_t>(i)))];
        if (v.home == ValueHome::kArena) v.home = ValueHome::kOutput;
        if (r.home == ValueHome::kArena) r.home = ValueHome::kOutput;
      }
    }
    return Status::Ok();
  }

  // Each value lives to its last user; values the output node reads (returned or copied into a
  // buffer after the last instruction) to the end; a root to the last use of its aliases.
  void compute_lifetimes() {
    for (const Node* n : graph_.nodes()) {
      int64_t p = n->op() == OpKind::kOutput ? last_pos_ : pos_[n->id()];
      bool getitem = n->is_call(OpId::kGetitem);
      for (const Use& u : n->operands()) {
        int32_t f = plan_.first_value[u.value->id()];
        // A getitem's read is its own value's definition (an alias): it extends only the
        // element it selects, through the alias.
        if (f < 0 || (getitem && u.arg_index == 0)) continue;
        for (size_t i = 0; i < u.value->meta.val.size(); ++i) {
          PlannedValue& v = plan_.values[static_cast<size_t>(f) + i];
          v.last = std::max(v.last, p);
        }
      }
    }
    for (PlannedValue& v : plan_.values) {
      if (v.home != ValueHome::kAlias) continue;
      PlannedValue& r = plan_.values[static_cast<size_t>(v.alias_of)];
      r.first = std::min(r.first, v.first);
      r.last = std::max(r.last, v.last);
    }
  }

  Status place() {
    const uint64_t align = options_.alignment;
    std::vector<Block> blocks;
    std::vector<int32_t> which;
    std::vector<int64_t> live_delta(static_cast<size_t>(last_pos_) + 2, 0);
    uint64_t no_reuse = 0;
    for (size_t k = 0; k < plan_.values.size(); ++k) {
      PlannedValue& v = plan_.values[k];
      if (v.home != ValueHome::kArena) continue;
      if (v.dynamic) ++plan_.dynamic_values;
      v.offset = 0;
      if (v.bytes == 0) continue;
      uint64_t aligned = align_up(v.bytes, align);
      if (aligned < v.bytes || __builtin_add_overflow(no_reuse, aligned, &no_reuse) ||
          no_reuse > static_cast<uint64_t>(INT64_MAX)) {
        return out_of_range("memory plan: the arena passes 2^63 bytes at {} ({} bytes)",
                            value_text(*v.node, v.index), v.bytes);
      }
      blocks.push_back({v.first, v.last, v.bytes});
      which.push_back(static_cast<int32_t>(k));
      live_delta[static_cast<size_t>(v.first)] += static_cast<int64_t>(v.bytes);
      live_delta[static_cast<size_t>(v.last) + 1] -= static_cast<int64_t>(v.bytes);
    }
    plan_.no_reuse_bytes = static_cast<size_t>(no_reuse);
    int64_t live = 0, peak = 0;
    for (int64_t d : live_delta) {
      live += d;
      peak = std::max(peak, live);
    }
    plan_.lower_bound_bytes = static_cast<size_t>(peak);

    // Both gap rules; the smaller arena wins (first-fit on ties).
    std::vector<uint64_t> offsets, best_fit;
    uint64_t arena = passes::place_greedy_by_size(blocks, align, GapRule::kFirstFit, &offsets);
    uint64_t arena_bf = passes::place_greedy_by_size(blocks, align, GapRule::kBestFit, &best_fit);
    if (arena_bf < arena) {
      arena = arena_bf;
      offsets.swap(best_fit);
    }
    for (size_t b = 0; b < blocks.size(); ++b) {
      plan_.values[static_cast<size_t>(which[b])].offset = static_cast<int64_t>(offsets[b]);
    }
    plan_.arena_bytes = static_cast<size_t>(arena);
    return Status::Ok();
  }

  const ExportedProgram& program_;
  const Graph& graph_;
  const MemoryPlanOptions& options_;
  DimBounds bounds_;
  std::set<std::string, std::less<>> input_symbols_;  // the symbols of placeholders' dims
  MemoryPlan plan_;
  std::vector<int64_t> pos_;  // node id -> position in graph order
  int64_t last_pos_ = 0;
};

}  // namespace

Result<MemoryPlan> plan_memory(const ExportedProgram& program, const MemoryPlanOptions& options) {
  return Planner(program, options).run();
}

std::string format_memory_plan(const MemoryPlan& plan, const MemoryPlanOptions& options) {
  double ratio = plan.lower_bound_bytes == 0
                     ? 1.0
                     : static_cast<double>(plan.arena_bytes) / static_cast<double>(plan.lower_bound_bytes);
  std::string s = fmt::format("arena {} (lower bound {}, {:.2f}x; no reuse {})",
                              format_bytes(plan.arena_bytes), format_bytes(plan.lower_bound_bytes),
                              ratio, format_bytes(plan.no_reuse_bytes));
  if (plan.dynamic_values == 0) return s;
  s += fmt::format(", {} value{} planned at dim upper bounds", plan.dynamic_values,
                   plan.dynamic_values == 1 ? "" : "s");
  if (!options.dim_bounds.empty()) {
    std::string list;
    for (const auto& [name, bound] : options.dim_bounds) {
      list += fmt::format("{}{}<={}", list.empty() ? "" : ", ", name, bound);
    }
    s += " (" + list + ")";
  }
  return s;
}

}  // namespace kiln
