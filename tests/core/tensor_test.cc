#include "kiln/core/tensor.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(TensorTest, CopiesShareBytesUntilWritten) {
  Tensor a(DType::kF32, {2, 3});
  a.mutable_data_as<float>()[0] = 1.5f;
  Tensor b = a;
  EXPECT_TRUE(a.shares_storage_with(b));
  b.mutable_data_as<float>()[0] = 2.5f;
  EXPECT_FALSE(a.shares_storage_with(b));
  EXPECT_EQ(a.data_as<float>()[0], 1.5f);
  EXPECT_EQ(b.data_as<float>()[0], 2.5f);
}

TEST(TensorTest, ExclusiveWriteDoesNotCopy) {
  Tensor a(DType::kI32, {4});
  const void* before = a.data();
  a.mutable_data_as<int32_t>()[3] = 7;
  EXPECT_EQ(a.data(), before);
}

TEST(TensorTest, CreateRejectsNegativeAndHugeShapes) {
  EXPECT_FALSE(Tensor::create(DType::kF32, {-1, 2}).ok());
  EXPECT_FALSE(Tensor::create(DType::kF32, {int64_t{1} << 40, 1 << 20}).ok());
  EXPECT_TRUE(Tensor::create(DType::kF32, {0, 5}).ok());
}

TEST(TensorTest, HalfAndBfloatRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(half_to_float(float_to_half(f)), f) << f;
  }
  EXPECT_EQ(bf16_to_float(float_to_bf16(3.0f)), 3.0f);
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 1.0f / 4096)), 1.0f);  // ties to even
}

TEST(TensorTest, ScalarAccessConvertsEveryDtype) {
  for (int d = 0; d < kNumDTypes; ++d) {
    Tensor t(static_cast<DType>(d), {3});
    t.set_scalar_at(1, 1.0);
    EXPECT_EQ(t.scalar_at(1), 1.0) << dtype_name(static_cast<DType>(d));
    EXPECT_EQ(t.scalar_at(0), 0.0);
  }
}

TEST(DTypeTest, NamesRoundTripAndPromotionFollowsTorch) {
  for (int d = 0; d < kNumDTypes; ++d) {
    auto t = static_cast<DType>(d);
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  }
  EXPECT_FALSE(dtype_from_name("f128").has_value());
  EXPECT_EQ(promote_types(DType::kI64, DType::kF32), DType::kF32);
  EXPECT_EQ(promote_types(DType::kU8, DType::kI8), DType::kI16);
  EXPECT_EQ(promote_types(DType::kF16, DType::kBF16), DType::kF32);
  EXPECT_EQ(promote_types(DType::kBool, DType::kI32), DType::kI32);
  EXPECT_EQ(promote_types(DType::kF64, DType::kF16), DType::kF64);
  EXPECT_EQ(promote_types(DType::kU32, DType::kI32), DType::kI64);
  EXPECT_EQ(promote_types(DType::kU64, DType::kI8), DType::kI64);
  EXPECT_EQ(promote_types(DType::kU32, DType::kU64), DType::kU64);
  EXPECT_EQ(promote_types(DType::kU8, DType::kU32), DType::kU32);
  EXPECT_EQ(dtype_from_name("u64"), DType::kU64);
  EXPECT_EQ(dtype_size(DType::kU32), 4u);
}

}  // namespace
}  // namespace kiln
