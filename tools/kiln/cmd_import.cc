// kiln import MODEL.onnx -o OUT.kir [--optimize]: import an ONNX model (and run the graph passes)
// and write its text IR.
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "commands.h"
#include "kiln/backends/portable/interpreter.h"
#include "kiln/ir/kir.h"
#include "kiln/onnx/import.h"
#include "kiln/passes/optimize.h"

namespace kiln::tool {

void register_import(CLI::App& app) {
  add_command(app, "import", "Import an ONNX model and write it as a .kir program",
              [](CLI::App& cmd) -> CommandFn {
                auto path = std::make_shared<std::string>();
                auto out = std::make_shared<std::string>();
                auto dims = std::make_shared<std::vector<std::string>>();
                auto optimize_graph = std::make_shared<bool>(false);
                cmd.add_option("model", *path, "The .onnx file")->required();
                cmd.add_option("-o,--output", *out, "Where to write the .kir program")->required();
                cmd.add_option("--dim", *dims,
                               "Fix a symbolic input dim, NAME=SIZE (e.g. batch=1); repeatable");
                cmd.add_flag("--optimize", *optimize_graph,
                             "Run the graph passes kiln compile runs before partitioning and write the result "
                             "(each pass that changed the program is listed)");
                return [=]() -> Status {
                  OnnxImportOptions options;
                  for (const std::string& d : *dims) {
                    size_t eq = d.find('=');
                    long long v = 0;
                    char extra = 0;
                    if (eq == std::string::npos || eq == 0 ||
                        std::sscanf(d.c_str() + eq + 1, "%lld%c", &v, &extra) != 1 || v < 0) {
                      return invalid_argument("--dim '{}': expected NAME=SIZE with SIZE >= 0", d);
                    }
                    options.dim_values[d.substr(0, eq)] = v;
                  }
                  KILN_ASSIGN_OR_RETURN(ExportedProgram program, import_onnx_file(*path, options));
                  if (*optimize_graph) {
                    OptimizeOptions passes;
                    passes.evaluate = portable::evaluate_node;
                    KILN_ASSIGN_OR_RETURN(std::vector<PassRecord> records, optimize(program, passes));
                    for (const PassRecord& r : records) {
                      std::fprintf(stderr, "kiln: %-20s %-9s %8.2f ms\n", r.name.c_str(), r.changed ? "changed" : "unchanged",
                                   std::chrono::duration<double, std::milli>(r.time).count());
                    }
                  }
                  // Every constant is written out in full (print_kir's default): a .kir that
                  // kept only the sizes of large weights would run with zeros.
                  KILN_RETURN_IF_ERROR(write_file_atomic(*out, print_kir(program)));
                  size_t calls = 0;
                  for (Node* n : program.graph().nodes()) {
                    if (n->op() == OpKind::kCallFunction) ++calls;
                  }
                  std::fprintf(stderr, "kiln: imported %s: %zu ops, %zu constants (%zu bytes) -> %s\n",
                               path->c_str(), calls, program.constants().size(),
                               program.constants().total_bytes(), out->c_str());
                  return Status::Ok();
                };
              });
}

}  // namespace kiln::tool
