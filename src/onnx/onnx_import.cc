// Entry points: parse the ModelProto with size limits, then run the Importer.
#include <google/protobuf/io/coded_stream.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "importer.h"
#include "kiln/onnx/import.h"

namespace kiln {
namespace {

// protobuf addresses messages with int: anything at or past 2 GiB cannot be parsed safely.
constexpr uint64_t kMaxProtoBytes = static_cast<uint64_t>(std::numeric_limits<int>::max());

}  // namespace

Result<ExportedProgram> import_onnx_bytes(std::span<const uint8_t> bytes, std::string_view base_dir,
                                          const OnnxImportOptions& options) {
  if (bytes.size() >= kMaxProtoBytes) {
    return out_of_range("ONNX model is {} bytes; protobuf models must be under 2 GiB (keep large "
                        "weights in external data)",
                        bytes.size());
  }
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(static_cast<int>(kMaxProtoBytes));
  if (!model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    return parse_error("not a valid ONNX model: the protobuf bytes are malformed or truncated "
                       "({} bytes)",
                       bytes.size());
  }
  onnx_import::Importer importer(options, std::string(base_dir));
  return importer.run(model);
}

Result<ExportedProgram> import_onnx_file(const std::string& path, const OnnxImportOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return io_error("'{}' is not a readable file", path);
  uint64_t size = fs::file_size(path, ec);
  if (ec) return io_error("cannot stat '{}': {}", path, ec.message());
  if (size >= kMaxProtoBytes) {
    return out_of_range("'{}': {} bytes; protobuf models must be under 2 GiB (keep large weights "
                        "in external data)",
                        path, size);
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot open '{}'", path);
  std::vector<uint8_t> bytes(size);
  f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (!f || static_cast<uint64_t>(f.gcount()) != size) return io_error("short read of '{}'", path);
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  auto result = import_onnx_bytes(bytes, dir.string(), options);
  if (!result.ok()) return result.status().with_context(path);
  return result;
}

}  // namespace kiln
