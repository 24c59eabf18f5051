// The xnnpack backend's runtime half. A blob is untrusted: XNNPACK's define calls trust the
// declared output shapes (an output declared too small would be overrun), so every node's output
// shape is inferred here and compared with the declared one before XNNPACK sees the graph.
#include <pthreadpool.h>
#include <xnnpack.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "kiln/backends/xnnpack/xnnpack_runtime.h"
#include "kiln/core/memory.h"
#include "xnnpack_graph_generated.h"

namespace kiln::xnnpack {
namespace {

using Dims = std::vector<size_t>;

Status init_status() {
  static Status status = [] {
    xnn_status s = xnn_initialize(nullptr);
    if (s == xnn_status_success) return Status::Ok();
    if (s == xnn_status_unsupported_hardware) return unsupported("XNNPACK does not support this CPU");
    return internal_error("xnn_initialize failed (status {})", static_cast<int>(s));
  }();
  return status;
}

// What each node kind takes: operand counts (inputs that may be absent), parameter counts.
struct KindInfo {
  const char* name;
  int inputs, optional_inputs, ints, floats;  // ints -1: one per output dim; -2: two per input dim
};

KindInfo kind_info(fb::NodeKind k) {
  using K = fb::NodeKind;
  switch (k) {
    case K::Convolution2d: return {"convolution_2d", 3, 1, 13, 2};
    case K::DepthwiseConvolution2d: return {"depthwise_convolution_2d", 3, 1, 12, 2};
    case K::FullyConnected: return {"fully_connected", 3, 1, 0, 2};
    case K::MaxPooling2d: return {"max_pooling_2d", 1, 0, 10, 2};
    case K::AveragePooling2d: return {"average_pooling_2d", 1, 0, 10, 2};
    case K::GlobalAveragePooling2d: return {"global_average_pooling_2d", 1, 0, 0, 2};
    case K::Add: return {"add2", 2, 0, 0, 2};
    case K::Subtract: return {"subtract", 2, 0, 0, 2};
    case K::Multiply: return {"multiply2", 2, 0, 0, 2};
    case K::Divide: return {"divide", 2, 0, 0, 2};
    case K::Maximum: return {"maximum2", 2, 0, 0, 0};
    case K::Minimum: return {"minimum2", 2, 0, 0, 0};
    case K::Clamp: return {"clamp", 1, 0, 0, 2};
    case K::Sigmoid: return {"sigmoid", 1, 0, 0, 0};
    case K::Hardswish: return {"hardswish", 1, 0, 0, 0};
    case K::LeakyRelu: return {"leaky_relu", 1, 0, 0, 1};
    case K::Elu: return {"elu", 1, 0, 0, 1};
    case K::Abs: return {"abs", 1, 0, 0, 0};
    case K::Negate: return {"negate", 1, 0, 0, 0};
    case K::Floor: return {"floor", 1, 0, 0, 0};
    case K::Ceiling: return {"ceiling", 1, 0, 0, 0};
    case K::SquareRoot: return {"square_root", 1, 0, 0, 0};
    case K::Square: return {"square", 1, 0, 0, 0};
    case K::Prelu: return {"prelu", 2, 0, 0, 0};
    case K::Softmax: return {"softmax", 1, 0, 0, 0};
    case K::StaticReshape: return {"static_reshape", 1, 0, -1, 0};
    case K::StaticConstantPad: return {"static_constant_pad", 1, 0, -2, 1};
    case K::Convert: return {"convert", 1, 0, 0, 0};
    case K::Deconvolution2d: return {"deconvolution_2d", 3, 1, 15, 2};
  }
  return {nullptr, 0, 0, 0, 0};
}

constexpr uint32_t kAbsent = 0xFFFFFFFFu;
constexpr uint64_t kMaxDim = uint64_t{1} << 40;

// One checked value of the blob.
struct Value {
  fb::DataType dtype = fb::DataType::Fp32;
  Dims dims;
  size_t numel = 1;
  size_t esize = 4;  // bytes per element
  const void* data = nullptr;  // static data
  float scale = 1;
  int zero_point = 0;
  std::vector<float> channel_scales;
  size_t channel_dim = 0;
  int input_index = -1, output_index = -1;
  bool nchw = false, caller_uint8 = false;
  uint32_t xnn_id = XNN_INVALID_VALUE_ID;

  bool external() const { return input_index >= 0 || output_index >= 0; }
  // The dtype of the caller's tensor for an external value.
  DType caller_dtype() const { return dtype == fb::DataType::Fp32 ? DType::kF32 : caller_uint8 ? DType::kU8 : DType::kI8; }
};

// Element bytes of the dtypes the delegate defines; 0 for others.
size_t element_size(fb::DataType t) {
  switch (t) {
    case fb::DataType::Fp32: case fb::DataType::QInt32: case fb::DataType::QCInt32: return 4;
    case fb::DataType::QInt8: case fb::DataType::QCInt8: return 1;
    default: return 0;
  }
}

// Window output size, or 0 when the window does not fit.
size_t window_out(size_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  int64_t span = static_cast<int64_t>(in) + p0 + p1 - d * (k - 1) - 1;
  return span < 0 ? 0 : static_cast<size_t>(span / s + 1);
}

// The output shape of node `n` over its inputs' shapes, or an error saying what does not fit.
Result<Dims> infer(fb::NodeKind kind, const std::vector<const Value*>& in, const std::vector<int64_t>& p) {
  using K = fb::NodeKind;
  const Dims& x = in[0]->dims;
  auto need_rank = [&](const Value* v, size_t r, const char* what) -> Status {
    if (v->dims.size() != r) return invalid_argument("{} has rank {}, expected {}", what, v->dims.size(), r);
    return Status::Ok();
  };
  auto positive = [&](size_t from, size_t to) -> Status {
    for (size_t i = from; i < to; ++i) {
      if (p[i] < 1 || p[i] > (1 << 20)) return invalid_argument("parameter {} is {}, expected 1..2^20", i, p[i]);
    }
    return Status::Ok();
  };
  auto window = [&](size_t c_out) -> Result<Dims> {
    for (size_t i = 0; i < 4; ++i) {
      if (p[i] < 0 || p[i] > (1 << 20)) return invalid_argument("padding {} is {}", i, p[i]);
    }
    KILN_RETURN_IF_ERROR(positive(4, 10));
    size_t oh = window_out(x[1], p[4], p[6], p[8], p[0], p[2]);
    size_t ow = window_out(x[2], p[5], p[7], p[9], p[3], p[1]);
    if (oh == 0 || ow == 0) return invalid_argument("the window is larger than the padded input");
    return Dims{x[0], oh, ow, c_out};
  };
  switch (kind) {
    case K::Convolution2d:
    case K::DepthwiseConvolution2d: {
      KILN_RETURN_IF_ERROR(need_rank(in[0], 4, "the input"));
      KILN_RETURN_IF_ERROR(need_rank(in[1], 4, "the filter"));
      KILN_RETURN_IF_ERROR(positive(10, p.size()));
      const Dims& f = in[1]->dims;
      const bool dw = kind == K::DepthwiseConvolution2d;
      size_t cin = dw ? size_t(p[11]) : size_t(p[10] * p[11]);
      size_t cout = dw ? size_t(p[10] * p[11]) : size_t(p[10] * p[12]);
      Dims want_f = dw ? Dims{1, size_t(p[4]), size_t(p[5]), cout} : Dims{cout, size_t(p[4]), size_t(p[5]), size_t(p[11])};
      if (x[3] != cin) return invalid_argument("the input has {} channels, expected {}", x[3], cin);
      if (f != want_f) return invalid_argument("the filter's shape does not match the kernel and channels");
      if (in[2] != nullptr && in[2]->dims != Dims{cout}) return invalid_argument("the bias is not one value per output channel");
      return window(cout);
    }
    case K::Deconvolution2d: {
      // p: padding t/r/b/l, adjustment h/w, kernel h/w, upsampling h/w, dilation h/w, groups,
      // group input/output channels.
      KILN_RETURN_IF_ERROR(need_rank(in[0], 4, "the input"));
      KILN_RETURN_IF_ERROR(need_rank(in[1], 4, "the filter"));
      for (size_t i = 0; i < 6; ++i) {
        if (p[i] < 0 || p[i] > (1 << 20)) return invalid_argument("padding or adjustment {} is {}", i, p[i]);
      }
      KILN_RETURN_IF_ERROR(positive(6, p.size()));
      if (p[4] >= p[8] || p[5] >= p[9]) return invalid_argument("an adjustment not below the upsampling factor");
      const size_t cin = size_t(p[12] * p[13]), cout = size_t(p[12] * p[14]);
      if (x[3] != cin) return invalid_argument("the input has {} channels, expected {}", x[3], cin);
      if (in[1]->dims != Dims{cout, size_t(p[6]), size_t(p[7]), size_t(p[13])}) {
        return invalid_argument("the filter's shape does not match the kernel and channels");
      }
      if (in[2] != nullptr && in[2]->dims != Dims{cout}) return invalid_argument("the bias is not one value per output channel");
      auto up = [&](size_t in_size, int64_t adj, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) -> int64_t {
        return s * (int64_t(in_size) - 1) + adj + d * (k - 1) + 1 - p0 - p1;
      };
      int64_t oh = up(x[1], p[4], p[6], p[8], p[10], p[0], p[2]), ow = up(x[2], p[5], p[7], p[9], p[11], p[3], p[1]);
      if (oh < 1 || ow < 1 || uint64_t(oh) > kMaxDim || uint64_t(ow) > kMaxDim) {
        return invalid_argument("the padding leaves an output of {}x{}", oh, ow);
      }
      return Dims{x[0], size_t(oh), size_t(ow), cout};
    }
    case K::FullyConnected: {
      KILN_RETURN_IF_ERROR(need_rank(in[1], 2, "the filter"));
      const Dims& f = in[1]->dims;
      if (x.empty() || x.back() != f[1]) return invalid_argument("the input's last dim does not match the filter's");
      if (in[2] != nullptr && in[2]->dims != Dims{f[0]}) return invalid_argument("the bias is not one value per output");
      Dims y = x;
      y.back() = f[0];
      return y;
    }
    case K::MaxPooling2d:
    case K::AveragePooling2d:
      KILN_RETURN_IF_ERROR(need_rank(in[0], 4, "the input"));
      if (p[4] * p[5] <= 1) return invalid_argument("a pooling window of one element");
      if (kind == K::AveragePooling2d && (p[8] != 1 || p[9] != 1)) return invalid_argument("average pooling with dilation");
      return window(x[3]);
    case K::GlobalAveragePooling2d:
      KILN_RETURN_IF_ERROR(need_rank(in[0], 4, "the input"));
      return Dims{x[0], 1, 1, x[3]};
    case K::Add: case K::Subtract: case K::Multiply: case K::Divide: case K::Maximum: case K::Minimum: {
      const Dims& a = in[0]->dims;
      const Dims& b = in[1]->dims;
      Dims y(std::max(a.size(), b.size()));
      for (size_t i = 0; i < y.size(); ++i) {
        size_t da = i < y.size() - a.size() ? 1 : a[i - (y.size() - a.size())];
        size_t db = i < y.size() - b.size() ? 1 : b[i - (y.size() - b.size())];
        if (da != db && da != 1 && db != 1) return invalid_argument("the operands do not broadcast");
        y[i] = std::max(da, db);
      }
      return y;
    }
    case K::Prelu:
      if (x.empty() || in[1]->dims != Dims{x.back()}) return invalid_argument("the slope is not one value per channel");
      return x;
    case K::StaticReshape: {
      Dims y;
      size_t numel = 1;
      for (int64_t d : p) {
        if (d < 1 || uint64_t(d) > kMaxDim) return invalid_argument("new shape dim {}", d);
        y.push_back(size_t(d));
        if (__builtin_mul_overflow(numel, size_t(d), &numel)) return invalid_argument("the new shape overflows");
      }
      if (numel != in[0]->numel) return invalid_argument("the new shape has {} elements, the input {}", numel, in[0]->numel);
      return y;
    }
    case K::StaticConstantPad: {
      Dims y = x;
      for (size_t i = 0; i < x.size(); ++i) {
        if (p[i] < 0 || p[x.size() + i] < 0 || p[i] > (1 << 20) || p[x.size() + i] > (1 << 20)) return invalid_argument("padding out of range");
        y[i] += size_t(p[i] + p[x.size() + i]);
      }
      return y;
    }
    default:
      return x;  // elementwise unary, softmax, convert
  }
}

std::string dims_text(const Dims& d) { return fmt::format("[{}]", fmt::join(d, ", ")); }

// NCHW <-> NHWC of planes of 4- or 1-byte elements, [n][a][b] -> [n][b][a], in tiles of kTile
// destination rows spread over the delegate's pool. Each tile writes its rows contiguously and
// reads columns a short stride apart: the other order writes a page apart per element when a
// channel count is small beside H*W, and ran at a seventh of the speed. `flip` (bytes only)
// xors each element with 0x80: int8 <-> uint8 codes.
template <typename T>
struct Transpose {
  static constexpr size_t kTile = 64;
  const T* src;
  T* dst;
  size_t a, b, tiles_per_plane;
  T flip;

  static void tile(void* context, size_t task) {
    const auto& t = *static_cast<const Transpose*>(context);
    const size_t plane = task / t.tiles_per_plane;
    const size_t b0 = task % t.tiles_per_plane * kTile, b1 = std::min(t.b, b0 + kTile);
    const T* s = t.src + plane * t.a * t.b;
    T* d = t.dst + plane * t.a * t.b;
    for (size_t a0 = 0; a0 < t.a; a0 += kTile) {
      const size_t a1 = std::min(t.a, a0 + kTile);
      for (size_t bi = b0; bi < b1; ++bi) {
        T* row = d + bi * t.a;
        const T* col = s + bi;
        for (size_t ai = a0; ai < a1; ++ai) row[ai] = col[ai * t.b] ^ t.flip;
      }
    }
  }
};

template <typename T>
void transpose_planes(pthreadpool* pool, const T* src, T* dst, size_t n, size_t a, size_t b, T flip) {
  Transpose<T> t{src, dst, a, b, (b + Transpose<T>::kTile - 1) / Transpose<T>::kTile, flip};
  const size_t tasks = n * t.tiles_per_plane;
  constexpr size_t kParallelElements = size_t{1} << 15;  // below this, a dispatch costs more than it saves
  if (n * a * b < kParallelElements) {
    for (size_t i = 0; i < tasks; ++i) Transpose<T>::tile(&t, i);
  } else {
    pthreadpool_parallelize_1d(pool, &Transpose<T>::tile, &t, tasks, 0);
  }
}

// Copies an external value between the caller's layout and the delegate's: NCHW <-> NHWC for
// rank-4 values, int8 <-> uint8 codes for caller_uint8 ones.
template <typename T>
void copy_boundary(pthreadpool* pool, const Value& v, const void* src, void* dst, bool into_delegate, T flip) {
  const T* s = static_cast<const T*>(src);
  T* d = static_cast<T*>(dst);
  if (!v.nchw) {
    for (size_t i = 0; i < v.numel; ++i) d[i] = s[i] ^ flip;
    return;
  }
  const size_t hw = v.dims[1] * v.dims[2], c = v.dims[3];
  if (into_delegate) {
    transpose_planes(pool, s, d, v.dims[0], c, hw, flip);
  } else {
    transpose_planes(pool, s, d, v.dims[0], hw, c, flip);
  }
}

void copy_boundary(pthreadpool* pool, const Value& v, const void* src, void* dst, bool into_delegate) {
  if (v.esize == 4) {
    copy_boundary<uint32_t>(pool, v, src, dst, into_delegate, 0);
  } else {
    copy_boundary<uint8_t>(pool, v, src, dst, into_delegate, v.caller_uint8 ? 0x80 : 0);
  }
}

// One pthreadpool per thread count for the whole process, kept while a delegate uses it: a
// method with many delegates (and several methods) must not put a pool of spinning workers per
// delegate on the same cores.
std::shared_ptr<pthreadpool> shared_pool(int threads) {
  static std::mutex mu;
  static std::map<int, std::weak_ptr<pthreadpool>> pools;
  std::lock_guard<std::mutex> lock(mu);
  if (auto p = pools[threads].lock()) return p;
  std::shared_ptr<pthreadpool> p(pthreadpool_create(static_cast<size_t>(threads)), pthreadpool_destroy);
  pools[threads] = p;
  return p;
}

std::vector<int64_t> nchw_shape(const Value& v) {
  std::vector<int64_t> s(v.dims.begin(), v.dims.end());
  if (v.nchw) s = {s[0], s[3], s[1], s[2]};
  return s;
}

}  // namespace

Status xnnpack_available() { return init_status(); }

struct XnnpackDelegate::State {
  std::shared_ptr<const void> owner;
  std::vector<uint8_t> data_copy;  // the static data when the blob's is not 4-byte aligned
  std::vector<Value> values;
  std::vector<uint32_t> inputs, outputs;  // value indices
  std::vector<std::vector<uint8_t>> staging;  // per external value: the NHWC or padded copy
  std::vector<xnn_external_value> externals;
  std::shared_ptr<pthreadpool> pool;  // shared by every delegate of that thread count
  xnn_runtime_t runtime = nullptr;

  ~State() {
    if (runtime != nullptr) xnn_delete_runtime(runtime);
  }
};

XnnpackDelegate::XnnpackDelegate(std::unique_ptr<State> state) : state_(std::move(state)) {}
XnnpackDelegate::XnnpackDelegate(XnnpackDelegate&&) noexcept = default;
XnnpackDelegate& XnnpackDelegate::operator=(XnnpackDelegate&&) noexcept = default;
XnnpackDelegate::~XnnpackDelegate() = default;
size_t XnnpackDelegate::num_inputs() const { return state_->inputs.size(); }
size_t XnnpackDelegate::num_outputs() const { return state_->outputs.size(); }
std::vector<int64_t> XnnpackDelegate::input_shape(size_t i) const { return nchw_shape(state_->values[state_->inputs[i]]); }

namespace {

Status fail(const std::string& what) { return invalid_argument("xnnpack delegate: {}", what); }

// Reads and checks the values of `g` into `st` (static data pointing into `data`).
Status read_values(const fb::Graph& g, const uint8_t* data, size_t data_size, XnnpackDelegate::State& st) {
  const size_t num = g.values() ? g.values()->size() : 0;
  for (size_t i = 0; i < num; ++i) {
    const fb::Value* v = g.values()->Get(static_cast<flatbuffers::uoffset_t>(i));
    Value val;
    auto where = [&](const std::string& why) { return fail(fmt::format("value #{}: {}", i, why)); };
    val.dtype = v->dtype();
    val.esize = element_size(val.dtype);
    if (val.esize == 0 || val.dtype == fb::DataType::QInt32) {
      return where(fmt::format("dtype {} is not one this build runs (fp32, qint8, qcint8, qcint32)", static_cast<int>(v->dtype())));
    }
    if (v->dims() == nullptr || v->dims()->size() == 0 || v->dims()->size() > XNN_MAX_TENSOR_DIMS) {
      return where(fmt::format("rank {} (expected 1 to {})", v->dims() ? v->dims()->size() : 0, XNN_MAX_TENSOR_DIMS));
    }
    for (uint64_t d : *v->dims()) {
      if (d == 0 || d > kMaxDim) return where(fmt::format("dim {} (expected 1 to 2^40)", d));
      val.dims.push_back(static_cast<size_t>(d));
      if (__builtin_mul_overflow(val.numel, static_cast<size_t>(d), &val.numel) || val.numel > (size_t{1} << 40)) {
        return where("its element count overflows");
      }
    }
    KILN_RETURN_IF_ERROR(check_memory(val.numel * val.esize, fmt::format("xnnpack delegate value #{}", i)));
    if (v->data_size() != 0) {
      if (v->data_size() != val.numel * val.esize) {
        return where(fmt::format("static data of {} bytes for {} elements of {} bytes", v->data_size(), val.numel, val.esize));
      }
      if (v->data_offset() > data_size || data_size - v->data_offset() < v->data_size() || v->data_offset() % val.esize != 0) {
        return where(fmt::format("static data [{}, +{}) is outside the blob's {} data bytes", v->data_offset(), v->data_size(), data_size));
      }
      val.data = data + v->data_offset();
    }
    auto good_scale = [](float x) { return std::isfinite(x) && x > 0; };
    if (val.dtype == fb::DataType::QInt8) {
      val.scale = v->scale();
      val.zero_point = v->zero_point();
      if (!good_scale(val.scale) || val.zero_point < -128 || val.zero_point > 127) {
        return where(fmt::format("int8 quantization scale {} and zero point {} (expected a positive scale and -128..127)",
                                 val.scale, val.zero_point));
      }
    } else if (val.dtype != fb::DataType::Fp32) {
      val.channel_dim = v->channel_dim();
      if (val.channel_dim >= val.dims.size() || v->channel_scales() == nullptr ||
          v->channel_scales()->size() != val.dims[val.channel_dim]) {
        return where("per-channel scales are not one per element of the channel dim");
      }
      val.channel_scales.assign(v->channel_scales()->begin(), v->channel_scales()->end());
      if (!std::all_of(val.channel_scales.begin(), val.channel_scales.end(), good_scale)) return where("a per-channel scale is not positive");
      if (val.data == nullptr) return where("per-channel quantized values must be static");
    }
    val.input_index = v->input_index();
    val.output_index = v->output_index();
    val.nchw = v->nchw();
    val.caller_uint8 = v->caller_uint8();
    if (val.external() && val.dtype != fb::DataType::Fp32 && val.dtype != fb::DataType::QInt8) {
      return where("a delegate input or output must be fp32 or qint8");
    }
    if (val.caller_uint8 && (val.dtype != fb::DataType::QInt8 || !val.external())) {
      return where("caller_uint8 is only for qint8 delegate inputs and outputs");
    }
    if (val.input_index >= 0 && val.output_index >= 0) return where("it is both a delegate input and output");
    if (val.data != nullptr && (val.input_index >= 0 || val.output_index >= 0)) return where("static data on a delegate input or output");
    if (val.nchw && (val.dims.size() != 4 || (val.input_index < 0 && val.output_index < 0))) {
      return where("nchw is only for rank-4 delegate inputs and outputs");
    }
    st.values.push_back(std::move(val));
  }
  auto io = [&](const flatbuffers::Vector<uint32_t>* ids, std::vector<uint32_t>* out, bool input) -> Status {
    if (ids == nullptr) return Status::Ok();
    for (uint32_t k = 0; k < ids->size(); ++k) {
      uint32_t id = ids->Get(k);
      if (id >= st.values.size() || (input ? st.values[id].input_index : st.values[id].output_index) != int(k)) {
        return fail(fmt::format("{} {} names value {}, which is not marked as that {}", input ? "input" : "output", k, id,
                                input ? "input" : "output"));
      }
      out->push_back(id);
    }
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(io(g.inputs(), &st.inputs, true));
  KILN_RETURN_IF_ERROR(io(g.outputs(), &st.outputs, false));
  for (size_t i = 0; i < st.values.size(); ++i) {
    const Value& v = st.values[i];
    if ((v.input_index >= 0 && size_t(v.input_index) >= st.inputs.size()) ||
        (v.output_index >= 0 && size_t(v.output_index) >= st.outputs.size())) {
      return fail(fmt::format("value #{}: its input or output index is out of range", i));
    }
  }
  return Status::Ok();
}

// Defines value `v` in the subgraph.
Status define_value(xnn_subgraph_t sg, Value& v, uint32_t num_inputs) {
  uint32_t external = XNN_INVALID_VALUE_ID, flags = 0;
  if (v.input_index >= 0) external = uint32_t(v.input_index), flags = XNN_VALUE_FLAG_EXTERNAL_INPUT;
  if (v.output_index >= 0) external = num_inputs + uint32_t(v.output_index), flags = XNN_VALUE_FLAG_EXTERNAL_OUTPUT;
  xnn_status s;
  switch (v.dtype) {
    case fb::DataType::Fp32:
      s = xnn_define_tensor_value(sg, xnn_datatype_fp32, v.dims.size(), v.dims.data(), v.data, external, flags, &v.xnn_id);
      break;
    case fb::DataType::QInt8:
      s = xnn_define_quantized_tensor_value(sg, xnn_datatype_qint8, v.zero_point, v.scale, v.dims.size(), v.dims.data(), v.data,
                                            external, flags, &v.xnn_id);
      break;
    default:
      s = xnn_define_channelwise_quantized_tensor_value(sg, v.dtype == fb::DataType::QCInt8 ? xnn_datatype_qcint8 : xnn_datatype_qcint32,
                                                        v.channel_scales.data(), v.dims.size(), v.channel_dim, v.dims.data(),
                                                        v.data, external, flags, &v.xnn_id);
      break;
  }
  if (s != xnn_status_success) return internal_error("xnn_define_tensor_value failed (status {})", int(s));
  return Status::Ok();
}

xnn_status define_node(xnn_subgraph_t sg, fb::NodeKind kind, const std::vector<uint32_t>& in, uint32_t out,
                       const std::vector<int64_t>& p, const std::vector<float>& f) {
  using K = fb::NodeKind;
  auto u = [&](size_t i) { return static_cast<uint32_t>(p[i]); };
  switch (kind) {
    case K::Convolution2d:
      return xnn_define_convolution_2d(sg, u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9), u(10), size_t(p[11]),
                                       size_t(p[12]), f[0], f[1], in[0], in[1], in[2], out, 0);
    case K::DepthwiseConvolution2d:
      return xnn_define_depthwise_convolution_2d(sg, u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9), u(10),
                                                 size_t(p[11]), f[0], f[1], in[0], in[1], in[2], out, 0);
    case K::FullyConnected: return xnn_define_fully_connected(sg, f[0], f[1], in[0], in[1], in[2], out, 0);
    case K::MaxPooling2d:
      return xnn_define_max_pooling_2d(sg, u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9), f[0], f[1], in[0], out, 0);
    case K::AveragePooling2d:
      return xnn_define_average_pooling_2d(sg, u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), f[0], f[1], in[0], out, 0);
    case K::GlobalAveragePooling2d: return xnn_define_global_average_pooling_2d(sg, f[0], f[1], in[0], out, 0);
    case K::Add: return xnn_define_add2(sg, f[0], f[1], in[0], in[1], out, 0);
    case K::Subtract: return xnn_define_subtract(sg, f[0], f[1], in[0], in[1], out, 0);
    case K::Multiply: return xnn_define_multiply2(sg, f[0], f[1], in[0], in[1], out, 0);
    case K::Divide: return xnn_define_divide(sg, f[0], f[1], in[0], in[1], out, 0);
    case K::Maximum: return xnn_define_maximum2(sg, in[0], in[1], out, 0);
    case K::Minimum: return xnn_define_minimum2(sg, in[0], in[1], out, 0);
    case K::Clamp: return xnn_define_clamp(sg, f[0], f[1], in[0], out, 0);
    case K::Sigmoid: return xnn_define_sigmoid(sg, in[0], out, 0);
    case K::Hardswish: return xnn_define_hardswish(sg, in[0], out, 0);
    case K::LeakyRelu: return xnn_define_leaky_relu(sg, f[0], in[0], out, 0);
    case K::Elu: return xnn_define_elu(sg, f[0], in[0], out, 0);
    case K::Abs: return xnn_define_abs(sg, in[0], out, 0);
    case K::Negate: return xnn_define_negate(sg, in[0], out, 0);
    case K::Floor: return xnn_define_floor(sg, in[0], out, 0);
    case K::Ceiling: return xnn_define_ceiling(sg, in[0], out, 0);
    case K::SquareRoot: return xnn_define_square_root(sg, in[0], out, 0);
    case K::Square: return xnn_define_square(sg, in[0], out, 0);
    case K::Prelu: return xnn_define_prelu(sg, in[0], in[1], out, 0);
    case K::Softmax: return xnn_define_softmax(sg, in[0], out, 0);
    case K::StaticReshape: {
      std::vector<size_t> shape(p.begin(), p.end());
      return xnn_define_static_reshape(sg, shape.size(), shape.data(), in[0], out, 0);
    }
    case K::StaticConstantPad: {
      size_t r = p.size() / 2;
      std::vector<size_t> pre(p.begin(), p.begin() + long(r)), post(p.begin() + long(r), p.end());
      return xnn_define_static_constant_pad(sg, pre.data(), post.data(), f[0], in[0], out, 0);
    }
    case K::Convert: return xnn_define_convert(sg, in[0], out, 0);
    case K::Deconvolution2d:
      return xnn_define_deconvolution_2d(sg, u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9), u(10), u(11), u(12),
                                         size_t(p[13]), size_t(p[14]), f[0], f[1], in[0], in[1], in[2], out, 0);
  }
  return xnn_status_invalid_parameter;
}

// The dtypes a node may combine: fp32 throughout; a convert between fp32 and qint8; or a
// quantized operator: qint8 activations (the same parameters in and out where the operator does
// not requantize), with a qcint8 filter and qcint32 bias for a convolution.
Status check_types(fb::NodeKind kind, const std::vector<const Value*>& in, const Value& out) {
  using K = fb::NodeKind;
  using T = fb::DataType;
  const T x = in[0]->dtype;
  if (kind == K::Convert) {
    if ((x == T::Fp32 && out.dtype == T::QInt8) || (x == T::QInt8 && out.dtype == T::Fp32)) return Status::Ok();
    return invalid_argument("a convert is between fp32 and qint8");
  }
  const bool weighted = kind == K::Convolution2d || kind == K::DepthwiseConvolution2d || kind == K::Deconvolution2d ||
                        kind == K::FullyConnected;
  if (x == T::Fp32) {
    for (const Value* v : in) {
      if (v != nullptr && v->dtype != T::Fp32) return invalid_argument("it mixes fp32 and quantized operands");
    }
    if (out.dtype != T::Fp32) return invalid_argument("an fp32 operator with a quantized output");
    return Status::Ok();
  }
  if (x != T::QInt8 || out.dtype != T::QInt8) return invalid_argument("quantized operators take and give qint8 activations");
  if (weighted) {
    if (kind != K::Convolution2d && kind != K::DepthwiseConvolution2d) return invalid_argument("no quantized form in this delegate");
    const size_t channel_dim = kind == K::DepthwiseConvolution2d ? 3 : 0;
    if (in[1]->dtype != T::QCInt8 || in[1]->channel_dim != channel_dim) {
      return invalid_argument("a quantized convolution's filter is qcint8 with a scale per output channel");
    }
    if (in[2] != nullptr && (in[2]->dtype != T::QCInt32 || in[2]->channel_dim != 0)) {
      return invalid_argument("a quantized convolution's bias is qcint32 with a scale per output channel");
    }
    return Status::Ok();
  }
  for (const Value* v : in) {
    if (v->dtype != T::QInt8) return invalid_argument("it mixes qint8 and other operands");
  }
  switch (kind) {
    case K::MaxPooling2d: case K::Clamp: case K::StaticReshape:
      if (in[0]->scale != out.scale || in[0]->zero_point != out.zero_point) {
        return invalid_argument("its quantized input and output must share scale and zero point");
      }
      return Status::Ok();
    case K::Add: case K::GlobalAveragePooling2d:
      return Status::Ok();
    default:
      return invalid_argument("no quantized form in this delegate");
  }
}

struct SubgraphDeleter {
  void operator()(xnn_subgraph* sg) const { xnn_delete_subgraph(sg); }
};

// Checks every node of `g` and defines values and nodes in a new subgraph.
Result<std::unique_ptr<xnn_subgraph, SubgraphDeleter>> build_subgraph(const fb::Graph& g, XnnpackDelegate::State& st) {
  const uint32_t num_inputs = uint32_t(st.inputs.size());
  xnn_subgraph_t raw = nullptr;
  if (xnn_create_subgraph(num_inputs + uint32_t(st.outputs.size()), 0, &raw) != xnn_status_success) {
    return internal_error("xnnpack delegate: xnn_create_subgraph failed");
  }
  std::unique_ptr<xnn_subgraph, SubgraphDeleter> sg(raw);
  for (Value& v : st.values) KILN_RETURN_IF_ERROR(define_value(sg.get(), v, num_inputs));
  // A value is ready once static, a delegate input, or written by an earlier node; each
  // non-static value is written once.
  std::vector<char> ready(st.values.size());
  for (size_t i = 0; i < st.values.size(); ++i) ready[i] = st.values[i].data != nullptr || st.values[i].input_index >= 0;
  const size_t num_nodes = g.nodes() ? g.nodes()->size() : 0;
  for (size_t k = 0; k < num_nodes; ++k) {
    const fb::Node* n = g.nodes()->Get(flatbuffers::uoffset_t(k));
    const std::string name = n->name() ? n->name()->str() : std::string();
    auto where = [&](const std::string& why) { return fail(fmt::format("node #{} '{}': {}", k, name, why)); };
    KindInfo info = kind_info(n->kind());
    if (info.name == nullptr) return where(fmt::format("unknown node kind {}", int(n->kind())));
    const size_t nin = n->inputs() ? n->inputs()->size() : 0;
    if (nin != size_t(info.inputs)) return where(fmt::format("{} takes {} inputs, got {}", info.name, info.inputs, nin));
    if (!n->outputs() || n->outputs()->size() != 1) return where(fmt::format("{} has one output", info.name));
    std::vector<uint32_t> in_ids;
    std::vector<const Value*> in_vals;
    for (size_t i = 0; i < nin; ++i) {
      uint32_t id = n->inputs()->Get(flatbuffers::uoffset_t(i));
      if (id == kAbsent && int(i) >= info.inputs - info.optional_inputs) {
        in_ids.push_back(XNN_INVALID_VALUE_ID);
        in_vals.push_back(nullptr);
        continue;
      }
      if (id >= st.values.size()) return where(fmt::format("input {} names value {} of {}", i, id, st.values.size()));
      if (!ready[id]) return where(fmt::format("input {} (value #{}) is read before it is written", i, id));
      in_ids.push_back(st.values[id].xnn_id);
      in_vals.push_back(&st.values[id]);
    }
    const bool weighted = n->kind() == fb::NodeKind::Convolution2d || n->kind() == fb::NodeKind::DepthwiseConvolution2d ||
                          n->kind() == fb::NodeKind::Deconvolution2d || n->kind() == fb::NodeKind::FullyConnected;
    if (weighted && (in_vals[1]->data == nullptr || (in_vals[2] != nullptr && in_vals[2]->data == nullptr))) {
      return where("its filter and bias must be static data");
    }
    uint32_t out = n->outputs()->Get(0);
    if (out >= st.values.size()) return where(fmt::format("output names value {} of {}", out, st.values.size()));
    if (ready[out]) return where(fmt::format("output value #{} is already written (static, an input, or an earlier node's)", out));
    std::vector<int64_t> p = n->ints() ? std::vector<int64_t>(n->ints()->begin(), n->ints()->end()) : std::vector<int64_t>{};
    std::vector<float> f = n->floats() ? std::vector<float>(n->floats()->begin(), n->floats()->end()) : std::vector<float>{};
    size_t want_ints = info.ints == -1 ? st.values[out].dims.size() : info.ints == -2 ? 2 * in_vals[0]->dims.size() : size_t(info.ints);
    if (p.size() != want_ints || f.size() != size_t(info.floats)) {
      return where(fmt::format("{} takes {} integer and {} float parameters, got {} and {}", info.name, want_ints, info.floats,
                               p.size(), f.size()));
    }
    if (info.floats == 2 && !(f[0] < f[1])) return where("its output range is empty");
    if (Status t = check_types(n->kind(), in_vals, st.values[out]); !t.ok()) return where(t.message());
    auto shape = infer(n->kind(), in_vals, p);
    if (!shape.ok()) return where(shape.status().message());
    if (*shape != st.values[out].dims) {
      return where(fmt::format("its output value #{} is declared {}, but {} computes {}", out, dims_text(st.values[out].dims),
                               info.name, dims_text(*shape)));
    }
    xnn_status s = define_node(sg.get(), n->kind(), in_ids, st.values[out].xnn_id, p, f);
    if (s != xnn_status_success) return where(fmt::format("XNNPACK rejects it (xnn_define_{}: status {})", info.name, int(s)));
    ready[out] = 1;
  }
  for (uint32_t id : st.outputs) {
    if (!ready[id]) return fail(fmt::format("output value #{} is never written", id));
  }
  return sg;
}

}  // namespace

Result<XnnpackDelegate> XnnpackDelegate::init(std::span<const uint8_t> blob, std::shared_ptr<const void> owner,
                                              int num_threads) {
  KILN_RETURN_IF_ERROR(init_status().with_context("xnnpack delegate"));
  if (blob.size() < 8 || !fb::GraphBufferHasIdentifier(blob.data())) {
    return fail(fmt::format("the blob ({} bytes) is not an XNNPACK graph (no 'KXNN' identifier)", blob.size()));
  }
  flatbuffers::Verifier verifier(blob.data(), blob.size());
  if (!fb::VerifyGraphBuffer(verifier)) return fail("the blob's flatbuffer is malformed");
  const fb::Graph& g = *fb::GetGraph(blob.data());
  if (g.version() != kBlobVersion) {
    return fail(fmt::format("blob version {}; this build reads version {} (recompile the model)", g.version(), kBlobVersion));
  }
  auto st = std::make_unique<State>();
  st->owner = std::move(owner);
  const uint8_t* data = g.data() ? g.data()->data() : nullptr;
  size_t data_size = g.data() ? g.data()->size() : 0;
  // XNNPACK reads static operands in place, up to XNN_EXTRA_BYTES past their end: keep the data
  // where it is only when aligned and followed by that many bytes of the blob.
  if (data != nullptr && (reinterpret_cast<uintptr_t>(data) % 4 != 0 || blob.data() + blob.size() - (data + data_size) < XNN_EXTRA_BYTES)) {
    st->data_copy.assign(data, data + data_size);
    st->data_copy.resize(data_size + XNN_EXTRA_BYTES + 4);
    size_t shift = (4 - reinterpret_cast<uintptr_t>(st->data_copy.data()) % 4) % 4;
    std::memmove(st->data_copy.data() + shift, st->data_copy.data(), data_size);
    data = st->data_copy.data() + shift;
  }
  KILN_RETURN_IF_ERROR(read_values(g, data, data_size, *st));
  KILN_ASSIGN_OR_RETURN(auto sg, build_subgraph(g, *st));
  if (num_threads > 1) st->pool = shared_pool(num_threads);
  xnn_status s = xnn_create_runtime_v2(sg.get(), st->pool.get(), 0, &st->runtime);
  if (s != xnn_status_success) return fail(fmt::format("xnn_create_runtime_v2 failed (status {})", int(s)));
  // Boundary buffers: an NHWC copy of each NCHW input and output, a padded copy of the other
  // inputs (XNNPACK may read XNN_EXTRA_BYTES past an input's end).
  for (uint32_t id : st->inputs) st->staging.emplace_back(st->values[id].numel * st->values[id].esize + XNN_EXTRA_BYTES);
  for (uint32_t id : st->outputs) st->staging.emplace_back(st->values[id].numel * st->values[id].esize + XNN_EXTRA_BYTES);
  size_t k = 0;
  for (uint32_t id : st->inputs) st->externals.push_back({st->values[id].xnn_id, st->staging[k++].data()});
  for (uint32_t id : st->outputs) st->externals.push_back({st->values[id].xnn_id, st->staging[k++].data()});
  s = xnn_setup_runtime(st->runtime, st->externals.size(), st->externals.data());
  if (s != xnn_status_success) return fail(fmt::format("xnn_setup_runtime failed (status {})", int(s)));
  return XnnpackDelegate(std::move(st));
}

Status XnnpackDelegate::execute(std::span<const Tensor> inputs, portable::KernelContext& ctx, std::vector<Tensor>* outputs) {
  State& st = *state_;
  if (inputs.size() != st.inputs.size()) {
    return invalid_argument("xnnpack delegate: {} inputs given, it takes {}", inputs.size(), st.inputs.size());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = st.values[st.inputs[i]];
    const Tensor& t = inputs[i];
    if (t.dtype() != v.caller_dtype() || t.shape() != nchw_shape(v)) {
      return invalid_argument("xnnpack delegate: input {} is {} {}, expected {} [{}]", i, dtype_name(t.dtype()),
                              fmt::format("[{}]", fmt::join(t.shape(), ", ")), dtype_name(v.caller_dtype()),
                              fmt::join(nchw_shape(v), ", "));
    }
    copy_boundary(st.pool.get(), v, t.data(), st.staging[i].data(), true);
  }
  xnn_status s = xnn_invoke_runtime(st.runtime);
  if (s != xnn_status_success) return internal_error("xnnpack delegate: xnn_invoke_runtime failed (status {})", int(s));
  for (size_t o = 0; o < st.outputs.size(); ++o) {
    const Value& v = st.values[st.outputs[o]];
    Tensor t = ctx.allocate(v.caller_dtype(), nchw_shape(v));
    copy_boundary(st.pool.get(), v, st.staging[st.inputs.size() + o].data(), portable::writable<uint8_t>(t), false);
    outputs->push_back(std::move(t));
  }
  return Status::Ok();
}

namespace {

class XnnpackHandle final : public runtime::DelegateHandle {
 public:
  explicit XnnpackHandle(XnnpackDelegate d) : delegate(std::move(d)) {}
  XnnpackDelegate delegate;
};

class XnnpackRuntimeBackend final : public runtime::BackendInterface {
 public:
  std::string_view id() const override { return kBackendId; }
  bool is_available() const override { return init_status().ok(); }
  Result<std::unique_ptr<runtime::DelegateHandle>> init(const runtime::BackendInitContext& ctx, std::span<const uint8_t> blob,
                                                        std::span<const runtime::CompileSpecView> /*specs*/) const override {
    auto d = XnnpackDelegate::init(blob, ctx.blob_owner, ctx.num_threads);
    if (!d.ok()) return d.status().with_context(fmt::format("delegate '{}'", ctx.delegate));
    return std::unique_ptr<runtime::DelegateHandle>(new XnnpackHandle(std::move(d).value()));
  }
  Status execute(runtime::DelegateHandle& handle, runtime::BackendExecutionContext& ctx, std::span<const Tensor> inputs,
                 std::vector<Tensor>* outputs) const override {
    return static_cast<XnnpackHandle&>(handle).delegate.execute(inputs, ctx, outputs);
  }
};

}  // namespace

std::unique_ptr<runtime::BackendInterface> make_xnnpack_runtime_backend() {
  return std::make_unique<XnnpackRuntimeBackend>();
}

}  // namespace kiln::xnnpack
