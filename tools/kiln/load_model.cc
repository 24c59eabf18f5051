// load_model: the one place the tool turns a model path into an ExportedProgram.
#include <string_view>

#include "commands.h"
#include "kiln/ir/kir.h"
#include "kiln/onnx/import.h"

namespace kiln::tool {

namespace {

bool ends_with(std::string_view p, std::string_view suffix) {
  if (p.size() < suffix.size()) return false;
  std::string_view tail = p.substr(p.size() - suffix.size());
  for (size_t i = 0; i < suffix.size(); ++i) {
    char c = tail[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != suffix[i]) return false;
  }
  return true;
}

}  // namespace

bool is_program_file(const std::string& path) { return ends_with(path, ".kpte"); }

Result<ExportedProgram> load_model(const std::string& path, const OnnxImportOptions& onnx) {
  if (ends_with(path, ".onnx")) return import_onnx_file(path, onnx);
  if (is_program_file(path)) {
    return invalid_argument("'{}' is a compiled program file: run or inspect it; compile takes the "
                            "model it came from (.onnx or .kir)", path);
  }
  auto program = load_kir_file(path);
  if (!program.ok()) return program.status().with_context(path);
  return program;
}

}  // namespace kiln::tool
