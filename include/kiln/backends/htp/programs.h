// HTP programs: what ExecuTorch's Qualcomm utilities do with whole context binaries
// (backends/qualcomm/utils/utils.py: from_context_binary).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/htp/context.h"
#include "kiln/backends/htp/options.h"
#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

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

}  // namespace kiln::htp
