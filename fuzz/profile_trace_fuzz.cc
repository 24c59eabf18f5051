// Fuzzes the reader of HTP profiles (Chrome trace JSON, kiln partition --html --profile): any
// bytes give profiles or an error naming the event, never a crash; what it reads writes back.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kiln/backends/htp/htp_runtime.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::htp;
  auto profiles = profile_from_chrome_trace(std::string_view(reinterpret_cast<const char*>(data), size));
  if (profiles.ok()) (void)profile_to_chrome_trace(*profiles);
  return 0;
}
