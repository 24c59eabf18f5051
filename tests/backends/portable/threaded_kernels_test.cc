// The portable kernels split over threads: every kernel that uses the pool gives bit-identical
// results at 1, 2 and 3 threads (a GEMM split into blocks: the same up to rounding, as OpenBLAS's
// edge kernels round differently from its full-width ones), splits large tensors and keeps small
// ones on the calling thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/portable/util.h"
#include "kernel_test_util.h"

namespace kiln::portable::testing {
namespace {

Tensor bools(std::vector<int64_t> shape, uint64_t seed) {
  Tensor r = randn(shape, seed);
  Tensor t(DType::kBool, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_data_as<uint8_t>()[i] = r.data_as<float>()[i] > 0;
  return t;
}

Tensor ints(std::vector<int64_t> shape, uint64_t seed, int64_t lo, int64_t hi) {
  Tensor r = randn(shape, seed);
  Tensor t(DType::kI64, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = static_cast<int64_t>(r.data_as<float>()[i] * 1000);
    t.mutable_data_as<int64_t>()[i] = lo + ((v % (hi - lo)) + (hi - lo)) % (hi - lo);
  }
  return t;
}

Tensor positive(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = randn(std::move(shape), seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_data_as<float>()[i] = 0.5f + std::fabs(t.data_as<float>()[i]);
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.nbytes())) == 0;
}

// Float outputs within rounding of each other: 1e-5 of the largest magnitude.
bool same_up_to_rounding(const Tensor& a, const Tensor& b) {
  if (a.dtype() != DType::kF32 || !(a.shape() == b.shape()) || b.dtype() != DType::kF32) return false;
  float scale = 1, diff = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    scale = std::max(scale, std::fabs(b.data_as<float>()[i]));
    diff = std::max(diff, std::fabs(a.data_as<float>()[i] - b.data_as<float>()[i]));
  }
  return diff <= 1e-5f * scale;
}

enum class Split { kYes, kNo };
enum class Match { kBits, kRounding };

// Runs `call` on one thread and on 2 and 3 threads: the outputs must be bit-identical (or within
// rounding), and the threaded runs must (kYes) or must not (kNo) have used parallel_for.
void expect_threads_agree(Call call, Split split, Match match = Match::kBits) {
  SCOPED_TRACE(call.op);
  auto serial = call.try_run();
  ASSERT_TRUE(serial.ok()) << serial.status().message();
  for (int threads : {2, 3}) {
    ThreadedKernelContext ctx(threads);
    auto threaded = call.try_run(ctx);
    ASSERT_TRUE(threaded.ok()) << threaded.status().message();
    ASSERT_EQ(threaded->size(), serial->size());
    for (size_t i = 0; i < serial->size(); ++i) {
      const bool same = match == Match::kBits ? same_bytes((*threaded)[i], (*serial)[i])
                                              : same_up_to_rounding((*threaded)[i], (*serial)[i]);
      EXPECT_TRUE(same) << "output " << i << " at " << threads << " threads";
    }
    if (split == Split::kYes) {
      EXPECT_GT(ctx.calls, 0) << "a large tensor stayed on one thread at " << threads << " threads";
    } else {
      EXPECT_EQ(ctx.calls, 0) << "a small tensor was split at " << threads << " threads";
    }
  }
}

using Ints = std::vector<int64_t>;

TEST(PortableThreads, BinaryElementwiseEveryBroadcastForm) {
  Tensor x = randn({2, 64, 32, 32}, 1);
  expect_threads_agree(Call("add").in(x).in(randn({2, 64, 32, 32}, 2)), Split::kYes);
  expect_threads_agree(Call("mul").in(x).number(0.5), Split::kYes);
  // Per-channel: rows of H*W once the trailing dims are merged.
  expect_threads_agree(Call("mul").in(x).in(randn({1, 64, 1, 1}, 3)), Split::kYes);
  // Broadcast on both sides, the row dim broadcast in one operand and not the other.
  expect_threads_agree(Call("sub").in(randn({4, 1, 96, 96}, 4)).in(randn({1, 8, 1, 96}, 5)), Split::kYes);
  expect_threads_agree(Call("add").in(randn({256, 1}, 6)).in(randn({1, 300}, 7)), Split::kYes);
  expect_threads_agree(Call("gt").in(x).in(randn({64, 1, 32}, 8)), Split::kYes);
  expect_threads_agree(Call("add").in(randn({4, 4}, 9)).in(randn({4}, 10)), Split::kNo);
  expect_threads_agree(Call("add").in(randn({}, 11)).in(randn({}, 12)), Split::kNo);
}

TEST(PortableThreads, IntegerDivisionByZeroIsFoundInAnyChunk) {
  Tensor num = ints({100000}, 20, -50, 50);
  Tensor den = ints({100000}, 21, 1, 9);
  expect_threads_agree(Call("div").in(num).in(den).attr("rounding_mode", std::string("floor")), Split::kYes);
  den.mutable_data_as<int64_t>()[99999] = 0;  // in the last thread's chunk only
  for (int threads : {1, 2, 3}) {
    ThreadedKernelContext ctx(threads);
    auto r = Call("div").in(num).in(den).attr("rounding_mode", std::string("trunc")).try_run(ctx);
    ASSERT_FALSE(r.ok()) << threads << " threads";
    EXPECT_NE(r.status().message().find("division by zero"), std::string::npos);
  }
}

TEST(PortableThreads, UnaryWhereAndPrelu) {
  expect_threads_agree(Call("exp").in(randn({70000}, 30)), Split::kYes);
  expect_threads_agree(Call("relu").in(ints({3, 50000}, 31, -9, 9)), Split::kYes);
  expect_threads_agree(Call("exp").in(randn({100}, 32)), Split::kNo);
  expect_threads_agree(Call("where").in(bools({1, 1, 128, 128}, 33)).in(randn({2, 4, 128, 128}, 34)).in(randn({1}, 35)),
                       Split::kYes);
  expect_threads_agree(Call("prelu").in(randn({2, 16, 40, 40}, 36)).in(randn({16}, 37)), Split::kYes);
}

TEST(PortableThreads, Permute) {
  expect_threads_agree(Call("permute").in(randn({8, 64, 96}, 40)).attr("dims", Ints{2, 0, 1}), Split::kYes);
  // Attention's head split: the last dim stays whole.
  expect_threads_agree(Call("permute").in(randn({2, 128, 8, 64}, 41)).attr("dims", Ints{0, 2, 1, 3}), Split::kYes);
  expect_threads_agree(Call("permute").in(randn({3, 5}, 42)).attr("dims", Ints{1, 0}), Split::kNo);
}

TEST(PortableThreads, NormsSoftmaxAndReductions) {
  expect_threads_agree(Call("batch_norm").in(randn({2, 32, 24, 24}, 50)).in(randn({32}, 51)).in(randn({32}, 52))
                           .in(randn({32}, 53)).in(positive({32}, 54)),
                       Split::kYes);
  expect_threads_agree(Call("layer_norm").in(randn({512, 256}, 54)).in(randn({256}, 55)).in(randn({256}, 56))
                           .attr("normalized_shape", Ints{256}),
                       Split::kYes);
  expect_threads_agree(Call("group_norm").in(randn({2, 32, 32, 32}, 57)).none().none().attr("num_groups", int64_t{8}),
                       Split::kYes);
  expect_threads_agree(Call("softmax").in(randn({64, 1000}, 58)).attr("dim", int64_t{-1}), Split::kYes);
  expect_threads_agree(Call("log_softmax").in(randn({128, 300}, 59)).attr("dim", int64_t{0}), Split::kYes);
  expect_threads_agree(Call("softmax").in(randn({2, 10}, 60)).attr("dim", int64_t{-1}), Split::kNo);
  expect_threads_agree(Call("sum").in(randn({64, 32, 40}, 61)).attr("dim", Ints{1}), Split::kYes);
  expect_threads_agree(Call("amax").in(randn({64, 32, 40}, 62)).attr("dim", Ints{0, 2}), Split::kYes);
  expect_threads_agree(Call("sum").in(ints({300, 200}, 63, -5, 5)).attr("dim", Ints{1}), Split::kYes);
}

TEST(PortableThreads, BatchedProductsAndAttention) {
  expect_threads_agree(Call("bmm").in(randn({16, 64, 48}, 70)).in(randn({16, 48, 64}, 71)), Split::kYes);
  expect_threads_agree(Call("matmul").in(randn({2, 8, 64, 32}, 72)).in(randn({1, 8, 32, 64}, 73)), Split::kYes);
  expect_threads_agree(Call("scaled_dot_product_attention").in(randn({2, 4, 64, 32}, 74)).in(randn({2, 4, 64, 32}, 75))
                           .in(randn({2, 4, 64, 32}, 76)).none().attr("is_causal", true),
                       Split::kYes);
  expect_threads_agree(Call("scaled_dot_product_attention").in(randn({1, 1, 8, 4}, 77)).in(randn({1, 1, 8, 4}, 78))
                           .in(randn({1, 1, 8, 4}, 79)),
                       Split::kNo);
}

TEST(PortableThreads, GroupedConvolutionWholeGroupsOrSplitGroups) {
  // 4 groups: whole groups per thread at 2 threads, each group's GEMM split at 3 threads.
  Tensor x = randn({1, 32, 28, 28}, 80), w = randn({64, 8, 3, 3}, 81), b = randn({64}, 82);
  expect_threads_agree(Call("convolution").in(x).in(w).in(b).attr("padding", Ints{1, 1}).attr("groups", int64_t{4})
                           .attr("activation", std::string("relu")),
                       Split::kYes, Match::kRounding);
  // 1x1 grouped (ShuffleNet), no im2col.
  expect_threads_agree(Call("convolution").in(randn({2, 64, 20, 20}, 83)).in(randn({64, 8, 1, 1}, 84)).none()
                           .attr("groups", int64_t{8}),
                       Split::kYes);
  expect_threads_agree(Call("convolution").in(randn({1, 32, 20, 20}, 85)).in(randn({32, 1, 3, 3}, 86)).none()
                           .attr("padding", Ints{1, 1}).attr("groups", int64_t{32}),
                       Split::kYes);
}

TEST(PortableThreads, CoalescedBroadcastRowsStartAnywhere) {
  // Row ranges that begin mid-way through every dim: the iterator's start offsets must match
  // what a walk from row 0 reaches.
  BroadcastIter it{{3, 4, 5, 7}, {BroadcastIter::strides_for({3, 1, 5, 7}, {3, 4, 5, 7}),
                                  BroadcastIter::strides_for({4, 1, 1}, {3, 4, 5, 7})}};
  std::vector<std::vector<int64_t>> all;
  it.for_each_row([&](const int64_t* offs, int64_t cnt, const int64_t*) {
    all.push_back({offs[0], offs[1], cnt});
  });
  ASSERT_EQ(all.size(), 60u);
  for (int64_t begin = 0; begin < 60; begin += 7) {
    int64_t row = begin;
    it.for_each_row(begin, std::min<int64_t>(begin + 11, 60), [&](const int64_t* offs, int64_t cnt, const int64_t*) {
      EXPECT_EQ((std::vector<int64_t>{offs[0], offs[1], cnt}), all[static_cast<size_t>(row)]) << "row " << row;
      ++row;
    });
  }
  // [1,C,H,W] * [1,C,1,1] merges H and W; a size-1 dim never splits a merge.
  BroadcastIter per_channel{{1, 64, 7, 9}, {BroadcastIter::strides_for({1, 64, 7, 9}, {1, 64, 7, 9}),
                                            BroadcastIter::strides_for({1, 64, 1, 1}, {1, 64, 7, 9})}};
  per_channel.coalesce();
  EXPECT_EQ(per_channel.shape, (Ints{64, 63}));
  EXPECT_EQ(per_channel.strides[1], (Ints{1, 0}));
  BroadcastIter trailing_one{{5, 6, 1}, {BroadcastIter::strides_for({5, 6, 1}, {5, 6, 1})}};
  trailing_one.coalesce();
  EXPECT_EQ(trailing_one.shape, (Ints{30}));
  EXPECT_EQ(trailing_one.rows(), 1);
}

}  // namespace
}  // namespace kiln::portable::testing
