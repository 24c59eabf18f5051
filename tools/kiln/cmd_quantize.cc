// kiln quantize MODEL --calib DATA --config 8a8w -o OUT.kir: post-training quantization. Annotates
// the model, calibrates observers on the calibration samples with the interpreter, converts to
// quantize/dequantize pairs with integer weights, and writes the quantized program as .kir.
// --report measures per-layer and output SQNR against the float model; --auto-mixed promotes the
// most sensitive layers to 16 bits until the output reaches --target-sqnr.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "kiln/ir/kir.h"
#include "kiln/quant/quantizer.h"
#include "kiln/quant/report.h"

namespace kiln::tool {
namespace {

struct QuantizeCommand {
  std::string model;
  std::string calib;
  std::string config = "8a8w";
  std::string observer;
  bool per_tensor = false;
  bool full_range = false;
  std::vector<std::string> skip_nodes, skip_ops;
  bool report = false;
  std::string eval;
  bool auto_mixed = false;
  double target_sqnr = 0;
  bool target_given = false;
  int threads = 1;
  std::string output;
};

// A progress bar on a terminal; nothing when stderr is a file or pipe (logs stay clean).
quant::ProgressFn progress_bar(const char* what) {
  if (isatty(STDERR_FILENO) == 0) return {};
  return [what](size_t done, size_t total) {
    const int width = 30;
    int filled = total == 0 ? width : static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r%s [%s%s] %zu/%zu", what, std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(), done, total);
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status run_quantize(const QuantizeCommand& cmd) {
  if (cmd.auto_mixed && !cmd.target_given) return invalid_argument("--auto-mixed needs --target-sqnr DB");
  if (cmd.target_given && !cmd.auto_mixed) return invalid_argument("--target-sqnr is used with --auto-mixed");
  std::optional<quant::ObserverKind> observer;
  if (!cmd.observer.empty()) {
    observer = quant::observer_from_name(cmd.observer);
    if (!observer) {
      return invalid_argument("--observer '{}': expected minmax, moving-average or histogram", cmd.observer);
    }
  }
  quant::QuantizeOptions options;
  KILN_ASSIGN_OR_RETURN(options.config, quant::make_config(cmd.config, cmd.per_tensor, observer, cmd.full_range));
  options.skip_nodes = cmd.skip_nodes;
  options.skip_ops = cmd.skip_ops;

  KILN_ASSIGN_OR_RETURN(ExportedProgram program, load_model(cmd.model));
  auto samples = quant::read_samples(cmd.calib);
  if (!samples.ok()) return samples.status().with_context("--calib");
  KILN_RETURN_IF_ERROR(quant::check_samples(program, *samples).with_context("--calib"));
  KILN_ASSIGN_OR_RETURN(auto prepared, quant::prepare(program, options));

  auto t0 = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(quant::calibrate(*prepared, *samples, cmd.threads, progress_bar("calibrating")));
  std::cout << fmt::format("calibrated {} observer(s) on {} sample(s) in {:.2f} s ({}, {} activations)\n",
                           prepared->groups().size(), samples->size(), seconds_since(t0), options.config.name,
                           quant::observer_name(options.config.activation.observer));
  const quant::Annotations& ann = prepared->annotations();
  if (!ann.skipped_nodes.empty()) {
    std::cout << fmt::format("kept float: {} node(s): {}\n", ann.skipped_nodes.size(), fmt::join(ann.skipped_nodes, ", "));
  }
  if (!ann.skipped_parameters.empty()) {
    std::cout << fmt::format("kept float: {} weight(s) read only by those nodes: {}\n", ann.skipped_parameters.size(),
                             fmt::join(ann.skipped_parameters, ", "));
  }

  if (cmd.auto_mixed) {
    auto t1 = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(auto mixed, quant::auto_mixed_precision(*prepared, *samples, cmd.target_sqnr, cmd.threads,
                                                                  progress_bar("searching")));
    std::cout << quant::format_mixed(mixed);
    std::cout << fmt::format("search took {:.2f} s\n", seconds_since(t1));
    if (!mixed.reached) {
      std::cerr << fmt::format("kiln: warning: target output SQNR {} dB not reached; writing the most precise "
                               "configuration ({} dB)\n", cmd.target_sqnr, quant::format_db(mixed.sqnr_db));
    }
  }
  KILN_ASSIGN_OR_RETURN(ExportedProgram quantized, quant::convert(*prepared));
  if (cmd.report || !cmd.eval.empty()) {
    std::vector<quant::Sample> held_out;
    if (!cmd.eval.empty()) {
      auto read = quant::read_samples(cmd.eval);
      if (!read.ok()) return read.status().with_context("--eval");
      held_out = std::move(read).value();
      KILN_RETURN_IF_ERROR(quant::check_samples(program, held_out).with_context("--eval"));
    }
    const auto& measured = cmd.eval.empty() ? *samples : held_out;
    KILN_ASSIGN_OR_RETURN(auto report, quant::measure_accuracy(*prepared, quantized, measured, cmd.threads));
    std::cout << (cmd.eval.empty() ? "on the calibration samples: " : "on the --eval samples: ")
              << quant::format_report(report);
  }
  KILN_RETURN_IF_ERROR(write_file_atomic(cmd.output, print_kir(quantized)));
  size_t qdq = 0, weights = 0;
  for (Node* n : quantized.graph().nodes()) {
    qdq += n->is_call(OpId::kQuantizePerTensor);
    weights += n->is_call(OpId::kDequantizePerChannel) ||
               (n->is_call(OpId::kDequantizePerTensor) && n->arg(0).node()->op() == OpKind::kPlaceholder &&
                quantized.input_spec(n->arg(0).node())->kind == InputKind::kParameter);
  }
  std::cout << fmt::format("wrote {}: {} layer(s), {} quantized tensor(s), {} integer weight(s); constants {} -> {} bytes\n",
                           cmd.output, prepared->layers().size(), qdq, weights, program.constants().total_bytes(),
                           quantized.constants().total_bytes());
  return Status::Ok();
}

}  // namespace

void register_quantize(CLI::App& app) {
  add_command(app, "quantize", "Post-training quantization: calibrate on sample inputs, write a q/dq .kir",
              [](CLI::App& sub) -> CommandFn {
                auto cmd = std::make_shared<QuantizeCommand>();
                sub.add_option("model", cmd->model, "The float model (.onnx or .kir)")->required();
                sub.add_option("--calib", cmd->calib,
                               "Calibration data: a .npz file (one sample, arrays named as the model's "
                               "inputs) or a folder of them")->required();
                sub.add_option("--config", cmd->config, "8a8w (default), 16a8w, 16a4w or 16a16w");
                sub.add_flag("--per-tensor", cmd->per_tensor, "One scale per weight tensor, not per channel");
                sub.add_flag("--full-range-weights", cmd->full_range,
                             "Weights use the whole signed range: [-8, 7] for 4 bits, [-128, 127] for 8");
                sub.add_option("--observer", cmd->observer,
                               "Activation observer: moving-average (default), minmax or histogram");
                sub.add_option("--skip-node", cmd->skip_nodes, "Keep this node float (repeatable)");
                sub.add_option("--skip-op", cmd->skip_ops, "Keep every node of this op float (repeatable)");
                sub.add_flag("--report", cmd->report,
                             "Print per-layer and output SQNR and top-1 agreement against the float model");
                sub.add_option("--eval", cmd->eval,
                               "Measure the report on these samples (.npz or folder) instead of the "
                               "calibration ones");
                sub.add_flag("--auto-mixed", cmd->auto_mixed,
                             "Promote the most sensitive layers to 16 bits until --target-sqnr is reached");
                sub.add_option("--target-sqnr", cmd->target_sqnr, "Output SQNR (dB) that --auto-mixed aims for")
                    ->each([cmd](const std::string&) { cmd->target_given = true; });
                sub.add_option("--threads", cmd->threads, "Interpreter threads")->check(CLI::Range(1, 256));
                sub.add_option("-o,--output", cmd->output, "The quantized program to write (.kir)")->required();
                return [cmd]() { return run_quantize(*cmd); };
              });
}

}  // namespace kiln::tool
