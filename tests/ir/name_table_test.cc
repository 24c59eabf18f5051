// NameTable: stem_N names in dense per-stem arrays, everything else hashed, one namespace.
#include "kiln/ir/detail/name_table.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>

#include "kiln/ir/graph.h"

namespace kiln {
namespace {

// Nodes named by a real graph; the table under test is separate and only reads their names.
class NameTableTest : public ::testing::Test {
 protected:
  Node* node(const std::string& name) {
    return g.add_placeholder(name, TensorSpec::of(DType::kF32, {1}));
  }
  Graph g;
  detail::NameTable t;
};

TEST_F(NameTableTest, NumberedAndPlainNamesShareOneNamespace) {
  Node* a = node("add");
  Node* a1 = node("add_1");
  Node* w = node("conv_weight");
  Node* z = node("x_0");
  Node* lead = node("x_01");  // leading zero: not a number, hashed
  for (Node* n : {a, a1, w, z, lead}) EXPECT_TRUE(t.insert(n->name(), n)) << n->name();
  for (Node* n : {a, a1, w, z, lead}) {
    EXPECT_FALSE(t.insert(n->name(), n)) << n->name();
    EXPECT_EQ(t.find(n->name()), n) << n->name();
  }
  EXPECT_EQ(t.size(), 5u);
  EXPECT_EQ(t.find("add_2"), nullptr);
  EXPECT_EQ(t.find("x_1"), nullptr);
  EXPECT_EQ(t.find("x"), nullptr);
  EXPECT_EQ(t.find("_1"), nullptr);
  EXPECT_TRUE(t.erase("add_1"));
  EXPECT_FALSE(t.erase("add_1"));
  EXPECT_EQ(t.find("add_1"), nullptr);
  EXPECT_TRUE(t.erase("x_01"));
  EXPECT_EQ(t.size(), 3u);
  EXPECT_TRUE(t.insert(a1->name(), a1));
  EXPECT_EQ(t.find("add_1"), a1);
}

TEST_F(NameTableTest, FarNumberIsHashedAndStillBlocksTheDenseSlotLater) {
  Node* far = node("layer_5000");
  ASSERT_TRUE(t.insert(far->name(), far));  // far past the (empty) array: hashed
  // Fill layer_0 .. layer_4999 so the array grows up to the far number.
  std::deque<Node*> filled;
  for (int i = 0; i < 5000; ++i) {
    Node* n = node("layer_" + std::to_string(i));
    ASSERT_TRUE(t.insert(n->name(), n));
  }
  Node* dup = g.add_placeholder("other", TensorSpec::of(DType::kF32, {1}));
  // A second node asking for "layer_5000" must be refused although its array slot is free.
  EXPECT_FALSE(t.insert("layer_5000", dup));
  EXPECT_EQ(t.find("layer_5000"), far);
  EXPECT_TRUE(t.erase("layer_5000"));
  EXPECT_EQ(t.find("layer_5000"), nullptr);
  EXPECT_EQ(t.size(), 5000u);
}

TEST_F(NameTableTest, HugeNumbersDoNotMakeHugeArrays) {
  Node* n = node("n_999999999");
  ASSERT_TRUE(t.insert(n->name(), n));
  EXPECT_EQ(t.find("n_999999999"), n);
  Node* m = node("n_9999999999");  // ten digits: not a number at all
  ASSERT_TRUE(t.insert(m->name(), m));
  EXPECT_EQ(t.find("n_9999999999"), m);
}

TEST_F(NameTableTest, InsertUniqueNumbersPastTakenNames) {
  // Each node already carries the name the table should give it: the hash table compares
  // against a node's own name, so the caller stores the returned name before any lookup.
  Node* a = node("add");
  Node* b = node("add_1");
  Node* c = node("add_2");
  Node* d = node("add_3");
  Node* e = node("add_4");
  EXPECT_EQ(t.insert_unique("add", a), "add");
  EXPECT_EQ(t.insert_unique("add", b), "add_1");
  ASSERT_TRUE(t.insert("add_2", c));  // explicit: generation must step over it
  EXPECT_EQ(t.insert_unique("add", d), "add_3");
  EXPECT_TRUE(t.erase("add"));
  EXPECT_EQ(t.insert_unique("add", e), "add_4");  // once taken, the base stays numbered
  EXPECT_EQ(t.find("add_1"), b);
  EXPECT_EQ(t.find("add_3"), d);
  EXPECT_EQ(t.find("add_4"), e);
  EXPECT_EQ(t.find("add"), nullptr);
  // A base that is itself numbered gets its own counter.
  Node* f = node("x_0");
  Node* h = node("x_0_1");
  EXPECT_EQ(t.insert_unique("x_0", f), "x_0");
  EXPECT_EQ(t.insert_unique("x_0", h), "x_0_1");
  EXPECT_EQ(t.find("x_0"), f);
  EXPECT_EQ(t.find("x_0_1"), h);
  EXPECT_EQ(t.size(), 6u);
}

TEST(GraphNamesTest, GeneratedNamesSkipTakenOnesAndLookUpAfterErase) {
  Graph g;
  Node* x = g.add_placeholder("x", TensorSpec::of(DType::kF32, {4}));
  Node* taken = *g.add_call(OpId::kRelu, {x}, {}, "relu_2");
  Node* r0 = *g.add_call(OpId::kRelu, {x});
  Node* r1 = *g.add_call(OpId::kRelu, {x});
  Node* r2 = *g.add_call(OpId::kRelu, {x});
  EXPECT_EQ(r0->name(), "relu");
  EXPECT_EQ(r1->name(), "relu_1");
  EXPECT_EQ(r2->name(), "relu_3");  // relu_2 was given explicitly
  EXPECT_EQ(g.find("relu_2"), taken);
  g.erase(r1);
  EXPECT_EQ(g.find("relu_1"), nullptr);
  EXPECT_EQ(g.find("relu_3"), r2);
  g.set_output({r2});
  EXPECT_TRUE(g.lint().ok()) << g.lint().message();
}

}  // namespace
}  // namespace kiln
