// Fuzzes the xnnpack delegate's blob loader: any bytes must load (the flatbuffer verified, every
// value, node and shape checked, the XNNPACK runtime created) or give an error, never crash or
// read outside the bytes; a blob that loads must run on zero inputs of its declared shapes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/backends/xnnpack/xnnpack_runtime.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

namespace {

class ZeroContext final : public kiln::portable::KernelContext {
 public:
  kiln::Tensor allocate(kiln::DType dtype, std::vector<int64_t> shape) override { return kiln::Tensor(dtype, std::move(shape)); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);  // exact size: ASan sees reads past the end
  auto d = kiln::xnnpack::XnnpackDelegate::init(bytes, nullptr, 1);
  if (!d.ok()) return 0;
  std::vector<kiln::Tensor> inputs;
  for (size_t i = 0; i < d->num_inputs(); ++i) inputs.emplace_back(kiln::Tensor(kiln::DType::kF32, d->input_shape(i)));
  ZeroContext ctx;
  std::vector<kiln::Tensor> outputs;
  (void)d->execute(inputs, ctx, &outputs);
  return 0;
}
