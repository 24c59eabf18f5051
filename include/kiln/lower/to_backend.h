// to_backend: lowers the partitions a Partitioner tagged into delegate calls (ExecuTorch's
// exir/backend/backend_api.py), or a whole program into one LoweredModule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"
#include "kiln/lower/backend.h"
#include "kiln/partition/partitioner.h"

namespace kiln {

/// Knobs of to_backend.
struct ToBackendOptions {
  /// Check with is_identical_graph that the partitioner only set tags (ExecuTorch's validation).
  bool check_identical_graph = true;
  /// Copy constants shared across tags before lowering (the partition layer's duplication).
  /// Off, a tagged constant read outside its tag is an error.
  bool duplicate_constants = true;
  /// Lint the owning program after every partition, not only at the end (slower; for debugging).
  bool lint_each_partition = false;
};

/// What a to_backend call did, for summaries.
struct LoweringReport {
  size_t partitions = 0;            ///< lowered modules created
  size_t nodes_total = 0;           ///< call_function nodes before lowering
  size_t nodes_delegated = 0;       ///< of those, the ones moved into a delegate
  size_t constants_duplicated = 0;  ///< copies made by constant duplication
  size_t duplicated_bytes = 0;      ///< their bytes (shared copy-on-write until written)
  std::vector<std::string> lowered_modules;  ///< names, in creation order
  std::vector<std::string> skipped_tags;     ///< tags the partitioner returned without nodes
};

/// Gives every node of `graph` without a debug handle the next one after the largest present
/// (in graph order), so handles are unique. Returns how many it assigned.
size_t assign_debug_handles(Graph& graph);

/// Runs `partitioner` on `program`, then lowers each tagged partition: validates the tags (a
/// tagged output node or user-input placeholder is an error naming the node; a tag without
/// nodes is skipped), checks the graph is unchanged (options), duplicates shared constants,
/// and for each tag in graph order of its first node builds a submodule, preprocesses it with
/// the tag's backend from `registry` and replaces the partition with
/// `get_attr lowered_module_N` + `call_delegate` + one `getitem` per output. On error `program`
/// is left as it was before the call.
Result<LoweringReport> to_backend(ExportedProgram& program, Partitioner& partitioner,
                                  const BackendRegistry& registry,
                                  const ToBackendOptions& options = {});

/// The lowering half of to_backend for a program whose nodes are already tagged (no
/// partitioner, no identical-graph check). Same guarantees on error.
Result<LoweringReport> lower_tagged_partitions(ExportedProgram& program,
                                               const PartitionResult& partition,
                                               const BackendRegistry& registry,
                                               const ToBackendOptions& options = {});

/// Lowers all of `program` to backend `backend_id`: preprocesses a copy (debug handles assigned
/// where missing) and returns the LoweredModule (name left empty: whoever inserts it names it).
Result<LoweredModule> to_backend(std::string_view backend_id, const ExportedProgram& program,
                                 const std::vector<CompileSpec>& compile_specs,
                                 const BackendRegistry& registry);

}  // namespace kiln
