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

/// What from_context_binary returns: the lowered program, and the graph's I/O and name.
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

}  // namespace kiln::htp
