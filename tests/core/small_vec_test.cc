// SmallVec: inline storage, spilling to the heap, and the std::vector subset kiln relies on.
#include "kiln/core/small_vec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln {
namespace {

using Strs = SmallVec<std::string, 2>;
// Strings longer than the SSO buffer, so a missed destructor or a double free shows up under
// ASan and LeakSanitizer.
std::string s(int i) { return "a string too long for the small buffer #" + std::to_string(i); }

TEST(SmallVecTest, StaysInlineUpToNThenSpills) {
  Strs v;
  EXPECT_EQ(v.capacity(), 2u);
  v.push_back(s(0));
  v.emplace_back(s(1));
  const std::string* inline_data = v.data();
  EXPECT_EQ(v.capacity(), 2u);
  v.push_back(s(2));
  EXPECT_NE(v.data(), inline_data);
  EXPECT_GE(v.capacity(), 3u);
  EXPECT_EQ(std::vector<std::string>(v), (std::vector<std::string>{s(0), s(1), s(2)}));
}

TEST(SmallVecTest, CopyAndMoveInlineAndHeap) {
  for (int n : {1, 5}) {
    Strs a;
    for (int i = 0; i < n; ++i) a.push_back(s(i));
    Strs b = a;
    EXPECT_EQ(a, b);
    Strs c = std::move(a);
    EXPECT_EQ(c, b);
    EXPECT_TRUE(a.empty());  // NOLINT: moved-from is specified empty
    a = c;
    EXPECT_EQ(a, b);
    c = std::move(b);
    EXPECT_EQ(c, a);
    c = c;  // NOLINT: self-assignment keeps the value
    EXPECT_EQ(c, a);
  }
}

TEST(SmallVecTest, InsertEraseResizeAssign) {
  SmallVec<int, 3> v{1, 2, 3};
  v.insert(v.begin() + 1, 9);
  EXPECT_EQ(std::vector<int>(v), (std::vector<int>{1, 9, 2, 3}));
  v.insert(v.begin(), v.begin() + 2, v.end());  // aliasing range that forces a spill
  EXPECT_EQ(std::vector<int>(v), (std::vector<int>{2, 3, 1, 9, 2, 3}));
  v.erase(v.begin() + 1, v.begin() + 4);
  EXPECT_EQ(std::vector<int>(v), (std::vector<int>{2, 2, 3}));
  v.erase(v.begin());
  v.insert(v.end(), 2, 7);
  EXPECT_EQ(std::vector<int>(v), (std::vector<int>{2, 3, 7, 7}));
  v.resize(2);
  v.resize(4, 5);
  EXPECT_EQ(std::vector<int>(v), (std::vector<int>{2, 3, 5, 5}));
  v.assign(3, 1);
  EXPECT_EQ(std::vector<int>(v), (std::vector<int>{1, 1, 1}));
  v.pop_back();
  EXPECT_EQ(v.back(), 1);
  EXPECT_EQ(v.size(), 2u);
  std::vector<int> rev(v.rbegin(), v.rend());
  EXPECT_EQ(rev.size(), 2u);
}

TEST(SmallVecTest, ConvertsFromAndComparesWithStdVector) {
  std::vector<int> src{4, 5, 6, 7};
  SmallVec<int, 2> v = src;
  EXPECT_TRUE(v == src);
  EXPECT_FALSE(v != src);
  src.push_back(8);
  EXPECT_FALSE(v == src);
  SmallVec<int, 2> w = std::move(src);
  EXPECT_EQ(w.size(), 5u);
}

TEST(SmallVecTest, NonTrivialElementsSurviveEveryOperation) {
  Strs v;
  for (int i = 0; i < 10; ++i) v.insert(v.begin(), s(i));
  v.erase(v.begin() + 2, v.begin() + 5);
  v.resize(12);
  v.resize(3);
  EXPECT_EQ(std::vector<std::string>(v), (std::vector<std::string>{s(9), s(8), s(4)}));
  v.clear();
  EXPECT_TRUE(v.empty());
}

}  // namespace
}  // namespace kiln
