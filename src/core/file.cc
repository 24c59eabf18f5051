#include "kiln/core/file.h"

#include <cstdio>
#include <fstream>

namespace kiln {

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return io_error("cannot write '{}'", tmp);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return io_error("failed writing '{}'", tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return io_error("cannot rename '{}' to '{}'", tmp, path);
  }
  return Status::Ok();
}

}  // namespace kiln
