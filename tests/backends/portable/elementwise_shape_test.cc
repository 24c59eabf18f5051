// Elementwise, reduction, shape, indexing, creation and quantization kernels on hand-checked
// values, plus coverage of the kernel table against ops.inc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernel_test_util.h"
#include "kiln/ir/op_registry.h"

namespace kiln::portable::testing {
namespace {

TEST(PortableTable, EveryRegisteredOpHasAKernel) {
  for (const OpDef& def : all_ops()) {
    // Structural ops (the interpreter and the runtime run cond and loop themselves), and
    // context_loader, which only the HTP delegate runs.
    if (def.id == OpId::kCallDelegate || def.id == OpId::kGetitem || def.id == OpId::kCond ||
        def.id == OpId::kLoop || def.id == OpId::kContextLoader) {
      continue;
    }
    EXPECT_NE(find_kernel(def.schema.name), nullptr) << "no kernel for " << def.schema.name;
  }
  for (const KernelEntry& e : kernel_table()) {
    EXPECT_TRUE(op_from_name(e.op_name).has_value()) << "kernel for unknown op " << e.op_name;
  }
}

TEST(PortableElementwise, ArithmeticBroadcastAndPromotion) {
  Tensor a = make(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = make(DType::kF32, {3}, {10, 20, 30});
  EXPECT_EQ(values(Call("add").in(a).in(b).attr("alpha", 2.0).run()), (std::vector<double>{21, 42, 63, 24, 45, 66}));
  EXPECT_EQ(values(Call("sub").in(a).number(1, true).run()), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  Tensor col = make(DType::kF32, {2, 1}, {2, 3});
  EXPECT_EQ(values(Call("mul").in(a).in(col).run()), (std::vector<double>{2, 4, 6, 12, 15, 18}));
  Tensor i = make(DType::kI32, {4}, {7, -7, 8, -9});
  Tensor two = make(DType::kI32, {1}, {2});
  Tensor q = Call("div").in(i).in(two).run();
  EXPECT_EQ(q.dtype(), DType::kF32);  // true division of ints
  EXPECT_EQ(values(q), (std::vector<double>{3.5, -3.5, 4, -4.5}));
  EXPECT_EQ(values(Call("div").in(i).in(two).attr("rounding_mode", std::string("trunc")).run()), (std::vector<double>{3, -3, 4, -4}));
  Tensor fl = Call("div").in(i).in(two).attr("rounding_mode", std::string("floor")).run();
  EXPECT_EQ(fl.dtype(), DType::kI32);
  EXPECT_EQ(values(fl), (std::vector<double>{3, -4, 4, -5}));
  Tensor zero = make(DType::kI32, {1}, {0});
  EXPECT_FALSE(Call("div").in(i).in(zero).attr("rounding_mode", std::string("trunc")).try_run().ok());
  // int tensor + float number -> f32; i64 + i32 -> i64.
  EXPECT_EQ(Call("add").in(i).number(0.5).run().dtype(), DType::kF32);
  EXPECT_EQ(Call("add").in(i).in(make(DType::kI64, {4}, {1, 1, 1, 1})).run().dtype(), DType::kI64);
  EXPECT_EQ(values(Call("pow").in(i).number(2, true).run()), (std::vector<double>{49, 49, 64, 81}));
  EXPECT_EQ(values(Call("pow").in(a).number(0.5).run())[3], 2.0);
  // f16 computes through f32 and stays f16.
  Tensor h = make(DType::kF16, {2}, {1.5, -2});
  Tensor hs = Call("add").in(h).in(h).run();
  EXPECT_EQ(hs.dtype(), DType::kF16);
  EXPECT_EQ(values(hs), (std::vector<double>{3, -4}));
}

TEST(PortableElementwise, UnaryActivations) {
  Tensor x = make(DType::kF32, {6}, {-4, -1, -0.5, 0, 1, 7});
  auto close = [](const Tensor& t, const std::vector<double>& e) {
    ASSERT_EQ(static_cast<size_t>(t.numel()), e.size());
    for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(t.scalar_at(static_cast<int64_t>(i)), e[i], 1e-6) << i;
  };
  close(Call("relu").in(x).run(), {0, 0, 0, 0, 1, 7});
  close(Call("relu6").in(x).run(), {0, 0, 0, 0, 1, 6});
  close(Call("hardswish").in(x).run(), {0, -1.0 / 3, -0.5 * 2.5 / 6, 0, 4.0 / 6, 7});
  close(Call("hardsigmoid").in(x).run(), {0, 1.0 / 3, 0.5 - 0.5 / 6, 0.5, 0.5 + 1.0 / 6, 1});
  close(Call("leaky_relu").in(x).attr("negative_slope", 0.1).run(), {-0.4, -0.1, -0.05, 0, 1, 7});
  close(Call("clamp").in(x).attr("min", -1.0).attr("max", 2.0).run(), {-1, -1, -0.5, 0, 1, 2});
  close(Call("sigmoid").in(x).run(), {1 / (1 + std::exp(4.0)), 1 / (1 + std::exp(1.0)), 1 / (1 + std::exp(0.5)), 0.5, 1 / (1 + std::exp(-1.0)), 1 / (1 + std::exp(-7.0))});
  close(Call("gelu").in(x).run(), {-4 * 0.5 * (1 + std::erf(-4 / std::sqrt(2.0))), -0.5 * (1 + std::erf(-1 / std::sqrt(2.0))), -0.5 * 0.5 * (1 + std::erf(-0.5 / std::sqrt(2.0))), 0, 0.8413447460685429, 7});
  close(Call("gelu").in(x).attr("approximate", std::string("tanh")).run(), {-4 * 0.5 * (1 + std::tanh(0.7978845608028654 * (-4 - 0.044715 * 64))), -0.5 * (1 + std::tanh(0.7978845608028654 * (-1 - 0.044715))), -0.5 * 0.5 * (1 + std::tanh(0.7978845608028654 * (-0.5 - 0.044715 * 0.125))), 0, 0.5 * (1 + std::tanh(0.7978845608028654 * (1 + 0.044715))), 7});
  close(Call("neg").in(x).run(), {4, 1, 0.5, 0, -1, -7});
  close(Call("abs").in(x).run(), {4, 1, 0.5, 0, 1, 7});
  Tensor p = make(DType::kF32, {2}, {1, 4});
  close(Call("rsqrt").in(p).run(), {1, 0.5});
  close(Call("log").in(p).run(), {0, std::log(4.0)});
  Tensor ix = make(DType::kI64, {3}, {-5, 2, 9});
  Tensor c = Call("clamp").in(ix).attr("min", 0.0).attr("max", 5.0).run();
  EXPECT_EQ(c.dtype(), DType::kI64);
  EXPECT_EQ(values(c), (std::vector<double>{0, 2, 5}));
  Tensor img = make(DType::kF32, {1, 2, 2}, {-1, 2, -3, 4});
  Tensor slope = make(DType::kF32, {2}, {0.5, 0.25});
  close(Call("prelu").in(img).in(slope).run(), {-0.5, 2, -0.75, 4});
}

TEST(PortableElementwise, CompareWhereLogic) {
  Tensor a = make(DType::kI64, {4}, {1, 2, 3, 4});
  EXPECT_EQ(values(Call("gt").in(a).number(2, true).run()), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(values(Call("le").in(a).number(2.5).run()), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(Call("eq").in(a).in(a).run().dtype(), DType::kBool);
  Tensor cond = make(DType::kBool, {2, 1}, {1, 0});
  Tensor w = Call("where").in(cond).in(make(DType::kF32, {2}, {1, 2})).number(-1).run();
  EXPECT_EQ(w.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values(w), (std::vector<double>{1, 2, -1, -1}));
  Tensor wi = Call("where").in(cond).in(make(DType::kI32, {1}, {5})).in(make(DType::kI32, {1}, {7})).run();
  EXPECT_EQ(wi.dtype(), DType::kI32);
  EXPECT_EQ(values(wi), (std::vector<double>{5, 7}));
  Tensor b1 = make(DType::kBool, {3}, {1, 0, 1}), b2 = make(DType::kBool, {3}, {1, 1, 0});
  EXPECT_EQ(values(Call("logical_and").in(b1).in(b2).run()), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(values(Call("logical_or").in(b1).in(b2).run()), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(values(Call("logical_not").in(b1).run()), (std::vector<double>{0, 1, 0}));
}

TEST(PortableReduce, SumMeanMaxArgmaxCumsum) {
  Tensor x = make(DType::kF32, {2, 3}, {1, 5, 3, 4, 2, 6});
  EXPECT_EQ(values(Call("sum").in(x).attr("dim", std::vector<int64_t>{1}).run()), (std::vector<double>{9, 12}));
  Tensor m = Call("mean").in(x).attr("dim", std::vector<int64_t>{0}).attr("keepdim", true).run();
  EXPECT_EQ(m.shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(values(m), (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(values(Call("mean").in(x).run()), (std::vector<double>{3.5}));
  EXPECT_EQ(values(Call("amax").in(x).attr("dim", std::vector<int64_t>{-1}).run()), (std::vector<double>{5, 6}));
  EXPECT_EQ(values(Call("amin").in(x).attr("dim", std::vector<int64_t>{0, 1}).run()), (std::vector<double>{1}));
  Tensor am = Call("argmax").in(x).attr("dim", int64_t{1}).run();
  EXPECT_EQ(am.dtype(), DType::kI64);
  EXPECT_EQ(values(am), (std::vector<double>{1, 2}));
  EXPECT_EQ(values(Call("argmax").in(x).run()), (std::vector<double>{5}));
  Tensor xi = make(DType::kI32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor si = Call("sum").in(xi).run();
  EXPECT_EQ(si.dtype(), DType::kI64);
  EXPECT_EQ(values(si), (std::vector<double>{21}));
  Tensor pi = Call("prod").in(xi).attr("dim", std::vector<int64_t>{0}).run();
  EXPECT_EQ(pi.dtype(), DType::kI64);
  EXPECT_EQ(values(pi), (std::vector<double>{4, 10, 18}));
  EXPECT_EQ(values(Call("prod").in(x).run()), (std::vector<double>{720}));
  EXPECT_EQ(values(Call("cumsum").in(xi).attr("dim", int64_t{1}).run()), (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(values(Call("cumsum").in(x).attr("dim", int64_t{0}).run()), (std::vector<double>{1, 5, 3, 5, 7, 9}));
  // ONNX's exclusive and reverse forms along dim 1 of [[1, 2, 3], [4, 5, 6]].
  auto cumsum = [&](bool exclusive, bool reverse) {
    return values(Call("cumsum")
                      .in(xi)
                      .attr("dim", int64_t{1})
                      .attr("exclusive", exclusive)
                      .attr("reverse", reverse)
                      .run());
  };
  EXPECT_EQ(cumsum(true, false), (std::vector<double>{0, 1, 3, 0, 4, 9}));
  EXPECT_EQ(cumsum(false, true), (std::vector<double>{6, 5, 3, 15, 11, 6}));
  EXPECT_EQ(cumsum(true, true), (std::vector<double>{5, 3, 0, 11, 6, 0}));
}

TEST(PortableElementwise, MaximumMinimumPropagateNaNAndBroadcast) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = make(DType::kF32, {2, 2}, {1, 5, nan, -2});
  Tensor b = make(DType::kF32, {2}, {3, 4});
  std::vector<double> mx = values(Call("maximum").in(a).in(b).run());
  EXPECT_EQ(mx[0], 3);
  EXPECT_EQ(mx[1], 5);
  EXPECT_TRUE(std::isnan(mx[2]));
  EXPECT_EQ(mx[3], 4);
  std::vector<double> mn = values(Call("minimum").in(a).in(b).run());
  EXPECT_EQ(mn[0], 1);
  EXPECT_TRUE(std::isnan(mn[2]));
  Tensor i = make(DType::kI64, {3}, {-7, 0, 9});
  Tensor mi = Call("maximum").in(i).number(1, true).run();
  EXPECT_EQ(mi.dtype(), DType::kI64);
  EXPECT_EQ(values(mi), (std::vector<double>{1, 1, 9}));
}

TEST(PortableElementwise, RemainderHasTheDivisorsSignFmodTheDividends) {
  Tensor x = make(DType::kI32, {4}, {7, -7, 7, -7});
  Tensor y = make(DType::kI32, {4}, {3, 3, -3, -3});
  EXPECT_EQ(values(Call("remainder").in(x).in(y).run()), (std::vector<double>{1, 2, -2, -1}));
  EXPECT_EQ(values(Call("fmod").in(x).in(y).run()), (std::vector<double>{1, -1, 1, -1}));
  Tensor xf = make(DType::kF64, {2}, {-5.5, 5.5});
  Tensor r = Call("remainder").in(xf).number(2).run();
  EXPECT_EQ(r.dtype(), DType::kF64);
  EXPECT_EQ(values(r), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(values(Call("fmod").in(xf).number(2).run()), (std::vector<double>{-1.5, 1.5}));
  auto by_zero = Call("remainder").in(x).in(make(DType::kI32, {1}, {0})).try_run();
  ASSERT_FALSE(by_zero.ok());
  EXPECT_EQ(by_zero.status().message(), "remainder: integer division by zero");
}

TEST(PortableElementwise, DoublesAreComputedAsDoubles) {
  // 1e200 overflows f32: an f64 add computed in f32 would give inf.
  Tensor a = make(DType::kF64, {2}, {1e200, 1.0 + 1e-12});
  Tensor s = Call("add").in(a).in(make(DType::kF64, {2}, {1e200, 0})).run();
  EXPECT_EQ(s.dtype(), DType::kF64);
  EXPECT_EQ(values(s), (std::vector<double>{2e200, 1.0 + 1e-12}));
  EXPECT_EQ(values(Call("mul").in(a).number(2).run())[1], 2.0 + 2e-12);
}

TEST(PortableElementwise, TrigRoundingAndSign) {
  Tensor x = make(DType::kF32, {4}, {-1.5, -0.5, 0.5, 2.5});
  EXPECT_EQ(values(Call("round").in(x).run()), (std::vector<double>{-2, -0, 0, 2}));  // half to even
  EXPECT_EQ(values(Call("floor").in(x).run()), (std::vector<double>{-2, -1, 0, 2}));
  EXPECT_EQ(values(Call("ceil").in(x).run()), (std::vector<double>{-1, -0, 1, 3}));
  EXPECT_EQ(values(Call("sign").in(x).run()), (std::vector<double>{-1, -1, 1, 1}));
  Tensor i = make(DType::kI32, {3}, {-4, 0, 4});
  EXPECT_EQ(values(Call("sign").in(i).run()), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(Call("floor").in(i).run().dtype(), DType::kI32);
  Tensor t = make(DType::kF32, {2}, {0.5, -0.25});
  std::vector<double> got = values(Call("atanh").in(t).run());
  EXPECT_NEAR(got[0], std::atanh(0.5), 1e-6);
  EXPECT_NEAR(got[1], std::atanh(-0.25), 1e-6);
  EXPECT_NEAR(values(Call("cos").in(t).run())[0], std::cos(0.5), 1e-6);
}

TEST(PortableReduce, ArgminTakesTheFirstSmallest) {
  Tensor x = make(DType::kF32, {2, 3}, {3, 1, 1, 0, 5, 0});
  Tensor am = Call("argmin").in(x).attr("dim", int64_t{1}).run();
  EXPECT_EQ(am.dtype(), DType::kI64);
  EXPECT_EQ(values(am), (std::vector<double>{1, 0}));
  EXPECT_EQ(values(Call("argmin").in(x).run()), (std::vector<double>{3}));
  Tensor k = Call("argmin").in(x).attr("dim", int64_t{0}).attr("keepdim", true).run();
  EXPECT_EQ(k.shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(values(k), (std::vector<double>{1, 0, 1}));
  // select_last (ONNX select_last_index): ties give the last index.
  EXPECT_EQ(values(Call("argmin").in(x).attr("dim", int64_t{1}).attr("select_last", true).run()),
            (std::vector<double>{2, 2}));
  Tensor m = make(DType::kI32, {5}, {4, 9, 1, 9, 9});
  EXPECT_EQ(values(Call("argmax").in(m).attr("select_last", true).run()), (std::vector<double>{4}));
  EXPECT_EQ(values(Call("argmax").in(m).run()), (std::vector<double>{1}));
}

TEST(PortableShape, ViewsShareStorage) {
  Tensor x = make(DType::kF32, {2, 3, 4}, std::vector<double>(24, 1.0));
  Tensor r = Call("reshape").in(x).attr("shape", std::vector<int64_t>{-1, 4}).run();
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{6, 4}));
  EXPECT_TRUE(r.shares_storage_with(x));
  EXPECT_TRUE(Call("flatten").in(x).attr("start_dim", int64_t{1}).run().shares_storage_with(x));
  Tensor u = Call("unflatten")
                 .in(x)
                 .attr("dim", int64_t{2})
                 .attr("sizes", std::vector<int64_t>{2, -1})
                 .run();
  EXPECT_EQ(u.shape(), (std::vector<int64_t>{2, 3, 2, 2}));
  EXPECT_TRUE(u.shares_storage_with(x));
  EXPECT_TRUE(Call("unsqueeze").in(x).attr("dim", int64_t{-1}).run().shares_storage_with(x));
  Tensor s0 = Call("slice").in(x).attr("dim", int64_t{0}).attr("start", int64_t{1}).run();
  EXPECT_TRUE(s0.shares_storage_with(x));
  EXPECT_EQ(s0.storage_offset(), 12 * sizeof(float));
  Tensor sel = Call("select").in(x).attr("dim", int64_t{0}).attr("index", int64_t{-1}).run();
  EXPECT_EQ(sel.shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(sel.shares_storage_with(x));
  EXPECT_FALSE(Call("reshape").in(x).attr("shape", std::vector<int64_t>{5, -1}).try_run().ok());
}

TEST(PortableShape, PermuteCatSplitSliceExpandPad) {
  Tensor x = make(DType::kI64, {2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(values(Call("transpose").in(x).attr("dim0", int64_t{0}).attr("dim1", int64_t{1}).run()), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  Tensor p3 = make(DType::kF32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(values(Call("permute").in(p3).attr("dims", std::vector<int64_t>{2, 0, 1}).run()), (std::vector<double>{0, 2, 4, 6, 1, 3, 5, 7}));
  Tensor y = make(DType::kI64, {2, 1}, {9, 8});
  Tensor c = Call("cat").in_list({x, y}).attr("dim", int64_t{1}).run();
  EXPECT_EQ(c.shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(values(c), (std::vector<double>{0, 1, 2, 9, 3, 4, 5, 8}));
  auto parts = Call("split").in(c).attr("split_sizes", std::vector<int64_t>{1, 3}).attr("dim", int64_t{1}).try_run();
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ(values((*parts)[0]), (std::vector<double>{0, 3}));
  EXPECT_EQ(values((*parts)[1]), (std::vector<double>{1, 2, 9, 4, 5, 8}));
  Tensor s = Call("slice").in(c).attr("dim", int64_t{1}).attr("start", int64_t{-3}).attr("end", int64_t{100}).attr("step", int64_t{2}).run();
  EXPECT_EQ(values(s), (std::vector<double>{1, 9, 4, 8}));
  Tensor e = Call("expand").in(y).attr("size", std::vector<int64_t>{2, 2, -1, 3}).run();
  EXPECT_EQ(e.shape(), (std::vector<int64_t>{2, 2, 2, 3}));
  EXPECT_EQ(e.scalar_at(3), 8);
  EXPECT_EQ(values(Call("squeeze").in(y).run()), (std::vector<double>{9, 8}));
  Tensor row = make(DType::kF32, {1, 3}, {1, 2, 3});
  EXPECT_EQ(values(Call("pad").in(row).attr("pad", std::vector<int64_t>{2, 1}).attr("value", 7.0).run()), (std::vector<double>{7, 7, 1, 2, 3, 7}));
  EXPECT_EQ(values(Call("pad").in(row).attr("pad", std::vector<int64_t>{2, 2}).attr("mode", std::string("reflect")).run()), (std::vector<double>{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(values(Call("pad").in(row).attr("pad", std::vector<int64_t>{1, 1, 1, 0}).attr("mode", std::string("replicate")).run()), (std::vector<double>{1, 1, 2, 3, 3, 1, 1, 2, 3, 3}));
  EXPECT_EQ(values(Call("pad").in(row).attr("pad", std::vector<int64_t>{-1, 0}).run()), (std::vector<double>{2, 3}));
}

TEST(PortableReduce, TopkOrdersTiesByIndexAndNanFirst) {
  Tensor x = make(DType::kF32, {2, 4}, {1, 3, 3, 2, 5, NAN, -1, 5});
  auto out = Call("topk").in(x).attr("k", int64_t{3}).try_run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ(values((*out)[1]), (std::vector<double>{1, 2, 3, 1, 0, 3}));
  EXPECT_EQ((*out)[0].scalar_at(0), 3);
  EXPECT_TRUE(std::isnan((*out)[0].scalar_at(3)));
  auto small = Call("topk").in(x).attr("k", int64_t{2}).attr("dim", int64_t{0}).attr("largest", false).try_run();
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ(values((*small)[1]), (std::vector<double>{0, 0, 1, 0, 1, 1, 0, 1}));
}

TEST(PortableIndex, ScatterScatterNdGatherNd) {
  Tensor x = make(DType::kF32, {2, 3}, {0, 1, 2, 3, 4, 5});
  // Duplicate targets apply in order: the later update wins, or both add.
  Tensor index = make(DType::kI64, {2, 2}, {1, -1, 1, 0});
  Tensor src = make(DType::kF32, {2, 2}, {10, 20, 30, 40});
  EXPECT_EQ(values(Call("scatter").in(x).in(index).in(src).attr("dim", int64_t{1}).run()),
            (std::vector<double>{0, 10, 20, 40, 30, 5}));
  EXPECT_EQ(values(Call("scatter")
                       .in(x)
                       .in(make(DType::kI64, {1, 2}, {1, 1}))
                       .in(src)
                       .attr("dim", int64_t{1})
                       .attr("reduce", std::string("add"))
                       .run()),
            (std::vector<double>{0, 31, 2, 3, 4, 5}));
  auto far = Call("scatter")
                 .in(x)
                 .in(make(DType::kI64, {1, 1}, {3}))
                 .in(src)
                 .attr("dim", int64_t{1})
                 .try_run();
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find("index 3 is out of range for size 3"), std::string::npos);
  // scatter_nd: rows by index, max-combined; gather_nd reads them back.
  Tensor rows = make(DType::kI64, {2, 1}, {1, 0});
  Tensor upd = make(DType::kF32, {2, 3}, {9, -1, 9, -1, 9, -1});
  EXPECT_EQ(
      values(Call("scatter_nd").in(x).in(rows).in(upd).attr("reduce", std::string("max")).run()),
      (std::vector<double>{0, 9, 2, 9, 4, 9}));
  EXPECT_EQ(values(Call("gather_nd").in(x).in(make(DType::kI64, {2, 2}, {1, 2, 0, -3})).run()),
            (std::vector<double>{5, 0}));
  Tensor batched = Call("gather_nd")
                       .in(x)
                       .in(make(DType::kI64, {2, 1}, {2, 0}))
                       .attr("batch_dims", int64_t{1})
                       .run();
  EXPECT_EQ(batched.shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(values(batched), (std::vector<double>{2, 3}));
}

TEST(PortableIndex, GatherIndexSelectEmbeddingIndexPut) {
  Tensor x = make(DType::kF32, {3, 2}, {0, 1, 2, 3, 4, 5});
  Tensor idx = make(DType::kI64, {2}, {2, -3});
  EXPECT_EQ(values(Call("index_select").in(x).in(idx).attr("dim", int64_t{0}).run()), (std::vector<double>{4, 5, 0, 1}));
  EXPECT_EQ(values(Call("embedding").in(x).in(make(DType::kI32, {1, 2}, {1, 1})).run()), (std::vector<double>{2, 3, 2, 3}));
  Tensor gi = make(DType::kI64, {3, 1}, {1, 0, 1});
  EXPECT_EQ(values(Call("gather").in(x).in(gi).attr("dim", int64_t{1}).run()), (std::vector<double>{1, 2, 5}));
  auto bad = Call("index_select").in(x).in(make(DType::kI64, {1}, {3})).attr("dim", int64_t{0}).try_run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("out of range"), std::string::npos);
  Tensor put = Call("index_put").in(x).in_list({make(DType::kI64, {2}, {0, 2})}).in(make(DType::kF32, {1}, {9})).run();
  EXPECT_EQ(values(put), (std::vector<double>{9, 9, 2, 3, 9, 9}));
  Tensor acc = Call("index_put").in(x).in_list({make(DType::kI64, {2}, {1, 1}), make(DType::kI64, {2}, {0, 0})})
                   .in(make(DType::kF32, {2}, {10, 20})).attr("accumulate", true).run();
  EXPECT_EQ(values(acc), (std::vector<double>{0, 1, 32, 3, 4, 5}));
  EXPECT_EQ(values(x), (std::vector<double>{0, 1, 2, 3, 4, 5}));  // input untouched
  Tensor mask = make(DType::kBool, {3, 2}, {0, 1, 0, 0, 1, 0});
  EXPECT_EQ(values(Call("index_put").in(x).in_list({mask}).in(make(DType::kF32, {}, {-1})).run()), (std::vector<double>{0, -1, 2, 3, -1, 5}));
}

TEST(PortableCreation, CastFullArange) {
  Tensor f = make(DType::kF32, {4}, {-1.7, 2.9, 300, -300});
  EXPECT_EQ(values(Call("cast").in(f).attr("dtype", DType::kI32).run()), (std::vector<double>{-1, 2, 300, -300}));
  EXPECT_EQ(values(Call("cast").in(f).attr("dtype", DType::kBool).run()), (std::vector<double>{1, 1, 1, 1}));
  Tensor full = Call("full").attr("size", std::vector<int64_t>{2, 2}).attr("fill_value", 1.5).attr("dtype", DType::kF32).run();
  EXPECT_EQ(values(full), (std::vector<double>{1.5, 1.5, 1.5, 1.5}));
  Tensor ar = Call("arange").attr("start", 1.0).attr("end", 2.0).attr("step", 0.25).attr("dtype", DType::kF32).run();
  EXPECT_EQ(values(ar), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(Call("arange").attr("end", 5.0).run().dtype(), DType::kI64);
}

// Ops whose shape is a tensor's values, read when the program runs (ONNX's rules).
TEST(PortableDynamicShape, ReshapeExpandFullArange) {
  Tensor x = randn({2, 3, 4}, 5);
  // Reshape: 0 copies the input's dim, -1 takes the rest; allowzero makes 0 a size.
  Tensor r = Call("dynamic_reshape").in(x).in(make(DType::kI64, {3}, {0, -1, 2})).run();
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{2, 6, 2}));
  Tensor e = make(DType::kF32, {0, 3}, {});
  EXPECT_EQ(Call("dynamic_reshape").in(e).in(make(DType::kI32, {2}, {3, 0})).attr("allowzero", true).run().shape(),
            (std::vector<int64_t>{3, 0}));
  auto bad = Call("dynamic_reshape").in(x).in(make(DType::kI64, {2}, {5, 5})).try_run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("shape [5, 5] is invalid for 24 elements"), std::string::npos);
  auto huge = Call("dynamic_reshape").in(x).in(make(DType::kI64, {3}, {1LL << 40, 1LL << 40, -1})).try_run();
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("overflows"), std::string::npos) << huge.status().message();
  // Expand broadcasts both ways: [3, 1] with [2, 1, 4] gives [2, 3, 4].
  Tensor c = make(DType::kF32, {3, 1}, {1, 2, 3});
  Tensor ex = Call("dynamic_expand").in(c).in(make(DType::kI64, {3}, {2, 1, 4})).run();
  EXPECT_EQ(ex.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(ex.scalar_at(4), 2.0);
  auto clash = Call("dynamic_expand").in(c).in(make(DType::kI64, {2}, {4, 1})).try_run();
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("does not broadcast"), std::string::npos);
  auto big = Call("dynamic_expand").in(c).in(make(DType::kI64, {2}, {3, 1LL << 31})).try_run();
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("more than 2^32 elements"), std::string::npos);
  // ConstantOfShape.
  Tensor f = Call("dynamic_full").in(make(DType::kI64, {2}, {2, 3})).attr("fill_value", 7.0).attr("dtype", DType::kI32).run();
  EXPECT_EQ(f.dtype(), DType::kI32);
  EXPECT_EQ(values(f), (std::vector<double>{7, 7, 7, 7, 7, 7}));
  auto neg = Call("dynamic_full").in(make(DType::kI64, {1}, {-1})).try_run();
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("negative size"), std::string::npos);
  // Range: exact integer counts (ceil), empty when the step leads away, floats by start + i * step.
  auto range = [](DType dt, double a, double b, double s) {
    return Call("dynamic_arange").in(make(dt, {}, {a})).in(make(dt, {}, {b})).in(make(dt, {}, {s})).run();
  };
  EXPECT_EQ(values(range(DType::kI32, 10, 4, -3)), (std::vector<double>{10, 7}));
  EXPECT_EQ(range(DType::kI64, 10, 4, 3).numel(), 0);
  EXPECT_EQ(values(range(DType::kF32, 1, 2, 0.25)), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  auto zero = Call("dynamic_arange").in(make(DType::kI64, {}, {0})).in(make(DType::kI64, {}, {4})).in(make(DType::kI64, {}, {0})).try_run();
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("step is 0"), std::string::npos);
  auto many = Call("dynamic_arange")
                  .in(make(DType::kI64, {}, {static_cast<double>(INT64_MIN)}))
                  .in(make(DType::kI64, {}, {9.0e18}))
                  .in(make(DType::kI64, {}, {1}))
                  .try_run();
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("more than 2^32 elements"), std::string::npos);
}

TEST(PortableDynamicShape, TileSliceSqueezeAndAttributesFromTensors) {
  Tensor x = make(DType::kF32, {2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor t = Call("dynamic_tile").in(x).in(make(DType::kI64, {2}, {2, 2})).run();
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(values(t), (std::vector<double>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2,
                                            3, 4, 5, 3, 4, 5}));
  auto bad_reps = Call("dynamic_tile").in(x).in(make(DType::kI64, {1}, {2})).try_run();
  ASSERT_FALSE(bad_reps.ok());
  EXPECT_NE(bad_reps.status().message().find("holds 1 values"), std::string::npos);
  // Slice: a negative step walks back from a clamped start; ends past either edge are clamped.
  auto slice = [&](std::vector<double> st, std::vector<double> en, std::vector<double> ax,
                   std::vector<double> sp) {
    const int64_t n = static_cast<int64_t>(st.size());
    return Call("dynamic_slice")
        .in(x)
        .in(make(DType::kI64, {n}, st))
        .in(make(DType::kI64, {n}, en))
        .in(make(DType::kI64, {n}, ax))
        .in(make(DType::kI64, {n}, sp))
        .run();
  };
  Tensor r = slice({100}, {-100}, {1}, {-1});
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(r), (std::vector<double>{2, 1, 0, 5, 4, 3}));
  Tensor r2 = slice({-1, 0}, {-3, 3}, {0, -1}, {-1, 2});
  EXPECT_EQ(values(r2), (std::vector<double>{3, 5, 0, 2}));
  EXPECT_EQ(slice({2}, {1}, {1}, {1}).shape(), (std::vector<int64_t>{2, 0}));
  auto step0 = Call("dynamic_slice")
                   .in(x)
                   .in(make(DType::kI64, {1}, {0}))
                   .in(make(DType::kI64, {1}, {1}))
                   .in(make(DType::kI64, {1}, {0}))
                   .in(make(DType::kI64, {1}, {0}))
                   .try_run();
  ASSERT_FALSE(step0.ok());
  EXPECT_NE(step0.status().message().find("step 0"), std::string::npos);
  // Unsqueeze / squeeze with axes counted against the output / input rank.
  Tensor u = Call("dynamic_unsqueeze").in(x).in(make(DType::kI64, {2}, {-1, 0})).run();
  EXPECT_EQ(u.shape(), (std::vector<int64_t>{1, 2, 3, 1}));
  EXPECT_EQ(Call("dynamic_squeeze").in(u).in(make(DType::kI32, {2}, {0, 3})).run().shape(),
            (std::vector<int64_t>{2, 3}));
  auto not_one = Call("dynamic_squeeze").in(x).in(make(DType::kI64, {1}, {0})).try_run();
  ASSERT_FALSE(not_one.ok());
  EXPECT_NE(not_one.status().message().find("dim 0 of the input [2, 3] is not 1"), std::string::npos);
  auto repeat = Call("dynamic_unsqueeze").in(x).in(make(DType::kI64, {2}, {1, -3})).try_run();
  ASSERT_FALSE(repeat.ok());
  EXPECT_NE(repeat.status().message().find("axis 1 repeats"), std::string::npos);
  // ReduceSum keeps an integer dtype; no axes reduce everything (or nothing with noop).
  Tensor xi = make(DType::kI32, {2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor s = Call("dynamic_sum").in(xi).in(make(DType::kI64, {1}, {-1})).attr("keepdim", false).run();
  EXPECT_EQ(s.dtype(), DType::kI32);
  EXPECT_EQ(values(s), (std::vector<double>{3, 12}));
  Tensor all = Call("dynamic_sum").in(xi).in(make(DType::kI64, {0}, {})).run();
  EXPECT_EQ(all.shape(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(values(all), (std::vector<double>{15}));
  EXPECT_EQ(values(Call("dynamic_sum").in(xi).in(make(DType::kI64, {0}, {})).attr("noop_with_empty_axes", true).run()),
            values(xi));
  Tensor c = Call("dynamic_cumsum").in(xi).in(make(DType::kI32, {}, {1})).attr("reverse", true).run();
  EXPECT_EQ(c.dtype(), DType::kI32);
  EXPECT_EQ(values(c), (std::vector<double>{3, 3, 2, 12, 9, 5}));
  auto k = Call("dynamic_topk").in(x).in(make(DType::kI64, {1}, {2})).attr("dim", int64_t{1}).try_run();
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(values((*k)[0]), (std::vector<double>{2, 1, 5, 4}));
  EXPECT_EQ(values((*k)[1]), (std::vector<double>{2, 1, 2, 1}));
  auto big_k = Call("dynamic_topk").in(x).in(make(DType::kI64, {}, {4})).try_run();
  ASSERT_FALSE(big_k.ok());
  EXPECT_NE(big_k.status().message().find("k 4 is outside [0, 3]"), std::string::npos);
}

TEST(PortableKernels, ValueSizedOutputs) {
  // nonzero: row-major coordinates of the non-zero elements (-0.0 is zero).
  Tensor x = make(DType::kF32, {2, 3}, {0, 1.5, -0.0, 2, 0, -3});
  Tensor nz = Call("nonzero").in(x).run();
  EXPECT_EQ(nz.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values(nz), (std::vector<double>{0, 1, 1, 0, 1, 2}));
  EXPECT_EQ(Call("nonzero").in(make(DType::kBool, {2}, {0, 0})).run().shape(),
            (std::vector<int64_t>{0, 1}));
  // dynamic_pad: ONNX's begins-then-ends layout over the given axes; a negative pad crops.
  Tensor p = Call("dynamic_pad")
                 .in(x)
                 .in(make(DType::kI64, {2}, {1, -1}))
                 .in(make(DType::kF32, {}, {7}))
                 .attr("axes", std::vector<int64_t>{1})
                 .run();
  EXPECT_EQ(p.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(p), (std::vector<double>{7, 0, 1.5, 7, 2, 0}));
  auto huge = Call("dynamic_pad").in(x).in(make(DType::kI64, {4}, {0, 0, 0, int64_t{1} << 40})).try_run();
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("more than 2^32"), std::string::npos) << huge.status().message();
  // non_max_suppression: per class, by score, dropping boxes that overlap a kept one too much.
  Tensor boxes = make(DType::kF32, {1, 4, 4}, {0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 5, 1, 6, 1, 1, 0, 0});
  Tensor scores = make(DType::kF32, {1, 2, 4}, {0.9, 0.8, 0.7, 0.1, 0.2, 0.3, 0.05, 0.4});
  Tensor kept = Call("non_max_suppression")
                    .in(boxes)
                    .in(scores)
                    .in(make(DType::kI64, {1}, {2}))
                    .in(make(DType::kF32, {1}, {0.5}))
                    .in(make(DType::kF32, {1}, {0.06}))
                    .run();
  // Class 0 keeps box 0, drops box 1 (IoU 0.82 with box 0) and keeps box 2, its second; class 1
  // (box 2 under the score threshold) keeps box 3 (box 0 with its corners swapped), which
  // suppresses boxes 1 and 0.
  EXPECT_EQ(kept.shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(values(kept), (std::vector<double>{0, 0, 0, 0, 0, 2, 0, 1, 3}));
  // unique: sorted or first-seen, with first indices, inverse indices and counts.
  Tensor v = make(DType::kI64, {6}, {3, 1, 3, 2, 1, 3});
  auto sorted = Call("unique").in(v).try_run();
  ASSERT_TRUE(sorted.ok()) << sorted.status().message();
  EXPECT_EQ(values((*sorted)[0]), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(values((*sorted)[1]), (std::vector<double>{1, 3, 0}));
  EXPECT_EQ(values((*sorted)[2]), (std::vector<double>{2, 0, 2, 1, 0, 2}));
  EXPECT_EQ(values((*sorted)[3]), (std::vector<double>{2, 1, 3}));
  auto seen = Call("unique").in(v).attr("sorted", false).try_run();
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(values((*seen)[0]), (std::vector<double>{3, 1, 2}));
  EXPECT_EQ(values((*seen)[2]), (std::vector<double>{0, 1, 0, 2, 1, 0}));
  Tensor rows = make(DType::kF32, {2, 3}, {1, 0, 1, 2, 9, 2});
  auto cols = Call("unique").in(rows).attr("dim", int64_t{1}).try_run();
  ASSERT_TRUE(cols.ok());
  EXPECT_EQ((*cols)[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values((*cols)[0]), (std::vector<double>{0, 1, 9, 2}));
  EXPECT_EQ(values((*cols)[2]), (std::vector<double>{1, 0, 1}));
}

TEST(PortableKernels, ShiftsDeterminantAndGridSample) {
  // Shifts wrap at the type's width; a shift by the width or more gives 0.
  Tensor x = make(DType::kU32, {4}, {1, 0x80000001u, 12, 7});
  Tensor s = make(DType::kU32, {4}, {31, 1, 2, 32});
  EXPECT_EQ(values(Call("bitwise_left_shift").in(x).in(s).run()), (std::vector<double>{2147483648.0, 2, 48, 0}));
  EXPECT_EQ(values(Call("bitwise_right_shift").in(x).in(s).run()), (std::vector<double>{0, 1073741824.0, 3, 0}));
  Tensor neg = make(DType::kI8, {2}, {-64, -1});
  EXPECT_EQ(values(Call("bitwise_right_shift").in(neg).in(make(DType::kI8, {2}, {3, 9})).run()),
            (std::vector<double>{-8, -1}));
  EXPECT_FALSE(Call("bitwise_left_shift").in(make(DType::kF32, {1}, {1})).in(make(DType::kF32, {1}, {1})).try_run().ok());
  // det: a row swap flips the sign; a singular matrix gives 0.
  Tensor m = make(DType::kF32, {3, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0, 2, 4, 1, 2});
  EXPECT_EQ(values(Call("det").in(m).run()), (std::vector<double>{-2, -1, 0}));
  // grid_sample on a 2x3 image: the corners (align_corners) and the middle of the top row.
  Tensor img = make(DType::kF32, {1, 1, 2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor grid = make(DType::kF32, {1, 1, 3, 2}, {-1, -1, 1, 1, 0, -1});
  EXPECT_EQ(values(Call("grid_sample").in(img).in(grid).attr("align_corners", true).run()),
            (std::vector<double>{0, 5, 1}));
  // Without align_corners (1, 1) is the outer corner of pixel (1, 2): a quarter of the bilinear
  // weight is inside, the rest reads zeros; border padding reads the edge pixel instead.
  EXPECT_EQ(values(Call("grid_sample").in(img).in(grid).run())[1], 1.25);
  EXPECT_EQ(values(Call("grid_sample").in(img).in(grid).attr("padding_mode", std::string("border")).run())[1], 5);
  // nearest rounds half to even: (2.5, 1.5) goes to (2, 2), outside the image.
  EXPECT_EQ(values(Call("grid_sample").in(img).in(grid).attr("mode", std::string("nearest")).run()),
            (std::vector<double>{0, 0, 1}));
  // A NaN grid point reads 0; points far outside fold back (reflection) or read zeros.
  Tensor wild = make(DType::kF32, {1, 1, 3, 2}, {NAN, 0, 1e30, -1e30, -7, 3});
  for (const char* padding : {"zeros", "border", "reflection"}) {
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      auto y = Call("grid_sample").in(img).in(wild).attr("padding_mode", std::string(padding))
                   .attr("mode", std::string(mode)).try_run();
      ASSERT_TRUE(y.ok()) << y.status().message();
      EXPECT_EQ(values((*y)[0])[0], 0);
      for (double v : values((*y)[0])) EXPECT_TRUE(std::isfinite(v)) << padding << " " << mode;
    }
  }
}

TEST(PortableQuant, RoundHalfToEvenAndClamp) {
  Tensor x = make(DType::kF32, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, 100, -100, 0.26});
  Tensor q = Call("quantize_per_tensor").in(x).attr("scale", 1.0).attr("zero_point", int64_t{0})
                 .attr("quant_min", int64_t{-128}).attr("quant_max", int64_t{127}).attr("dtype", DType::kI8).run();
  EXPECT_EQ(q.dtype(), DType::kI8);
  EXPECT_EQ(values(q), (std::vector<double>{0, 2, 2, -0, -2, 100, -100, 0}));
  Tensor q2 = Call("quantize_per_tensor").in(x).attr("scale", 0.5).attr("zero_point", int64_t{10})
                  .attr("quant_min", int64_t{0}).attr("quant_max", int64_t{255}).attr("dtype", DType::kU8).run();
  EXPECT_EQ(values(q2), (std::vector<double>{11, 13, 15, 9, 7, 210, 0, 11}));
  Tensor dq = Call("dequantize_per_tensor").in(q2).attr("scale", 0.5).attr("zero_point", int64_t{10})
                  .attr("quant_min", int64_t{0}).attr("quant_max", int64_t{255}).attr("dtype", DType::kU8).run();
  EXPECT_EQ(values(dq), (std::vector<double>{0.5, 1.5, 2.5, -0.5, -1.5, 100, -5, 0.5}));
  Tensor w = make(DType::kF32, {2, 2}, {1, -1, 1, -1});
  Tensor scales = make(DType::kF32, {2}, {0.5, 0.25}), zps = make(DType::kI64, {2}, {0, 1});
  Tensor qc = Call("quantize_per_channel").in(w).in(scales).in(zps).attr("axis", int64_t{0})
                  .attr("quant_min", int64_t{-8}).attr("quant_max", int64_t{7}).attr("dtype", DType::kI8).run();
  EXPECT_EQ(values(qc), (std::vector<double>{2, -2, 5, -3}));
  Tensor dqc = Call("dequantize_per_channel").in(qc).in(scales).in(zps).attr("axis", int64_t{0})
                   .attr("quant_min", int64_t{-8}).attr("quant_max", int64_t{7}).attr("dtype", DType::kI8).run();
  EXPECT_EQ(values(dqc), (std::vector<double>{1, -1, 1, -1}));
}

}  // namespace
}  // namespace kiln::portable::testing
