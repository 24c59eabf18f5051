// Tagging of constant data and mutated buffers, and duplication of constants shared across
// partitions (ExecuTorch's tag_constant_data, tag_mutated_buffer and
// _maybe_duplicate_constant_nodes).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

/// Orders tags so that numbered tags compare by number: "xnnpack_2" < "xnnpack_10". Tags split
/// into (text before the trailing digits, trailing number); text compares first, then number,
/// then the whole string. Used wherever kiln must pick the "smallest" tag.
bool tag_less(std::string_view a, std::string_view b);

/// Gives every parameter, buffer and lifted-constant placeholder whose users are all tagged the
/// smallest of their tags (tag_less), so a constant used only inside partitions moves into one of
/// them. Constants with an untagged user, with no users, or that are mutated buffers (see
/// tag_mutated_buffer) are not changed. Returns how many placeholders got a tag.
size_t tag_constant_data(ExportedProgram& program);

/// A buffer is mutated iff it is the target of a buffer-mutation output. It goes to a delegate
/// (its placeholder is tagged T) only when every reader of its old value (the placeholder's
/// users), the writer (the node returned as the mutation output) and every reader of the new
/// value (the writer's other users) carry tag T, and the new value is not also returned as
/// another output. Otherwise it stays in the owning program: a tag already on its placeholder is
/// removed, and a warning says why:
///   "tag_mutated_buffer: buffer 'B' (placeholder 'P') stays in the owning program and loses tag
///    'T': <why>"
/// where <why> is one of "its reader 'N' is tagged 'U'", "its reader 'N' is not tagged",
/// "it is returned as an output", "its new value 'N' is tagged 'U'", "its new value 'N' is not
/// tagged", "its new value 'N' is a placeholder", "its new value 'N' is read by 'M', which
/// is tagged 'U'" (or "which is not tagged"), "its new value 'N' is also returned as output K".
/// Returns the warnings in placeholder order.
std::vector<std::string> tag_mutated_buffer(ExportedProgram& program);

/// What duplicate_constants_for_partitions did.
struct DuplicationSummary {
  size_t copies = 0;                ///< new placeholders
  size_t bytes = 0;                 ///< bytes the copies name (shared until written)
  std::vector<std::string> names;   ///< new placeholder names, in creation order
};

/// Before lowering: a tagged constant placeholder (parameter, buffer, lifted constant) that is
/// also read by nodes with another tag, or untagged nodes, gets one copy per such tag (the
/// untagged readers share one untagged copy). Copies are named "<placeholder>_copy_<k>" (their
/// constant "<target>_copy_<k>"), k counting from 0 per constant in order of each tag's first
/// reader in graph order; uses inside list arguments (cat([c, x])) are redirected too. Each copy
/// is a new placeholder right after the original (or its previous copy), with a new InputSpec of
/// the same kind at the same place and a new constant-store entry sharing the bytes (copy on
/// write), so ExportedProgram::lint() still passes. Fails, changing nothing, when such a constant
/// has `no_copy` set: "constant 'P' (tag 'T') has no_copy set but is used by node 'N' (tag 'U')"
/// ("(untagged)" for an untagged user), or is a mutated buffer: "mutated buffer 'P' (tag 'T') is
/// used by node 'N' (tag 'U') and cannot be copied".
Result<DuplicationSummary> duplicate_constants_for_partitions(ExportedProgram& program);

}  // namespace kiln
