// Fuzzes from_context_binary: any bytes give a lowered program or an error, never a crash. A
// binary that parses is also read with custom_info naming its own I/O (the path that does not
// parse the binary until preprocess checks it).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/backends/htp/programs.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::htp;
  std::vector<uint8_t> bytes(data, data + size);  // exact size: ASan sees reads past the end
  auto context = parse_context(bytes);
  QcomChipset soc = context.ok() ? context->soc.soc_model : QcomChipset::SM8650;
  auto program = from_context_binary(bytes, "loader", soc);
  if (program.ok()) {
    CustomInfo info{program->inputs, program->outputs, program->graph_name};
    (void)from_context_binary(bytes, "loader", soc, &info);
  }
  return 0;
}
