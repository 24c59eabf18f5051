// draw_graph (ExecuTorch's Qualcomm utilities): a program drawn through Graphviz, delegates as
// clusters, every node colored by where it runs.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln::htp {

/// Where a drawn node runs, which picks its color.
enum class Placement : uint8_t {
  kPortable,     ///< kiln's portable kernels (the CPU)
  kHtpQuantized, ///< an HTP delegate in quantized precision
  kHtpFp16,      ///< an HTP delegate in fp16 precision
  kOtherBackend, ///< a delegate of another backend
  kIo,           ///< a user input or the output
};

/// Fill color of a placement (#rrggbb), shared by the drawing and the HTML report's legend.
std::string_view placement_color(Placement placement);
/// "portable", "HTP quantized", "HTP fp16", "other backend", "input / output".
std::string_view placement_name(Placement placement);

struct DrawOptions {
  /// Graphs with more nodes to draw are refused (dot's layout grows faster than linearly: a
  /// drawing of 10k boxes takes minutes and is unreadable).
  size_t max_nodes = 5000;
};

/// The program as SVG, titled `title`: one box per node (name, op, output spec), user inputs and
/// the output as ellipses; each delegate a cluster ("lowered_module_0: htp, quantized") holding
/// the nodes of its original module, wired to the nodes outside it; colored by placement.
/// Parameters and constants are left out (they would outnumber the ops). Errors: a graph over
/// max_nodes, a Graphviz failure.
Result<std::string> graph_to_svg(const ExportedProgram& program, std::string_view title,
                                 const DrawOptions& options = {});

/// draw_graph(title, path, graph): writes `dir`/`title`.svg (the directory must exist; `title`
/// must be a plain file name).
Status draw_graph(std::string_view title, const std::filesystem::path& dir, const ExportedProgram& program,
                  const DrawOptions& options = {});

}  // namespace kiln::htp
