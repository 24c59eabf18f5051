// Tagging of constant data and mutated buffers, and duplication of constants shared across
// partitions (ExecuTorch's tag_constant_data, tag_mutated_buffer and
// _maybe_duplicate_constant_nodes).
#pragma once

#include <cstddef>
#include <set>
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

/// Gives every parameter, buffer and lifted-constant placeholder that has a tagged user the
/// smallest of its users' tags (tag_less), as ExecuTorch's tag_constant_data does: the constant
/// moves into that partition, and duplicate_constants_for_partitions (which to_backend runs)
/// later gives its untagged users and its users in other partitions copies of their own.
/// Constants without a tagged user keep their tag (or lack of one); mutated buffers are left to
/// tag_mutated_buffer. Returns how many placeholders got a tag.
size_t tag_constant_data(ExportedProgram& program);

/// A buffer is mutated iff it is the target of a buffer-mutation output (its writer). As in
/// ExecuTorch's tag_mutated_buffer, it goes to a delegate (its placeholder gets tag T) only when
/// every reader of its old value, every writer and every reader of the new value carry tag T,
/// no writer is also a user output, and the buffer is read (or, when no node reads its old
/// value, the partitioner already tagged the buffer itself T). kiln adds one rule: a writer
/// that is a placeholder keeps the buffer in the owning program (a delegate can only write a
/// value it computes). Otherwise the buffer stays in the owning program, untagged. A warning
/// says why whenever the reference warns, i.e. when the buffer loses a tag, or when it is read
/// and some of its readers or writers are tagged:
///   "tag_mutated_buffer: buffer 'B' (placeholder 'P') stays in the owning program[ and loses
///    tag 'T']: <why>"
/// where <why> is "it is returned as an output" (its old value), "none of its readers and
/// writers is tagged", "<A> is tagged 'T' but <B> is not tagged" (or "is tagged 'U'"; A and B
/// are "its reader 'N'", "its new value 'N'" or "'M', which reads its new value 'N',"), "its new
/// value 'N' is also returned as output K", "its new value 'N' is a placeholder", "no node
/// reads its old value, and its tag is not its writer's tag 'T'". Returns the warnings in
/// placeholder order.
std::vector<std::string> tag_mutated_buffer(ExportedProgram& program);

/// What duplicate_constants_for_partitions did.
struct DuplicationSummary {
  size_t copies = 0;                ///< new placeholders
  size_t bytes = 0;                 ///< bytes the copies name (shared until written)
  std::vector<std::string> names;   ///< new placeholder names, in creation order
};

/// Before lowering (ExecuTorch's _maybe_duplicate_constant_nodes and _assign_new_tag): a constant
/// placeholder (parameter, buffer, lifted constant) tagged with one of `tags` (the partitions
/// being lowered) that is also read by nodes with another tag, or untagged nodes, gets one copy
/// per such tag; when none of its readers has its own tag, it takes its first reader's tag
/// itself and is copied for the others (the
/// untagged readers share one untagged copy). Copies are named "<placeholder>_copy_<k>" (their
/// constant "<target>_copy_<k>"), k counting from 0 per constant in order of each tag's first
/// reader in graph order; uses inside list arguments (cat([c, x])) are redirected too. Each copy
/// is a new placeholder right after the original (or its previous copy), with a new InputSpec of
/// the same kind at the same place and a new constant-store entry sharing the bytes (copy on
/// write), so ExportedProgram::lint() still passes. Fails, changing nothing, when such a constant
/// has `no_copy` set: "constant 'P' (tag 'T') has no_copy set but is used by node 'N' (tag 'U')"
/// ("(untagged)" for an untagged user), or is a mutated buffer: "mutated buffer 'P' (tag 'T') is
/// used by node 'N' (tag 'U') and cannot be copied".
Result<DuplicationSummary> duplicate_constants_for_partitions(ExportedProgram& program,
                                                              const std::set<std::string>& tags);

}  // namespace kiln
