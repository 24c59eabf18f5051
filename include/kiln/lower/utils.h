// Inspection and rewrite utilities around delegation (ExecuTorch's exir/backend/utils.py and the
// Qualcomm backend's helpers).
#pragma once

#include <iosfwd>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

/// The owning graph as print_graph prints it, with each lowered module's "backend_id: <id>" and
/// "lowered graph():" printed one level (4 spaces) deeper than the delegate get_attr node that
/// reads it, and the lowered graph's nodes two levels deeper (ExecuTorch's
/// format_delegated_graph, laid out as its docstring shows). A delegate get_attr is one named
/// "lowered_module_*" (as get_delegates); a lowered module appears once, under its first such
/// node. Modules not printed so (no delegate get_attr reads them) follow the graph, each under a
/// "<name>:" line. Lowered graphs are printed as print_graph does: modules nested inside them
/// are not expanded. A module without original_module shows its backend id only.
std::string format_delegated_graph(const ExportedProgram& program);

/// Writes format_delegated_graph(program) and a newline to `os` (ExecuTorch's
/// print_delegated_graph, which print()s it), or to stdout.
void print_delegated_graph(const ExportedProgram& program, std::ostream& os);
void print_delegated_graph(const ExportedProgram& program);

/// call_function nodes that are neither a call_delegate nor a getitem reading one. The
/// pointers live as long as the nodes.
std::vector<Node*> get_non_lowered_nodes(const Graph& graph);

/// The delegates of `graph`, in order: its get_attr nodes named "lowered_module_*" (the nodes
/// that read the lowered modules, as ExecuTorch's get_delegates returns; their users are the
/// call_delegate nodes). The pointers live as long as the nodes.
std::vector<Node*> get_delegates(const Graph& graph);

/// What a lowered module hands to its runtime.
struct DelegatedPayload {
  std::string backend_id;                            ///< the runtime that takes the blob
  std::vector<CompileSpec> compile_specs;            ///< as given to preprocess
  std::shared_ptr<const Storage> blob;               ///< shared with the LoweredModule
};

/// Delegate name -> payload of the lowered module it reads, for each delegate get_attr node
/// (get_delegates) that reads a lowered module of `program`; keyed by the node's name, which is
/// the module's name for every delegate to_backend makes. Modules no such node reads are left
/// out, as in ExecuTorch's get_delegated_payload, which walks the graph.
std::map<std::string, DelegatedPayload> get_delegated_payload(const ExportedProgram& program);

/// Removes each quantize_per_tensor that reads a user input placeholder (its only user): the
/// placeholder takes the quantized dtype and the quantize's users read it directly. Removes each
/// dequantize_per_tensor returned as an output: the output returns its quantized input (other
/// users of the dequantize keep it; other outputs are untouched). Returns whether anything
/// changed. The program's input and output dtypes change accordingly.
Result<bool> remove_first_quant_and_last_dequant(ExportedProgram& program);

/// The outputs at `indices` of the graph's output node (each a dequantize node) return that
/// dequantize's input instead: its codes. A dequantize left with no user is erased.
Status return_codes_instead_of_dequantized(ExportedProgram& program, std::span<const size_t> indices);

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
