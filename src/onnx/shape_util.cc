#include "shape_util.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::onnx_import {

Status normalize_axis(int64_t* axis, size_t rank, std::string_view what) {
  int64_t r = static_cast<int64_t>(rank);
  if (*axis < -r || *axis >= r) {
    return invalid_argument("{}: axis {} is out of range for rank {}", what, *axis, r);
  }
  if (*axis < 0) *axis += r;
  return Status::Ok();
}

Result<std::vector<int64_t>> unsqueeze_shape(std::span<const int64_t> shape,
                                             std::span<const int64_t> axes) {
  size_t out_rank = shape.size() + axes.size();
  std::vector<bool> is_new(out_rank, false);
  for (int64_t a : axes) {
    KILN_RETURN_IF_ERROR(normalize_axis(&a, out_rank, "Unsqueeze axes"));
    if (is_new[static_cast<size_t>(a)]) return invalid_argument("Unsqueeze: axis {} repeats", a);
    is_new[static_cast<size_t>(a)] = true;
  }
  std::vector<int64_t> out;
  size_t k = 0;
  for (size_t d = 0; d < out_rank; ++d) out.push_back(is_new[d] ? 1 : shape[k++]);
  return out;
}

Result<std::vector<int64_t>> squeeze_shape(std::span<const int64_t> shape,
                                           const std::optional<std::vector<int64_t>>& axes) {
  std::vector<bool> drop(shape.size(), false);
  if (!axes || axes->empty()) {
    for (size_t d = 0; d < shape.size(); ++d) drop[d] = shape[d] == 1;
  } else {
    for (int64_t a : *axes) {
      KILN_RETURN_IF_ERROR(normalize_axis(&a, shape.size(), "Squeeze axes"));
      if (shape[static_cast<size_t>(a)] != 1) {
        return invalid_argument("Squeeze: dim {} has size {}, not 1", a, shape[static_cast<size_t>(a)]);
      }
      drop[static_cast<size_t>(a)] = true;
    }
  }
  std::vector<int64_t> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!drop[d]) out.push_back(shape[d]);
  }
  return out;
}

Result<std::vector<int64_t>> resolve_reshape(std::span<const int64_t> in,
                                             std::span<const int64_t> target, bool allowzero) {
  std::vector<int64_t> out(target.begin(), target.end());
  int64_t infer_at = -1;
  int64_t known = 1;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 0 && !allowzero) {
      if (d >= in.size()) return invalid_argument("Reshape: 0 at position {} has no input dim to copy", d);
      out[d] = in[d];
    }
    if (out[d] == -1) {
      if (infer_at >= 0) return invalid_argument("Reshape: more than one -1 in [{}]", fmt::join(target, ", "));
      infer_at = static_cast<int64_t>(d);
      continue;
    }
    if (out[d] < 0) return invalid_argument("Reshape: negative size {} in [{}]", out[d], fmt::join(target, ", "));
    if (out[d] != 0 && known > (int64_t{1} << 40) / out[d]) return out_of_range("Reshape: target too large");
    known *= out[d];
  }
  int64_t total = 1;
  for (int64_t d : in) total *= d;
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return invalid_argument("Reshape: cannot infer -1 reshaping [{}] to [{}]", fmt::join(in, ", "),
                              fmt::join(target, ", "));
    }
    out[static_cast<size_t>(infer_at)] = total / known;
  } else if (known != total) {
    return invalid_argument("Reshape: [{}] has {} elements, target [{}] has {}", fmt::join(in, ", "),
                            total, fmt::join(target, ", "), known);
  }
  return out;
}

}  // namespace kiln::onnx_import
