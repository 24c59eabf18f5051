// AnnotateQuantAttrs and FoldQDQ on a program from `kiln quantize` (tests/data/quant): golden
// .kir and the exact structure of the folded result (capture.h's contract (a)-(f)).
#include <gtest/gtest.h>

#include <map>

#include "kiln/backends/htp/context.h"
#include "kiln/backends/htp/htp_backend.h"
#include "kiln/backends/htp/htp_runtime.h"
#include "passes_test_util.h"

namespace kiln::htp {
namespace {

using testing::check_pass;

ExportedProgram load_quantized() {
  auto p = load_kir_file(std::string(KILN_TEST_DATA_DIR) + "/quant/rules_8a8w.kir");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(*p);
}

size_t count_op(const ExportedProgram& p, OpId op) {
  size_t n = 0;
  for (const Node* node : p.graph().nodes()) n += node->is_call(op) ? 1 : 0;
  return n;
}

TEST(HtpQuantPasses, AnnotateQuantAttrsMovesParametersOntoValues) {
  ExportedProgram p = load_quantized();
  check_pass("annotate_quant_attrs", p, [](ExportedProgram& q) { return annotate_quant_attrs(q, false); });
  const Graph& g = p.graph();
  // Producers read by a quantize carry its parameters; the fused linear does not (its relu does).
  EXPECT_FALSE(g.find("lin")->meta.quant.has_value());
  ASSERT_TRUE(g.find("relu")->meta.quant.has_value());
  EXPECT_EQ(g.find("relu")->meta.quant->scales, std::vector<double>{0.008063411340117455});
  EXPECT_EQ(*g.find("sig")->meta.quant, *g.find("sig_q")->meta.quant);
  // Integer constants carry their dequantize's per-channel parameters.
  ASSERT_TRUE(g.find("w1_q")->meta.quant.has_value());
  EXPECT_EQ(g.find("w1_q")->meta.quant->axis, 0);
  EXPECT_EQ(g.find("w1_q")->meta.quant->scales.size(), 3u);
  EXPECT_EQ(g.find("b1_q")->meta.quant->dtype, DType::kI32);
  // A user input gets none: its quantize stays.
  EXPECT_FALSE(g.find("x")->meta.quant.has_value());
}

TEST(HtpQuantPasses, FoldQDQErasesThePairsAndKeepsIoQuantizeDequantize) {
  ExportedProgram p = load_quantized();
  ASSERT_TRUE(annotate_quant_attrs(p, false).ok());
  check_pass("fold_qdq", p, fold_qdq, /*numerics=*/false);
  const Graph& g = p.graph();
  // (c) the user input's quantize stays, the user output's dequantize stays; nothing else.
  EXPECT_EQ(count_op(p, OpId::kQuantizePerTensor), 1u);
  EXPECT_EQ(count_op(p, OpId::kDequantizePerTensor), 1u);
  EXPECT_EQ(count_op(p, OpId::kDequantizePerChannel), 0u);
  Node* lin = g.find("lin");
  EXPECT_EQ(lin->arg(0).node()->name(), "x_q");
  EXPECT_EQ(lin->arg(1).node()->name(), "w1_q");  // (b) integer weight read directly
  EXPECT_EQ(lin->arg(2).node()->name(), "b1_q");
  EXPECT_EQ(g.find("view")->arg(0).node()->name(), "relu");  // (a) consumers read producers
  EXPECT_EQ(g.find("cat")->arg(0).nodes()[0]->name(), "view");
  EXPECT_EQ(g.find("cat")->arg(0).nodes()[1]->name(), "sig");
  EXPECT_EQ(g.find("mul")->arg(0).node()->name(), "cat");
  Node* out = p.user_outputs()[0];
  EXPECT_TRUE(out->is_call(OpId::kDequantizePerTensor));
  EXPECT_EQ(out->arg(0).node()->name(), "mul");
  EXPECT_EQ(p.user_output_names(), std::vector<std::string>{"mul"});
  // (d) activations keep their float spec.
  EXPECT_EQ(g.find("relu")->spec().dtype, DType::kF32);
  // (b) the scales / zero points placeholders and their constants are gone.
  EXPECT_EQ(g.find("w1_scales"), nullptr);
  EXPECT_EQ(g.find("b1_zero_points"), nullptr);
  EXPECT_FALSE(p.constants().contains("w1_scales"));
  EXPECT_EQ(p.signature().inputs.size(), 3u);  // x, w1_q, b1_q
}

// A dequantize -> quantize with other parameters is a requantization: it stays as a quantize
// reading the producer (an explicit requantize); with skip_advanced_requant a change of scale
// alone is dropped.
ExportedProgram requant_program() {
  auto p = parse_kir(
      "graph():\n"
      "    %x : f32[4] = placeholder[target=x]\n"
      "    %x_q : u8[4] = call_function[target=quantize_per_tensor](args = (%x,), kwargs = {scale: 0.1, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    %x_dq : f32[4] = call_function[target=dequantize_per_tensor](args = (%x_q,), kwargs = {scale: 0.1, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    %r : f32[4] = call_function[target=relu](args = (%x_dq,), kwargs = {})\n"
      "    %r_q : u8[4] = call_function[target=quantize_per_tensor](args = (%r,), kwargs = {scale: 0.1, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    %r_dq : f32[4] = call_function[target=dequantize_per_tensor](args = (%r_q,), kwargs = {scale: 0.1, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    %r_q2 : u8[4] = call_function[target=quantize_per_tensor](args = (%r_dq,), kwargs = {scale: 0.05, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    %r_dq2 : f32[4] = call_function[target=dequantize_per_tensor](args = (%r_q2,), kwargs = {scale: 0.05, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    %n : f32[4] = call_function[target=neg](args = (%r_dq2,), kwargs = {})\n"
      "    %n_q : u8[4] = call_function[target=quantize_per_tensor](args = (%n,), kwargs = {scale: 0.1, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    %n_dq : f32[4] = call_function[target=dequantize_per_tensor](args = (%n_q,), kwargs = {scale: 0.1, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    return (n_dq,)\n");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(*p);
}

TEST(HtpQuantPasses, RequantizeStaysExplicit) {
  ExportedProgram p = requant_program();
  ASSERT_TRUE(annotate_quant_attrs(p, false).ok());
  ASSERT_TRUE(fold_qdq(p).ok());
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  Node* n = p.graph().find("n");
  Node* rq = n->arg(0).node();
  ASSERT_TRUE(rq->is_call(OpId::kQuantizePerTensor)) << print_kir(p);
  EXPECT_EQ(rq->name(), "r_q2");
  EXPECT_EQ(rq->arg(0).node()->name(), "r");
  EXPECT_EQ(rq->meta.quant->scales, std::vector<double>{0.05});
  EXPECT_EQ(p.graph().find("r")->meta.quant->scales, std::vector<double>{0.1});
}

TEST(HtpQuantPasses, SkipAdvancedRequantDropsAScaleOnlyRequant) {
  ExportedProgram p = requant_program();
  ASSERT_TRUE(annotate_quant_attrs(p, true).ok());
  ASSERT_TRUE(fold_qdq(p).ok());
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  EXPECT_EQ(p.graph().find("n")->arg(0).node()->name(), "r");
  EXPECT_EQ(count_op(p, OpId::kQuantizePerTensor), 1u);  // the input's
}

// Through preprocess (capture_program, then the builder): the requantize reads a value that has
// meta.quant, so it is a QNN Convert between encodings; only the input's quantize is a Quantize.
TEST(HtpQuantPasses, PreprocessBuildsTheRequantizeAsAConvert) {
  ExportedProgram p = requant_program();
  auto spec = generate_qnn_executorch_compiler_spec(QcomChipset::SM8650, generate_htp_compiler_spec(false), {});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  HtpBackend backend;
  auto blob = backend.preprocess(p, to_compile_specs<CompileSpec>(*spec));
  ASSERT_TRUE(blob.ok()) << blob.status().message();
  auto context = parse_context(blob->processed_bytes);
  ASSERT_TRUE(context.ok()) << context.status().message();
  std::map<std::string, int> ops;
  for (const QnnOp& op : context->graphs.at(0).ops) ++ops[op.type];
  EXPECT_EQ(ops["Convert"], 1);
  EXPECT_EQ(ops["Quantize"], 1);
  EXPECT_EQ(ops["Dequantize"], 1);
  // And it runs like the fake-quant program: same codes, so the same output.
  auto options = flatbuffer_to_option(to_compile_specs<CompileSpec>(*spec)[0].value);
  ASSERT_TRUE(options.ok());
  auto ex = HtpExecutor::create(std::make_shared<const Context>(std::move(*context)), "forward", *options, 1);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  std::vector<Tensor> in = testing::sample_inputs(p);
  auto got = (*ex)->execute(in);
  ASSERT_TRUE(got.ok()) << got.status().message();
  testing::expect_tensors_near(*got, testing::run_program(p, in), 1e-6);
}

}  // namespace
}  // namespace kiln::htp
