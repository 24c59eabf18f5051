// Whole-file reads that say what is wrong with a path, and atomic writes that never follow a
// planted link.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kiln/core/status.h"

namespace kiln {

/// Checks that `path` names a regular file (links followed) and returns its size. Errors say
/// which: "'x': no such file", "'x' is a directory, expected a file", "'x' is not a regular file
/// (a socket, device or pipe)", or the system's reason it cannot be read.
Result<uint64_t> check_regular_file(const std::string& path);

/// Reads the whole file at `path` (errors as check_regular_file; a file larger than the memory
/// limit is resource exhausted).
Result<std::string> read_file(const std::string& path);

/// Writes `bytes` to `path` through a temporary file in the same folder, created with a unique
/// name (O_CREAT | O_EXCL, so never through an existing file or link), flushed, then renamed over
/// `path`. On any failure the temporary file is removed and `path` is untouched. The file gets
/// the usual permissions (0666 less the umask).
Status write_file_atomic(const std::string& path, std::string_view bytes);
/// The same for a file made of several pieces, written in order without joining them.
Status write_file_atomic(const std::string& path, std::span<const std::string_view> chunks);

/// A whole file mapped read-only (MAP_PRIVATE), or, for a file the system cannot map, read into
/// memory. Errors as check_regular_file.
class MappedFile {
 public:
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::string copy_;  // when not mapped
};

}  // namespace kiln
