// LayoutTransform on resnet-like and mobilenet-like blocks: golden .kir, the number of permutes,
// NHWC specs and rewritten axes on the channels-last nodes, and NCHW wherever the graph leaves
// the region.
#include <gtest/gtest.h>

#include "passes_test_util.h"

namespace kiln::htp {
namespace {

using testing::check_pass;
using testing::f32;
using testing::GraphBuilder;
using Ints = std::vector<int64_t>;

size_t count_op(const ExportedProgram& p, OpId op) {
  size_t n = 0;
  for (const Node* node : p.graph().nodes()) n += node->is_call(op) ? 1 : 0;
  return n;
}

Node* conv(GraphBuilder& b, const std::string& name, Node* x, int64_t cin, int64_t cout, int64_t k,
           int64_t groups = 1, int64_t stride = 1) {
  Node* w = b.param(name + "_w", {cout, cin / groups, k, k}, 0.1f);
  Node* bias = b.param(name + "_b", {cout}, 0.01f);
  return b.call(OpId::kConvolution, {x, w, bias},
                {{"stride", Ints{stride}}, {"padding", Ints{k / 2}}, {"groups", groups}}, name);
}

Node* bn(GraphBuilder& b, const std::string& name, Node* x, int64_t c) {
  return b.call(OpId::kBatchNorm,
                {x, b.param(name + "_g", {c}, 1.0f), b.param(name + "_beta", {c}, 0.0f),
                 b.param(name + "_mean", {c}, 0.0f), b.param(name + "_var", {c}, 1.0f)},
                {}, name);
}

// The reader of every NHWC value a channels-last node reads must be NHWC too, and nodes that
// are not channels-last read no NHWC value except through a permute back.
void expect_layout_consistent(const ExportedProgram& p) {
  for (const Node* n : p.graph().nodes()) {
    if (n->op() != OpKind::kCallFunction) continue;
    for (const Use& use : n->operands()) {
      const Node* v = use.value;
      if (!v->meta.channels_last) continue;
      bool reads_nhwc = n->meta.channels_last || n->is_call(OpId::kMean) ||
                        (n->is_call(OpId::kPermute) && n->kwarg("dims").to_ints() == Ints{0, 3, 1, 2});
      EXPECT_TRUE(reads_nhwc) << n->name() << " reads NHWC " << v->name();
    }
  }
  for (const Node* out : p.user_outputs()) EXPECT_FALSE(out->meta.channels_last) << out->name();
}

// conv-bn-relu, conv-bn + identity, relu, max pool, global pool, flatten, linear.
TEST(HtpLayoutTransform, ResnetBlockNeedsOnePermuteInAndOneOut) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 4, 8, 8}));
  Node* c1 = b.relu(bn(b, "bn1", conv(b, "conv1", x, 4, 4, 3), 4));
  Node* c2 = bn(b, "bn2", conv(b, "conv2", c1, 4, 4, 3), 4);
  Node* res = b.relu(b.add(c2, c1));
  Node* pool = b.call(OpId::kMaxPool2d, {res}, {{"kernel_size", Ints{2, 2}}, {"stride", Ints{2, 2}}}, "pool");
  Node* gap = b.call(OpId::kAdaptiveAvgPool2d, {pool}, {{"output_size", Ints{1, 1}}}, "gap");
  Node* flat = b.call(OpId::kFlatten, {gap}, {{"start_dim", 1}}, "flat");
  b.outputs({b.linear(flat, b.param("fc_w", {3, 4}, 0.1f), b.param("fc_b", {3}))});
  check_pass("layout_transform_resnet", p, layout_transform, /*numerics=*/false);
  EXPECT_EQ(count_op(p, OpId::kPermute), 2u);
  const Graph& g = p.graph();
  Node* in = g.find("conv1")->arg(0).node();
  ASSERT_TRUE(in->is_call(OpId::kPermute));
  EXPECT_EQ(in->kwarg("dims").to_ints(), (Ints{0, 2, 3, 1}));
  EXPECT_EQ(in->arg(0).node()->name(), "x");
  EXPECT_EQ(*g.find("conv1")->spec().static_shape(), (Ints{1, 8, 8, 4}));
  EXPECT_EQ(*g.find("pool")->spec().static_shape(), (Ints{1, 4, 4, 4}));
  EXPECT_TRUE(g.find("bn2")->meta.channels_last);
  // Conv weights stay OIHW.
  EXPECT_EQ(*g.find("p_conv1_w")->spec().static_shape(), (Ints{4, 4, 3, 3}));
  EXPECT_FALSE(g.find("p_conv1_w")->meta.channels_last);
  Node* back = g.find("flat")->arg(0).node();
  ASSERT_TRUE(back->is_call(OpId::kPermute));
  EXPECT_EQ(back->kwarg("dims").to_ints(), (Ints{0, 3, 1, 2}));
  EXPECT_EQ(*back->spec().static_shape(), (Ints{1, 4, 1, 1}));
  EXPECT_FALSE(g.find("flat")->meta.channels_last);
  expect_layout_consistent(p);
}

// Inverted residual: pointwise expand, depthwise, pointwise project, residual add, a hardswish,
// a cat over channels, a scalar mul, a softmax over channels, mean over H and W (no keepdim:
// [N, C] in either layout, so no permute back), linear.
TEST(HtpLayoutTransform, MobilenetBlockNeedsOnlyTheInputPermute) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 4, 6, 6}));
  Node* e = b.call(OpId::kClamp, {bn(b, "bn1", conv(b, "expand", x, 4, 8, 1), 8)}, {{"min", 0.0}, {"max", 6.0}}, "relu6_1");
  Node* d = b.call(OpId::kClamp, {bn(b, "bn2", conv(b, "dw", e, 8, 8, 3, /*groups=*/8), 8)}, {{"min", 0.0}, {"max", 6.0}}, "relu6_2");
  Node* proj = bn(b, "bn3", conv(b, "project", d, 8, 4, 1), 4);
  Node* res = b.add(proj, x);
  Node* hs = b.call(OpId::kHardswish, {res}, {}, "hs");
  Node* cat = b.call(OpId::kCat, {std::vector<Node*>{hs, res}}, {{"dim", 1}}, "cat");
  Node* half = b.call(OpId::kMul, {cat, 0.5}, {}, "half");
  Node* sm = b.call(OpId::kSoftmax, {half}, {{"dim", 1}}, "sm");
  Node* mean = b.call(OpId::kMean, {sm}, {{"dim", Ints{-1, -2}}}, "mean");
  b.outputs({b.linear(mean, b.param("fc_w", {3, 8}, 0.1f))});
  check_pass("layout_transform_mobilenet", p, layout_transform, /*numerics=*/false);
  EXPECT_EQ(count_op(p, OpId::kPermute), 1u);
  const Graph& g = p.graph();
  // x is read by the expand conv and by the residual add: one permute serves both.
  Node* xp = g.find("expand")->arg(0).node();
  ASSERT_TRUE(xp->is_call(OpId::kPermute));
  EXPECT_TRUE(xp->meta.channels_last);
  EXPECT_EQ(g.find("add")->arg(1).node(), xp);
  EXPECT_EQ(g.find("cat")->kwarg_int("dim"), 3);
  EXPECT_EQ(*g.find("cat")->spec().static_shape(), (Ints{1, 6, 6, 8}));
  EXPECT_EQ(g.find("sm")->kwarg_int("dim"), 3);
  EXPECT_EQ(g.find("mean")->kwarg("dim").to_ints(), (Ints{1, 2}));
  EXPECT_FALSE(g.find("mean")->meta.channels_last);
  EXPECT_EQ(*g.find("mean")->spec().static_shape(), (Ints{1, 8}));
  for (const char* name : {"relu6_1", "dw", "relu6_2", "bn3", "add", "hs", "half"}) {
    EXPECT_TRUE(g.find(name)->meta.channels_last) << name;
  }
  expect_layout_consistent(p);
}

// A reshape between two convolutions is not layout-agnostic: each conv gets its own region.
TEST(HtpLayoutTransform, ReshapeBetweenConvsSplitsTheRegions) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 2, 4, 4}));
  Node* c1 = b.relu(conv(b, "conv1", x, 2, 4, 1));
  Node* r = b.call(OpId::kReshape, {c1}, {{"shape", Ints{1, 4, 2, 8}}}, "reshape");
  Node* c2 = conv(b, "conv2", r, 4, 2, 1);
  Node* bias = b.param("bias4", {1, 2, 1, 1}, 0.25f);
  b.outputs({b.add(c2, bias), c1});  // c1 is also a graph output
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  auto changed = layout_transform(p);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  ASSERT_TRUE(p.lint().ok()) << p.lint().message() << print_kir(p);
  // in, back (shared by the reshape and the output), in, and the rank-4 constant, back.
  EXPECT_EQ(count_op(p, OpId::kPermute), 5u) << print_kir(p);
  const Graph& g = p.graph();
  EXPECT_EQ(g.find("reshape")->arg(0).node()->kwarg("dims").to_ints(), (Ints{0, 3, 1, 2}));
  EXPECT_EQ(p.user_outputs()[1], g.find("reshape")->arg(0).node());
  EXPECT_EQ(*p.user_outputs()[0]->spec().static_shape(), (Ints{1, 2, 2, 8}));
  expect_layout_consistent(p);
  auto again = layout_transform(p);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

// Without a layout-sensitive op nothing changes.
TEST(HtpLayoutTransform, NoSensitiveOpNoChange) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 2, 3, 3}));
  b.outputs({b.relu(b.add(x, x))});
  auto changed = layout_transform(p);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
}

}  // namespace
}  // namespace kiln::htp
