// annotate(): which tensors of which nodes are quantized, by op class (the Qualcomm quantizer's
// annotators, and torch's conv/linear + activation fusion).
#include <algorithm>
#include <set>
#include <unordered_set>

#include "kiln/quant/quantizer.h"
#include "quant_internal.h"

namespace kiln::quant {
namespace {

enum class OpClass : uint8_t {
  kNone,        // stays float
  kWeighted,    // conv, linear, matmul: activation input, weight, bias
  kBinary,      // add, sub, mul, div
  kFusable,     // relu, relu6, clamp: fused into a weighted/binary producer, else own
  kOwn,         // activation input(s), own output observer
  kNorm,        // layer / group / rms norm: activation input, weight as an activation, i32 bias
  kShares,      // output shares the input's parameters
  kCat,         // every input and the output share the first input's parameters
  kFixedUnit,   // output fixed to [0, 1]
  kFixedSigned, // output fixed to [-1, 1]
};

OpClass op_class(OpId op) {
  switch (op) {
    case OpId::kConvolution:
    case OpId::kConvTranspose2d:
    case OpId::kLinear:
    case OpId::kAddmm:
    case OpId::kMatmul:
    case OpId::kMm:
    case OpId::kBmm: return OpClass::kWeighted;
    case OpId::kAdd:
    case OpId::kSub:
    case OpId::kMul:
    case OpId::kDiv: return OpClass::kBinary;
    case OpId::kRelu:
    case OpId::kRelu6:
    case OpId::kClamp: return OpClass::kFusable;
    case OpId::kLeakyRelu:
    case OpId::kPrelu:
    case OpId::kHardswish:
    case OpId::kSilu:
    case OpId::kGelu:
    case OpId::kErf:
    case OpId::kExp:
    case OpId::kLog:
    case OpId::kSqrt:
    case OpId::kRsqrt:
    case OpId::kNeg:
    case OpId::kAbs:
    case OpId::kPow:
    case OpId::kLayerNorm:
    case OpId::kRmsNorm:
    case OpId::kGroupNorm: return OpClass::kNorm;
    case OpId::kBatchNorm:
    case OpId::kMean:
    case OpId::kSum:
    case OpId::kAvgPool2d:
    case OpId::kAdaptiveAvgPool2d:
    case OpId::kUpsampleBilinear2d:
    case OpId::kLogSoftmax: return OpClass::kOwn;
    case OpId::kView:
    case OpId::kReshape:
    case OpId::kPermute:
    case OpId::kTranspose:
    case OpId::kFlatten:
    case OpId::kUnflatten:
    case OpId::kSqueeze:
    case OpId::kUnsqueeze:
    case OpId::kExpand:
    case OpId::kSlice:
    case OpId::kSelect:
    case OpId::kMaxPool2d:
    case OpId::kPad:
    case OpId::kUpsampleNearest2d:
    case OpId::kPixelShuffle:
    case OpId::kPixelUnshuffle: return OpClass::kShares;
    case OpId::kCat: return OpClass::kCat;
    case OpId::kSigmoid:
    case OpId::kSoftmax:
    case OpId::kHardsigmoid: return OpClass::kFixedUnit;
    case OpId::kTanh: return OpClass::kFixedSigned;
    default: return OpClass::kNone;
  }
}

bool is_float_tensor(const Node* n) {
  return n != nullptr && n->has_spec() && n->meta.val.size() == 1 && is_floating(n->spec().dtype);
}

// Weighted ops: which argument is the weight (and its output-channel axis) and which the bias.
struct WeightSlots {
  int act = 0, weight = -1, bias = -1;
  int64_t axis = 0;
};

WeightSlots weight_slots(const Node* n) {
  switch (n->target()) {
    case OpId::kConvolution: return {0, 1, 2, 0};
    case OpId::kLinear: return {0, 1, 2, 0};
    case OpId::kConvTranspose2d: {
      // Per-channel weights of a grouped transposed conv would need a scale per group slice.
      int64_t axis = n->kwarg_int("groups") == 1 ? 1 : -1;
      return {0, 1, 2, axis};
    }
    case OpId::kAddmm: return {1, 2, 0, 1};
    default: {  // matmul, mm, bmm: a constant right operand is a weight, its last dim the channels
      const Node* w = n->num_args() > 1 && n->arg(1).is_node() ? n->arg(1).node() : nullptr;
      int64_t axis = w != nullptr && w->has_spec() ? static_cast<int64_t>(w->spec().rank()) - 1 : -1;
      return {0, 1, -1, axis};
    }
  }
}

}  // namespace

bool is_constant_value(const ExportedProgram& program, const Node* n) {
  return constant_of(program, n) != nullptr;
}

const Tensor* constant_of(const ExportedProgram& program, const Node* n) {
  if (n->op() == OpKind::kGetAttr) return program.constants().find(std::string(n->target_name()));
  if (n->op() != OpKind::kPlaceholder) return nullptr;
  const InputSpec* spec = program.input_spec(n);
  if (spec == nullptr) return nullptr;
  if (spec->kind != InputKind::kParameter && spec->kind != InputKind::kConstantTensor) return nullptr;
  return program.constants().find(spec->target);
}

Result<Annotations> annotate(const ExportedProgram& program, const QuantizeOptions& options) {
  const Graph& g = program.graph();
  Annotations out;
  out.by_id.resize(g.id_bound());

  std::unordered_set<std::string> skip_names(options.skip_nodes.begin(), options.skip_nodes.end());
  std::set<OpId> skip_ops;
  for (const std::string& name : options.skip_nodes) {
    if (g.find(name) == nullptr) return not_found("--skip-node '{}': no node of that name", name);
  }
  for (const std::string& op : options.skip_ops) {
    auto id = op_from_name(op);
    if (!id) return not_found("--skip-op '{}': no operator of that name", op);
    skip_ops.insert(*id);
  }
  for (Node* n : g.nodes()) {
    if (n->is_call(OpId::kQuantizePerTensor) || n->is_call(OpId::kQuantizePerChannel) ||
        n->is_call(OpId::kDequantizePerTensor) || n->is_call(OpId::kDequantizePerChannel) ||
        n->is_call(OpId::kCallDelegate)) {
      return invalid_argument("node '{}' ({}): the program is already quantized or lowered; "
                              "quantize the float model", n->name(), op_name(n->target()));
    }
  }
  auto skipped = [&](const Node* n) {
    return skip_names.count(n->name()) != 0 || skip_ops.count(n->target()) != 0;
  };

  // Activation inputs: node args that are float tensors, at most `limit` of them (0: all).
  auto act_inputs = [&](Node* n, NodeAnnotation& a, size_t limit) {
    size_t taken = 0;
    for (const Arg& arg : n->args()) {
      if (limit != 0 && taken == limit) break;
      if (arg.is_node() && is_float_tensor(arg.node())) {
        a.inputs.push_back({arg.node(), InputRole::kActivation, 0, false});
        ++taken;
      } else if (arg.is_node_list()) {
        for (Node* m : arg.nodes()) {
          if (is_float_tensor(m)) a.inputs.push_back({m, InputRole::kActivation, 0, !a.inputs.empty()});
        }
      }
    }
  };

  for (Node* n : g.nodes()) {
    if (n->op() != OpKind::kCallFunction || !is_float_tensor(n)) continue;
    OpClass cls = op_class(n->target());
    if (cls == OpClass::kNone) continue;
    if (skipped(n)) {
      out.skipped_nodes.push_back(n->name());
      continue;
    }
    NodeAnnotation a;
    a.layer = n;
    switch (cls) {
      case OpClass::kWeighted: {
        WeightSlots slots = weight_slots(n);
        a.rule = "conv/linear/matmul";
        auto slot_node = [&](int i) -> Node* {
          if (i < 0 || static_cast<size_t>(i) >= n->num_args() || !n->arg(static_cast<size_t>(i)).is_node()) return nullptr;
          Node* v = n->arg(static_cast<size_t>(i)).node();
          return is_float_tensor(v) ? v : nullptr;
        };
        Node* x = slot_node(slots.act);
        Node* w = slot_node(slots.weight);
        Node* b = slot_node(slots.bias);
        if (x == nullptr || w == nullptr) continue;
        a.inputs.push_back({x, InputRole::kActivation, 0, false});
        bool const_w = is_constant_value(program, w);
        a.inputs.push_back({w, const_w ? InputRole::kWeight : InputRole::kActivation, slots.axis, false});
        if (b != nullptr && const_w && is_constant_value(program, b) && b->spec().rank() == 1) {
          a.inputs.push_back({b, InputRole::kBias, 0, false});
        }
        a.output = OutputRule::kOwn;
        break;
      }
      case OpClass::kBinary:
        a.rule = "binary";
        act_inputs(n, a, 2);
        if (a.inputs.empty()) continue;
        a.output = OutputRule::kOwn;
        break;
      case OpClass::kFusable: {
        Node* x = n->num_args() > 0 && n->arg(0).is_node() ? n->arg(0).node() : nullptr;
        if (x == nullptr || !is_float_tensor(x)) continue;
        NodeAnnotation* producer = out.by_id[x->id()] ? &*out.by_id[x->id()] : nullptr;
        OpClass pc = x->op() == OpKind::kCallFunction ? op_class(x->target()) : OpClass::kNone;
        // Fused only when the activation is the producer's one reader (not also a graph output).
        bool fuse = producer != nullptr && (pc == OpClass::kWeighted || pc == OpClass::kBinary) &&
                    x->num_users() == 1 && producer->output == OutputRule::kOwn;
        if (fuse) {
          // The activation's output carries the producer's parameters (torch's conv + relu).
          producer->output = OutputRule::kNone;
          a.layer = x;
          a.rule = "fused activation";
        } else {
          a.rule = "activation";
          a.inputs.push_back({x, InputRole::kActivation, 0, false});
        }
        a.output = OutputRule::kOwn;
        break;
      }
      case OpClass::kOwn:
        a.rule = "own observer";
        act_inputs(n, a, 1);
        if (a.inputs.empty()) continue;
        a.output = OutputRule::kOwn;
        break;
      case OpClass::kNorm: {
        // The Qualcomm quantizer's annotate_layer_norm: the weight takes the activation spec (its
        // own range), the bias the bias spec; both are constants of the quantized program.
        a.rule = "norm";
        act_inputs(n, a, 1);
        if (a.inputs.empty()) continue;
        for (size_t i = 1; i <= 2 && i < n->num_args(); ++i) {
          Node* v = n->arg(i).is_node() ? n->arg(i).node() : nullptr;
          if (v == nullptr || !is_float_tensor(v) || !is_constant_value(program, v)) continue;
          a.inputs.push_back({v, i == 1 ? InputRole::kActivation : InputRole::kBias, 0, false});
        }
        a.output = OutputRule::kOwn;
        break;
      }
      case OpClass::kShares:
        a.rule = "shares input";
        act_inputs(n, a, 1);
        if (a.inputs.empty()) continue;
        a.output = OutputRule::kSharesInput;
        break;
      case OpClass::kCat:
        a.rule = "cat";
        act_inputs(n, a, 0);
        if (a.inputs.empty()) continue;
        a.output = OutputRule::kSharesInput;
        break;
      case OpClass::kFixedUnit:
      case OpClass::kFixedSigned:
        a.rule = "fixed range";
        act_inputs(n, a, 1);
        if (a.inputs.empty()) continue;
        a.output = OutputRule::kFixed;
        a.fixed_min = cls == OpClass::kFixedUnit ? 0.0 : -1.0;
        a.fixed_max = 1.0;
        break;
      case OpClass::kNone: continue;
    }
    out.by_id[n->id()] = std::move(a);
  }

  // Weights read only by excluded nodes stay float (ExecuTorch's annotation skipper); the report
  // names them.
  for (Node* n : g.placeholders()) {
    if (!is_constant_value(program, n) || !n->has_uses()) continue;
    bool all_skipped = true;
    for (Node* u : n->users()) all_skipped = all_skipped && skip_names.count(u->name()) + skip_ops.count(u->target()) != 0;
    if (all_skipped && (!skip_names.empty() || !skip_ops.empty())) out.skipped_parameters.push_back(n->name());
  }
  for (const auto& entry : options.layer_configs) {
    if (g.find(entry.first) == nullptr) return not_found("layer '{}': no node of that name", entry.first);
  }
  return out;
}

}  // namespace kiln::quant
