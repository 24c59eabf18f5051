// Fuzz target: the .kir parser must reject malformed text with an error, never crash; text it
// accepts must print and re-parse to the same text.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kiln/core/memory.h"
#include "kiln/ir/kir.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::set_memory_limit(size_t{512} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto program = kiln::parse_kir(text, "fuzz");
  if (!program.ok()) return 0;
  if (!program->lint().ok()) return 0;
  std::string printed = kiln::print_kir(*program);
  auto again = kiln::parse_kir(printed, "fuzz-reprint");
  if (!again.ok() || kiln::print_kir(*again) != printed) std::abort();
  return 0;
}
