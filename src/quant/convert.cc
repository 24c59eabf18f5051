// convert(): quantize/dequantize pairs after every observed tensor; weights and biases become
// integer constants followed by a dequantize (torch's convert_pt2e, in kiln's q/dq ops).
#include <map>

#include "kiln/quant/quantizer.h"
#include "quant_internal.h"

namespace kiln::quant {
namespace {

QuantAttrs quant_attrs(const QuantSpec& spec, const QParams& params) {
  QuantAttrs q;
  q.dtype = spec.dtype;
  q.quant_min = spec.quant_min;
  q.quant_max = spec.quant_max;
  q.axis = params.axis;
  q.scales = params.scales;
  q.zero_points = params.zero_points;
  return q;
}

Kwargs range_kwargs(const QuantSpec& spec) {
  return {{"quant_min", spec.quant_min}, {"quant_max", spec.quant_max}, {"dtype", spec.dtype}};
}

class Converter {
 public:
  Converter(const PreparedModel& prepared, ExportedProgram& out) : prep_(prepared), q_(out) {}

  Status run();

 private:
  Node* clone_of(const Node* n) const { return q_.graph().find(n->name()); }
  Status compute_group_params();
  Status quantize_constant_inputs(const Node* n, const NodeAnnotation& a);
  Result<Node*> dequantized_constant(const Node* value, const Tensor& data, const QuantSpec& spec,
                                     const QParams& params, Node* before);
  Status insert_activation_pairs();

  const PreparedModel& prep_;
  ExportedProgram& q_;
  std::vector<QParams> group_params_;
  std::vector<QuantSpec> group_specs_;
  // (constant value, spec) already converted: shared weights are quantized once.
  std::map<std::pair<std::string, std::string>, std::pair<Node*, QParams>> done_;
};

Status Converter::compute_group_params() {
  const auto& groups = prep_.groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    QuantSpec spec = prep_.group_spec(g);
    if (!groups[g].fixed && groups[g].observer.empty()) {
      return invalid_argument("tensor '{}' was never observed: calibrate before converting",
                              groups[g].members.front()->name());
    }
    group_specs_.push_back(spec);
    group_params_.push_back(groups[g].fixed ? qparams_for_range(0, 0, spec) : groups[g].observer.qparams(spec));
  }
  return Status::Ok();
}

// An integer constant holding `data` quantized with `params`, followed by its dequantize, placed
// before `before`.
Result<Node*> Converter::dequantized_constant(const Node* value, const Tensor& data, const QuantSpec& spec,
                                              const QParams& params, Node* before) {
  const InputSpec* in = q_.input_spec(clone_of(value));
  std::string target = in != nullptr ? in->target : std::string(value->target_name());
  Tensor qt = quantize_tensor(data, params, spec.dtype, spec.quant_min, spec.quant_max);
  Node* qn = q_.add_parameter(value->name() + "_q", target + "_q", std::move(qt));
  Graph& g = q_.graph();
  Graph::InsertGuard guard(g, before);
  Node* dq = nullptr;
  if (params.axis < 0) {
    Kwargs kw = range_kwargs(spec);
    kw.emplace_back("scale", params.scales[0]);
    kw.emplace_back("zero_point", params.zero_points[0]);
    KILN_ASSIGN_OR_RETURN(dq, g.add_call(OpId::kDequantizePerTensor, {qn}, kw, value->name() + "_dq"));
  } else {
    auto n = static_cast<int64_t>(params.scales.size());
    Tensor scales(DType::kF32, {n}), zps(DType::kI64, {n});
    for (int64_t i = 0; i < n; ++i) {
      scales.set_scalar_at(i, params.scales[static_cast<size_t>(i)]);
      zps.set_scalar_at(i, static_cast<double>(params.zero_points[static_cast<size_t>(i)]));
    }
    Node* sn = q_.add_constant(value->name() + "_scales", target + "_scales", std::move(scales));
    Node* zn = q_.add_constant(value->name() + "_zero_points", target + "_zero_points", std::move(zps));
    Kwargs kw = range_kwargs(spec);
    kw.emplace_back("axis", params.axis);
    KILN_ASSIGN_OR_RETURN(dq, g.add_call(OpId::kDequantizePerChannel, {qn, sn, zn}, kw, value->name() + "_dq"));
  }
  dq->meta.quant = quant_attrs(spec, params);
  return dq;
}

// Weights, biases and constant activation operands of `n` become integer constants.
Status Converter::quantize_constant_inputs(const Node* n, const NodeAnnotation& a) {
  const ExportedProgram& fp = prep_.float_program();
  const QuantConfig& config = prep_.config_of(a.layer);
  Node* user = clone_of(n);
  // The parameters of the activation input and of the weight, for the bias's derived scale.
  std::optional<QParams> act_params, weight_params;
  for (const InputAnnotation& in : a.inputs) {
    const Tensor* data = constant_of(fp, in.value);
    if (in.role == InputRole::kActivation && data == nullptr) {
      int g = prep_.group_of(in.value);
      if (g >= 0 && !act_params) act_params = group_params_[static_cast<size_t>(g)];
      continue;
    }
    if (data == nullptr) continue;
    QuantSpec spec;
    QParams params;
    switch (in.role) {
      case InputRole::kActivation: {
        // A constant operand (add(x, c)): its range is its data.
        spec = config.activation;
        spec.qscheme = QScheme::kPerTensorAffine;
        Observer range(ObserverKind::kMinMax);
        range.observe(*data);
        params = range.qparams(spec);
        if (!act_params) act_params = params;
        break;
      }
      case InputRole::kWeight: {
        spec = config.weight;
        spec.ch_axis = in.ch_axis;
        if (in.ch_axis < 0 || static_cast<size_t>(in.ch_axis) >= data->rank()) {
          spec.qscheme = QScheme::kPerTensorSymmetric;
        }
        params = weight_qparams(*data, spec);
        weight_params = params;
        break;
      }
      case InputRole::kBias: {
        spec = config.bias;
        if (!weight_params && std::string_view(a.rule) == "norm") {
          // A norm's bias (no weight to derive from): per tensor, its own symmetric range.
          spec.qscheme = QScheme::kPerTensorSymmetric;
          Observer range(ObserverKind::kMinMax);
          range.observe(*data);
          params = range.qparams(spec);
          break;
        }
        if (!act_params || !weight_params) continue;  // stays float
        params.axis = weight_params->axis >= 0 && static_cast<int64_t>(weight_params->scales.size()) == data->numel() ? 0 : -1;
        size_t count = params.axis == 0 ? weight_params->scales.size() : 1;
        for (size_t c = 0; c < count; ++c) {
          // float32 product, as torch's derived bias spec computes it.
          float s = static_cast<float>(act_params->scales[0]) * static_cast<float>(weight_params->scales[c]);
          params.scales.push_back(static_cast<double>(s));
          params.zero_points.push_back(0);
        }
        break;
      }
    }
    auto key = std::make_pair(in.value->name(), fmt::format("{}|{}|{}", spec.to_string(), params.axis,
                                                            fmt::join(params.scales, ",")));
    Node* dq = nullptr;
    auto it = done_.find(key);
    if (it != done_.end()) {
      dq = it->second.first;
    } else {
      KILN_ASSIGN_OR_RETURN(dq, dequantized_constant(in.value, *data, spec, params, user));
      done_.emplace(key, std::make_pair(dq, params));
    }
    Node* old = clone_of(in.value);
    q_.graph().replace_all_uses_with_if(old, dq, [user](Node* u) { return u == user; });
    if (old->has_uses()) continue;
    if (old->op() == OpKind::kPlaceholder) {
      KILN_RETURN_IF_ERROR(q_.erase_input(old));
    } else {
      q_.graph().erase(old);
    }
  }
  return Status::Ok();
}

// q/dq after every observed tensor. A tensor whose producer is quantized (it has an output rule)
// is read through the pair by every user; a tensor observed only as a quantized node's input
// (a user input, the output of an excluded node) only by those nodes.
Status Converter::insert_activation_pairs() {
  const auto& groups = prep_.groups();
  const Annotations& ann = prep_.annotations();
  Graph& g = q_.graph();
  Node* first_call = nullptr;
  for (Node* n : g.nodes()) {
    if (n->op() != OpKind::kPlaceholder) {
      first_call = n;
      break;
    }
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const QuantSpec& spec = group_specs_[gi];
    const QParams& params = group_params_[gi];
    for (const Node* member : groups[gi].members) {
      Node* v = clone_of(member);
      const NodeAnnotation* own = ann.of(member);
      bool all_users = own != nullptr && own->output != OutputRule::kNone;
      std::vector<Node*> readers;
      if (!all_users) {
        for (Node* u : member->users()) {
          const NodeAnnotation* ua = ann.of(u);
          if (ua == nullptr) continue;
          for (const InputAnnotation& in : ua->inputs) {
            if (in.value == member && in.role == InputRole::kActivation) {
              readers.push_back(clone_of(u));
              break;
            }
          }
        }
        if (readers.empty()) continue;
      }
      Graph::InsertGuard guard(g, v->op() == OpKind::kPlaceholder ? first_call : v->next());
      Kwargs kw = range_kwargs(spec);
      kw.emplace_back("scale", params.scales[0]);
      kw.emplace_back("zero_point", params.zero_points[0]);
      KILN_ASSIGN_OR_RETURN(Node * qn, g.add_call(OpId::kQuantizePerTensor, {v}, kw, member->name() + "_q"));
      qn->meta.quant = quant_attrs(spec, params);
      KILN_ASSIGN_OR_RETURN(Node * dq, g.add_call(OpId::kDequantizePerTensor, {qn}, kw, member->name() + "_dq"));
      if (all_users) {
        g.replace_all_uses_with_if(v, dq, [qn](Node* u) { return u != qn; });
      } else {
        g.replace_all_uses_with_if(v, dq, [&readers](Node* u) {
          return std::find(readers.begin(), readers.end(), u) != readers.end();
        });
      }
    }
  }
  return Status::Ok();
}

Status Converter::run() {
  KILN_RETURN_IF_ERROR(compute_group_params());
  const ExportedProgram& fp = prep_.float_program();
  for (Node* n : fp.graph().nodes()) {
    const NodeAnnotation* a = prep_.annotations().of(n);
    if (a != nullptr) KILN_RETURN_IF_ERROR(quantize_constant_inputs(n, *a));
  }
  KILN_RETURN_IF_ERROR(insert_activation_pairs());
  return q_.lint();
}

}  // namespace

Result<ExportedProgram> convert(const PreparedModel& prepared) {
  ExportedProgram out = prepared.float_program().clone();
  Converter c(prepared, out);
  KILN_RETURN_IF_ERROR(c.run().with_context("convert"));
  return out;
}

}  // namespace kiln::quant
