// Partitioner: tags the nodes of an ExportedProgram for delegation (ExecuTorch's Partitioner).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

/// Which backend a tag goes to and with what compile specs (ExecuTorch's DelegationSpec).
struct DelegationSpec {
  std::string backend_id;
  std::vector<CompileSpec> compile_specs;
};

/// What partition() returns: every tag it set, with the delegation it asks for.
struct PartitionResult {
  std::map<std::string, DelegationSpec> partition_tags;
};

/// Sets `meta.delegation_tag` on the nodes each backend should take. Must not change the graph
/// otherwise (to_backend checks that with is_identical_graph).
class Partitioner {
 public:
  virtual ~Partitioner() = default;
  /// Tags nodes of `program` in place; the program outlives the call only.
  virtual Result<PartitionResult> partition(ExportedProgram& program) = 0;
};

}  // namespace kiln
