// Calibration samples from .npz files.
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "kiln/core/npy.h"
#include "kiln/quant/quantizer.h"

namespace kiln::quant {

Result<std::vector<Sample>> read_samples(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.path().extension() == ".npz") files.push_back(entry.path().string());
    }
    if (ec) return io_error("calibration folder '{}': {}", path, ec.message());
    std::sort(files.begin(), files.end());
    if (files.empty()) return invalid_argument("calibration folder '{}' holds no .npz files", path);
  } else {
    files.push_back(path);
  }
  std::vector<Sample> samples;
  for (const std::string& f : files) {
    auto entries = npy::read_npz(f);
    if (!entries.ok()) return entries.status();  // names the file
    Sample s;
    s.source = f;
    for (auto& [name, t] : *entries) s.inputs[name] = std::move(t);
    samples.push_back(std::move(s));
  }
  return samples;
}

}  // namespace kiln::quant
