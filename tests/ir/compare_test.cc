// is_same_node / is_identical_graph (ExecuTorch's exir/backend/utils.py semantics).
#include "kiln/ir/compare.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "testing/graph_builder.h"

namespace kiln {
namespace {

using testing::f32;
using testing::GraphBuilder;

// x -> linear(w) -> relu -> add(x) -> mean(dim=[1]); names differ per `prefix`.
Node* build_block(ExportedProgram& p, const std::string& prefix, double alpha = 1.0,
                  int64_t dim = 1) {
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 4}));
  Node* w = b.param("w", {4, 4});
  Node* lin = b.call(OpId::kLinear, {x, w}, {}, prefix + "lin");
  Node* r = b.call(OpId::kRelu, {lin}, {}, prefix + "relu");
  Node* a = b.call(OpId::kAdd, {r, x}, {{"alpha", alpha}}, prefix + "add");
  Node* m = b.call(OpId::kMean, {a}, {{"dim", std::vector<int64_t>{dim}}}, prefix + "mean");
  b.outputs({m});
  return m;
}

TEST(IsSameNode, IgnoresNamesAndMetaButNotStructure) {
  ExportedProgram p1, p2;
  Node* m1 = build_block(p1, "a_");
  Node* m2 = build_block(p2, "b_");
  m2->meta.debug_handle = 9;
  EXPECT_TRUE(is_same_node(m1, m2));
  EXPECT_TRUE(is_identical_graph(p1.graph(), p2.graph()));
}

TEST(IsSameNode, KwargsAndScalarArgsCount) {
  ExportedProgram p1, p2, p3;
  Node* m1 = build_block(p1, "");
  Node* m2 = build_block(p2, "", 2.0);
  Node* m3 = build_block(p3, "", 1.0, 0);
  EXPECT_FALSE(is_same_node(m1, m2));  // differs deep down, in add's alpha
  EXPECT_FALSE(is_same_node(m1, m3));
  EXPECT_FALSE(is_identical_graph(p1.graph(), p2.graph()));
  EXPECT_TRUE(is_same_node(m1->arg(0).node()->arg(0).node(), m2->arg(0).node()->arg(0).node()));
}

TEST(IsSameNode, OpKindAndTargetCount) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* y = b.input("y", f32({2}));
  Node* r = b.relu(x);
  Node* n = b.neg(x);
  Node* r2 = b.relu(x);
  Node* ry = b.relu(y);
  EXPECT_TRUE(is_same_node(r, r2));
  EXPECT_FALSE(is_same_node(r, n));    // other target
  EXPECT_FALSE(is_same_node(r, ry));   // placeholder targets differ
  EXPECT_FALSE(is_same_node(x, r));    // other op kind
  EXPECT_TRUE(is_same_node(x, x));
  EXPECT_FALSE(is_same_node(x, nullptr));
  EXPECT_TRUE(is_same_node(nullptr, nullptr));
}

TEST(IsSameNode, NodeListsCompareElementwise) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* r = b.relu(x);
  Node* n = b.neg(x);
  Node* c1 = b.call(OpId::kCat, {std::vector<Node*>{r, n}});
  Node* c2 = b.call(OpId::kCat, {std::vector<Node*>{b.relu(x), b.neg(x)}});
  Node* c3 = b.call(OpId::kCat, {std::vector<Node*>{n, r}});
  Node* c4 = b.call(OpId::kCat, {std::vector<Node*>{r}});
  EXPECT_TRUE(is_same_node(c1, c2));
  EXPECT_FALSE(is_same_node(c1, c3));
  EXPECT_FALSE(is_same_node(c1, c4));
}

// The reference compares the distinct input nodes: add(r, r2) has two, add(r, r) one. kiln
// also keeps positions, which the reference drops: for it cat([r, r, n]) == cat([r, n, n]).
TEST(IsSameNode, RepeatedInputsRepeatAlike) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* r = b.relu(x);
  Node* r2 = b.relu(x);
  Node* n = b.neg(x);
  EXPECT_FALSE(is_same_node(b.call(OpId::kAdd, {r, r2}), b.call(OpId::kAdd, {r, r})));
  EXPECT_TRUE(is_same_node(b.call(OpId::kAdd, {r, r2}), b.call(OpId::kAdd, {r2, r})));
  EXPECT_TRUE(is_same_node(b.call(OpId::kAdd, {x, x}), b.call(OpId::kAdd, {x, x})));
  EXPECT_FALSE(is_same_node(b.call(OpId::kCat, {std::vector<Node*>{r, r, n}}),
                            b.call(OpId::kCat, {std::vector<Node*>{r, n, n}})));
}

// The reference's lru_cache would still answer true after the mutation.
TEST(IsSameNode, NothingCachedAcrossCalls) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* y = b.input("y", f32({2}));
  Node* r = b.relu(x);
  Node* r2 = b.relu(x);
  EXPECT_TRUE(is_same_node(r, r2));
  ASSERT_TRUE(p.graph().set_arg(r2, 0, Arg(y)).ok());
  EXPECT_FALSE(is_same_node(r, r2));
}

// A get_attr is compared by the attribute it reads: a lowered module is not looked into, and a
// delegate call's inputs count like any other node's.
TEST(IsIdenticalGraph, DelegateCallsCompareByModuleName) {
  auto build = [](ExportedProgram& p, const char* module, bool extra_input) {
    GraphBuilder b(p);
    Node* x = b.input("x", f32({2}));
    std::vector<Arg> args{Arg(p.graph().add_get_attr(module)), Arg(x)};
    if (extra_input) args.emplace_back(x);
    auto call = p.graph().add_call(OpId::kCallDelegate, std::move(args));
    EXPECT_TRUE(call.ok());
    (*call)->meta.val = {f32({2})};
    b.outputs({b.call(OpId::kGetitem, {*call, 0})});
  };
  ExportedProgram p1, p2, p3, p4;
  build(p1, "lowered_module_0", false);
  build(p2, "lowered_module_0", false);
  build(p3, "lowered_module_1", false);
  build(p4, "lowered_module_0", true);
  EXPECT_TRUE(is_identical_graph(p1.graph(), p2.graph()));
  EXPECT_FALSE(is_identical_graph(p1.graph(), p3.graph()));
  EXPECT_FALSE(is_identical_graph(p1.graph(), p4.graph()));
}

TEST(IsIdenticalGraph, OrderAndCountMatter) {
  ExportedProgram p1, p2, p3;
  for (ExportedProgram* p : {&p1, &p2}) {
    GraphBuilder b(*p);
    Node* x = b.input("x", f32({2}));
    Node* r = b.relu(x);
    Node* n = b.neg(x);
    b.outputs({p == &p1 ? r : n, p == &p1 ? n : r});
  }
  // Same nodes, other return order: the output nodes differ.
  EXPECT_FALSE(is_identical_graph(p1.graph(), p2.graph()));
  {
    GraphBuilder b(p3);
    Node* x = b.input("x", f32({2}));
    Node* n = b.neg(x);  // created first: same set of nodes, other order
    Node* r = b.relu(x);
    b.outputs({r, n});
  }
  EXPECT_FALSE(is_identical_graph(p1.graph(), p3.graph()));
  ExportedProgram p4 = p1.clone();
  EXPECT_TRUE(is_identical_graph(p1.graph(), p4.graph()));
  GraphBuilder(p4).relu(p4.graph().find("x"));
  EXPECT_FALSE(is_identical_graph(p1.graph(), p4.graph()));
}

// A chain far deeper than any call stack allows for recursion: two chains in one graph, from
// get_attr leaves with the same target. KILN_LARGE_TESTS=1 makes it 1,000,000 nodes deep
// (about 25 s to build here, so not by default).
TEST(IsSameNode, DeepChainsDoNotRecurse) {
  const char* large = std::getenv("KILN_LARGE_TESTS");
  const int depth = large != nullptr && std::string(large) == "1" ? 1000000 : 100000;
  Graph g;
  Node* ends[2];
  Node* middle = nullptr;
  for (int c = 0; c < 2; ++c) {
    Node* prev = g.add_get_attr("w", c ? "b" : "a");
    for (int i = 0; i < depth; ++i) {
      auto r = g.add_call_exact(OpId::kNeg, {prev}, {}, c ? "b" : "a", false);
      ASSERT_TRUE(r.ok());
      prev = *r;
      if (c == 1 && i == depth / 2) middle = prev;
    }
    ends[c] = prev;
  }
  EXPECT_TRUE(is_same_node(ends[0], ends[1]));
  // One different op halfway down is found.
  Node* before = middle->arg(0).node();
  auto abs = g.add_call_exact(OpId::kAbs, {before}, {}, "abs", false);
  ASSERT_TRUE(abs.ok());
  g.move_after(*abs, before);
  g.replace_all_uses_with(middle, *abs);
  EXPECT_FALSE(is_same_node(ends[0], ends[1]));
}

}  // namespace
}  // namespace kiln
