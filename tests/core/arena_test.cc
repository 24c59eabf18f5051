// Arena and the page allocator: alignment, growth past a block, huge requests.
#include "kiln/core/arena.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace kiln {
namespace {

TEST(ArenaTest, AllocationsAreAlignedDistinctAndWritable) {
  Arena arena;
  std::vector<std::pair<char*, size_t>> got;
  for (size_t i = 1; i < 3000; ++i) {
    size_t align = size_t{1} << (i % 7);
    size_t bytes = (i * 37) % 2000 + 1;
    auto* p = static_cast<char*>(arena.allocate(bytes, align));
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
    std::memset(p, static_cast<int>(i), bytes);
    got.emplace_back(p, bytes);
  }
  // Every allocation still holds its own fill: none overlapped another.
  for (size_t i = 0; i < got.size(); ++i) {
    auto [p, bytes] = got[i];
    for (size_t k = 0; k < bytes; ++k) ASSERT_EQ(p[k], static_cast<char>(i + 1));
  }
  EXPECT_GE(arena.bytes_reserved(), size_t{3000});
}

TEST(ArenaTest, RequestsLargerThanABlockGetTheirOwn) {
  Arena arena;
  arena.allocate(16, 8);
  size_t big = size_t{5} << 20;
  auto* p = static_cast<char*>(arena.allocate(big, 64));
  std::memset(p, 1, big);
  EXPECT_GE(arena.bytes_reserved(), big);
  auto* q = static_cast<char*>(arena.allocate(16, 8));
  EXPECT_TRUE(q < p || q >= p + big);
}

TEST(PageAllocatorTest, SmallAndLargeVectorsWork) {
  std::vector<int, PageAllocator<int>> small(100, 7);
  std::vector<int, PageAllocator<int>> large(size_t{3} << 20, 9);  // 12 MiB: mapped pages
  EXPECT_EQ(small[99], 7);
  EXPECT_EQ(large.back(), 9);
  large.resize(large.size() * 2, 1);
  EXPECT_EQ(large[10], 9);
  EXPECT_EQ(large.back(), 1);
}

}  // namespace
}  // namespace kiln
