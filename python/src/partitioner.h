// The partitioner object of the Python module (kiln.Partitioner): what to build a C++
// CapabilityPartitioner from when the program is lowered, and the WhyNoPartition reporter that
// keeps the last lowering's rejections.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "kiln/backends/htp/htp_backend.h"
#include "kiln/partition/capability_partitioner.h"

namespace kiln::python {

struct PartitionerSpec {
  std::string backend_id;
  std::vector<CompileSpec> compile_specs;
  htp::SupportOptions skip;  ///< HTP only
  CapabilityOptions options;
  std::shared_ptr<WhyNoPartitionReporter> reporter = std::make_shared<WhyNoPartitionReporter>();

  /// The backend's support check, wrapped to report into `reporter`.
  Result<OperatorSupportPtr> support() const;
  /// Options with `reporter` set.
  CapabilityOptions capability_options() const;
};

}  // namespace kiln::python
