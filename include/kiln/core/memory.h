// kiln's memory limit: the most bytes one tensor, or one run's activations, may take. Sizes that
// come from files are checked against it before anything is allocated, so a hostile or careless
// model gets a "resource exhausted" error naming the tensor instead of an abort or the OOM killer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/core/status.h"

namespace kiln {

/// The current limit in bytes. Unless set, it is the KILN_MAX_MEMORY environment variable (a
/// size as parse_byte_size reads it) or else the memory available when first asked
/// (MemAvailable in /proc/meminfo; the machine's physical memory where that is unknown).
size_t memory_limit();
/// Sets the limit for the whole process (0 restores the default). Thread-safe.
void set_memory_limit(size_t bytes);
/// Where the limit came from, for messages: "--max-memory", "KILN_MAX_MEMORY", "the memory
/// available".
std::string memory_limit_source();
/// Names where a limit set by set_memory_limit came from (a tool flag); default "the set limit".
void set_memory_limit_source(std::string source);

/// Ok if `bytes` fit the limit; else resource exhausted: "<what> needs 16.0 GiB, more than
/// kiln's memory limit of 7.9 GiB (the memory available)".
Status check_memory(size_t bytes, std::string_view what);

/// "512 B", "135.3 KiB", "16.0 GiB".
std::string format_bytes(uint64_t bytes);
/// Reads "4096", "512K", "1.5GiB", "2g", "64MB" (binary units, case-insensitive, optional "iB"
/// or "B"); an error names the text when it is not a size.
Result<uint64_t> parse_byte_size(std::string_view text);

}  // namespace kiln
