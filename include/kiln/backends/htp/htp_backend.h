// The HTP backend's compile half: operator support (what the partitioner may give it), the
// builder from a kiln submodule to a QNN op graph, and preprocess to a context binary.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/htp/context.h"
#include "kiln/backends/htp/options.h"
#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"
#include "kiln/lower/backend.h"
#include "kiln/partition/operator_support.h"

namespace kiln::htp {

/// The backend id partitioners and program files name.
inline constexpr std::string_view kBackendId = "htp";

/// The options of a compile spec list: its qnn_compile_spec parsed and checked. An absent spec
/// is an error that says how to make one.
Result<Options> options_from_specs(const std::vector<CompileSpec>& specs);

/// What the HTP partitioner may delegate (ExecuTorch's QnnOperatorSupport plus the skip lists of
/// its annotation skipper).
struct SupportOptions {
  std::set<std::string> skip_node_names;  ///< stay on the CPU by node name
  std::set<std::string> skip_ops;         ///< stay on the CPU by op name ("softmax")
};

/// Per-op support for `options`' precision: the op has a builder, its shapes are static (symbolic
/// dims must be bound), its dtypes are ones the HTP takes, and in quantized precision its
/// tensors carry quantization attributes. Each rejection says why (WhyNoPartition).
OperatorSupportPtr htp_operator_support(const Options& options, SupportOptions skip = {});

/// Builds graph `graph_name` of QNN ops from `submodule` (borrowed for the call). Static
/// tensors are appended to `static_data` (identical bytes stored once). Errors name the node.
Result<QnnGraph> build_qnn_graph(const ExportedProgram& submodule, const Options& options,
                                 std::string graph_name, std::vector<StaticData>* static_data);

/// The compile half. preprocess builds the submodule's op graph and returns a context binary:
/// prepared (offsets planned) unless the spec asks for online prepare; with the saver library
/// (generate_qnn_executorch_compiler_spec(saver=true)) the blob is the graph as JSON instead,
/// which the runtime refuses to run.
class HtpBackend final : public BackendDetails {
 public:
  std::string_view id() const override { return kBackendId; }
  Result<PreprocessResult> preprocess(const ExportedProgram& submodule,
                                      const std::vector<CompileSpec>& compile_specs) const override;
};

/// Adds the HTP backend to `registry`.
Status register_htp_backend(BackendRegistry& registry);

/// The QNN graph as JSON (what QNN's saver writes instead of a context).
std::string graph_to_json(const QnnGraph& graph, const Context& context);

}  // namespace kiln::htp
