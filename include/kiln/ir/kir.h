// The text IR (.kir): a printer and a parser for whole programs; print(parse(t)) == t.
#pragma once

#include <string>
#include <string_view>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

struct KirPrintOptions {
  /// Constants with at most this many elements are printed inline; larger ones by name and size.
  int64_t inline_limit = 16;
  /// Print the lowered modules' original graphs under the main graph (format_delegated_graph).
  bool print_lowered_modules = true;
};

/// Prints `program` as .kir text.
std::string print_kir(const ExportedProgram& program, const KirPrintOptions& options = {});
/// Prints only the graph block ("graph():" and node lines), as fx's print_readable.
std::string print_graph(const Graph& graph);

/// Parses .kir text. Errors name the line and column ("<source>:12:7: expected ')'").
/// Constants and delegate blobs printed by size only ("<N bytes>", "bytes=N") come back
/// zero-filled. The result has passed ExportedProgram::lint(). `source_name` is used in messages.
Result<ExportedProgram> parse_kir(std::string_view text, std::string_view source_name = "<kir>");

/// Reads and parses a .kir file.
Result<ExportedProgram> load_kir_file(const std::string& path);

}  // namespace kiln
