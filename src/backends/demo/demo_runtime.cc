// Demo backend, runtime side: parse the .kir blob and run it with the portable interpreter.
#include <map>

#include "kiln/backends/demo/demo_backend.h"
#include "kiln/backends/portable/interpreter.h"
#include "kiln/ir/kir.h"

namespace kiln::demo {

DemoDelegate::DemoDelegate() = default;
DemoDelegate::DemoDelegate(DemoDelegate&&) noexcept = default;
DemoDelegate& DemoDelegate::operator=(DemoDelegate&&) noexcept = default;
DemoDelegate::~DemoDelegate() = default;

Result<DemoDelegate> DemoDelegate::init(std::span<const uint8_t> blob,
                                        const std::vector<CompileSpec>& /*compile_specs*/) {
  std::string_view bytes(reinterpret_cast<const char*>(blob.data()), blob.size());
  if (bytes.substr(0, kBlobMagic.size()) != kBlobMagic) {
    return parse_error("demo delegate: blob of {} bytes does not start with the demo magic",
                       blob.size());
  }
  auto parsed = parse_kir(bytes.substr(kBlobMagic.size()), "<demo delegate>");
  if (!parsed.ok()) return parsed.status().with_context("demo delegate");
  DemoDelegate d;
  d.program_ = std::make_unique<ExportedProgram>(std::move(parsed).value());
  if (Status st = d.program_->lint(); !st.ok()) return st.with_context("demo delegate");
  portable::InterpreterOptions options;
  options.update_buffers = true;  // a delegate owns its buffers' state across calls
  auto interp = portable::Interpreter::create(*d.program_, options);
  if (!interp.ok()) return interp.status().with_context("demo delegate");
  d.interpreter_ = std::move(interp).value();
  return d;
}

Result<std::vector<Tensor>> DemoDelegate::execute(std::span<const Tensor> inputs) {
  auto r = interpreter_->run(inputs);
  if (!r.ok()) return r.status().with_context("demo delegate");
  return std::move(r->outputs);
}

Result<std::vector<Tensor>> run_with_demo_delegates(ExportedProgram& program,
                                                   std::span<const Tensor> inputs) {
  std::map<std::string, DemoDelegate, std::less<>> delegates;
  for (const LoweredModule& m : program.lowered_modules()) {
    if (m.backend_id != kBackendId) {
      return unsupported("lowered module '{}' is for backend '{}', not '{}'", m.name, m.backend_id,
                         kBackendId);
    }
    if (m.processed_bytes == nullptr) {
      return invalid_argument("lowered module '{}' has no processed bytes", m.name);
    }
    auto d = DemoDelegate::init(*m.processed_bytes, m.compile_specs);
    if (!d.ok()) return d.status().with_context(fmt::format("lowered module '{}'", m.name));
    delegates.emplace(m.name, std::move(d).value());
  }
  KILN_ASSIGN_OR_RETURN(auto interpreter, portable::Interpreter::create(program));
  interpreter->set_delegate_hook(
      [&delegates](std::string_view name, std::span<const Tensor> ins) -> Result<std::vector<Tensor>> {
        auto it = delegates.find(name);
        if (it == delegates.end()) return not_found("no delegate for lowered module '{}'", name);
        return it->second.execute(ins);
      });
  auto r = interpreter->run(inputs);
  if (!r.ok()) return r.status();
  return std::move(r->outputs);
}

}  // namespace kiln::demo
