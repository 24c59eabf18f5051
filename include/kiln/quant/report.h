// What quantization costs in accuracy: per-layer and output SQNR against the float model, top-1
// agreement, and a mixed-precision search that promotes the most sensitive layers to 16 bits
// until the output reaches a target SQNR.
#pragma once

#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/quant/quantizer.h"

namespace kiln::quant {

/// Signal and noise power summed over elements and samples.
struct Sqnr {
  double signal = 0;
  double noise = 0;
  /// 10 log10(signal / noise) in dB; +inf when there is no noise.
  double db() const;
  void add(const Tensor& reference, const Tensor& approx);
};

/// A dB figure as reports print it: "12.34", "inf".
std::string format_db(double db);

struct LayerSqnr {
  std::string layer;   ///< the layer node (a conv whose relu is fused names the conv)
  std::string tensor;  ///< the quantized tensor measured (the relu's output for a fused conv)
  std::string op;
  std::string config;  ///< the layer's configuration name
  double sqnr_db = 0;
};

struct OutputSqnr {
  std::string name;  ///< the model's own output name
  double sqnr_db = 0;
};

struct AccuracyReport {
  std::vector<LayerSqnr> layers;    ///< worst first
  std::vector<OutputSqnr> outputs;  ///< in signature order
  int64_t top1_agree = 0;           ///< samples whose first output's argmax matches the float one
  int64_t top1_total = 0;           ///< rows compared (argmax over the last dim, per row)
  size_t samples = 0;
  /// The lowest output SQNR (what targets are checked against).
  double output_sqnr_db() const;
};

/// Runs the float program and `quantized` (from convert(prepared)) on `samples` and measures
/// every quantized tensor of `prepared` and every output.
Result<AccuracyReport> measure_accuracy(const PreparedModel& prepared, const ExportedProgram& quantized,
                                        std::span<const Sample> samples, int num_threads = 1);

/// The report as text: one line per layer (worst first, at most `max_layers`), then outputs and
/// top-1 agreement.
std::string format_report(const AccuracyReport& report, size_t max_layers = 20);

/// The configuration and cost of one layer after a mixed-precision search.
struct LayerChoice {
  std::string layer;
  std::string op;
  std::string config;
  double gain_db = 0;         ///< output SQNR gained by promoting only this layer
  size_t weight_bytes = 0;    ///< integer weight storage under `config`
  size_t activation_bytes = 0;  ///< quantized tensors the layer produces (one sample)
};

struct MixedPrecisionResult {
  std::vector<LayerChoice> layers;  ///< graph order
  std::string base_config;          ///< the configuration layers start from
  double base_sqnr_db = 0;          ///< every layer at the base configuration
  double sqnr_db = 0;               ///< with the chosen configurations
  bool reached = false;
  size_t bytes = 0;       ///< weights + activations under the chosen configurations
  size_t base_bytes = 0;  ///< the same with every layer at the base configuration
  int evaluations = 0;    ///< converted programs evaluated by the search
};

/// Measures each layer's sensitivity (output SQNR gained by promoting it alone), then promotes
/// layers most sensitive first to 16-bit activations (16a8w), then 16-bit weights (16a16w), until
/// the output SQNR over `samples` reaches `target_db` (a binary search over how many are
/// promoted). Leaves the chosen configurations set on `prepared` (convert() gives that program).
Result<MixedPrecisionResult> auto_mixed_precision(PreparedModel& prepared, std::span<const Sample> samples,
                                                  double target_db, int num_threads = 1,
                                                  const ProgressFn& progress = {});

/// The chosen configuration per layer and its cost, as text.
std::string format_mixed(const MixedPrecisionResult& result);

}  // namespace kiln::quant
