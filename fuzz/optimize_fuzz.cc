// Fuzz target: the graph passes kiln compile runs (kiln/passes/optimize.h, constant folding on
// the portable kernels, then activation fusion) take any program the .kir parser accepts and
// leave one that lints, or return an error; never a crash.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/core/memory.h"
#include "kiln/ir/kir.h"
#include "kiln/passes/optimize.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::set_memory_limit(size_t{512} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto program = kiln::parse_kir(text, "fuzz");
  if (!program.ok() || !program->lint().ok()) return 0;
  kiln::OptimizeOptions options;
  options.evaluate = kiln::portable::evaluate_node;
  options.lint = false;  // checked below, once
  if (!kiln::optimize(*program, options).ok()) return 0;
  if (!kiln::fuse_activations(*program).ok()) return 0;
  if (!program->lint().ok()) std::abort();
  return 0;
}
