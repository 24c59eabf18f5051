// WhyNoPartition: why a node was not delegated, as log lines and as a table
// (ExecuTorch's WhyNoPartition and WhyNoPartitionReporter).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/ir/node.h"
#include "kiln/partition/operator_support.h"

namespace kiln {

/// Receives one log line (no trailing newline). An empty sink discards.
using LogSink = std::function<void(std::string_view line)>;

/// "WhyNoPartition: Node add_3 was not partitioned because <reason>."
std::string why_no_partition_message(const Node& node, std::string_view reason);

/// Logs why_no_partition_message lines to a sink (ExecuTorch's WhyNoPartition).
class WhyNoPartition {
 public:
  /// `sink` is copied; an empty sink discards every line.
  explicit WhyNoPartition(LogSink sink = {}) : sink_(std::move(sink)) {}
  /// Logs that `node` was not partitioned because `reason`.
  void operator()(const Node& node, std::string_view reason) const;

 private:
  LogSink sink_;
};

/// Collects the first rejection reason per node and renders them as a table. Copies what it needs
/// from the node when reporting, so the graph may change (or die) afterwards.
class WhyNoPartitionReporter {
 public:
  /// One rejected node. `torch_func` is node.meta.source when set (the framework function the
  /// node came from, like ExecuTorch's meta["torch_fn"]), else "-" as in ExecuTorch.
  struct Entry {
    std::string node_name;
    std::string target;
    std::string torch_func;
    std::string reason;
  };

  /// Each first reason is also logged through WhyNoPartition(sink).
  explicit WhyNoPartitionReporter(LogSink sink = {}) : log_(std::move(sink)) {}

  /// Records `reason` for `node` unless the node already has one (first reason wins).
  /// Placeholders and the output node are left out (they are never partitioned).
  void report_reject(const Node& node, std::string_view reason);
  /// Entries in the order they were first reported.
  const std::vector<Entry>& entries() const { return entries_; }
  /// The reason recorded for the node named `name`, if any.
  std::optional<std::string> reason_for(std::string_view name) const;
  bool empty() const { return entries_.empty(); }
  void clear() {
    entries_.clear();
    index_.clear();
  }

  /// ExecuTorch's get_table_report: a fancy_grid table (tabulate's format: ╒═╤╕ top, ╞═╪╡ under
  /// the header, ├─┼┤ between rows, ╘═╧╛ bottom, │ sides) with columns Node name, Target, Torch
  /// func, Reason, one row per entry in report order, every cell wrapped at 35 characters as
  /// tabulate's maxcolwidths=35 does. "No nodes rejected." when empty.
  std::string get_table_report() const;

 private:
  WhyNoPartition log_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;  // node name -> entry
};

/// A check that answers like `inner` and reports each rejection into `reporter` (shared, so the
/// caller can read the table after partitioning; null: nothing reported), ExecuTorch's
/// ReportRejected / WhyNoPartitionReporter.wrap_check. The reported reason is `message` when
/// given (as ExecuTorch reports), else the reason `inner` gave; the answer is `inner`'s, unchanged.
OperatorSupportPtr wrap_check(OperatorSupportPtr inner,
                              std::shared_ptr<WhyNoPartitionReporter> reporter,
                              std::optional<std::string> message = std::nullopt);

/// Renders `rows` under `headers` as tabulate(rows, headers, tablefmt="fancy_grid",
/// maxcolwidths=max_col_width) does for text: each data cell split into lines, blank lines
/// dropped, each line wrapped like textwrap (words split after hyphens, a word longer than the
/// width fills the rest of the line), the cell stripped; headers are neither wrapped nor
/// stripped. Left-aligned; a column is as wide as its widest line, and at least its header plus 2
/// (tabulate's minimum padding). Widths count code points (tabulate without wcwidth); cells
/// that read as numbers are wrapped and aligned as text, unlike tabulate. `max_col_width` >= 1.
std::string render_fancy_grid(const std::vector<std::string>& headers,
                              const std::vector<std::vector<std::string>>& rows,
                              size_t max_col_width);

}  // namespace kiln
