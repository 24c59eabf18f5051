// Graph mutations and their invariants: use-lists, order, names, schema checks.
#include "kiln/ir/graph.h"

#include <gtest/gtest.h>

#include "testing/graph_builder.h"

namespace kiln {
namespace {

using testing::f32;
using testing::GraphBuilder;

std::vector<std::string> names(const Graph& g) {
  std::vector<std::string> out;
  for (Node* n : g.nodes()) out.push_back(n->name());
  return out;
}

class GraphTest : public ::testing::Test {
 protected:
  ExportedProgram p;
  GraphBuilder b{p};
  Graph& g = p.graph();
};

TEST_F(GraphTest, CreationKeepsOrderNamesAndUses) {
  Node* x = b.input("x", f32({2, 3}));
  Node* y = b.input("y", f32({2, 3}));
  Node* a = b.add(x, y);
  Node* a2 = b.add(a, a);
  b.outputs({a2});
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "y", "add", "add_1", "output"}));
  EXPECT_EQ(a->num_uses(), 2u);
  EXPECT_EQ(a->num_users(), 1u);  // fx counts distinct users
  EXPECT_EQ(a->users(), std::vector<Node*>{a2});
  EXPECT_EQ(x->users(), std::vector<Node*>{a});
  EXPECT_EQ(a2->input_nodes(), std::vector<Node*>{a});
  EXPECT_TRUE(x->is_before(a));
  EXPECT_FALSE(a2->is_before(a));
  EXPECT_EQ(a->spec(), f32({2, 3}));
  EXPECT_EQ(g.find("add_1"), a2);
  EXPECT_EQ(g.find("nope"), nullptr);
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
}

TEST_F(GraphTest, PlaceholdersStayFirstWhenAddedLate) {
  Node* x = b.input("x", f32({4}));
  Node* r = b.relu(x);
  b.outputs({r});
  Node* y = b.input("y", f32({4}));
  EXPECT_EQ(names(g), (std::vector<std::string>{"x", "y", "relu", "output"}));
  EXPECT_EQ(y->next(), r);
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
}

TEST_F(GraphTest, NamesAreSanitizedAndUnique) {
  Node* x = b.input("/conv1/Conv:0", f32({1}));
  EXPECT_EQ(x->name(), "_conv1_Conv_0");
  Node* x2 = b.input("/conv1/Conv:0", f32({1}));
  EXPECT_EQ(x2->name(), "_conv1_Conv_0_1");
  Node* d = b.input("3d", f32({1}));
  EXPECT_EQ(d->name(), "_3d");
  EXPECT_EQ(g.rename(d, "renamed"), "renamed");
  EXPECT_EQ(g.find("renamed"), d);
  EXPECT_EQ(g.find("_3d"), nullptr);
  EXPECT_EQ(d->target_name(), "renamed");
}

TEST_F(GraphTest, ReplaceAllUsesRewritesEverySlotIncludingLists) {
  Node* x = b.input("x", f32({2}));
  Node* y = b.input("y", f32({2}));
  Node* a = b.relu(x);
  Node* c = b.call(OpId::kCat, {std::vector<Node*>{a, y, a}});
  Node* m = b.mul(a, y);
  b.outputs({c, m, a});
  Node* n = b.neg(x);
  g.move_before(n, a);
  g.replace_all_uses_with(a, n);
  EXPECT_FALSE(a->has_uses());
  EXPECT_EQ(n->num_uses(), 4u);
  EXPECT_EQ(c->arg(0).nodes(), (std::vector<Node*>{n, y, n}));
  EXPECT_EQ(m->arg(0).node(), n);
  EXPECT_EQ(g.output_node()->arg(0).nodes()[2], n);
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
  g.erase(a);
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
  EXPECT_EQ(g.node_by_id(a->id()), nullptr);
}

TEST_F(GraphTest, ReplaceAllUsesIfOnlyTouchesSelectedUsers) {
  Node* x = b.input("x", f32({2}));
  Node* y = b.input("y", f32({2}));
  Node* r1 = b.relu(x);
  Node* r2 = b.neg(x);
  b.outputs({r1, r2});
  g.replace_all_uses_with_if(x, y, [&](Node* user) { return user == r2; });
  EXPECT_EQ(r1->input(0), x);
  EXPECT_EQ(r2->input(0), y);
  EXPECT_EQ(x->num_uses(), 1u);
  EXPECT_EQ(y->num_uses(), 1u);
  EXPECT_TRUE(p.lint().ok());
}

TEST_F(GraphTest, InsertGuardPlacesNodesBeforeAGivenNode) {
  Node* x = b.input("x", f32({2}));
  Node* r = b.relu(x);
  b.outputs({r});
  {
    Graph::InsertGuard guard(g, r);
    Node* n = b.neg(x);
    EXPECT_EQ(n->next(), r);
  }
  Node* after = b.neg(r);
  EXPECT_EQ(after->next(), g.output_node());
  EXPECT_TRUE(p.lint().ok());
}

TEST_F(GraphTest, InsertingBeforeAnInputIsRefused) {
  Node* x = b.input("x", f32({2}));
  Node* r = b.relu(x);
  b.outputs({r});
  Graph::InsertGuard guard(g, r);
  auto bad = g.add_call(OpId::kNeg, {r});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "node 'neg' (neg): input 'relu' comes after the insertion point");
  EXPECT_EQ(g.size(), 3u);
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
}

TEST_F(GraphTest, SchemaErrorsNameTheNodeAndArgument) {
  Node* x = b.input("x", f32({2}));
  auto r = g.add_call(OpId::kAdd, {x, "str"}, {}, "my_add");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'my_add' (add): argument 'other': got str, expected Scalar");
  r = g.add_call(OpId::kSoftmax, {x});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'softmax' (softmax): missing argument 'dim'");
  r = g.add_call(OpId::kSoftmax, {x}, {{"dims", 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'softmax' (softmax): unknown keyword argument 'dims'");
  r = g.add_call(OpId::kRelu, {x, x});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'relu' (relu): got 2 positional arguments, expected at most 1");
  r = g.add_call(OpId::kSoftmax, {x}, {{"dim", 1.5}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'softmax' (softmax): argument 'dim': got float, expected int");
  EXPECT_EQ(g.size(), 1u);  // nothing half-added
  EXPECT_TRUE(g.lint().ok());
}

TEST_F(GraphTest, DefaultsAreFilledAndIntsCoerceToFloats) {
  Node* x = b.input("x", f32({2}));
  Node* a = b.call(OpId::kAdd, {x, 2}, {{"alpha", 3}});
  EXPECT_EQ(a->kwarg("alpha").kind(), Arg::Kind::kFloat);
  EXPECT_EQ(a->kwarg_float("alpha"), 3.0);
  Node* l = b.call(OpId::kLeakyRelu, {x});
  EXPECT_DOUBLE_EQ(l->kwarg_float("negative_slope"), 0.01);
  Node* lin = b.call(OpId::kLinear, {x, b.param("w", {3, 2})});
  EXPECT_EQ(lin->num_args(), 3u);
  EXPECT_TRUE(lin->arg(2).is_none());
}

TEST_F(GraphTest, SetArgAndKwargRelinkUses) {
  Node* x = b.input("x", f32({2}));
  Node* y = b.input("y", f32({2}));
  Node* a = b.add(x, x);
  b.outputs({a});
  ASSERT_TRUE(g.set_arg(a, 1, y).ok());
  EXPECT_EQ(x->num_uses(), 1u);
  EXPECT_EQ(y->users(), std::vector<Node*>{a});
  EXPECT_FALSE(g.set_arg(a, 5, y).ok());
  EXPECT_EQ(g.set_arg(a, 1, "s").message(),
            "node 'add' (add): argument 'other': got str, expected Scalar");
  ASSERT_TRUE(g.set_kwarg(a, "alpha", 2.0).ok());
  EXPECT_EQ(a->kwarg_float("alpha"), 2.0);
  EXPECT_EQ(g.set_kwarg(a, "beta", 2.0).message(),
            "node 'add' (add): unknown keyword argument 'beta'");
  EXPECT_TRUE(p.lint().ok());
}

TEST_F(GraphTest, MoveKeepsLinksAndLintCatchesBadOrder) {
  Node* x = b.input("x", f32({2}));
  Node* r = b.relu(x);
  Node* n = b.neg(r);
  b.outputs({n});
  g.move_before(n, r);  // now n reads r, which comes after it
  Status st = g.lint();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "lint: node 'neg' reads 'relu', which comes after it");
  g.move_after(n, r);
  EXPECT_TRUE(g.lint().ok()) << g.lint().message();
}

TEST_F(GraphTest, OrderKeysSurviveManyInsertionsAtOnePoint) {
  Node* x = b.input("x", f32({2}));
  Node* r = b.relu(x);
  b.outputs({r});
  Graph::InsertGuard guard(g, r);
  Node* prev = x;
  for (int i = 0; i < 100; ++i) prev = b.neg(prev);  // forces renumbering
  EXPECT_TRUE(g.lint().ok()) << g.lint().message();
  for (Node* n = g.first(); n->next() != nullptr; n = n->next()) EXPECT_TRUE(n->is_before(n->next()));
}

TEST_F(GraphTest, TupleValuesMustBeReadThroughGetitem) {
  Node* x = b.input("x", f32({4, 6}));
  Node* s = b.call(OpId::kSplit, {x}, {{"split_sizes", std::vector<int64_t>{2, 4}}, {"dim", 1}});
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->meta.val.size(), 2u);
  auto bad = g.add_call(OpId::kRelu, {s});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "node 'relu' (relu): argument 'self': node 'split' returns 2 values; read one with getitem");
  Node* g1 = b.call(OpId::kGetitem, {s, 1});
  EXPECT_EQ(g1->spec(), f32({4, 4}));
}

TEST_F(GraphTest, LintCatchesUseCountAndNameDrift) {
  Node* x = b.input("x", f32({2}));
  b.outputs({b.relu(x)});
  EXPECT_TRUE(g.lint().ok());
  Graph other;
  Node* foreign = other.add_placeholder("z", f32({2}));
  auto r = g.add_call(OpId::kRelu, {foreign});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'relu_1' (relu): argument node 'z' is not in this graph");
}

TEST_F(GraphTest, SetOutputReplacesTheOutputNode) {
  Node* x = b.input("x", f32({2}));
  Node* r = b.relu(x);
  b.outputs({r});
  Node* out = g.output_node();
  g.set_output({x, r});
  EXPECT_EQ(g.output_node(), out);
  EXPECT_EQ(x->users(), (std::vector<Node*>{r, out}));
  EXPECT_TRUE(g.lint().ok());
}

TEST_F(GraphTest, ReversedWalkAndPlaceholders) {
  Node* x = b.input("x", f32({2}));
  Node* y = b.input("y", f32({2}));
  Node* a = b.add(x, y);
  b.outputs({a});
  EXPECT_EQ(g.placeholders(), (std::vector<Node*>{x, y}));
  auto rev = g.nodes_reversed();
  ASSERT_EQ(rev.size(), 4u);
  EXPECT_EQ(rev[0], g.output_node());
  EXPECT_EQ(rev[3], x);
}

TEST(GraphStorageTest, NodesByIdAcrossChunksAndLongArgListsOnTheHeap) {
  Graph g;
  Node* x = g.add_placeholder("x", TensorSpec::of(DType::kF32, {2}));
  std::vector<Node*> made{x};
  for (int i = 0; i < 300; ++i) made.push_back(*g.add_call(OpId::kRelu, {made.back()}));
  for (Node* n : made) EXPECT_EQ(g.node_by_id(n->id()), n);
  // 40 inputs: more than the pooled array lengths, so args and uses come from the heap; set_args
  // then swaps between pooled and heap storage (LeakSanitizer checks both are returned).
  std::vector<Node*> many(made.begin(), made.begin() + 40);
  Node* cat = *g.add_call(OpId::kCat, {many}, {{"dim", 0}});
  EXPECT_EQ(cat->num_inputs(), 40u);
  EXPECT_EQ(cat->spec().shape, (Shape{80}));
  ASSERT_TRUE(g.set_args(cat, {std::vector<Node*>{x, x}}).ok());
  EXPECT_EQ(cat->num_inputs(), 2u);
  EXPECT_EQ(cat->kwarg_int("dim"), 0);
  ASSERT_TRUE(g.set_args(cat, {many}).ok());
  EXPECT_EQ(x->num_uses(), 2u);  // made[1] and cat
  ASSERT_TRUE(g.infer(cat).ok());
  g.set_output({cat});
  EXPECT_TRUE(g.lint().ok()) << g.lint().message();
  g.erase(g.output_node());
  g.erase(cat);
  EXPECT_EQ(x->num_uses(), 1u);
  EXPECT_EQ(g.node_by_id(cat->id()), nullptr);
}

TEST(DimTest, SymbolsAndStaticValuesNeverMix) {
  Dim b = Dim::symbol("batch");
  EXPECT_FALSE(b.is_static());
  EXPECT_EQ(b.symbol_name(), "batch");
  EXPECT_EQ(b.value(), -1);
  EXPECT_EQ(b, Dim::symbol("batch"));
  EXPECT_NE(b, Dim::symbol("seq"));
  EXPECT_EQ(sizeof(Dim), sizeof(int64_t));
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1} << 40, INT64_MAX, INT64_MIN, INT64_MIN + 5}) {
    Dim d(v);
    EXPECT_TRUE(d.is_static()) << v;  // even a hostile INT64_MIN never reads as a symbol
    EXPECT_TRUE(d.symbol_name().empty());
  }
  EXPECT_EQ(Dim(7).value(), 7);
  EXPECT_NE(Dim(7), b);
}

TEST_F(GraphTest, IsShapeDynamic) {
  // ExecuTorch's is_shape_dynamic: has_free_symbols(meta["val"].shape).
  Node* x = b.input("x", f32({2, 3}));
  Node* s = b.input("s", f32({}));
  Node* d = b.input("d", TensorSpec(DType::kF32, Shape{Dim::symbol("batch"), 3}));
  Node* a = b.relu(d);  // the symbol flows through shape inference
  EXPECT_FALSE(is_shape_dynamic(*x));
  EXPECT_FALSE(is_shape_dynamic(*s));  // a scalar has no dims at all
  EXPECT_TRUE(is_shape_dynamic(*d));
  EXPECT_TRUE(is_shape_dynamic(*a));
  Node* m = b.relu(x);
  m->meta.val = SpecList{f32({2}), TensorSpec(DType::kF32, Shape{dim_mul(Dim::symbol("n"), 2)})};
  EXPECT_TRUE(is_shape_dynamic(*m));  // one output of a tuple is dynamic
  m->meta.val = SpecList{f32({2}), f32({4})};
  EXPECT_FALSE(is_shape_dynamic(*m));
  b.outputs({a});
  EXPECT_FALSE(is_shape_dynamic(*g.output_node()));  // no spec
}

}  // namespace
}  // namespace kiln
