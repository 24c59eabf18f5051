// Entry points: parse the ModelProto with size limits, then run the Importer.
#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "importer.h"
#include "onnx_tensor.h"
#include "kiln/core/file.h"
#include "kiln/onnx/import.h"

namespace kiln {
namespace {

// protobuf addresses messages with int: anything at or past 2 GiB cannot be parsed safely.
constexpr uint64_t kMaxProtoBytes = static_cast<uint64_t>(std::numeric_limits<int>::max());

Status too_large(std::string_view what, uint64_t size) {
  return out_of_range("{}: {} bytes; protobuf models must be under 2 GiB (keep large weights in "
                      "external data)",
                      what, size);
}

Status malformed(uint64_t size) {
  return parse_error("not a valid ONNX model: the protobuf bytes are malformed or truncated ({} "
                     "bytes)",
                     size);
}

}  // namespace

Result<ExportedProgram> import_onnx_bytes(std::span<const uint8_t> bytes, std::string_view base_dir,
                                          const OnnxImportOptions& options) {
  if (bytes.size() >= kMaxProtoBytes) return too_large("ONNX model", bytes.size());
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(static_cast<int>(kMaxProtoBytes));
  if (!model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) return malformed(bytes.size());
  onnx_import::Importer importer(options, std::string(base_dir));
  return importer.run(model);
}

Result<ExportedProgram> import_onnx_file(const std::string& path, const OnnxImportOptions& options) {
  KILN_ASSIGN_OR_RETURN(uint64_t size, check_regular_file(path));
  if (size >= kMaxProtoBytes) return too_large(fmt::format("'{}'", path), size);
  onnx::ModelProto model;
  {
    // Parsed straight from the file: the bytes are never held twice.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_error("cannot read '{}': {}", path, std::strerror(errno));
    google::protobuf::io::FileInputStream file(fd);
    file.SetCloseOnDelete(true);
    google::protobuf::io::CodedInputStream in(&file);
    in.SetTotalBytesLimit(static_cast<int>(kMaxProtoBytes));
    bool ok = model.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
    if (file.GetErrno() != 0) {
      return io_error("failed reading '{}': {}", path, std::strerror(file.GetErrno()));
    }
    if (!ok) return malformed(size).with_context(path);
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  onnx_import::Importer importer(options, dir.string());
  auto result = importer.run(model);
  if (!result.ok()) return result.status().with_context(path);
  return result;
}

Result<Tensor> parse_onnx_tensor(std::span<const uint8_t> bytes, std::string_view base_dir, std::string_view what,
                                 std::string* name) {
  if (bytes.size() >= kMaxProtoBytes) return too_large(what, bytes.size());
  onnx::TensorProto proto;
  google::protobuf::io::CodedInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(static_cast<int>(kMaxProtoBytes));
  if (!proto.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    return parse_error("{}: not a serialized ONNX TensorProto ({} bytes)", what, bytes.size());
  }
  std::string tensor = proto.name().empty() ? fmt::format("tensor in {}", what)
                                            : fmt::format("tensor '{}' in {}", proto.name(), what);
  KILN_ASSIGN_OR_RETURN(Tensor t, onnx_import::take_tensor_from_proto(proto, std::string(base_dir), tensor));
  if (name != nullptr) *name = proto.name();
  return t;
}

Result<Tensor> read_onnx_tensor_file(const std::string& path, std::string* name) {
  KILN_ASSIGN_OR_RETURN(uint64_t size, check_regular_file(path));
  if (size >= kMaxProtoBytes) return too_large(fmt::format("'{}'", path), size);
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  return parse_onnx_tensor(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                           dir.string(), fmt::format("'{}'", path), name);
}

}  // namespace kiln
