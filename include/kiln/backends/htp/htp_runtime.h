// The HTP backend's runtime half: executes a graph of a context binary on the CPU with the HTP's
// numerics (integer arithmetic for fixed-point tensors, IEEE half rounding for fp16 graphs), and
// the BackendInterface that program files use. IR-free: kiln-runner links it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/htp/context.h"
#include "kiln/backends/htp/options.h"
#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/runtime/backend.h"

namespace kiln::htp {

/// One op's time in a profiled run.
struct OpTime {
  std::string name;          ///< the op's name (its kiln node)
  std::string type;          ///< QNN op type
  int64_t debug_handle = -1;
  int64_t start_ns = 0;      ///< from the start of the execute
  int64_t duration_ns = 0;
};

/// What a profiled execute recorded: the graph's time (basic), and per op (detailed, optrace).
struct GraphProfile {
  std::string graph;
  ProfileLevel level = ProfileLevel::kOff;
  int64_t total_ns = 0;
  int64_t io_copy_bytes = 0;  ///< I/O bytes copied between the caller's buffers and the graph's (0 with shared_buffer)
  std::vector<OpTime> ops;
};

/// Chrome trace JSON (chrome://tracing, Perfetto) of `profiles`, one track per graph.
std::string profile_to_chrome_trace(std::span<const GraphProfile> profiles);
/// The profiles of a Chrome trace profile_to_chrome_trace wrote (kiln run --profile): a graph
/// event per run, its ops' events after it. Errors name the event that is malformed.
Result<std::vector<GraphProfile>> profile_from_chrome_trace(std::string_view json);

/// Receives each op output of a run when intermediate dumps are on: the tensor's name and its
/// value dequantized to f32 (fixed-point tensors) or as is.
using DumpFn = std::function<void(const std::string& tensor, const Tensor& value)>;

/// A loaded graph, ready to execute (QNN's context + graph handles). Not thread-safe: one
/// execute at a time.
class HtpExecutor {
 public:
  /// Prepares graph `graph_name` of `context` (kept alive by the executor): plans an online-
  /// prepare graph, materializes static tensors, prepares every op (packs weights, computes
  /// requantization multipliers). `options` give the performance mode (threads: threads_for of
  /// `hardware_threads`), the profile level and the dump switch. Errors name the op.
  static Result<std::unique_ptr<HtpExecutor>> create(std::shared_ptr<const Context> context,
                                                     std::string_view graph_name, const Options& options,
                                                     int hardware_threads);
  ~HtpExecutor();

  /// Runs the graph: `inputs` one per graph input in order (f32 for float inputs, the storage
  /// dtype for fixed-point inputs); returns the outputs in order. With `outputs_ctx`, outputs are
  /// allocated there (the runtime's planned memory); otherwise on the heap.
  Result<std::vector<Tensor>> execute(std::span<const Tensor> inputs,
                                      portable::KernelContext* outputs_ctx = nullptr);

  const QnnGraph& graph() const;
  /// Bytes of working memory this executor owns: VTCM part and spill-fill, or only the VTCM
  /// part when it uses the process's shared spill-fill buffer.
  uint64_t working_memory_bytes() const;
  /// The profile of the last execute (level kOff when profiling is off).
  const GraphProfile& last_profile() const;
  /// Called for every op output of each execute when set (or when the options ask for dumps).
  void set_dump(DumpFn fn);
  int threads() const;

 private:
  struct Impl;
  explicit HtpExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The spill-fill buffer HTP contexts with use_multi_contexts share (the option's
/// max_sf_buf_size, written by update_spill_fill_size): one per process, as large as the largest
/// size asked for while it lives; its bytes now (0: none). Executors sharing it run one at a time.
uint64_t shared_spill_fill_bytes();

/// Where the delegates of the runtime backend send what their options ask to record.
struct RuntimeHooks {
  /// Each profiled execute's profile (profile level basic or higher).
  std::function<void(const GraphProfile&)> on_profile;
  /// Each op output when dump_intermediate_outputs is on; the tensor name is prefixed with the
  /// graph's name ("forward/conv1").
  DumpFn on_dump;
  /// Threads the performance mode divides (0: the method's thread option).
  int hardware_threads = 0;
};

/// The runtime backend for program files: each delegate is an HtpExecutor over the context in
/// the delegate's blob and the options of its qnn_compile_spec.
std::unique_ptr<runtime::BackendInterface> make_htp_runtime_backend(RuntimeHooks hooks = {});

}  // namespace kiln::htp
