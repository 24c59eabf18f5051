// prepare(): one observer per group of tensors that share quantization parameters; calibrate():
// the interpreter runs the float program and every observer sees its tensors.
#include <algorithm>
#include <numeric>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/quant/quantizer.h"
#include "quant_internal.h"

namespace kiln::quant {
namespace {

struct UnionFind {
  std::vector<uint32_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0u); }
  uint32_t find(uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(uint32_t a, uint32_t b) { parent[find(a)] = find(b); }
};

}  // namespace

Result<std::unique_ptr<PreparedModel>> prepare(const ExportedProgram& program,
                                               const QuantizeOptions& options) {
  auto prepared = std::unique_ptr<PreparedModel>(new PreparedModel());
  prepared->program_ = std::make_unique<ExportedProgram>(program.clone());
  prepared->options_ = options;
  ExportedProgram& p = *prepared->program_;
  KILN_ASSIGN_OR_RETURN(prepared->annotations_, annotate(p, options));
  const Annotations& ann = prepared->annotations_;
  const Graph& g = p.graph();

  // Tensors quantized at run time, tied into groups by the shared rules. A fixed-range output
  // never absorbs a free-range tensor (a cat of sigmoid and conv outputs keeps two groups).
  const uint32_t n_ids = g.id_bound();
  UnionFind uf(n_ids);
  std::vector<bool> quantized(n_ids, false), fixed(n_ids, false);
  auto runtime_value = [&](const Node* v) {
    if (is_constant_value(p, v)) return false;
    if (v->op() == OpKind::kPlaceholder) {
      const InputSpec* s = p.input_spec(v);
      return s != nullptr && s->kind == InputKind::kUserInput;  // buffers stay float
    }
    return true;
  };
  auto tie = [&](const Node* a, const Node* b) {
    if (fixed[uf.find(a->id())] != fixed[uf.find(b->id())]) return;
    uf.unite(a->id(), b->id());
  };
  for (Node* n : g.nodes()) {
    const NodeAnnotation* a = ann.of(n);
    if (a == nullptr) continue;
    if (a->output == OutputRule::kFixed) quantized[n->id()] = fixed[n->id()] = true;
  }
  for (Node* n : g.nodes()) {
    const NodeAnnotation* a = ann.of(n);
    if (a == nullptr) continue;
    const Node* first = nullptr;
    for (const InputAnnotation& in : a->inputs) {
      if (in.role != InputRole::kActivation || !runtime_value(in.value)) continue;
      quantized[in.value->id()] = true;
      if (first == nullptr) first = in.value;
      if (in.shares_first_input) tie(in.value, first);
    }
    if (a->output == OutputRule::kOwn) quantized[n->id()] = true;
    if (a->output == OutputRule::kSharesInput) {
      quantized[n->id()] = true;
      if (first != nullptr) tie(n, first);
    }
  }

  std::vector<int>& group_of = prepared->group_of_;
  group_of.assign(n_ids, -1);
  std::vector<int> root_group(n_ids, -1);
  auto& groups = prepared->groups_;
  for (Node* n : g.nodes()) {
    if (!quantized[n->id()]) continue;
    uint32_t r = uf.find(n->id());
    if (root_group[r] < 0) {
      root_group[r] = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    int gi = root_group[r];
    group_of[n->id()] = gi;
    PreparedModel::Group& grp = groups[static_cast<size_t>(gi)];
    grp.members.push_back(n);
    if (fixed[n->id()]) {
      const NodeAnnotation* a = ann.of(n);
      grp.fixed = true;
      grp.fixed_min = a->fixed_min;
      grp.fixed_max = a->fixed_max;
    }
  }
  // Layers, and the layers each group serves (its precision is the most precise of theirs).
  std::vector<bool> is_layer(n_ids, false);
  for (Node* n : g.nodes()) {
    const NodeAnnotation* a = ann.of(n);
    if (a == nullptr) continue;
    is_layer[a->layer->id()] = true;
    auto serve = [&](const Node* v) {
      int gi = group_of[v->id()];
      if (gi < 0) return;
      auto& layers = groups[static_cast<size_t>(gi)].layers;
      if (std::find(layers.begin(), layers.end(), a->layer) == layers.end()) layers.push_back(a->layer);
    };
    for (const InputAnnotation& in : a->inputs) serve(in.value);
    if (a->output != OutputRule::kNone) serve(n);
  }
  for (Node* n : g.nodes()) {
    if (is_layer[n->id()]) prepared->layers_.push_back(n);
  }
  ObserverKind kind = options.config.activation.observer;
  for (auto& grp : groups) grp.observer = Observer(kind);
  return prepared;
}

int PreparedModel::group_of(const Node* n) const {
  return n->id() < group_of_.size() ? group_of_[n->id()] : -1;
}

const QuantConfig& PreparedModel::config_of(const Node* layer) const {
  auto it = options_.layer_configs.find(layer->name());
  return it == options_.layer_configs.end() ? options_.config : it->second;
}

Status PreparedModel::set_layer_config(const std::string& layer, const QuantConfig& config) {
  bool known = std::any_of(layers_.begin(), layers_.end(), [&](const Node* n) { return n->name() == layer; });
  if (!known) return not_found("layer '{}' is not a quantized layer of the program", layer);
  options_.layer_configs[layer] = config;
  return Status::Ok();
}

QuantSpec PreparedModel::group_spec(size_t g) const {
  const Group& grp = groups_[g];
  QuantSpec spec = options_.config.activation;
  bool first = true;
  for (const Node* layer : grp.layers) {
    const QuantSpec& s = config_of(layer).activation;
    if (first || s.bits() > spec.bits()) spec = s;
    first = false;
  }
  if (grp.fixed) {
    spec.qscheme = QScheme::kFixed;
    spec.fixed_min = grp.fixed_min;
    spec.fixed_max = grp.fixed_max;
  }
  return spec;
}

Status check_samples(const ExportedProgram& program, std::span<const Sample> samples) {
  if (samples.empty()) return invalid_argument("the calibration set is empty: give at least one sample");
  std::vector<Node*> inputs = program.user_inputs();
  std::vector<std::string> names = program.user_input_names();
  for (const Sample& s : samples) {
    for (const auto& [name, t] : s.inputs) {
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        return invalid_argument("calibration sample '{}': '{}' is not an input of the model (inputs: {})",
                                s.source, name, fmt::join(names, ", "));
      }
    }
    for (size_t i = 0; i < names.size(); ++i) {
      auto it = s.inputs.find(names[i]);
      if (it == s.inputs.end()) {
        return invalid_argument("calibration sample '{}': input '{}' is missing (inputs: {})", s.source,
                                names[i], fmt::join(names, ", "));
      }
      const Tensor& t = it->second;
      const TensorSpec& spec = inputs[i]->spec();
      bool fits = t.dtype() == spec.dtype && t.rank() == spec.rank();
      for (size_t d = 0; fits && d < spec.rank(); ++d) {
        fits = !spec.shape[d].is_static() || spec.shape[d].value() == t.dim(d);
      }
      if (!fits) {
        return invalid_argument("calibration sample '{}': input '{}' is {}, expected {}", s.source, names[i],
                                format_shape(t.dtype(), t.shape()), spec.to_string());
      }
    }
  }
  return Status::Ok();
}

Status calibrate(PreparedModel& prepared, std::span<const Sample> samples, int num_threads,
                 const ProgressFn& progress) {
  ExportedProgram& p = *prepared.program_;
  KILN_RETURN_IF_ERROR(check_samples(p, samples));
  portable::InterpreterOptions io;
  io.num_threads = num_threads;
  KILN_ASSIGN_OR_RETURN(auto interp, portable::Interpreter::create(p, io));
  interp->set_value_hook([&prepared](const Node& n, const Tensor& t) -> Status {
    int g = prepared.group_of(&n);
    if (g >= 0 && !prepared.groups_[static_cast<size_t>(g)].fixed) {
      prepared.groups_[static_cast<size_t>(g)].observer.observe(t);
    }
    return Status::Ok();
  });
  for (size_t i = 0; i < samples.size(); ++i) {
    auto r = interp->run_named(samples[i].inputs);
    if (!r.ok()) return r.status().with_context(fmt::format("calibration sample '{}'", samples[i].source));
    ++prepared.samples_;
    if (progress) progress(i + 1, samples.size());
  }
  return Status::Ok();
}

}  // namespace kiln::quant
