// Whole-file reads and atomic writes.
#pragma once

#include <string>
#include <string_view>

#include "kiln/core/status.h"

namespace kiln {

/// Writes `bytes` to `path` through a temporary file renamed into place, so a failed write never
/// leaves a half-written file at `path`.
Status write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace kiln
