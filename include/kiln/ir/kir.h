// The text IR (.kir): a printer and a parser for whole programs; print(parse(t)) == t.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

/// What print_kir writes. The defaults write everything, so the text parses back to the same
/// program; kir_summary() is the short form for terminals.
struct KirPrintOptions {
  /// Constants with at most this many elements are printed value by value; larger ones by size
  /// only ("<N bytes>", which parses back as zeros). Constants whose data was elided when parsed
  /// (Tensor::elided) always print by size.
  int64_t inline_limit = INT64_MAX;
  /// Print delegate blobs in full (base64) rather than by size only ("bytes=N"). Elided blobs
  /// always print by size.
  bool print_blobs = true;
  /// Print the lowered modules (backend, compile specs, blob, original program) after the graph.
  bool print_lowered_modules = true;
};

/// Constants up to 16 elements, blobs by size: what `kiln partition` prints.
KirPrintOptions kir_summary();

/// Prints `program` as .kir text.
std::string print_kir(const ExportedProgram& program, const KirPrintOptions& options = {});
/// Prints only the graph block ("graph():" and node lines), as fx's print_readable.
std::string print_graph(const Graph& graph);

/// Parses .kir text. Errors name the line and column ("<source>:12:7: expected ')'").
/// Constants and delegate blobs printed by size only ("<N bytes>", "bytes=N" without "base64")
/// come back as elided zeros (ElidedStorage: no memory until written; they print by size again).
/// The result has passed ExportedProgram::lint(). `source_name` is used in messages.
Result<ExportedProgram> parse_kir(std::string_view text, std::string_view source_name = "<kir>");

/// Reads and parses a .kir file.
Result<ExportedProgram> load_kir_file(const std::string& path);

}  // namespace kiln
