// Shape inference: table coverage, whole messages, tuples and lint's drift check.
#include <set>

#include "ir/shape_inference.h"
#include "ir/shape_inference_cases.h"

namespace kiln::test {
namespace {

// A new op must come with a case: every op with a real inference function needs a good case
// (an exact expected spec) and, unless it accepts every input, an error case.
TEST(ShapeInference, EveryOpHasCases) {
  // These take any tensor (integers compute in f32, as torch), so nothing can be rejected.
  const std::set<OpId> cannot_fail = {OpId::kExp,     OpId::kLog,  OpId::kSqrt,
                                      OpId::kRsqrt,   OpId::kErf,  OpId::kSigmoid,
                                      OpId::kTanh,    OpId::kCast, OpId::kSin, OpId::kCos, OpId::kTan,
                                      OpId::kAsin, OpId::kAcos, OpId::kAtan, OpId::kSinh, OpId::kCosh,
                                      OpId::kAsinh, OpId::kAcosh, OpId::kAtanh};
  std::set<OpId> good, bad;
  for (auto* table : {&elementwise_cases, &nn_cases, &shape_cases}) {
    for (const ShapeCase& c : (*table)()) (c.expect.empty() ? bad : good).insert(c.op);
  }
  for (const OpDef& def : all_ops()) {
    if (def.infer == nullptr || def.infer == &shape::infer_none) continue;
    EXPECT_TRUE(good.count(def.id)) << "no good shape case for op " << def.schema.name;
    if (cannot_fail.count(def.id)) continue;
    EXPECT_TRUE(bad.count(def.id)) << "no error shape case for op " << def.schema.name;
  }
}

TEST(ShapeInference, ErrorNamesNodeAndArgument) {
  Graph g;
  Node* a = g.add_placeholder("a", f32({2, 4}));
  Node* b = g.add_placeholder("b", f32({3, 5}));
  auto r = g.add_call(OpId::kMm, args_of(a, b), {}, "prod");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "node 'prod' (mm): argument 'mat2': got f32[3, 5], expected 4 rows to match self "
            "f32[2, 4]");
  EXPECT_EQ(g.find("prod"), nullptr);
}

TEST(ShapeInference, SplitThenGetitem) {
  Graph g;
  Node* x = g.add_placeholder("x", f32({sym("batch"), 6}));
  auto split = g.add_call(OpId::kSplit, args_of(x), {{"split_sizes", I({1, 5})}, {"dim", 1}});
  ASSERT_TRUE(split.ok()) << split.status().message();
  ASSERT_EQ((*split)->meta.val.size(), 2u);
  auto second = g.add_call(OpId::kGetitem, args_of(*split, 1));
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ((*second)->spec(), f32({sym("batch"), 5}));
  // A tuple cannot feed a Tensor argument directly.
  auto bad = g.add_call(OpId::kRelu, args_of(*split));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("read one with getitem"));
  g.set_output({*second});
  EXPECT_TRUE(g.lint().ok());
}

TEST(ShapeInference, CallDelegateKeepsCreatorSpecs) {
  Graph g;
  Node* x = g.add_placeholder("x", f32({2}));
  Node* mod = g.add_get_attr("lowered_module_0");
  auto call = g.add_call(OpId::kCallDelegate, args_of(mod, x));
  ASSERT_TRUE(call.ok()) << call.status().message();
  EXPECT_TRUE((*call)->meta.val.empty());
  (*call)->meta.val = {f32({2}), i64({3})};
  auto item = g.add_call(OpId::kGetitem, args_of(*call, -1));
  ASSERT_TRUE(item.ok()) << item.status().message();
  EXPECT_EQ((*item)->spec(), i64({3}));
  g.set_output({*item});
  Status st = g.lint();
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(ShapeInference, LintReportsSpecDrift) {
  Graph g;
  Node* x = g.add_placeholder("x", f32({2}));
  Node* y = g.add_placeholder("y", f32({2}));
  auto add = g.add_call(OpId::kAdd, args_of(x, y));
  ASSERT_TRUE(add.ok());
  g.set_output({*add});
  ASSERT_TRUE(g.lint().ok());

  // An input changed without re-inferring its user.
  x->meta.val = {f32({3})};
  y->meta.val = {f32({3})};
  Status st = g.lint();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "lint: node 'add' (add) has spec f32[2] but its inputs give f32[3]");

  // Inputs that no longer type-check at all are reported too.
  y->meta.val = {f32({4})};
  st = g.lint();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(),
              ::testing::HasSubstr("lint: node 'add' (add) has spec f32[2] but its inputs fail "
                                   "inference: argument 'other': got f32[4]"));

  // Re-inferring repairs it; unknown input specs are not checked.
  y->meta.val = {f32({3})};
  ASSERT_TRUE(g.infer(*add).ok());
  EXPECT_TRUE(g.lint().ok());
  x->meta.val.clear();
  EXPECT_TRUE(g.lint().ok());
}

}  // namespace
}  // namespace kiln::test
