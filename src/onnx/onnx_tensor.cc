#include "onnx_tensor.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

#include "kiln/core/file.h"
#include "kiln/core/memory.h"

namespace kiln::onnx_import {
namespace {

namespace fs = std::filesystem;
using TP = onnx::TensorProto;

// True if `inner` is `root` or lies below it, compared component by component.
bool path_within(const fs::path& root, const fs::path& inner) {
  auto r = root.begin();
  auto i = inner.begin();
  for (; r != root.end(); ++r, ++i) {
    if (r->empty() && std::next(r) == root.end()) return true;  // trailing separator
    if (i == inner.end() || *r != *i) return false;
  }
  return true;
}

// Where an external tensor's bytes are: a checked file inside the model's folder and a range in it.
struct ExternalRange {
  fs::path file;
  std::string location;  // as written in the model, for messages
  uint64_t offset = 0;
};

// The first component of `rel` below `root` that is a symbolic link leading outside `root`.
std::optional<std::string> escaping_link(const fs::path& root, const fs::path& rel) {
  fs::path lexical = root;
  fs::path shown;
  for (const auto& part : rel) {
    lexical /= part;
    shown /= part;
    std::error_code ec;
    if (!fs::is_symlink(lexical, ec)) continue;
    fs::path resolved = fs::weakly_canonical(lexical, ec);
    if (ec || !path_within(root, resolved)) return shown.string();
  }
  return std::nullopt;
}

// Validates an external_data reference against the file it names; reads nothing.
Result<ExternalRange> locate_external(const TP& proto, const std::string& base_dir,
                                      const std::string& what, uint64_t expected_bytes) {
  std::string location;
  bool has_location = false;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& kv : proto.external_data()) {
    const std::string& key = kv.key();
    if (key == "location") {
      location = kv.value();
      has_location = true;
    } else if (key == "offset" || key == "length") {
      const std::string& v = kv.value();
      uint64_t n = 0;
      if (v.empty() || v.size() > 19) {
        return parse_error("{}: external_data field '{}': '{}' is not a valid byte count", what,
                           key, v);
      }
      for (char c : v) {
        if (c < '0' || c > '9') {
          return parse_error("{}: external_data field '{}': '{}' is not a valid byte count",
                             what, key, v);
        }
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
      if (key == "offset") offset = n; else length = n;
    }
  }
  if (!has_location || location.empty()) {
    return parse_error("{}: external_data has no 'location'", what);
  }
  if (base_dir.empty()) {
    return invalid_argument("{}: external_data field 'location' ('{}'): the model was given as "
                            "bytes without a folder, so external data cannot be read",
                            what, location);
  }
  if (location.find('\0') != std::string::npos) {
    return invalid_argument("{}: external_data field 'location' contains a NUL byte", what);
  }
  fs::path rel(location);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory()) {
    return invalid_argument("{}: external_data field 'location' ('{}') is an absolute path; "
                            "only files inside the model's folder are read",
                            what, location);
  }
  for (const auto& part : rel) {
    if (part == "..") {
      return invalid_argument("{}: external_data field 'location' ('{}') escapes the model's "
                              "folder with '..'",
                              what, location);
    }
  }
  std::error_code ec;
  fs::path root = fs::canonical(fs::path(base_dir), ec);
  if (ec) return io_error("{}: cannot resolve the model folder '{}': {}", what, base_dir, ec.message());
  fs::path full = fs::weakly_canonical(root / rel, ec);
  if (ec) {
    return io_error("{}: external_data field 'location' ('{}'): {}", what, location, ec.message());
  }
  if (!path_within(root, full)) {
    // The path itself stays inside (no '..', not absolute): a symbolic link leads out.
    auto link = escaping_link(root, rel);
    return invalid_argument("{}: external_data field 'location' ('{}') is refused: '{}' is a "
                            "symbolic link to a place outside the model's folder, and only files "
                            "inside the model's folder are read",
                            what, location, link.value_or(location));
  }
  auto file_size = check_regular_file(full.string());
  if (!file_size.ok()) {
    return file_size.status().with_context(
        fmt::format("{}: external_data field 'location' ('{}')", what, location));
  }
  if (offset > *file_size) {
    return out_of_range("{}: external_data field 'offset' ({}) is past the end of '{}' ({} bytes)",
                        what, offset, location, *file_size);
  }
  uint64_t n = length.value_or(*file_size - offset);
  if (n > *file_size - offset) {
    return out_of_range("{}: external_data field 'length' ({}) at offset {} runs past the end of "
                        "'{}' ({} bytes)",
                        what, n, offset, location, *file_size);
  }
  if (n != expected_bytes) {
    return invalid_argument("{}: external_data field 'length': {} bytes, expected {} for its "
                            "dtype and shape",
                            what, n, expected_bytes);
  }
  return ExternalRange{full, location, offset};
}

Status read_external(const ExternalRange& r, Tensor& t, const std::string& what) {
  std::ifstream in(r.file, std::ios::binary);
  if (!in) return io_error("{}: cannot open external data '{}'", what, r.location);
  auto n = static_cast<std::streamsize>(t.nbytes());
  in.seekg(static_cast<std::streamoff>(r.offset));
  in.read(static_cast<char*>(t.mutable_data()), n);
  if (!in || in.gcount() != n) return io_error("{}: short read of external data '{}'", what, r.location);
  return Status::Ok();
}

// The typed field that holds a tensor of `dtype` when it has no raw_data, and its length.
std::pair<const char*, int> typed_field(const TP& proto, DType dtype) {
  switch (dtype) {
    case DType::kF32: return {"float_data", proto.float_data_size()};
    case DType::kF64: return {"double_data", proto.double_data_size()};
    case DType::kI64: return {"int64_data", proto.int64_data_size()};
    case DType::kU32:
    case DType::kU64: return {"uint64_data", proto.uint64_data_size()};
    default: return {"int32_data", proto.int32_data_size()};
  }
}

template <typename Src, typename Fn>
void copy_typed(const Src& field, int64_t n, Fn&& store) {
  for (int64_t i = 0; i < n; ++i) store(i, field.Get(static_cast<int>(i)));
}

}  // namespace

std::optional<DType> dtype_from_onnx(int32_t elem_type) {
  switch (elem_type) {
    case TP::FLOAT: return DType::kF32;
    case TP::UINT8: return DType::kU8;
    case TP::INT8: return DType::kI8;
    case TP::INT16: return DType::kI16;
    case TP::UINT16: return DType::kU16;
    case TP::UINT32: return DType::kU32;
    case TP::UINT64: return DType::kU64;
    case TP::INT32: return DType::kI32;
    case TP::INT64: return DType::kI64;
    case TP::BOOL: return DType::kBool;
    case TP::FLOAT16: return DType::kF16;
    case TP::DOUBLE: return DType::kF64;
    case TP::BFLOAT16: return DType::kBF16;
    default: return std::nullopt;
  }
}

std::string onnx_type_name(int32_t elem_type) {
  if (TP::DataType_IsValid(elem_type)) {
    return TP::DataType_Name(static_cast<TP::DataType>(elem_type));
  }
  return fmt::format("type {}", elem_type);
}

int32_t dtype_to_onnx(DType dtype) {
  switch (dtype) {
    case DType::kF32: return TP::FLOAT;
    case DType::kF16: return TP::FLOAT16;
    case DType::kBF16: return TP::BFLOAT16;
    case DType::kF64: return TP::DOUBLE;
    case DType::kI64: return TP::INT64;
    case DType::kI32: return TP::INT32;
    case DType::kI16: return TP::INT16;
    case DType::kU16: return TP::UINT16;
    case DType::kU32: return TP::UINT32;
    case DType::kU64: return TP::UINT64;
    case DType::kI8: return TP::INT8;
    case DType::kU8: return TP::UINT8;
    case DType::kBool: return TP::BOOL;
  }
  return TP::UNDEFINED;
}

Status check_shape(std::span<const int64_t> shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return invalid_argument("{}: negative dim {} in shape [{}]", what, d, fmt::join(shape, ", "));
    if (d != 0 && n > kMaxElements / d) {
      return out_of_range("{}: shape [{}] has more than 2^40 elements", what, fmt::join(shape, ", "));
    }
    n *= d;
  }
  return Status::Ok();
}

namespace {

// Bytes taken over from a protobuf string field.
class StringStorage final : public Storage {
 public:
  explicit StringStorage(std::string bytes) : bytes_(std::move(bytes)) {}
  const uint8_t* data() const override { return reinterpret_cast<const uint8_t*>(bytes_.data()); }
  size_t size() const override { return bytes_.size(); }

 private:
  std::string bytes_;
};

Result<Tensor> convert(const TP& proto, std::string* take_raw, const std::string& base_dir,
                       const std::string& what) {
  if (proto.has_segment()) return unsupported("{}: segmented tensors are not supported", what);
  auto dtype = dtype_from_onnx(proto.data_type());
  if (!dtype) {
    return unsupported("{}: element type {} is not supported", what,
                       onnx_type_name(proto.data_type()));
  }
  std::vector<int64_t> shape(proto.dims().begin(), proto.dims().end());
  KILN_RETURN_IF_ERROR(check_shape(shape, what));
  const int64_t numel = checked_numel(shape).value_or(0);
  const uint64_t nbytes = static_cast<uint64_t>(numel) * dtype_size(*dtype);

  // The data is checked against what the file really holds before anything is allocated.
  if (proto.data_location() == TP::EXTERNAL) {
    KILN_ASSIGN_OR_RETURN(ExternalRange range, locate_external(proto, base_dir, what, nbytes));
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(*dtype, shape, what));
    if (nbytes > 0) KILN_RETURN_IF_ERROR(read_external(range, t, what));
    return t;
  }
  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    if (raw.size() != nbytes) {
      return invalid_argument("{}: field 'raw_data' has {} bytes, expected {} for {}", what,
                              raw.size(), nbytes, format_shape(*dtype, shape));
    }
    if (take_raw != nullptr && nbytes > 0) {
      KILN_RETURN_IF_ERROR(check_memory(nbytes, fmt::format("{} ({})", what, format_shape(*dtype, shape))));
      return Tensor(*dtype, shape, std::make_shared<StringStorage>(std::move(*take_raw)));
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(*dtype, shape, what));
    if (nbytes > 0) std::memcpy(t.mutable_data(), raw.data(), nbytes);
    return t;
  }
  auto [field_name, count] = typed_field(proto, *dtype);
  if (count != numel) {
    return invalid_argument("{}: field '{}' has {} values, expected {} for {}{}", what, field_name,
                            count, numel, format_shape(*dtype, shape),
                            count == 0 ? " (the tensor has no data)" : "");
  }
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(*dtype, shape, what));
  if (numel == 0) return t;
  uint8_t* dst = static_cast<uint8_t*>(t.mutable_data());
  switch (*dtype) {
    case DType::kF32:
      copy_typed(proto.float_data(), numel, [&](int64_t i, float v) { std::memcpy(dst + i * 4, &v, 4); });
      break;
    case DType::kF64:
      copy_typed(proto.double_data(), numel, [&](int64_t i, double v) { std::memcpy(dst + i * 8, &v, 8); });
      break;
    case DType::kI64:
      copy_typed(proto.int64_data(), numel, [&](int64_t i, int64_t v) { std::memcpy(dst + i * 8, &v, 8); });
      break;
    case DType::kI32:
      copy_typed(proto.int32_data(), numel, [&](int64_t i, int32_t v) { std::memcpy(dst + i * 4, &v, 4); });
      break;
    // ONNX keeps uint32 and uint64 values in uint64_data.
    case DType::kU32:
      copy_typed(proto.uint64_data(), numel, [&](int64_t i, uint64_t v) {
        uint32_t w = static_cast<uint32_t>(v);
        std::memcpy(dst + i * 4, &w, 4);
      });
      break;
    case DType::kU64:
      copy_typed(proto.uint64_data(), numel, [&](int64_t i, uint64_t v) { std::memcpy(dst + i * 8, &v, 8); });
      break;
    case DType::kI16:
    case DType::kU16:
    case DType::kF16:
    case DType::kBF16:
      copy_typed(proto.int32_data(), numel, [&](int64_t i, int32_t v) {
        uint16_t b = static_cast<uint16_t>(v);
        std::memcpy(dst + i * 2, &b, 2);
      });
      break;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      copy_typed(proto.int32_data(), numel, [&](int64_t i, int32_t v) {
        dst[i] = *dtype == DType::kBool ? static_cast<uint8_t>(v != 0) : static_cast<uint8_t>(v);
      });
      break;
  }
  return t;
}

}  // namespace

Result<Tensor> tensor_from_proto(const TP& proto, const std::string& base_dir,
                                 const std::string& what) {
  return convert(proto, nullptr, base_dir, what);
}

Result<Tensor> take_tensor_from_proto(TP& proto, const std::string& base_dir,
                                      const std::string& what) {
  return convert(proto, proto.has_raw_data() ? proto.mutable_raw_data() : nullptr, base_dir, what);
}

}  // namespace kiln::onnx_import
