// kiln compile MODEL [--method NAME=MODEL ...] -o FILE.kpte: import, partition across the chosen
// backends, lower, plan memory and write one program file atomically.
#include <filesystem>
#include <iostream>

#include "kiln/backends/htp/context.h"
#include "kiln/backends/htp/htp_backend.h"

#include "commands.h"
#include "compile.h"

namespace kiln::tool {
namespace {

struct CompileCommand {
  std::string model;
  std::vector<std::string> methods;  // NAME=MODEL
  std::string output;
  std::string emit_context;  // directory for each HTP partition's context binary
  CompileArgs compile;
};

// Each HTP delegate's context binary as DIR/<method>_<lowered module>.bin.
Status emit_contexts(const Compiled& compiled, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return invalid_argument("--emit-context {}: {}", dir, ec.message());
  size_t written = 0;
  for (const auto& cm : compiled.methods) {
    for (const LoweredModule& lm : cm->program.lowered_modules()) {
      if (lm.backend_id != htp::kBackendId || lm.processed_bytes == nullptr) continue;
      std::span<const uint8_t> blob = lm.processed_bytes->bytes();
      if (!htp::looks_like_context(blob)) continue;  // the saver's JSON
      std::string path = fmt::format("{}/{}_{}.bin", dir, cm->name, lm.name);
      KILN_RETURN_IF_ERROR(write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(blob.data()),
                                                                    blob.size())));
      std::cout << fmt::format("wrote {} (HTP context binary, {} bytes)\n", path, blob.size());
      ++written;
    }
  }
  if (written == 0) return invalid_argument("--emit-context {}: no HTP partition to write (compile with --backend htp)", dir);
  return Status::Ok();
}

Status run_compile(const CompileCommand& cmd) {
  std::vector<std::pair<std::string, std::string>> methods;
  if (!cmd.model.empty()) methods.emplace_back("forward", cmd.model);
  for (const std::string& m : cmd.methods) {
    auto eq = m.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == m.size()) {
      return invalid_argument("--method '{}': expected NAME=MODEL", m);
    }
    methods.emplace_back(m.substr(0, eq), m.substr(eq + 1));
  }
  if (methods.empty()) return invalid_argument("nothing to compile: give a MODEL or --method NAME=MODEL");
  KILN_ASSIGN_OR_RETURN(Compiled compiled, compile_models(methods, cmd.compile, std::cout));
  // Read the image back before writing it: what the file holds is what the runtime accepts.
  KILN_ASSIGN_OR_RETURN(auto program, load_image(compiled.image));
  KILN_RETURN_IF_ERROR(write_program(cmd.output, compiled.image));
  KILN_RETURN_IF_ERROR(print_program_info(*program, false, std::cout));
  std::cout << fmt::format("wrote {} ({} bytes)\n", cmd.output, compiled.image.size);
  if (!cmd.emit_context.empty()) KILN_RETURN_IF_ERROR(emit_contexts(compiled, cmd.emit_context));
  return Status::Ok();
}

}  // namespace

void register_compile(CLI::App& app) {
  add_command(app, "compile", "Compile a model (or several, as methods) into one .kpte program file",
              [](CLI::App& sub) -> CommandFn {
                auto cmd = std::make_shared<CompileCommand>();
                sub.add_option("model", cmd->model, "The model (.onnx or .kir), as method 'forward'");
                sub.add_option("--method", cmd->methods,
                               "Another method, NAME=MODEL (repeatable)");
                sub.add_option("-o,--output", cmd->output, "The program file to write (.kpte)")
                    ->required();
                add_compile_options(sub, cmd->compile);
                sub.add_flag("--report", cmd->compile.report, "Print the WhyNoPartition table");
                sub.add_option("--emit-context", cmd->emit_context,
                               "Also write each HTP partition's context binary into this directory "
                               "(kiln from-context runs one)");
                return [cmd]() { return run_compile(*cmd); };
              });
}

}  // namespace kiln::tool
