// measure_accuracy(): per-layer and output SQNR of a quantized program against the float one.
#include "kiln/quant/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "kiln/backends/portable/interpreter.h"
#include "report_internal.h"

namespace kiln::quant {

double Sqnr::db() const {
  if (noise <= 0) return std::numeric_limits<double>::infinity();
  if (signal <= 0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

void Sqnr::add(const Tensor& reference, const Tensor& approx) {
  const int64_t n = std::min(reference.numel(), approx.numel());
  const bool fast = reference.dtype() == DType::kF32 && approx.dtype() == DType::kF32;
  for (int64_t i = 0; i < n; ++i) {
    double r = fast ? reference.data_as<float>()[i] : reference.scalar_at(i);
    double a = fast ? approx.data_as<float>()[i] : approx.scalar_at(i);
    signal += r * r;
    noise += (r - a) * (r - a);
  }
}

double AccuracyReport::output_sqnr_db() const {
  double worst = std::numeric_limits<double>::infinity();
  for (const OutputSqnr& o : outputs) worst = std::min(worst, o.sqnr_db);
  return worst;
}

Node* dequantized_value(const ExportedProgram& quantized, const std::string& name) {
  Node* v = quantized.graph().find(name);
  if (v == nullptr) return nullptr;
  for (Node* q : v->users()) {
    if (!q->is_call(OpId::kQuantizePerTensor)) continue;
    for (Node* dq : q->users()) {
      if (dq->is_call(OpId::kDequantizePerTensor)) return dq;
    }
  }
  return nullptr;
}

int64_t top1_agreement(const Tensor& reference, const Tensor& approx, int64_t* rows) {
  if (reference.rank() == 0 || reference.numel() != approx.numel() || reference.numel() == 0) return 0;
  const int64_t classes = reference.dim(reference.rank() - 1);
  if (classes == 0) return 0;
  const int64_t n = reference.numel() / classes;
  int64_t agree = 0;
  for (int64_t r = 0; r < n; ++r) {
    int64_t best_ref = 0, best_q = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (reference.scalar_at(r * classes + c) > reference.scalar_at(r * classes + best_ref)) best_ref = c;
      if (approx.scalar_at(r * classes + c) > approx.scalar_at(r * classes + best_q)) best_q = c;
    }
    agree += best_ref == best_q;
  }
  *rows += n;
  return agree;
}

Result<std::vector<std::vector<Tensor>>> run_outputs(ExportedProgram& program, std::span<const Sample> samples,
                                                     int num_threads, const portable::ValueHook& hook,
                                                     const std::function<void(size_t)>& after) {
  portable::InterpreterOptions io;
  io.num_threads = num_threads;
  KILN_ASSIGN_OR_RETURN(auto interp, portable::Interpreter::create(program, io));
  if (hook) interp->set_value_hook(hook);
  std::vector<std::vector<Tensor>> outputs;
  for (size_t i = 0; i < samples.size(); ++i) {
    auto r = interp->run_named(samples[i].inputs);
    if (!r.ok()) return r.status().with_context(fmt::format("sample '{}'", samples[i].source));
    outputs.push_back(std::move(r->outputs));
    if (after) after(i);
  }
  return outputs;
}

Result<AccuracyReport> measure_accuracy(const PreparedModel& prepared, const ExportedProgram& quantized,
                                        std::span<const Sample> samples, int num_threads) {
  KILN_RETURN_IF_ERROR(check_samples(prepared.float_program(), samples));
  ExportedProgram fp = prepared.float_program().clone();
  ExportedProgram qp = quantized.clone();
  // The tensors measured: every quantized output that is not a copy of its input's parameters.
  struct Probe {
    const Node* layer;
    std::string tensor, op;
    uint32_t float_id, quant_id;
    Sqnr sqnr;
  };
  std::vector<Probe> probes;
  std::unordered_map<uint32_t, size_t> by_float, by_quant;
  for (Node* n : prepared.float_program().graph().nodes()) {
    const NodeAnnotation* a = prepared.annotations().of(n);
    if (a == nullptr || (a->output != OutputRule::kOwn && a->output != OutputRule::kFixed)) continue;
    Node* fn = fp.graph().find(n->name());
    Node* dq = dequantized_value(qp, n->name());
    if (fn == nullptr || dq == nullptr) continue;
    by_float[fn->id()] = by_quant[dq->id()] = probes.size();
    probes.push_back({a->layer, n->name(), std::string(op_name(a->layer->target())), fn->id(), dq->id(), {}});
  }
  std::vector<Tensor> captured(probes.size());
  auto capture = [&](const Node& node, const Tensor& t) -> Status {
    auto it = by_float.find(node.id());
    if (it != by_float.end()) captured[it->second] = t;
    return Status::Ok();
  };
  auto compare = [&](const Node& node, const Tensor& t) -> Status {
    auto it = by_quant.find(node.id());
    if (it != by_quant.end()) probes[it->second].sqnr.add(captured[it->second], t);
    return Status::Ok();
  };
  AccuracyReport report;
  report.samples = samples.size();
  portable::InterpreterOptions io;
  io.num_threads = num_threads;
  KILN_ASSIGN_OR_RETURN(auto float_run, portable::Interpreter::create(fp, io));
  KILN_ASSIGN_OR_RETURN(auto quant_run, portable::Interpreter::create(qp, io));
  float_run->set_value_hook(capture);
  quant_run->set_value_hook(compare);
  std::vector<Sqnr> out_sqnr;
  for (const Sample& s : samples) {
    auto f = float_run->run_named(s.inputs);
    if (!f.ok()) return f.status().with_context(fmt::format("sample '{}' (float)", s.source));
    auto q = quant_run->run_named(s.inputs);
    if (!q.ok()) return q.status().with_context(fmt::format("sample '{}' (quantized)", s.source));
    const auto &fo = f->outputs, &qo = q->outputs;
    out_sqnr.resize(fo.size());
    for (size_t o = 0; o < fo.size() && o < qo.size(); ++o) out_sqnr[o].add(fo[o], qo[o]);
    if (!fo.empty() && !qo.empty()) report.top1_agree += top1_agreement(fo[0], qo[0], &report.top1_total);
    std::fill(captured.begin(), captured.end(), Tensor());
  }
  std::vector<std::string> names = fp.user_output_names();
  for (size_t o = 0; o < out_sqnr.size(); ++o) report.outputs.push_back({o < names.size() ? names[o] : "?", out_sqnr[o].db()});
  for (const Probe& p : probes) {
    report.layers.push_back({p.layer->name(), p.tensor, p.op, prepared.config_of(p.layer).name, p.sqnr.db()});
  }
  std::stable_sort(report.layers.begin(), report.layers.end(),
                   [](const LayerSqnr& a, const LayerSqnr& b) { return a.sqnr_db < b.sqnr_db; });
  return report;
}

std::string format_db(double db) {
  if (std::isinf(db)) return db > 0 ? "inf" : "-inf";
  return fmt::format("{:.2f}", db);
}

std::string format_report(const AccuracyReport& report, size_t max_layers) {
  std::string out = fmt::format("per-layer SQNR against the float model ({} sample(s), worst first):\n", report.samples);
  auto label = [](const LayerSqnr& l) {
    return l.layer == l.tensor ? l.layer : fmt::format("{} ({})", l.layer, l.tensor);
  };
  size_t w = 14, wop = 2;
  for (size_t i = 0; i < report.layers.size() && i < max_layers; ++i) {
    w = std::max(w, label(report.layers[i]).size());
    wop = std::max(wop, report.layers[i].op.size());
  }
  out += fmt::format("  {:<{}}  {:<{}}  {:<7} {:>8}\n", "layer (tensor)", w, "op", wop, "config", "SQNR dB");
  for (size_t i = 0; i < report.layers.size() && i < max_layers; ++i) {
    const LayerSqnr& l = report.layers[i];
    out += fmt::format("  {:<{}}  {:<{}}  {:<7} {:>8}\n", label(l), w, l.op, wop, l.config, format_db(l.sqnr_db));
  }
  if (report.layers.size() > max_layers) {
    out += fmt::format("  ... {} more layer(s)\n", report.layers.size() - max_layers);
  }
  for (const OutputSqnr& o : report.outputs) {
    out += fmt::format("output '{}': SQNR {} dB\n", o.name, format_db(o.sqnr_db));
  }
  if (report.top1_total > 0) {
    out += fmt::format("top-1 agreement: {}/{} ({:.1f}%)\n", report.top1_agree, report.top1_total,
                       100.0 * static_cast<double>(report.top1_agree) / static_cast<double>(report.top1_total));
  }
  return out;
}

}  // namespace kiln::quant
