// Writes lowered programs as one .kpte file (schema/program.fbs, kiln/runtime/program_format.h):
// memory planned, constants and delegate blobs in aligned segments, identical bytes stored once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"
#include "kiln/passes/memory_plan.h"

namespace kiln {

/// The range a symbolic dim is planned for (`--dim batch=1..8`).
struct DimRange {
  int64_t min = 0;
  int64_t max = 0;
};

/// Parses "batch=1..8,seq=1..128" (one range per symbol; "batch=4" is 4..4). Errors name the
/// item that is wrong.
Result<std::map<std::string, DimRange, std::less<>>> parse_dim_ranges(std::string_view text);

struct SerializeOptions {
  /// Every segment starts at a multiple of this (a power of two, at least 8).
  size_t segment_alignment = 4096;
  /// Constants inside the constant segment start at a multiple of this (a power of two).
  size_t constant_alignment = 64;
  /// Arena offsets are multiples of this (a power of two).
  size_t arena_alignment = 64;
  /// Symbolic dims: the range each is planned for; every symbol needs one, unless
  /// unbounded_dims_dynamic.
  std::map<std::string, DimRange, std::less<>> dims;
  /// Symbols without a range: their values are allocated when computed (not planned) instead of
  /// an error, and inputs take any size there.
  bool unbounded_dims_dynamic = false;
  /// Constants are not stored in the file but named: each becomes an external constant whose key
  /// is its name, listed in ProgramImage::external for whoever stores the bytes (a delegate blob's
  /// weights, stored once by the program file that holds the blob; see NamedDataMap).
  bool external_constants = false;
};

/// One method of the file: its name and the (lowered) program it runs.
struct MethodToSerialize {
  std::string name;
  const ExportedProgram* program = nullptr;
};

/// A serialized file, as pieces to write in order: owned metadata and views of constant and
/// blob bytes (kept alive by `keep`), so writing a large model copies no weights.
struct ProgramImage {
  std::vector<std::string_view> chunks;
  std::vector<std::shared_ptr<const void>> keep;
  std::vector<std::unique_ptr<std::string>> owned;
  size_t size = 0;
  /// With SerializeOptions::external_constants: the constants by key, for the caller to store.
  std::vector<std::pair<std::string, Tensor>> external;
  /// The pieces joined (tests, in-memory loading).
  std::vector<uint8_t> bytes() const;
};

/// Serializes `methods` (names unique and non-empty) into one program. Each method's program
/// must pass lint; every call_function needs a portable kernel or is a delegate call. Errors name
/// the method and the node.
Result<ProgramImage> serialize_program(std::span<const MethodToSerialize> methods,
                                       const SerializeOptions& options = {});

/// Writes `image` to `path` atomically (a temporary file, then rename).
Status write_program(const std::string& path, const ProgramImage& image);

}  // namespace kiln
