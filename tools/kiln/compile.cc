#include "compile.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <cstring>
#include <iostream>
#include <set>

#include "backends.h"
#include "commands.h"
#include "kiln/backends/demo/demo_backend.h"
#include "kiln/backends/htp/capture.h"
#include "kiln/backends/htp/htp_backend.h"
#include "kiln/backends/htp/programs.h"
#include "kiln/backends/portable/interpreter.h"
#include "kiln/backends/xnnpack/xnnpack_backend.h"
#include "kiln/quant/quantizer.h"
#include "kiln/quant/report.h"
#include "kiln/core/memory.h"
#include "kiln/lower/to_backend.h"
#include "kiln/partition/capability_partitioner.h"
#include "kiln/passes/optimize.h"

namespace kiln::tool {

void add_compile_options(CLI::App& cmd, CompileArgs& args) {
  cmd.add_option("--backend", args.backends,
                 "Delegate to this backend (repeatable, in order): xnnpack, htp, demo, or portable (no "
                 "delegate). Default for compile: portable; for run and bench of a model: xnnpack (what XNNPACK "
                 "takes, the rest on the portable kernels)");
  cmd.add_option("--ops", args.ops, "The demo backend's op set, comma separated (default: all)");
  cmd.add_option("--dim", args.dims,
                 "Range a symbolic dim is planned for, NAME=MIN..MAX (repeatable), e.g. batch=1..8");
  cmd.add_option("--segment-alignment", args.segment_alignment,
                 "Alignment of the file's segments in bytes (a power of two >= 8; default 4096)");
  cmd.add_flag("--no-optimize", args.no_optimize,
               "Skip the graph passes: constant folding, batch norms and per-channel mul/add folded into "
               "convolutions, GELU / hardswish / layer-norm recomposition, layout-chain cancellation, dead code, "
               "activation fusion on the CPU");
  cmd.add_option("--max-partition-nodes", args.max_partition_nodes,
                 "Shard partitions into pieces of at most this many nodes (each its own delegate / context)");
  add_quant_options(cmd, args);
  add_htp_options(cmd, args);
}

void add_quant_options(CLI::App& cmd, CompileArgs& args) {
  auto* quant = "Quantization";
  cmd.add_option("--quant", args.quant, "Quantize first with this configuration (8a8w, 16a8w, 16a4w, 16a16w)")
      ->group(quant);
  cmd.add_option("--calib", args.calib, "Calibration inputs for --quant (.npz file or folder)")->group(quant);
  cmd.add_option("--observer", args.observer, "--quant's observer: minmax, moving-average or histogram")->group(quant);
  cmd.add_option("--quant-io", args.quant_io,
                 "These user inputs / outputs (comma separated) take and return quantized codes (u8/u16) "
                 "instead of real numbers, with no quantize / dequantize around them (tag_quant_io)")
      ->delimiter(',')
      ->group(quant);
  cmd.add_option("--fp-node", args.fp_nodes,
                 "Mixed precision (skip_annotation, --backend htp): keep these nodes in floating point "
                 "(repeatable or comma separated)")
      ->delimiter(',')
      ->group(quant);
  cmd.add_option("--fp-op", args.fp_ops, "Mixed precision: keep every node of these ops (\"softmax\") in floating point")
      ->delimiter(',')
      ->group(quant);
  cmd.add_flag("--fp16-fallback", args.fp16_fallback,
               "Mixed precision: run the nodes kept in floating point on the HTP in fp16, not on the CPU")
      ->group(quant);
}

void add_htp_options(CLI::App& cmd, CompileArgs& args) {
  auto* htp = "HTP backend";
  cmd.add_option("--soc", args.soc, "HTP: the SoC to compile for (default SM8650)")->group(htp);
  cmd.add_option("--precision", args.precision, "HTP: quantized (default) or fp16")->group(htp);
  cmd.add_option("--performance-mode", args.performance_mode, "HTP: burst (default), high, balanced, power-saver, ...")
      ->group(htp);
  cmd.add_option("--profile-level", args.profile, "HTP: off, basic, detailed or optrace (recorded by kiln run --profile)")
      ->group(htp);
  cmd.add_flag("--online-prepare", args.online_prepare, "HTP: ship the op graph, prepare the context at load")->group(htp);
  cmd.add_flag("--multi-contexts", args.multi_contexts,
               "HTP: the contexts (partitions) of the program share one spill-fill buffer, sized by "
               "update_spill_fill_size")->group(htp);
  cmd.add_flag("--multiple-graphs", args.multiple_graphs,
               "HTP: every method's graph in one context binary that stores identical weights once "
               "(each method must be delegated whole)")->group(htp);
  cmd.add_flag("--dump-intermediate-outputs", args.dump_intermediate_outputs,
               "HTP: every op's output can be dumped (kiln run --dump DIR)")->group(htp);
  cmd.add_flag("--no-fold-relu", args.no_fold_relu, "HTP: keep relus as ops (use_fold_relu off)")->group(htp);
  cmd.add_flag("--shared-buffer", args.shared_buffer, "HTP: execute on the caller's I/O buffers, no copies")->group(htp);
  cmd.add_flag("--dlbc", args.dlbc, "HTP: store the weights compressed in the context binary (use_dlbc)")->group(htp);
  cmd.add_flag("--no-conv-hmx", args.no_conv_hmx, "HTP: quantized convs on direct loops, not oneDNN (use_conv_hmx off)")
      ->group(htp);
  cmd.add_option("--pd-session", args.pd_session, "HTP: unsigned_pd (default) or signed_pd, recorded in the spec")
      ->group(htp);
  cmd.add_flag("--saver", args.saver, "HTP: record the graph as JSON (QNN saver) instead of compiling")->group(htp);
}

Result<std::vector<CompileSpec>> htp_compile_specs(const CompileArgs& args, const std::string& graph_name,
                                                   std::ostream& log) {
  KILN_ASSIGN_OR_RETURN(htp::QcomChipset soc, htp::chipset_from_name(args.soc));
  KILN_ASSIGN_OR_RETURN(htp::HtpPrecision precision, htp::precision_from_name(args.precision));
  htp::BackendOptions backend =
      htp::generate_htp_compiler_spec(precision == htp::HtpPrecision::kFp16, /*use_dlbc=*/false, args.multi_contexts);
  KILN_ASSIGN_OR_RETURN(backend.htp_options.performance_mode, htp::performance_mode_from_name(args.performance_mode));
  backend.htp_options.use_fold_relu = !args.no_fold_relu;
  backend.htp_options.use_dlbc = args.dlbc;
  backend.htp_options.use_conv_hmx = !args.no_conv_hmx;
  KILN_ASSIGN_OR_RETURN(backend.htp_options.pd_session, htp::pd_session_from_name(args.pd_session));
  htp::CompilerSpecArgs spec_args;
  // Multiple graphs: each method compiles to an online-prepare graph named after it, and
  // generate_multi_graph_program prepares them together.
  spec_args.online_prepare = args.online_prepare || args.multiple_graphs;
  spec_args.dump_intermediate_outputs = args.dump_intermediate_outputs;
  spec_args.shared_buffer = args.shared_buffer;
  spec_args.saver = args.saver;
  spec_args.graph_name = graph_name;
  htp::ProfileLevel level = htp::ProfileLevel::kOff;
  if (!args.profile.empty()) {
    KILN_ASSIGN_OR_RETURN(level, htp::profile_level_from_name(args.profile));
  }
  spec_args.optrace = level == htp::ProfileLevel::kOptrace;
  spec_args.profile = level == htp::ProfileLevel::kDetailed;
  std::vector<std::string> warnings;
  KILN_ASSIGN_OR_RETURN(auto specs, htp::generate_qnn_executorch_compiler_spec(soc, backend, spec_args, &warnings));
  for (const std::string& w : warnings) log << "kiln: warning: " << w << '\n';
  if (level == htp::ProfileLevel::kBasic) {
    // The seed's generator has no switch for basic: set it in the options it made.
    KILN_ASSIGN_OR_RETURN(htp::Options options, htp::flatbuffer_to_option(specs[0].value));
    options.profile_level = level;
    specs[0].value = htp::option_to_flatbuffer(options);
  }
  return htp::to_compile_specs<CompileSpec>(specs);
}

namespace {

// Counted over the lowered program (after the passes that prepare it for a backend): the
// delegates' calls, and those calls plus what is left on the CPU.
void count_delegation(CompiledMethod& cm) {
  cm.partitions = cm.program.lowered_modules().size();
  cm.nodes_delegated = 0;
  for (const LoweredModule& lm : cm.program.lowered_modules()) {
    if (lm.original_module == nullptr) continue;
    for (const Node* n : lm.original_module->graph().nodes()) cm.nodes_delegated += n->op() == OpKind::kCallFunction;
  }
  cm.nodes_total = cm.nodes_delegated;
  for (const Node* n : cm.program.graph().nodes()) {
    bool delegate_io = n->is_call(OpId::kCallDelegate) || (n->is_call(OpId::kGetitem) && n->input(0)->is_call(OpId::kCallDelegate));
    cm.nodes_total += n->op() == OpKind::kCallFunction && !delegate_io;
  }
}

Status lower_method(CompiledMethod& cm, const CompileArgs& args,
                    const std::vector<std::string>& dim_texts, const BackendRegistry& registry,
                    std::ostream& log) {
  for (const std::string& backend : args.backends) {
    if (auto b = registry.get(backend); !b.ok()) return b.status().with_context("--backend");
    if (backend == htp::kBackendId && cm.htp_lowered) continue;
    std::vector<CompileSpec> specs;
    if (backend == htp::kBackendId) {
      auto htp_specs = htp_compile_specs(args, cm.name, log);
      if (!htp_specs.ok()) return htp_specs.status().with_context("--backend htp");
      specs = std::move(htp_specs).value();
      bool quantized = false;
      for (const Node* n : cm.program.graph().nodes()) quantized |= n->is_call(OpId::kQuantizePerTensor);
      auto precision = htp::precision_from_name(args.precision);
      if (precision.ok() && *precision == htp::HtpPrecision::kQuantized && !quantized) {
        return invalid_argument("--backend htp: method '{}' ({}) is a float model and the HTP precision is quantized: "
                                "quantize it (--quant 8a8w --calib DATA, or kiln quantize first), or compile with "
                                "--precision fp16", cm.name, cm.model);
      }
      if (Status s = htp::recompose_for_partition(cm.program); !s.ok()) {
        return s.with_context(fmt::format("{} (method '{}')", cm.model, cm.name));
      }
    }
    if (backend == demo::kBackendId) {
      if (!args.ops.empty()) specs.push_back(make_compile_spec(std::string(demo::kOpsSpecKey), args.ops));
      std::string dims;
      for (const std::string& d : dim_texts) dims += (dims.empty() ? "" : ",") + d;
      if (!dims.empty()) specs.push_back(make_compile_spec(std::string(demo::kDimsSpecKey), dims));
    }
    KILN_ASSIGN_OR_RETURN(OperatorSupportPtr support, support_for(backend, specs));
    if (cm.reporter == nullptr) cm.reporter = std::make_shared<WhyNoPartitionReporter>();
    CapabilityOptions options;
    options.reporter = cm.reporter;
    options.quantized_clusters = backend != htp::kBackendId;
    options.min_nodes_per_partition = args.min_partition_nodes;
    options.max_partitions = args.max_partitions;
    options.max_nodes_per_partition = args.max_partition_nodes;
    if (backend == xnnpack::kBackendId) options.keep_partition = xnnpack::xnnpack_partition_worth;
    CapabilityPartitioner partitioner(
        backend, specs, wrap_check(support, cm.reporter), options,
        [&log](std::string_view line) { log << "kiln: warning: " << line << '\n'; });
    auto report = to_backend(cm.program, partitioner, registry);
    if (!report.ok()) return report.status().with_context(fmt::format("{} (method '{}')", cm.model, cm.name));
    cm.constants_duplicated += report->constants_duplicated;
    cm.duplicated_bytes += report->duplicated_bytes;
  }
  count_delegation(cm);
  return Status::Ok();
}

Result<quant::QuantizeOptions> quantize_options(const CompileArgs& args) {
  std::optional<quant::ObserverKind> observer;
  if (!args.observer.empty()) {
    observer = quant::observer_from_name(args.observer);
    if (!observer) return invalid_argument("--observer '{}': expected minmax, moving-average or histogram", args.observer);
  }
  quant::QuantizeOptions options;
  KILN_ASSIGN_OR_RETURN(options.config, quant::make_config(args.quant, false, observer, false));
  return options;
}

// Post-training quantization of one method before it is partitioned, with the accuracy table on
// the calibration samples (the quantized program against the float one).
Status quantize_method(CompiledMethod& cm, const CompileArgs& args, const std::vector<quant::Sample>& samples,
                       std::ostream& log) {
  KILN_ASSIGN_OR_RETURN(quant::QuantizeOptions options, quantize_options(args));
  KILN_RETURN_IF_ERROR(quant::check_samples(cm.program, samples).with_context("--calib"));
  KILN_ASSIGN_OR_RETURN(auto prepared, quant::prepare(cm.program, options));
  KILN_RETURN_IF_ERROR(quant::calibrate(*prepared, samples, 1));
  KILN_ASSIGN_OR_RETURN(ExportedProgram quantized, quant::convert(*prepared));
  KILN_ASSIGN_OR_RETURN(auto report, quant::measure_accuracy(*prepared, quantized, samples, 1));
  log << fmt::format("method '{}': quantized {} on {} calibration samples\n", cm.name, args.quant, samples.size())
      << quant::format_report(report);
  cm.program = std::move(quantized);
  return Status::Ok();
}

// --fp-node / --fp-op / --fp16-fallback: mixed precision with skip_annotation, which quantizes
// the method around the nodes kept in floating point and lowers it to the HTP itself.
Status quantize_mixed(CompiledMethod& cm, const CompileArgs& args, const std::vector<quant::Sample>& samples,
                      std::ostream& log) {
  if (args.backends.empty() || args.backends[0] != htp::kBackendId) {
    return invalid_argument("--fp-node / --fp-op / --fp16-fallback (skip_annotation) need --backend htp, as the "
                            "first backend");
  }
  if (!args.quant_io.empty()) return invalid_argument("--quant-io cannot be combined with --fp-node / --fp-op / --fp16-fallback");
  KILN_ASSIGN_OR_RETURN(quant::QuantizeOptions options, quantize_options(args));
  KILN_RETURN_IF_ERROR(quant::check_samples(cm.program, samples).with_context("--calib"));
  auto specs = htp_compile_specs(args, cm.name, log);
  if (!specs.ok()) return specs.status().with_context("--backend htp");
  if (cm.reporter == nullptr) cm.reporter = std::make_shared<WhyNoPartitionReporter>();
  CapabilityOptions partition;
  partition.reporter = cm.reporter;
  partition.min_nodes_per_partition = args.min_partition_nodes;
  partition.max_partitions = args.max_partitions;
  partition.max_nodes_per_partition = args.max_partition_nodes;
  auto calibrate = [&](quant::PreparedModel& prepared) { return quant::calibrate(prepared, samples, 1); };
  auto r = htp::skip_annotation(cm.program, options, *specs, calibrate,
                                std::set<std::string>(args.fp_nodes.begin(), args.fp_nodes.end()),
                                std::set<std::string>(args.fp_ops.begin(), args.fp_ops.end()), !args.fp16_fallback,
                                partition);
  if (!r.ok()) return r.status().with_context(fmt::format("{} (method '{}')", cm.model, cm.name));
  for (const std::string& w : r->warnings) log << "kiln: warning: " << w << '\n';
  log << fmt::format("method '{}': quantized {} on {} calibration samples, mixed precision (skip_annotation):\n",
                     cm.name, args.quant, samples.size());
  for (const htp::AnnotationGroup& g : r->groups) {
    log << fmt::format("  {}: {}, {} node(s) -> {}\n", g.name, htp::to_string(g.precision), g.nodes.size(),
                       g.lowered_modules.empty() ? "CPU" : fmt::format("{}", fmt::join(g.lowered_modules, ", ")));
  }
  cm.program = std::move(r->program);
  cm.htp_lowered = true;  // lower_method counts what was delegated
  return Status::Ok();
}

// --quant-io: the named user inputs and outputs carry the codes of the encoding they are
// quantized to, printed for the caller.
Status tag_quant_io(CompiledMethod& cm, const std::vector<std::string>& names, std::ostream& log) {
  std::set<std::string, std::less<>> wanted(names.begin(), names.end());
  std::map<const Node*, std::string> io;  // user input placeholders and output values, by name
  for (Node* p : cm.program.user_inputs()) io[p] = cm.program.input_spec(p)->name;
  std::vector<Node*> outs = cm.program.user_outputs();
  std::vector<std::string> out_names = cm.program.user_output_names();
  for (size_t i = 0; i < outs.size() && i < out_names.size(); ++i) io.emplace(outs[i], out_names[i]);
  for (const std::string& name : wanted) {
    bool known = std::any_of(io.begin(), io.end(), [&](const auto& e) { return e.second == name; });
    if (!known) {
      std::vector<std::string> all;
      for (const auto& [node, n] : io) all.push_back(n);
      return invalid_argument("--quant-io: '{}' is not a user input or output of method '{}' (it has: {})", name,
                              cm.name, fmt::join(all, ", "));
    }
  }
  // The dtype asked for is the one each value is quantized to: the check that matters is that it is.
  auto dtype_of = [&](const Node& n) -> std::optional<DType> {
    auto it = io.find(&n);
    if (it == io.end() || wanted.count(it->second) == 0) return std::nullopt;
    const Node* qdq = &n;
    if (n.op() == OpKind::kPlaceholder && n.num_users() > 0) qdq = *n.users().begin();
    bool coded = qdq->is_call(OpId::kQuantizePerTensor) || qdq->is_call(OpId::kDequantizePerTensor);
    return coded ? qdq->kwarg("dtype").to_dtype() : DType::kU8;
  };
  auto tagged = htp::tag_quant_io(cm.program, dtype_of);
  if (!tagged.ok()) return tagged.status().with_context(fmt::format("--quant-io (method '{}')", cm.name));
  for (const htp::QuantizedIo& t : *tagged) {
    log << fmt::format("method '{}': {} '{}' carries {} codes: real = {} * (code - {})\n", cm.name,
                       t.kind == htp::QuantizedIo::kInput ? "input" : "output", t.name, dtype_name(t.quant.dtype),
                       t.quant.scales[0], t.quant.zero_points[0]);
  }
  return Status::Ok();
}

// Every plain symbol in an input's shape needs a range to plan for.
Status check_input_dims(const CompiledMethod& cm, const SerializeOptions& options) {
  for (const InputSymbol& s : input_symbols(cm.program)) {
    if (options.dims.count(s.symbol)) continue;
    return invalid_argument("method '{}' ({}): input '{}' {} has the symbolic dim '{}'; give the "
                            "range to plan it for: --dim {}=MIN..MAX (for example --dim {}=1..8)",
                            cm.name, cm.model, s.input->name, s.spec->to_string(), s.symbol,
                            s.symbol, s.symbol);
  }
  return Status::Ok();
}

}  // namespace

std::vector<InputSymbol> input_symbols(const ExportedProgram& program) {
  auto plain = [](std::string_view name) {
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
    for (char c : name) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    }
    return true;
  };
  std::vector<InputSymbol> out;
  for (const InputSpec& s : program.signature().inputs) {
    if (s.kind != InputKind::kUserInput) continue;
    const Node* n = program.graph().find(s.arg);
    if (n == nullptr || !n->has_spec()) continue;
    for (size_t d = 0; d < n->spec().rank(); ++d) {
      const Dim& dim = n->spec().shape[d];
      if (!dim.is_static() && plain(dim.symbol_name())) out.push_back({&s, &n->spec(), d, dim.symbol_name()});
    }
  }
  return out;
}

Result<Compiled> compile_models(const std::vector<std::pair<std::string, std::string>>& methods,
                                const CompileArgs& args, std::ostream& log) {
  // An ONNX model's dim planned for one size is that size from the start: its shape arithmetic
  // folds at import (and with it the If branches that test shapes).
  OnnxImportOptions import;
  for (const std::string& d : args.dims) {
    auto ranges = parse_dim_ranges(d);
    if (!ranges.ok()) return ranges.status().with_context("--dim");
    for (const auto& [sym, r] : *ranges) {
      if (r.min == r.max) import.dim_values[sym] = r.min;
    }
  }
  std::vector<std::unique_ptr<CompiledMethod>> loaded;
  for (const auto& [name, model] : methods) {
    auto cm = std::make_unique<CompiledMethod>();
    cm->name = name;
    cm->model = model;
    KILN_ASSIGN_OR_RETURN(cm->program, load_model(model, import));
    loaded.push_back(std::move(cm));
  }
  return compile_programs(std::move(loaded), args, {}, log);
}

namespace {

// --multiple-graphs: each method's one HTP delegate (the whole method) goes into one context
// binary, and the method becomes that context's loader for its graph.
Status join_graphs(Compiled& compiled, const CompileArgs& args, std::ostream& log) {
  if (std::find(args.backends.begin(), args.backends.end(), htp::kBackendId) == args.backends.end()) {
    return invalid_argument("--multiple-graphs needs --backend htp");
  }
  std::vector<std::vector<uint8_t>> blobs;
  std::vector<std::vector<std::string>> orders;
  for (const auto& cm : compiled.methods) {
    size_t delegated = 0, others = 0;
    for (const Node* n : cm->program.graph().nodes()) {
      if (n->op() != OpKind::kCallFunction || n->is_call(OpId::kGetitem)) continue;
      (n->is_call(OpId::kCallDelegate) ? delegated : others) += 1;
    }
    const auto& modules = cm->program.lowered_modules();
    if (delegated != 1 || others != 0 || modules.size() != 1 || modules[0].backend_id != htp::kBackendId) {
      return invalid_argument("--multiple-graphs: method '{}' ({}) is not one HTP delegate ({} delegate call(s), {} "
                              "call(s) on the CPU): each method must run on the HTP whole",
                              cm->name, cm->model, delegated, others);
    }
    std::span<const uint8_t> b = modules[0].processed_bytes->bytes();
    blobs.emplace_back(b.begin(), b.end());
    std::vector<std::string> order;  // the method keeps its inputs' order
    for (Node* p : cm->program.user_inputs()) {
      const InputSpec* spec = cm->program.input_spec(p);
      order.push_back(spec != nullptr && !spec->name.empty() ? spec->name : p->name());
    }
    orders.push_back(std::move(order));
  }
  CompileArgs joined = args;
  joined.multiple_graphs = false;
  KILN_ASSIGN_OR_RETURN(auto specs, htp_compile_specs(joined, "forward", log));
  KILN_ASSIGN_OR_RETURN(htp::Options options, htp::options_from_specs(specs));
  options.multiple_graphs = true;
  options.backend_options.htp_options.use_weight_sharing = true;
  options.online_prepare = false;
  specs = htp::to_compile_specs<CompileSpec>(
      std::vector<htp::CompileSpecBytes>{{std::string(htp::kQnnCompileSpecKey), htp::option_to_flatbuffer(options)}});
  KILN_ASSIGN_OR_RETURN(htp::MultiGraphProgram mg, htp::generate_multi_graph_program(specs, blobs, orders));
  for (size_t i = 0; i < compiled.methods.size(); ++i) compiled.methods[i]->program = std::move(mg.graphs[i].program);
  log << fmt::format("multiple graphs: {} graph(s) in one context binary of {} bytes; static data {} bytes ({} bytes "
                     "before sharing)\n", compiled.methods.size(), mg.context.size(), mg.static_bytes,
                     mg.static_bytes_inputs);
  return Status::Ok();
}

}  // namespace

Status bind_fixed_dims(CompiledMethod& cm, const std::map<std::string, DimRange, std::less<>>& dims) {
  bool changed = false;
  Graph& graph = cm.program.graph();
  for (Node* n : cm.program.user_inputs()) {
    if (!n->has_spec()) continue;
    TensorSpec spec = n->spec();
    for (Dim& d : spec.shape) {
      if (d.is_static()) continue;
      auto it = dims.find(d.symbol_name());
      if (it == dims.end() || it->second.min != it->second.max) continue;
      d = Dim(it->second.min);
      changed = true;
    }
    n->meta.val = SpecList{spec};
  }
  if (!changed) return Status::Ok();
  for (Node* n : graph.nodes()) {
    if (n->op() != OpKind::kCallFunction) continue;
    Status s = graph.infer(n);
    if (!s.ok()) return s.with_context(fmt::format("method '{}': binding --dim", cm.name));
  }
  return Status::Ok();
}

Result<std::vector<quant::Sample>> read_calibration(const CompileArgs& args) {
  const bool mixed = !args.fp_nodes.empty() || !args.fp_ops.empty() || args.fp16_fallback;
  if (args.quant.empty()) {
    if (mixed) return invalid_argument("--fp-node / --fp-op / --fp16-fallback need --quant (the rest is quantized)");
    return std::vector<quant::Sample>{};
  }
  if (args.calib.empty()) return invalid_argument("--quant {} needs calibration inputs: --calib DATA", args.quant);
  return quant::read_samples(args.calib);
}

namespace {

// optimize() with constant folding on the portable kernels.
Result<std::vector<PassRecord>> optimize_on_cpu(ExportedProgram& program) {
  OptimizeOptions options;
  options.evaluate = portable::evaluate_node;
  return optimize(program, options);
}

}  // namespace

Status optimize_method(CompiledMethod& cm, const CompileArgs& args) {
  if (args.no_optimize) return Status::Ok();
  auto records = optimize_on_cpu(cm.program);
  if (!records.ok()) return records.status().with_context(fmt::format("{} (method '{}')", cm.model, cm.name));
  cm.passes = std::move(records).value();
  return Status::Ok();
}

Status optimize_for_interpreter(ExportedProgram& program, const CompileArgs& args) {
  if (args.no_optimize) return Status::Ok();
  auto records = optimize_on_cpu(program);
  if (!records.ok()) return records.status();
  auto fused = fuse_activations(program);
  return fused.ok() ? Status::Ok() : fused.status();
}

namespace {

// After partitioning: what runs on the portable kernels gets its activations fused.
Status fuse_cpu_activations(CompiledMethod& cm, const CompileArgs& args) {
  if (args.no_optimize) return Status::Ok();
  PassManager pm;
  pm.add("FuseActivations", fuse_activations);
  auto ran = pm.run(cm.program);
  if (!ran.ok()) return ran.status().with_context(fmt::format("{} (method '{}')", cm.model, cm.name));
  cm.passes.insert(cm.passes.end(), pm.records().begin(), pm.records().end());
  return Status::Ok();
}

}  // namespace

Status quantize_and_lower(CompiledMethod& cm, const CompileArgs& args, const std::vector<quant::Sample>& samples,
                          const std::vector<std::string>& dim_texts, std::ostream& log) {
  BackendRegistry registry;
  KILN_RETURN_IF_ERROR(register_backends(registry));
  const bool mixed = !args.fp_nodes.empty() || !args.fp_ops.empty() || args.fp16_fallback;
  if (mixed) {
    KILN_RETURN_IF_ERROR(quantize_mixed(cm, args, samples, log));
  } else if (!args.quant.empty()) {
    KILN_RETURN_IF_ERROR(quantize_method(cm, args, samples, log));
  }
  if (!args.quant_io.empty()) KILN_RETURN_IF_ERROR(tag_quant_io(cm, args.quant_io, log));
  KILN_RETURN_IF_ERROR(lower_method(cm, args, dim_texts, registry, log));
  return fuse_cpu_activations(cm, args);
}

std::string format_delegates(const ExportedProgram& program) {
  std::string out;
  for (const LoweredModule& lm : program.lowered_modules()) {
    std::string precision = "-";
    if (auto p = htp::delegate_precision(lm)) precision = htp::to_string(*p);
    size_t calls = 0;
    std::set<std::string> ops;
    if (lm.original_module != nullptr) {
      for (const Node* n : lm.original_module->graph().nodes()) {
        if (n->op() != OpKind::kCallFunction) continue;
        ++calls;
        bool qdq = n->is_call(OpId::kQuantizePerTensor) || n->is_call(OpId::kDequantizePerTensor) ||
                   n->is_call(OpId::kQuantizePerChannel) || n->is_call(OpId::kDequantizePerChannel);
        if (!qdq && !n->is_call(OpId::kGetitem)) ops.emplace(n->target_name());
      }
    }
    out += fmt::format("  {:<18} {:<8} {:<10} {:>5} node(s)  {}\n", lm.name, lm.backend_id, precision, calls,
                       fmt::join(ops, " "));
  }
  if (out.empty()) out = "  (none)\n";
  return out;
}

Result<Compiled> compile_programs(std::vector<std::unique_ptr<CompiledMethod>> methods,
                                  const CompileArgs& given,
                                  const std::map<std::string, DimRange, std::less<>>& default_dims,
                                  std::ostream& log) {
  // "portable" names no delegate: what no delegate takes runs on the portable kernels anyway.
  CompileArgs args = given;
  std::erase(args.backends, std::string(kPortableBackend));
  SerializeOptions options;
  options.segment_alignment = args.segment_alignment;
  std::vector<std::string> dim_texts = args.dims;
  for (const std::string& d : args.dims) {
    auto ranges = parse_dim_ranges(d);
    if (!ranges.ok()) return ranges.status().with_context("--dim");
    for (auto& [name, r] : *ranges) {
      if (!options.dims.emplace(name, r).second) {
        return invalid_argument("--dim: dim '{}' is given twice", name);
      }
    }
  }
  for (const auto& [name, r] : default_dims) {
    if (options.dims.emplace(name, r).second) dim_texts.push_back(fmt::format("{}={}..{}", name, r.min, r.max));
  }
  Compiled out;
  std::vector<MethodToSerialize> to_write;
  KILN_ASSIGN_OR_RETURN(std::vector<quant::Sample> samples, read_calibration(args));
  for (auto& cm : methods) {
    KILN_RETURN_IF_ERROR(check_input_dims(*cm, options));
    // Static-shape backends: a dim planned for one size becomes that size.
    if (std::find(args.backends.begin(), args.backends.end(), htp::kBackendId) != args.backends.end() ||
        std::find(args.backends.begin(), args.backends.end(), xnnpack::kBackendId) != args.backends.end()) {
      KILN_RETURN_IF_ERROR(bind_fixed_dims(*cm, options.dims));
    }
    KILN_RETURN_IF_ERROR(optimize_method(*cm, args));
    KILN_RETURN_IF_ERROR(quantize_and_lower(*cm, args, samples, dim_texts, log));
    if (!args.backends.empty()) {
      log << fmt::format("method '{}' ({}): {} partition(s), {} of {} calls delegated to {}\n",
                         cm->name, cm->model, cm->partitions, cm->nodes_delegated, cm->nodes_total,
                         fmt::join(args.backends, ", "));
      if (args.report && !cm->passes.empty()) {
        std::vector<std::string> changed;
        for (const PassRecord& r : cm->passes) {
          if (r.changed) changed.push_back(r.name);
        }
        log << fmt::format("graph passes that changed method '{}': {}\n", cm->name,
                           changed.empty() ? std::string("none") : fmt::format("{}", fmt::join(changed, ", ")));
      }
      if (args.report && cm->reporter) {
        std::string table = cm->reporter->get_table_report();
        log << "WhyNoPartition report:\n" << table << (table.empty() || table.back() == '\n' ? "" : "\n");
        log << "delegates:\n" << format_delegates(cm->program);
      }
    }
    to_write.push_back({cm->name, &cm->program});
    out.methods.push_back(std::move(cm));
  }
  if (args.multiple_graphs) KILN_RETURN_IF_ERROR(join_graphs(out, args, log));
  if (args.multi_contexts) {
    std::vector<ExportedProgram*> programs;
    for (auto& cm : out.methods) programs.push_back(&cm->program);
    KILN_ASSIGN_OR_RETURN(uint64_t bytes, htp::update_spill_fill_size(programs));
    size_t contexts = 0;
    uint64_t each = 0;  // what separate buffers would take
    for (auto& cm : out.methods) {
      for (const LoweredModule& lm : cm->program.lowered_modules()) {
        auto c = htp::parse_context(lm.processed_bytes->bytes());
        if (!c.ok()) continue;
        ++contexts;
        for (htp::QnnGraph g : c->graphs) {
          if (!c->prepared) htp::plan_graph(g, c->soc.vtcm_size_mb);
          each += g.spill_fill_bytes;
        }
      }
    }
    log << fmt::format("multi contexts: {} HTP context(s) share one spill-fill buffer of {} bytes "
                       "(update_spill_fill_size; {} bytes as a buffer each)\n", contexts, bytes, each);
  }
  KILN_ASSIGN_OR_RETURN(out.image, serialize_program(to_write, options));
  return out;
}

Result<std::shared_ptr<const runtime::Program>> load_image(const ProgramImage& image) {
  // 64-byte aligned, so the loader views it in place.
  auto storage = HeapStorage::try_allocate(image.size);
  if (storage == nullptr) return resource_exhausted("cannot allocate {} bytes for the program", image.size);
  size_t at = 0;
  for (std::string_view c : image.chunks) {
    std::memcpy(storage->mutable_data() + at, c.data(), c.size());
    at += c.size();
  }
  return runtime::Program::load_buffer(std::span<const uint8_t>(storage->mutable_data(), image.size), storage);
}

}  // namespace kiln::tool
