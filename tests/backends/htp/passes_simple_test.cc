// The HTP capture passes that keep a program runnable: golden before/after .kir and outputs
// unchanged (portable interpreter before and after).
#include <gtest/gtest.h>

#include "passes_test_util.h"

namespace kiln::htp {
namespace {

using testing::check_pass;
using testing::f32;
using testing::GraphBuilder;

TEST(HtpPasses, ConvertBinaryOpsWithScalar) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3}));
  Node* a = b.call(OpId::kAdd, {x, 1.5});
  Node* s = b.call(OpId::kSub, {a, 2.0}, {{"alpha", 0.5}});
  Node* m = b.call(OpId::kMul, {s, 3});
  Node* d = b.call(OpId::kDiv, {m, 4.0});
  b.outputs({b.add(d, x)});  // tensor + tensor: untouched
  check_pass("convert_binary_ops_with_scalar", p, convert_binary_ops_with_scalar);
}

TEST(HtpPasses, RemoveRedundancy) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3}));
  Node* c = b.call(OpId::kCast, {x}, {{"dtype", DType::kF32}});
  Node* r = b.call(OpId::kReshape, {c}, {{"shape", std::vector<int64_t>{2, 3}}});
  Node* p1 = b.call(OpId::kPermute, {r}, {{"dims", std::vector<int64_t>{0, 1}}});
  Node* t = b.call(OpId::kTranspose, {p1}, {{"dim0", 1}, {"dim1", -1}});
  Node* e = b.call(OpId::kExpand, {t}, {{"size", std::vector<int64_t>{2, 3}}});
  Node* sl = b.call(OpId::kSlice, {e}, {{"dim", 1}, {"start", 0}, {"end", 3}});
  Node* keep = b.call(OpId::kTranspose, {sl}, {{"dim0", 0}, {"dim1", 1}});  // a real transpose
  b.outputs({b.relu(keep)});
  check_pass("remove_redundancy", p, remove_redundancy);
}

TEST(HtpPasses, ConvertToLinear) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 4}));
  Node* w = b.input("w", f32({3, 4}));  // a non-constant weight (ONNX Gemm with B from a node)
  Node* bias = b.param("bias", {3});
  Node* wt = b.call(OpId::kPermute, {w}, {{"dims", std::vector<int64_t>{1, 0}}});
  Node* addmm = b.call(OpId::kAddmm, {bias, x, wt});
  Node* wt2 = b.call(OpId::kTranspose, {w}, {{"dim0", 0}, {"dim1", 1}});
  Node* mm = b.call(OpId::kMm, {x, wt2});
  Node* keep = b.call(OpId::kAddmm, {bias, x, b.call(OpId::kPermute, {w}, {{"dims", std::vector<int64_t>{1, 0}}})},
                      {{"beta", 0.5}});  // beta != 1: not a linear
  b.outputs({addmm, mm, keep});
  check_pass("convert_to_linear", p, convert_to_linear, true, 1e-6);
}

TEST(HtpPasses, ConvertBmmToMatmul) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* q = b.input("q", f32({2, 3, 4, 5}));
  Node* k = b.input("k", f32({2, 3, 5, 4}));
  Node* q3 = b.call(OpId::kReshape, {q}, {{"shape", std::vector<int64_t>{6, 4, 5}}});
  Node* k3 = b.call(OpId::kReshape, {k}, {{"shape", std::vector<int64_t>{6, 5, 4}}});
  Node* bmm = b.call(OpId::kBmm, {q3, k3});
  Node* back = b.call(OpId::kReshape, {bmm}, {{"shape", std::vector<int64_t>{2, 3, 4, 4}}});
  Node* a = b.input("a", f32({2, 4, 5}));
  Node* c = b.input("c", f32({2, 5, 3}));
  b.outputs({back, b.call(OpId::kBmm, {a, c})});
  check_pass("convert_bmm_to_matmul", p, convert_bmm_to_matmul, true, 1e-5);
}

TEST(HtpPasses, ConvertInterpolateWithUpsample2D) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 2, 3, 4}));
  Node* n = b.call(OpId::kUpsampleNearest2d, {x}, {{"scales", std::vector<double>{2.0, 2.0}}});
  Node* l = b.call(OpId::kUpsampleBilinear2d, {x}, {{"scales", std::vector<double>{2.0, 0.5}}});
  Node* odd = b.call(OpId::kUpsampleNearest2d, {x}, {{"scales", std::vector<double>{1.5, 1.5}}});  // 4.5: kept
  b.outputs({n, l, odd});
  check_pass("convert_interpolate_with_upsample2d", p, convert_interpolate_with_upsample2d, true, 1e-6);
}

TEST(HtpPasses, I64toI32) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 5}));
  Node* idx = b.input("idx", TensorSpec::of(DType::kI64, {2, 5}));
  Tensor off(DType::kI64, {5});
  for (int64_t i = 0; i < 5; ++i) off.set_scalar_at(i, static_cast<double>(i % 2));
  Node* offset = p.add_constant("offset", "offset", std::move(off));
  Node* sum = b.call(OpId::kAdd, {idx, offset});
  Node* clamp = b.call(OpId::kClamp, {sum}, {{"min", 0.0}, {"max", 4.0}});
  Node* g = b.call(OpId::kGather, {x, clamp}, {{"dim", 1}});
  Node* am = b.call(OpId::kArgmax, {x}, {{"dim", 1}});
  b.outputs({g, am});
  check_pass("i64_to_i32", p, i64_to_i32);
}

TEST(HtpPasses, ExpandBroadcastTensorShape) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 3, 2, 2}));
  Node* y = b.input("y", f32({2}));
  Node* bias = b.param("bias", {3, 1, 1});
  b.outputs({b.mul(b.add(x, y), bias)});
  check_pass("expand_broadcast_tensor_shape", p, expand_broadcast_tensor_shape);
}

TEST(HtpPasses, ConvertLinearToConv2dRank2And3) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x2 = b.input("x2", f32({5, 4}));
  Node* x3 = b.input("x3", f32({2, 5, 4}));
  Node* w = b.param("w", {3, 4});
  Node* bias = b.param("bias", {3});
  b.outputs({b.linear(x2, w, bias), b.linear(x3, w)});
  check_pass("linear_to_conv2d", p, linear_to_conv2d, true, 1e-5);
}

TEST(HtpPasses, SplitSharedDequantize) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3}));
  const Kwargs q{{"scale", 0.02}, {"zero_point", 128}, {"quant_min", 0}, {"quant_max", 255}, {"dtype", DType::kU8}};
  Node* codes = b.call(OpId::kQuantizePerTensor, {x}, q);
  Node* dq = b.call(OpId::kDequantizePerTensor, {codes}, q);
  Node* twice = b.add(dq, dq);  // one reader, two uses: keeps the original
  Node* r = b.relu(dq);
  Node* s = b.call(OpId::kSigmoid, {dq});
  b.outputs({twice, r, s, dq});  // the output keeps reading the original too
  check_pass("split_shared_dequantize", p, split_shared_dequantize);
}

TEST(HtpPasses, ConvertPReLU) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 3, 2, 2}));
  Tensor slope(DType::kF32, {3, 1, 1});
  for (int64_t i = 0; i < 3; ++i) slope.set_scalar_at(i, 0.1 * static_cast<double>(i + 1));
  Node* a = p.add_parameter("slope", "slope", std::move(slope));
  Node* gt = b.call(OpId::kGt, {x, 0});
  Node* ax = b.mul(a, x);
  b.outputs({b.call(OpId::kWhere, {gt, x, ax})});
  check_pass("convert_prelu", p, convert_prelu, true, 1e-6);
}

}  // namespace
}  // namespace kiln::htp
