// The decomposition step, RecomposePixelUnshuffle and RecomposeRmsNorm: golden before/after
// .kir and outputs unchanged under the interpreter.
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

TEST(HtpDecompose, DecomposesTheListedOpsAndKeepsTheRest) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3, 4}));
  Node* r6 = b.call(OpId::kRelu6, {x}, {}, "r6");
  Node* t = b.call(OpId::kTranspose, {r6}, {{"dim0", 1}, {"dim1", -1}}, "t");
  Node* v = b.call(OpId::kView, {t}, {{"size", Ints{2, 12}}}, "v");
  Node* s = b.call(OpId::kSilu, {v}, {}, "s");
  Node* rn = b.call(OpId::kRmsNorm, {x, b.param("w", {4}, 0.5f)}, {{"normalized_shape", Ints{4}}, {"eps", 1e-5}}, "rn");
  Node* fl = b.call(OpId::kFlatten, {rn}, {{"start_dim", 1}}, "fl");
  Node* hs = b.call(OpId::kHardswish, {fl}, {}, "hs");  // kept whole
  Node* sm = b.call(OpId::kSoftmax, {hs}, {{"dim", 1}}, "sm");  // kept whole
  // A silu feeding a quantize stays whole: its pieces would have no parameters.
  Node* s2 = b.call(OpId::kSilu, {x}, {}, "s2");
  Node* q = b.call(OpId::kQuantizePerTensor, {s2},
                   {{"scale", 0.05}, {"zero_point", 10}, {"quant_min", 0}, {"quant_max", 255}, {"dtype", DType::kU8}}, "q");
  Node* dq = b.call(OpId::kDequantizePerTensor, {q},
                    {{"scale", 0.05}, {"zero_point", 10}, {"quant_min", 0}, {"quant_max", 255}, {"dtype", DType::kU8}}, "dq");
  b.outputs({s, sm, dq});
  check_pass("decompose_for_htp", p, decompose_for_htp, true, 1e-5);
  for (OpId op : {OpId::kRelu6, OpId::kTranspose, OpId::kView, OpId::kFlatten, OpId::kRmsNorm}) {
    EXPECT_EQ(count_op(p, op), 0u) << op_name(op);
  }
  EXPECT_EQ(count_op(p, OpId::kSilu), 1u);
  EXPECT_TRUE(p.graph().find("s2")->is_call(OpId::kSilu));
  EXPECT_TRUE(p.graph().find("hs")->is_call(OpId::kHardswish));
  EXPECT_TRUE(p.graph().find("sm")->is_call(OpId::kSoftmax));
}

TEST(HtpDecompose, RecomposePixelUnshuffle) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 2, 4, 6}));
  Node* r1 = b.call(OpId::kReshape, {x}, {{"shape", Ints{1, 2, 2, 2, 3, 2}}});
  Node* pm = b.call(OpId::kPermute, {r1}, {{"dims", Ints{0, 1, 3, 5, 2, 4}}});
  Node* r2 = b.call(OpId::kReshape, {pm}, {{"shape", Ints{1, 8, 2, 3}}}, "unshuffled");
  // Another permute order is not a pixel unshuffle.
  Node* pm2 = b.call(OpId::kPermute, {r1}, {{"dims", Ints{0, 1, 2, 4, 3, 5}}});
  Node* keep = b.call(OpId::kReshape, {pm2}, {{"shape", Ints{1, 8, 2, 3}}}, "keep");
  b.outputs({r2, keep});
  check_pass("recompose_pixel_unshuffle", p, recompose_pixel_unshuffle);
  EXPECT_TRUE(p.graph().find("unshuffled")->is_call(OpId::kPixelUnshuffle));
  EXPECT_EQ(p.graph().find("unshuffled")->kwarg_int("downscale_factor"), 2);
  EXPECT_TRUE(p.graph().find("keep")->is_call(OpId::kReshape));
}

TEST(HtpDecompose, RecomposeRmsNorm) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3, 8}));
  Node* sq = b.call(OpId::kPow, {x, 2});
  Node* m = b.call(OpId::kMean, {sq}, {{"dim", Ints{-1}}, {"keepdim", true}});
  Node* a = b.call(OpId::kAdd, {m, 1e-5});
  Node* r = b.call(OpId::kRsqrt, {a});
  Node* n = b.mul(x, r);
  Node* out = b.mul(n, b.param("w", {8}, 0.75f));
  // x * x as the square, no weight, over the last two dims.
  Node* sq2 = b.mul(x, x);
  Node* m2 = b.call(OpId::kMean, {sq2}, {{"dim", Ints{1, 2}}, {"keepdim", true}});
  Node* r2 = b.call(OpId::kRsqrt, {b.call(OpId::kAdd, {m2, 1e-6})});
  b.outputs({out, b.mul(r2, x)});
  check_pass("recompose_rms_norm", p, recompose_rms_norm, true, 1e-5);
  EXPECT_EQ(count_op(p, OpId::kRmsNorm), 2u);
  EXPECT_EQ(count_op(p, OpId::kRsqrt), 0u);
}

// decompose -> ConvertBinaryOpsWithScalar (eps becomes a 0-d constant) -> recompose gives the
// rms_norm back.
TEST(HtpDecompose, RmsNormRoundTrip) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 8}));
  b.outputs({b.call(OpId::kRmsNorm, {x, b.param("w", {8}, 0.5f)}, {{"normalized_shape", Ints{8}}}, "rn")});
  auto inputs = testing::sample_inputs(p);
  auto before = testing::run_program(p, inputs);
  ASSERT_TRUE(decompose_for_htp(p).ok());
  ASSERT_TRUE(convert_binary_ops_with_scalar(p).ok());
  auto changed = recompose_rms_norm(p);
  ASSERT_TRUE(changed.ok() && *changed) << print_kir(p);
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  EXPECT_EQ(count_op(p, OpId::kRmsNorm), 1u) << print_kir(p);
  EXPECT_EQ(p.graph().size(), 4u) << print_kir(p);  // x, w, rms_norm, output
  testing::expect_tensors_near(before, testing::run_program(p, inputs), 1e-6);
}

}  // namespace
}  // namespace kiln::htp
