// Fuzzes the HTP context binary reader and the executor's load: any bytes must parse to a context
// or give an error, and every graph of a parsed context must load (plan, materialize statics,
// prepare its ops) or give an error, never crash or read outside the bytes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/backends/htp/htp_runtime.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::htp;
  std::vector<uint8_t> bytes(data, data + size);  // exact size: ASan sees reads past the end
  auto context = parse_context(bytes);
  if (!context.ok()) return 0;
  (void)format_context(*context, true);
  auto shared = std::make_shared<const Context>(std::move(context).value());
  Options options;
  options.soc_info = shared->soc;
  options.backend_options.backend_type = BackendType::kHtp;
  options.backend_options.htp_options.precision = shared->precision;
  for (const QnnGraph& g : shared->graphs) (void)HtpExecutor::create(shared, g.name, options, 1);
  return 0;
}
