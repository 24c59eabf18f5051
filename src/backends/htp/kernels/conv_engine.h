// The prepared integer engine behind QuantConv2d and QuantFullyConnected (internal).
#pragma once

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "internal.h"

namespace kiln::htp {

namespace detail {
/// The process's oneDNN CPU engine.
const dnnl::engine& cpu_engine();
}  // namespace detail

/// oneDNN state of a prepared conv / inner product: one primitive, one packed weights memory per
/// signed digit of the weights.
struct DnnlState {
  dnnl::engine engine;
  dnnl::stream stream;
  dnnl::primitive prim;
  dnnl::memory::desc src_md, dst_md;
  std::vector<dnnl::memory> weights;  // per digit, in the primitive's format
  int64_t base = 256;                 // digit base
  // Banded (one plane, one digit, batch 1): `prim` computes `band` output rows from
  // the input rows they need and the output stage requantizes them while their int32 sums are
  // still in L2; `tail_prim` the last oh % band rows (none when 0).
  int64_t band = 0;
  dnnl::primitive tail_prim;
  dnnl::memory::desc tail_src_md, tail_dst_md;
  dnnl::memory::desc scratchpad_md, tail_scratchpad_md;  // banded: user scratchpads, one per thread
  dnnl::memory tail_weights;
};

struct ConvEngine {
  const char* op = "conv2d";
  bool fc = false;
  Conv2dParams p;  // fully connected: batch 1, in_h 1, in_w M, in_c K, out_c N, 1x1
  int64_t oh = 0, ow = 0, cig = 0, cog = 0;
  ConvAlgorithm algo = ConvAlgorithm::kAuto;
  bool depthwise = false;
  DType in_dtype = DType::kU8;
  int64_t in_shift = 0;       // added to input codes to make them unsigned
  int64_t zx = 0;             // input zero point
  int64_t maxabs_x = 0;       // max |x - zx|
  int planes = 1;             // 8-bit planes of the (unsigned) input
  std::vector<int32_t> w;     // weights minus their zero points, HWIO [KH, KW, cig, Cout]
  std::vector<int64_t> bias;  // Cout
  detail::OutputStage stage;
  std::unique_ptr<DnnlState> dnnl;
  bool depthwise_i32 = false;  // direct depthwise: int32 accumulators suffice
  // scratch sizes (the buffers are the running thread's: see thread_scratch in conv.cc)
  int64_t hp = 0, wp = 0;
  size_t padded_size = 0;  // 0: oneDNN reads the input in place
  size_t raw_size = 0;

  Status prepare(const Encoding& input, std::span<const std::byte> weights, const Encoding& weight,
                 std::span<const int32_t> bias_values, const Encoding& output,
                 ConvAlgorithm requested);
  Status run(const void* in, void* out);

 private:
  Status prepare_onednn();
  Status run_onednn(const void* in, void* out);
  Status run_bands(const uint8_t* src, void* out);
  void run_direct(const void* in, void* out) const;
  void run_depthwise(const void* in, void* out) const;
};

}  // namespace kiln::htp
