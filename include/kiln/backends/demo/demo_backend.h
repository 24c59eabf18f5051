// The demo backend: delegates a chosen op set, its blob is the submodule as .kir text, and its
// runtime runs that text with the portable interpreter. It exists so tests and `kiln partition`
// can run the whole delegation path end to end.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/ir/exported_program.h"
#include "kiln/lower/backend.h"
#include "kiln/partition/operator_support.h"

namespace kiln::portable {
class Interpreter;
}  // namespace kiln::portable

namespace kiln::demo {

/// The backend id partitioners name.
inline constexpr std::string_view kBackendId = "demo";
/// Compile spec key: comma-separated op names the delegate accepts ("add,mul"); absent: any op.
inline constexpr std::string_view kOpsSpecKey = "ops";
/// First bytes of every demo blob.
inline constexpr std::string_view kBlobMagic = "KILNDEMO1\n";

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
/// (naming the node), and returns the submodule printed as .kir (constants inline) after
/// kBlobMagic, with one debug-map entry per call node (generated identifiers).
class DemoBackend final : public BackendDetails {
 public:
  std::string_view id() const override { return kBackendId; }
  Result<PreprocessResult> preprocess(const ExportedProgram& submodule,
                                      const std::vector<CompileSpec>& compile_specs) const override;
};

/// Adds the demo backend to `registry` (fails if "demo" is already there).
Status register_demo_backend(BackendRegistry& registry);

/// Runtime side: a parsed blob run by the portable interpreter. Movable; owns its program.
class DemoDelegate {
 public:
  /// Checks the magic and parses and lints the .kir text; errors name what is wrong in the blob.
  static Result<DemoDelegate> init(std::span<const uint8_t> blob,
                                   const std::vector<CompileSpec>& compile_specs);
  DemoDelegate(DemoDelegate&&) noexcept;
  DemoDelegate& operator=(DemoDelegate&&) noexcept;
  ~DemoDelegate();

  /// Runs the program on `inputs` (one per user input, in order) and returns its user outputs.
  /// Buffers the program mutates keep their new value for the next call.
  Result<std::vector<Tensor>> execute(std::span<const Tensor> inputs);
  /// The parsed submodule.
  const ExportedProgram& program() const { return *program_; }

 private:
  DemoDelegate();
  std::unique_ptr<ExportedProgram> program_;
  std::unique_ptr<portable::Interpreter> interpreter_;
};

/// Runs `program` with the portable interpreter, executing every call_delegate through a
/// DemoDelegate made from its lowered module (each must have backend id "demo"). Returns the
/// user outputs. `program` is borrowed for the call.
Result<std::vector<Tensor>> run_with_demo_delegates(ExportedProgram& program,
                                                   std::span<const Tensor> inputs);

}  // namespace kiln::demo
