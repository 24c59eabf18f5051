// ExportedProgram: a graph, its signature, the constants it owns and its lowered modules.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/ir/graph.h"

namespace kiln {

/// What a placeholder stands for (torch.export's InputKind).
enum class InputKind : uint8_t { kUserInput, kParameter, kBuffer, kConstantTensor };
/// What an output is (torch.export's OutputKind).
enum class OutputKind : uint8_t { kUserOutput, kBufferMutation, kUserInputMutation };

const char* input_kind_name(InputKind kind);    ///< "user_input", "parameter", ...
const char* output_kind_name(OutputKind kind);  ///< "user_output", "buffer_mutation", ...
std::optional<InputKind> input_kind_from_name(std::string_view name);
std::optional<OutputKind> output_kind_from_name(std::string_view name);

/// One placeholder of the graph, in placeholder order.
struct InputSpec {
  InputKind kind = InputKind::kUserInput;
  std::string arg;         ///< placeholder node name
  std::string target;      ///< constant-store name (parameter, buffer, constant); empty for users
  bool persistent = true;  ///< buffers only: saved with the model (state_dict) or not
  /// User inputs only: the name callers know it by, the model's own (an ONNX graph input name
  /// such as "input.1", kept exactly even where the placeholder had to be renamed).
  std::string name;

  bool operator==(const InputSpec&) const = default;
};

/// One value returned by the output node, in output order.
struct OutputSpec {
  OutputKind kind = OutputKind::kUserOutput;
  std::string target;  ///< buffer name (buffer mutation) or user input name (input mutation)
  /// User outputs only: the name callers know it by, the model's own (an ONNX graph output
  /// name). It stays when passes replace the returned node (lowering returns a getitem).
  std::string name;

  bool operator==(const OutputSpec&) const = default;
};

/// Names each user output in `specs` that has no name after its value node in `values` (same
/// length), adding "_1", "_2", ... where that name is already an output's.
void name_user_outputs(const std::vector<Node*>& values, std::vector<OutputSpec>& specs);

struct GraphSignature {
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
};

/// Named tensors (parameters, buffers, lifted constants). Tensors share bytes copy-on-write.
class ConstantStore {
 public:
  /// Adds or replaces `name`.
  void set(const std::string& name, Tensor t);
  /// Tensor named `name`, or null. The pointer lives until the entry is replaced or erased.
  const Tensor* find(const std::string& name) const;
  Tensor* find_mutable(const std::string& name);
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  bool erase(const std::string& name) { return tensors_.erase(name) != 0; }
  /// Entries sorted by name.
  const std::map<std::string, Tensor>& entries() const { return tensors_; }
  size_t size() const { return tensors_.size(); }
  /// Sum of nbytes over entries (shared bytes counted once per entry).
  size_t total_bytes() const;

 private:
  std::map<std::string, Tensor> tensors_;
};

/// A compile spec: key and opaque value bytes (ExecuTorch's CompileSpec).
struct CompileSpec {
  std::string key;
  std::vector<uint8_t> value;

  bool operator==(const CompileSpec&) const = default;
};

class ExportedProgram;

/// A partition lowered to a backend: read by `get_attr` nodes and called by `call_delegate`.
struct LoweredModule {
  std::string name;        ///< e.g. "lowered_module_0"; the get_attr target
  std::string backend_id;  ///< e.g. "xnnpack"
  std::vector<CompileSpec> compile_specs;
  /// The delegate blob. An ElidedStorage when a text form gave its size only (zeros, which no
  /// runtime accepts); shared with payloads and program files that view it.
  std::shared_ptr<const Storage> processed_bytes;
  std::shared_ptr<ExportedProgram> original_module;  ///< the submodule before preprocess
  /// Debug-handle map: handle -> node handles of the original graph it covers.
  std::map<int64_t, std::vector<int64_t>> debug_handle_map;
  /// Named data the blob refers to (ExecuTorch's NamedDataStore): key -> the owning program's
  /// constant that holds the bytes. A program file stores them with the other constants, once.
  std::vector<std::pair<std::string, std::string>> named_data;
};

/// A graph a control-flow node runs: cond's branches, loop's body, read by get_attr nodes. Its user
/// inputs are the operands the node passes, its user outputs what the node returns.
struct Subgraph {
  std::string name;  ///< the get_attr target ("If_0_then")
  /// Null when the branch cannot run on the program's shapes (an If branch written for another
  /// input size); `error` then says why, and a run that takes the branch fails with it.
  std::shared_ptr<ExportedProgram> program;
  std::string error;
};

/// A graph with its signature, constant store, lowered modules and subgraphs. Movable; owns
/// everything.
class ExportedProgram {
 public:
  ExportedProgram();
  ~ExportedProgram();
  ExportedProgram(ExportedProgram&&) noexcept;
  ExportedProgram& operator=(ExportedProgram&&) noexcept;

  Graph& graph() { return *graph_; }
  const Graph& graph() const { return *graph_; }
  GraphSignature& signature() { return signature_; }
  const GraphSignature& signature() const { return signature_; }
  ConstantStore& constants() { return constants_; }
  const ConstantStore& constants() const { return constants_; }
  std::vector<LoweredModule>& lowered_modules() { return lowered_; }
  const std::vector<LoweredModule>& lowered_modules() const { return lowered_; }
  const LoweredModule* find_lowered_module(std::string_view name) const;
  std::vector<Subgraph>& subgraphs() { return subgraphs_; }
  const std::vector<Subgraph>& subgraphs() const { return subgraphs_; }
  /// The subgraph named `name`, or null.
  const Subgraph* find_subgraph(std::string_view name) const;

  // ---- Signature-keeping edits.

  /// Adds a user input placeholder named `name` (made unique if taken); its signature name is
  /// `user_name`, or the placeholder's name when that is empty.
  Node* add_user_input(std::string_view name, TensorSpec spec, std::string user_name = "");
  /// Adds a parameter placeholder `name` backed by constant `target` (stored from `value`).
  Node* add_parameter(std::string_view name, const std::string& target, Tensor value);
  /// Adds a buffer placeholder; `persistent` as in torch's register_buffer.
  Node* add_buffer(std::string_view name, const std::string& target, Tensor value,
                   bool persistent = true);
  /// Adds a lifted tensor constant placeholder.
  Node* add_constant(std::string_view name, const std::string& target, Tensor value);
  /// Sets the outputs and their specs (same length). User outputs without a name are named by
  /// name_user_outputs.
  Status set_outputs(const std::vector<Node*>& values, std::vector<OutputSpec> specs);
  /// Erases placeholder `node` (which must have no users) and its input spec. The constant it
  /// named is dropped too unless another input still names it.
  Status erase_input(Node* node);
  /// erase_input for many placeholders at once, in time linear in the signature (dead-code
  /// elimination of 100k constants); nothing is erased if one of them cannot be.
  Status erase_inputs(std::span<Node* const> nodes);
  /// Removes output `index` from the output node and the signature.
  Status erase_output(size_t index);

  /// Input spec of placeholder `node`, or null.
  const InputSpec* input_spec(const Node* node) const;
  /// Placeholders of user inputs, in order.
  std::vector<Node*> user_inputs() const;
  /// Values returned as user outputs, in order.
  std::vector<Node*> user_outputs() const;
  /// Signature names of the user inputs / user outputs, in order.
  std::vector<std::string> user_input_names() const;
  std::vector<std::string> user_output_names() const;
  /// Buffer names that some output mutates.
  std::vector<std::string> mutated_buffers() const;

  /// graph().lint() plus signature checks: one input spec per placeholder in order, one output
  /// spec per returned value, every constant target present with the placeholder's spec,
  /// mutation targets valid, get_attr targets present, user input and user output names
  /// non-empty and unique; each subgraph's own lint, and each cond's and loop's operands and
  /// results matching its subgraphs' signatures.
  Status lint() const;

  /// Deep copy: a new graph with the same nodes (by name), same signature, subgraphs copied
  /// deeply too; constants share bytes.
  ExportedProgram clone() const;

 private:
  Status lint_cond(const Node& n) const;
  Status lint_loop(const Node& n) const;

  std::unique_ptr<Graph> graph_;
  GraphSignature signature_;
  ConstantStore constants_;
  std::vector<LoweredModule> lowered_;
  std::vector<Subgraph> subgraphs_;
  // find_lowered_module's index: name -> position of the first lowered_indexed_ modules, extended
  // when modules are appended and rebuilt when an entry went stale (lowered_modules() hands out
  // the vector itself), so programs with 100k delegates find modules in O(1).
  mutable std::unordered_map<std::string, size_t> lowered_index_;
  mutable size_t lowered_indexed_ = 0;
  // input_spec's index, kept the same way: placeholder name -> position in signature_.inputs.
  mutable std::unordered_map<std::string, size_t> input_index_;
  mutable size_t inputs_indexed_ = 0;
};

}  // namespace kiln
