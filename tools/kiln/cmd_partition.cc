// kiln partition MODEL --backend ID: partition and lower a model (quantizing it first with
// --quant, mixed precision with --fp-node / --fp-op), print the delegated program (.kir), the
// WhyNoPartition table and the delegates (--report) and a summary.
#include <iostream>

#include "commands.h"
#include "compile.h"
#include "kiln/core/file.h"
#include "kiln/ir/kir.h"

namespace kiln::tool {
namespace {

struct PartitionArgs {
  std::string model;
  std::string backend;
  bool report = false;
  std::string output;
  CompileArgs compile;
};

Status run_partition(PartitionArgs& args) {
  args.compile.backends = {args.backend};
  KILN_ASSIGN_OR_RETURN(std::vector<quant::Sample> samples, read_calibration(args.compile));
  CompiledMethod cm;
  cm.name = "forward";
  cm.model = args.model;
  KILN_ASSIGN_OR_RETURN(cm.program, load_model(args.model));
  cm.reporter = std::make_shared<WhyNoPartitionReporter>();
  for (const std::string& d : args.compile.dims) {
    auto ranges = parse_dim_ranges(d);
    if (!ranges.ok()) return ranges.status().with_context("--dim");
    KILN_RETURN_IF_ERROR(bind_fixed_dims(cm, *ranges));
  }
  KILN_RETURN_IF_ERROR(quantize_and_lower(cm, args.compile, samples, {}, std::cerr));

  // The delegated program as .kir: on the terminal in short (large constants and blobs by
  // size), in the -o file in full, so that `kiln fmt` and `kiln run` read it back.
  std::cout << print_kir(cm.program, kir_summary());
  if (!args.output.empty()) KILN_RETURN_IF_ERROR(write_file_atomic(args.output, print_kir(cm.program)));
  if (args.report) {
    const std::string table = cm.reporter->get_table_report();
    std::cout << "\nWhyNoPartition report:\n" << table;
    if (!table.empty() && table.back() != '\n') std::cout << '\n';
    std::cout << "\ndelegates:\n" << format_delegates(cm.program);
  }
  std::cout << fmt::format("\npartitions: {}\nnodes delegated: {} / {}\nconstants duplicated: {} ({} bytes)\n",
                           cm.partitions, cm.nodes_delegated, cm.nodes_total, cm.constants_duplicated,
                           cm.duplicated_bytes);
  return Status::Ok();
}

}  // namespace

void register_partition(CLI::App& app) {
  add_command(app, "partition", "Partition a model for a backend and print the delegated graph",
              [](CLI::App& cmd) -> CommandFn {
                auto args = std::make_shared<PartitionArgs>();
                cmd.add_option("model", args->model, "The model (.kir or .onnx)")->required();
                cmd.add_option("--backend", args->backend, "Backend id (demo, htp)")->required();
                cmd.add_option("--ops", args->compile.ops,
                               "Ops the demo backend takes, comma separated (default: all)");
                cmd.add_option("--dim", args->compile.dims,
                               "Fix a symbolic dim, NAME=N..N (HTP graphs are static), e.g. batch=1..1");
                cmd.add_flag("--report", args->report, "Print the WhyNoPartition table and the delegates");
                cmd.add_option("--min-nodes", args->compile.min_partition_nodes,
                               "Drop partitions with fewer nodes")
                    ->check(CLI::PositiveNumber);
                cmd.add_option("--max-partitions", args->compile.max_partitions,
                               "Keep only the N largest partitions (0: all)");
                cmd.add_option("--max-partition-nodes", args->compile.max_partition_nodes,
                               "Shard partitions into pieces of at most this many nodes");
                cmd.add_option("-o,--output", args->output,
                               "Also write the delegated program, in full, to this .kir file");
                add_quant_options(cmd, args->compile);
                add_htp_options(cmd, args->compile);
                return [args]() -> Status { return run_partition(*args); };
              });
}

}  // namespace kiln::tool
