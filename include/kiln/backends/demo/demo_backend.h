// The demo backend: delegates a chosen op set, its blob is the submodule as a .kpte program, and
// its runtime (demo_runtime.h) runs that program with the runtime. It exists so tests and `kiln partition`
// can run the whole delegation path end to end.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/ir/exported_program.h"
#include "kiln/lower/backend.h"
#include "kiln/partition/operator_support.h"
#include "kiln/backends/demo/demo_runtime.h"

namespace kiln::demo {

/// Compile spec key: comma-separated op names the delegate accepts ("add,mul"); absent: any op.
inline constexpr std::string_view kOpsSpecKey = "ops";
/// Compile spec key: the ranges symbolic dims are planned for ("batch=1..8,seq=1..128"), as
/// `kiln compile --dim` gives them; needed when the submodule has symbolic dims.
inline constexpr std::string_view kDimsSpecKey = "dims";

/// Parses "add,mul" (spaces allowed) into op ids; an unknown or empty name is an error naming it.
Result<std::vector<OpId>> parse_op_list(std::string_view list);
/// "add,mul" for `ops` (the compile spec value).
std::string format_op_list(const std::vector<OpId>& ops);

/// Supports call nodes whose op is in `ops`.
OperatorSupportPtr demo_operator_support(std::vector<OpId> ops);
/// The support check for the op set named by the "ops" compile spec in `specs` (absent: any op
/// but call_delegate).
Result<OperatorSupportPtr> demo_operator_support(const std::vector<CompileSpec>& specs);

/// Compile side. preprocess rejects a submodule with a call outside the "ops" compile spec
/// (naming the node), and returns the submodule as a program file (one method, kBlobMethod,
/// memory planned) whose weights are named data keyed by their constant names, with one
/// debug-map entry per call node (generated identifiers).
class DemoBackend final : public BackendDetails {
 public:
  std::string_view id() const override { return kBackendId; }
  Result<PreprocessResult> preprocess(const ExportedProgram& submodule,
                                      const std::vector<CompileSpec>& compile_specs) const override;
};

/// Adds the demo backend to `registry` (fails if "demo" is already there).
Status register_demo_backend(BackendRegistry& registry);

/// The named data of lowered module `m` of `program`: views of the program's constants, which
/// must outlive the map's use. An error names the module and a key whose constant is missing.
Result<runtime::NamedDataMap> named_data_of(const ExportedProgram& program, const LoweredModule& m);

/// A hook for the portable interpreter that runs each call_delegate of `program` through a
/// DemoDelegate made from its lowered module (each must have backend id "demo" and a full blob).
/// The hook owns the delegates; `program`'s blobs must outlive it.
Result<portable::DelegateHook> demo_delegate_hook(const ExportedProgram& program);

/// Runs `program` with the portable interpreter, executing every call_delegate through a
/// DemoDelegate made from its lowered module (each must have backend id "demo"). Returns the
/// user outputs. `program` is borrowed for the call.
Result<std::vector<Tensor>> run_with_demo_delegates(ExportedProgram& program,
                                                   std::span<const Tensor> inputs);

}  // namespace kiln::demo
