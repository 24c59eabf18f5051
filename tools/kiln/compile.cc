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
#include "kiln/quant/quantizer.h"
#include "kiln/quant/report.h"
#include "kiln/core/memory.h"
#include "kiln/lower/to_backend.h"
#include "kiln/partition/capability_partitioner.h"

namespace kiln::tool {

void add_compile_options(CLI::App& cmd, CompileArgs& args) {
  cmd.add_option("--backend", args.backends,
                 "Delegate to this backend (repeatable, in order; default: none, every op runs on "
                 "the portable kernels)");
  cmd.add_option("--ops", args.ops, "The demo backend's op set, comma separated (default: all)");
  cmd.add_option("--dim", args.dims,
                 "Range a symbolic dim is planned for, NAME=MIN..MAX (repeatable), e.g. batch=1..8");
  cmd.add_option("--segment-alignment", args.segment_alignment,
                 "Alignment of the file's segments in bytes (a power of two >= 8; default 4096)");
  cmd.add_option("--quant", args.quant, "Quantize first with this configuration (8a8w, 16a8w, 16a4w, 16a16w)");
  cmd.add_option("--calib", args.calib, "Calibration inputs for --quant (.npz file or folder)");
  cmd.add_option("--observer", args.observer, "--quant's observer: minmax, moving-average or histogram");
  cmd.add_option("--quant-io", args.quant_io,
                 "These user inputs / outputs (comma separated) take and return quantized codes (u8/u16) "
                 "instead of real numbers, with no quantize / dequantize around them (tag_quant_io)")
      ->delimiter(',');
  auto* htp = "HTP backend";
  cmd.add_option("--soc", args.soc, "HTP: the SoC to compile for (default SM8650)")->group(htp);
  cmd.add_option("--precision", args.precision, "HTP: quantized (default) or fp16")->group(htp);
  cmd.add_option("--performance-mode", args.performance_mode, "HTP: burst (default), high, balanced, power-saver, ...")
      ->group(htp);
  cmd.add_option("--profile-level", args.profile, "HTP: off, basic, detailed or optrace (recorded by kiln run --profile)")
      ->group(htp);
  cmd.add_flag("--online-prepare", args.online_prepare, "HTP: ship the op graph, prepare the context at load")->group(htp);
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
  htp::BackendOptions backend = htp::generate_htp_compiler_spec(precision == htp::HtpPrecision::kFp16);
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

Status lower_method(CompiledMethod& cm, const CompileArgs& args,
                    const std::vector<std::string>& dim_texts, const BackendRegistry& registry,
                    std::ostream& log) {
  size_t calls = 0;
  for (const Node* n : cm.program.graph().nodes()) calls += n->op() == OpKind::kCallFunction;
  cm.nodes_total = calls;
  for (const std::string& backend : args.backends) {
    if (auto b = registry.get(backend); !b.ok()) return b.status().with_context("--backend");
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
    CapabilityPartitioner partitioner(
        backend, specs, wrap_check(support, cm.reporter), options,
        [&log](std::string_view line) { log << "kiln: warning: " << line << '\n'; });
    auto report = to_backend(cm.program, partitioner, registry);
    if (!report.ok()) return report.status().with_context(fmt::format("{} (method '{}')", cm.model, cm.name));
    cm.partitions += report->partitions;
    cm.nodes_delegated += report->nodes_delegated;
  }
  return Status::Ok();
}

// Post-training quantization of one method before it is partitioned, with the accuracy table on
// the calibration samples (the quantized program against the float one).
Status quantize_method(CompiledMethod& cm, const CompileArgs& args, const std::vector<quant::Sample>& samples,
                       std::ostream& log) {
  std::optional<quant::ObserverKind> observer;
  if (!args.observer.empty()) {
    observer = quant::observer_from_name(args.observer);
    if (!observer) return invalid_argument("--observer '{}': expected minmax, moving-average or histogram", args.observer);
  }
  quant::QuantizeOptions options;
  KILN_ASSIGN_OR_RETURN(options.config, quant::make_config(args.quant, false, observer, false));
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

// HTP graphs are static: a symbol given one value (--dim batch=1) becomes that value in the
// user inputs' specs, and every node's spec is inferred again.
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
  std::vector<std::unique_ptr<CompiledMethod>> loaded;
  for (const auto& [name, model] : methods) {
    auto cm = std::make_unique<CompiledMethod>();
    cm->name = name;
    cm->model = model;
    KILN_ASSIGN_OR_RETURN(cm->program, load_model(model));
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

Result<Compiled> compile_programs(std::vector<std::unique_ptr<CompiledMethod>> methods,
                                  const CompileArgs& args,
                                  const std::map<std::string, DimRange, std::less<>>& default_dims,
                                  std::ostream& log) {
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
  BackendRegistry registry;
  KILN_RETURN_IF_ERROR(register_backends(registry));
  Compiled out;
  std::vector<MethodToSerialize> to_write;
  std::vector<quant::Sample> samples;
  if (!args.quant.empty()) {
    if (args.calib.empty()) return invalid_argument("--quant {} needs calibration inputs: --calib DATA", args.quant);
    KILN_ASSIGN_OR_RETURN(samples, quant::read_samples(args.calib));
  }
  for (auto& cm : methods) {
    KILN_RETURN_IF_ERROR(check_input_dims(*cm, options));
    if (std::find(args.backends.begin(), args.backends.end(), htp::kBackendId) != args.backends.end()) {
      KILN_RETURN_IF_ERROR(bind_fixed_dims(*cm, options.dims));
    }
    if (!args.quant.empty()) KILN_RETURN_IF_ERROR(quantize_method(*cm, args, samples, log));
    if (!args.quant_io.empty()) KILN_RETURN_IF_ERROR(tag_quant_io(*cm, args.quant_io, log));
    KILN_RETURN_IF_ERROR(lower_method(*cm, args, dim_texts, registry, log));
    if (!args.backends.empty()) {
      log << fmt::format("method '{}' ({}): {} partition(s), {} of {} calls delegated to {}\n",
                         cm->name, cm->model, cm->partitions, cm->nodes_delegated, cm->nodes_total,
                         fmt::join(args.backends, ", "));
      if (args.report && cm->reporter) {
        std::string table = cm->reporter->get_table_report();
        log << "WhyNoPartition report:\n" << table << (table.empty() || table.back() == '\n' ? "" : "\n");
      }
    }
    to_write.push_back({cm->name, &cm->program});
    out.methods.push_back(std::move(cm));
  }
  if (args.multiple_graphs) KILN_RETURN_IF_ERROR(join_graphs(out, args, log));
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
