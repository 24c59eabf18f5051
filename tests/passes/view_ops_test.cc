// The planner's view rules (src/passes/view_ops.cc) against the portable kernels themselves: each
// case runs one op through the interpreter and checks whether its output shares the input's
// bytes. A value the planner calls a view must be one (it gets no memory of its own); an op not
// in may_alias_input must never return its input's storage; and for these static shapes the
// planner is exact (a view it misses costs a copy at run time).
#include "passes/view_ops.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/passes/memory_plan.h"
#include "testing/graph_builder.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

struct Case {
  std::string what;
  TensorSpec input;
  std::function<Node*(GraphBuilder&, Node*)> build;
};

TensorSpec spec(DType t, std::vector<int64_t> shape) { return TensorSpec::of(t, shape); }
TensorSpec f32(std::vector<int64_t> shape) { return TensorSpec::of(DType::kF32, shape); }

Case unary(OpId op, std::string what, TensorSpec in, Kwargs kwargs = {}) {
  return {std::move(what), std::move(in),
          [op, kwargs](GraphBuilder& g, Node* x) { return g.call(op, {x}, kwargs); }};
}

std::vector<Case> cases() {
  using V = std::vector<int64_t>;
  std::vector<Case> c;
  // Reshapes: always views.
  c.push_back(unary(OpId::kView, "view", f32({2, 3}), {{"size", V{6}}}));
  c.push_back(unary(OpId::kReshape, "reshape", f32({2, 3}), {{"shape", V{3, -1}}}));
  c.push_back(unary(OpId::kFlatten, "flatten", f32({2, 3, 4}), {{"start_dim", 1}}));
  c.push_back(unary(OpId::kFlatten, "flatten 0-d", f32({})));
  c.push_back(unary(OpId::kSqueeze, "squeeze", f32({1, 3, 1})));
  c.push_back(unary(OpId::kSqueeze, "squeeze dim", f32({1, 3}), {{"dim", V{0}}}));
  c.push_back(unary(OpId::kUnsqueeze, "unsqueeze", f32({3}), {{"dim", -1}}));
  // Permutations: views only for the identity.
  c.push_back(unary(OpId::kPermute, "permute", f32({2, 3}), {{"dims", V{1, 0}}}));
  c.push_back(unary(OpId::kPermute, "permute identity", f32({2, 3}), {{"dims", V{0, 1}}}));
  c.push_back(
      unary(OpId::kPermute, "permute identity negative", f32({2, 3}), {{"dims", V{-2, -1}}}));
  c.push_back(unary(OpId::kTranspose, "transpose", f32({2, 3}), {{"dim0", 0}, {"dim1", 1}}));
  c.push_back(
      unary(OpId::kTranspose, "transpose same dim", f32({2, 3}), {{"dim0", 1}, {"dim1", -1}}));
  c.push_back(unary(OpId::kTranspose, "transpose of size-1 dims", f32({1, 1, 3}),
                    {{"dim0", 0}, {"dim1", 1}}));
  // expand: a view for the same shape only.
  c.push_back(unary(OpId::kExpand, "expand same", f32({2, 3}), {{"size", V{2, -1}}}));
  c.push_back(unary(OpId::kExpand, "expand wider", f32({1, 3}), {{"size", V{2, 3}}}));
  c.push_back(unary(OpId::kExpand, "expand new dim", f32({2, 3}), {{"size", V{1, 2, 3}}}));
  // take_along (slice, select, split): views when the dims before `dim` are 1.
  c.push_back(
      unary(OpId::kSlice, "slice outer 1", f32({1, 6}), {{"dim", 1}, {"start", 1}, {"end", 4}}));
  c.push_back(
      unary(OpId::kSlice, "slice dim 0", f32({4, 3}), {{"dim", 0}, {"start", 1}, {"end", 3}}));
  c.push_back(
      unary(OpId::kSlice, "slice outer 2", f32({2, 6}), {{"dim", 1}, {"start", 1}, {"end", 4}}));
  c.push_back(unary(OpId::kSlice, "slice step 2", f32({1, 6}), {{"dim", 1}, {"step", 2}}));
  c.push_back(
      unary(OpId::kSlice, "slice empty", f32({2, 6}), {{"dim", 1}, {"start", 3}, {"end", 3}}));
  c.push_back(unary(OpId::kSlice, "slice negative dim", f32({1, 6}), {{"dim", -1}, {"start", 2}}));
  c.push_back(unary(OpId::kSelect, "select outer 1", f32({1, 4}), {{"dim", 1}, {"index", 2}}));
  c.push_back(unary(OpId::kSelect, "select dim 0", f32({3, 4}), {{"dim", 0}, {"index", -1}}));
  c.push_back(unary(OpId::kSelect, "select outer 3", f32({3, 4}), {{"dim", 1}, {"index", 0}}));
  c.push_back(
      unary(OpId::kSplit, "split outer 1", f32({1, 6}), {{"split_sizes", V{2, 4}}, {"dim", 1}}));
  c.push_back(
      unary(OpId::kSplit, "split dim 0", f32({6, 2}), {{"split_sizes", V{1, 5}}, {"dim", 0}}));
  c.push_back(
      unary(OpId::kSplit, "split outer 2", f32({2, 6}), {{"split_sizes", V{2, 4}}, {"dim", -1}}));
  c.push_back(unary(OpId::kSplit, "split with an empty part", f32({2, 6}),
                    {{"split_sizes", V{0, 6}}, {"dim", 1}}));
  // cat: the first tensor itself only when every tensor is a legacy empty 1-D one.
  c.push_back({"cat of legacy empties", f32({0}), [](GraphBuilder& g, Node* x) {
                 return g.call(OpId::kCat, {std::vector<Node*>{x, x}});
               }});
  c.push_back({"cat of one", f32({2, 3}), [](GraphBuilder& g, Node* x) {
                 return g.call(OpId::kCat, {std::vector<Node*>{x}}, {{"dim", 1}});
               }});
  c.push_back({"cat of an empty 2-D", f32({0, 3}), [](GraphBuilder& g, Node* x) {
                 return g.call(OpId::kCat, {std::vector<Node*>{x, x}});
               }});
  // cast: a view for the same dtype.
  c.push_back(unary(OpId::kCast, "cast same", f32({3}), {{"dtype", DType::kF32}}));
  c.push_back(
      unary(OpId::kCast, "cast same i64", spec(DType::kI64, {3}), {{"dtype", DType::kI64}}));
  c.push_back(unary(OpId::kCast, "cast to f16", f32({3}), {{"dtype", DType::kF16}}));
  c.push_back(unary(OpId::kCast, "cast to i32", f32({3}), {{"dtype", DType::kI32}}));
  // Reductions: a 0-d input reduces nothing and comes back reshaped, unless converted.
  for (OpId op : {OpId::kMean, OpId::kSum, OpId::kAmax, OpId::kAmin}) {
    std::string name(op_name(op));
    c.push_back(unary(op, name + " 0-d", f32({})));
    c.push_back(unary(op, name + " 0-d keepdim", f32({}), {{"keepdim", true}}));
    c.push_back(unary(op, name + " 0-d f16", spec(DType::kF16, {})));
    c.push_back(unary(op, name + " of [1]", f32({1})));
    c.push_back(unary(op, name + " of [2, 3] dim 1", f32({2, 3}), {{"dim", V{1}}}));
  }
  c.push_back(unary(OpId::kSum, "sum 0-d i64", spec(DType::kI64, {})));
  c.push_back(unary(OpId::kSum, "sum 0-d i32", spec(DType::kI32, {})));
  c.push_back(unary(OpId::kSum, "sum 0-d bool", spec(DType::kBool, {})));
  c.push_back(unary(OpId::kAmax, "amax 0-d f64", spec(DType::kF64, {})));
  c.push_back(unary(OpId::kAmax, "amax 0-d i32", spec(DType::kI32, {})));
  c.push_back(unary(OpId::kMean, "mean 0-d f64", spec(DType::kF64, {})));
  // Ops that always compute into new memory, on the inputs most likely to tempt a shortcut.
  for (OpId op : {OpId::kNeg, OpId::kAbs, OpId::kExp, OpId::kRelu, OpId::kRelu6, OpId::kSigmoid,
                  OpId::kTanh, OpId::kGelu, OpId::kSilu, OpId::kHardswish, OpId::kArgmax}) {
    c.push_back(unary(op, std::string(op_name(op)) + " of [1]", f32({1})));
  }
  c.push_back(unary(OpId::kClamp, "clamp that clamps nothing", f32({2, 3}), {{"min", -1e30}}));
  c.push_back(unary(OpId::kLogicalNot, "logical_not", spec(DType::kBool, {2})));
  c.push_back(unary(OpId::kCumsum, "cumsum of size 1", f32({1, 1}), {{"dim", 1}}));
  c.push_back(unary(OpId::kSoftmax, "softmax", f32({2, 3}), {{"dim", -1}}));
  c.push_back(unary(OpId::kPad, "pad by nothing", f32({2, 3}), {{"pad", V{0, 0}}}));
  c.push_back(unary(OpId::kLayerNorm, "layer_norm", f32({2, 3}), {{"normalized_shape", V{3}}}));
  c.push_back(unary(OpId::kAdaptiveAvgPool2d, "adaptive_avg_pool2d to its size", f32({1, 1, 2, 2}),
                    {{"output_size", V{2, 2}}}));
  c.push_back(
      unary(OpId::kMaxPool2d, "max_pool2d 1x1", f32({1, 1, 2, 2}), {{"kernel_size", V{1, 1}}}));
  c.push_back(unary(OpId::kUpsampleNearest2d, "upsample to its size", f32({1, 1, 2, 2}),
                    {{"output_size", V{2, 2}}}));
  c.push_back({"add 0", f32({2, 3}), [](GraphBuilder& g, Node* x) {
                 return g.call(OpId::kAdd, {x, 0.0});
               }});
  c.push_back({"mul 1", f32({2, 3}), [](GraphBuilder& g, Node* x) {
                 return g.call(OpId::kMul, {x, 1.0});
               }});
  c.push_back({"where true", f32({2, 3}), [](GraphBuilder& g, Node* x) {
                 Node* t = g.call(OpId::kGe, {x, -1e30});
                 return g.call(OpId::kWhere, {t, x, 0.0});
               }});
  c.push_back({"matmul by identity", f32({2, 2}), [](GraphBuilder& g, Node* x) {
                 return g.call(OpId::kMatmul, {x, g.param("eye", {2, 2}, 1.0f)});
               }});
  c.push_back({"linear", f32({2, 2}), [](GraphBuilder& g, Node* x) {
                 return g.linear(x, g.param("w", {2, 2}));
               }});
  return c;
}

Tensor input_for(const TensorSpec& s) {
  std::vector<int64_t> shape = *s.static_shape();
  Tensor t(s.dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_scalar_at(i, 0.5 + static_cast<double>(i));
  return t;
}

TEST(ViewOps, ThePlannersViewsAreTheKernelsViews) {
  int views = 0, copies = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    ExportedProgram p;
    GraphBuilder g(p);
    Node* x = g.input("x", c.input);
    Node* n = c.build(g, x);
    if (n == nullptr) {
      ADD_FAILURE() << "the case does not build";
      continue;
    }
    std::vector<Node*> outs;
    if (n->is_call(OpId::kSplit)) {
      for (size_t i = 0; i < n->meta.val.size(); ++i) {
        outs.push_back(g.call(OpId::kGetitem, {n, static_cast<int64_t>(i)}));
      }
    } else {
      outs.push_back(n);
    }
    g.outputs(outs);
    ASSERT_TRUE(p.lint().ok()) << p.lint().message();
    auto interp = portable::Interpreter::create(p);
    ASSERT_TRUE(interp.ok()) << interp.status().message();
    Tensor in = input_for(c.input);
    auto r = (*interp)->run(std::vector<Tensor>{in});
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->outputs.size(), outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const Tensor& out = r->outputs[i];
      bool shares = out.shares_storage_with(in);
      const Node* source = passes::certain_view_source(*n, static_cast<uint32_t>(i));
      bool certain = source != nullptr;
      if (source != nullptr) {
        EXPECT_EQ(source, x) << "output " << i;
      }
      if (!may_alias_input(n->target())) {
        EXPECT_FALSE(shares) << op_name(n->target()) << " is not in may_alias_input but output "
                             << i << " shares its input's bytes";
      }
      EXPECT_EQ(shares, certain) << "output " << i << ": the kernel "
                                 << (shares ? "returns a view" : "copies") << ", the planner says "
                                 << (certain ? "view" : "copy");
      (shares ? views : copies) += 1;
    }
  }
  EXPECT_GT(views, 20);
  EXPECT_GT(copies, 20);
}

// The planner's homes follow: a certain view is an alias, anything else gets memory.
TEST(ViewOps, CertainViewsBecomeAliasesInThePlan) {
  ExportedProgram p;
  GraphBuilder g(p);
  Node* x = g.input("x", f32({1, 6}));
  Node* r = g.relu(x);
  Node* s = g.call(OpId::kSlice, {r}, {{"dim", 1}, {"start", 1}, {"end", 4}});
  Node* t = g.call(OpId::kSlice, {r}, {{"dim", 1}, {"step", 2}});
  Node* sum = g.add(g.call(OpId::kSum, {s}), g.call(OpId::kSum, {t}));
  g.outputs({sum});
  auto plan = plan_memory(p);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const PlannedValue& vs = plan->values[static_cast<size_t>(plan->first_value[s->id()])];
  const PlannedValue& vt = plan->values[static_cast<size_t>(plan->first_value[t->id()])];
  EXPECT_EQ(vs.home, ValueHome::kAlias);
  EXPECT_EQ(vs.alias_of, plan->first_value[r->id()]);
  EXPECT_EQ(vt.home, ValueHome::kArena);
}

}  // namespace
}  // namespace kiln
