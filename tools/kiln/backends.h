// The backends the tool knows, compile and runtime halves, by explicit registration.
#pragma once

#include <string>
#include <vector>

#include "kiln/lower/backend.h"
#include "kiln/partition/operator_support.h"
#include "kiln/backends/htp/htp_runtime.h"
#include "kiln/runtime/backend.h"

namespace kiln::tool {

/// Compile halves: demo, xnnpack, htp.
Status register_backends(BackendRegistry& registry);
/// Runtime halves of the same backends; `hooks` receive the HTP delegates' profiles and dumps.
Status register_runtime_backends(runtime::BackendRegistry& registry, htp::RuntimeHooks hooks = {});
/// The operator support of `backend_id` for `specs`; errors name the option at fault.
Result<OperatorSupportPtr> support_for(const std::string& backend_id,
                                       const std::vector<CompileSpec>& specs);

}  // namespace kiln::tool
