// Demo backend, runtime side: the blob is a program file, run by the runtime.
#include "kiln/backends/demo/demo_runtime.h"

namespace kiln::demo {

DemoDelegate::DemoDelegate() = default;
DemoDelegate::DemoDelegate(DemoDelegate&&) noexcept = default;
DemoDelegate& DemoDelegate::operator=(DemoDelegate&&) noexcept = default;
DemoDelegate::~DemoDelegate() = default;

Result<DemoDelegate> DemoDelegate::init(std::span<const uint8_t> blob,
                                        std::shared_ptr<const void> owner,
                                        const runtime::NamedDataMap* named_data, int num_threads) {
  auto program = runtime::Program::load_buffer(blob, std::move(owner), named_data);
  if (!program.ok()) return program.status().with_context("demo delegate");
  runtime::BackendRegistry none;  // a demo blob never calls another delegate
  runtime::MethodOptions options;
  options.num_threads = num_threads;
  auto method = (*program)->load_method(kBlobMethod, none, options);
  if (!method.ok()) return method.status().with_context("demo delegate");
  DemoDelegate d;
  d.program_ = std::move(program).value();
  d.method_ = std::move(method).value();
  return d;
}

Result<std::vector<Tensor>> DemoDelegate::execute(std::span<const Tensor> inputs) {
  auto r = method_->execute(inputs);
  if (!r.ok()) return r.status().with_context("demo delegate");
  return r;
}

namespace {

class DemoHandle final : public runtime::DelegateHandle {
 public:
  explicit DemoHandle(DemoDelegate d) : delegate(std::move(d)) {}
  DemoDelegate delegate;
};

class DemoRuntimeBackend final : public runtime::BackendInterface {
 public:
  std::string_view id() const override { return kBackendId; }
  bool is_available() const override { return true; }
  Result<std::unique_ptr<runtime::DelegateHandle>> init(
      const runtime::BackendInitContext& ctx, std::span<const uint8_t> blob,
      std::span<const runtime::CompileSpecView> /*specs: applied at compile time*/) const override {
    KILN_ASSIGN_OR_RETURN(DemoDelegate d,
                          DemoDelegate::init(blob, ctx.blob_owner, ctx.named_data, ctx.num_threads));
    return std::unique_ptr<runtime::DelegateHandle>(new DemoHandle(std::move(d)));
  }
  Status execute(runtime::DelegateHandle& handle, runtime::BackendExecutionContext& /*ctx*/,
                 std::span<const Tensor> inputs, std::vector<Tensor>* outputs) const override {
    KILN_ASSIGN_OR_RETURN(auto outs, static_cast<DemoHandle&>(handle).delegate.execute(inputs));
    for (Tensor& t : outs) outputs->push_back(std::move(t));
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<runtime::BackendInterface> make_demo_runtime_backend() {
  return std::make_unique<DemoRuntimeBackend>();
}

}  // namespace kiln::demo
