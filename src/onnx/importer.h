// The ONNX importer's state and the helpers op converters use. Internal to src/onnx.
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/exported_program.h"
#include "kiln/onnx/import.h"

namespace kiln::onnx_import {

/// An integer tensor of rank 0 or 1 whose entries are dims, some symbolic: the result of Shape
/// on a tensor with a dynamic dim and of the shape arithmetic that follows it.
struct DimsValue {
  std::vector<Dim> dims;
  bool scalar = false;
  DType dtype = DType::kI64;
};

/// What an ONNX value name stands for while importing: a graph node, a constant known at import
/// time (initializer or folded), symbolic shape arithmetic, or a sequence of such values whose
/// length and order are known at import time (ONNX's sequence ops). Constants become
/// placeholders only when an op needs them as a tensor.
struct Value {
  std::string onnx_name;
  Node* node = nullptr;
  std::optional<Tensor> constant;
  std::optional<DimsValue> dims;
  std::shared_ptr<const std::vector<Value>> sequence;
};

/// How an op reads an input: weights (float, rank >= 1) become parameters, the rest constants.
enum class Role { kActivation, kWeight };

class Importer;
/// Converts the current node; errors get the node's name and op type prefixed by the caller.
using ConvertFn = Status (*)(Importer& im);

/// One row of a converter table.
struct OpEntry {
  std::string_view op_type;
  ConvertFn fn;
};

/// Converter tables, one per file (explicit lists, no static registration).
std::span<const OpEntry> elementwise_ops();  // ops_elementwise.cc
std::span<const OpEntry> nn_ops();           // ops_nn.cc
std::span<const OpEntry> tensor_ops();       // ops_tensor.cc
std::span<const OpEntry> shape_ops();        // ops_shape.cc
std::span<const OpEntry> quant_ops();        // ops_quant.cc
std::span<const OpEntry> sequence_ops();     // ops_sequence.cc
std::span<const OpEntry> training_ops();     // ops_training.cc (ai.onnx.preview.training)
std::span<const OpEntry> control_ops();      // ops_control.cc (If, Loop, Scan)
std::span<const OpEntry> signal_ops();       // ops_signal.cc (windows, DFT)

/// Imports one ModelProto. Not reusable: one Importer per model.
class Importer {
 public:
  Importer(const OnnxImportOptions& options, std::string base_dir);

  /// Imports `model`, taking its initializers' bytes (they are cleared as they are converted).
  [[nodiscard]] Result<ExportedProgram> run(onnx::ModelProto& model);

  // ---- The node being converted.
  const onnx::NodeProto& node() const { return *node_; }
  int64_t opset() const { return opset_; }
  const OnnxImportOptions& options() const { return options_; }
  ExportedProgram& program() { return program_; }
  Graph& graph() { return program_.graph(); }

  /// True if input `i` is given (present and not the empty name).
  bool has_input(size_t i) const;
  size_t num_inputs() const { return static_cast<size_t>(node_->input_size()); }
  size_t num_outputs() const { return static_cast<size_t>(node_->output_size()); }
  /// Value of input `i`; null when absent.
  Value* input_value(size_t i);
  /// Constant value of input `i`; null when absent or not known at import time.
  const Tensor* const_input(size_t i);
  /// True if input `i` is computed when the model runs: neither a constant nor shape arithmetic.
  bool is_runtime_input(size_t i);
  /// Input `i` as a constant, or an error naming `what` ("input 'pads'").
  [[nodiscard]] Result<Tensor> require_const(size_t i, std::string_view what);
  /// Input `i` as constant integers (rank <= 1).
  [[nodiscard]] Result<std::vector<int64_t>> require_ints(size_t i, std::string_view what);
  /// Input `i` as dims (constant integers or symbolic shape arithmetic), for shape operands.
  [[nodiscard]] Result<DimsValue> require_dims(size_t i, std::string_view what);
  /// Input `i` as a graph node, creating the placeholder of a constant on first use.
  [[nodiscard]] Result<Node*> input(size_t i, Role role = Role::kActivation);
  /// Spec of input `i` (error if absent or unknown).
  [[nodiscard]] Result<TensorSpec> input_spec(size_t i);
  /// Static shape of input `i`, or an error saying which dim is symbolic.
  [[nodiscard]] Result<std::vector<int64_t>> static_input_shape(size_t i, std::string_view why);

  /// Binds output `i` of the current node.
  void set_output(size_t i, Node* n);
  void set_output_const(size_t i, Tensor t);
  void set_output_dims(size_t i, DimsValue d);
  /// Binds output `i` to what `v` stands for (a sequence element, or a sequence).
  void set_output_value(size_t i, const Value& v);
  /// The sequence input `i` holds, or an error naming it.
  [[nodiscard]] Result<std::shared_ptr<const std::vector<Value>>> sequence_input(size_t i);
  /// True if some node or graph output reads output `i`.
  bool output_used(size_t i) const;

  /// A node name made from `onnx_name`, not yet used by a node or constant.
  std::string unique_name(std::string_view onnx_name);
  /// The kiln node name of the current node (its ONNX name, sanitized).
  const std::string& node_label() const { return node_label_; }
  /// Adds a call node named after the current ONNX node, with meta.source set.
  [[nodiscard]] Result<Node*> call(OpId op, std::vector<Arg> args, const Kwargs& kwargs = {});
  /// A new lifted constant placeholder holding `t`.
  Node* constant_node(Tensor t, std::string_view hint, Role role = Role::kActivation);
  /// Placeholder for `v`, created on first use.
  [[nodiscard]] Result<Node*> materialize(Value& v, Role role);

  /// Converts the nodes of subgraph `g` (an If branch, which takes no inputs) in the current
  /// scope, as if they were the enclosing graph's: afterwards its outputs' values are found by
  /// name with `value_of`. The current node stays the same.
  [[nodiscard]] Status inline_subgraph(const onnx::GraphProto& g);
  /// Imports subgraph `g` (an If branch, a Loop body) as a program of its own. Its user inputs
  /// are `g`'s inputs, of specs `formals`, then `operands` (values of the enclosing scope
  /// computed at run time), in order; the enclosing scope's constants and shape arithmetic it
  /// reads are copied in, so they still fold there.
  [[nodiscard]] Result<std::shared_ptr<ExportedProgram>> import_subgraph(
      const onnx::GraphProto& g, const std::vector<TensorSpec>& formals,
      const std::vector<std::string>& operands);
  /// The value named `name` (an output of an inlined subgraph), or an error.
  [[nodiscard]] Result<const Value*> value_of(const std::string& name) const;

  // ---- Attributes of the current node (type-checked).
  const onnx::AttributeProto* attr(std::string_view name) const;
  bool has_attr(std::string_view name) const { return attr(name) != nullptr; }
  [[nodiscard]] Result<int64_t> attr_int(std::string_view name, int64_t dflt) const;
  [[nodiscard]] Result<float> attr_float(std::string_view name, float dflt) const;
  [[nodiscard]] Result<std::string> attr_str(std::string_view name, std::string_view dflt) const;
  /// Empty when absent.
  [[nodiscard]] Result<std::vector<int64_t>> attr_ints(std::string_view name) const;
  [[nodiscard]] Result<std::vector<float>> attr_floats(std::string_view name) const;
  [[nodiscard]] Result<Tensor> attr_tensor(std::string_view name) const;
  /// Graph attribute `name` (If's branches); an error when absent or not a graph.
  [[nodiscard]] Result<const onnx::GraphProto*> attr_graph(std::string_view name) const;
  /// Axes given as an attribute before opset `input_from` and as input `input_index` after.
  [[nodiscard]] Result<std::optional<std::vector<int64_t>>> axes_attr_or_input(
      std::string_view name, size_t input_index, int64_t input_from);

 private:
  Status check_model(const onnx::ModelProto& model);
  Status upgrade_opset(onnx::ModelProto& model);
  Status load_initializers(onnx::GraphProto& g);
  Status add_inputs(const onnx::GraphProto& g);
  Status check_supported(const onnx::GraphProto& g);
  Result<std::vector<int>> topo_order(const onnx::GraphProto& g);
  Status convert_node(const onnx::NodeProto& n);
  Result<bool> try_fold(const onnx::NodeProto& n);
  Status set_outputs(const onnx::GraphProto& g);
  Status convert_nodes(const onnx::GraphProto& g);
  Status convert_subgraph_nodes(const onnx::GraphProto& g);
  Result<TensorSpec> spec_from_type(const onnx::TypeProto& type, const std::string& what);
  Value& value_for_output(size_t i);

  const OnnxImportOptions& options_;
  std::string base_dir_;
  ExportedProgram program_;
  int64_t opset_ = 0;
  std::unordered_map<std::string, Value> values_;
  std::unordered_map<std::string_view, ConvertFn> table_;
  std::unordered_set<std::string> used_names_;
  std::unordered_set<std::string> consumed_;  // value names read by some node or graph output
  const onnx::NodeProto* node_ = nullptr;
  std::string node_label_;  // sanitized node name used for kiln nodes
  int unk_counter_ = 0;
};

/// The names subgraph `g` (and the subgraphs nested in it) reads from enclosing scopes, in the
/// order first read.
std::vector<std::string> outer_names(const onnx::GraphProto& g);

/// An identifier made from `name` (non-identifier characters become '_').
std::string sanitize_name(std::string_view name);

}  // namespace kiln::onnx_import
