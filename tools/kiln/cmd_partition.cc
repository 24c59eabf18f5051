// kiln partition MODEL --backend ID: partition and lower a model, print the delegated program
// (.kir), the WhyNoPartition table (--report) and a summary.
#include <iostream>

#include "backends.h"
#include "commands.h"
#include "kiln/backends/demo/demo_backend.h"
#include "kiln/lower/to_backend.h"
#include "kiln/ir/kir.h"
#include "kiln/partition/capability_partitioner.h"

namespace kiln::tool {
namespace {

struct PartitionArgs {
  std::string model;
  std::string backend;
  std::string ops;
  bool report = false;
  size_t min_nodes = 1;
  size_t max_partitions = 0;
  std::string output;
};

Status run_partition(const PartitionArgs& args) {
  BackendRegistry registry;
  KILN_RETURN_IF_ERROR(register_backends(registry));
  if (auto b = registry.get(args.backend); !b.ok()) return b.status().with_context("--backend");
  std::vector<CompileSpec> specs;
  if (!args.ops.empty()) specs.push_back(make_compile_spec(std::string(demo::kOpsSpecKey), args.ops));
  KILN_ASSIGN_OR_RETURN(OperatorSupportPtr support, support_for(args.backend, specs));
  KILN_ASSIGN_OR_RETURN(ExportedProgram program, load_model(args.model));

  auto reporter = std::make_shared<WhyNoPartitionReporter>();
  CapabilityOptions options;
  options.min_nodes_per_partition = args.min_nodes;
  options.max_partitions = args.max_partitions;
  options.reporter = reporter;
  CapabilityPartitioner partitioner(
      args.backend, specs, wrap_check(support, reporter), options,
      [](std::string_view line) { std::cerr << "kiln: warning: " << line << '\n'; });
  auto report = to_backend(program, partitioner, registry);
  if (!report.ok()) return report.status().with_context(args.model);

  // The delegated program as .kir: on the terminal in short (large constants and blobs by
  // size), in the -o file in full, so that `kiln fmt` and `kiln run` read it back.
  std::cout << print_kir(program, kir_summary());
  if (!args.output.empty()) KILN_RETURN_IF_ERROR(write_file_atomic(args.output, print_kir(program)));
  if (args.report) {
    std::cout << "\nWhyNoPartition report:\n" << reporter->get_table_report();
    if (!reporter->get_table_report().empty() && reporter->get_table_report().back() != '\n') std::cout << '\n';
  }
  std::cout << fmt::format(
      "\npartitions: {}\nnodes delegated: {} / {}\nconstants duplicated: {} ({} bytes)\n",
      report->partitions, report->nodes_delegated, report->nodes_total,
      report->constants_duplicated, report->duplicated_bytes);
  return Status::Ok();
}

}  // namespace

void register_partition(CLI::App& app) {
  add_command(app, "partition", "Partition a model for a backend and print the delegated graph",
              [](CLI::App& cmd) -> CommandFn {
                auto args = std::make_shared<PartitionArgs>();
                cmd.add_option("model", args->model, "The model (.kir or .onnx)")->required();
                cmd.add_option("--backend", args->backend, "Backend id (demo)")->required();
                cmd.add_option("--ops", args->ops,
                               "Ops the backend takes, comma separated (default: all)");
                cmd.add_flag("--report", args->report, "Print the WhyNoPartition table");
                cmd.add_option("--min-nodes", args->min_nodes,
                               "Drop partitions with fewer nodes")
                    ->check(CLI::PositiveNumber);
                cmd.add_option("--max-partitions", args->max_partitions,
                               "Keep only the N largest partitions (0: all)");
                cmd.add_option("-o,--output", args->output,
                               "Also write the delegated program, in full, to this .kir file");
                return [args]() -> Status { return run_partition(*args); };
              });
}

}  // namespace kiln::tool
