// FuseActivations: an activation right after a linear / addmm / convolution / conv_transpose2d
// becomes that call's epilogue (ONNX Runtime's ConvActivationFusion and GemmActivationFusion), so
// the portable kernels apply it while the result is still in cache and skip one buffer.
#include "kiln/ir/fused_activation.h"
#include "kiln/passes/optimize.h"
#include "kiln/passes/pass_util.h"

namespace kiln {
namespace {

bool fuses_into(const Node* n) {
  return n->is_call(OpId::kLinear) || n->is_call(OpId::kAddmm) || n->is_call(OpId::kConvolution) ||
         n->is_call(OpId::kConvTranspose2d);
}

// The activation `a` applies, with clamp's bounds, or nullopt for one no epilogue has.
struct Activation {
  FusedActivation kind;
  Arg lo, hi;
};
std::optional<Activation> activation_of(const Node* a) {
  switch (a->target()) {
    case OpId::kRelu: return Activation{FusedActivation::kRelu, {}, {}};
    case OpId::kRelu6: return Activation{FusedActivation::kRelu6, {}, {}};
    case OpId::kHardswish: return Activation{FusedActivation::kHardswish, {}, {}};
    case OpId::kSigmoid: return Activation{FusedActivation::kSigmoid, {}, {}};
    case OpId::kSilu: return Activation{FusedActivation::kSilu, {}, {}};
    case OpId::kTanh: return Activation{FusedActivation::kTanh, {}, {}};
    case OpId::kGelu:
      if (a->kwarg("approximate").to_str() != "none") return std::nullopt;
      return Activation{FusedActivation::kGelu, {}, {}};
    case OpId::kClamp: {
      const Arg &lo = a->kwarg("min"), &hi = a->kwarg("max");
      if (lo.is_none() && hi.is_none()) return std::nullopt;
      // torch applies min first, and max wins when min > max: an epilogue with min <= max only.
      if (!lo.is_none() && !hi.is_none() && !(lo.to_float() <= hi.to_float())) return std::nullopt;
      return Activation{FusedActivation::kClamp, lo.is_none() ? Arg() : Arg(lo.to_float()),
                        hi.is_none() ? Arg() : Arg(hi.to_float())};
    }
    default: return std::nullopt;
  }
}

}  // namespace

Result<bool> fuse_activations(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* a = g.first(); a != nullptr;) {
    Node* next = a->next();
    Node* op = a->op() == OpKind::kCallFunction && a->num_args() > 0 && a->arg(0).is_node() ? a->arg(0).node() : nullptr;
    auto act = op != nullptr ? activation_of(a) : std::nullopt;
    if (!act || !fuses_into(op) || op->num_users() != 1 || op->fused_activation() != "none" ||
        op->spec().dtype != DType::kF32 || !(a->spec() == op->spec()) || !op->meta.delegation_tag.empty()) {
      a = next;
      continue;
    }
    KILN_RETURN_IF_ERROR(g.set_kwarg(op, "activation", std::string(fused_activation_name(act->kind))));
    KILN_RETURN_IF_ERROR(g.set_kwarg(op, "clamp_min", act->lo));
    KILN_RETURN_IF_ERROR(g.set_kwarg(op, "clamp_max", act->hi));
    replace_node(g, a, op);
    changed = true;
    a = next;
  }
  return changed;
}

}  // namespace kiln
