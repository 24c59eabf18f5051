// HTP programs: what ExecuTorch's Qualcomm utilities do with whole context binaries
// (backends/qualcomm/utils/utils.py: from_context_binary, generate_multi_graph_program,
// update_spill_fill_size, skip_annotation).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/htp/context.h"
#include "kiln/backends/htp/options.h"
#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"
#include "kiln/partition/capability_partitioner.h"
#include "kiln/quant/quantizer.h"

namespace kiln::htp {

/// One graph input or output of a context binary: QNN's name, data type and dims.
struct GraphIo {
  std::string name;
  QnnDataType data_type = QnnDataType::kFloat32;
  std::vector<uint32_t> dims;

  bool operator==(const GraphIo&) const = default;
};

/// The I/O of a context binary's graph given by the caller instead of read from the binary
/// (from_context_binary's custom_info: for binaries the host cannot open).
struct CustomInfo {
  std::vector<GraphIo> graph_inputs;
  std::vector<GraphIo> graph_outputs;
  std::string graph_name;
};

/// What from_context_binary returns: the lowered program, and the graph's I/O (in the graph's
/// order) and name.
struct ContextProgram {
  ExportedProgram program;
  std::vector<GraphIo> inputs;
  std::vector<GraphIo> outputs;
  std::string graph_name;
};

/// Builds a program that runs a context binary: its inputs are the graph's inputs (by name),
/// its single node a context_loader named `op_name` reading the binary as a u8 constant, its
/// outputs the graph's outputs; then lowers it to the HTP backend (compile spec for
/// `soc_model` with is_from_context_binary, the graph's name and precision), so that the blob
/// is the binary itself. Without `custom_info` the binary is parsed and checked, and its first
/// graph taken; with it, the binary is taken as it is and the I/O as given. Errors: a binary
/// that does not parse, a SoC other than the binary's, an unknown data type (named), an empty
/// or invalid op name.
Result<ContextProgram> from_context_binary(std::span<const uint8_t> context, std::string_view op_name,
                                           QcomChipset soc_model = QcomChipset::SM8650,
                                           const CustomInfo* custom_info = nullptr);
/// The same, reading the binary from `path`.
Result<ContextProgram> from_context_binary(const std::filesystem::path& path, std::string_view op_name,
                                           QcomChipset soc_model = QcomChipset::SM8650,
                                           const CustomInfo* custom_info = nullptr);

/// What generate_multi_graph_program returns.
struct MultiGraphProgram {
  std::vector<uint8_t> context;  ///< every graph in one context binary, identical static tensors once
  /// One program per graph, in context order: a loader op "loader_<graph>" over `context`,
  /// meant as the method named after the graph (serialize them together: one blob segment).
  std::vector<ContextProgram> graphs;
  uint64_t static_bytes = 0;         ///< static data the context holds
  uint64_t static_bytes_inputs = 0;  ///< static data of the given blobs together
};

/// Compiles the graphs of `processed_bytes` (HTP blobs, one graph each, usually online-prepare
/// ones: compile with online_prepare and a graph name per method) into one prepared context
/// binary whose identical static tensors are stored once, then builds a loader program per
/// graph with from_context_binary over it. `compiler_specs` is the qnn_compile_spec of the
/// result: it must say multiple_graphs (generate_qnn_executorch_compiler_spec(multiple_graphs),
/// which turns weight sharing on) and name the blobs' SoC; its use_dlbc applies. Errors: blobs
/// that do not parse, other SoCs or precisions, a graph name used twice. `input_orders`, when
/// given, has per blob the names of its graph's inputs in the order its program takes them (a
/// model's signature order; the graph's own order is the order its ops first read them).
Result<MultiGraphProgram> generate_multi_graph_program(const std::vector<CompileSpec>& compiler_specs,
                                                       std::span<const std::vector<uint8_t>> processed_bytes,
                                                       std::span<const std::vector<std::string>> input_orders = {});

/// ExecuTorch's update_spill_fill_size over programs: the largest spill-fill size of every HTP
/// delegate whose options say use_multi_contexts, across all `programs`, written into each such
/// delegate's compile spec as max_sf_buf_size; the runtime then gives them one shared
/// spill-fill buffer of that size. Returns the size (0 when no delegate uses multi contexts).
/// Errors: a delegate blob that is not a context binary, or a spec that does not parse.
Result<uint64_t> update_spill_fill_size(std::span<ExportedProgram* const> programs);
Result<uint64_t> update_spill_fill_size(ExportedProgram& program);
/// The same over lowered modules (each taken whatever its options: ExecuTorch's list form).
Result<uint64_t> update_spill_fill_size(std::span<LoweredModule* const> modules);

/// skip_annotation's calibration: called once with the prepared model (observers on every
/// tensor of the annotated groups); run quant::calibrate on it with the user's samples.
using CalibrationFn = std::function<Status(quant::PreparedModel&)>;

/// One group skip_annotation formed, and where it went.
struct AnnotationGroup {
  std::string name;                 ///< "annotated_group_<i>" (quantized) or "skipped_group_<i>" (fp16)
  HtpPrecision precision = HtpPrecision::kQuantized;
  std::vector<std::string> nodes;   ///< its call_function nodes (names of the given program)
  std::vector<std::string> lowered_modules;  ///< the HTP delegates made of it (names in `program`)
};

/// What skip_annotation returns: the graph and, per group, the HTP delegates lowered from it
/// (the seed's list of lowered programs: each module's original_module is that program).
struct SkipAnnotationResult {
  ExportedProgram program;
  std::vector<AnnotationGroup> groups;  ///< annotated groups, then skipped groups
  std::vector<std::string> warnings;    ///< e.g. fp16 refused by the SoC: skipped nodes stay on the CPU
};

/// ExecuTorch's skip_annotation: mixed precision on the HTP. Nodes named in `fp_node_ids` or of
/// an op in `fp_node_ops` (op names: "softmax") stay in floating point, and so do parameters
/// only they read. The other call_function nodes form annotated groups (the capability
/// partitioner's partitions of "not skipped"); they are quantized with `quantizer` (its skip
/// lists extended by the fp sets) and calibrated by `calibrate`, then lowered with the HTP
/// partitioner under `compiler_specs` (quantized precision), each group on its own. With
/// `fallback_to_cpu` false the skipped nodes are lowered again with the same specs in fp16
/// precision (skipped groups); when the SoC has no fp16 (V68) that is a warning and they stay
/// on the CPU, as the seed does. `partition_options` go to both partitioners (reporter, sizes).
/// Errors name what is wrong: an unknown node or op, a program already quantized or lowered, a
/// calibration that observed nothing, specs that are not quantized-precision HTP specs.
Result<SkipAnnotationResult> skip_annotation(const ExportedProgram& program, const quant::QuantizeOptions& quantizer,
                                             const std::vector<CompileSpec>& compiler_specs,
                                             const CalibrationFn& calibrate,
                                             const std::set<std::string>& fp_node_ids,
                                             const std::set<std::string>& fp_node_ops, bool fallback_to_cpu = true,
                                             const CapabilityOptions& partition_options = {});

/// The HTP precision a lowered module was compiled with, or nullopt when it is not an HTP
/// delegate (or its spec does not parse).
std::optional<HtpPrecision> delegate_precision(const LoweredModule& module);

}  // namespace kiln::htp
