// The context-loader program shared by from_context_binary and generate_multi_graph_program.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "kiln/backends/htp/programs.h"

namespace kiln::htp {

/// Builds out.program (inputs out.inputs -> context_loader `op_name` over `context` ->
/// out.outputs) and lowers it with the HTP partitioner under `compile_specs`, which name
/// out.graph_name and say is_from_context_binary. The program takes its inputs in the order
/// `signature` names them (a permutation of out.inputs' names), or as out.inputs when null.
/// Checks the I/O's data types and names first.
Status lower_context_loader(std::span<const uint8_t> context, std::string_view op_name,
                            std::vector<CompileSpec> compile_specs, ContextProgram& out,
                            const std::vector<std::string>* signature = nullptr);

}  // namespace kiln::htp
