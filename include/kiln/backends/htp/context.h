// The HTP context binary in memory: graphs of QNN ops over QNN tensors, what the HTP backend's
// preprocess builds and its runtime executes. serialize_context / parse_context convert to and
// from kiln's versioned flatbuffer format (schema/htp_context.fbs). IR-free.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/htp/options.h"
#include "kiln/core/dtype.h"
#include "kiln/core/status.h"

namespace kiln::htp {

/// The context format version this kiln writes and reads.
inline constexpr uint32_t kContextVersion = 1;

/// QNN data types (Qnn_DataType_t) kiln's HTP executes.
enum class QnnDataType : uint8_t {
  kUnknown = 0,
  kInt8, kInt16, kInt32, kInt64,
  kUInt8, kUInt16, kUInt32,
  kFloat16, kFloat32,
  kSFixed4, kSFixed8, kSFixed16, kSFixed32,
  kUFixed8, kUFixed16,
  kBool8,
};
inline constexpr int kNumQnnDataTypes = 17;

/// "QNN_DATATYPE_UFIXED_POINT_8", ...
std::string_view qnn_data_type_name(QnnDataType t);
/// The storage kiln uses for a QNN type (SFixed4 lives in i8; Float16 values are kept in f32
/// buffers rounded to half).
DType storage_dtype(QnnDataType t);
bool is_fixed_point(QnnDataType t);

/// QNN tensor types.
enum class TensorType : uint8_t { kAppWrite = 0, kAppRead, kNative, kStatic };
std::string_view tensor_type_name(TensorType t);

/// QNN's encoding: real = scale * (q + offset), offset = -zero point.
struct QnnEncoding {
  enum class Kind : uint8_t { kUndefined = 0, kScaleOffset, kAxisScaleOffset, kBwScaleOffset,
                              kBwAxisScaleOffset };
  Kind kind = Kind::kUndefined;
  uint8_t bitwidth = 0;
  int32_t axis = -1;
  std::vector<float> scales;
  std::vector<int32_t> offsets;

  bool defined() const { return kind != Kind::kUndefined; }
  bool per_axis() const { return kind == Kind::kAxisScaleOffset || kind == Kind::kBwAxisScaleOffset; }
  bool operator==(const QnnEncoding&) const = default;
};

/// One tensor of a graph.
struct QnnTensor {
  std::string name;
  TensorType type = TensorType::kNative;
  QnnDataType data_type = QnnDataType::kFloat32;
  std::vector<uint32_t> dims;
  QnnEncoding encoding;
  int32_t static_index = -1;  ///< kStatic: index into Context::static_data
  uint64_t offset = 0;        ///< kNative in a prepared graph: offset in its working memory

  uint64_t num_elements() const;
  bool operator==(const QnnTensor&) const = default;
};

/// An op parameter: a scalar or a tensor param (dims + values).
struct QnnParam {
  enum class Type : uint8_t { kBool = 0, kInt, kUInt, kFloat, kIntTensor, kUIntTensor, kFloatTensor };
  std::string name;
  Type type = Type::kInt;
  std::vector<int64_t> ints;   ///< kBool/kInt/kUInt and their tensors
  std::vector<double> floats;  ///< kFloat, kFloatTensor
  std::vector<uint32_t> dims;  ///< tensor params

  static QnnParam scalar_bool(std::string name, bool v) { return {std::move(name), Type::kBool, {v}, {}, {}}; }
  static QnnParam scalar_int(std::string name, int64_t v) { return {std::move(name), Type::kInt, {v}, {}, {}}; }
  static QnnParam scalar_uint(std::string name, uint64_t v) {
    return {std::move(name), Type::kUInt, {static_cast<int64_t>(v)}, {}, {}};
  }
  static QnnParam scalar_float(std::string name, double v) { return {std::move(name), Type::kFloat, {}, {v}, {}}; }
  static QnnParam uint_tensor(std::string name, std::vector<int64_t> v, std::vector<uint32_t> dims) {
    return {std::move(name), Type::kUIntTensor, std::move(v), {}, std::move(dims)};
  }
  static QnnParam int_tensor(std::string name, std::vector<int64_t> v, std::vector<uint32_t> dims) {
    return {std::move(name), Type::kIntTensor, std::move(v), {}, std::move(dims)};
  }
  bool operator==(const QnnParam&) const = default;
};

/// One op: QNN's package and type names ("qti.aisw", "Conv2d"), tensor ids in and out.
struct QnnOp {
  std::string name;
  std::string package = "qti.aisw";
  std::string type;
  std::vector<uint32_t> inputs, outputs;
  std::vector<QnnParam> params;
  int64_t debug_handle = -1;

  const QnnParam* param(std::string_view name) const;
  bool operator==(const QnnOp&) const = default;
};

/// One graph: its tensors, I/O tensor ids in order, ops in execution order, and its plan.
struct QnnGraph {
  std::string name;
  std::vector<QnnTensor> tensors;
  std::vector<uint32_t> inputs, outputs;
  std::vector<QnnOp> ops;
  uint64_t vtcm_bytes = 0;        ///< working memory placed in VTCM
  uint64_t spill_fill_bytes = 0;  ///< working memory beyond VTCM (the spill-fill buffer)

  bool operator==(const QnnGraph&) const = default;
};

/// Bytes of a static tensor: owned (built by preprocess) or a view of a parsed binary.
class StaticData {
 public:
  StaticData() = default;
  explicit StaticData(std::vector<uint8_t> owned) : owned_(std::make_shared<std::vector<uint8_t>>(std::move(owned))) {
    view_ = *owned_;
  }
  /// A view; `keep` keeps the viewed bytes alive.
  StaticData(std::span<const uint8_t> view, std::shared_ptr<const void> keep) : view_(view), keep_(std::move(keep)) {}
  std::span<const uint8_t> bytes() const { return view_; }
  bool operator==(const StaticData& o) const {
    return view_.size() == o.view_.size() && std::equal(view_.begin(), view_.end(), o.view_.begin());
  }

 private:
  std::shared_ptr<std::vector<uint8_t>> owned_;
  std::span<const uint8_t> view_;
  std::shared_ptr<const void> keep_;
};

/// A context: the SoC it was built for, its precision, graphs and their shared static data.
struct Context {
  uint32_t version = kContextVersion;
  SocInfo soc;
  HtpPrecision precision = HtpPrecision::kQuantized;
  bool prepared = false;  ///< tensor offsets planned (offline prepare); else planned at load
  std::vector<QnnGraph> graphs;
  std::vector<StaticData> static_data;
  std::string producer = "kiln";
  /// Deep-learning bandwidth compression (use_dlbc): the binary stores static data
  /// deflate-compressed where that is smaller; parse_context inflates it, so in memory it is
  /// the same bytes (lossless, same footprint, fewer bytes read from storage).
  bool dlbc = false;

  /// The graph named `name`, or null.
  const QnnGraph* graph(std::string_view name) const;
};

/// The context as a flatbuffer (file identifier "KHTP").
std::vector<uint8_t> serialize_context(const Context& context);

/// Parses and checks an untrusted context binary: the flatbuffer verifier, the version, every
/// enum value, every tensor id an op or a graph names, dims against 2^31 elements and the bytes
/// of static tensors against their dims. Static data are views of `bytes` kept alive by `keep`
/// (copies when `keep` is null). Errors say "context binary: ..." and name the graph, op or
/// tensor at fault.
Result<Context> parse_context(std::span<const uint8_t> bytes, std::shared_ptr<const void> keep = nullptr);

/// Whether `bytes` starts like a context binary (flatbuffer with identifier "KHTP").
bool looks_like_context(std::span<const uint8_t> bytes);

/// Plans the native tensors of `graph`: an offset each in one working memory, by lifetime over
/// the op order (greedy by size, 64-byte aligned), then splits that memory into the part that
/// fits the SoC's VTCM (`vtcm_size_mb`) and the spill-fill rest. Preprocess plans offline-prepared
/// graphs; the runtime plans online-prepare ones when it loads them. Returns the memory's size.
uint64_t plan_graph(QnnGraph& graph, uint32_t vtcm_size_mb);

/// A readable summary: SoC, precision, per graph its I/O tensors (dims, type, encoding), op
/// counts by type, static bytes, VTCM and spill-fill sizes. `kiln inspect` prints it.
std::string format_context(const Context& context, bool list_ops = false);

}  // namespace kiln::htp
