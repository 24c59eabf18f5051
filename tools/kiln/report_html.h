// kiln partition --html: the partition report as one self-contained HTML page (the drawing, the
// delegates, the WhyNoPartition table and, given a profile, the per-op times).
#pragma once

#include <span>
#include <string>

#include "kiln/backends/htp/htp_runtime.h"
#include "kiln/ir/exported_program.h"
#include "kiln/partition/why_no_partition.h"

namespace kiln::tool {

struct ReportInputs {
  std::string title;    ///< the model
  std::string summary;  ///< one line: partitions, nodes delegated
  std::string svg;      ///< htp::graph_to_svg of the program
  const ExportedProgram* program = nullptr;
  const WhyNoPartitionReporter* reporter = nullptr;
  std::span<const htp::GraphProfile> profiles;  ///< empty: no profile section
};

/// The page; every text escaped, no external resource, no script.
std::string partition_report_html(const ReportInputs& in);

}  // namespace kiln::tool
