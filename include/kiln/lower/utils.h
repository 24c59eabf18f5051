// Inspection and rewrite utilities around delegation (ExecuTorch's exir/backend/utils.py and the
// Qualcomm backend's helpers).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

/// The owning graph, with each lowered module's backend id and lowered graph printed under the
/// get_attr node that reads it (ExecuTorch's print_delegated_graph). Modules no get_attr reads
/// are printed after the graph.
std::string format_delegated_graph(const ExportedProgram& program);

/// call_function nodes that are neither a call_delegate nor a getitem reading one. The
/// pointers live as long as the nodes.
std::vector<Node*> get_non_lowered_nodes(const Graph& graph);

/// The call_delegate nodes of `graph`, in order.
std::vector<Node*> get_delegates(const Graph& graph);

/// What a lowered module hands to its runtime.
struct DelegatedPayload {
  std::string backend_id;                            ///< the runtime that takes the blob
  std::vector<CompileSpec> compile_specs;            ///< as given to preprocess
  std::shared_ptr<const Storage> blob;               ///< shared with the LoweredModule
};

/// Lowered module name -> its payload.
std::map<std::string, DelegatedPayload> get_delegated_payload(const ExportedProgram& program);

/// Removes each quantize_per_tensor that reads a user input placeholder (its only user): the
/// placeholder takes the quantized dtype and the quantize's users read it directly. Removes each
/// dequantize_per_tensor returned as an output: the output returns its quantized input (other
/// users of the dequantize keep it; other outputs are untouched). Returns whether anything
/// changed. The program's input and output dtypes change accordingly.
Result<bool> remove_first_quant_and_last_dequant(ExportedProgram& program);

/// A group of nodes that came from one source module (torch's SourcePartition).
struct SourcePartition {
  std::vector<Node*> nodes;   ///< every node of the partition (params included)
  std::vector<Node*> params;  ///< the parameter nodes among them
};

/// What replace_quantized_partition_with_op did. The dq / q nodes are erased: only their names
/// are returned.
struct QuantizedReplacement {
  Node* replaced = nullptr;
  std::vector<std::string> dequant_nodes;
  std::vector<std::string> quant_nodes;
};

/// Replaces a quantized partition dq -> op(s) -> q with one call of `op` whose args are the
/// values flowing into the dq nodes and the partition (first-use order), keyword args at their
/// defaults. Errors: no dequantize feeding the partition ("missing dq"), no quantize reading it
/// ("missing q"), more than one value leaving it, or `op` rejecting the args.
Result<QuantizedReplacement> replace_quantized_partition_with_op(ExportedProgram& program,
                                                                 const SourcePartition& partition,
                                                                 OpId op);

}  // namespace kiln
