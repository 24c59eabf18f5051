#include "backends.h"

#include "kiln/backends/demo/demo_backend.h"

namespace kiln::tool {

Status register_backends(BackendRegistry& registry) {
  return demo::register_demo_backend(registry);
}

Status register_runtime_backends(runtime::BackendRegistry& registry) {
  return registry.add(demo::make_demo_runtime_backend());
}

Result<OperatorSupportPtr> support_for(const std::string& backend_id,
                                       const std::vector<CompileSpec>& specs) {
  if (backend_id == demo::kBackendId) {
    auto support = demo::demo_operator_support(specs);
    if (!support.ok()) return support.status().with_context("--ops");
    return support;
  }
  return unsupported("backend '{}' has no operator support check", backend_id);
}

}  // namespace kiln::tool
