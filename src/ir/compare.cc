#include "kiln/ir/compare.h"

#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kiln {
namespace {

// Compares node pairs with an explicit work list. A pair is assumed equal while it is being
// checked: graphs are acyclic, so a pair is equal exactly when no reachable pair differs
// locally. Proven pairs stay in the memo, so a whole-graph comparison visits each pair once.
class SameNodeChecker {
 public:
  bool same(const Node* a, const Node* b) {
    stack_.clear();
    if (!visit(a, b)) return false;
    while (!stack_.empty()) {
      auto [x, y] = stack_.back();
      stack_.pop_back();
      if (!same_locally(x, y)) return false;
    }
    return true;
  }

 private:
  // Queues the pair unless already seen; false if one side is missing.
  bool visit(const Node* a, const Node* b) {
    if (a == nullptr || b == nullptr) return a == b;
    // Fast path: most left nodes pair with one right node, so a dense map covers them.
    if (a->id() >= first_match_.size()) first_match_.resize(a->id() + 1, kNone);
    uint32_t& m = first_match_[a->id()];
    if (m == b->id()) return true;
    if (m == kNone) {
      m = b->id();
    } else if (!others_.insert((uint64_t{a->id()} << 32) | b->id()).second) {
      return true;
    }
    stack_.emplace_back(a, b);
    return true;
  }

  bool same_arg(const Arg& x, const Arg& y) {
    if (x.kind() != y.kind()) return false;
    if (x.is_node()) return visit(x.node(), y.node());
    if (x.is_node_list()) {
      const auto& lx = x.nodes();
      const auto& ly = y.nodes();
      if (lx.size() != ly.size()) return false;
      for (size_t i = 0; i < lx.size(); ++i) {
        if (!visit(lx[i], ly[i])) return false;
      }
      return true;
    }
    return x == y;
  }

  bool same_locally(const Node* a, const Node* b) {
    if (a->op() != b->op()) return false;
    if (a->op() == OpKind::kCallFunction ? a->target() != b->target()
                                         : a->target_name() != b->target_name()) {
      return false;
    }
    if (a->num_args() != b->num_args() || a->kwargs().size() != b->kwargs().size()) return false;
    for (size_t i = 0; i < a->num_args(); ++i) {
      if (!same_arg(a->arg(i), b->arg(i))) return false;
    }
    for (size_t i = 0; i < a->kwargs().size(); ++i) {
      if (!same_arg(a->kwargs()[i], b->kwargs()[i])) return false;
    }
    return same_repeats(a, b);
  }

  // The args matched position by position, so the operand lists align. The reference compares
  // the distinct input nodes (all_input_nodes): add(r, r2) is not add(r, r) even when r2 is the
  // same as r. So operand i must repeat operand j of one node exactly when it does of the other.
  bool same_repeats(const Node* a, const Node* b) {
    std::span<const Use> x = a->operands();
    std::span<const Use> y = b->operands();
    if (x.size() != y.size()) return false;
    if (x.size() <= kSmallOperands) {
      for (size_t i = 1; i < x.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if ((x[i].value == x[j].value) != (y[i].value == y[j].value)) return false;
        }
      }
      return true;
    }
    first_x_.clear();
    first_y_.clear();
    for (size_t i = 0; i < x.size(); ++i) {
      if (first_x_.emplace(x[i].value, i).first->second !=
          first_y_.emplace(y[i].value, i).first->second) {
        return false;
      }
    }
    return true;
  }

  static constexpr uint32_t kNone = 0xffffffffu;
  static constexpr size_t kSmallOperands = 16;
  std::vector<uint32_t> first_match_;
  std::unordered_set<uint64_t> others_;
  std::vector<std::pair<const Node*, const Node*>> stack_;
  std::unordered_map<const Node*, size_t> first_x_, first_y_;
};

}  // namespace

bool is_same_node(const Node* a, const Node* b) {
  SameNodeChecker checker;
  return checker.same(a, b);
}

bool is_identical_graph(const Graph& a, const Graph& b) {
  if (a.size() != b.size()) return false;
  SameNodeChecker checker;
  const Node* x = a.first();
  const Node* y = b.first();
  for (; x != nullptr && y != nullptr; x = x->next(), y = y->next()) {
    if (!checker.same(x, y)) return false;
  }
  return x == nullptr && y == nullptr;
}

}  // namespace kiln
