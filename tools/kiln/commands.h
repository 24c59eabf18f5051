// Subcommands of the `kiln` tool. Each registers itself on the app and runs when selected.
//
// Exit codes: 0 success, 1 user error (message on stderr), 2 usage error (CLI11 prints it).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "kiln/core/file.h"
#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"
#include "kiln/onnx/import.h"
#include "kiln/runtime/program.h"

namespace kiln::tool {

/// A command's body: runs after parsing; returns the Status to report.
using CommandFn = std::function<Status()>;

/// Adds `name` to `app`; `setup` adds the command's options and returns the body to run.
void add_command(CLI::App& app, const std::string& name, const std::string& description,
                 const std::function<CommandFn(CLI::App&)>& setup);

/// Loads a model from a .kir or .onnx file (by extension), naming the file in errors. `onnx`
/// applies to an ONNX model only.
Result<ExportedProgram> load_model(const std::string& path, const OnnxImportOptions& onnx = {});

/// Whether `path` names a program file (.kpte).
bool is_program_file(const std::string& path);

/// Methods, signatures, instruction counts, arena, delegates (with compile specs when `full`)
/// and segments of a program file.
Status print_program_info(const runtime::Program& program, bool full, std::ostream& os);

void register_compile(CLI::App& app);  ///< kiln compile (model -> .kpte)
void register_fmt(CLI::App& app);
void register_inspect(CLI::App& app);
void register_import(CLI::App& app);  ///< kiln import (ONNX -> .kir)
void register_partition(CLI::App& app);  ///< kiln partition (and kiln draw: the drawing alone)
void register_run(CLI::App& app);    ///< kiln run (the runtime; --interpreter for the IR one)
void register_bench(CLI::App& app);  ///< kiln bench (latency)
void register_quantize(CLI::App& app);  ///< kiln quantize (post-training quantization)
void register_compare(CLI::App& app);   ///< kiln compare (dumped layers against the float model)
void register_from_context(CLI::App& app);  ///< kiln from-context (HTP context binary -> .kpte)

}  // namespace kiln::tool
