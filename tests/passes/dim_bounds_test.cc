// Upper bounds of symbolic dims (src/passes/dim_bounds.h): the expressions kiln's shape inference
// derives, evaluated at the bounds of their symbols, and the errors for what it cannot bound.
#include "passes/dim_bounds.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/exported_program.h"
#include "testing/graph_builder.h"

namespace kiln::passes {
namespace {

using Bounds = std::map<std::string, int64_t, std::less<>>;

int64_t eval_ok(std::string_view text, const Bounds& bounds) {
  auto r = eval_dim_bound(text, bounds);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().message();
  return r.ok() ? *r : -1;
}

std::string eval_error(std::string_view text, const Bounds& bounds) {
  auto r = eval_dim_bound(text, bounds);
  EXPECT_FALSE(r.ok()) << text << " evaluated to " << (r.ok() ? *r : 0);
  return r.ok() ? std::string() : r.status().message();
}

TEST(DimBounds, SymbolsSumsProductsAndConstants) {
  Bounds b{{"batch", 8}, {"seq", 128}, {"h", 224}};
  EXPECT_EQ(eval_ok("batch", b), 8);
  EXPECT_EQ(eval_ok("batch*2", b), 16);
  EXPECT_EQ(eval_ok("batch*seq", b), 1024);
  EXPECT_EQ(eval_ok("batch*12", b), 96);
  EXPECT_EQ(eval_ok("batch+seq", b), 136);
  EXPECT_EQ(eval_ok("(batch+seq)*2", b), 272);
  EXPECT_EQ(eval_ok("h-1", b), 223);
  EXPECT_EQ(eval_ok("(h-1)/2+1", b), 112);  // a stride-2 conv's output size
  EXPECT_EQ(eval_ok("(h+2-3)/2+1", b), 112);
  EXPECT_EQ(eval_ok("h/3", b), 74);  // floor division
  EXPECT_EQ(eval_ok("((h-3)/2+1)*batch", b), 888);
}

TEST(DimBounds, AWholeNameBoundWinsOverItsExpression) {
  Bounds b{{"batch", 8}, {"batch*2", 10}};
  EXPECT_EQ(eval_ok("batch*2", b), 10);
  EXPECT_EQ(eval_ok("batch*3", b), 24);
}

TEST(DimBounds, SubexpressionsAreClampedAtZero) {
  Bounds b{{"h", 1}};
  EXPECT_EQ(eval_ok("h-3", b), 0);
  EXPECT_EQ(eval_ok("(h-3)*4", b), 0);
  EXPECT_EQ(eval_ok("(h-3)/2+1", b), 1);
}

// Shape inference prints a product without parentheses around an operand that only subtracts
// (dim_mul wraps '+' operands only): flattening [h-2, 480] gives "h-2*480", meaning (h-2)*480.
// Read with the usual precedence (h - 960) the bound would be smaller than the tensor.
TEST(DimBounds, AProductOfAnOffsetIsBoundedAsShapeInferencePrintsIt) {
  Bounds b{{"h", 10}, {"w", 7}, {"a", 3}};
  EXPECT_EQ(eval_ok("h-2*480", b), 8 * 480);
  EXPECT_EQ(eval_ok("h-2*480/4", b), 8 * 480 / 4);
  // a*(h-2) and (a*h)-2 print alike; the bound must hold for both.
  EXPECT_GE(eval_ok("a*h-2", b), 3 * 8);
  EXPECT_GE(eval_ok("a*h-2", b), 3 * 10 - 2);
  // A sum of such products: '+' stays the loosest.
  EXPECT_EQ(eval_ok("w+h-2*4", b), 7 + 8 * 4);
  EXPECT_EQ(eval_ok("h-2-1", b), 7);
  EXPECT_EQ(eval_ok("(h-2)/2", b), 4);
  // dim_div wraps its operand, so "h-2/2" is no derived form: read left to right it would be
  // smaller than h-(2/2).
  EXPECT_NE(eval_error("h-2/2", b).find("'/' right after '-k'"), std::string::npos);
}

// The printed forms above, produced by shape inference itself rather than written by hand.
TEST(DimBounds, DerivedDimsFromShapeInferenceBoundTheirTensors) {
  ExportedProgram p;
  testing::GraphBuilder g(p);
  Dim h = Dim::symbol("h");
  Node* x = g.input("x", TensorSpec(DType::kF32, {Dim(1), Dim(16), h, Dim(32)}));
  Node* w = g.param("w", {16, 16, 3, 3});
  Node* conv = g.call(OpId::kConvolution, {x, w, nullptr});
  ASSERT_NE(conv, nullptr);
  Node* flat = g.call(OpId::kFlatten, {conv}, {{"start_dim", 1}});
  ASSERT_NE(flat, nullptr);
  ASSERT_EQ(flat->spec().rank(), 1u + 1u);
  const Dim& d = flat->spec().shape[1];
  ASSERT_FALSE(d.is_static());
  for (int64_t hv : {3, 10, 224}) {
    Bounds b{{"h", hv}};
    DimBounds bounds(b);
    auto r = bounds.bound(d);
    ASSERT_TRUE(r.ok()) << d.to_string() << ": " << r.status().message();
    EXPECT_GE(*r, 16 * (hv - 2) * 30) << d.to_string() << " at h=" << hv;
  }
}

// Both spatial dims symbolic: flattening [16, h-2, w-2] prints "h-2*w-2*16", meaning
// (h-2)*(w-2)*16; read left to right it is never below that.
TEST(DimBounds, AFlattenedConvolutionWithTwoSymbolicDimsIsBoundedFromAbove) {
  ExportedProgram p;
  testing::GraphBuilder g(p);
  Node* x =
      g.input("x", TensorSpec(DType::kF32, {Dim(1), Dim(16), Dim::symbol("h"), Dim::symbol("w")}));
  Node* conv = g.call(OpId::kConvolution, {x, g.param("w", {16, 16, 3, 3}), nullptr});
  ASSERT_NE(conv, nullptr);
  Node* flat = g.call(OpId::kFlatten, {conv}, {{"start_dim", 1}});
  ASSERT_NE(flat, nullptr);
  const Dim& d = flat->spec().shape[1];
  for (int64_t h : {2, 3, 4, 7, 32}) {
    for (int64_t w : {2, 3, 5, 64}) {
      Bounds b{{"h", h}, {"w", w}};
      DimBounds bounds(b);
      auto r = bounds.bound(d);
      ASSERT_TRUE(r.ok()) << d.to_string() << ": " << r.status().message();
      EXPECT_GE(*r, 16 * (h - 2) * (w - 2)) << d.to_string() << " at h=" << h << ", w=" << w;
    }
  }
}

TEST(DimBounds, ErrorsNameTheDim) {
  Bounds b{{"batch", 8}, {"neg", -1}};
  EXPECT_EQ(eval_error("seq", b), "symbolic dim 'seq' has no upper bound");
  EXPECT_EQ(eval_error("batch*seq", b),
            "symbolic dim 'batch*seq' has no upper bound for its symbol 'seq'");
  EXPECT_NE(eval_error("batch-batch", b).find("a symbolic subtrahend"), std::string::npos);
  EXPECT_NE(eval_error("12/batch", b).find("a symbolic divisor"), std::string::npos);
  EXPECT_NE(eval_error("batch/0", b).find("a divisor of 0"), std::string::npos);
  EXPECT_NE(eval_error("batch*-2", b).find("a negative factor"), std::string::npos);
  EXPECT_NE(eval_error("batch$", b).find("dim 'batch$'"), std::string::npos);
  EXPECT_NE(eval_error("(batch", b).find("expected ')'"), std::string::npos);
  EXPECT_NE(eval_error("neg*2", b).find("expected >= 0"), std::string::npos);
  EXPECT_NE(eval_error("batch*99999999999*99999999999", b).find("overflows"), std::string::npos);
  std::string deep(100, '(');
  deep += "batch" + std::string(100, ')');
  EXPECT_NE(eval_error(deep, b).find("nested more than"), std::string::npos);
}

TEST(DimBounds, StaticDimsAndTheCache) {
  Bounds b{{"batch", 4}};
  DimBounds bounds(b);
  EXPECT_EQ(*bounds.bound(Dim(7)), 7);
  EXPECT_EQ(*bounds.bound(Dim::symbol("batch*3")), 12);
  EXPECT_EQ(*bounds.bound(Dim::symbol("batch*3")), 12);
  EXPECT_FALSE(bounds.bound(Dim::symbol("nobound")).ok());
  EXPECT_FALSE(bounds.bound(Dim::symbol("nobound")).ok());
}

}  // namespace
}  // namespace kiln::passes
