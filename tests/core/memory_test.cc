// The memory limit, byte sizes, checked tensor allocation and elided storage.
#include "kiln/core/memory.h"

#include <gtest/gtest.h>

#include "kiln/core/tensor.h"

namespace kiln {
namespace {

// Sets a limit for one test and restores the previous one.
class ScopedLimit {
 public:
  explicit ScopedLimit(size_t bytes) : before_(memory_limit()) { set_memory_limit(bytes); }
  ~ScopedLimit() { set_memory_limit(before_); }

 private:
  size_t before_;
};

TEST(Memory, ByteSizesParseAndFormat) {
  EXPECT_EQ(*parse_byte_size("4096"), 4096u);
  EXPECT_EQ(*parse_byte_size("512K"), 512u << 10);
  EXPECT_EQ(*parse_byte_size("1.5GiB"), uint64_t{3} << 29);
  EXPECT_EQ(*parse_byte_size("2g"), uint64_t{2} << 30);
  EXPECT_EQ(*parse_byte_size("64MB"), uint64_t{64} << 20);
  EXPECT_EQ(*parse_byte_size("1TiB"), uint64_t{1} << 40);
  for (const char* bad : {"", "lots", "-1", "1.2.3", "4X", "1e9", "99999999999999999999999"}) {
    auto r = parse_byte_size(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_EQ(parse_byte_size("lots").status().message(),
            "'lots' is not a byte size (expected e.g. 4096, 512K, 1.5GiB)");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(138536), "135.3 KiB");
  EXPECT_EQ(format_bytes(uint64_t{16} << 30), "16.0 GiB");
}

TEST(Memory, DefaultLimitIsTheMemoryAvailable) {
  // Unless KILN_MAX_MEMORY is set, the default is what the machine has free: more than nothing,
  // less than the address space.
  if (std::getenv("KILN_MAX_MEMORY") == nullptr) {
    EXPECT_EQ(memory_limit_source(), "the memory available");
  }
  EXPECT_GT(memory_limit(), size_t{1} << 20);
  EXPECT_LT(memory_limit(), size_t{1} << 50);
}

TEST(Memory, TensorsOverTheLimitAreResourceExhaustedAndNamed) {
  ScopedLimit limit(size_t{1} << 20);
  set_memory_limit_source("--max-memory");
  auto t = Tensor::create(DType::kF32, {1024, 1024}, "input 'x'");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(t.status().message(),
            "input 'x' (f32[1024, 1024]) needs 4.0 MiB, more than kiln's memory limit of 1.0 MiB "
            "(--max-memory)");
  EXPECT_TRUE(Tensor::create(DType::kF32, {256, 1024}, "input 'x'").ok());
  set_memory_limit_source("the set limit");
  EXPECT_EQ(check_memory(2 << 20, "reading 'm.onnx'").message(),
            "reading 'm.onnx' needs 2.0 MiB, more than kiln's memory limit of 1.0 MiB (the set "
            "limit)");
}

TEST(Memory, AllocationThatCannotBeMadeIsAnErrorNotAnAbort) {
  // Within a huge limit, 2^60 bytes still cannot be had: the checked path says so.
  ScopedLimit limit(SIZE_MAX);
  EXPECT_EQ(HeapStorage::try_allocate(size_t{1} << 60), nullptr);
  auto t = Tensor::create(DType::kU8, {int64_t{1} << 60}, "constant 'w'");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(t.status().message(), "constant 'w' (u8[1152921504606846976]): cannot allocate 1.0 EiB");
  auto bad = Tensor::create(DType::kF64, {int64_t{1} << 62, 4}, "constant 'w'");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(Memory, ElidedTensorsAreZerosThatCostNothing) {
  auto small = Tensor::elided(DType::kF32, {4});
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(small->elided());
  EXPECT_EQ(small->scalar_at(3), 0.0);
  // 1 GiB of zeros: mapped, not allocated, so it fits any memory limit.
  ScopedLimit limit(size_t{1} << 20);
  auto big = Tensor::elided(DType::kF32, {int64_t{1} << 28}, "constant 'w'");
  ASSERT_TRUE(big.ok()) << big.status().message();
  EXPECT_TRUE(big->elided());
  EXPECT_EQ(big->data_as<float>()[(int64_t{1} << 28) - 1], 0.0f);
  // Writing copies out of the elided bytes; the copy is an ordinary tensor.
  Tensor copy = *small;
  copy.set_scalar_at(0, 2.0);
  EXPECT_FALSE(copy.elided());
  EXPECT_TRUE(small->elided());
  EXPECT_FALSE(Tensor(DType::kF32, {2}).elided());
}

}  // namespace
}  // namespace kiln
