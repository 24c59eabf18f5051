// LayoutTransform: NCHW -> NHWC around the layout-sensitive ops, with permutes only where a
// channels-last region meets the rest of the graph (ExecuTorch's LayoutTransform).
//
// A region is a connected set of nodes, joined through the values they read and write as data,
// that holds at least one layout-sensitive op (convolution, pooling, batch norm, pixel
// shuffle, upsample) and otherwise only layout-agnostic ops (elementwise, cat, softmax,
// reductions and slices with their axes rewritten, q/dq except where float meets quantized: a
// user input's quantize and an output's dequantize stay outside, so every permute moves codes). Every value a region node reads as data
// from outside the region goes through one permute [0, 2, 3, 1]; every region value read by
// something else (a reshape, a linear, the graph output, a weight slot) through one permute
// [0, 3, 1, 2]. A mean / sum over H and W without keepdim ends a region: its output is [N, C]
// in either layout, so its readers need no permute.
#include <algorithm>

#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

enum class Role : uint8_t {
  kNone,       // reads and writes NCHW
  kSensitive,  // the reason for a region: reads its input (arg 0) as NHWC
  kAgnostic,   // joins a region: reads its rank-4 data operands and writes NHWC
  kSink,       // reads NHWC, writes a value that is the same in both layouts
};

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

// Where NCHW axis `a` (possibly negative) is in NHWC.
int64_t nhwc_axis(int64_t a) {
  static constexpr int64_t kPos[4] = {0, 3, 1, 2};
  return kPos[a < 0 ? a + 4 : a];
}

bool rank4(const Node* n) { return n->has_spec() && n->meta.val.size() == 1 && n->spec().rank() == 4; }

// A one-element operand broadcasts the same way in either layout.
bool one_element(const Node* n) {
  if (!n->has_spec() || n->meta.val.size() != 1) return false;
  auto numel = n->spec().numel();
  return numel && *numel == 1;
}

bool is_unary_agnostic(const Node* n) {
  switch (n->target()) {
    case OpId::kNeg: case OpId::kAbs: case OpId::kExp: case OpId::kLog: case OpId::kSqrt:
    case OpId::kRsqrt: case OpId::kErf: case OpId::kSigmoid: case OpId::kTanh: case OpId::kRelu:
    case OpId::kRelu6: case OpId::kGelu: case OpId::kSilu: case OpId::kHardswish:
    case OpId::kHardsigmoid: case OpId::kLeakyRelu: case OpId::kClamp: case OpId::kCast:
    case OpId::kQuantizePerTensor: case OpId::kDequantizePerTensor:
      return true;
    default:
      return false;
  }
}

bool is_sensitive_op(const Node* n) {
  switch (n->target()) {
    case OpId::kConvolution: case OpId::kConvTranspose2d: case OpId::kMaxPool2d:
    case OpId::kAvgPool2d: case OpId::kAdaptiveAvgPool2d: case OpId::kBatchNorm:
    case OpId::kPixelShuffle: case OpId::kPixelUnshuffle: case OpId::kUpsampleNearest2d:
    case OpId::kUpsampleBilinear2d:
      return true;
    default:
      return false;
  }
}

bool is_reduction(const Node* n) {
  return n->is_call(OpId::kMean) || n->is_call(OpId::kSum) || n->is_call(OpId::kAmax) ||
         n->is_call(OpId::kAmin);
}

std::vector<int64_t> normalized(std::vector<int64_t> dims) {
  for (int64_t& d : dims) d = d < 0 ? d + 4 : d;
  std::sort(dims.begin(), dims.end());
  return dims;
}

Role classify(const ExportedProgram& program, const Node* n) {
  if (n->op() != OpKind::kCallFunction || n->meta.channels_last || n->num_args() == 0) {
    return Role::kNone;
  }
  const Arg& a0 = n->arg(0);
  bool in4 = a0.is_node() && rank4(a0.node());
  if (is_sensitive_op(n)) return in4 && rank4(n) ? Role::kSensitive : Role::kNone;
  if (is_reduction(n)) {
    if (!in4 || n->kwarg("dim").is_none() || n->kwarg("dim").to_ints().empty()) return Role::kNone;
    if (n->kwarg_bool("keepdim")) return Role::kAgnostic;
    return normalized(n->kwarg("dim").to_ints()) == std::vector<int64_t>{2, 3} ? Role::kSink : Role::kNone;
  }
  if (!rank4(n)) return Role::kNone;
  // A quantize of an unquantized value (a float user input) or a dequantize to float (a graph
  // output) is where the stored encoding starts or ends: the permute belongs on the quantized
  // side, where the HTP moves codes (it has no float Transpose in a fixed-point graph).
  if (n->is_call(OpId::kQuantizePerTensor) && in4 && !a0.node()->meta.quant) return Role::kNone;
  if (n->is_call(OpId::kDequantizePerTensor) && in4 && a0.node()->meta.quant && !n->meta.quant) {
    return Role::kNone;
  }
  if (is_unary_agnostic(n) || n->is_call(OpId::kSoftmax) || n->is_call(OpId::kLogSoftmax) ||
      n->is_call(OpId::kSlice)) {
    return in4 ? Role::kAgnostic : Role::kNone;
  }
  if (n->is_call(OpId::kCat)) {
    for (const Node* x : a0.nodes()) {
      if (!rank4(x)) return Role::kNone;
    }
    return Role::kAgnostic;
  }
  if (n->is_call(OpId::kAdd) || n->is_call(OpId::kSub) || n->is_call(OpId::kMul) ||
      n->is_call(OpId::kDiv) || n->is_call(OpId::kPow)) {
    bool any4 = false;
    for (size_t i = 0; i < 2; ++i) {
      const Arg& a = n->arg(i);
      if (a.is_number()) continue;
      if (!a.is_node()) return Role::kNone;
      const Node* x = a.node();
      // A per-channel quantized constant keeps its layout (its axis names NCHW).
      if (x->meta.quant && x->meta.quant->axis >= 0) return Role::kNone;
      if (rank4(x)) {
        any4 = true;
      } else if (!one_element(x)) {
        return Role::kNone;  // a lower-rank operand broadcasts against the last dims
      }
    }
    return any4 ? Role::kAgnostic : Role::kNone;
  }
  return Role::kNone;
}

// Whether `user` reads the operand of `use` as layout-carrying data: a sensitive op its input
// only; an agnostic op or sink every rank-4 operand.
bool is_data_use(const std::vector<Role>& role, const Use& use) {
  const Node* u = use.user;
  if (u->id() >= role.size()) return false;
  switch (role[u->id()]) {
    case Role::kSensitive:
      return use.arg_index == 0;
    case Role::kAgnostic: case Role::kSink:
      return rank4(use.value);
    case Role::kNone:
      return false;
  }
  return false;
}

// The uses of `v` as (user, arg index, list element), copied: redirecting edits the use-list.
struct UseRef {
  Node* user;
  uint32_t arg_index;
  int32_t elem_index;
};

Status redirect(Graph& g, const UseRef& u, Node* to) {
  if (u.elem_index < 0) return g.set_arg(u.user, u.arg_index, to);
  std::vector<Node*> list = u.user->arg(u.arg_index).nodes();
  list[static_cast<size_t>(u.elem_index)] = to;
  return g.set_arg(u.user, u.arg_index, std::move(list));
}

// The NHWC spec of an NCHW one.
TensorSpec nhwc_spec(TensorSpec spec) {
  Shape shape = spec.shape;
  for (size_t i = 0; i < 4; ++i) spec.shape[i] = shape[static_cast<size_t>(kToNhwc[i])];
  return spec;
}

// A permute of `v` (whose spec is still NCHW) by `dims`, giving `spec`.
Result<Node*> add_permute(Graph& g, Node* before, Node* v, const std::vector<int64_t>& dims,
                          std::string_view suffix, TensorSpec spec) {
  KILN_ASSIGN_OR_RETURN(Node * p, add_call_with_spec(g, before, OpId::kPermute, {v}, {{"dims", dims}},
                                                     v->name() + std::string(suffix), std::move(spec)));
  // The permuted activation is stored in the encoding of the value it moves.
  if (v->meta.quant && v->meta.quant->axis < 0) p->meta.quant = *v->meta.quant;
  return p;
}

// Axis arguments of an agnostic op or sink now refer to NHWC.
Status rewrite_axes(Graph& g, Node* n) {
  if (n->is_call(OpId::kCat) || n->is_call(OpId::kSoftmax) || n->is_call(OpId::kLogSoftmax) ||
      n->is_call(OpId::kSlice)) {
    return g.set_kwarg(n, "dim", nhwc_axis(n->kwarg_int("dim")));
  }
  if (is_reduction(n)) {
    std::vector<int64_t> dims;
    for (int64_t d : n->kwarg("dim").to_ints()) dims.push_back(nhwc_axis(d));
    std::sort(dims.begin(), dims.end());
    return g.set_kwarg(n, "dim", std::move(dims));
  }
  return Status::Ok();
}

}  // namespace

Result<bool> layout_transform(ExportedProgram& program) {
  Graph& g = program.graph();
  const size_t bound = g.id_bound();
  std::vector<Role> role(bound, Role::kNone);
  for (Node* n : g.nodes()) role[n->id()] = classify(program, n);

  // Regions: breadth-first from each sensitive op through data edges to agnostic ops and sinks.
  std::vector<uint8_t> in_region(bound, 0);
  std::vector<Node*> region;
  for (Node* seed : g.nodes()) {
    if (role[seed->id()] != Role::kSensitive || in_region[seed->id()]) continue;
    size_t head = region.size();
    region.push_back(seed);
    in_region[seed->id()] = 1;
    while (head < region.size()) {
      Node* m = region[head++];
      for (const Use& use : m->operands()) {
        Node* v = use.value;
        if (v->id() >= bound || in_region[v->id()] || !is_data_use(role, use)) continue;
        Role r = role[v->id()];
        if (r != Role::kSensitive && r != Role::kAgnostic) continue;  // a sink writes no NHWC
        in_region[v->id()] = 1;
        region.push_back(v);
      }
      if (role[m->id()] == Role::kSink) continue;
      for (const Use& use : m->uses()) {
        Node* u = use.user;
        if (u->id() >= bound || in_region[u->id()] || !is_data_use(role, use)) continue;
        in_region[u->id()] = 1;
        region.push_back(u);
      }
    }
  }
  if (region.empty()) return false;
  auto nhwc_value = [&](const Node* v) {
    return v->id() < bound && in_region[v->id()] && role[v->id()] != Role::kSink;
  };

  // Permutes into NHWC: one per outside value, shared by all its region readers.
  std::vector<Node*> to_nhwc(bound, nullptr);
  for (Node* n : region) {
    std::vector<std::pair<UseRef, Node*>> outside;
    for (const Use& use : n->operands()) {
      if (is_data_use(role, use) && !nhwc_value(use.value)) {
        outside.push_back({{use.user, use.arg_index, use.elem_index}, use.value});
      }
    }
    for (auto& [ref, v] : outside) {
      Node*& p = to_nhwc[v->id()];
      if (p == nullptr) {
        KILN_ASSIGN_OR_RETURN(p, add_permute(g, after(g, v), v, kToNhwc, "_nhwc", nhwc_spec(v->spec())));
        p->meta.channels_last = true;
      }
      KILN_RETURN_IF_ERROR(redirect(g, ref, p));
    }
  }
  // Permutes back to NCHW: one per region value that something outside reads.
  for (Node* n : region) {
    if (role[n->id()] == Role::kSink) continue;
    std::vector<UseRef> outside;
    for (const Use& use : n->uses()) {
      bool nhwc_reader = use.user->id() < bound && in_region[use.user->id()] && is_data_use(role, use);
      if (!nhwc_reader) outside.push_back({use.user, use.arg_index, use.elem_index});
    }
    if (outside.empty()) continue;
    KILN_ASSIGN_OR_RETURN(Node * p, add_permute(g, n->next(), n, kToNchw, "_nchw", n->spec()));
    for (const UseRef& ref : outside) KILN_RETURN_IF_ERROR(redirect(g, ref, p));
  }
  // The region's own specs and axes become NHWC (the permutes above were made from NCHW specs).
  for (Node* n : region) {
    KILN_RETURN_IF_ERROR(rewrite_axes(g, n));
    if (role[n->id()] == Role::kSink) continue;
    n->meta.val[0] = nhwc_spec(n->spec());
    n->meta.channels_last = true;
  }
  return true;
}

}  // namespace kiln::htp
