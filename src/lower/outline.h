// Internal: outlines one tagged partition of an owning program into a delegate call.
#pragma once

#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"
#include "kiln/lower/backend.h"
#include "kiln/partition/partitioner.h"

namespace kiln::lower_detail {

/// One partition to lower: its tag, its nodes (any order; placeholders are the constants it
/// owns) and where it goes.
struct PartitionToLower {
  std::string tag;
  std::vector<Node*> nodes;
  const DelegationSpec* delegation = nullptr;
  const BackendDetails* backend = nullptr;
};

/// Builds the submodule of `part`, preprocesses it, stores a LoweredModule named `module_name`
/// in `owner` and replaces the partition's nodes with get_attr + call_delegate + getitems.
/// `next_debug_handle` gives the call_delegate its handle and is advanced. Returns the number
/// of call_function nodes delegated.
Result<size_t> outline_partition(ExportedProgram& owner, PartitionToLower& part,
                                 const std::string& module_name, int64_t& next_debug_handle);

}  // namespace kiln::lower_detail
