// The graph passes of kiln/passes/optimize.h: golden before/after .kir (tests/data/passes), lint,
// a parse round trip, the outputs before and after on the portable interpreter, and nothing left
// to do on a second run; plus what each pass must leave alone.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/ir/kir.h"
#include "kiln/passes/optimize.h"
#include "kiln/passes/pass_util.h"
#include "testing/graph_builder.h"
#include "testing/pass_check.h"

namespace kiln {
namespace {

using testing::f32;
using testing::GraphBuilder;
using testing::ramp;

void check(const std::string& name, ExportedProgram& p, const std::function<Result<bool>(ExportedProgram&)>& pass,
           double tol = 0.0) {
  testing::check_pass_in("passes", name, p, pass, true, tol);
}

Node* weights(ExportedProgram& p, const std::string& name, std::vector<int64_t> shape, double start, double step) {
  return p.add_parameter("p_" + name, name, ramp(std::move(shape), start, step));
}

size_t count(const ExportedProgram& p, OpId op) {
  size_t n = 0;
  for (const Node* node : p.graph().nodes()) n += node->is_call(op);
  return n;
}

Result<bool> fold(ExportedProgram& p) { return fold_constants(p, portable::evaluate_node); }

TEST(OptimizePasses, FoldConstants) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3}));
  Node* w = weights(p, "w", {4, 3}, -1.0, 0.25);
  Node* s = weights(p, "s", {3}, 0.5, 0.5);
  // A weight transposed and scaled at run time: folds to one constant.
  Node* wt = b.call(OpId::kPermute, {w}, {{"dims", std::vector<int64_t>{1, 0}}});
  Node* scaled = b.call(OpId::kMul, {wt, 2.0});
  Node* mm = b.call(OpId::kMm, {x, scaled});
  // Reads a user input: stays.
  Node* xs = b.mul(x, b.call(OpId::kExp, {s}));
  // A dequantize of int8 codes stays (backends read the encoding from it).
  Tensor codes(DType::kI8, {3});
  for (int64_t i = 0; i < 3; ++i) codes.set_scalar_at(i, static_cast<double>(i * 7 - 5));
  Node* q = p.add_constant("codes", "codes", codes);
  Node* dq = b.call(OpId::kDequantizePerTensor, {q},
                    {{"scale", 0.1}, {"zero_point", 0}, {"quant_min", -128}, {"quant_max", 127}, {"dtype", DType::kI8}});
  b.outputs({mm, b.add(xs, dq)});
  check("fold_constants", p, fold, 1e-6);
  EXPECT_EQ(count(p, OpId::kPermute), 0u);
  EXPECT_EQ(count(p, OpId::kExp), 0u);
  EXPECT_EQ(count(p, OpId::kDequantizePerTensor), 1u);
}

TEST(OptimizePasses, FoldConstantsKeepsLargeResultsOfSmallInputs) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({64, 64}));
  Node* one = weights(p, "one", {1, 1}, 1.0, 0.0);
  Node* big = b.call(OpId::kExpand, {one}, {{"size", std::vector<int64_t>{64, 64}}});
  b.outputs({b.add(x, big)});
  FoldConstantsOptions small;
  small.max_result_bytes = 1024;  // 16 KiB of result from 4 bytes: not worth storing
  auto changed = fold_constants(p, portable::evaluate_node, small);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(count(p, OpId::kExpand), 1u);
}

TEST(OptimizePasses, FoldConstantsLeavesWrittenBuffers) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({3}));
  Node* state = b.buffer("state", {3});
  Node* next = b.call(OpId::kAdd, {state, 1.0});
  b.outputs({next, b.add(x, b.call(OpId::kNeg, {state}))},
            {OutputSpec{OutputKind::kBufferMutation, "state", ""}, OutputSpec{OutputKind::kUserOutput, "", "y"}});
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  auto changed = fold(p);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_FALSE(*changed);
}

TEST(OptimizePasses, FoldIntoConv) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 2, 5, 5}));
  Node* w = weights(p, "w", {3, 2, 3, 3}, -0.4, 0.02);
  Node* bias = weights(p, "b", {3}, 0.1, 0.2);
  Node* conv = b.call(OpId::kConvolution, {x, w, bias}, {{"padding", std::vector<int64_t>{1}}});
  Node* bn = b.call(OpId::kBatchNorm, {conv, weights(p, "gamma", {3}, 0.5, 0.5), weights(p, "beta", {3}, -0.2, 0.3),
                                       weights(p, "mean", {3}, 0.05, 0.1), weights(p, "var", {3}, 0.3, 0.4)},
                    {{"eps", 1e-3}});
  // A conv without bias, then a batch norm without affine parameters, a per-channel mul and a
  // scalar add (Paddle's learnable affine block).
  Node* w2 = weights(p, "w2", {3, 3, 1, 1}, 0.1, 0.1);
  Node* conv2 = b.call(OpId::kConvolution, {bn, w2});
  Node* bn2 = b.call(OpId::kBatchNorm, {conv2, nullptr, nullptr, weights(p, "mean2", {3}, 0.0, 0.1),
                                        weights(p, "var2", {3}, 1.0, 0.5)});
  Node* scaled = b.mul(bn2, weights(p, "scale", {3, 1, 1}, 0.5, 0.25));
  Node* shifted = b.call(OpId::kAdd, {scaled, 0.25});
  // A transposed conv (weights [I, O/g, kh, kw], two groups) into a batch norm.
  Node* up = b.call(OpId::kConvTranspose2d, {shifted, weights(p, "wt", {3, 2, 2, 2}, -0.3, 0.03)},
                    {{"stride", std::vector<int64_t>{2}}});
  Node* bn_up = b.call(OpId::kBatchNorm, {up, weights(p, "gamma_up", {2}, 0.8, 0.3), nullptr,
                                          weights(p, "mean_up", {2}, 0.1, 0.1), weights(p, "var_up", {2}, 0.5, 0.5)});
  // A conv whose result is also read elsewhere keeps its batch norm; a mul by a full-size
  // tensor is not per channel.
  Node* w3 = weights(p, "w3", {3, 2, 1, 1}, 0.1, 0.1);
  Node* conv3 = b.call(OpId::kConvolution, {bn_up, w3});
  Node* bn3 = b.call(OpId::kBatchNorm, {conv3, nullptr, nullptr, weights(p, "mean3", {3}, 0.0, 0.1),
                                        weights(p, "var3", {3}, 1.0, 0.5)});
  Node* conv4 = b.call(OpId::kConvolution, {bn3, w2});
  Node* full = b.mul(conv4, weights(p, "full", {1, 3, 10, 10}, -1.0, 0.01));
  b.outputs({full, b.relu(conv3)});
  check("fold_into_conv", p, fold_into_conv, 1e-5);
  EXPECT_EQ(count(p, OpId::kBatchNorm), 1u);
  EXPECT_EQ(count(p, OpId::kMul), 1u);
  EXPECT_EQ(count(p, OpId::kAdd), 0u);
}

TEST(OptimizePasses, RecomposeHardswish) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 8}));
  // Paddle's export: x * clip(x + 3, 0, 6) / 6
  Node* c = b.call(OpId::kClamp, {b.call(OpId::kAdd, {x, 3.0})}, {{"min", 0.0}, {"max", 6.0}});
  Node* h1 = b.call(OpId::kDiv, {b.mul(x, c), 6.0});
  // x * (clip(x + 3, 0, 6) * (1 / 6))
  Node* c2 = b.call(OpId::kClamp, {b.call(OpId::kAdd, {h1, 3.0})}, {{"min", 0.0}, {"max", 6.0}});
  Node* h2 = b.mul(h1, b.call(OpId::kMul, {c2, 1.0 / 6.0}));
  // Not hardswish: clip to [0, 5].
  Node* c3 = b.call(OpId::kClamp, {b.call(OpId::kAdd, {h2, 3.0})}, {{"min", 0.0}, {"max", 5.0}});
  b.outputs({b.call(OpId::kDiv, {b.mul(h2, c3), 6.0})});
  check("recompose_hardswish", p, recompose_hardswish, 1e-6);
  EXPECT_EQ(count(p, OpId::kHardswish), 2u);
  EXPECT_EQ(count(p, OpId::kClamp), 1u);
}

TEST(OptimizePasses, RecomposeGelu) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 8}));
  // torch's export: x * (1 + erf(x / sqrt 2)) * 0.5
  Node* d = b.call(OpId::kDiv, {x, 1.4142135381698608});
  Node* e = b.call(OpId::kErf, {d});
  Node* a = b.call(OpId::kAdd, {e, 1.0});
  Node* m = b.mul(x, a);
  Node* g1 = b.call(OpId::kMul, {m, 0.5});
  // (x * 0.5) * (1 + erf(x * 0.7071))
  Node* y = b.linear(g1, weights(p, "w", {8, 8}, -0.3, 0.01));
  Node* h = b.call(OpId::kMul, {y, 0.5});
  Node* e2 = b.call(OpId::kErf, {b.call(OpId::kMul, {y, 0.7071067690849304})});
  Node* g2 = b.mul(h, b.call(OpId::kAdd, {e2, 1.0}));
  // Not GELU: the erf's argument is x / 2.
  Node* e3 = b.call(OpId::kErf, {b.call(OpId::kDiv, {g2, 2.0})});
  Node* g3 = b.call(OpId::kMul, {b.mul(g2, b.call(OpId::kAdd, {e3, 1.0})), 0.5});
  b.outputs({g3});
  check("recompose_gelu", p, recompose_gelu, 1e-6);
  EXPECT_EQ(count(p, OpId::kGelu), 2u);
  EXPECT_EQ(count(p, OpId::kErf), 1u);
}

TEST(OptimizePasses, RecomposeLayerNorm) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3, 8}));
  auto mean_last = [&](Node* v) {
    return b.call(OpId::kMean, {v}, {{"dim", std::vector<int64_t>{-1}}, {"keepdim", true}});
  };
  // torch's opset-16 export, with weight [8] and bias [1, 8].
  Node* mu = mean_last(x);
  Node* d = b.call(OpId::kSub, {x, mu});
  Node* var = mean_last(b.call(OpId::kPow, {d, 2.0}));
  Node* n = b.call(OpId::kDiv, {d, b.call(OpId::kSqrt, {b.call(OpId::kAdd, {var, 1e-5})})});
  Node* w = b.mul(n, weights(p, "w", {8}, 0.5, 0.1));
  Node* y = b.add(w, weights(p, "b", {1, 8}, -0.2, 0.05));
  // d * rsqrt(mean(d * d) + eps), no affine part.
  Node* mu2 = mean_last(y);
  Node* d2 = b.call(OpId::kSub, {y, mu2});
  Node* var2 = mean_last(b.mul(d2, d2));
  Node* n2 = b.mul(d2, b.call(OpId::kRsqrt, {b.call(OpId::kAdd, {var2, 1e-6})}));
  // Not a layer norm: the mean is over dim 1, the variance over dim 2.
  Node* mu3 = b.call(OpId::kMean, {n2}, {{"dim", std::vector<int64_t>{1}}, {"keepdim", true}});
  Node* d3 = b.call(OpId::kSub, {n2, mu3});
  Node* var3 = mean_last(b.call(OpId::kPow, {d3, 2.0}));
  Node* n3 = b.call(OpId::kDiv, {d3, b.call(OpId::kSqrt, {b.call(OpId::kAdd, {var3, 1e-5})})});
  b.outputs({n3});
  check("recompose_layer_norm", p, recompose_layer_norm, 1e-5);
  EXPECT_EQ(count(p, OpId::kLayerNorm), 2u);
}

TEST(OptimizePasses, CancelTransposes) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3, 4, 5}));
  auto permute = [&](Node* v, std::vector<int64_t> dims) { return b.call(OpId::kPermute, {v}, {{"dims", dims}}); };
  // NCHW -> NHWC -> NCHW: nothing.
  Node* back = permute(permute(x, {0, 2, 3, 1}), {0, 3, 1, 2});
  Node* r1 = b.relu(back);
  // Two transposes that compose to one permute.
  Node* t = b.call(OpId::kTranspose, {b.call(OpId::kTranspose, {r1}, {{"dim0", 1}, {"dim1", 2}})}, {{"dim0", 2}, {"dim1", 3}});
  // A reshape chain: one reshape; and one that comes back to its input's shape: none.
  Node* flat = b.call(OpId::kFlatten, {t}, {{"start_dim", 1}});
  Node* r = b.call(OpId::kReshape, {flat}, {{"shape", std::vector<int64_t>{2, 6, 10}}});
  Node* same = b.call(OpId::kReshape, {b.call(OpId::kUnsqueeze, {r}, {{"dim", 0}})}, {{"shape", std::vector<int64_t>{2, 6, 10}}});
  b.outputs({b.relu(same), b.call(OpId::kNeg, {flat})});
  check("cancel_transposes", p, cancel_transposes);
  EXPECT_EQ(count(p, OpId::kTranspose), 0u);
  EXPECT_EQ(count(p, OpId::kPermute), 1u);
}

TEST(OptimizePasses, FuseActivations) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 2, 6, 6}));
  Node* c1 = b.call(OpId::kConvolution, {x, weights(p, "w1", {4, 2, 3, 3}, -0.3, 0.01)}, {{"padding", std::vector<int64_t>{1}}});
  Node* a1 = b.relu(c1);
  Node* c2 = b.call(OpId::kConvolution, {a1, weights(p, "w2", {4, 1, 3, 3}, -0.2, 0.05), weights(p, "b2", {4}, -1, 0.5)},
                    {{"groups", 4}});
  Node* a2 = b.call(OpId::kClamp, {c2}, {{"min", 0.0}, {"max", 6.0}});
  Node* f = b.call(OpId::kFlatten, {a2}, {{"start_dim", 1}});
  Node* l1 = b.linear(f, weights(p, "w3", {8, 64}, -0.2, 0.0071), weights(p, "b3", {8}, 0.0, 0.1));
  Node* a3 = b.call(OpId::kGelu, {l1});
  Node* l2 = b.linear(a3, weights(p, "w4", {8, 8}, -0.5, 0.02));
  Node* a4 = b.call(OpId::kHardswish, {l2});
  Node* l3 = b.linear(a4, weights(p, "w5", {8, 8}, -0.5, 0.02));
  Node* a5 = b.call(OpId::kSigmoid, {l3});
  // The linear is read twice: its activation stays a node.
  Node* l4 = b.linear(a5, weights(p, "w6", {8, 8}, -0.5, 0.02));
  Node* a6 = b.call(OpId::kTanh, {l4});
  b.outputs({a6, l4});
  check("fuse_activations", p, fuse_activations);
  EXPECT_EQ(count(p, OpId::kTanh), 1u);
  EXPECT_EQ(count(p, OpId::kRelu) + count(p, OpId::kClamp) + count(p, OpId::kGelu) + count(p, OpId::kHardswish) +
                count(p, OpId::kSigmoid),
            0u);
}

TEST(OptimizePasses, FusedActivationIsValidated) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 4}));
  Node* w = weights(p, "w", {3, 4}, 0.0, 0.1);
  auto bad = p.graph().add_call(OpId::kLinear, {x, w}, {{"activation", "swish"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("swish"), std::string::npos) << bad.status().message();
  auto stray = p.graph().add_call(OpId::kLinear, {x, w}, {{"activation", "relu"}, {"clamp_max", 6.0}});
  ASSERT_FALSE(stray.ok());
  EXPECT_NE(stray.status().message().find("clamp_max"), std::string::npos) << stray.status().message();
  auto inverted = p.graph().add_call(OpId::kLinear, {x, w}, {{"activation", "clamp"}, {"clamp_min", 2.0}, {"clamp_max", 1.0}});
  ASSERT_FALSE(inverted.ok());
  // A .kir written by hand is checked the same way.
  auto parsed = parse_kir(R"(graph():
    %x : [num_users=1] f32[2, 4] = placeholder[target=x]
    %w : [num_users=1] f32[3, 4] = placeholder[target=w]
    %l : [num_users=1] f32[2, 3] = call_function[target=linear](args = (%x, %w), kwargs = {activation: "elu"})
    return (l,)
)", "bad.kir");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("elu"), std::string::npos) << parsed.status().message();
}

TEST(OptimizePasses, PipelineKeepsOutputsAndNames) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 2, 4, 4}));
  Node* conv = b.call(OpId::kConvolution, {x, weights(p, "w", {2, 2, 1, 1}, -0.5, 0.3)});
  Node* bn = b.call(OpId::kBatchNorm, {conv, weights(p, "g", {2}, 1.0, 0.5), weights(p, "be", {2}, 0.0, 0.5),
                                       weights(p, "m", {2}, 0.1, 0.1), weights(p, "v", {2}, 0.5, 0.5)});
  Node* nhwc = b.call(OpId::kPermute, {bn}, {{"dims", std::vector<int64_t>{0, 2, 3, 1}}});
  Node* nchw = b.call(OpId::kPermute, {nhwc}, {{"dims", std::vector<int64_t>{0, 3, 1, 2}}});
  b.outputs({b.relu(nchw)}, {OutputSpec{OutputKind::kUserOutput, "", "scores"}});
  std::vector<Tensor> inputs = testing::sample_inputs(p);
  std::vector<Tensor> before = testing::run_program(p, inputs);
  OptimizeOptions options;
  options.evaluate = portable::evaluate_node;
  std::vector<std::string> seen;
  options.after_changed = [&](std::string_view pass, const ExportedProgram&) { seen.emplace_back(pass); };
  auto records = optimize(p, options);
  ASSERT_TRUE(records.ok()) << records.status().message();
  EXPECT_EQ(seen, (std::vector<std::string>{"FoldIntoConv", "CancelTransposes"}));
  EXPECT_EQ(p.user_output_names(), std::vector<std::string>{"scores"});
  EXPECT_EQ(count(p, OpId::kBatchNorm) + count(p, OpId::kPermute), 0u);
  testing::expect_tensors_near(before, testing::run_program(p, inputs), 1e-5);
}

}  // namespace
}  // namespace kiln
