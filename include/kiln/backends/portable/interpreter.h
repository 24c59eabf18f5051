// The reference interpreter: runs an ExportedProgram node by node with the portable kernels.
//
// It is what the program file and the delegates are compared against. Activation buffers come
// from a pool: each value is released after its last use and its buffer reused by later
// allocations (best fit by size), so peak memory stays well under the sum of all activations.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/backends/portable/kernels.h"
#include "kiln/ir/exported_program.h"

namespace kiln::portable {

struct InterpreterOptions {
  int num_threads = 1;             ///< threads for the parallel kernels and GEMMs (split over them)
  bool reuse_buffers = true;       ///< false: every activation gets a fresh buffer
  bool update_buffers = false;     ///< write buffer mutations back into the constant store
};

/// Runs a `call_delegate` node: the lowered module's name and the node's tensor inputs in, the
/// delegate's outputs (one per getitem index) out.
using DelegateHook = std::function<Result<std::vector<Tensor>>(std::string_view module_name,
                                                               std::span<const Tensor> inputs)>;

/// Sees a value as soon as it is computed: each user input at the start of a run, then each
/// call_function node with a single tensor value (kernels and getitem) right after its step.
/// The tensor is valid during the call only (its buffer is reused later; copy or keep a reference
/// to hold it). An error stops the run and is returned by run().
using ValueHook = std::function<Status(const Node& node, const Tensor& value)>;

/// Activation memory of the last run.
struct MemoryStats {
  size_t peak_bytes = 0;      ///< bytes of pooled buffers (what the run needed at once)
  size_t no_reuse_bytes = 0;  ///< sum of all activation allocations (no reuse)
  size_t allocations = 0;     ///< allocations requested
  size_t reused = 0;          ///< allocations served by a released buffer
};

/// What a run returns.
struct RunResult {
  std::vector<Tensor> outputs;                              ///< user outputs, in order
  std::vector<std::pair<std::string, Tensor>> mutations;    ///< buffer name -> new value
};

/// The kernel arguments of call node `n`, its tensor inputs given by `value_of` (which must
/// return a tensor for every node `n` reads, alive while the arguments are used).
KernelArgs kernel_args(const Node& n, const std::function<const Tensor*(const Node*)>& value_of);

/// Runs call node `n` once on one thread with the portable kernel of its op: its outputs, or an
/// error naming the node (no kernel, a missing input, the kernel's own error). Constant folding
/// evaluates nodes this way.
[[nodiscard]] Result<std::vector<Tensor>> evaluate_node(const Node& n,
                                                        const std::function<const Tensor*(const Node*)>& value_of);

class Interpreter {
 public:
  /// Prepares `program` (which must outlive the interpreter and not change while it lives).
  /// Fails listing every node without a kernel.
  [[nodiscard]] static Result<std::unique_ptr<Interpreter>> create(ExportedProgram& program,
                                                                   InterpreterOptions options = {});
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  /// Sets the hook that runs call_delegate nodes.
  void set_delegate_hook(DelegateHook hook);
  /// Sets the hook that sees every value as it is computed (observers, per-layer comparisons);
  /// an empty function removes it.
  void set_value_hook(ValueHook hook);
  /// Runs with user inputs in signature order. Inputs are checked (count, dtype, shape, and
  /// symbolic dims bound consistently across inputs).
  [[nodiscard]] Result<RunResult> run(std::span<const Tensor> inputs);
  /// Runs with user inputs by signature name; every user input must be given.
  [[nodiscard]] Result<RunResult> run_named(const std::map<std::string, Tensor>& inputs);

  /// Signature names (the model's own) and specs of the user inputs, in order.
  const std::vector<std::string>& input_names() const;
  const std::vector<TensorSpec>& input_specs() const;
  /// Signature names of the user outputs, in order (the model's own, e.g. ONNX output names).
  const std::vector<std::string>& output_names() const;
  /// Memory use of the last run.
  const MemoryStats& memory_stats() const;

 private:
  struct Impl;
  explicit Interpreter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::portable
