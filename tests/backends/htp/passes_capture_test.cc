// capture_program on a quantized small CNN (quantized here with kiln's quantizer) and on a float
// transformer-like block: the structure capture.h promises, and unchanged outputs where the
// result still runs.
#include "kiln/backends/htp/capture.h"

#include <gtest/gtest.h>

#include "kiln/quant/quantizer.h"
#include "passes_test_util.h"

namespace kiln::htp {
namespace {

using testing::f32;
using testing::GraphBuilder;
using Ints = std::vector<int64_t>;

size_t count_op(const ExportedProgram& p, OpId op) {
  size_t n = 0;
  for (const Node* node : p.graph().nodes()) n += node->is_call(op) ? 1 : 0;
  return n;
}

ExportedProgram small_cnn() {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 3, 8, 8}));
  Node* c1 = b.call(OpId::kConvolution, {x, b.param("w1", {4, 3, 3, 3}, 0.1f), b.param("b1", {4}, 0.01f)},
                    {{"padding", Ints{1}}}, "conv1");
  Node* r1 = b.call(OpId::kRelu6, {c1}, {}, "r1");
  Node* c2 = b.call(OpId::kConvolution, {r1, b.param("w2", {4, 4, 1, 1}, 0.2f), b.param("b2", {4}, 0.0f)}, {}, "conv2");
  Node* add = b.call(OpId::kAdd, {c2, r1}, {}, "res");
  Node* pool = b.call(OpId::kMaxPool2d, {add}, {{"kernel_size", Ints{2, 2}}, {"stride", Ints{2, 2}}}, "pool");
  Node* gap = b.call(OpId::kAdaptiveAvgPool2d, {pool}, {{"output_size", Ints{1, 1}}}, "gap");
  Node* flat = b.call(OpId::kFlatten, {gap}, {{"start_dim", 1}}, "flat");
  b.outputs({b.linear(flat, b.param("fc_w", {5, 4}, 0.1f), b.param("fc_b", {5}, 0.0f))});
  return p;
}

ExportedProgram quantized_cnn() {
  ExportedProgram fp = small_cnn();
  quant::QuantizeOptions options;
  options.config = *quant::make_config("8a8w");
  auto prepared = quant::prepare(fp, options);
  EXPECT_TRUE(prepared.ok()) << prepared.status().message();
  std::vector<quant::Sample> samples;
  for (uint32_t s = 1; s <= 4; ++s) samples.push_back({"s" + std::to_string(s), {{"x", testing::sample_inputs(fp, s)[0]}}});
  Status cal = quant::calibrate(**prepared, samples);
  EXPECT_TRUE(cal.ok()) << cal.message();
  auto q = quant::convert(**prepared);
  EXPECT_TRUE(q.ok()) << q.status().message();
  return std::move(*q);
}

TEST(HtpCapture, QuantizedCnn) {
  ExportedProgram p = quantized_cnn();
  ASSERT_GT(count_op(p, OpId::kDequantizePerChannel), 0u);
  std::vector<std::string> changed;
  Status s = capture_program(p, {}, {.after_pass = [&](std::string_view name, const ExportedProgram&) {
                                       changed.emplace_back(name);
                                     }});
  ASSERT_TRUE(s.ok()) << s.message() << "\n" << print_kir(p);
  const Graph& g = p.graph();
  // (b), (c): only the input's quantize and the output's dequantize remain.
  EXPECT_EQ(count_op(p, OpId::kQuantizePerTensor), 1u) << print_kir(p);
  EXPECT_EQ(count_op(p, OpId::kDequantizePerTensor), 1u);
  EXPECT_EQ(count_op(p, OpId::kDequantizePerChannel), 0u);
  EXPECT_EQ(count_op(p, OpId::kRelu6), 0u);  // (a) decomposed to clamp
  Node* conv1 = g.find("conv1");
  ASSERT_NE(conv1, nullptr);
  EXPECT_TRUE(conv1->meta.channels_last);  // (e)
  EXPECT_EQ(*conv1->spec().static_shape(), (Ints{1, 8, 8, 4}));
  Node* w1 = conv1->arg(1).node();
  EXPECT_EQ(w1->op(), OpKind::kPlaceholder);
  ASSERT_TRUE(w1->meta.quant.has_value());
  EXPECT_EQ(w1->spec().dtype, DType::kI8);
  EXPECT_EQ(*w1->spec().static_shape(), (Ints{4, 3, 3, 3}));  // OIHW
  // The input permute comes after its quantize and moves codes (the HTP has no float Transpose
  // in a fixed-point graph): the region starts after the quantize.
  Node* xp = conv1->arg(0).node();
  ASSERT_TRUE(xp->is_call(OpId::kPermute));
  EXPECT_TRUE(xp->meta.quant.has_value());
  EXPECT_TRUE(xp->arg(0).node()->is_call(OpId::kQuantizePerTensor));
  // One permute in, one back before flatten (carrying the pooled value's encoding).
  EXPECT_EQ(count_op(p, OpId::kPermute), 2u) << print_kir(p);
  Node* back = g.find("flat")->arg(0).node();
  ASSERT_TRUE(back->is_call(OpId::kPermute));
  EXPECT_TRUE(back->meta.quant.has_value());
  for (const char* pass : {"Decompose", "AnnotateQuantAttrs", "FoldQDQ", "LayoutTransform"}) {
    EXPECT_NE(std::find(changed.begin(), changed.end(), pass), changed.end()) << pass;
  }
  EXPECT_EQ(std::find(changed.begin(), changed.end(), "ExpandBroadcastTensorShape"), changed.end());
}

// Attention and a gated MLP in float: no layout-sensitive op, so the result still runs.
TEST(HtpCapture, FloatTransformerBlockKeepsOutputs) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 4, 8}));
  Node* h = b.call(OpId::kRmsNorm, {x, b.param("norm_w", {8}, 0.9f)}, {{"normalized_shape", Ints{8}}, {"eps", 1e-6}}, "norm");
  Node* q = b.linear(h, b.param("wq", {8, 8}, 0.05f));
  Node* k = b.linear(h, b.param("wk", {8, 8}, 0.03f));
  Node* v = b.linear(h, b.param("wv", {8, 8}, 0.02f));
  Node* kt = b.call(OpId::kTranspose, {k}, {{"dim0", 1}, {"dim1", 2}});
  Node* scores = b.call(OpId::kDiv, {b.call(OpId::kBmm, {q, kt}), 2.0});
  Node* attn = b.call(OpId::kSoftmax, {scores}, {{"dim", -1}}, "attn");
  Node* ctx = b.call(OpId::kBmm, {attn, v});
  Node* o = b.add(x, b.linear(ctx, b.param("wo", {8, 8}, 0.04f)));
  Node* gate = b.call(OpId::kSilu, {b.linear(o, b.param("wg", {16, 8}, 0.03f))});
  Node* up = b.linear(o, b.param("wu", {16, 8}, 0.02f));
  Node* down = b.linear(b.mul(gate, up), b.param("wd", {8, 16}, 0.01f));
  b.outputs({b.add(o, b.call(OpId::kMul, {down, 1.5}))});
  auto inputs = testing::sample_inputs(p);
  auto before = testing::run_program(p, inputs);
  Status s = capture_program(p);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(count_op(p, OpId::kRmsNorm), 1u) << print_kir(p);  // decomposed and recomposed
  EXPECT_EQ(count_op(p, OpId::kBmm), 0u);                       // matmul
  EXPECT_EQ(count_op(p, OpId::kMatmul), 2u);
  EXPECT_EQ(count_op(p, OpId::kTranspose), 0u);
  EXPECT_EQ(count_op(p, OpId::kSilu), 0u);  // x * sigmoid(x)
  EXPECT_EQ(count_op(p, OpId::kPermute), 1u);
  for (const Node* n : p.graph().nodes()) {
    EXPECT_FALSE(n->meta.channels_last) << n->name();
    if (n->is_call(OpId::kMul) || n->is_call(OpId::kDiv) || n->is_call(OpId::kAdd)) {
      EXPECT_TRUE(n->arg(1).is_node()) << n->name() << " reads a number";
    }
  }
  testing::expect_tensors_near(before, testing::run_program(p, inputs), 1e-5);
}

// What `kiln compile --backend htp` runs on the whole program before partitioning: an ONNX
// Gemm's permute + addmm of a dequantized weight becomes linear (which the HTP takes), and
// the program still runs on the interpreter with the same outputs.
TEST(HtpCapture, RecomposeForPartitionTurnsGemmIntoLinear) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 4}));
  Tensor wq(DType::kI8, {3, 4});
  for (int64_t i = 0; i < wq.numel(); ++i) wq.mutable_data_as<int8_t>()[i] = static_cast<int8_t>(i * 7 % 11 - 5);
  Node* w = p.add_constant("w", "w", std::move(wq));
  Node* dw = b.call(OpId::kDequantizePerTensor, {w},
                    {{"scale", 0.1}, {"zero_point", 0}, {"quant_min", -127}, {"quant_max", 127}, {"dtype", DType::kI8}});
  Node* wt = b.call(OpId::kPermute, {dw}, {{"dims", Ints{1, 0}}});
  Node* c = b.call(OpId::kCast, {x}, {{"dtype", DType::kF32}});  // redundant: removed too
  b.outputs({b.call(OpId::kAddmm, {b.param("bias", {3}), c, wt})});
  auto inputs = testing::sample_inputs(p);
  auto before = testing::run_program(p, inputs);
  Status s = recompose_for_partition(p);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(count_op(p, OpId::kLinear), 1u) << print_kir(p);
  EXPECT_EQ(count_op(p, OpId::kAddmm), 0u);
  EXPECT_EQ(count_op(p, OpId::kPermute), 0u);
  EXPECT_EQ(count_op(p, OpId::kCast), 0u);
  EXPECT_EQ(count_op(p, OpId::kDequantizePerTensor), 1u);
  testing::expect_tensors_near(before, testing::run_program(p, inputs), 0);
}

// An ONNX MatMul by a constant [K, N] (per-channel codes along N) becomes linear over the
// transposed codes [N, K], their axis 0: the HTP's FullyConnected with per-channel weights.
TEST(HtpCapture, RecomposeForPartitionTurnsMatmulByAConstantIntoLinear) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3, 4}));
  Tensor wq(DType::kI8, {4, 5});
  for (int64_t i = 0; i < wq.numel(); ++i) wq.mutable_data_as<int8_t>()[i] = static_cast<int8_t>(i * 7 % 13 - 6);
  Node* w = p.add_constant("w", "w", std::move(wq));
  Tensor scales(DType::kF32, {5});
  Tensor zps(DType::kI64, {5});
  for (int64_t i = 0; i < 5; ++i) {
    scales.mutable_data_as<float>()[i] = 0.05f * static_cast<float>(i + 1);
    zps.mutable_data_as<int64_t>()[i] = 0;
  }
  Node* s = p.add_constant("s", "s", std::move(scales));
  Node* z = p.add_constant("z", "z", std::move(zps));
  Node* dw = b.call(OpId::kDequantizePerChannel, {w, s, z},
                    {{"axis", 1}, {"quant_min", -127}, {"quant_max", 127}, {"dtype", DType::kI8}});
  b.outputs({b.call(OpId::kMatmul, {x, dw})});
  auto inputs = testing::sample_inputs(p);
  auto before = testing::run_program(p, inputs);
  Status st = recompose_for_partition(p);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(count_op(p, OpId::kLinear), 1u) << print_kir(p);
  EXPECT_EQ(count_op(p, OpId::kMatmul), 0u);
  const Node* lin = p.user_outputs()[0];
  ASSERT_TRUE(lin->is_call(OpId::kLinear));
  const Node* dq = lin->arg(1).node();
  ASSERT_TRUE(dq->is_call(OpId::kDequantizePerChannel));
  EXPECT_EQ(dq->kwarg_int("axis"), 0);
  EXPECT_EQ(dq->spec().shape, (Shape{5, 4}));
  testing::expect_tensors_near(before, testing::run_program(p, inputs), 1e-5);
}

TEST(HtpCapture, UnknownPassConfigIsAnError) {
  ExportedProgram p = small_cnn();
  std::string before = print_kir(p);
  Status s = capture_program(p, {"skip_advanced_requant", "fold_everything"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'fold_everything'"), std::string::npos) << s.message();
  EXPECT_EQ(print_kir(p), before);
  EXPECT_TRUE(capture_program(p, {std::string(kPassExpandBroadcastShape)}).ok());
}

TEST(HtpCapture, ConvertLinearToConv2dKeepsOutputs) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 5, 4}));
  b.outputs({b.linear(x, b.param("w", {3, 4}, 0.2f), b.param("b", {3}, 0.1f))});
  auto inputs = testing::sample_inputs(p);
  auto before = testing::run_program(p, inputs);
  ASSERT_TRUE(convert_linear_to_conv2d(p).ok());
  EXPECT_EQ(count_op(p, OpId::kLinear), 0u);
  EXPECT_EQ(count_op(p, OpId::kConvolution), 1u);
  testing::expect_tensors_near(before, testing::run_program(p, inputs), 1e-5);
}

}  // namespace
}  // namespace kiln::htp
