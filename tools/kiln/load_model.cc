// load_model: the one place the tool turns a model path into an ExportedProgram.
#include <string_view>

#include "commands.h"
#include "kiln/ir/kir.h"
#include "kiln/onnx/import.h"

namespace kiln::tool {

Result<ExportedProgram> load_model(const std::string& path) {
  std::string_view p(path);
  auto ends_with = [&](std::string_view suffix) {
    if (p.size() < suffix.size()) return false;
    std::string_view tail = p.substr(p.size() - suffix.size());
    for (size_t i = 0; i < suffix.size(); ++i) {
      char c = tail[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != suffix[i]) return false;
    }
    return true;
  };
  if (ends_with(".onnx")) return import_onnx_file(path);
  auto program = load_kir_file(path);
  if (!program.ok()) return program.status().with_context(path);
  return program;
}

}  // namespace kiln::tool
