// kiln partition MODEL --backend ID: partition and lower a model (quantizing it first with
// --quant, mixed precision with --fp-node / --fp-op), print the delegated program (.kir), the
// WhyNoPartition table and the delegates (--report), a summary, and with --html the report as
// a page with the drawing. kiln draw MODEL -o DIR --title T: the drawing alone (draw_graph).
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "compile.h"
#include "kiln/backends/htp/draw.h"
#include "kiln/core/file.h"
#include "kiln/ir/kir.h"
#include "report_html.h"

namespace kiln::tool {
namespace {

struct PartitionArgs {
  std::string model;
  std::string backend;
  bool report = false;
  std::string output;
  std::string html;      // --html OUT.html
  std::string profile;   // --profile TRACE.json (kiln run --profile) for the page
  std::string draw_dir;  // kiln draw -o DIR
  std::string title;     // kiln draw --title T
  CompileArgs compile;
};

// The model, quantized and lowered as the options say (no --backend: as imported).
Status partitioned(PartitionArgs& args, CompiledMethod& cm) {
  if (!args.backend.empty()) args.compile.backends = {args.backend};
  KILN_ASSIGN_OR_RETURN(std::vector<quant::Sample> samples, read_calibration(args.compile));
  cm.name = "forward";
  cm.model = args.model;
  KILN_ASSIGN_OR_RETURN(cm.program, load_model(args.model));
  cm.reporter = std::make_shared<WhyNoPartitionReporter>();
  for (const std::string& d : args.compile.dims) {
    auto ranges = parse_dim_ranges(d);
    if (!ranges.ok()) return ranges.status().with_context("--dim");
    KILN_RETURN_IF_ERROR(bind_fixed_dims(cm, *ranges));
  }
  KILN_RETURN_IF_ERROR(optimize_method(cm, args.compile));
  return quantize_and_lower(cm, args.compile, samples, {}, std::cerr);
}

Status write_html(const PartitionArgs& args, const CompiledMethod& cm) {
  std::vector<htp::GraphProfile> profiles;
  if (!args.profile.empty()) {
    KILN_ASSIGN_OR_RETURN(std::string trace, read_file(args.profile));
    auto parsed = htp::profile_from_chrome_trace(trace);
    if (!parsed.ok()) return parsed.status().with_context(fmt::format("--profile {}", args.profile));
    profiles = std::move(parsed).value();
  }
  KILN_ASSIGN_OR_RETURN(std::string svg, htp::graph_to_svg(cm.program, std::filesystem::path(args.model).stem().string()));
  ReportInputs in;
  in.title = args.model;
  in.summary = fmt::format("backend {}: {} partition(s), {} of {} calls delegated", args.backend, cm.partitions,
                           cm.nodes_delegated, cm.nodes_total);
  in.svg = std::move(svg);
  in.program = &cm.program;
  in.reporter = cm.reporter.get();
  in.profiles = profiles;
  KILN_RETURN_IF_ERROR(write_file_atomic(args.html, partition_report_html(in)));
  std::cerr << fmt::format("wrote {}\n", args.html);
  return Status::Ok();
}

Status run_partition(PartitionArgs& args) {
  if (!args.profile.empty() && args.html.empty()) return invalid_argument("--profile goes with --html (it adds the per-op times to the page)");
  CompiledMethod cm;
  KILN_RETURN_IF_ERROR(partitioned(args, cm));

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
  if (!args.html.empty()) KILN_RETURN_IF_ERROR(write_html(args, cm));
  return Status::Ok();
}

Status run_draw(PartitionArgs& args) {
  CompiledMethod cm;
  KILN_RETURN_IF_ERROR(partitioned(args, cm));
  std::string title = args.title.empty() ? std::filesystem::path(args.model).stem().string() : args.title;
  KILN_RETURN_IF_ERROR(htp::draw_graph(title, args.draw_dir, cm.program));
  std::cout << fmt::format("wrote {}\n", (std::filesystem::path(args.draw_dir) / (title + ".svg")).string());
  return Status::Ok();
}

// The options kiln partition and kiln draw share: the model, its partitioning and quantization.
void add_partition_options(CLI::App& cmd, PartitionArgs& args) {
  cmd.add_option("--ops", args.compile.ops, "Ops the demo backend takes, comma separated (default: all)");
  cmd.add_option("--dim", args.compile.dims, "Fix a symbolic dim, NAME=N..N (HTP graphs are static), e.g. batch=1..1");
  cmd.add_option("--min-nodes", args.compile.min_partition_nodes, "Drop partitions with fewer nodes")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--max-partitions", args.compile.max_partitions, "Keep only the N largest partitions (0: all)");
  cmd.add_option("--max-partition-nodes", args.compile.max_partition_nodes,
                 "Shard partitions into pieces of at most this many nodes");
  cmd.add_flag("--no-optimize", args.compile.no_optimize,
               "Partition the model as imported, without the graph passes kiln compile runs first");
  add_quant_options(cmd, args.compile);
  add_htp_options(cmd, args.compile);
}

}  // namespace

void register_partition(CLI::App& app) {
  add_command(app, "partition", "Partition a model for a backend and print the delegated graph",
              [](CLI::App& cmd) -> CommandFn {
                auto args = std::make_shared<PartitionArgs>();
                cmd.add_option("model", args->model, "The model (.kir or .onnx)")->required();
                cmd.add_option("--backend", args->backend, "Backend id (demo, htp)")->required();
                cmd.add_flag("--report", args->report, "Print the WhyNoPartition table and the delegates");
                cmd.add_option("-o,--output", args->output,
                               "Also write the delegated program, in full, to this .kir file");
                cmd.add_option("--html", args->html,
                               "Write the report as one HTML page: the drawing, the delegates, the WhyNoPartition "
                               "table");
                cmd.add_option("--profile", args->profile,
                               "With --html: the per-op times of this HTP profile (kiln run --profile TRACE.json)");
                add_partition_options(cmd, *args);
                return [args]() -> Status { return run_partition(*args); };
              });
  add_command(app, "draw", "Draw a model (partitioned with --backend) as SVG through Graphviz (draw_graph)",
              [](CLI::App& cmd) -> CommandFn {
                auto args = std::make_shared<PartitionArgs>();
                cmd.add_option("model", args->model, "The model (.kir or .onnx)")->required();
                cmd.add_option("-o,--output-dir", args->draw_dir, "Directory to write TITLE.svg in")->required();
                cmd.add_option("--title", args->title, "The drawing's title and file name (default: the model's name)");
                cmd.add_option("--backend", args->backend, "Partition for this backend first (demo, htp)");
                add_partition_options(cmd, *args);
                return [args]() -> Status { return run_draw(*args); };
              });
}

}  // namespace kiln::tool
