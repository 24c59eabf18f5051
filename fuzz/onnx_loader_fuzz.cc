// Fuzz target: the ONNX importer must turn any bytes into a program that lints, or an error;
// never a crash. No base folder is given, so external data is always refused.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "kiln/core/memory.h"
#include "kiln/onnx/import.h"

// Sizes a model declares are checked against the data present, and computed ones against the
// memory limit: with a limit under libFuzzer's, any allocation it flags is a bug.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::set_memory_limit(size_t{512} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::OnnxImportOptions options;
  options.fold_limit = 1 << 16;  // keep each input cheap
  auto program = kiln::import_onnx_bytes(std::span<const uint8_t>(data, size), "", options);
  if (!program.ok()) return 0;
  if (!program->lint().ok()) std::abort();
  return 0;
}
