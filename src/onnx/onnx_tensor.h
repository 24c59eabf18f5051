// Conversions between ONNX protobuf messages and kiln tensors/specs.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

#include "kiln/core/tensor.h"
#include "kiln/ir/tensor_spec.h"

namespace kiln::onnx_import {

/// Largest element count the importer accepts for any tensor or static shape (2^40).
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

/// kiln dtype of an ONNX TensorProto::DataType value; nullopt for types kiln has no dtype for.
std::optional<DType> dtype_from_onnx(int32_t elem_type);
/// Name of an ONNX element type for messages ("FLOAT", "STRING", ...).
std::string onnx_type_name(int32_t elem_type);
/// ONNX TensorProto::DataType value of a kiln dtype.
int32_t dtype_to_onnx(DType dtype);

/// Converts `proto` to a tensor. External data is read from inside `base_dir` (empty: refused).
/// `what` names the tensor in errors ("initializer 'w'").
[[nodiscard]] Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto,
                                               const std::string& base_dir,
                                               const std::string& what);
/// The same, but a tensor held in raw_data takes those bytes over instead of copying them (the
/// proto's raw_data is left empty), so a model's weights are in memory once.
[[nodiscard]] Result<Tensor> take_tensor_from_proto(onnx::TensorProto& proto,
                                                    const std::string& base_dir,
                                                    const std::string& what);

/// Checks a static shape from a file: non-negative dims and at most kMaxElements elements.
[[nodiscard]] Status check_shape(std::span<const int64_t> shape, const std::string& what);

}  // namespace kiln::onnx_import
