// Internal to the HTP runtime: the prepared form of one QNN op and what it runs against.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/backends/htp/context.h"
#include "kiln/backends/htp/kernels.h"
#include "kiln/backends/portable/kernels.h"
#include "kiln/core/tensor.h"

namespace kiln::htp {

/// The values of one graph by tensor id: natives view the working memory, statics the context's
/// data, inputs the caller's tensors, outputs fresh buffers. Ops read and write through it.
struct Frame {
  const QnnGraph* graph = nullptr;
  std::vector<Tensor> values;
  portable::KernelContext* kernels = nullptr;  ///< threads and heap temporaries of float kernels
  int threads = 1;

  const Tensor& in(uint32_t id) const { return values[id]; }
  void* out(uint32_t id) { return portable::writable<uint8_t>(values[id]); }
  const QnnTensor& tensor(uint32_t id) const { return graph->tensors[id]; }
};

/// One prepared op.
class PreparedOp {
 public:
  virtual ~PreparedOp() = default;
  virtual Status run(Frame& f) = 0;
};

/// The kernel encoding of a fixed-point tensor (codes over its bitwidth's range).
Encoding kernel_encoding(const QnnTensor& t);
/// The tensor's dims as int64.
std::vector<int64_t> shape_of(const QnnTensor& t);

/// Prepares `op` of `graph` for execution. `fp16` graphs round every float output to half;
/// quantized convolutions use `conv` (use_conv_hmx off: kDirect, the vector-unit loops instead
/// of the oneDNN matrix kernels; the outputs are the same). Errors name the op.
Result<std::unique_ptr<PreparedOp>> prepare_op(const QnnGraph& graph, const QnnOp& op,
                                               const std::vector<Tensor>& statics, bool fp16,
                                               int threads, ConvAlgorithm conv = ConvAlgorithm::kAuto);

}  // namespace kiln::htp
