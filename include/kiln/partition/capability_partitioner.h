// Capability-based partitioning: groups supported nodes into the largest partitions whose
// contraction keeps the graph acyclic (torch.fx / ExecuTorch CapabilityBasedPartitioner
// semantics), without fx's per-node ancestor sets.
//
// Algorithm. Nodes are numbered in graph (topological) order. A union-find keeps the current
// groups; every group is a vertex of the quotient graph (each unsupported node is its own
// vertex) and the quotient is kept a DAG at every step. Two groups A and B may merge iff no path
// of length >= 2 joins them in the quotient (A -> X -> ... -> B or the reverse): that path is
// exactly the cycle the merge would create. The check is a backward search from B over the
// groups' recorded inputs, pruned by position: X can only lie on a path from A if X holds a node
// after A's first node (maxpos(X) > minpos(A)), and A can only reach B if minpos(A) < maxpos(B).
// Sources (placeholders, get_attr) are left out of the search: they have no inputs.
//   1. Support: every call_function node is asked once. A getitem follows its tuple's producer.
//   2. Quantized clusters: an op, the dequantize nodes feeding it and the quantize nodes reading
//      it form a cluster; overlapping clusters (a shared dequantize) are one unit. A unit is
//      partitioned whole (pre-merged before anything else) or, if any member is unsupported or
//      the unit cannot be contracted, not at all.
//   3. Greedy pass in graph order: each supported node tries to merge with the group of each
//      supported input, in operand order.
//   4. Refinement: the edges whose merge failed are retried until a pass merges nothing (a merge
//      can turn a blocking path into an internal one). At the fixpoint no two partitions joined
//      by an edge can merge without a cycle.
//   5. Partitions below min_nodes are dropped, then those keep_partition refuses, then all but
//      the max_partitions largest (ties: earlier first node wins). Splitting a group never creates a cycle, so this stays exact.
// Complexity: union-find O(alpha); input lists merged small-into-large (O(E log V) total); each
// check visits only groups in the position window between the two candidates and stops at the
// first path found. Checks that would scan more than `search_budget` input entries answer
// "would cycle" (safe: never a cycle, only possibly a smaller partition), so the worst case is
// O(E * budget); on chains, diamonds and fan-outs a check touches a handful of groups, and the
// time is dominated by the passes over the nodes (bench/partition_vs_fx: 100k nodes in tens of
// milliseconds, where torch.fx runs out of memory from 50k nodes).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"
#include "kiln/partition/operator_support.h"
#include "kiln/partition/partitioner.h"
#include "kiln/partition/why_no_partition.h"

namespace kiln {

/// Knobs of the capability-based partitioner.
struct CapabilityOptions {
  /// Partitions with fewer nodes are not tagged (their nodes stay in the owning program).
  size_t min_nodes_per_partition = 1;
  /// Asked about each partition of at least min_nodes_per_partition nodes (its nodes in graph
  /// order): empty keeps it; otherwise the reason it is not worth delegating, reported for each
  /// of its nodes, which then stay in the owning program. Empty function: every one is kept.
  std::function<std::string(const ExportedProgram&, std::span<Node* const>)> keep_partition;
  /// Keep at most this many partitions, the largest ones (ties: earlier first node). 0: no limit.
  size_t max_partitions = 0;
  /// Split each kept partition into consecutive pieces (in graph order) of at most this many
  /// nodes, the way LLM exports shard a model across several delegate contexts; a getitem stays
  /// with its producer. 0: no limit.
  size_t max_nodes_per_partition = 0;
  /// Tags are "<tag_prefix>_<k>"; empty: the backend id (CapabilityPartitioner) or "tag".
  std::string tag_prefix;
  /// Step 2 on: an op and its q/dq nodes are partitioned whole or not at all. Off for a backend
  /// that takes codes at its partition boundaries (HTP reads a dequantize of an input as a
  /// quantized input, and a quantize output as a quantized output).
  bool quantized_clusters = true;
  /// Upper bound on input entries one cycle check may scan before it refuses the merge.
  size_t search_budget = size_t{1} << 16;
  /// Receives the partitioner's own reasons (cluster exclusion, partition too small, beyond
  /// max_partitions, input tuple not partitioned). Null: not reported. Rejections by the
  /// OperatorSupport are reported by wrapping it with wrap_check.
  std::shared_ptr<WhyNoPartitionReporter> reporter;
};

/// What propose_partitions found: partitions as node lists in graph order, ordered by their
/// first node. Node pointers are owned by the program's graph.
struct Proposal {
  std::vector<std::vector<Node*>> partitions;
  size_t supported_nodes = 0;   ///< call_function nodes the check accepted (before clusters)
  size_t dropped_small = 0;     ///< partitions below min_nodes_per_partition
  size_t dropped_unprofitable = 0;  ///< partitions keep_partition refused
  size_t dropped_over_max = 0;  ///< partitions beyond max_partitions
  size_t budget_refusals = 0;   ///< merges refused because a check ran out of budget
};

/// Groups the nodes `support` accepts into partitions (see the file comment). Nodes that already
/// carry a delegation tag are treated as unsupported. Does not modify the program.
Proposal propose_partitions(const ExportedProgram& program, const OperatorSupport& support,
                            const CapabilityOptions& options);

/// Tags partition k's nodes "<prefix>_<k>" (meta.delegation_tag); returns the tags in order.
std::vector<std::string> tag_partitions(const Proposal& proposal, const std::string& prefix);

/// A Partitioner for one backend: proposes partitions with `support`, tags them
/// "<prefix>_<k>" (prefix: options.tag_prefix or the backend id), then runs tag_constant_data
/// and tag_mutated_buffer like ExecuTorch's partitioners.
class CapabilityPartitioner : public Partitioner {
 public:
  /// `support` is shared (kept alive by the partitioner); `warning_sink` receives each warning of
  /// tag_mutated_buffer as it happens (warnings() keeps them too).
  CapabilityPartitioner(std::string backend_id, std::vector<CompileSpec> compile_specs,
                        OperatorSupportPtr support, CapabilityOptions options = {},
                        LogSink warning_sink = {});

  /// Tags `program` in place and returns tag -> (backend id, compile specs).
  Result<PartitionResult> partition(ExportedProgram& program) override;

  /// The last partition() call's proposal statistics (node pointers may be stale afterwards).
  const Proposal& last_proposal() const { return proposal_; }
  /// Warnings of the last partition() call (from tag_mutated_buffer).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::string backend_id_;
  std::vector<CompileSpec> compile_specs_;
  OperatorSupportPtr support_;
  CapabilityOptions options_;
  LogSink warning_sink_;
  Proposal proposal_;
  std::vector<std::string> warnings_;
};

}  // namespace kiln
