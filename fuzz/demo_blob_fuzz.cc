// Fuzz target: a demo delegate blob (what a program file or a .kir's base64 hands the runtime)
// must load into a delegate that runs, or give an error; never a crash or a read past the blob.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "kiln/backends/demo/demo_backend.h"
#include "kiln/core/memory.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::set_memory_limit(size_t{512} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size copy, so ASan sees any read past the blob's end.
  std::vector<uint8_t> blob(data, data + size);
  auto d = kiln::demo::DemoDelegate::init(blob, {});
  if (!d.ok()) return 0;
  if (!d->program().lint().ok()) std::abort();
  return 0;
}
