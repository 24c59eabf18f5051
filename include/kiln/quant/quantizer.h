// Post-training quantization in three steps, as torch's pt2e flow and the Qualcomm quantizer:
//   annotate  - which tensors of which nodes are quantized, and how (per op class);
//   prepare   - one observer per quantized tensor (tensors that must share parameters share one);
//   calibrate - run the interpreter over calibration inputs; observers update;
//   convert   - a new program with quantize/dequantize pairs holding the computed parameters;
//               weights and biases become integer constants followed by a dequantize.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/ir/exported_program.h"
#include "kiln/quant/observer.h"
#include "kiln/quant/quant_spec.h"

namespace kiln::quant {

/// What an annotated input of a node is.
enum class InputRole : uint8_t {
  kActivation,  ///< quantized with the activation spec (observed, or from constant data)
  kWeight,      ///< a constant quantized symmetric at convert time
  kBias,        ///< a constant quantized to i32 with scale = input scale x weight scale
};

/// One quantized input of an annotated node.
struct InputAnnotation {
  Node* value = nullptr;  ///< the node read (owned by the program's graph)
  InputRole role = InputRole::kActivation;
  int64_t ch_axis = 0;    ///< weights: the output-channel axis
  /// Shares parameters with this node's own first activation input (cat).
  bool shares_first_input = false;
};

/// How a node output is quantized.
enum class OutputRule : uint8_t {
  kNone,         ///< not quantized here (a conv whose activation is fused after it)
  kOwn,          ///< its own observer
  kSharesInput,  ///< the parameters of its first input (reshape, max pool, cat, ...)
  kFixed,        ///< fixed by the op's range (sigmoid, softmax, tanh, hardsigmoid)
};

/// The quantization of one node (torch's QuantizationAnnotation).
struct NodeAnnotation {
  std::vector<InputAnnotation> inputs;
  OutputRule output = OutputRule::kNone;
  double fixed_min = 0, fixed_max = 1;  ///< kFixed: the real range of the output
  /// The layer this node's quantized output belongs to: itself, or for an activation fused into
  /// its producer (conv + relu), the producer. Layers are what reports and mixed precision name.
  Node* layer = nullptr;
  /// The op class rule that annotated it ("conv/linear", "binary", "fused activation", ...).
  const char* rule = "";
};

/// What to quantize and how.
struct QuantizeOptions {
  QuantConfig config;                       ///< applied to every layer unless overridden
  std::map<std::string, QuantConfig> layer_configs;  ///< layer node name -> configuration
  std::vector<std::string> skip_nodes;      ///< node names that stay float
  std::vector<std::string> skip_ops;        ///< op names ("softmax") whose nodes stay float
};

/// Annotations of a program, indexed by node id.
struct Annotations {
  std::vector<std::optional<NodeAnnotation>> by_id;
  std::vector<std::string> skipped_nodes;       ///< nodes excluded by name or op
  std::vector<std::string> skipped_parameters;  ///< weights read only by excluded nodes

  const NodeAnnotation* of(const Node* n) const {
    return n->id() < by_id.size() && by_id[n->id()] ? &*by_id[n->id()] : nullptr;
  }
};

/// Annotates every node of `program` by its op class. Unknown names in skip_nodes / skip_ops and
/// layer_configs are errors naming them.
Result<Annotations> annotate(const ExportedProgram& program, const QuantizeOptions& options);

/// One calibration sample: user inputs by signature name, and where they came from (a file name)
/// for messages.
struct Sample {
  std::string source;
  std::map<std::string, Tensor> inputs;
};

/// Called after each calibrated sample with (done, total).
using ProgressFn = std::function<void(size_t done, size_t total)>;

class PreparedModel;
Status calibrate(PreparedModel& prepared, std::span<const Sample> samples, int num_threads,
                 const ProgressFn& progress);

/// A program prepared for calibration: its annotations and one observer per quantized tensor.
/// Owns a clone of the float program; create with prepare().
class PreparedModel {
 public:
  /// One set of tensors that share quantization parameters (a tensor, or tensors tied by a
  /// shared rule) and the observer that watches them.
  struct Group {
    std::vector<Node*> members;  ///< values in the float program
    Observer observer;
    bool fixed = false;
    double fixed_min = 0, fixed_max = 1;
    std::vector<Node*> layers;  ///< layers whose inputs or outputs are in the group
  };

  const ExportedProgram& float_program() const { return *program_; }
  ExportedProgram& float_program() { return *program_; }
  const Annotations& annotations() const { return annotations_; }
  const QuantizeOptions& options() const { return options_; }
  /// Changes the configuration of one layer (mixed precision) without re-calibrating.
  Status set_layer_config(const std::string& layer, const QuantConfig& config);
  const QuantConfig& config_of(const Node* layer) const;

  const std::vector<Group>& groups() const { return groups_; }
  /// Group of value `n`, or -1 when it is not an observed activation.
  int group_of(const Node* n) const;
  /// Layers in graph order (nodes that own a quantized output or weight).
  const std::vector<Node*>& layers() const { return layers_; }
  /// The activation spec of group `g` under the current layer configurations (the most precise
  /// over the layers it touches).
  QuantSpec group_spec(size_t g) const;
  /// Samples calibrated so far.
  int64_t samples() const { return samples_; }

 private:
  friend Result<std::unique_ptr<PreparedModel>> prepare(const ExportedProgram&, const QuantizeOptions&);
  friend Status calibrate(PreparedModel&, std::span<const Sample>, int, const ProgressFn&);

  std::unique_ptr<ExportedProgram> program_;
  QuantizeOptions options_;
  Annotations annotations_;
  std::vector<Group> groups_;
  std::vector<int> group_of_;  // by node id
  std::vector<Node*> layers_;
  int64_t samples_ = 0;
};

/// Annotates a clone of `program` and places observers on every annotated tensor.
Result<std::unique_ptr<PreparedModel>> prepare(const ExportedProgram& program,
                                               const QuantizeOptions& options);

/// Runs the float program over `samples` with the interpreter; every observer sees its tensors.
/// Inputs are checked first (names, dtypes, shapes): errors name the sample and the input. An
/// empty sample list is an error.
Status calibrate(PreparedModel& prepared, std::span<const Sample> samples, int num_threads = 1,
                 const ProgressFn& progress = {});

/// The quantized program: a clone of the float program with quantize/dequantize pairs after every
/// observed tensor, and integer weights and biases followed by dequantize. Nodes keep their names;
/// the pair after value `v` is named `v_q`, `v_dq`. Fails if a quantized tensor was never observed.
Result<ExportedProgram> convert(const PreparedModel& prepared);

/// Validates calibration samples against the program's user inputs: every input present, no
/// unknown name, dtype and rank equal, static dims equal. Errors name the sample and the input.
Status check_samples(const ExportedProgram& program, std::span<const Sample> samples);

/// Reads calibration samples from `path`: one .npz file, or a folder of them (sorted by name);
/// each file is one sample keyed by input name.
Result<std::vector<Sample>> read_samples(const std::string& path);

}  // namespace kiln::quant
