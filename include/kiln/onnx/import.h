// ONNX import: reads an ONNX ModelProto (opsets 11..21, and 1..10 brought up to 11 by ONNX's own
// version converter) into an ExportedProgram of kiln ops.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

/// Knobs of the ONNX importer. Defaults import the model as written.
struct OnnxImportOptions {
  /// Fixed sizes for symbolic input dims, keyed by dim_param (e.g. {"batch", 1}). Dims without a
  /// dim_param are named "batch" (dim 0) or "unk_N" and can be fixed by those names too.
  std::map<std::string, int64_t> dim_values;
  /// Sizes of inputs by graph input name (what a run is given): each symbolic dim of a listed
  /// input takes the size given there. A rank or a static dim that differs is an error naming
  /// the input.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  /// Largest constant (in elements) the importer computes at import time; bigger ones stay ops.
  int64_t fold_limit = int64_t{1} << 20;
};

/// Lowest and highest default-domain opset the importer reads; a model below the lowest is
/// converted to it first.
inline constexpr int64_t kOnnxMinOpset = 11;
inline constexpr int64_t kOnnxMaxOpset = 21;

/// Reads and imports the ONNX file at `path`. External data is resolved inside the file's folder
/// only. Errors name the file and the node, initializer or field that failed.
[[nodiscard]] Result<ExportedProgram> import_onnx_file(const std::string& path,
                                                       const OnnxImportOptions& options = {});

/// Imports an ONNX model from `bytes` (not retained). External data locations are resolved inside
/// `base_dir`; an empty `base_dir` refuses models with external data.
[[nodiscard]] Result<ExportedProgram> import_onnx_bytes(std::span<const uint8_t> bytes,
                                                        std::string_view base_dir,
                                                        const OnnxImportOptions& options = {});

/// Reads a serialized TensorProto file (.pb: ONNX's test-data format, input_0.pb / output_0.pb).
/// The tensor's own name, when the file gives one, goes to `name` (if not null). External data
/// is resolved inside the file's folder. Errors name the file.
[[nodiscard]] Result<Tensor> read_onnx_tensor_file(const std::string& path,
                                                   std::string* name = nullptr);
/// The same from bytes; `what` names them in errors. An empty `base_dir` refuses external data.
[[nodiscard]] Result<Tensor> parse_onnx_tensor(std::span<const uint8_t> bytes, std::string_view base_dir,
                                               std::string_view what, std::string* name = nullptr);

}  // namespace kiln
