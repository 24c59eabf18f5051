// AnnotateAndQuantScalar, AnnotateDecomposed and ReplaceIndexPutInput on small quantized
// programs written as .kir: golden before/after and the exact parameters they set.
#include <gtest/gtest.h>

#include "passes_test_util.h"

namespace kiln::htp {
namespace {

using testing::check_pass;

ExportedProgram parse(const char* text) {
  auto p = parse_kir(text, "test");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(*p);
}

// x (u8) + 1.5 -> i8; -0.5 * that -> u8; a float sub(x, 2) that stays float.
constexpr const char* kScalarProgram = R"KIR(program:
  inputs:
    %x : user_input
    %c0 : constant_tensor(target=c0)
    %c1 : constant_tensor(target=c1)
    %c2 : constant_tensor(target=c2)
  outputs:
    %mul_dq : user_output
    %f : user_output
  constants:
    c0 : f32[] = [1.5]
    c1 : f32[] = [-0.5]
    c2 : f32[] = [2]
graph():
    %x : f32[4] = placeholder[target=x]
    %c0 : f32[] = placeholder[target=c0]
    %c1 : f32[] = placeholder[target=c1]
    %c2 : f32[] = placeholder[target=c2]
    %x_q : u8[4] = call_function[target=quantize_per_tensor](args = (%x,), kwargs = {scale: 0.1, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})
    %x_dq : f32[4] = call_function[target=dequantize_per_tensor](args = (%x_q,), kwargs = {scale: 0.1, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})
    %add : f32[4] = call_function[target=add](args = (%x_dq, %c0), kwargs = {})
    %add_q : i8[4] = call_function[target=quantize_per_tensor](args = (%add,), kwargs = {scale: 0.05, zero_point: -128, quant_min: -128, quant_max: 127, dtype: i8})
    %add_dq : f32[4] = call_function[target=dequantize_per_tensor](args = (%add_q,), kwargs = {scale: 0.05, zero_point: -128, quant_min: -128, quant_max: 127, dtype: i8})
    %mul : f32[4] = call_function[target=mul](args = (%c1, %add_dq), kwargs = {})
    %mul_q : u8[4] = call_function[target=quantize_per_tensor](args = (%mul,), kwargs = {scale: 0.02, zero_point: 255, quant_min: 0, quant_max: 255, dtype: u8})
    %mul_dq : f32[4] = call_function[target=dequantize_per_tensor](args = (%mul_q,), kwargs = {scale: 0.02, zero_point: 255, quant_min: 0, quant_max: 255, dtype: u8})
    %f : f32[4] = call_function[target=sub](args = (%x, %c2), kwargs = {})
    return (mul_dq, f)
)KIR";

// The value a quantized constant dequantizes to.
double dequantized(const ExportedProgram& p, const Node* c) {
  const Tensor* t = p.constants().find(p.input_spec(c)->target);
  const QuantAttrs& q = *c->meta.quant;
  return (t->scalar_at(0) - static_cast<double>(q.zero_points[0])) * q.scales[0];
}

TEST(HtpAnnotatePasses, AnnotateAndQuantScalarStoresTheScalarQuantized) {
  ExportedProgram p = parse(kScalarProgram);
  ASSERT_TRUE(annotate_quant_attrs(p, false).ok());
  check_pass("annotate_and_quant_scalar", p, annotate_and_quant_scalar, /*numerics=*/false);
  const Graph& g = p.graph();
  // 1.5 read by a u8 operand: the top of [0, 255], scale 1.5 / 255, zero point 0.
  Node* c0 = g.find("c0");
  ASSERT_TRUE(c0->meta.quant.has_value());
  EXPECT_EQ(c0->spec().dtype, DType::kU8);
  EXPECT_EQ(c0->meta.quant->zero_points, std::vector<int64_t>{0});
  EXPECT_EQ(p.constants().find("c0")->scalar_at(0), 255.0);
  EXPECT_NEAR(dequantized(p, c0), 1.5, 1e-12);
  // -0.5 read by an i8 operand: the bottom of [-128, 127], zero point qmax.
  Node* c1 = g.find("c1");
  ASSERT_TRUE(c1->meta.quant.has_value());
  EXPECT_EQ(c1->spec().dtype, DType::kI8);
  EXPECT_EQ(c1->meta.quant->zero_points, std::vector<int64_t>{127});
  EXPECT_EQ(p.constants().find("c1")->scalar_at(0), -128.0);
  EXPECT_NEAR(dequantized(p, c1), -0.5, 1e-12);
  // A float op's scalar stays float.
  EXPECT_FALSE(g.find("c2")->meta.quant.has_value());
  EXPECT_EQ(g.find("c2")->spec().dtype, DType::kF32);
}

TEST(HtpAnnotatePasses, AnnotateAndQuantScalarZero) {
  ExportedProgram p = parse(
      "program:\n  inputs:\n    %x : user_input\n    %c : constant_tensor(target=c)\n"
      "  outputs:\n    %a_dq : user_output\n  constants:\n    c : f32[] = [0]\n"
      "graph():\n"
      "    %x : f32[2] = placeholder[target=x]\n"
      "    %c : f32[] = placeholder[target=c]\n"
      "    %x_q : u8[2] = call_function[target=quantize_per_tensor](args = (%x,), kwargs = {scale: 0.1, zero_point: 3, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    %x_dq : f32[2] = call_function[target=dequantize_per_tensor](args = (%x_q,), kwargs = {scale: 0.1, zero_point: 3, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    %a : f32[2] = call_function[target=add](args = (%x_dq, %c), kwargs = {})\n"
      "    %a_q : u8[2] = call_function[target=quantize_per_tensor](args = (%a,), kwargs = {scale: 0.1, zero_point: 3, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    %a_dq : f32[2] = call_function[target=dequantize_per_tensor](args = (%a_q,), kwargs = {scale: 0.1, zero_point: 3, quant_min: 0, quant_max: 255, dtype: u8})\n"
      "    return (a_dq,)\n");
  ASSERT_TRUE(annotate_quant_attrs(p, false).ok());
  auto changed = annotate_and_quant_scalar(p);
  ASSERT_TRUE(changed.ok() && *changed);
  Node* c = p.graph().find("c");
  EXPECT_EQ(dequantized(p, c), 0.0);
  EXPECT_GT(c->meta.quant->scales[0], 0.0);
}

// split of a dequantized value: getitem 0 feeds a quantized relu, getitem 1 has its own quantize.
constexpr const char* kSplitProgram = R"KIR(graph():
    %x : f32[1, 4] = placeholder[target=x]
    %x_q : u8[1, 4] = call_function[target=quantize_per_tensor](args = (%x,), kwargs = {scale: 0.1, zero_point: 128, quant_min: 0, quant_max: 255, dtype: u8})
    %x_dq : f32[1, 4] = call_function[target=dequantize_per_tensor](args = (%x_q,), kwargs = {scale: 0.1, zero_point: 128, quant_min: 0, quant_max: 255, dtype: u8})
    %split : (f32[1, 2], f32[1, 2]) = call_function[target=split](args = (%x_dq,), kwargs = {split_sizes: [2, 2], dim: 1})
    %a : f32[1, 2] = call_function[target=getitem](args = (%split, 0), kwargs = {})
    %b : f32[1, 2] = call_function[target=getitem](args = (%split, 1), kwargs = {})
    %r : f32[1, 2] = call_function[target=relu](args = (%a,), kwargs = {})
    %r_q : u8[1, 2] = call_function[target=quantize_per_tensor](args = (%r,), kwargs = {scale: 0.05, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})
    %r_dq : f32[1, 2] = call_function[target=dequantize_per_tensor](args = (%r_q,), kwargs = {scale: 0.05, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})
    %b_q : u8[1, 2] = call_function[target=quantize_per_tensor](args = (%b,), kwargs = {scale: 0.1, zero_point: 128, quant_min: 0, quant_max: 255, dtype: u8})
    %b_dq : f32[1, 2] = call_function[target=dequantize_per_tensor](args = (%b_q,), kwargs = {scale: 0.1, zero_point: 128, quant_min: 0, quant_max: 255, dtype: u8})
    return (r_dq, b_dq)
)KIR";

TEST(HtpAnnotatePasses, AnnotateDecomposedGivesSplitOutputsTheInputParameters) {
  ExportedProgram p = parse(kSplitProgram);
  ASSERT_TRUE(annotate_quant_attrs(p, false).ok());
  const Graph& g = p.graph();
  ASSERT_TRUE(g.find("b")->meta.quant.has_value());
  QuantAttrs own = *g.find("b")->meta.quant;
  // Only meta changes: the program still runs, outputs unchanged.
  check_pass("annotate_decomposed", p, annotate_decomposed, /*numerics=*/true);
  ASSERT_TRUE(g.find("split")->meta.quant.has_value());
  EXPECT_EQ(g.find("split")->meta.quant->scales, std::vector<double>{0.1});
  EXPECT_EQ(g.find("split")->meta.quant->zero_points, std::vector<int64_t>{128});
  EXPECT_EQ(*g.find("a")->meta.quant, *g.find("split")->meta.quant);
  EXPECT_EQ(*g.find("b")->meta.quant, own);  // its own stays
  // FoldQDQ then leaves the split reading the input's quantize.
  ASSERT_TRUE(fold_qdq(p).ok());
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  EXPECT_EQ(g.find("split")->arg(0).node()->name(), "x_q");
}

// A KV-cache-like buffer updated by index_put, all quantized with one encoding.
constexpr const char* kIndexPutProgram = R"KIR(program:
  inputs:
    %v : user_input
    %idx : user_input
    %cache : buffer(target=cache, persistent=True)
  outputs:
    %ip_dq : buffer_mutation(target=cache)
    %s_dq : user_output
  constants:
    cache : f32[4, 3] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
graph():
    %v : f32[1, 3] = placeholder[target=v]
    %idx : i64[1] = placeholder[target=idx]
    %cache : f32[4, 3] = placeholder[target=cache]
    %v_q : u8[1, 3] = call_function[target=quantize_per_tensor](args = (%v,), kwargs = {scale: 0.02, zero_point: 128, quant_min: 0, quant_max: 255, dtype: u8})
    %v_dq : f32[1, 3] = call_function[target=dequantize_per_tensor](args = (%v_q,), kwargs = {scale: 0.02, zero_point: 128, quant_min: 0, quant_max: 255, dtype: u8})
    %cache_q : u8[4, 3] = call_function[target=quantize_per_tensor](args = (%cache,), kwargs = {scale: 0.02, zero_point: 128, quant_min: 0, quant_max: 255, dtype: u8})
    %cache_dq : f32[4, 3] = call_function[target=dequantize_per_tensor](args = (%cache_q,), kwargs = {scale: 0.02, zero_point: 128, quant_min: 0, quant_max: 255, dtype: u8})
    %ip : f32[4, 3] = call_function[target=index_put](args = (%cache_dq, [%idx], %v_dq), kwargs = {})
    %ip_q : u8[4, 3] = call_function[target=quantize_per_tensor](args = (%ip,), kwargs = {scale: 0.02, zero_point: 128, quant_min: 0, quant_max: 255, dtype: u8})
    %ip_dq : f32[4, 3] = call_function[target=dequantize_per_tensor](args = (%ip_q,), kwargs = {scale: 0.02, zero_point: 128, quant_min: 0, quant_max: 255, dtype: u8})
    %s : f32[4, 3] = call_function[target=sigmoid](args = (%ip_dq,), kwargs = {})
    %s_q : u8[4, 3] = call_function[target=quantize_per_tensor](args = (%s,), kwargs = {scale: 0.00390625, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})
    %s_dq : f32[4, 3] = call_function[target=dequantize_per_tensor](args = (%s_q,), kwargs = {scale: 0.00390625, zero_point: 0, quant_min: 0, quant_max: 255, dtype: u8})
    return (ip_dq, s_dq)
)KIR";

TEST(HtpAnnotatePasses, ReplaceIndexPutInputReadsTheBufferStoredQuantized) {
  ExportedProgram p = parse(kIndexPutProgram);
  ASSERT_TRUE(annotate_quant_attrs(p, false).ok());
  ASSERT_TRUE(fold_qdq(p).ok());
  // The buffer's quantize stays after FoldQDQ (a placeholder is not annotated) ...
  ASSERT_TRUE(p.graph().find("cache_q") != nullptr);
  check_pass("replace_index_put_input", p, replace_index_put_input, /*numerics=*/false);
  const Graph& g = p.graph();
  // ... and is gone after: index_put reads the buffer, which carries the encoding.
  EXPECT_EQ(g.find("cache_q"), nullptr);
  Node* cache = g.find("cache");
  EXPECT_EQ(g.find("ip")->arg(0).node(), cache);
  ASSERT_TRUE(cache->meta.quant.has_value());
  EXPECT_EQ(*cache->meta.quant, *g.find("ip")->meta.quant);
  // The update writes the stored value, in the buffer's encoding.
  EXPECT_EQ(p.user_outputs().size(), 1u);
  EXPECT_EQ(g.output_node()->arg(0).nodes()[0]->name(), "ip");
  EXPECT_EQ(p.mutated_buffers(), std::vector<std::string>{"cache"});
}

TEST(HtpAnnotatePasses, ReplaceIndexPutInputLeavesAFloatBufferAlone) {
  ExportedProgram p = parse(
      "program:\n  inputs:\n    %v : user_input\n    %idx : user_input\n"
      "    %cache : buffer(target=cache, persistent=True)\n"
      "  outputs:\n    %ip : buffer_mutation(target=cache)\n"
      "  constants:\n    cache : f32[2, 3] = [0, 0, 0, 0, 0, 0]\n"
      "graph():\n"
      "    %v : f32[1, 3] = placeholder[target=v]\n"
      "    %idx : i64[1] = placeholder[target=idx]\n"
      "    %cache : f32[2, 3] = placeholder[target=cache]\n"
      "    %ip : f32[2, 3] = call_function[target=index_put](args = (%cache, [%idx], %v), kwargs = {})\n"
      "    return (ip,)\n");
  auto changed = replace_index_put_input(p);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
}

}  // namespace
}  // namespace kiln::htp
