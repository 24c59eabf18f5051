// Fuzzes the HTP backend's compile spec reader (the "qnn_compile_spec" options flatbuffer): any
// bytes must decode to options or give an error, never crash or read outside them. Decoded
// options must survive a write and a read unchanged.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "kiln/backends/htp/options.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::htp;
  // An exact-size heap copy: ASan sees any read past its end.
  std::vector<uint8_t> bytes(data, data + size);
  auto options = decode_options_flatbuffer(bytes);
  if (!options.ok()) {
    if (flatbuffer_to_option(bytes).ok()) std::abort();  // validation never rescues a bad blob
    return 0;
  }
  (void)format_options(*options);
  const bool valid = validate_options(*options).ok();
  if (flatbuffer_to_option(bytes).ok() != valid) std::abort();
  // Also unaligned: the reader must not depend on the caller's alignment.
  std::vector<uint8_t> shifted(size + 1);
  std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
  auto unaligned = decode_options_flatbuffer(std::span<const uint8_t>(shifted).subspan(1));
  if (!unaligned.ok() || !(*unaligned == *options)) std::abort();
  std::vector<uint8_t> again = option_to_flatbuffer(*options);
  auto back = decode_options_flatbuffer(again);
  if (!back.ok() || !(*back == *options)) std::abort();
  return 0;
}
