// kiln import MODEL.onnx -o OUT.kir: import an ONNX model and write its text IR.
#include <cstdio>
#include <memory>
#include <vector>

#include "commands.h"
#include "kiln/ir/kir.h"
#include "kiln/onnx/import.h"

namespace kiln::tool {

void register_import(CLI::App& app) {
  add_command(app, "import", "Import an ONNX model and write it as a .kir program",
              [](CLI::App& cmd) -> CommandFn {
                auto path = std::make_shared<std::string>();
                auto out = std::make_shared<std::string>();
                auto dims = std::make_shared<std::vector<std::string>>();
                cmd.add_option("model", *path, "The .onnx file")->required();
                cmd.add_option("-o,--output", *out, "Where to write the .kir program")->required();
                cmd.add_option("--dim", *dims,
                               "Fix a symbolic input dim, NAME=SIZE (e.g. batch=1); repeatable");
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
