// NumPy .npy / .npz reading and writing (little-endian, C order).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"

namespace kiln::npy {

/// A named array of an .npz archive (the name without the ".npy" suffix).
using NamedTensor = std::pair<std::string, Tensor>;

/// Parses .npy bytes (format v1, v2 or v3). `source` names the file in errors. The result owns
/// its bytes (nothing points into `bytes`).
Result<Tensor> parse_npy(std::span<const uint8_t> bytes, std::string_view source = "<npy>");
/// Reads and parses an .npy file.
Result<Tensor> read_npy(const std::string& path);
/// Serializes `t` as .npy (v1 header, or v2 when the header does not fit). bf16 is refused
/// (NumPy has no such dtype).
Result<std::string> serialize_npy(const Tensor& t);
/// Writes `t` to `path` as .npy (temporary file + rename).
Status write_npy(const std::string& path, const Tensor& t);
/// The file name an output called `value_name` is written to: "<name>.npy" with characters
/// outside [A-Za-z0-9_.-] as '_' (and a leading '_' for an empty or dot-first name).
std::string npy_file_name(std::string_view value_name);

/// Parses an .npz archive (stored or deflated members). Every offset and size is checked
/// against the archive size before use. Members are returned in archive order.
Result<std::vector<NamedTensor>> parse_npz(std::span<const uint8_t> bytes,
                                           std::string_view source = "<npz>");
/// Reads and parses an .npz file.
Result<std::vector<NamedTensor>> read_npz(const std::string& path);
/// Serializes `entries` as an uncompressed .npz archive.
Result<std::string> serialize_npz(const std::vector<NamedTensor>& entries);
/// Writes `entries` to `path` as .npz (temporary file + rename).
Status write_npz(const std::string& path, const std::vector<NamedTensor>& entries);

}  // namespace kiln::npy
