// The tool's compile pipeline: import, partition across backends, lower, plan and serialize.
// `kiln compile` writes the result; `kiln run MODEL` loads it from memory.
#pragma once

#include <CLI/CLI.hpp>

#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/exported_program.h"
#include "kiln/partition/why_no_partition.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/quant/quantizer.h"
#include "kiln/runtime/program.h"
#include "kiln/serialize/program_writer.h"

namespace kiln::tool {

/// The --backend value for no delegate.
inline constexpr std::string_view kPortableBackend = "portable";

struct CompileArgs {
  std::vector<std::string> backends;  ///< in order: each takes what it supports of what is left
  std::string ops;                    ///< the demo backend's op set (empty: every op)
  std::vector<std::string> dims;      ///< "batch=1..8" (repeatable, or comma separated)
  size_t segment_alignment = 4096;
  bool report = false;                ///< print the WhyNoPartition table
  bool no_optimize = false;           ///< skip the graph passes (kiln/passes/optimize.h)
  // Quantization before partitioning (kiln quantize's options).
  std::string quant;                  ///< "8a8w", "16a8w", ... (empty: the model as given)
  std::string calib;                  ///< calibration .npz file or folder
  std::string observer;               ///< observer override
  std::vector<std::string> quant_io;  ///< user inputs / outputs that carry codes (tag_quant_io)
  // Mixed precision (skip_annotation): these nodes / ops stay in floating point, on the CPU or,
  // with fp16_fallback, on the HTP in fp16.
  std::vector<std::string> fp_nodes;
  std::vector<std::string> fp_ops;
  bool fp16_fallback = false;
  // Partitioning (kiln partition's --min-nodes / --max-partitions).
  size_t min_partition_nodes = 1;
  size_t max_partitions = 0;
  // The HTP backend's compile spec (generate_qnn_executorch_compiler_spec).
  std::string soc = "SM8650";
  std::string precision = "quantized";  ///< quantized or fp16
  std::string performance_mode = "burst";
  std::string profile;                ///< off, basic, detailed, optrace
  bool online_prepare = false;
  bool multiple_graphs = false;    // every method's HTP graph in one context (generate_multi_graph_program)
  bool multi_contexts = false;     // HTP use_multi_contexts: one spill-fill buffer for every context
  size_t max_partition_nodes = 0;  // shard partitions larger than this (0: no limit)
  bool dump_intermediate_outputs = false;
  bool no_fold_relu = false;
  bool shared_buffer = false;
  bool dlbc = false;
  bool no_conv_hmx = false;
  std::string pd_session = "unsigned_pd";
  bool saver = false;
};

/// One method as compiled: the lowered program the image views (keep it alive with the image).
struct CompiledMethod {
  std::vector<PassRecord> passes;  ///< the graph passes that ran on it (optimize, fuse_activations)
  std::string name;
  std::string model;
  ExportedProgram program;
  size_t partitions = 0, nodes_delegated = 0, nodes_total = 0;
  size_t constants_duplicated = 0, duplicated_bytes = 0;
  bool htp_lowered = false;  ///< skip_annotation lowered it to the HTP already
  std::shared_ptr<WhyNoPartitionReporter> reporter;
};

struct Compiled {
  std::vector<std::unique_ptr<CompiledMethod>> methods;
  ProgramImage image;
};

/// The graph passes before partitioning (kiln/passes/optimize.h, constant folding on the portable
/// kernels), unless --no-optimize.
Status optimize_method(CompiledMethod& cm, const CompileArgs& args);
/// What kiln run --interpreter runs: the program after the same passes, all of it on the portable
/// kernels (so activations fuse everywhere), unless --no-optimize.
Status optimize_for_interpreter(ExportedProgram& program, const CompileArgs& args);

/// Adds the compile options (--backend, --ops, --dim, --segment-alignment, --no-optimize and the
/// two groups below) to `cmd`.
void add_compile_options(CLI::App& cmd, CompileArgs& args);
/// Adds the quantization options (--quant, --calib, --observer, --quant-io, --fp-node, --fp-op,
/// --fp16-fallback) to `cmd`.
void add_quant_options(CLI::App& cmd, CompileArgs& args);
/// Adds the HTP backend's options (--soc, --precision, ...) to `cmd`.
void add_htp_options(CLI::App& cmd, CompileArgs& args);

/// HTP graphs are static: a symbol given one value (--dim batch=1..1) becomes that value in the
/// user inputs' specs, and every node's spec is inferred again.
Status bind_fixed_dims(CompiledMethod& cm, const std::map<std::string, DimRange, std::less<>>& dims);

/// The calibration samples `args` asks for (none without --quant).
Result<std::vector<quant::Sample>> read_calibration(const CompileArgs& args);

/// Quantizes one loaded method (--quant; with --fp-node / --fp-op / --fp16-fallback through
/// skip_annotation) and lowers it across `args.backends`; progress on `log`. `dim_texts` are
/// the --dim ranges the demo backend is told.
Status quantize_and_lower(CompiledMethod& cm, const CompileArgs& args, const std::vector<quant::Sample>& samples,
                          const std::vector<std::string>& dim_texts, std::ostream& log);

/// The delegates of `program`, one line each: name, backend, precision (HTP), node count and
/// the ops they run.
std::string format_delegates(const ExportedProgram& program);

/// The HTP compile spec (qnn_compile_spec) the options ask for, graph `graph_name`; the
/// generator's warnings go to `log`.
Result<std::vector<CompileSpec>> htp_compile_specs(const CompileArgs& args, const std::string& graph_name,
                                                   std::ostream& log);

/// Compiles each (method name, model path) into one program image; progress on `log`.
Result<Compiled> compile_models(const std::vector<std::pair<std::string, std::string>>& methods,
                                const CompileArgs& args, std::ostream& log);

/// Compiles loaded methods. Symbols `args.dims` leaves out take their range from `default_dims`
/// (a run in memory plans for the inputs it has); a plain symbol of an input with neither is an
/// error that names it and asks for --dim.
Result<Compiled> compile_programs(std::vector<std::unique_ptr<CompiledMethod>> methods,
                                  const CompileArgs& args,
                                  const std::map<std::string, DimRange, std::less<>>& default_dims,
                                  std::ostream& log);

/// A plain symbol ("batch", not a derived "batch*2") in the shape of a user input.
struct InputSymbol {
  const InputSpec* input = nullptr;
  const TensorSpec* spec = nullptr;  ///< the input's spec
  size_t dim = 0;                    ///< which dim of it
  std::string_view symbol;
};

/// Every plain symbol of `program`'s user inputs, in signature and dim order: what a compile
/// must be given a range for.
std::vector<InputSymbol> input_symbols(const ExportedProgram& program);

/// Loads a compiled image back as a runtime program (in memory, no file).
Result<std::shared_ptr<const runtime::Program>> load_image(const ProgramImage& image);

}  // namespace kiln::tool
