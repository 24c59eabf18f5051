// The demo backend's runtime half: its blob is a .kpte program (one method, "forward") that the
// runtime loads and runs with the portable kernels. IR-free: kiln-runner links it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/program.h"

namespace kiln::demo {

/// The backend id partitioners and program files name.
inline constexpr std::string_view kBackendId = "demo";
/// The method a demo blob runs.
inline constexpr std::string_view kBlobMethod = "forward";

/// A loaded demo blob. Movable; shares the blob's bytes through `owner` (weights are viewed in
/// place when the blob is 64-byte aligned, as in a program file's segment).
class DemoDelegate {
 public:
  /// Loads the blob as a program file; every check of the program loader applies, and errors
  /// say "demo delegate: ..." and what is wrong.
  /// The blob's weights are named data (see DemoBackend::preprocess), found in `named_data`;
  /// their bytes must outlive the delegate (a program file's, kept by `owner`).
  static Result<DemoDelegate> init(std::span<const uint8_t> blob, std::shared_ptr<const void> owner,
                                   const runtime::NamedDataMap* named_data = nullptr,
                                   int num_threads = 1);
  DemoDelegate(DemoDelegate&&) noexcept;
  DemoDelegate& operator=(DemoDelegate&&) noexcept;
  ~DemoDelegate();

  /// Runs the blob's method on `inputs` (one per input, in order) and returns its outputs.
  /// Buffers it mutates keep their new value for the next call.
  Result<std::vector<Tensor>> execute(std::span<const Tensor> inputs);

 private:
  DemoDelegate();
  std::shared_ptr<const runtime::Program> program_;
  std::unique_ptr<runtime::Method> method_;
};

/// The runtime half for program files: each delegate is a DemoDelegate over the blob's bytes in
/// the mapped file.
std::unique_ptr<runtime::BackendInterface> make_demo_runtime_backend();

}  // namespace kiln::demo
