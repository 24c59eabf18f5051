#include "kiln/partition/operator_support.h"

#include <gtest/gtest.h>

#include "partition/partition_test_util.h"

namespace kiln {
namespace {

class OperatorSupportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    x_ = b_.input("x");
    idx_ = b_.input("idx", TensorSpec::of(DType::kI64, {4}));
    add_ = b_.add(x_, x_, "add");
    gelu_ = b_.call(OpId::kGelu, {add_}, "gelu");
    gather_ = b_.call(OpId::kGather, {gelu_, idx_}, "gather", {{"dim", 0}});
    cast_ = b_.call(OpId::kCast, {gather_}, "cast", {{"dtype", DType::kI64}},
                    TensorSpec::of(DType::kI64, {4}));
    b_.outputs({cast_});
  }
  SupportResult check(const OperatorSupportPtr& s, const Node* n) {
    return s->is_node_supported(b_.ep, *n);
  }

  test::ProgramBuilder b_;
  Node *x_, *idx_, *add_, *gelu_, *gather_, *cast_;
};

TEST_F(OperatorSupportTest, OpSet) {
  auto s = supported_ops({OpId::kAdd, OpId::kGather});
  EXPECT_TRUE(check(s, add_).supported);
  EXPECT_TRUE(check(s, add_).reason.empty());
  EXPECT_TRUE(check(s, gather_).supported);
  SupportResult r = check(s, gelu_);
  EXPECT_FALSE(r.supported);
  EXPECT_EQ(r.reason, "op 'gelu' is not in the supported op set");
}

TEST_F(OperatorSupportTest, DTypeSetChecksInputsAndOutputs) {
  auto s = supported_dtypes({DType::kF32, DType::kF16});
  EXPECT_TRUE(check(s, add_).supported);
  EXPECT_TRUE(check(s, gelu_).supported);
  EXPECT_EQ(check(s, gather_).reason, "input 'idx' has dtype i64, which is not in {f32, f16}");
  EXPECT_EQ(check(s, cast_).reason, "output has dtype i64, which is not in {f32, f16}");
  auto only_i64 = supported_dtypes({DType::kI64});
  EXPECT_EQ(check(only_i64, add_).reason, "input 'x' has dtype f32, which is not in {i64}");
}

TEST_F(OperatorSupportTest, DTypeSetNamesTupleOutputs) {
  Node* split = b_.call(OpId::kSplit, {x_}, "split", {{"split_sizes", std::vector<int64_t>{2, 2}}});
  split->meta.val = {TensorSpec::of(DType::kF32, {2}), TensorSpec::of(DType::kI32, {2})};
  EXPECT_EQ(check(supported_dtypes({DType::kF32}), split).reason,
            "output 1 has dtype i32, which is not in {f32}");
}

TEST_F(OperatorSupportTest, NameLists) {
  auto allow = allow_node_names({"add", "gelu"});
  EXPECT_TRUE(check(allow, gelu_).supported);
  EXPECT_EQ(check(allow, gather_).reason, "node name 'gather' is not in the allow list");
  auto deny = deny_node_names({"gelu"});
  EXPECT_TRUE(check(deny, add_).supported);
  EXPECT_EQ(check(deny, gelu_).reason, "node name 'gelu' is in the deny list");
}

TEST_F(OperatorSupportTest, AllOfReturnsFirstRejection) {
  auto s = all_of({supported_ops({OpId::kAdd, OpId::kGelu}), deny_node_names({"gelu"}),
                   supported_dtypes({DType::kF16})});
  EXPECT_EQ(check(s, gelu_).reason, "node name 'gelu' is in the deny list");
  EXPECT_EQ(check(s, add_).reason, "input 'x' has dtype f32, which is not in {f16}");
  EXPECT_EQ(check(s, gather_).reason, "op 'gather' is not in the supported op set");
  EXPECT_TRUE(check(all_of({}), gather_).supported);
  EXPECT_TRUE(check(all_of({supported_ops({OpId::kAdd}), supported_dtypes({DType::kF32})}), add_)
                  .supported);
}

TEST_F(OperatorSupportTest, AnyOfCombinesReasons) {
  auto s = any_of({supported_ops({OpId::kAdd}), allow_node_names({"gelu"})});
  EXPECT_TRUE(check(s, add_).supported);
  EXPECT_TRUE(check(s, gelu_).supported);
  EXPECT_EQ(check(s, gather_).reason,
            "no check accepts it: op 'gather' is not in the supported op set; node name 'gather' "
            "is not in the allow list");
  EXPECT_EQ(check(any_of({}), add_).reason, "no check accepts it");
}

TEST_F(OperatorSupportTest, Negate) {
  auto s = negate(supported_ops({OpId::kGelu}), "op set {gelu}");
  EXPECT_TRUE(check(s, add_).supported);
  EXPECT_EQ(check(s, gelu_).reason, "it is excluded: it matches op set {gelu}");
  auto both = all_of({supported_ops({OpId::kAdd, OpId::kGelu}), s});
  EXPECT_TRUE(check(both, add_).supported);
  EXPECT_FALSE(check(both, gelu_).supported);
}

TEST_F(OperatorSupportTest, LambdaSeesProgramAndNode) {
  auto s = support_fn([](const ExportedProgram& p, const Node& n) {
    if (n.num_users() == 1 && p.graph().size() > 3) return SupportResult::yes();
    return SupportResult::no("it has " + std::to_string(n.num_users()) + " users");
  });
  EXPECT_TRUE(check(s, add_).supported);
  EXPECT_TRUE(check(s, cast_).supported);  // read by the output node only
  b_.relu(add_, "relu");
  EXPECT_EQ(check(s, add_).reason, "it has 2 users");
}

TEST_F(OperatorSupportTest, SharedPartsCanBeReused) {
  OperatorSupportPtr ops = supported_ops({OpId::kAdd});
  auto a = all_of({ops});
  auto b = any_of({ops, ops});
  ops.reset();
  EXPECT_TRUE(check(a, add_).supported);
  EXPECT_EQ(check(b, gelu_).reason,
            "no check accepts it: op 'gelu' is not in the supported op set; op 'gelu' is not in "
            "the supported op set");
}

}  // namespace
}  // namespace kiln
