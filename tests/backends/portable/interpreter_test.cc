// The interpreter: memory plan, symbolic inputs, input checks, zero-copy views, buffers, delegates.
#include "kiln/backends/portable/interpreter.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "kiln/core/memory.h"
#include "testing/graph_builder.h"

namespace kiln::portable {
namespace {

using kiln::testing::GraphBuilder;
using portable::testing::randn;
using portable::testing::values;

std::unique_ptr<Interpreter> make(ExportedProgram& p, InterpreterOptions options = {}) {
  auto r = Interpreter::create(p, options);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.status().message());
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(Interpreter, MemoryPlanReusesBuffers) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kF32, {64, 64}));
  Node* v = x;
  for (int i = 0; i < 8; ++i) v = i % 2 ? b.relu(v) : b.neg(v);
  b.outputs({v});
  auto interp = make(p);
  ASSERT_NE(interp, nullptr);
  Tensor in = randn({64, 64}, 1);
  auto r = interp->run(std::vector<Tensor>{in});
  ASSERT_TRUE(r.ok()) << r.status().message();
  // neg then relu, four times: relu(-x) = max(-x, 0), then neg/relu again gives 0 for those.
  for (int64_t i = 0; i < in.numel(); ++i) {
    double e = std::max(-in.scalar_at(i), 0.0);
    e = std::max(-e, 0.0);
    e = std::max(-e, 0.0);
    e = std::max(-e, 0.0);
    ASSERT_EQ(r->outputs[0].scalar_at(i), e);
  }
  const MemoryStats& m = interp->memory_stats();
  EXPECT_EQ(m.no_reuse_bytes, 8u * 64 * 64 * 4);
  EXPECT_LE(m.peak_bytes, 3u * 64 * 64 * 4);
  EXPECT_LT(m.peak_bytes, m.no_reuse_bytes);
  EXPECT_GT(m.reused, 0u);
  // Second run reuses the pool; the first run's output stays intact (it is still referenced).
  Tensor first = r->outputs[0];
  auto r2 = interp->run(std::vector<Tensor>{randn({64, 64}, 2)});
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(first.shares_storage_with(r2->outputs[0]));
  EXPECT_EQ(values(first), values(r->outputs[0]));

  // Without reuse, peak equals the sum.
  auto plain = make(p, {1, false, false});
  ASSERT_TRUE(plain->run(std::vector<Tensor>{in}).ok());
  EXPECT_EQ(plain->memory_stats().peak_bytes, plain->memory_stats().no_reuse_bytes);
}

TEST(Interpreter, SymbolicBatchAndInputChecks) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec(DType::kF32, {Dim::symbol("batch"), 4}));
  Node* y = b.input("y", TensorSpec(DType::kF32, {Dim::symbol("batch"), 4}));
  Node* w = b.param("w", {3, 4});
  b.outputs({b.linear(b.add(x, y), w)});
  auto interp = make(p);
  ASSERT_NE(interp, nullptr);
  for (int64_t batch : {1, 3}) {
    auto r = interp->run(std::vector<Tensor>{randn({batch, 4}, 3), randn({batch, 4}, 4)});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->outputs[0].shape(), (std::vector<int64_t>{batch, 3}));
  }
  auto bad_shape = interp->run(std::vector<Tensor>{randn({2, 5}, 3), randn({2, 4}, 4)});
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_EQ(bad_shape.status().message(), "input 'x': got f32[2, 5], expected f32[batch, 4]");
  auto inconsistent = interp->run(std::vector<Tensor>{randn({2, 4}, 3), randn({3, 4}, 4)});
  ASSERT_FALSE(inconsistent.ok());
  EXPECT_NE(inconsistent.status().message().find("input 'y'"), std::string::npos);
  EXPECT_NE(inconsistent.status().message().find("'batch' is 2 from input 'x'"), std::string::npos)
      << inconsistent.status().message();
  Tensor ints(DType::kI32, {2, 4});
  auto bad_dtype = interp->run(std::vector<Tensor>{ints, randn({2, 4}, 4)});
  ASSERT_FALSE(bad_dtype.ok());
  EXPECT_EQ(bad_dtype.status().message(), "input 'x': got i32[2, 4], expected f32[batch, 4]");
  auto count = interp->run(std::vector<Tensor>{randn({2, 4}, 3)});
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("expected 2 input(s)"), std::string::npos);
  auto named = interp->run_named({{"x", randn({2, 4}, 3)}, {"z", randn({2, 4}, 4)}});
  ASSERT_FALSE(named.ok());
}

TEST(Interpreter, ViewsAreZeroCopyAndParametersAreNotCopied) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kF32, {2, 3, 4}));
  Node* flat = b.call(OpId::kReshape, {x}, {{"shape", std::vector<int64_t>{6, 4}}});
  Node* sq = b.call(OpId::kUnsqueeze, {flat}, {{"dim", int64_t{0}}});
  Node* w = b.param("w", {4});
  b.outputs({sq, w});
  auto interp = make(p);
  ASSERT_NE(interp, nullptr);
  Tensor in = randn({2, 3, 4}, 5);
  auto r = interp->run(std::vector<Tensor>{in});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->outputs[0].shares_storage_with(in));
  EXPECT_EQ(r->outputs[0].shape(), (std::vector<int64_t>{1, 6, 4}));
  EXPECT_TRUE(r->outputs[1].shares_storage_with(*p.constants().find("w")));
  EXPECT_EQ(interp->memory_stats().no_reuse_bytes, 0u);
}

TEST(Interpreter, SplitTuplesAndBufferMutation) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kF32, {4, 2}));
  Node* buf = b.buffer("count", {2});
  Node* parts = b.call(OpId::kSplit, {x}, {{"split_sizes", std::vector<int64_t>{1, 3}}});
  Node* a = b.call(OpId::kGetitem, {parts, int64_t{0}});
  Node* c = b.call(OpId::kGetitem, {parts, int64_t{1}});
  Node* sum = b.call(OpId::kSum, {c}, {{"dim", std::vector<int64_t>{0}}});
  Node* next = b.add(buf, sum);
  b.outputs({a, next}, {OutputSpec{OutputKind::kUserOutput, ""}, OutputSpec{OutputKind::kBufferMutation, "count"}});
  auto interp = make(p, {1, true, true});
  ASSERT_NE(interp, nullptr);
  Tensor in = testing::make(DType::kF32, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  for (int run = 1; run <= 2; ++run) {
    auto r = interp->run(std::vector<Tensor>{in});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(values(r->outputs[0]), (std::vector<double>{1, 2}));
    ASSERT_EQ(r->mutations.size(), 1u);
    EXPECT_EQ(values(*p.constants().find("count")), (std::vector<double>{15.0 * run, 18.0 * run}));
  }
}

TEST(Interpreter, CallDelegateNeedsAHook) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kF32, {3}));
  LoweredModule lm;
  lm.name = "lowered_module_0";
  lm.backend_id = "demo";
  p.lowered_modules().push_back(lm);
  Node* mod = p.graph().add_get_attr("lowered_module_0");
  auto call = p.graph().add_call(OpId::kCallDelegate, {mod, x});
  ASSERT_TRUE(call.ok()) << call.status().message();
  (*call)->meta.val = {TensorSpec::of(DType::kF32, {3})};
  Node* out = b.call(OpId::kGetitem, {*call, int64_t{0}});
  b.outputs({b.relu(out)});
  auto interp = make(p);
  ASSERT_NE(interp, nullptr);
  Tensor in = testing::make(DType::kF32, {3}, {-1, 2, -3});
  auto r = interp->run(std::vector<Tensor>{in});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lowered module 'lowered_module_0' needs a delegate hook"), std::string::npos)
      << r.status().message();
  interp->set_delegate_hook([](std::string_view name, std::span<const Tensor> ins) -> Result<std::vector<Tensor>> {
    if (name != "lowered_module_0") return not_found("no module {}", name);
    Tensor t = ins[0].clone();
    for (int64_t i = 0; i < t.numel(); ++i) t.set_scalar_at(i, -t.scalar_at(i));
    return std::vector<Tensor>{t};
  });
  auto ok = interp->run(std::vector<Tensor>{in});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(values(ok->outputs[0]), (std::vector<double>{1, 0, 3}));
}

TEST(Interpreter, KernelErrorsNameTheNode) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kI64, {3}));
  Node* idx = b.input("idx", TensorSpec::of(DType::kI64, {2}));
  b.outputs({b.call(OpId::kIndexSelect, {x, idx}, {{"dim", int64_t{0}}}, "pick")});
  auto interp = make(p);
  ASSERT_NE(interp, nullptr);
  auto r = interp->run(std::vector<Tensor>{Tensor(DType::kI64, {3}), testing::make(DType::kI64, {2}, {0, 7})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'pick' (index_select)"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace kiln::portable

namespace kiln::portable {
namespace {

TEST(Interpreter, ActivationsOverTheMemoryLimitAreResourceExhaustedNamingTheNode) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kF32, {256, 1024}));
  Node* a = b.neg(x);
  Node* big = b.call(OpId::kFull, {}, {{"size", std::vector<int64_t>{1024, 1024}}, {"fill_value", 1.0}},
                     "filler");
  b.outputs({a, big});
  auto interp = make(p);
  ASSERT_NE(interp, nullptr);
  size_t before = memory_limit();
  set_memory_limit(size_t{4} << 20);  // the 1 MiB neg output fits; 1 MiB + 4 MiB does not
  set_memory_limit_source("--max-memory");
  auto r = interp->run(std::vector<Tensor>{randn({256, 1024}, 3)});
  set_memory_limit(before);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(),
            "node 'filler' (full): f32[1024, 1024] needs 4.0 MiB (with 1.0 MiB of activations "
            "live), more than kiln's memory limit of 4.0 MiB (--max-memory)");
  // With the limit back, the same interpreter runs.
  auto ok = interp->run(std::vector<Tensor>{randn({256, 1024}, 3)});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->outputs[1].scalar_at(12345), 1.0);
}

}  // namespace
}  // namespace kiln::portable
