// auto_mixed_precision(): promote the layers whose quantization costs the model output most, to
// 16-bit activations and then 16-bit weights, until the output reaches a target SQNR.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "kiln/quant/report.h"
#include "quant_internal.h"
#include "report_internal.h"

namespace kiln::quant {
namespace {

class Search {
 public:
  Search(PreparedModel& prepared, std::span<const Sample> samples, int threads, const ProgressFn& progress)
      : prep_(prepared), samples_(samples), threads_(threads), progress_(progress) {}

  Status init();
  // Output SQNR of the program converted under the current layer configurations.
  Result<double> evaluate();
  Status assign(const std::vector<const QuantConfig*>& per_layer);

  size_t numel_of(const Node* n) const {
    auto it = numel_.find(n->name());
    return it == numel_.end() ? 0 : it->second;
  }
  int evaluations = 0;
  size_t planned = 0;  // evaluations the progress bar counts to

 private:
  PreparedModel& prep_;
  std::span<const Sample> samples_;
  int threads_;
  const ProgressFn& progress_;
  std::vector<std::vector<Tensor>> reference_;
  std::unordered_map<std::string, size_t> numel_;  // value name -> elements in the first sample
};

Status Search::init() {
  ExportedProgram fp = prep_.float_program().clone();
  bool first = true;
  auto sizes = [&](const Node& n, const Tensor& t) -> Status {
    if (first) numel_[n.name()] = static_cast<size_t>(t.numel());
    return Status::Ok();
  };
  auto done = [&](size_t) { first = false; };
  KILN_ASSIGN_OR_RETURN(reference_, run_outputs(fp, samples_, threads_, sizes, done));
  return Status::Ok();
}

Result<double> Search::evaluate() {
  KILN_ASSIGN_OR_RETURN(ExportedProgram q, convert(prep_));
  KILN_ASSIGN_OR_RETURN(auto outs, run_outputs(q, samples_, threads_, {}, {}));
  std::vector<Sqnr> s(reference_.empty() ? 0 : reference_[0].size());
  for (size_t i = 0; i < outs.size(); ++i) {
    for (size_t o = 0; o < s.size() && o < outs[i].size(); ++o) s[o].add(reference_[i][o], outs[i][o]);
  }
  double worst = std::numeric_limits<double>::infinity();
  for (const Sqnr& x : s) worst = std::min(worst, x.db());
  ++evaluations;
  if (progress_) progress_(static_cast<size_t>(evaluations), std::max(planned, static_cast<size_t>(evaluations)));
  return worst;
}

Status Search::assign(const std::vector<const QuantConfig*>& per_layer) {
  const auto& layers = prep_.layers();
  for (size_t i = 0; i < layers.size(); ++i) KILN_RETURN_IF_ERROR(prep_.set_layer_config(layers[i]->name(), *per_layer[i]));
  return Status::Ok();
}

// The configurations more precise than `base` in both activations and weights, in promotion order.
Result<std::vector<QuantConfig>> promotions(const QuantConfig& base) {
  std::vector<QuantConfig> out;
  bool per_tensor = base.weight.qscheme == QScheme::kPerTensorSymmetric;
  for (const char* name : {"16a8w", "16a16w"}) {
    bool full_range = base.weight.quant_min < -base.weight.quant_max;
    KILN_ASSIGN_OR_RETURN(QuantConfig c, make_config(name, per_tensor, base.activation.observer, full_range));
    if (c.activation.bits() >= base.activation.bits() && c.weight.bits() >= base.weight.bits() && !(c.name == base.name)) {
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace

Result<MixedPrecisionResult> auto_mixed_precision(PreparedModel& prepared, std::span<const Sample> samples,
                                                  double target_db, int num_threads,
                                                  const ProgressFn& progress) {
  KILN_RETURN_IF_ERROR(check_samples(prepared.float_program(), samples));
  const QuantConfig base = prepared.options().config;
  KILN_ASSIGN_OR_RETURN(std::vector<QuantConfig> ladder, promotions(base));
  const std::vector<Node*>& layers = prepared.layers();
  Search search(prepared, samples, num_threads, progress);
  search.planned = 1 + layers.size() + 2 * (1 + static_cast<size_t>(std::log2(layers.size() + 1)));
  KILN_RETURN_IF_ERROR(search.init());

  MixedPrecisionResult result;
  result.base_config = base.name;
  std::vector<const QuantConfig*> chosen(layers.size(), &base);
  KILN_RETURN_IF_ERROR(search.assign(chosen));
  KILN_ASSIGN_OR_RETURN(result.base_sqnr_db, search.evaluate());
  result.sqnr_db = result.base_sqnr_db;
  std::vector<double> gain(layers.size(), 0.0);
  std::vector<size_t> order(layers.size());
  std::iota(order.begin(), order.end(), 0);
  if (result.base_sqnr_db < target_db && !ladder.empty()) {
    // Sensitivity: what promoting each layer alone to the first rung gains at the output.
    for (size_t i = 0; i < layers.size(); ++i) {
      chosen[i] = &ladder[0];
      KILN_RETURN_IF_ERROR(search.assign(chosen));
      KILN_ASSIGN_OR_RETURN(double db, search.evaluate());
      gain[i] = db - result.base_sqnr_db;
      chosen[i] = &base;
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return gain[a] > gain[b]; });
    // Per rung: the fewest layers (most sensitive first) that reach the target; layers promoted
    // to an earlier rung stay there when the next rung starts.
    for (const QuantConfig& rung : ladder) {
      auto trial = [&](size_t k) -> Result<double> {
        std::vector<const QuantConfig*> c = chosen;
        for (size_t j = 0; j < k; ++j) c[order[j]] = &rung;
        KILN_RETURN_IF_ERROR(search.assign(c));
        return search.evaluate();
      };
      KILN_ASSIGN_OR_RETURN(double all, trial(layers.size()));
      if (all < target_db) {
        for (size_t j = 0; j < layers.size(); ++j) chosen[j] = &rung;
        result.sqnr_db = all;
        continue;
      }
      size_t lo = 0, hi = layers.size();  // sqnr(hi) >= target; sqnr(lo) < target
      double best = all;
      while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        KILN_ASSIGN_OR_RETURN(double db, trial(mid));
        if (db >= target_db) {
          hi = mid;
          best = db;
        } else {
          lo = mid;
        }
      }
      for (size_t j = 0; j < hi; ++j) chosen[order[j]] = &rung;
      result.sqnr_db = best;
      result.reached = true;
      break;
    }
  } else {
    result.reached = result.base_sqnr_db >= target_db;
  }
  KILN_RETURN_IF_ERROR(search.assign(chosen));

  // Cost: integer weights and the tensors each layer produces, under the chosen and base configs.
  const ExportedProgram& fp = prepared.float_program();
  auto cost = [&](size_t i, const QuantConfig& c, size_t* weights, size_t* acts) {
    *weights = *acts = 0;
    for (Node* n : fp.graph().nodes()) {
      const NodeAnnotation* a = prepared.annotations().of(n);
      if (a == nullptr || a->layer != layers[i]) continue;
      for (const InputAnnotation& in : a->inputs) {
        const Tensor* data = constant_of(fp, in.value);
        if (data == nullptr) continue;
        DType dt = in.role == InputRole::kBias ? c.bias.dtype : in.role == InputRole::kWeight ? c.weight.dtype : c.activation.dtype;
        *weights += static_cast<size_t>(data->numel()) * dtype_size(dt);
      }
      if (a->output != OutputRule::kNone) *acts += search.numel_of(n) * dtype_size(c.activation.dtype);
    }
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerChoice lc;
    lc.layer = layers[i]->name();
    lc.op = std::string(op_name(layers[i]->target()));
    lc.config = chosen[i]->name;
    lc.gain_db = gain[i];
    cost(i, *chosen[i], &lc.weight_bytes, &lc.activation_bytes);
    size_t bw = 0, ba = 0;
    cost(i, base, &bw, &ba);
    result.bytes += lc.weight_bytes + lc.activation_bytes;
    result.base_bytes += bw + ba;
    result.layers.push_back(std::move(lc));
  }
  result.evaluations = search.evaluations;
  return result;
}

std::string format_mixed(const MixedPrecisionResult& r) {
  std::string out = "mixed precision, per layer (gain: output SQNR gained by promoting the layer alone):\n";
  size_t w = 5, wop = 2;
  for (const LayerChoice& l : r.layers) {
    w = std::max(w, l.layer.size());
    wop = std::max(wop, l.op.size());
  }
  out += fmt::format("  {:<{}}  {:<{}}  {:<7} {:>8} {:>11} {:>11}\n", "layer", w, "op", wop, "config", "gain dB",
                     "weights B", "outputs B");
  for (const LayerChoice& l : r.layers) {
    out += fmt::format("  {:<{}}  {:<{}}  {:<7} {:>8.2f} {:>11} {:>11}\n", l.layer, w, l.op, wop, l.config,
                       l.gain_db, l.weight_bytes, l.activation_bytes);
  }
  size_t promoted = 0;
  for (const LayerChoice& l : r.layers) promoted += l.config != r.base_config;
  out += fmt::format("{} of {} layer(s) promoted from {}\n", promoted, r.layers.size(), r.base_config);
  out += fmt::format("output SQNR: {} dB at the base configuration, {} dB chosen ({}; {} evaluation(s))\n",
                     format_db(r.base_sqnr_db), format_db(r.sqnr_db), r.reached ? "target reached" : "target NOT reached",
                     r.evaluations);
  double ratio = r.base_bytes ? static_cast<double>(r.bytes) / static_cast<double>(r.base_bytes) : 1.0;
  out += fmt::format("cost: {} bytes of weights and layer outputs, against {} at the base configuration ({:.2f}x)\n",
                     r.bytes, r.base_bytes, ratio);
  return out;
}

}  // namespace kiln::quant
