// PassManager: runs a list of program passes in order, verifying and optionally printing the
// program after each pass that changed it, and timing every pass (torch.fx's PassManager, with
// MLIR's verify-after-each and print-ir-after-change).
//
// A pass is one function over an ExportedProgram, `Result<bool>(ExportedProgram&)`: its doc
// comment states what it needs before and guarantees after; it returns whether it changed the
// program, or an error naming what it could not handle. Passes are listed explicitly by whoever
// builds a pipeline (no registration).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

/// One pass: whether it changed the program, or why it failed.
using PassFn = std::function<Result<bool>(ExportedProgram&)>;

/// Called after a pass that changed the program (for printing the .kir after each change).
/// `program` is valid during the call only.
using AfterPassFn = std::function<void(std::string_view pass, const ExportedProgram& program)>;

struct PassManagerOptions {
  /// Run ExportedProgram::lint() after each pass that changed the program; an error names the
  /// pass. On by default: the cost is linear in the graph, small beside most passes.
  bool lint = true;
  /// Lint the program once before the first pass too (a broken input is not blamed on a pass).
  bool lint_input = false;
  /// Seen after each pass that changed the program (after its lint). Empty: nothing.
  AfterPassFn after_changed;
};

/// What one pass did in the last run.
struct PassRecord {
  std::string name;
  bool changed = false;
  std::chrono::nanoseconds time{0};  ///< the pass itself, without lint or the callback
};

/// Runs passes in the order added. Not thread-safe; reusable across programs.
class PassManager {
 public:
  explicit PassManager(PassManagerOptions options = {});

  /// Appends pass `fn` named `name` (a name for messages and timings, such as "FoldQDQ").
  PassManager& add(std::string name, PassFn fn);
  /// Number of passes added.
  size_t size() const { return passes_.size(); }

  /// Runs every pass on `program` in order. Returns whether any pass changed it. Stops at the
  /// first failure: "pass 'NAME': <the pass's message>", or "after pass 'NAME': lint: ..." when
  /// the program it left does not lint. The program is then as the failing pass left it.
  Result<bool> run(ExportedProgram& program);

  /// One record per pass that ran in the last run(), in order.
  const std::vector<PassRecord>& records() const { return records_; }
  /// The last run's records as a table: pass, changed, milliseconds, and a total line.
  std::string timing_report() const;

 private:
  struct Entry {
    std::string name;
    PassFn fn;
  };
  PassManagerOptions options_;
  std::vector<Entry> passes_;
  std::vector<PassRecord> records_;
};

}  // namespace kiln
