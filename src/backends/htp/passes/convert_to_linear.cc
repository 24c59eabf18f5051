// ConvertToLinear: addmm / mm of a transposed weight is linear, and so is a matmul / mm of a
// constant weight (ONNX MatMul), with the constant stored transposed.
#include <cstring>

#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

// w when `n` is permute(w, [1, 0]) or transpose(w, 0, 1) of a rank-2 w, else null.
Node* transposed_2d(Node* n) {
  if (n->num_users() != 1 || !n->has_spec() || n->spec().rank() != 2) return nullptr;
  if (n->is_call(OpId::kPermute) && n->kwarg("dims").to_ints() == std::vector<int64_t>{1, 0}) {
    return n->arg(0).node();
  }
  if (n->is_call(OpId::kTranspose)) {
    int64_t d0 = (n->kwarg_int("dim0") + 2) % 2, d1 = (n->kwarg_int("dim1") + 2) % 2;
    if (d0 != d1) return n->arg(0).node();
  }
  return nullptr;
}

// The [N, K] transpose of a rank-2 [K, N] constant.
Tensor transposed(const Tensor& t) {
  const int64_t rows = t.shape()[0], cols = t.shape()[1];
  const size_t es = dtype_size(t.dtype());
  Tensor out(t.dtype(), {cols, rows});
  const auto* src = static_cast<const uint8_t*>(t.data());
  auto* dst = static_cast<uint8_t*>(out.mutable_data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) std::memcpy(dst + (c * rows + r) * es, src + (r * cols + c) * es, es);
  }
  return out;
}

// matmul / mm(x, w) where w is a rank-2 constant, or a dequantize of one that reads nothing
// else: the weight linear takes ([N, K], dequantized with the axis flipped), else null.
Result<Node*> constant_weight_for_linear(ExportedProgram& program, Node* n) {
  Graph& g = program.graph();
  Node* x = n->arg(0).node();
  Node* w = n->arg(1).node();
  if (!x->has_spec() || x->spec().rank() < 2 || !w->has_spec() || w->spec().rank() != 2) return nullptr;
  if (const Tensor* t = constant_of(program, w); t != nullptr && !t->elided()) {
    return add_lifted_constant(program, w->name() + "_t", transposed(*t));
  }
  if (!w->is_call(OpId::kDequantizePerChannel) && !w->is_call(OpId::kDequantizePerTensor)) return nullptr;
  Node* codes = w->arg(0).node();
  const Tensor* t = constant_of(program, codes);
  if (t == nullptr || t->elided() || t->shape().size() != 2 || w->num_users() != 1) return nullptr;
  Node* codes_t = add_lifted_constant(program, codes->name() + "_t", transposed(*t));
  std::vector<Arg> args(w->args().begin(), w->args().end());
  args[0] = codes_t;
  Kwargs kwargs;
  const Schema& schema = w->schema();
  for (size_t i = 0; i < schema.keyword.size(); ++i) {
    Arg value = w->kwargs()[i];
    if (schema.keyword[i].name == "axis") value = Arg(1 - (value.to_int() + 2) % 2);
    kwargs.emplace_back(schema.keyword[i].name, value);
  }
  KILN_ASSIGN_OR_RETURN(Node * dq, add_call_at(g, n, w->target(), std::move(args), kwargs, w->name() + "_t"));
  dq->meta.quant = w->meta.quant;
  if (dq->meta.quant && dq->meta.quant->axis >= 0) dq->meta.quant->axis = 1 - dq->meta.quant->axis;
  return dq;
}

}  // namespace

Result<bool> convert_to_linear(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n = g.first(); n != nullptr;) {
    Node* next = n->next();
    Node *x = nullptr, *wt = nullptr;
    Arg bias;
    if (n->is_call(OpId::kMm)) {
      x = n->arg(0).node();
      wt = n->arg(1).node();
    } else if (n->is_call(OpId::kAddmm) && n->kwarg_float("beta") == 1.0 &&
               n->kwarg_float("alpha") == 1.0 && n->arg(0).is_node()) {
      Node* b = n->arg(0).node();
      // linear's bias is one value per output feature.
      if (b->has_spec() && b->spec().rank() == 1 && n->has_spec() && b->spec().shape[0] == n->spec().shape[1]) {
        x = n->arg(1).node();
        wt = n->arg(2).node();
        bias = b;
      }
    }
    Node* w = wt != nullptr ? transposed_2d(wt) : nullptr;
    if (w == nullptr && (n->is_call(OpId::kMatmul) || n->is_call(OpId::kMm))) {
      KILN_ASSIGN_OR_RETURN(w, constant_weight_for_linear(program, n));
      x = n->arg(0).node();
      wt = nullptr;
    }
    if (w == nullptr) {
      n = next;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Node * lin, add_call_at(g, n, OpId::kLinear, {x, w, bias}, {}, "linear"));
    lin->meta.quant = n->meta.quant;
    lin->meta.source = n->meta.source;
    g.replace_all_uses_with(n, lin);
    g.erase(n);
    if (wt != nullptr) g.erase(wt);
    changed = true;
    n = next;
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln::htp
