// I64toI32: HTP computes no 64-bit integers; i64 values become i32 and user outputs keep their
// dtype through a final cast.
#include <unordered_set>

#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

bool is_i64(const Node* n) {
  return n->has_spec() && n->meta.val.size() == 1 && n->spec().dtype == DType::kI64;
}

// Positional args that must stay i64 indices: (op, arg index).
bool is_index_arg(const Node* n, size_t i) {
  switch (n->target()) {
    case OpId::kGather:
    case OpId::kIndexSelect:
    case OpId::kEmbedding: return i == 1;
    case OpId::kIndexPut: return i == 1;
    default: return false;
  }
}

// A use as the scales / zero points of a per-channel q/dq: quantization parameters, not data.
bool is_quant_param_use(const Use& u) {
  return (u.user->is_call(OpId::kQuantizePerChannel) || u.user->is_call(OpId::kDequantizePerChannel)) &&
         u.arg_index > 0;
}

// A user input whose only reader is its cast to i32 (this pass ran before).
bool already_cast(const Node* n) {
  auto users = n->users();
  return users.size() == 1 && users[0]->is_call(OpId::kCast) && users[0]->kwarg("dtype").to_dtype() == DType::kI32;
}

// A cast this pass inserts to give i64 back: to a user output, or to index operands.
bool is_i64_cast(const Node* n) {
  if (!n->is_call(OpId::kCast) || n->kwarg("dtype").to_dtype() != DType::kI64) return false;
  for (const Use& u : n->uses()) {
    if (u.user->op() != OpKind::kOutput && !is_index_arg(u.user, u.arg_index)) return false;
  }
  return true;
}

Tensor to_i32(const Tensor& t) {
  Tensor out(DType::kI32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.set_scalar_at(i, t.scalar_at(i));
  return out;
}

}  // namespace

Result<bool> i64_to_i32(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  std::vector<Node*> outputs = g.output_node() ? g.output_node()->arg(0).nodes() : std::vector<Node*>{};
  std::vector<bool> output_was_i64;
  for (Node* o : outputs) output_was_i64.push_back(is_i64(o));
  std::unordered_set<const Node*> keep_i64;  // casts to i64 this pass inserted

  auto cast_after = [&](Node* n, DType dtype, const std::function<bool(Node*)>& which) -> Result<Node*> {
    TensorSpec spec = n->spec();
    spec.dtype = dtype;
    KILN_ASSIGN_OR_RETURN(Node * c, add_call_with_spec(g, after(g, n), OpId::kCast, {n}, {{"dtype", dtype}},
                                                       n->name() + (dtype == DType::kI32 ? "_i32" : "_i64"), spec));
    g.replace_all_uses_with_if(n, c, [&](Node* u) { return u != c && which(u); });
    changed = true;
    return c;
  };

  for (Node* n : g.placeholders()) {
    if (!is_i64(n) || !n->has_uses() || already_cast(n)) continue;
    if (const Tensor* t = constant_of(program, n)) {
      bool quant_param = false;
      for (const Use& u : n->uses()) quant_param = quant_param || is_quant_param_use(u);
      if (quant_param) continue;
      program.constants().set(program.input_spec(n)->target, to_i32(*t));
      n->meta.val[0].dtype = DType::kI32;
      changed = true;
    } else if (!is_constant_placeholder(program, n)) {
      KILN_ASSIGN_OR_RETURN(Node * c, cast_after(n, DType::kI32, [](Node*) { return true; }));
      (void)c;
    }
  }
  // One forward sweep: re-infer from the (now i32) inputs, give index operands back their i64,
  // and follow each op that still produces i64 by a cast to i32.
  for (Node* n = g.first(); n != nullptr; n = n->next()) {
    if (n->op() != OpKind::kCallFunction || keep_i64.count(n) != 0 || is_i64_cast(n)) continue;
    for (size_t i = 0; i < n->num_args(); ++i) {
      if (!is_index_arg(n, i)) continue;
      const Arg& a = n->arg(i);
      std::vector<Node*> idx = a.is_node() ? std::vector<Node*>{a.node()} : a.is_node_list() ? a.nodes() : std::vector<Node*>{};
      for (size_t k = 0; k < idx.size(); ++k) {
        Node* v = idx[k];
        if (!v->has_spec() || v->spec().dtype != DType::kI32) continue;
        TensorSpec spec = v->spec();
        spec.dtype = DType::kI64;
        KILN_ASSIGN_OR_RETURN(Node * c, add_call_with_spec(g, n, OpId::kCast, {v}, {{"dtype", DType::kI64}},
                                                           v->name() + "_i64", spec));
        keep_i64.insert(c);
        if (a.is_node()) {
          KILN_RETURN_IF_ERROR(g.set_arg(n, i, c));
        } else {
          std::vector<Node*> list = n->arg(i).nodes();
          list[k] = c;
          KILN_RETURN_IF_ERROR(g.set_arg(n, i, list));
        }
        changed = true;
      }
    }
    if (op_def(n->target()).infer != nullptr) KILN_RETURN_IF_ERROR(g.infer(n));
    if (is_i64(n) && n->has_uses() && !already_cast(n)) {
      KILN_ASSIGN_OR_RETURN(Node * c, cast_after(n, DType::kI32, [](Node*) { return true; }));
      n = c;
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    Node* o = g.output_node()->arg(0).nodes()[i];
    if (!output_was_i64[i] || is_i64(o)) continue;
    TensorSpec spec = o->spec();
    spec.dtype = DType::kI64;
    KILN_ASSIGN_OR_RETURN(Node * c, add_call_with_spec(g, g.output_node(), OpId::kCast, {o}, {{"dtype", DType::kI64}},
                                                       o->name() + "_i64", spec));
    std::vector<Node*> outs = g.output_node()->arg(0).nodes();
    outs[i] = c;
    KILN_RETURN_IF_ERROR(g.set_args(g.output_node(), {Arg(outs)}));
    changed = true;
  }
  return changed;
}

}  // namespace kiln::htp
