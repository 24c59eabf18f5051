#include "backends.h"

#include "kiln/backends/demo/demo_backend.h"
#include "kiln/backends/htp/htp_backend.h"
#include "kiln/backends/htp/htp_runtime.h"
#include "kiln/backends/xnnpack/xnnpack_backend.h"

namespace kiln::tool {

Status register_backends(BackendRegistry& registry) {
  KILN_RETURN_IF_ERROR(demo::register_demo_backend(registry));
  KILN_RETURN_IF_ERROR(xnnpack::register_xnnpack_backend(registry));
  return htp::register_htp_backend(registry);
}

Status register_runtime_backends(runtime::BackendRegistry& registry, htp::RuntimeHooks hooks) {
  KILN_RETURN_IF_ERROR(registry.add(demo::make_demo_runtime_backend()));
  KILN_RETURN_IF_ERROR(registry.add(xnnpack::make_xnnpack_runtime_backend()));
  return registry.add(htp::make_htp_runtime_backend(std::move(hooks)));
}

Result<OperatorSupportPtr> support_for(const std::string& backend_id,
                                       const std::vector<CompileSpec>& specs) {
  if (backend_id == demo::kBackendId) {
    auto support = demo::demo_operator_support(specs);
    if (!support.ok()) return support.status().with_context("--ops");
    return support;
  }
  if (backend_id == xnnpack::kBackendId) return xnnpack::xnnpack_operator_support();
  if (backend_id == htp::kBackendId) {
    KILN_ASSIGN_OR_RETURN(htp::Options options, htp::options_from_specs(specs));
    return htp::htp_operator_support(options);
  }
  return unsupported("backend '{}' has no operator support check", backend_id);
}

}  // namespace kiln::tool
