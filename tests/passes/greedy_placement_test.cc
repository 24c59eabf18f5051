// Greedy-by-size placement (src/passes/greedy_placement.h): hand-worked examples, and the
// interval-tree search checked offset for offset against a quadratic scan of the same rule.
#include "passes/greedy_placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace kiln::passes {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The same greedy rule with every placed block scanned for conflicts: O(n^2), obviously right.
uint64_t reference_place(const std::vector<Block>& blocks, uint64_t alignment, GapRule rule,
                         std::vector<uint64_t>* offsets) {
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return blocks[a].bytes > blocks[b].bytes; });
  offsets->assign(blocks.size(), 0);
  std::vector<size_t> placed;
  uint64_t arena = 0;
  for (size_t i : order) {
    const Block& b = blocks[i];
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (size_t j : placed) {
      if (blocks[j].first <= b.last && b.first <= blocks[j].last) {
        taken.push_back({(*offsets)[j], (*offsets)[j] + blocks[j].bytes});
      }
    }
    std::sort(taken.begin(), taken.end());
    uint64_t cand = 0, best = UINT64_MAX, best_gap = UINT64_MAX;
    for (auto [begin, end] : taken) {
      if (begin >= cand && begin - cand >= b.bytes) {
        if (rule == GapRule::kFirstFit) {
          best = cand;
          break;
        }
        if (begin - cand < best_gap) {
          best_gap = begin - cand;
          best = cand;
        }
      }
      cand = std::max(cand, align_up(end, alignment));
    }
    (*offsets)[i] = best != UINT64_MAX ? best : cand;
    arena = std::max(arena, (*offsets)[i] + b.bytes);
    placed.push_back(i);
  }
  return arena;
}

// No two blocks whose lifetimes intersect share a byte; offsets aligned; arena = the top.
void expect_valid(const std::vector<Block>& blocks, const std::vector<uint64_t>& offsets,
                  uint64_t alignment, uint64_t arena) {
  ASSERT_EQ(offsets.size(), blocks.size());
  uint64_t top = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(offsets[i] % alignment, 0u) << i;
    top = std::max(top, offsets[i] + blocks[i].bytes);
    for (size_t j = i + 1; j < blocks.size(); ++j) {
      if (blocks[i].first > blocks[j].last || blocks[j].first > blocks[i].last) continue;
      bool apart =
          offsets[i] + blocks[i].bytes <= offsets[j] || offsets[j] + blocks[j].bytes <= offsets[i];
      EXPECT_TRUE(apart) << "blocks " << i << " and " << j;
    }
  }
  EXPECT_EQ(arena, top);
}

TEST(GreedyPlacement, EmptyAndSingle) {
  std::vector<uint64_t> offsets{7};
  EXPECT_EQ(place_greedy_by_size({}, 64, GapRule::kFirstFit, &offsets), 0u);
  EXPECT_TRUE(offsets.empty());
  std::vector<Block> one{{3, 9, 100}};
  EXPECT_EQ(place_greedy_by_size(one, 64, GapRule::kBestFit, &offsets), 100u);
  EXPECT_EQ(offsets, std::vector<uint64_t>{0});
}

// Lifetimes are inclusive: [0, 1] and [1, 2] meet at 1, [0, 1] and [2, 3] never meet.
TEST(GreedyPlacement, InclusiveLifetimes) {
  std::vector<uint64_t> offsets;
  std::vector<Block> touching{{0, 1, 10}, {1, 2, 10}};
  EXPECT_EQ(place_greedy_by_size(touching, 1, GapRule::kFirstFit, &offsets), 20u);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 10}));
  std::vector<Block> apart{{0, 1, 10}, {2, 3, 10}};
  EXPECT_EQ(place_greedy_by_size(apart, 1, GapRule::kFirstFit, &offsets), 10u);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 0}));
}

// ExecuTorch's greedy by size, by hand (alignment 1): A 100 [0,1], B 50 [1,2], C 80 [2,3],
// D 30 [3,4]. Largest first: A at 0; C meets nothing placed, 0; B meets A and C, so it goes
// above both at 100; D meets C only, at 80. Arena 150 = A + B at position 1, the lower bound.
TEST(GreedyPlacement, LargestFirstByHand) {
  std::vector<Block> blocks{{0, 1, 100}, {1, 2, 50}, {2, 3, 80}, {3, 4, 30}};
  for (GapRule rule : {GapRule::kFirstFit, GapRule::kBestFit}) {
    std::vector<uint64_t> offsets;
    EXPECT_EQ(place_greedy_by_size(blocks, 1, rule, &offsets), 150u);
    EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 100, 0, 80}));
  }
  // With 64-byte alignment B starts at align_up(100) = 128 and D at align_up(80) = 128.
  std::vector<uint64_t> offsets;
  EXPECT_EQ(place_greedy_by_size(blocks, 64, GapRule::kFirstFit, &offsets), 178u);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 128, 0, 128}));
}

// Equal sizes keep the input order (the earlier block first).
TEST(GreedyPlacement, TiesKeepTheEarlierBlockFirst) {
  std::vector<Block> blocks{{0, 2, 64}, {1, 3, 64}, {2, 4, 64}};
  std::vector<uint64_t> offsets;
  EXPECT_EQ(place_greedy_by_size(blocks, 64, GapRule::kFirstFit, &offsets), 192u);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 64, 128}));
}

// Where the two gap rules part (worked in tests/passes/memory_plan_test.cc,
// GreedyBySizeHandExample): first fit puts g in the low 100-byte gap and f no longer fits
// below the top; best fit puts g in the 70-byte gap and f at 0.
TEST(GreedyPlacement, FirstFitAndBestFitDiffer) {
  std::vector<Block> blocks{{1, 4, 60}, {2, 6, 100}, {3, 7, 70}, {4, 8, 80},
                            {5, 8, 60}, {7, 9, 50},  {8, 9, 60}};
  std::vector<uint64_t> ff, bf;
  EXPECT_EQ(place_greedy_by_size(blocks, 1, GapRule::kFirstFit, &ff), 360u);
  EXPECT_EQ(ff, (std::vector<uint64_t>{250, 0, 180, 100, 250, 310, 0}));
  EXPECT_EQ(place_greedy_by_size(blocks, 1, GapRule::kBestFit, &bf), 310u);
  EXPECT_EQ(bf, (std::vector<uint64_t>{250, 0, 180, 100, 250, 0, 180}));
}

// Sizes that need every radix digit (up to 2^62), including ones equal in their low digits.
TEST(GreedyPlacement, SortsLargeSizes) {
  std::vector<Block> blocks{{0, 0, 1},
                            {0, 0, uint64_t{1} << 40},
                            {0, 0, (uint64_t{1} << 40) + 1},
                            {0, 0, uint64_t{1} << 61},
                            {0, 0, 2048},
                            {0, 0, 2049}};
  std::vector<uint64_t> offsets, want;
  uint64_t arena = place_greedy_by_size(blocks, 1, GapRule::kFirstFit, &offsets);
  EXPECT_EQ(arena, reference_place(blocks, 1, GapRule::kFirstFit, &want));
  EXPECT_EQ(offsets, want);
  // Largest first, stacked.
  EXPECT_EQ(offsets[3], 0u);
  EXPECT_EQ(offsets[2], uint64_t{1} << 61);
  EXPECT_EQ(offsets[0], arena - 1);
}

// The interval index against the quadratic scan: short and long lifetimes, starts on and
// around the index's 16-position buckets, both rules, several alignments.
TEST(GreedyPlacement, MatchesTheQuadraticScan) {
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    std::mt19937_64 rng(seed);
    size_t n = 1 + rng() % 400;
    int64_t span = 1 + static_cast<int64_t>(rng() % 600);
    std::vector<Block> blocks;
    for (size_t i = 0; i < n; ++i) {
      int64_t first = static_cast<int64_t>(rng() % static_cast<uint64_t>(span));
      if (rng() % 4 == 0) first = first / 16 * 16 + (rng() % 2 ? 15 : 0);
      int64_t len = rng() % 8 == 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(span))
                                   : static_cast<int64_t>(rng() % 20);
      uint64_t bytes = 1 + (rng() % 3 == 0 ? rng() % 16 : rng() % 100000);
      blocks.push_back({first, first + len, bytes});
    }
    // The planner passes blocks in `first` order.
    std::stable_sort(blocks.begin(), blocks.end(),
                     [](const Block& a, const Block& b) { return a.first < b.first; });
    uint64_t alignment = uint64_t{1} << (rng() % 8);
    for (GapRule rule : {GapRule::kFirstFit, GapRule::kBestFit}) {
      std::vector<uint64_t> got, want;
      uint64_t arena = place_greedy_by_size(blocks, alignment, rule, &got);
      uint64_t ref = reference_place(blocks, alignment, rule, &want);
      ASSERT_EQ(arena, ref) << "seed " << seed << " rule " << static_cast<int>(rule);
      ASSERT_EQ(got, want) << "seed " << seed << " rule " << static_cast<int>(rule);
      expect_valid(blocks, got, alignment, arena);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace kiln::passes
