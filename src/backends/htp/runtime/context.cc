// The HTP context binary: serialize, parse (untrusted bytes), describe.
#include "kiln/backends/htp/context.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>

#include <zlib.h>

#include "htp_context_generated.h"
#include "passes/greedy_placement.h"

namespace kiln::htp {
namespace {

constexpr const char* kDataTypeNames[kNumQnnDataTypes] = {
    "QNN_DATATYPE_UNDEFINED",     "QNN_DATATYPE_INT_8",          "QNN_DATATYPE_INT_16",
    "QNN_DATATYPE_INT_32",        "QNN_DATATYPE_INT_64",         "QNN_DATATYPE_UINT_8",
    "QNN_DATATYPE_UINT_16",       "QNN_DATATYPE_UINT_32",        "QNN_DATATYPE_FLOAT_16",
    "QNN_DATATYPE_FLOAT_32",      "QNN_DATATYPE_SFIXED_POINT_4", "QNN_DATATYPE_SFIXED_POINT_8",
    "QNN_DATATYPE_SFIXED_POINT_16", "QNN_DATATYPE_SFIXED_POINT_32", "QNN_DATATYPE_UFIXED_POINT_8",
    "QNN_DATATYPE_UFIXED_POINT_16", "QNN_DATATYPE_BOOL_8",
};

// Largest element count of one tensor (the kernels index with int64 and size_t).
constexpr uint64_t kMaxElements = uint64_t{1} << 31;

Status bad(std::string_view what, const std::string& detail) {
  return invalid_argument("context binary: {}: {}", what, detail);
}

template <typename T>
std::vector<T> to_vec(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>{};
}

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// zlib streams of use_dlbc static data. Deflate expands at most about 1032:1, so a claimed
// size beyond that is corrupt before anything is allocated.
constexpr uint64_t kMaxInflateRatio = 1032;

std::vector<uint8_t> deflate_bytes(std::span<const uint8_t> raw) {
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> out(size);
  if (compress2(out.data(), &size, raw.data(), static_cast<uLong>(raw.size()), Z_BEST_SPEED) != Z_OK) return {};
  out.resize(size);
  return out;
}

Result<std::vector<uint8_t>> inflate_bytes(std::span<const uint8_t> stream, uint64_t raw_size, size_t index) {
  std::string where = fmt::format("static data {}", index);
  if (raw_size / kMaxInflateRatio > stream.size()) {
    return bad(where, fmt::format("{} compressed bytes cannot inflate to the {} it claims", stream.size(), raw_size));
  }
  std::vector<uint8_t> out;
  try {
    out.resize(raw_size);
  } catch (const std::bad_alloc&) {
    return resource_exhausted("context binary: {}: cannot allocate {} bytes", where, raw_size);
  }
  uLongf size = static_cast<uLongf>(raw_size);
  int rc = uncompress(out.data(), &size, stream.data(), static_cast<uLong>(stream.size()));
  if (rc != Z_OK || size != raw_size) {
    return bad(where, fmt::format("its {} compressed bytes do not inflate to {} ({})", stream.size(), raw_size,
                                  rc == Z_OK ? fmt::format("got {}", size) : std::string(zError(rc))));
  }
  return out;
}

}  // namespace

std::string_view qnn_data_type_name(QnnDataType t) {
  auto i = static_cast<size_t>(t);
  return i < kNumQnnDataTypes ? kDataTypeNames[i] : "QNN_DATATYPE_?";
}

DType storage_dtype(QnnDataType t) {
  switch (t) {
    case QnnDataType::kInt8: case QnnDataType::kSFixed4: case QnnDataType::kSFixed8: return DType::kI8;
    case QnnDataType::kInt16: case QnnDataType::kSFixed16: return DType::kI16;
    case QnnDataType::kInt32: case QnnDataType::kSFixed32: case QnnDataType::kUInt32: return DType::kI32;
    case QnnDataType::kInt64: return DType::kI64;
    case QnnDataType::kUInt8: case QnnDataType::kUFixed8: return DType::kU8;
    case QnnDataType::kUInt16: case QnnDataType::kUFixed16: return DType::kU16;
    case QnnDataType::kBool8: return DType::kBool;
    case QnnDataType::kFloat16: case QnnDataType::kFloat32: case QnnDataType::kUnknown: return DType::kF32;
  }
  return DType::kF32;
}

bool is_fixed_point(QnnDataType t) {
  switch (t) {
    case QnnDataType::kSFixed4: case QnnDataType::kSFixed8: case QnnDataType::kSFixed16:
    case QnnDataType::kSFixed32: case QnnDataType::kUFixed8: case QnnDataType::kUFixed16:
      return true;
    default:
      return false;
  }
}

std::string_view tensor_type_name(TensorType t) {
  switch (t) {
    case TensorType::kAppWrite: return "APP_WRITE";
    case TensorType::kAppRead: return "APP_READ";
    case TensorType::kNative: return "NATIVE";
    case TensorType::kStatic: return "STATIC";
  }
  return "?";
}

uint64_t QnnTensor::num_elements() const {
  uint64_t n = 1;
  for (uint32_t d : dims) n *= d;
  return n;
}

const QnnParam* QnnOp::param(std::string_view n) const {
  for (const QnnParam& p : params) {
    if (p.name == n) return &p;
  }
  return nullptr;
}

const QnnGraph* Context::graph(std::string_view n) const {
  for (const QnnGraph& g : graphs) {
    if (g.name == n) return &g;
  }
  return nullptr;
}

std::vector<uint8_t> serialize_context(const Context& c) {
  flatbuffers::FlatBufferBuilder b(1 << 16);
  std::vector<flatbuffers::Offset<fb::StaticData>> statics;
  for (const StaticData& s : c.static_data) {
    std::span<const uint8_t> stored = s.bytes();
    std::vector<uint8_t> deflated;
    if (c.dlbc && !stored.empty()) {
      deflated = deflate_bytes(stored);
      if (!deflated.empty() && deflated.size() < stored.size()) stored = deflated;
    }
    b.ForceVectorAlignment(stored.size(), 1, 32);  // flatbuffers aligns to at most 32
    auto data = b.CreateVector(stored.data(), stored.size());
    statics.push_back(fb::CreateStaticData(b, data, stored.data() == s.bytes().data() ? 0 : s.bytes().size()));
  }
  std::vector<flatbuffers::Offset<fb::Graph>> graphs;
  for (const QnnGraph& g : c.graphs) {
    std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
    for (const QnnTensor& t : g.tensors) {
      auto enc = fb::CreateEncoding(b, static_cast<fb::EncodingKind>(t.encoding.kind), t.encoding.bitwidth,
                                    t.encoding.axis, b.CreateVector(t.encoding.scales),
                                    b.CreateVector(t.encoding.offsets));
      tensors.push_back(fb::CreateTensor(b, b.CreateString(t.name), static_cast<fb::TensorType>(t.type),
                                         static_cast<fb::DataType>(t.data_type), b.CreateVector(t.dims),
                                         enc, t.static_index, t.offset));
    }
    std::vector<flatbuffers::Offset<fb::Op>> ops;
    for (const QnnOp& op : g.ops) {
      std::vector<flatbuffers::Offset<fb::Param>> params;
      for (const QnnParam& p : op.params) {
        params.push_back(fb::CreateParam(b, b.CreateString(p.name), static_cast<fb::ParamType>(p.type),
                                         b.CreateVector(p.ints), b.CreateVector(p.floats),
                                         b.CreateVector(p.dims)));
      }
      ops.push_back(fb::CreateOp(b, b.CreateString(op.name), b.CreateString(op.package),
                                 b.CreateString(op.type), b.CreateVector(op.inputs),
                                 b.CreateVector(op.outputs), b.CreateVector(params), op.debug_handle));
    }
    graphs.push_back(fb::CreateGraph(b, b.CreateString(g.name), b.CreateVector(tensors),
                                     b.CreateVector(g.inputs), b.CreateVector(g.outputs),
                                     b.CreateVector(ops), g.vtcm_bytes, g.spill_fill_bytes));
  }
  auto root = fb::CreateContext(b, c.version, static_cast<int32_t>(c.soc.soc_model),
                                static_cast<int32_t>(c.soc.htp_arch), c.soc.vtcm_size_mb,
                                static_cast<uint8_t>(c.precision), c.prepared, b.CreateVector(graphs),
                                b.CreateVector(statics), b.CreateString(c.producer), c.dlbc);
  fb::FinishContextBuffer(b, root);
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

bool looks_like_context(std::span<const uint8_t> bytes) {
  return bytes.size() >= 8 && flatbuffers::BufferHasIdentifier(bytes.data(), fb::ContextIdentifier());
}

namespace {

Result<QnnGraph> parse_graph(const fb::Graph& fg, size_t gi, size_t num_static) {
  QnnGraph g;
  g.name = str(fg.name());
  std::string where = fmt::format("graph #{} '{}'", gi, g.name);
  if (g.name.empty()) return bad(where, "has no name");
  size_t nt = fg.tensors() ? fg.tensors()->size() : 0;
  g.tensors.reserve(nt);
  for (size_t i = 0; i < nt; ++i) {
    const fb::Tensor& ft = *fg.tensors()->Get(static_cast<flatbuffers::uoffset_t>(i));
    QnnTensor t;
    t.name = str(ft.name());
    std::string tw = fmt::format("{}, tensor #{} '{}'", where, i, t.name);
    auto type = static_cast<uint8_t>(ft.type());
    if (type > static_cast<uint8_t>(TensorType::kStatic)) return bad(tw, fmt::format("unknown tensor type {}", type));
    t.type = static_cast<TensorType>(type);
    auto dt = static_cast<uint8_t>(ft.data_type());
    if (dt == 0 || dt >= kNumQnnDataTypes) return bad(tw, fmt::format("unknown data type {}", dt));
    t.data_type = static_cast<QnnDataType>(dt);
    t.dims = to_vec(ft.dims());
    if (t.dims.size() > 8) return bad(tw, fmt::format("rank {} (at most 8)", t.dims.size()));
    uint64_t n = 1;
    for (uint32_t d : t.dims) {
      n *= d;
      if (n > kMaxElements) return bad(tw, fmt::format("dims [{}] hold more than 2^31 elements", fmt::join(t.dims, ", ")));
    }
    if (const fb::Encoding* e = ft.encoding()) {
      auto kind = static_cast<uint8_t>(e->kind());
      if (kind > static_cast<uint8_t>(QnnEncoding::Kind::kBwAxisScaleOffset)) {
        return bad(tw, fmt::format("unknown encoding kind {}", kind));
      }
      t.encoding.kind = static_cast<QnnEncoding::Kind>(kind);
      t.encoding.bitwidth = e->bitwidth();
      t.encoding.axis = e->axis();
      t.encoding.scales = to_vec(e->scales());
      t.encoding.offsets = to_vec(e->offsets());
      if (t.encoding.defined()) {
        size_t want = 1;
        if (t.encoding.per_axis()) {
          if (t.encoding.axis < 0 || static_cast<size_t>(t.encoding.axis) >= t.dims.size()) {
            return bad(tw, fmt::format("encoding axis {} is outside rank {}", t.encoding.axis, t.dims.size()));
          }
          want = t.dims[t.encoding.axis];
        }
        if (t.encoding.scales.size() != want || t.encoding.offsets.size() != want) {
          return bad(tw, fmt::format("encoding has {} scales and {} offsets, expected {}",
                                     t.encoding.scales.size(), t.encoding.offsets.size(), want));
        }
        for (float s : t.encoding.scales) {
          if (!(s > 0) || !std::isfinite(s)) return bad(tw, fmt::format("encoding scale {} is not positive and finite", s));
        }
        if (!is_fixed_point(t.data_type)) {
          return bad(tw, fmt::format("has an encoding but data type {}", qnn_data_type_name(t.data_type)));
        }
      }
    }
    if (is_fixed_point(t.data_type) && !t.encoding.defined()) {
      return bad(tw, fmt::format("data type {} needs an encoding", qnn_data_type_name(t.data_type)));
    }
    t.static_index = ft.static_index();
    if (t.type == TensorType::kStatic) {
      if (t.static_index < 0 || static_cast<size_t>(t.static_index) >= num_static) {
        return bad(tw, fmt::format("static index {} is outside the context's {} static tensors",
                                   t.static_index, num_static));
      }
    } else if (t.static_index != -1) {
      return bad(tw, "a non-static tensor has a static index");
    }
    t.offset = ft.offset();
    g.tensors.push_back(std::move(t));
  }
  auto check_ids = [&](const std::vector<uint32_t>& ids, const std::string& w) -> Status {
    for (uint32_t id : ids) {
      if (id >= nt) return bad(w, fmt::format("tensor id {} is outside the graph's {} tensors", id, nt));
    }
    return Status::Ok();
  };
  g.inputs = to_vec(fg.inputs());
  g.outputs = to_vec(fg.outputs());
  KILN_RETURN_IF_ERROR(check_ids(g.inputs, where + " inputs"));
  KILN_RETURN_IF_ERROR(check_ids(g.outputs, where + " outputs"));
  for (uint32_t id : g.inputs) {
    if (g.tensors[id].type != TensorType::kAppWrite) return bad(where, fmt::format("input '{}' is not APP_WRITE", g.tensors[id].name));
  }
  for (uint32_t id : g.outputs) {
    if (g.tensors[id].type != TensorType::kAppRead) return bad(where, fmt::format("output '{}' is not APP_READ", g.tensors[id].name));
  }
  size_t nops = fg.ops() ? fg.ops()->size() : 0;
  g.ops.reserve(nops);
  for (size_t i = 0; i < nops; ++i) {
    const fb::Op& fo = *fg.ops()->Get(static_cast<flatbuffers::uoffset_t>(i));
    QnnOp op;
    op.name = str(fo.name());
    op.package = str(fo.package());
    op.type = str(fo.type());
    op.inputs = to_vec(fo.inputs());
    op.outputs = to_vec(fo.outputs());
    op.debug_handle = fo.debug_handle();
    std::string ow = fmt::format("{}, op #{} '{}' ({})", where, i, op.name, op.type);
    if (op.type.empty()) return bad(ow, "has no type");
    KILN_RETURN_IF_ERROR(check_ids(op.inputs, ow + " inputs"));
    KILN_RETURN_IF_ERROR(check_ids(op.outputs, ow + " outputs"));
    if (fo.params()) {
      for (const fb::Param* fp : *fo.params()) {
        QnnParam p;
        p.name = str(fp->name());
        auto type = static_cast<uint8_t>(fp->type());
        if (type > static_cast<uint8_t>(QnnParam::Type::kFloatTensor)) {
          return bad(ow, fmt::format("param '{}' has unknown type {}", p.name, type));
        }
        p.type = static_cast<QnnParam::Type>(type);
        p.ints = to_vec(fp->ints());
        p.floats = to_vec(fp->floats());
        p.dims = to_vec(fp->dims());
        op.params.push_back(std::move(p));
      }
    }
    g.ops.push_back(std::move(op));
  }
  g.vtcm_bytes = fg.vtcm_bytes();
  g.spill_fill_bytes = fg.spill_fill_bytes();
  return g;
}

}  // namespace

Result<Context> parse_context(std::span<const uint8_t> bytes, std::shared_ptr<const void> keep) {
  if (!looks_like_context(bytes)) {
    return bad("header", fmt::format("{} bytes without the file identifier 'KHTP' (not a kiln HTP "
                                     "context binary)", bytes.size()));
  }
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), /*max_depth=*/64,
                                 /*max_tables=*/std::max<size_t>(1000000, bytes.size() / 4));
  if (!fb::VerifyContextBuffer(verifier)) {
    return bad("flatbuffer", fmt::format("the {}-byte Context table does not verify (corrupt or truncated)",
                                         bytes.size()));
  }
  const fb::Context* root = fb::GetContext(bytes.data());
  Context c;
  c.version = root->version();
  if (c.version != kContextVersion) {
    return bad("version", fmt::format("{}, this kiln reads version {}", c.version, kContextVersion));
  }
  auto soc = soc_info(static_cast<QcomChipset>(root->soc_model()));
  if (!soc.ok()) return bad("soc_model", soc.status().message());
  c.soc = *soc;
  if (static_cast<int32_t>(c.soc.htp_arch) != root->htp_arch() || c.soc.vtcm_size_mb != root->vtcm_size_mb()) {
    return bad("soc", fmt::format("SoC {} is arch V{} with {} MB VTCM, the binary says V{} and {} MB",
                                  to_string(c.soc.soc_model), static_cast<int>(c.soc.htp_arch),
                                  c.soc.vtcm_size_mb, root->htp_arch(), root->vtcm_size_mb()));
  }
  if (root->precision() > static_cast<uint8_t>(HtpPrecision::kFp16)) {
    return bad("precision", fmt::format("unknown precision {}", root->precision()));
  }
  c.precision = static_cast<HtpPrecision>(root->precision());
  c.prepared = root->prepared();
  c.producer = str(root->producer());
  c.dlbc = root->dlbc();
  // Sizes of the static data as the graphs see it (compressed entries: their inflated size).
  std::vector<uint64_t> static_sizes;
  if (root->static_data()) {
    for (const fb::StaticData* s : *root->static_data()) {
      static_sizes.push_back(s->raw_size() != 0 ? s->raw_size() : (s->data() ? s->data()->size() : 0));
    }
  }
  size_t ng = root->graphs() ? root->graphs()->size() : 0;
  if (ng == 0) return bad("graphs", "the context has no graph");
  std::map<std::string, size_t, std::less<>> names;
  for (size_t i = 0; i < ng; ++i) {
    KILN_ASSIGN_OR_RETURN(QnnGraph g, parse_graph(*root->graphs()->Get(static_cast<flatbuffers::uoffset_t>(i)), i,
                                                  static_sizes.size()));
    if (!names.emplace(g.name, i).second) return bad("graphs", fmt::format("graph name '{}' is used twice", g.name));
    // A static tensor's bytes must be exactly what its dims and type need.
    for (const QnnTensor& t : g.tensors) {
      if (t.type != TensorType::kStatic) continue;
      uint64_t want = t.num_elements() * dtype_size(storage_dtype(t.data_type));
      if (t.data_type == QnnDataType::kFloat16) want = t.num_elements() * 2;
      uint64_t got = static_sizes[static_cast<size_t>(t.static_index)];
      if (got != want) {
        return bad(fmt::format("graph '{}', static tensor '{}'", g.name, t.name),
                   fmt::format("{} bytes of data, its dims [{}] and type {} need {}", got,
                               fmt::join(t.dims, ", "), qnn_data_type_name(t.data_type), want));
      }
    }
    c.graphs.push_back(std::move(g));
  }
  if (root->static_data()) {
    for (size_t i = 0; i < static_sizes.size(); ++i) {
      const fb::StaticData* s = root->static_data()->Get(static_cast<flatbuffers::uoffset_t>(i));
      std::span<const uint8_t> view;
      if (s->data()) view = std::span<const uint8_t>(s->data()->data(), s->data()->size());
      if (s->raw_size() != 0) {
        KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> raw, inflate_bytes(view, s->raw_size(), i));
        c.static_data.emplace_back(std::move(raw));
      } else if (keep) {
        c.static_data.emplace_back(view, keep);
      } else {
        c.static_data.emplace_back(std::vector<uint8_t>(view.begin(), view.end()));
      }
    }
  }
  return c;
}

std::string format_context(const Context& c, bool list_ops) {
  std::string out = fmt::format("HTP context v{} ({}): SoC {} (V{}, {} MB VTCM), {} precision, {}\n",
                                c.version, c.producer, to_string(c.soc.soc_model),
                                static_cast<int>(c.soc.htp_arch), c.soc.vtcm_size_mb,
                                c.precision == HtpPrecision::kFp16 ? "fp16" : "quantized",
                                c.prepared ? "prepared (offline)" : "op graph (online prepare)");
  uint64_t static_bytes = 0;
  for (const StaticData& s : c.static_data) static_bytes += s.bytes().size();
  out += fmt::format("  static data: {} tensors, {} bytes{}\n", c.static_data.size(), static_bytes,
                     c.dlbc ? " (stored deflate-compressed: use_dlbc)" : "");
  auto describe = [](const QnnTensor& t) {
    std::string s = fmt::format("{} [{}] {}", t.name, fmt::join(t.dims, ", "), qnn_data_type_name(t.data_type));
    if (t.encoding.defined()) {
      if (t.encoding.per_axis()) {
        s += fmt::format(" axis {} ({} scales)", t.encoding.axis, t.encoding.scales.size());
      } else {
        s += fmt::format(" scale {:.6g} offset {}", t.encoding.scales[0], t.encoding.offsets[0]);
      }
      s += fmt::format(" {}-bit", t.encoding.bitwidth);
    }
    return s;
  };
  for (const QnnGraph& g : c.graphs) {
    out += fmt::format("  graph '{}': {} ops, {} tensors, VTCM {} bytes, spill-fill {} bytes\n", g.name,
                       g.ops.size(), g.tensors.size(), g.vtcm_bytes, g.spill_fill_bytes);
    for (uint32_t id : g.inputs) out += "    in  " + describe(g.tensors[id]) + "\n";
    for (uint32_t id : g.outputs) out += "    out " + describe(g.tensors[id]) + "\n";
    std::map<std::string, int> counts;
    for (const QnnOp& op : g.ops) ++counts[op.type];
    std::string by_type;
    for (const auto& [type, n] : counts) by_type += fmt::format("{}{} x{}", by_type.empty() ? "" : ", ", type, n);
    out += "    ops: " + by_type + "\n";
    if (list_ops) {
      for (const QnnOp& op : g.ops) {
        std::vector<std::string> ins, outs;
        for (uint32_t id : op.inputs) ins.push_back(g.tensors[id].name);
        for (uint32_t id : op.outputs) outs.push_back(g.tensors[id].name);
        out += fmt::format("      {} = {}({}) [{}]\n", fmt::join(outs, ", "), op.type, fmt::join(ins, ", "), op.name);
      }
    }
  }
  return out;
}

}  // namespace kiln::htp

namespace kiln::htp {

uint64_t plan_graph(QnnGraph& g, uint32_t vtcm_size_mb) {
  // Lifetimes over op positions: a native tensor lives from the op that writes it to the last op
  // that reads it.
  constexpr uint64_t kAlign = 64;
  std::vector<int64_t> first(g.tensors.size(), -1), last(g.tensors.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    auto at = static_cast<int64_t>(i);
    for (uint32_t id : g.ops[i].outputs) {
      if (first[id] < 0) first[id] = at;
      last[id] = std::max(last[id], at);
    }
    for (uint32_t id : g.ops[i].inputs) {
      if (first[id] < 0) first[id] = at;
      last[id] = at;
    }
  }
  std::vector<passes::Block> blocks;
  std::vector<uint32_t> ids;
  for (size_t id = 0; id < g.tensors.size(); ++id) {
    QnnTensor& t = g.tensors[id];
    if (t.type != TensorType::kNative) continue;
    uint64_t bytes = t.num_elements() * dtype_size(storage_dtype(t.data_type));
    if (first[id] < 0 || bytes == 0) {
      t.offset = 0;
      continue;
    }
    blocks.push_back({first[id], last[id], bytes});
    ids.push_back(static_cast<uint32_t>(id));
  }
  // One placement; the tensors that end inside VTCM stay there, the rest are placed again in a
  // spill-fill region of their own after it, so that no tensor straddles the two (contexts with
  // use_multi_contexts share one spill-fill buffer).
  std::vector<uint64_t> offsets;
  if (!blocks.empty()) passes::place_greedy_by_size(blocks, kAlign, passes::GapRule::kFirstFit, &offsets);
  const uint64_t vtcm = uint64_t{vtcm_size_mb} << 20;
  uint64_t vtcm_used = 0;
  std::vector<passes::Block> spilled;
  std::vector<uint32_t> spilled_ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (offsets[i] + blocks[i].bytes <= vtcm) {
      g.tensors[ids[i]].offset = offsets[i];
      vtcm_used = std::max(vtcm_used, offsets[i] + blocks[i].bytes);
    } else {
      spilled.push_back(blocks[i]);
      spilled_ids.push_back(ids[i]);
    }
  }
  g.vtcm_bytes = (vtcm_used + kAlign - 1) / kAlign * kAlign;
  std::vector<uint64_t> spill_offsets;
  g.spill_fill_bytes =
      spilled.empty() ? 0 : passes::place_greedy_by_size(spilled, kAlign, passes::GapRule::kFirstFit, &spill_offsets);
  for (size_t k = 0; k < spilled_ids.size(); ++k) g.tensors[spilled_ids[k]].offset = g.vtcm_bytes + spill_offsets[k];
  return g.vtcm_bytes + g.spill_fill_bytes;
}

}  // namespace kiln::htp
