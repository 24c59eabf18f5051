// Fuzz target: the TensorProto reader (`kiln run --input x=input_0.pb`, ONNX's test data) must
// turn any bytes into a tensor or an error, never a crash. No base folder: external data refused.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "kiln/core/memory.h"
#include "kiln/onnx/import.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::set_memory_limit(size_t{512} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = kiln::parse_onnx_tensor(std::span<const uint8_t>(data, size), "", "fuzz.pb");
  if (!t.ok()) return 0;
  // A tensor read has as many elements as its shape says, each dim non-negative.
  int64_t n = 1;
  for (int64_t d : t->shape()) {
    if (d < 0) std::abort();
    n *= d;
  }
  if (n != t->numel()) std::abort();
  return 0;
}
