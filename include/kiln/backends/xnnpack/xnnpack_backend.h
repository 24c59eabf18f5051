// The xnnpack backend's compile half: which nodes Debian's XNNPACK (2022-02) runs, and preprocess,
// which turns a partition into the delegate blob the runtime half (xnnpack_runtime.h) executes.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/xnnpack/xnnpack_runtime.h"
#include "kiln/ir/exported_program.h"
#include "kiln/lower/backend.h"
#include "kiln/partition/operator_support.h"

namespace kiln::xnnpack {

/// Takes exactly what this XNNPACK runs: fp32 convolutions (2-D, grouped, depthwise,
/// transposed) and fully-connected layers with constant weights, pooling, batch norm,
/// elementwise arithmetic and activations, softmax over channels, and reshapes that keep the
/// delegate's NHWC layout; static shapes only. In QDQ graphs, the quantize and dequantize nodes
/// too: weights are dequantized when compiling, and convolutions, Gemms, max pooling, residual
/// adds, global pooling and flattens between a dequantize and a quantize run on int8 codes
/// (qs8 activations, per-channel qc8 weights, relu/clamp fused). Everything else gets a reason
/// (WhyNoPartition).
OperatorSupportPtr xnnpack_operator_support();

/// The partitions worth delegating (CapabilityOptions::keep_partition): those with at least one
/// node that computes more than it moves (a convolution, fully-connected layer, matmul, pooling,
/// mean or softmax). A partition of elementwise ops and reshapes alone is refused with the
/// reason: copying its data in and out of the delegate (and reordering rank-4 data to NHWC and
/// back) costs more than running it in the portable kernels.
std::string xnnpack_partition_worth(const ExportedProgram& program, std::span<Node* const> nodes);

/// Compile side. preprocess writes the submodule as an XNNPACK graph: rank-4 activations NHWC
/// inside, weights in XNNPACK's layouts in the blob (packed once at init), the delegate's
/// rank-4 inputs and outputs transposed at its boundary. An unsupported node is an error naming it.
class XnnpackBackend final : public BackendDetails {
 public:
  std::string_view id() const override { return kBackendId; }
  Result<PreprocessResult> preprocess(const ExportedProgram& submodule,
                                      const std::vector<CompileSpec>& compile_specs) const override;
};

/// Adds the xnnpack backend to `registry` (fails if "xnnpack" is already there).
Status register_xnnpack_backend(BackendRegistry& registry);

}  // namespace kiln::xnnpack
