// Fuzz target: a program file (.kpte) must load, verify and run, or give an error; never a crash,
// a hang or a read outside the bytes. Demo delegates are registered, so their blobs (nested
// program files) are fuzzed through the same loader.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "kiln/backends/demo/demo_runtime.h"
#include "kiln/core/memory.h"
#include "kiln/runtime/program.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::set_memory_limit(size_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  // A 64-byte aligned exact-size copy: the loader views it in place, and ASan sees any read past
  // its end.
  auto storage = HeapStorage::try_allocate(size);
  if (storage == nullptr) return 0;
  if (size > 0) std::memcpy(storage->mutable_data(), data, size);
  auto program = runtime::Program::load_buffer(std::span<const uint8_t>(storage->mutable_data(), size), storage);
  if (!program.ok()) return 0;
  (void)(*program)->verify_checksums();
  runtime::BackendRegistry backends;
  if (!backends.add(demo::make_demo_runtime_backend()).ok()) std::abort();
  for (const std::string& name : (*program)->method_names()) {
    if (!(*program)->method_info(name).ok()) std::abort();  // every method passed the load checks
    auto method = (*program)->load_method(name, backends);
    if (!method.ok()) continue;
    // Zero inputs at the smallest planned sizes; large ones are skipped (a run is not the point).
    std::vector<Tensor> inputs;
    bool small = true;
    for (const runtime::TensorMeta& meta : (*method)->input_meta()) {
      std::vector<int64_t> shape = meta.smallest_shape();
      int64_t numel = 1;
      for (int64_t n : shape) {
        numel = n > 0 && numel > (int64_t{1} << 20) / n ? (int64_t{1} << 21) : numel * n;
      }
      if (numel > (int64_t{1} << 20)) small = false;
      if (!small) break;
      inputs.emplace_back(meta.dtype, shape);
    }
    if (small) (void)(*method)->execute(inputs);
  }
  return 0;
}
