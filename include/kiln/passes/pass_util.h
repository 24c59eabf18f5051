// Helpers every graph pass uses: constants behind placeholders, insertion points, new calls and
// constants, dead-code removal, static shapes.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

/// The stored tensor behind a parameter / buffer / constant placeholder, or null.
const Tensor* constant_of(const ExportedProgram& program, const Node* n);
/// True for a placeholder of kind parameter, buffer or constant tensor.
bool is_constant_placeholder(const ExportedProgram& program, const Node* n);

/// The names of the buffers the program writes back (its buffer-mutation outputs).
std::set<std::string> written_buffers(const ExportedProgram& program);
/// True for the placeholder of a buffer in `written`.
bool is_written_buffer(const ExportedProgram& program, const std::set<std::string>& written, const Node* n);
/// The value behind a parameter / buffer / lifted constant placeholder that never changes (not
/// a buffer in `written`), or null: what constant folding and weight folding may read.
const Tensor* frozen_constant(const ExportedProgram& program, const std::set<std::string>& written, const Node* n);

/// Where a node computed from `n` goes so that it comes right after `n` (placeholders: before
/// the first non-placeholder node).
Node* after(const Graph& graph, Node* n);

/// Adds a call before `before` with the spec given (no inference).
Result<Node*> add_call_with_spec(Graph& g, Node* before, OpId op, std::vector<Arg> args,
                                 const Kwargs& kwargs, std::string_view name, TensorSpec spec);
/// Adds a call before `before`, inferring its spec.
Result<Node*> add_call_at(Graph& g, Node* before, OpId op, std::vector<Arg> args,
                          const Kwargs& kwargs = {}, std::string_view name = {});

/// A new lifted constant placeholder holding `value`, named after `base` (made unique, also as
/// a constant-store target).
Node* add_lifted_constant(ExportedProgram& program, std::string_view base, Tensor value);

/// Erases call_function nodes without uses and parameter / buffer / constant placeholders
/// without uses (with their constants), last to first so that chains go in one sweep. Returns
/// whether anything was erased. User inputs and the output stay.
Result<bool> eliminate_dead_code(ExportedProgram& program);
/// eliminate_dead_code, for passes that already know they changed the program.
inline Status remove_dead(ExportedProgram& program) {
  Result<bool> r = eliminate_dead_code(program);
  return r.ok() ? Status::Ok() : r.status();
}

/// A static shape of a single-value node, or nullopt.
std::optional<std::vector<int64_t>> static_shape_of(const Node* n);

/// The only user of `n`, or null.
inline Node* only_user(const Node* n) { return n->num_users() == 1 ? n->users()[0] : nullptr; }

/// The number an argument holds: a number, or a one-element floating or integer constant.
std::optional<double> scalar_value(const ExportedProgram& program, const Arg& a);

/// For a binary call `n` (add, mul, ...) one of whose two operands is node `v`: the other
/// operand's index (0 or 1), or nullopt.
std::optional<size_t> other_operand(const Node* n, const Node* v);

/// `old`'s users read `replacement` instead; `old` is erased and `replacement` takes its name
/// (so that output and value names stay the model's own) and, when it has none, its source.
void replace_node(Graph& g, Node* old, Node* replacement);

}  // namespace kiln
