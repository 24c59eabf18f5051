// Helpers for lowering tests: a partitioner that tags given node names, and registries.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/backends/demo/demo_backend.h"
#include "kiln/lower/to_backend.h"
#include "kiln/partition/partitioner.h"
#include "testing/graph_builder.h"

namespace kiln::testing {

using Tags = std::map<std::string, std::string>;

/// Tags nodes by name; every tag goes to `backend_id` with `specs`.
class TagPartitioner : public Partitioner {
 public:
  explicit TagPartitioner(std::map<std::string, std::string> tags, std::string backend_id = "demo",
                 std::vector<CompileSpec> specs = {})
      : tags_(std::move(tags)), backend_id_(std::move(backend_id)), specs_(std::move(specs)) {}

  /// Also reports `tag` without tagging any node.
  void add_empty_tag(const std::string& tag) { empty_tags_.push_back(tag); }

  Result<PartitionResult> partition(ExportedProgram& program) override {
    PartitionResult r;
    for (const auto& [name, tag] : tags_) {
      Node* n = program.graph().find(name);
      if (n == nullptr) return not_found("TagPartitioner: no node '{}'", name);
      n->meta.delegation_tag = tag;
      r.partition_tags[tag] = DelegationSpec{backend_id_, specs_};
    }
    for (const auto& tag : empty_tags_) r.partition_tags[tag] = DelegationSpec{backend_id_, specs_};
    return r;
  }

 private:
  std::map<std::string, std::string> tags_;
  std::string backend_id_;
  std::vector<CompileSpec> specs_;
  std::vector<std::string> empty_tags_;
};

/// GraphBuilder whose shorthands build their argument vectors element by element: copying Args
/// out of an initializer list makes GCC 12 report a false -Wmaybe-uninitialized at -O2.
class LowerBuilder : public GraphBuilder {
 public:
  using GraphBuilder::GraphBuilder;
  Node* op(OpId id, std::initializer_list<Node*> inputs) {
    std::vector<Arg> args;
    for (Node* n : inputs) args.emplace_back(n);
    return call(id, std::move(args));
  }
  /// `id(a, value)` with a number as second argument (mul(x, 2.0)).
  Node* op_scalar(OpId id, Node* a, double value) {
    std::vector<Arg> args;
    args.emplace_back(a);
    args.emplace_back(value);
    return call(id, std::move(args));
  }
  Node* add(Node* a, Node* b) { return op(OpId::kAdd, {a, b}); }
  Node* mul(Node* a, Node* b) { return op(OpId::kMul, {a, b}); }
  Node* relu(Node* a) { return op(OpId::kRelu, {a}); }
  Node* neg(Node* a) { return op(OpId::kNeg, {a}); }
  Node* linear(Node* x, Node* w, Node* b = nullptr) {
    std::vector<Arg> args;
    args.emplace_back(x);
    args.emplace_back(w);
    if (b != nullptr) args.emplace_back(b); else args.emplace_back(nullptr);
    return call(OpId::kLinear, std::move(args));
  }
};

inline BackendRegistry demo_registry() {
  BackendRegistry r;
  EXPECT_TRUE(demo::register_demo_backend(r).ok());
  return r;
}

}  // namespace kiln::testing
