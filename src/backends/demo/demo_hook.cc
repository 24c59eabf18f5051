// Demo backend in the interpreter: call_delegate nodes of an in-memory program run their blobs
// through DemoDelegate.
#include <map>

#include "kiln/backends/demo/demo_backend.h"
#include "kiln/backends/portable/interpreter.h"

namespace kiln::demo {

Result<runtime::NamedDataMap> named_data_of(const ExportedProgram& program, const LoweredModule& m) {
  runtime::NamedDataMap named;
  for (const auto& [key, constant] : m.named_data) {
    const Tensor* t = program.constants().find(constant);
    if (t == nullptr) {
      return invalid_argument("lowered module '{}': named data '{}' names constant '{}', which is "
                              "not stored",
                              m.name, key, constant);
    }
    named.add(key, std::span<const uint8_t>(static_cast<const uint8_t*>(t->data()), t->nbytes()));
  }
  return named;
}

Result<portable::DelegateHook> demo_delegate_hook(const ExportedProgram& program) {
  using Delegates = std::map<std::string, DemoDelegate, std::less<>>;
  auto delegates = std::make_shared<Delegates>();
  for (const LoweredModule& m : program.lowered_modules()) {
    if (m.backend_id != kBackendId) {
      return unsupported("lowered module '{}' is for backend '{}', not '{}'", m.name, m.backend_id,
                         kBackendId);
    }
    if (m.processed_bytes == nullptr) {
      return invalid_argument("lowered module '{}' has no processed bytes", m.name);
    }
    if (is_elided(*m.processed_bytes)) {
      return invalid_argument("lowered module '{}': its blob was given by size only (bytes={}, no "
                              "base64), so there is nothing to run; print the program in full "
                              "(kiln partition -o)",
                              m.name, m.processed_bytes->size());
    }
    KILN_ASSIGN_OR_RETURN(runtime::NamedDataMap named, named_data_of(program, m));
    auto d = DemoDelegate::init(m.processed_bytes->bytes(), m.processed_bytes, &named);
    if (!d.ok()) return d.status().with_context(fmt::format("lowered module '{}'", m.name));
    delegates->emplace(m.name, std::move(d).value());
  }
  return portable::DelegateHook(
      [delegates](std::string_view name, std::span<const Tensor> ins) -> Result<std::vector<Tensor>> {
        auto it = delegates->find(name);
        if (it == delegates->end()) return not_found("no delegate for lowered module '{}'", name);
        return it->second.execute(ins);
      });
}

Result<std::vector<Tensor>> run_with_demo_delegates(ExportedProgram& program,
                                                   std::span<const Tensor> inputs) {
  KILN_ASSIGN_OR_RETURN(portable::DelegateHook hook, demo_delegate_hook(program));
  KILN_ASSIGN_OR_RETURN(auto interpreter, portable::Interpreter::create(program));
  interpreter->set_delegate_hook(std::move(hook));
  auto r = interpreter->run(inputs);
  if (!r.ok()) return r.status();
  return std::move(r->outputs);
}

}  // namespace kiln::demo
