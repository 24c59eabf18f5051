// HtpExecutor: loads one graph of a context (plans it when it came online-prepared), runs its
// ops in order over one working memory, profiles and dumps on request; and the runtime backend.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include "backends/portable/thread_pool.h"
#include "kiln/backends/htp/htp_runtime.h"
#include "ops.h"

namespace kiln::htp {
namespace {

// Float kernels' temporaries come from the heap; their parallel loops from the executor's pool.
class PoolContext final : public portable::KernelContext {
 public:
  explicit PoolContext(int threads) : pool_(threads) {}
  Tensor allocate(DType dtype, std::vector<int64_t> shape) override { return Tensor(dtype, std::move(shape)); }
  int num_threads() const override { return pool_.threads(); }
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    pool_.parallel_for(n, fn);
  }

 private:
  portable::ThreadPool pool_;
};

// The process's shared spill-fill buffer: executors hold it, the registry only watches it.
struct SpillFill {
  std::shared_ptr<HeapStorage> storage;
  std::mutex running;  // contexts that share it execute one at a time
};

std::mutex g_spill_mu;
std::weak_ptr<SpillFill> g_spill;

std::shared_ptr<SpillFill> acquire_spill_fill(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(g_spill_mu);
  if (auto s = g_spill.lock(); s != nullptr && s->storage->size() >= bytes) return s;
  auto fresh = std::make_shared<SpillFill>();
  fresh->storage = HeapStorage::try_allocate(std::max<uint64_t>(bytes, 64));
  if (fresh->storage == nullptr) return nullptr;
  g_spill = fresh;
  return fresh;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Result<Tensor> materialize_static(const QnnTensor& t, const StaticData& data) {
  std::vector<int64_t> shape(t.dims.begin(), t.dims.end());
  if (t.data_type == QnnDataType::kFloat16) {
    // Halves widen to f32 once: the float kernels compute on f32 holding half values.
    Tensor out(DType::kF32, shape);
    const auto* h = reinterpret_cast<const uint16_t*>(data.bytes().data());
    float* f = out.mutable_data_as<float>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      uint16_t v;
      std::memcpy(&v, h + i, 2);
      f[i] = half_to_float(v);
    }
    return out;
  }
  DType dtype = storage_dtype(t.data_type);
  auto bytes = data.bytes();
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 32 == 0) {
    // Viewed in place (the context keeps the bytes alive).
    auto storage = std::make_shared<ExternalStorage>(bytes.data(), bytes.size(), nullptr);
    return Tensor(dtype, std::move(shape), std::move(storage));
  }
  Tensor out(dtype, shape);
  if (!bytes.empty()) std::memcpy(out.mutable_data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

struct HtpExecutor::Impl {
  std::shared_ptr<const Context> context;
  QnnGraph graph;  // a copy: online-prepare graphs are planned here
  Options options;
  int threads = 1;
  bool fp16 = false;
  std::unique_ptr<PoolContext> kernels;
  std::shared_ptr<HeapStorage> memory;  // the working memory: VTCM part, then spill-fill
  std::shared_ptr<SpillFill> spill;     // use_multi_contexts: the shared spill-fill part
  Frame frame;
  std::vector<std::unique_ptr<PreparedOp>> ops;
  GraphProfile profile;
  DumpFn dump;
  // Without shared_buffer, the graph's own I/O buffers: inputs are copied in, outputs out
  // (what QNN does with client buffers that are not registered shared memory).
  std::vector<Tensor> own_inputs, own_outputs;
};

HtpExecutor::HtpExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HtpExecutor::~HtpExecutor() = default;

const QnnGraph& HtpExecutor::graph() const { return impl_->graph; }
const GraphProfile& HtpExecutor::last_profile() const { return impl_->profile; }
void HtpExecutor::set_dump(DumpFn fn) { impl_->dump = std::move(fn); }
int HtpExecutor::threads() const { return impl_->threads; }

Result<std::unique_ptr<HtpExecutor>> HtpExecutor::create(std::shared_ptr<const Context> context,
                                                         std::string_view graph_name, const Options& options,
                                                         int hardware_threads) {
  const QnnGraph* g = context->graph(graph_name);
  if (g == nullptr) {
    std::vector<std::string> names;
    for (const QnnGraph& x : context->graphs) names.push_back(x.name);
    return not_found("HTP context has no graph '{}' (it has: {})", graph_name, fmt::join(names, ", "));
  }
  if (options.soc_info.soc_model != context->soc.soc_model) {
    return invalid_argument("HTP context was built for SoC {}, the compile spec names {}",
                            to_string(context->soc.soc_model), to_string(options.soc_info.soc_model));
  }
  auto impl = std::make_unique<Impl>();
  impl->context = std::move(context);
  impl->graph = *g;
  impl->options = options;
  impl->threads = threads_for(options.backend_options.htp_options.performance_mode, hardware_threads);
  impl->fp16 = impl->context->precision == HtpPrecision::kFp16;
  impl->kernels = std::make_unique<PoolContext>(impl->threads);
  QnnGraph& graph = impl->graph;
  uint64_t size = 0;
  if (!impl->context->prepared) {
    size = plan_graph(graph, impl->context->soc.vtcm_size_mb);  // online prepare: planned at load
  } else {
    size = graph.vtcm_bytes + graph.spill_fill_bytes;
  }
  // Every native tensor must lie inside the planned working memory, which is never larger than
  // all of them side by side (a larger size in a binary is corrupt, not a reason to allocate).
  uint64_t all_native = 0;
  for (const QnnTensor& t : graph.tensors) {
    if (t.type == TensorType::kNative) all_native += (t.num_elements() * dtype_size(storage_dtype(t.data_type)) + 63) / 64 * 64;
  }
  if (size > 2 * all_native) {  // (the VTCM / spill-fill split may leave gaps; never this much)
    return invalid_argument("HTP graph '{}': its working memory ({} bytes VTCM + {} spill-fill) is larger than all "
                            "its tensors together ({} bytes)", graph.name, graph.vtcm_bytes, graph.spill_fill_bytes,
                            all_native);
  }
  for (const QnnTensor& t : graph.tensors) {
    if (t.type != TensorType::kNative) continue;
    uint64_t bytes = t.num_elements() * dtype_size(storage_dtype(t.data_type));
    if (t.offset > size || bytes > size - t.offset) {
      return invalid_argument("HTP graph '{}': tensor '{}' ({} bytes at offset {}) lies outside its {}-byte working "
                              "memory", graph.name, t.name, bytes, t.offset, size);
    }
    if (t.offset < graph.vtcm_bytes && t.offset + bytes > graph.vtcm_bytes) {
      return invalid_argument("HTP graph '{}': tensor '{}' ({} bytes at offset {}) straddles the end of the {}-byte "
                              "VTCM part", graph.name, t.name, bytes, t.offset, graph.vtcm_bytes);
    }
  }
  // With use_multi_contexts and a spill-fill size set (update_spill_fill_size), the spill-fill
  // part is the process's shared buffer; this executor owns the VTCM part only.
  const HtpBackendOptions& htp = options.backend_options.htp_options;
  const uint64_t vtcm_part = std::min(graph.vtcm_bytes, size);
  if (htp.use_multi_contexts && htp.max_sf_buf_size > 0 && size > vtcm_part) {
    if (size - vtcm_part > htp.max_sf_buf_size) {
      return invalid_argument("HTP graph '{}' needs {} bytes of spill-fill, the compile spec's max_sf_buf_size is {} "
                              "(run update_spill_fill_size over every program that shares the buffer)",
                              graph.name, size - vtcm_part, htp.max_sf_buf_size);
    }
    impl->spill = acquire_spill_fill(htp.max_sf_buf_size);
    if (impl->spill == nullptr) {
      return resource_exhausted("HTP graph '{}': cannot allocate the {}-byte shared spill-fill buffer", graph.name,
                                htp.max_sf_buf_size);
    }
  }
  const uint64_t own = impl->spill != nullptr ? vtcm_part : size;
  impl->memory = HeapStorage::try_allocate(std::max<uint64_t>(own, 64));
  if (impl->memory == nullptr) return resource_exhausted("HTP graph '{}': cannot allocate {} bytes of working memory", graph.name, own);
  Frame& f = impl->frame;
  f.graph = &impl->graph;
  f.kernels = impl->kernels.get();
  f.threads = impl->threads;
  f.values.resize(graph.tensors.size());
  for (size_t id = 0; id < graph.tensors.size(); ++id) {
    const QnnTensor& t = graph.tensors[id];
    std::vector<int64_t> shape(t.dims.begin(), t.dims.end());
    if (t.type == TensorType::kStatic) {
      auto v = materialize_static(t, impl->context->static_data[t.static_index]);
      if (!v.ok()) return v.status();
      f.values[id] = std::move(v).value();
    } else if (t.type == TensorType::kNative) {
      if (impl->spill != nullptr && t.offset >= vtcm_part) {
        f.values[id] = Tensor(storage_dtype(t.data_type), std::move(shape), impl->spill->storage, t.offset - vtcm_part);
      } else {
        f.values[id] = Tensor(storage_dtype(t.data_type), std::move(shape), impl->memory, t.offset);
      }
    }
  }
  for (const QnnOp& op : graph.ops) {
    auto p = prepare_op(graph, op, f.values, impl->fp16, impl->threads,
                        options.backend_options.htp_options.use_conv_hmx ? ConvAlgorithm::kAuto : ConvAlgorithm::kDirect);
    if (!p.ok()) return p.status().with_context(fmt::format("HTP graph '{}'", graph.name));
    impl->ops.push_back(std::move(p).value());
  }
  if (!options.shared_buffer) {
    auto own = [&](uint32_t id) {
      const QnnTensor& t = graph.tensors[id];
      return Tensor(storage_dtype(t.data_type), std::vector<int64_t>(t.dims.begin(), t.dims.end()));
    };
    for (uint32_t id : graph.inputs) impl->own_inputs.push_back(own(id));
    for (uint32_t id : graph.outputs) impl->own_outputs.push_back(own(id));
  }
  impl->profile.graph = graph.name;
  impl->profile.level = options.profile_level;
  return std::unique_ptr<HtpExecutor>(new HtpExecutor(std::move(impl)));
}

uint64_t HtpExecutor::working_memory_bytes() const { return impl_->memory->size(); }

uint64_t shared_spill_fill_bytes() {
  std::lock_guard<std::mutex> lock(g_spill_mu);
  auto s = g_spill.lock();
  return s != nullptr ? s->storage->size() : 0;
}

Result<std::vector<Tensor>> HtpExecutor::execute(std::span<const Tensor> inputs, portable::KernelContext* outputs_ctx) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> sharing;
  if (m.spill != nullptr) sharing = std::unique_lock<std::mutex>(m.spill->running);
  Frame& f = m.frame;
  const QnnGraph& g = m.graph;
  if (inputs.size() != g.inputs.size()) {
    return invalid_argument("HTP graph '{}' takes {} inputs, got {}", g.name, g.inputs.size(), inputs.size());
  }
  int64_t copied = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const QnnTensor& t = g.tensors[g.inputs[i]];
    DType want = storage_dtype(t.data_type);
    std::vector<int64_t> shape(t.dims.begin(), t.dims.end());
    if (inputs[i].dtype() != want || inputs[i].shape() != shape) {
      return invalid_argument("HTP graph '{}': input {} '{}' must be {}[{}], got {}[{}]", g.name, i, t.name,
                              dtype_name(want), fmt::join(shape, ", "), dtype_name(inputs[i].dtype()),
                              fmt::join(inputs[i].shape(), ", "));
    }
    const bool half = t.data_type == QnnDataType::kFloat16;  // fp16 graphs see half inputs
    if (m.options.shared_buffer && !half) {
      f.values[g.inputs[i]] = inputs[i];
      continue;
    }
    Tensor in = m.options.shared_buffer ? Tensor(DType::kF32, shape) : m.own_inputs[i];
    std::memcpy(in.mutable_data(), inputs[i].data(), inputs[i].nbytes());
    if (!m.options.shared_buffer) copied += inputs[i].nbytes();
    if (half) round_to_half(in.mutable_data_as<float>(), static_cast<size_t>(in.numel()));
    f.values[g.inputs[i]] = std::move(in);
  }
  std::vector<Tensor> outs;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const QnnTensor& t = g.tensors[g.outputs[k]];
    std::vector<int64_t> shape(t.dims.begin(), t.dims.end());
    DType d = storage_dtype(t.data_type);
    outs.push_back(outputs_ctx != nullptr ? outputs_ctx->allocate(d, shape) : Tensor(d, shape));
    f.values[g.outputs[k]] = m.options.shared_buffer ? outs.back() : m.own_outputs[k];
  }
  bool per_op = m.options.profile_level == ProfileLevel::kDetailed || m.options.profile_level == ProfileLevel::kOptrace;
  bool dumping = m.dump != nullptr;
  m.profile.ops.clear();
  int64_t start = now_ns();
  for (size_t i = 0; i < m.ops.size(); ++i) {
    int64_t t0 = per_op ? now_ns() : 0;
    Status s = m.ops[i]->run(f);
    if (!s.ok()) return s.with_context(fmt::format("HTP op '{}' ({})", g.ops[i].name, g.ops[i].type));
    if (per_op) {
      int64_t t1 = now_ns();
      m.profile.ops.push_back({g.ops[i].name, g.ops[i].type, g.ops[i].debug_handle, t0 - start, t1 - t0});
    }
    if (dumping) {
      uint32_t id = g.ops[i].outputs[0];
      const QnnTensor& t = g.tensors[id];
      if (is_fixed_point(t.data_type)) {
        Tensor real(DType::kF32, f.values[id].shape());
        KILN_RETURN_IF_ERROR(dequantize(f.values[id].data(), real.mutable_data_as<float>(), real.shape(),
                                        kernel_encoding(t), 1));
        m.dump(t.name, real);
      } else {
        Tensor copy(f.values[id].dtype(), f.values[id].shape());
        std::memcpy(copy.mutable_data(), f.values[id].data(), copy.nbytes());
        m.dump(t.name, copy);
      }
    }
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    const Tensor& result = f.values[g.outputs[k]];  // (an output named twice is written once)
    if (result.data() == outs[k].data()) continue;
    std::memcpy(outs[k].mutable_data(), result.data(), outs[k].nbytes());
    if (!m.options.shared_buffer) copied += outs[k].nbytes();
  }
  m.profile.total_ns = now_ns() - start;
  m.profile.io_copy_bytes = copied;
  for (uint32_t id : g.inputs) f.values[id] = Tensor();
  for (uint32_t id : g.outputs) f.values[id] = Tensor();
  return outs;
}

// ---- the runtime backend

namespace {

class HtpHandle final : public runtime::DelegateHandle {
 public:
  std::unique_ptr<HtpExecutor> executor;
};

class HtpRuntimeBackend final : public runtime::BackendInterface {
 public:
  explicit HtpRuntimeBackend(RuntimeHooks hooks) : hooks_(std::move(hooks)) {}
  std::string_view id() const override { return "htp"; }
  bool is_available() const override { return true; }

  Result<std::unique_ptr<runtime::DelegateHandle>> init(const runtime::BackendInitContext& ctx,
                                                        std::span<const uint8_t> blob,
                                                        std::span<const runtime::CompileSpecView> specs) const override {
    const runtime::CompileSpecView* spec = nullptr;
    for (const auto& s : specs) {
      if (s.key == kQnnCompileSpecKey) spec = &s;
    }
    if (spec == nullptr) return invalid_argument("HTP delegate '{}': no '{}' compile spec", ctx.delegate, kQnnCompileSpecKey);
    auto options = flatbuffer_to_option(spec->value);
    if (!options.ok()) return options.status().with_context(fmt::format("HTP delegate '{}'", ctx.delegate));
    if (!blob.empty() && blob[0] == '{') {
      return invalid_argument("HTP delegate '{}': the blob is the QNN saver's JSON record of the graph, not a "
                              "context binary; compile without the saver to run it", ctx.delegate);
    }
    auto context = parse_context(blob, ctx.blob_owner);
    if (!context.ok()) return context.status().with_context(fmt::format("HTP delegate '{}'", ctx.delegate));
    auto shared = std::make_shared<const Context>(std::move(context).value());
    std::string graph = options->graph_name.empty() ? shared->graphs.front().name : options->graph_name;
    if (shared->graphs.size() == 1 && shared->graph(graph) == nullptr) graph = shared->graphs.front().name;
    int hw = hooks_.hardware_threads > 0 ? hooks_.hardware_threads : std::max(1, ctx.num_threads);
    auto ex = HtpExecutor::create(std::move(shared), graph, *options, hw);
    if (!ex.ok()) return ex.status().with_context(fmt::format("HTP delegate '{}'", ctx.delegate));
    if (options->dump_intermediate_outputs && hooks_.on_dump) {
      std::string prefix = graph + "/";
      DumpFn sink = hooks_.on_dump;
      (*ex)->set_dump([prefix, sink](const std::string& name, const Tensor& t) { sink(prefix + name, t); });
    }
    auto h = std::make_unique<HtpHandle>();
    h->executor = std::move(ex).value();
    return std::unique_ptr<runtime::DelegateHandle>(std::move(h));
  }

  Status execute(runtime::DelegateHandle& handle, runtime::BackendExecutionContext& ctx,
                 std::span<const Tensor> inputs, std::vector<Tensor>* outputs) const override {
    auto& h = static_cast<HtpHandle&>(handle);
    KILN_ASSIGN_OR_RETURN(auto outs, h.executor->execute(inputs, &ctx));
    for (Tensor& t : outs) outputs->push_back(std::move(t));
    if (hooks_.on_profile && h.executor->last_profile().level != ProfileLevel::kOff) {
      hooks_.on_profile(h.executor->last_profile());
    }
    return Status::Ok();
  }

 private:
  RuntimeHooks hooks_;
};

}  // namespace

std::unique_ptr<runtime::BackendInterface> make_htp_runtime_backend(RuntimeHooks hooks) {
  return std::make_unique<HtpRuntimeBackend>(std::move(hooks));
}

}  // namespace kiln::htp
