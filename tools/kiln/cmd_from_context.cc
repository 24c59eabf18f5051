// kiln from-context CTX --op NAME -o FILE.kpte: a program that runs a prebuilt HTP context
// binary (ExecuTorch's from_context_binary), one method named after the binary's graph.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>

#include "commands.h"
#include "compile.h"
#include "kiln/backends/htp/programs.h"
#include "kiln/serialize/program_writer.h"

namespace kiln::tool {
namespace {

struct FromContextCommand {
  std::string context;
  std::string op = "context_loader";
  std::string soc = "SM8650";
  std::string output;
};

std::string describe(const htp::GraphIo& t) {
  return fmt::format("{} {}[{}]", t.name, htp::qnn_data_type_name(t.data_type), fmt::join(t.dims, ", "));
}

Status run_from_context(const FromContextCommand& cmd) {
  KILN_ASSIGN_OR_RETURN(htp::QcomChipset soc, htp::chipset_from_name(cmd.soc));
  KILN_ASSIGN_OR_RETURN(htp::ContextProgram cp,
                        htp::from_context_binary(std::filesystem::path(cmd.context), cmd.op, soc));
  std::cout << fmt::format("context graph '{}': {} input(s), {} output(s)\n", cp.graph_name, cp.inputs.size(),
                           cp.outputs.size());
  for (const htp::GraphIo& t : cp.inputs) std::cout << "  in  " << describe(t) << '\n';
  for (const htp::GraphIo& t : cp.outputs) std::cout << "  out " << describe(t) << '\n';
  MethodToSerialize method{cp.graph_name, &cp.program};
  KILN_ASSIGN_OR_RETURN(ProgramImage image, serialize_program(std::span(&method, 1)));
  KILN_ASSIGN_OR_RETURN(auto program, load_image(image));
  KILN_RETURN_IF_ERROR(write_program(cmd.output, image));
  KILN_RETURN_IF_ERROR(print_program_info(*program, false, std::cout));
  std::cout << fmt::format("wrote {} ({} bytes)\n", cmd.output, image.size);
  return Status::Ok();
}

}  // namespace

void register_from_context(CLI::App& app) {
  add_command(app, "from-context", "Make a .kpte program that runs a prebuilt HTP context binary",
              [](CLI::App& sub) -> CommandFn {
                auto cmd = std::make_shared<FromContextCommand>();
                sub.add_option("context", cmd->context, "The context binary (kiln compile --emit-context DIR)")
                    ->required();
                sub.add_option("--op", cmd->op, "Name of the loader op in the program (default context_loader)");
                sub.add_option("--soc", cmd->soc, "The SoC the binary was built for (default SM8650)");
                sub.add_option("-o,--output", cmd->output, "The program file to write (.kpte)")->required();
                return [cmd]() { return run_from_context(*cmd); };
              });
}

}  // namespace kiln::tool
