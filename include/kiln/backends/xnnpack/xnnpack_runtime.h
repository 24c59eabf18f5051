// The xnnpack backend's runtime half: a delegate blob (schema/xnnpack_graph.fbs) becomes an
// XNNPACK subgraph and runtime, created once per delegate (weights packed then) and reused by
// every execute. IR-free: the runtime links it without the compiler.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/runtime/backend.h"

namespace kiln::xnnpack {

/// The backend id partitioners and program files name.
inline constexpr std::string_view kBackendId = "xnnpack";
/// The blob format version this build writes and reads.
inline constexpr uint32_t kBlobVersion = 1;

/// Whether XNNPACK initializes on this CPU (it needs SSE2 on x86); the reason is in the status.
Status xnnpack_available();

/// A loaded delegate: the XNNPACK runtime, its thread pool and boundary buffers. Movable.
class XnnpackDelegate {
 public:
  /// Checks the whole blob before anything is built: the flatbuffer, every value's dtype, dims
  /// (sizes checked before allocation) and static data range, every node's operands, parameters
  /// and output shape (inferred and compared with the declared one), that each value is written
  /// once before it is read. Errors say "xnnpack delegate: ..." and name the node or value.
  /// The blob's static data must outlive the delegate: `owner` keeps it (it is copied when not
  /// 4-byte aligned). `num_threads` sizes the pthreadpool (1: no pool).
  static Result<XnnpackDelegate> init(std::span<const uint8_t> blob, std::shared_ptr<const void> owner,
                                      int num_threads = 1);
  XnnpackDelegate(XnnpackDelegate&&) noexcept;
  XnnpackDelegate& operator=(XnnpackDelegate&&) noexcept;
  ~XnnpackDelegate();

  size_t num_inputs() const;
  size_t num_outputs() const;
  /// The shape input `i` (< num_inputs()) must have, as the caller gives it (NCHW for rank 4).
  std::vector<int64_t> input_shape(size_t i) const;
  /// Runs the subgraph: `inputs` in the call's order (dtype and shape checked), outputs allocated
  /// from `ctx` (the method's planned memory) and appended to `outputs`.
  Status execute(std::span<const Tensor> inputs, portable::KernelContext& ctx, std::vector<Tensor>* outputs);

  /// The loaded graph (defined in the runtime's source).
  struct State;

 private:
  explicit XnnpackDelegate(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// The runtime half for program files: each delegate is an XnnpackDelegate over its blob, with
/// the method's thread count.
std::unique_ptr<runtime::BackendInterface> make_xnnpack_runtime_backend();

}  // namespace kiln::xnnpack
