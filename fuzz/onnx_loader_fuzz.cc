// Fuzz target: the ONNX importer must turn any bytes into a program that lints, or an error;
// never a crash. No base folder is given, so external data is always refused.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "kiln/onnx/import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::OnnxImportOptions options;
  options.fold_limit = 1 << 16;  // keep each input cheap
  auto program = kiln::import_onnx_bytes(std::span<const uint8_t>(data, size), "", options);
  if (!program.ok()) return 0;
  if (!program->lint().ok()) std::abort();
  return 0;
}
