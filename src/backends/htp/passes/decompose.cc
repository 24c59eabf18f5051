// The decomposition step of HTP capture (kiln's analogue of ExecuTorch's get_decomp_table).
//
// torch.export runs the whole core-ATen decomposition table minus the ops QNN has whole
// (pixel_shuffle, pixel_unshuffle, hardsigmoid, hardswish, safe softmax). kiln's importers
// already produce mostly core ops, so the table here is small, and lists only what kiln can
// rewrite exactly:
//   relu6 -> clamp(0, 6); transpose -> permute; view -> reshape; flatten -> reshape (static);
//   silu -> x * sigmoid(x)                          (float nodes only)
//   rms_norm -> x * rsqrt(mean(x^2, last dims) + eps) [* weight]   (float nodes only)
// pixel_shuffle, pixel_unshuffle, hardsigmoid, hardswish and softmax are kept whole by simply
// not being listed. The 1:n rewrites skip a node that reads a dequantize or feeds a quantize:
// its pieces would have no quantization parameters.
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

bool quantized_context(const Node* n) {
  for (const Use& u : n->operands()) {
    if (is_dequantize(u.value)) return true;
  }
  for (const Node* u : n->users()) {
    if (is_quantize(u)) return true;
  }
  return false;
}

// Replaces `n` by `by` (which computes the same value), keeping n's name for the result.
void replace(Graph& g, Node* n, Node* by) {
  g.replace_all_uses_with(n, by);
  std::string name = n->name();
  g.erase(n);
  g.rename(by, name);
}

Result<bool> decompose_node(ExportedProgram& program, Node* n) {
  Graph& g = program.graph();
  Node* x = n->num_args() > 0 && n->arg(0).is_node() ? n->arg(0).node() : nullptr;
  if (x == nullptr || !x->has_spec() || n->meta.val.size() != 1) return false;
  const int64_t rank = static_cast<int64_t>(x->spec().rank());
  Node* by = nullptr;
  if (n->is_call(OpId::kRelu6)) {
    KILN_ASSIGN_OR_RETURN(by, add_call_at(g, n, OpId::kClamp, {x}, {{"min", 0.0}, {"max", 6.0}}));
  } else if (n->is_call(OpId::kTranspose)) {
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) dims[static_cast<size_t>(i)] = i;
    int64_t d0 = n->kwarg_int("dim0"), d1 = n->kwarg_int("dim1");
    d0 = d0 < 0 ? d0 + rank : d0;
    d1 = d1 < 0 ? d1 + rank : d1;
    std::swap(dims[static_cast<size_t>(d0)], dims[static_cast<size_t>(d1)]);
    KILN_ASSIGN_OR_RETURN(by, add_call_at(g, n, OpId::kPermute, {x}, {{"dims", dims}}));
  } else if (n->is_call(OpId::kView)) {
    KILN_ASSIGN_OR_RETURN(by, add_call_at(g, n, OpId::kReshape, {x}, {{"shape", n->kwarg("size").to_ints()}}));
  } else if (n->is_call(OpId::kFlatten) || n->is_call(OpId::kUnflatten)) {
    auto shape = static_shape_of(n);
    if (!shape) return false;
    KILN_ASSIGN_OR_RETURN(by, add_call_at(g, n, OpId::kReshape, {x}, {{"shape", *shape}}));
  } else if (n->is_call(OpId::kSilu) && !quantized_context(n)) {
    KILN_ASSIGN_OR_RETURN(Node * s, add_call_at(g, n, OpId::kSigmoid, {x}, {}, n->name() + "_sigmoid"));
    KILN_ASSIGN_OR_RETURN(by, add_call_at(g, n, OpId::kMul, {x, s}));
  } else if (n->is_call(OpId::kRmsNorm) && !quantized_context(n)) {
    const std::string& base = n->name();
    auto k = static_cast<int64_t>(n->kwarg("normalized_shape").to_ints().size());
    std::vector<int64_t> dims;
    for (int64_t i = rank - k; i < rank; ++i) dims.push_back(i);
    // torch's default eps is the dtype's machine epsilon.
    double eps = n->kwarg("eps").is_none() ? 1.1920928955078125e-07 : n->kwarg_float("eps");
    KILN_ASSIGN_OR_RETURN(Node * sq, add_call_at(g, n, OpId::kPow, {x, 2}, {}, base + "_pow"));
    KILN_ASSIGN_OR_RETURN(Node * m, add_call_at(g, n, OpId::kMean, {sq}, {{"dim", dims}, {"keepdim", true}}, base + "_mean"));
    KILN_ASSIGN_OR_RETURN(Node * a, add_call_at(g, n, OpId::kAdd, {m, eps}, {}, base + "_add"));
    KILN_ASSIGN_OR_RETURN(Node * r, add_call_at(g, n, OpId::kRsqrt, {a}, {}, base + "_rsqrt"));
    KILN_ASSIGN_OR_RETURN(by, add_call_at(g, n, OpId::kMul, {x, r}, {}, base + "_normed"));
    if (!n->arg(1).is_none()) {
      KILN_ASSIGN_OR_RETURN(by, add_call_at(g, n, OpId::kMul, {by, n->arg(1).node()}));
    }
  }
  if (by == nullptr) return false;
  replace(g, n, by);
  return true;
}

}  // namespace

Result<bool> decompose_for_htp(ExportedProgram& program) {
  std::vector<Node*> nodes;
  for (Node* n : program.graph().nodes()) {
    if (n->op() == OpKind::kCallFunction) nodes.push_back(n);
  }
  bool changed = false;
  for (Node* n : nodes) {
    KILN_ASSIGN_OR_RETURN(bool c, decompose_node(program, n));
    changed = changed || c;
  }
  return changed;
}

}  // namespace kiln::htp
