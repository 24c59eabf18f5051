// skip_annotation: mixed precision on the HTP. Quantized groups around the nodes kept in
// floating point, and those nodes on the CPU or on the HTP in fp16.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "kiln/backends/htp/capture.h"
#include "kiln/backends/htp/htp_backend.h"
#include "kiln/backends/htp/programs.h"
#include "kiln/ir/op_registry.h"
#include "kiln/lower/to_backend.h"

namespace kiln::htp {
namespace {

constexpr const char* kWhere = "skip_annotation";

// Lowers what `support` takes of `program` to the HTP under `specs`; returns the names of the
// lowered modules it made.
Result<std::vector<std::string>> lower(ExportedProgram& program, const std::vector<CompileSpec>& specs,
                                       OperatorSupportPtr support, CapabilityOptions options, const char* prefix) {
  BackendRegistry registry;
  KILN_RETURN_IF_ERROR(register_htp_backend(registry));
  // HTP reads a dequantize at a partition's input as a quantized input: no q/dq clusters.
  options.quantized_clusters = false;
  options.tag_prefix = prefix;
  if (options.reporter) support = wrap_check(std::move(support), options.reporter);
  CapabilityPartitioner partitioner(std::string(kBackendId), specs, std::move(support), options);
  KILN_ASSIGN_OR_RETURN(LoweringReport report, to_backend(program, partitioner, registry));
  return report.lowered_modules;
}

// Names of the call_function nodes a lowered module was made of.
std::vector<std::string> nodes_of(const ExportedProgram& program, const std::string& module) {
  std::vector<std::string> out;
  for (const LoweredModule& lm : program.lowered_modules()) {
    if (lm.name != module || lm.original_module == nullptr) continue;
    for (const Node* n : lm.original_module->graph().nodes()) {
      if (n->op() == OpKind::kCallFunction) out.push_back(n->name());
    }
  }
  return out;
}

}  // namespace

std::optional<HtpPrecision> delegate_precision(const LoweredModule& module) {
  if (module.backend_id != kBackendId) return std::nullopt;
  auto options = options_from_specs(module.compile_specs);
  if (!options.ok()) return std::nullopt;
  return options->backend_options.htp_options.precision;
}

Result<SkipAnnotationResult> skip_annotation(const ExportedProgram& program, const quant::QuantizeOptions& quantizer,
                                             const std::vector<CompileSpec>& compiler_specs,
                                             const CalibrationFn& calibrate,
                                             const std::set<std::string>& fp_node_ids,
                                             const std::set<std::string>& fp_node_ops, bool fallback_to_cpu,
                                             const CapabilityOptions& partition_options) {
  auto options = options_from_specs(compiler_specs);
  if (!options.ok()) return options.status().with_context(kWhere);
  if (options->backend_options.htp_options.precision != HtpPrecision::kQuantized) {
    return invalid_argument("{}: the compiler specs ask for {} precision; the annotated groups are quantized, so give "
                            "quantized-precision specs (generate_htp_compiler_spec(use_fp16=false))",
                            kWhere, to_string(options->backend_options.htp_options.precision));
  }
  if (!calibrate) return invalid_argument("{}: no calibration callback", kWhere);
  const Graph& graph = program.graph();
  for (const std::string& name : fp_node_ids) {
    const Node* n = graph.find(name);
    if (n == nullptr || n->op() != OpKind::kCallFunction) {
      return not_found("{}: fp_node_id_set names '{}', which is not an operator node of the program", kWhere, name);
    }
  }
  std::unordered_set<int> skip_ops;
  for (const std::string& op : fp_node_ops) {
    auto id = op_from_name(op);
    if (!id) return not_found("{}: fp_node_op_set names '{}', which is not an operator", kWhere, op);
    skip_ops.insert(static_cast<int>(*id));
  }
  auto not_skipped = support_fn([&](const ExportedProgram&, const Node& n) {
    if (fp_node_ids.count(n.name())) return SupportResult::no("it is kept in floating point (fp_node_id_set)");
    if (skip_ops.count(static_cast<int>(n.target()))) {
      return SupportResult::no(fmt::format("it is kept in floating point (fp_node_op_set has '{}')", n.target_name()));
    }
    return SupportResult::yes();
  });

  // Quantize everything but the skipped nodes (annotate refuses programs already quantized or
  // lowered). Every observed tensor is observed once over the whole graph's calibration run,
  // as the seed's per-group submodules observe the same values at their boundaries.
  quant::QuantizeOptions qopts = quantizer;
  qopts.skip_nodes.insert(qopts.skip_nodes.end(), fp_node_ids.begin(), fp_node_ids.end());
  qopts.skip_ops.insert(qopts.skip_ops.end(), fp_node_ops.begin(), fp_node_ops.end());
  auto prepared = quant::prepare(program, qopts);
  if (!prepared.ok()) return prepared.status().with_context(kWhere);

  // The annotated groups: the partitions of "not skipped" over the float program.
  SkipAnnotationResult out;
  CapabilityOptions group_options;
  group_options.quantized_clusters = false;
  Proposal groups = propose_partitions(program, *not_skipped, group_options);
  std::unordered_map<std::string, size_t> group_of;  // node name -> index in out.groups
  for (size_t i = 0; i < groups.partitions.size(); ++i) {
    AnnotationGroup g{fmt::format("annotated_group_{}", i), HtpPrecision::kQuantized, {}, {}};
    for (const Node* n : groups.partitions[i]) {
      g.nodes.push_back(n->name());
      group_of.emplace(n->name(), i);
    }
    out.groups.push_back(std::move(g));
  }

  if (Status s = calibrate(**prepared); !s.ok()) return s.with_context(fmt::format("{}: calibration", kWhere));
  if ((*prepared)->samples() == 0 && !(*prepared)->groups().empty()) {
    return invalid_argument("{}: the calibration callback observed no samples (call quant::calibrate on the "
                               "prepared model it is given)", kWhere);
  }
  auto converted = quant::convert(**prepared);
  if (!converted.ok()) return converted.status().with_context(kWhere);
  out.program = std::move(converted).value();
  // What capture_program does to each converted submodule before the seed lowers it.
  if (Status s = recompose_for_partition(out.program); !s.ok()) return s.with_context(kWhere);

  // Quantized precision: the HTP takes what it supports of the annotated groups. A delegate
  // never spans two groups: groups meet only through skipped (float) nodes, which quantized
  // precision refuses, or where merging them would make a cycle.
  auto quantized = lower(out.program, compiler_specs, all_of({not_skipped, htp_operator_support(*options)}),
                         partition_options, "htp");
  if (!quantized.ok()) return quantized.status().with_context(kWhere);
  for (const std::string& module : *quantized) {
    std::set<size_t> of;
    for (const std::string& name : nodes_of(out.program, module)) {
      if (auto it = group_of.find(name); it != group_of.end()) of.insert(it->second);
    }
    for (size_t g : of) out.groups[g].lowered_modules.push_back(module);
  }
  if (fallback_to_cpu) return out;

  // fp16: the same specs in fp16 precision over what is left (the skipped groups).
  Options fp16 = *options;
  fp16.backend_options.htp_options.precision = HtpPrecision::kFp16;
  if (Status s = validate_options(fp16); !s.ok()) {
    out.warnings.push_back(fmt::format("{}: cannot switch the HTP compiler spec to fp16 ({}); the skipped operators "
                                       "fall back to the CPU", kWhere, s.message()));
    return out;
  }
  std::vector<CompileSpec> fp16_specs = compiler_specs;
  for (CompileSpec& spec : fp16_specs) {
    if (spec.key == kQnnCompileSpecKey) spec.value = option_to_flatbuffer(fp16);
  }
  // Not reported: every node left here was reported by the quantized pass, with why.
  CapabilityOptions fp16_options = partition_options;
  fp16_options.reporter = nullptr;
  auto lowered = lower(out.program, fp16_specs, htp_operator_support(fp16), fp16_options, "htp_fp16");
  if (!lowered.ok()) return lowered.status().with_context(fmt::format("{}: fp16 fallback", kWhere));
  for (size_t i = 0; i < lowered->size(); ++i) {
    AnnotationGroup g{fmt::format("skipped_group_{}", i), HtpPrecision::kFp16, nodes_of(out.program, (*lowered)[i]),
                      {(*lowered)[i]}};
    out.groups.push_back(std::move(g));
  }
  return out;
}

}  // namespace kiln::htp
