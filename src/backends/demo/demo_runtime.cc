// Demo backend, runtime side: parse the blob and run it with the portable interpreter.
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
  const size_t header = kBlobMagic.size() + 8;
  if (blob.size() < header) {
    return parse_error("demo delegate: blob of {} bytes ends inside its header", blob.size());
  }
  uint64_t text_size = 0;
  for (int i = 0; i < 8; ++i) text_size |= uint64_t{blob[kBlobMagic.size() + i]} << (8 * i);
  if (text_size > blob.size() - header) {
    return parse_error("demo delegate: program text of {} bytes at offset {} runs past the end of "
                       "the {}-byte blob",
                       text_size, header, blob.size());
  }
  auto parsed = parse_kir(bytes.substr(header, text_size), "<demo delegate>");
  if (!parsed.ok()) return parsed.status().with_context("demo delegate");
  DemoDelegate d;
  d.program_ = std::make_unique<ExportedProgram>(std::move(parsed).value());
  // The constants' bytes follow the text; each parsed (elided) constant becomes a view of them.
  size_t at = header + static_cast<size_t>(text_size);
  std::shared_ptr<const void> no_owner;  // the blob outlives the delegate (see init's contract)
  for (auto& [name, t] : d.program_->constants().entries()) {
    const size_t n = t.nbytes();
    at = blob_align(at);
    if (at > blob.size() || n > blob.size() - at) {
      return parse_error("demo delegate: constant '{}' ({}, {} bytes) at offset {} runs past the "
                         "end of the {}-byte blob",
                         name, format_shape(t.dtype(), t.shape()), n, at, blob.size());
    }
    auto view = std::make_shared<ExternalStorage>(blob.data() + at, n, no_owner);
    d.program_->constants().set(name, Tensor(t.dtype(), t.shape(), std::move(view)));
    at += n;
  }
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
    auto d = DemoDelegate::init(m.processed_bytes->bytes(), m.compile_specs);
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
