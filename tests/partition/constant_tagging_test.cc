#include "kiln/partition/constant_tagging.h"

#include <gtest/gtest.h>

#include "partition/partition_test_util.h"

namespace kiln {
namespace {

using test::ProgramBuilder;

TEST(TagLess, NumbersCompareAsNumbers) {
  EXPECT_TRUE(tag_less("xnnpack_2", "xnnpack_10"));
  EXPECT_FALSE(tag_less("xnnpack_10", "xnnpack_2"));
  EXPECT_TRUE(tag_less("a_9", "b_1"));
  EXPECT_TRUE(tag_less("tag", "tag0"));
  EXPECT_TRUE(tag_less("t_01", "t_1"));  // equal numbers: whole strings decide
  EXPECT_FALSE(tag_less("t_1", "t_1"));
}

TEST(TagConstantData, SmallestTagWhenAllUsersTagged) {
  ProgramBuilder b;
  Node* x = b.input("x");
  Node* w = b.param("w");
  Node* w2 = b.param("w2");
  Node* k = b.constant("k");
  Node* unused = b.param("unused");
  Node* cache = b.buffer("cache");
  Node* m1 = b.call(OpId::kMul, {x, w}, "m1");
  Node* m2 = b.call(OpId::kMul, {m1, w}, "m2");
  Node* m3 = b.call(OpId::kMul, {m2, w2}, "m3");
  Node* a = b.add(m3, w2, "a");
  Node* kk = b.add(a, k, "kk");
  Node* upd = b.add(cache, kk, "upd");
  b.outputs({upd, kk}, {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
  m1->meta.delegation_tag = "t_10";
  m2->meta.delegation_tag = "t_2";
  m3->meta.delegation_tag = "t_2";  // w2 is also read by untagged 'a'
  kk->meta.delegation_tag = "t_10";
  upd->meta.delegation_tag = "t_10";
  EXPECT_EQ(tag_constant_data(b.ep), 2u);
  EXPECT_EQ(w->meta.delegation_tag, "t_2");
  EXPECT_EQ(w2->meta.delegation_tag, "");
  EXPECT_EQ(k->meta.delegation_tag, "t_10");
  EXPECT_EQ(unused->meta.delegation_tag, "");
  EXPECT_EQ(cache->meta.delegation_tag, "");  // mutated buffers are left to tag_mutated_buffer
  EXPECT_EQ(x->meta.delegation_tag, "");
}

// x (input), cache (buffer); upd = add(cache, x) is the buffer's new value.
struct MutationCase {
  ProgramBuilder b;
  Node* x;
  Node* cache;
  Node* upd;
  MutationCase() {
    x = b.input("x");
    cache = b.buffer("cache");
    upd = b.add(cache, x, "upd");
  }
  std::string warn(const std::string& why) {
    return "tag_mutated_buffer: buffer 'cache' (placeholder 'cache') stays in the owning program "
           "and loses tag 'T': " + why;
  }
};

TEST(TagMutatedBuffer, TaggedWhenEverythingIsInOnePartition) {
  MutationCase c;
  Node* r = c.b.relu(c.cache, "r");
  Node* o = c.b.relu(c.upd, "o");
  c.b.outputs({c.upd, r}, {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
  (void)o;
  c.upd->meta.delegation_tag = "T";
  r->meta.delegation_tag = "T";
  o->meta.delegation_tag = "T";
  EXPECT_TRUE(tag_mutated_buffer(c.b.ep).empty());
  EXPECT_EQ(c.cache->meta.delegation_tag, "T");
}

TEST(TagMutatedBuffer, UntaggedBufferWithForeignReaderStaysQuietly) {
  MutationCase c;
  Node* r = c.b.relu(c.cache, "r");
  c.b.outputs({c.upd, r}, {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
  c.upd->meta.delegation_tag = "T";
  EXPECT_TRUE(tag_mutated_buffer(c.b.ep).empty());
  EXPECT_EQ(c.cache->meta.delegation_tag, "");
}

TEST(TagMutatedBuffer, EveryWarning) {
  {
    MutationCase c;
    Node* r = c.b.relu(c.cache, "r");
    c.b.outputs({c.upd, r}, {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
    c.cache->meta.delegation_tag = c.upd->meta.delegation_tag = "T";
    r->meta.delegation_tag = "U";
    EXPECT_EQ(tag_mutated_buffer(c.b.ep),
              std::vector<std::string>{c.warn("its reader 'r' is tagged 'U'")});
    EXPECT_EQ(c.cache->meta.delegation_tag, "");
  }
  {
    MutationCase c;
    Node* r = c.b.relu(c.cache, "r");
    c.b.outputs({c.upd, r}, {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
    c.cache->meta.delegation_tag = c.upd->meta.delegation_tag = "T";
    EXPECT_EQ(tag_mutated_buffer(c.b.ep),
              std::vector<std::string>{c.warn("its reader 'r' is not tagged")});
  }
  {
    MutationCase c;
    c.b.outputs({c.upd, c.cache},
                {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
    c.cache->meta.delegation_tag = c.upd->meta.delegation_tag = "T";
    EXPECT_EQ(tag_mutated_buffer(c.b.ep),
              std::vector<std::string>{c.warn("it is returned as an output")});
  }
  {
    MutationCase c;
    c.b.outputs({c.upd}, {{OutputKind::kBufferMutation, "cache"}});
    c.cache->meta.delegation_tag = "T";
    EXPECT_EQ(tag_mutated_buffer(c.b.ep),
              std::vector<std::string>{c.warn("its reader 'upd' is not tagged")});
  }
  {
    MutationCase c;
    Node* w = c.b.relu(c.upd, "w");
    c.b.outputs({w}, {{OutputKind::kBufferMutation, "cache"}});
    c.cache->meta.delegation_tag = c.upd->meta.delegation_tag = "T";
    EXPECT_EQ(tag_mutated_buffer(c.b.ep),
              std::vector<std::string>{c.warn("its new value 'w' is not tagged")});
    w->meta.delegation_tag = "U";
    c.cache->meta.delegation_tag = "T";
    EXPECT_EQ(tag_mutated_buffer(c.b.ep),
              std::vector<std::string>{c.warn("its new value 'w' is tagged 'U'")});
  }
  {
    MutationCase c;
    c.b.outputs({c.x, c.upd}, {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
    c.cache->meta.delegation_tag = c.upd->meta.delegation_tag = "T";
    EXPECT_EQ(tag_mutated_buffer(c.b.ep),
              std::vector<std::string>{c.warn("its new value 'x' is a placeholder")});
  }
  {
    MutationCase c;
    Node* r = c.b.relu(c.upd, "r");
    c.b.outputs({c.upd, r}, {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
    c.cache->meta.delegation_tag = c.upd->meta.delegation_tag = "T";
    r->meta.delegation_tag = "U";
    EXPECT_EQ(tag_mutated_buffer(c.b.ep),
              std::vector<std::string>{
                  c.warn("its new value 'upd' is read by 'r', which is tagged 'U'")});
  }
  {
    MutationCase c;
    c.b.outputs({c.upd, c.upd},
                {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
    c.cache->meta.delegation_tag = c.upd->meta.delegation_tag = "T";
    EXPECT_EQ(tag_mutated_buffer(c.b.ep),
              std::vector<std::string>{c.warn("its new value 'upd' is also returned as output 1")});
  }
}

class DuplicateConstants : public ::testing::Test {
 protected:
  void SetUp() override {
    x_ = b_.input("x");
    c_ = b_.constant("c");
    w_ = b_.param("w");
    n1_ = b_.add(x_, c_, "n1");
    n2_ = b_.add(n1_, c_, "n2");
    n3_ = b_.add(n2_, c_, "n3");
    n4_ = b_.add(n3_, c_, "n4");
    cat_ = b_.call(OpId::kCat, {std::vector<Node*>{c_, n4_}}, "cat", {}, TensorSpec::of(DType::kF32, {8}));
    n5_ = b_.call(OpId::kMul, {n4_, w_}, "n5");
    b_.outputs({cat_, n5_});
    c_->meta.delegation_tag = n1_->meta.delegation_tag = "A";
    n2_->meta.delegation_tag = n4_->meta.delegation_tag = "B";
    cat_->meta.delegation_tag = "C";
    w_->meta.delegation_tag = "A";
    n5_->meta.delegation_tag = "B";
  }
  ProgramBuilder b_;
  Node *x_, *c_, *w_, *n1_, *n2_, *n3_, *n4_, *cat_, *n5_;
};

TEST_F(DuplicateConstants, OneCopyPerForeignTagInUserOrder) {
  auto r = duplicate_constants_for_partitions(b_.ep);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->copies, 4u);
  EXPECT_EQ(r->bytes, 4u * 16u);
  EXPECT_EQ(r->names, (std::vector<std::string>{"c_copy_0", "c_copy_1", "c_copy_2", "w_copy_0"}));
  Status st = b_.ep.lint();
  ASSERT_TRUE(st.ok()) << st.message();
  Node* c0 = b_.find("c_copy_0");
  Node* c1 = b_.find("c_copy_1");
  Node* c2 = b_.find("c_copy_2");
  EXPECT_EQ(c0->meta.delegation_tag, "B");
  EXPECT_EQ(c1->meta.delegation_tag, "");
  EXPECT_EQ(c2->meta.delegation_tag, "C");
  EXPECT_EQ(b_.tag("w_copy_0"), "B");
  EXPECT_EQ(n1_->input(1), c_);
  EXPECT_EQ(n2_->input(1), c0);
  EXPECT_EQ(n3_->input(1), c1);
  EXPECT_EQ(n4_->input(1), c0);
  EXPECT_EQ(cat_->arg(0).nodes()[0], c2);
  EXPECT_EQ(n5_->input(1), b_.find("w_copy_0"));
  std::vector<std::string> order;
  for (const auto& s : b_.ep.signature().inputs) order.push_back(s.arg + ":" + s.target);
  EXPECT_EQ(order, (std::vector<std::string>{"x:", "c:c", "c_copy_0:c_copy_0", "c_copy_1:c_copy_1",
                                             "c_copy_2:c_copy_2", "w:w", "w_copy_0:w_copy_0"}));
  EXPECT_EQ(b_.ep.signature().inputs[2].kind, InputKind::kConstantTensor);
  EXPECT_EQ(b_.ep.signature().inputs[6].kind, InputKind::kParameter);
  const Tensor* orig = b_.ep.constants().find("c");
  Tensor* copy = b_.ep.constants().find_mutable("c_copy_1");
  EXPECT_TRUE(orig->shares_storage_with(*copy));
  copy->mutable_data_as<float>()[0] = 5.0f;  // first write separates the copy
  EXPECT_FALSE(orig->shares_storage_with(*copy));
  EXPECT_EQ(orig->data_as<float>()[0], 0.0f);
  // Nothing is left to copy the second time.
  auto again = duplicate_constants_for_partitions(b_.ep);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->copies, 0u);
}

TEST_F(DuplicateConstants, NoCopyIsAnErrorAndChangesNothing) {
  w_->meta.no_copy = true;
  size_t before = b_.ep.graph().size();
  auto r = duplicate_constants_for_partitions(b_.ep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "constant 'w' (tag 'A') has no_copy set but is used by node 'n5' (tag 'B')");
  EXPECT_EQ(b_.ep.graph().size(), before);
  c_->meta.no_copy = true;
  r = duplicate_constants_for_partitions(b_.ep);
  EXPECT_EQ(r.status().message(),
            "constant 'c' (tag 'A') has no_copy set but is used by node 'n2' (tag 'B')");
  n2_->meta.delegation_tag = n4_->meta.delegation_tag = "A";
  r = duplicate_constants_for_partitions(b_.ep);
  EXPECT_EQ(r.status().message(),
            "constant 'c' (tag 'A') has no_copy set but is used by node 'n3' (untagged)");
}

TEST(DuplicateConstantsMutated, MutatedBufferCannotBeCopied) {
  ProgramBuilder b;
  Node* x = b.input("x");
  Node* cache = b.buffer("cache");
  Node* upd = b.add(cache, x, "upd");
  Node* r = b.relu(cache, "r");
  b.outputs({upd, r}, {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
  cache->meta.delegation_tag = upd->meta.delegation_tag = "A";
  auto res = duplicate_constants_for_partitions(b.ep);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().message(),
            "mutated buffer 'cache' (tag 'A') is used by node 'r' (untagged) and cannot be copied");
}

}  // namespace
}  // namespace kiln
