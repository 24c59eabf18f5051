// update_spill_fill_size: one spill-fill size for every multi-context HTP delegate.
#include <fmt/format.h>

#include "kiln/backends/htp/htp_backend.h"
#include "kiln/backends/htp/programs.h"

namespace kiln::htp {
namespace {

// The largest spill-fill bytes over the graphs of `lm`'s context (online-prepare graphs are
// planned here as the runtime will plan them).
Result<uint64_t> spill_fill_of(const LoweredModule& lm) {
  auto where = [&] { return fmt::format("update_spill_fill_size: lowered module '{}'", lm.name); };
  if (lm.processed_bytes == nullptr) return invalid_argument("{}: no blob", where());
  auto context = parse_context(lm.processed_bytes->bytes());
  if (!context.ok()) return context.status().with_context(where());
  uint64_t most = 0;
  for (QnnGraph g : context->graphs) {
    if (!context->prepared) plan_graph(g, context->soc.vtcm_size_mb);
    most = std::max(most, g.spill_fill_bytes);
  }
  return most;
}

Status set_size(LoweredModule& lm, uint64_t bytes) {
  auto options = options_from_specs(lm.compile_specs);
  if (!options.ok()) return options.status().with_context(fmt::format("update_spill_fill_size: lowered module '{}'", lm.name));
  options->backend_options.htp_options.max_sf_buf_size = bytes;
  for (CompileSpec& spec : lm.compile_specs) {
    if (spec.key == kQnnCompileSpecKey) spec.value = option_to_flatbuffer(*options);
  }
  return Status::Ok();
}

Result<uint64_t> update(std::span<LoweredModule* const> modules) {
  uint64_t most = 0;
  for (LoweredModule* lm : modules) {
    KILN_ASSIGN_OR_RETURN(uint64_t bytes, spill_fill_of(*lm));
    most = std::max(most, bytes);
  }
  for (LoweredModule* lm : modules) KILN_RETURN_IF_ERROR(set_size(*lm, most));
  return most;
}

}  // namespace

Result<uint64_t> update_spill_fill_size(std::span<ExportedProgram* const> programs) {
  std::vector<LoweredModule*> modules;
  for (ExportedProgram* p : programs) {
    for (LoweredModule& lm : p->lowered_modules()) {
      if (lm.backend_id != kBackendId) continue;
      auto options = options_from_specs(lm.compile_specs);
      if (!options.ok()) {
        return options.status().with_context(fmt::format("update_spill_fill_size: lowered module '{}'", lm.name));
      }
      if (options->backend_options.htp_options.use_multi_contexts) modules.push_back(&lm);
    }
  }
  return update(modules);
}

Result<uint64_t> update_spill_fill_size(ExportedProgram& program) {
  ExportedProgram* one = &program;
  return update_spill_fill_size(std::span<ExportedProgram* const>(&one, 1));
}

Result<uint64_t> update_spill_fill_size(std::span<LoweredModule* const> modules) { return update(modules); }

}  // namespace kiln::htp
