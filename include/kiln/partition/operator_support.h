// OperatorSupport: a backend's yes/no (with a reason) per node, and combinators to build one
// (torch.fx's OperatorSupportBase and chain / any_chain, with reasons).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

/// Outcome of one support check: `reason` says why not (empty when supported).
struct SupportResult {
  bool supported = false;
  std::string reason;

  /// Accepted.
  static SupportResult yes() { return {true, {}}; }
  /// Rejected because `reason` (a phrase that reads after "because": "op 'gelu' is not ...").
  static SupportResult no(std::string reason) { return {false, std::move(reason)}; }
};

/// Says whether a backend can run a call_function node. The partitioner only asks about
/// call_function nodes; `program` and `node` outlive the call. Implementations must be
/// deterministic and must not mutate the program.
class OperatorSupport {
 public:
  virtual ~OperatorSupport() = default;
  /// Whether `node` of `program` is supported, with the reason when it is not.
  virtual SupportResult is_node_supported(const ExportedProgram& program,
                                          const Node& node) const = 0;
};

/// Checks are shared immutable objects: combinators hold shared pointers to their parts, so one
/// check can appear in several combinations and outlive the code that built it.
using OperatorSupportPtr = std::shared_ptr<const OperatorSupport>;

/// Supported when any part accepts. Rejection reason: the parts' reasons joined with "; " and
/// prefixed "no check accepts it: ". An empty list rejects with "no check accepts it".
OperatorSupportPtr any_of(std::vector<OperatorSupportPtr> parts);
/// Supported when every part accepts (evaluated in order, stopping at the first rejection, whose
/// reason is returned unchanged). An empty list accepts.
OperatorSupportPtr all_of(std::vector<OperatorSupportPtr> parts);
/// Supported when `part` rejects. When `part` accepts, the reason is "it is excluded: <what>"
/// where `what` describes the part ("it matches <what>"), e.g. negate(ops({kGelu}), "op set
/// {gelu}") rejects gelu with "it is excluded: it matches op set {gelu}".
OperatorSupportPtr negate(OperatorSupportPtr part, std::string what);

/// Supported when the node's op is in `ops`. Reason: "op 'gelu' is not in the supported op set".
OperatorSupportPtr supported_ops(std::vector<OpId> ops);
/// Supported when every tensor input and output of the node has a dtype in `dtypes` (inputs whose
/// spec is unknown are skipped). Reasons: "input 'x' has dtype i64, which is not in {f32, f16}",
/// "output has dtype i64, which is not in {f32}" (output k of a tuple: "output 1 has ...").
OperatorSupportPtr supported_dtypes(std::vector<DType> dtypes);
/// Supported when the node's name is in `allow`. Reason: "node name 'x' is not in the allow list".
OperatorSupportPtr allow_node_names(std::vector<std::string> allow);
/// Supported unless the node's name is in `deny`. Reason: "node name 'x' is in the deny list".
OperatorSupportPtr deny_node_names(std::vector<std::string> deny);

/// Signature of a lambda check.
using SupportFn = std::function<SupportResult(const ExportedProgram&, const Node&)>;
/// A check given by a function (copied into the check).
OperatorSupportPtr support_fn(SupportFn fn);

}  // namespace kiln
