#include "kiln/core/status.h"

#include <cstdio>
#include <cstdlib>

namespace kiln {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kParseError: return "parse error";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kInvalidProgram: return "invalid program";
    case StatusCode::kDelegateFailed: return "delegate failed";
  }
  return "unknown";
}

namespace detail {
void check_failed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "kiln: internal check failed: %s at %s:%d\n", cond, file, line);
  std::abort();
}
}  // namespace detail

}  // namespace kiln
