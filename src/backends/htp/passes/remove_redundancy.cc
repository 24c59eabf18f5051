// RemoveRedundancy: ops that return their input unchanged are bypassed and erased.
#include "passes.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

bool is_identity_dims(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Whether `n` returns its input unchanged. Its output spec must equal its input's either way.
bool is_redundant(const Node* n) {
  if (n->op() != OpKind::kCallFunction || n->num_args() == 0 || !n->arg(0).is_node()) return false;
  const Node* in = n->arg(0).node();
  if (!n->has_spec() || !in->has_spec() || n->meta.val.size() != 1 || in->meta.val.size() != 1 ||
      n->spec() != in->spec()) {
    return false;
  }
  switch (n->target()) {
    case OpId::kCast:
    case OpId::kView:
    case OpId::kReshape:
    case OpId::kFlatten:
    case OpId::kUnflatten:
    case OpId::kExpand:
      return true;
    case OpId::kPermute: return is_identity_dims(n->kwarg("dims").to_ints());
    case OpId::kTranspose: {
      auto rank = static_cast<int64_t>(in->spec().rank());
      int64_t d0 = n->kwarg_int("dim0"), d1 = n->kwarg_int("dim1");
      return rank > 0 && (d0 + rank) % rank == (d1 + rank) % rank;
    }
    case OpId::kSlice: return n->kwarg_int("step") == 1;  // same shape with step 1: whole dim
    case OpId::kPad: {
      if (n->kwarg("mode").to_str() != "constant") return false;
      for (int64_t p : n->kwarg("pad").to_ints()) {
        if (p != 0) return false;
      }
      return true;
    }
    default: return false;
  }
}

}  // namespace

Result<bool> remove_redundancy(ExportedProgram& program) {
  Graph& g = program.graph();
  bool changed = false;
  for (Node* n = g.first(); n != nullptr;) {
    Node* next = n->next();
    if (is_redundant(n)) {
      g.replace_all_uses_with(n, n->arg(0).node());
      g.erase(n);
      changed = true;
    }
    n = next;
  }
  return changed;
}

}  // namespace kiln::htp
