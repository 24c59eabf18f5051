// kiln compile MODEL [--method NAME=MODEL ...] -o FILE.kpte: import, partition across the chosen
// backends, lower, plan memory and write one program file atomically.
#include <iostream>

#include "commands.h"
#include "compile.h"

namespace kiln::tool {
namespace {

struct CompileCommand {
  std::string model;
  std::vector<std::string> methods;  // NAME=MODEL
  std::string output;
  CompileArgs compile;
};

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
                return [cmd]() { return run_compile(*cmd); };
              });
}

}  // namespace kiln::tool
