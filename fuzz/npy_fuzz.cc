// Fuzzes the .npy and .npz readers: any bytes must give a tensor or an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "kiln/core/memory.h"
#include "kiln/core/npy.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::set_memory_limit(size_t{512} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto t = kiln::npy::parse_npy(bytes, "fuzz.npy");
  if (t.ok()) {
    // A parsed tensor must serialize and parse back to the same bytes.
    auto again = kiln::npy::serialize_npy(*t);
    if (again.ok()) {
      auto back = kiln::npy::parse_npy(
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(again->data()), again->size()));
      if (!back.ok() || back->nbytes() != t->nbytes()) std::abort();
    }
  }
  auto z = kiln::npy::parse_npz(bytes, "fuzz.npz");
  (void)z;
  return 0;
}
