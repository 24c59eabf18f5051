// convert_linear_to_conv2d: linear as a 1x1 convolution between transposes (the seed's Conv2D).
#include <map>

#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {

Result<bool> linear_to_conv2d(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  std::map<const Node*, Node*> conv_weights;  // a weight shared by several linears is stored once
  for (Node* n = g.first(); n != nullptr;) {
    Node* next = n->next();
    if (!n->is_call(OpId::kLinear)) {
      n = next;
      continue;
    }
    Node* x = n->arg(0).node();
    Node* w = n->arg(1).node();
    auto xs = static_shape_of(x);
    auto ws = static_shape_of(w);
    if (!xs || !ws || (xs->size() != 2 && xs->size() != 3) || ws->size() != 2) {
      n = next;
      continue;
    }
    const std::string base = n->name();
    // The weight as [N, K, 1, 1]: a new constant sharing the bytes, or a reshape in the graph.
    Node* w4 = nullptr;
    std::vector<int64_t> w4_shape = {(*ws)[0], (*ws)[1], 1, 1};
    if (auto it = conv_weights.find(w); it != conv_weights.end()) {
      w4 = it->second;
    } else if (const Tensor* wt = constant_of(program, w)) {
      w4 = add_lifted_constant(program, w->name() + "_conv", wt->reshaped(w4_shape));
      conv_weights[w] = w4;
    } else {
      KILN_ASSIGN_OR_RETURN(w4, add_call_at(g, n, OpId::kReshape, {w}, {{"shape", w4_shape}}, base + "_weight"));
    }
    Node* x4 = nullptr;
    if (xs->size() == 3) {
      KILN_ASSIGN_OR_RETURN(x4, add_call_at(g, n, OpId::kUnsqueeze, {x}, {{"dim", -1}}, base + "_unsqueeze"));
    } else {
      KILN_ASSIGN_OR_RETURN(x4, add_call_at(g, n, OpId::kReshape, {x},
                                            {{"shape", std::vector<int64_t>{1, (*xs)[0], (*xs)[1], 1}}},
                                            base + "_reshape"));
    }
    KILN_ASSIGN_OR_RETURN(Node * t1, add_call_at(g, n, OpId::kTranspose, {x4}, {{"dim0", 1}, {"dim1", 2}},
                                                 base + "_transpose"));
    KILN_ASSIGN_OR_RETURN(Node * conv, add_call_at(g, n, OpId::kConvolution, {t1, w4, n->arg(2)}, {},
                                                   base + "_conv"));
    KILN_ASSIGN_OR_RETURN(Node * t2, add_call_at(g, n, OpId::kTranspose, {conv}, {{"dim0", 1}, {"dim1", 2}},
                                                 base + "_transpose"));
    Node* out = nullptr;
    if (xs->size() == 3) {
      KILN_ASSIGN_OR_RETURN(out, add_call_at(g, n, OpId::kSqueeze, {t2}, {{"dim", std::vector<int64_t>{-1}}},
                                             base + "_squeeze"));
    } else {
      auto os = static_shape_of(n);
      KILN_ASSIGN_OR_RETURN(out, add_call_at(g, n, OpId::kReshape, {t2}, {{"shape", *os}}, base + "_reshape"));
    }
    out->meta.quant = n->meta.quant;
    g.replace_all_uses_with(n, out);
    g.erase(n);
    changed = true;
    n = next;
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln::htp
