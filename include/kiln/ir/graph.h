// Graph: an arena of nodes in topological order, with exact use-lists.
#pragma once

#include <cstdint>
#include <memory>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/core/arena.h"
#include "kiln/core/status.h"
#include "kiln/ir/detail/array_pool.h"
#include "kiln/ir/detail/name_table.h"
#include "kiln/ir/node.h"

namespace kiln {

/// Keyword arguments as given by callers: (name, value) pairs in any order.
using Kwargs = std::vector<std::pair<std::string_view, Arg>>;

/// A dataflow graph. The node list is the topological order: creation inserts at the insertion
/// point, and every mutation keeps inputs before users (lint() verifies it). Not copyable or
/// movable (nodes point back to it); hold it by unique_ptr to move it.
class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // ---- Creation. Nodes are inserted before the insertion point (default: the output node, or
  // the end when there is none); placeholders go after the last placeholder.

  /// New placeholder named `name` (made unique) with spec `spec`.
  Node* add_placeholder(std::string_view name, TensorSpec spec);
  /// New get_attr node reading `target` (a constant or lowered module name).
  Node* add_get_attr(std::string_view target, std::string_view name = {});
  /// New call of `op`: checks args against the schema, fills defaults and infers output specs
  /// (unless `infer_spec` is false: the caller sets `meta.val`). `name` (default: the op name)
  /// is made unique. On error nothing is added and the message names the node and the argument.
  Result<Node*> add_call(OpId op, std::vector<Arg> args, const Kwargs& kwargs = {},
                         std::string_view name = {}, bool infer_spec = true);
  /// Like add_call with kwargs already complete and in schema order (the parser and cloners).
  /// `infer` = false keeps `meta.val` as given by the caller afterwards.
  Result<Node*> add_call_exact(OpId op, std::vector<Arg> args, std::vector<Arg> kwargs,
                               std::string_view name, bool infer = true);
  /// Sets (or replaces) the output node returning `values`.
  Node* set_output(std::vector<Node*> values);

  /// Where new nodes go: before `node` (null: the default). Returns the previous point.
  Node* set_insert_point(Node* before);
  /// RAII: restores the previous insertion point.
  class InsertGuard {
   public:
    InsertGuard(Graph& g, Node* before) : g_(g), prev_(g.set_insert_point(before)) {}
    ~InsertGuard() { g_.set_insert_point(prev_); }
    InsertGuard(const InsertGuard&) = delete;
    InsertGuard& operator=(const InsertGuard&) = delete;
   private:
    Graph& g_;
    Node* prev_;
  };

  // ---- Mutation.

  /// Every use of `from` reads `to` instead. O(uses of from). `to` must come before those users.
  void replace_all_uses_with(Node* from, Node* to);
  /// As replace_all_uses_with, only for the uses whose user satisfies `pred`.
  void replace_all_uses_with_if(Node* from, Node* to, const std::function<bool(Node*)>& pred);
  /// Replaces positional arg `i` of `node` (re-checks it against the schema; no re-inference).
  Status set_arg(Node* node, size_t i, Arg value);
  /// Replaces every positional arg of `node` (call_function or output).
  Status set_args(Node* node, std::vector<Arg> args);
  /// Replaces keyword `name` of a call node (checked against the schema).
  Status set_kwarg(Node* node, std::string_view name, Arg value);
  /// Re-runs shape inference of `node` from its inputs' current specs.
  Status infer(Node* node);
  /// Removes `node`; it must have no uses (aborts otherwise: callers check first).
  void erase(Node* node);
  /// Moves `node` just before `pos` (which must not be `node`). Callers keep order valid.
  void move_before(Node* node, Node* pos);
  void move_after(Node* node, Node* pos);
  /// Renames `node` to `name` when that is free (also when an erased node had it), else to
  /// `name` made unique; returns the name given.
  const std::string& rename(Node* node, std::string_view name);

  // ---- Queries.

  class Iterator {
   public:
    explicit Iterator(Node* n) : n_(n) {}
    Node* operator*() const { return n_; }
    Iterator& operator++() { n_ = n_->next(); return *this; }
    bool operator==(const Iterator& o) const { return n_ == o.n_; }
    bool operator!=(const Iterator& o) const { return n_ != o.n_; }
   private:
    Node* n_;
  };
  struct Range {
    Node* first;
    Iterator begin() const { return Iterator(first); }
    Iterator end() const { return Iterator(nullptr); }
  };
  /// Nodes in order. Safe to erase the current node only after advancing past it.
  Range nodes() const { return {first_}; }
  Node* first() const { return first_; }
  Node* last() const { return last_; }
  size_t size() const { return live_count_; }
  /// Nodes in reverse order.
  std::vector<Node*> nodes_reversed() const;
  Node* output_node() const { return output_; }
  std::vector<Node*> placeholders() const;
  /// Node named `name`, or null.
  Node* find(std::string_view name) const;
  /// One past the largest node id ever given (size for vectors indexed by Node::id()).
  uint32_t id_bound() const { return next_id_; }
  /// Node with id `id`, or null if erased.
  Node* node_by_id(uint32_t id) const;

  /// Verifies every invariant: use-lists match args, names are unique, inputs precede users,
  /// one output node at the end, args fit their schema. Returns the first broken one.
  Status lint() const;

 private:
  Node* new_node(OpKind kind, std::string_view name);
  void link_before(Node* n, Node* pos);  // pos null: append
  void unlink(Node* n);
  void renumber();
  void assign_order(Node* n);
  void build_uses(Node* n);
  void drop_uses(Node* n);
  void add_use(Use* u);
  void remove_use(Use* u);
  void assign_unique_name(Node* n, std::string_view base);
  Status check_schema(Node* n, std::vector<Arg>& args, std::vector<Arg>& kwargs) const;
  bool args_fit_schema(const Node* n) const;

  // Storage: every node and its arrays live in one arena (huge pages once the graph is big).
  // Nodes sit in chunks of 16, 32, 64, ... so they never move and ids index them in O(1).
  static constexpr uint32_t kFirstChunkBits = 4;
  Node* slot(uint32_t id) const;
  void set_args_storage(Node* n, std::span<Arg> args, std::span<Arg> kwargs);
  void free_args_storage(Node* n);

  Arena arena_;
  detail::ArrayPool<Arg> arg_pool_{&arena_};
  detail::ArrayPool<Use> use_pool_{&arena_};
  std::vector<Node*> chunks_;
  uint32_t next_id_ = 0;
  Node* first_ = nullptr;
  Node* last_ = nullptr;
  Node* output_ = nullptr;
  Node* insert_point_ = nullptr;
  Node* last_placeholder_ = nullptr;
  size_t live_count_ = 0;
  detail::NameTable names_;
};

}  // namespace kiln
