// load_model: the one place the tool turns a model path into an ExportedProgram.
#include "commands.h"
#include "kiln/ir/kir.h"

namespace kiln::tool {

Result<ExportedProgram> load_model(const std::string& path) { return load_kir_file(path); }

}  // namespace kiln::tool
