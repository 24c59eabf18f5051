// The demo backend: delegates a chosen op set, its blob is the submodule as .kir text, and its
// runtime runs that text with the portable interpreter. It exists so tests and `kiln partition`
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

namespace kiln::demo {

/// The backend id partitioners name.
inline constexpr std::string_view kBackendId = "demo";
/// Compile spec key: comma-separated op names the delegate accepts ("add,mul"); absent: any op.
inline constexpr std::string_view kOpsSpecKey = "ops";
/// A demo blob: kBlobMagic; the size of the text (u64, little-endian); the submodule as .kir
/// text with every constant printed by size; zeros up to a multiple of kBlobAlign; then each
/// constant's bytes in the constant store's (name) order, each padded to kBlobAlign.
inline constexpr std::string_view kBlobMagic = "KILNDEMO2\n";
inline constexpr size_t kBlobAlign = 64;
/// `n` rounded up to a multiple of kBlobAlign: where the next part of a demo blob starts.
inline constexpr size_t blob_align(size_t n) { return (n + kBlobAlign - 1) / kBlobAlign * kBlobAlign; }

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
/// (naming the node), and returns the submodule as a demo blob (see kBlobMagic), with one
/// debug-map entry per call node (generated identifiers).
class DemoBackend final : public BackendDetails {
 public:
  std::string_view id() const override { return kBackendId; }
  Result<PreprocessResult> preprocess(const ExportedProgram& submodule,
                                      const std::vector<CompileSpec>& compile_specs) const override;
};

/// Adds the demo backend to `registry` (fails if "demo" is already there).
Status register_demo_backend(BackendRegistry& registry);

/// Runtime side: a parsed blob run by the portable interpreter. Movable; owns its program, whose
/// constants view the blob's bytes in place.
class DemoDelegate {
 public:
  /// Checks the magic, the sizes and the .kir text; errors name what is wrong in the blob and
  /// where. `blob` must outlive the delegate (the constants are views of it, never copies).
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
