#include "kiln/core/tensor.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kiln/core/memory.h"

namespace kiln {

namespace {

// 64-byte aligned, zeroed; null on failure.
uint8_t* aligned_zeroed(size_t size) {
  size_t rounded = (size + 63) / 64 * 64;
  if (rounded < size) return nullptr;
  if (rounded == 0) rounded = 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
  if (p != nullptr) std::memset(p, 0, rounded);
  return p;
}

// Elided blocks from this size on map untouched anonymous pages instead of allocating.
constexpr size_t kMapElidedBytes = size_t{1} << 20;

}  // namespace

HeapStorage::HeapStorage(size_t size) : data_(aligned_zeroed(size)), size_(size) {
  if (data_ == nullptr) throw std::bad_alloc();
}

std::shared_ptr<HeapStorage> HeapStorage::try_allocate(size_t size) {
  uint8_t* p = aligned_zeroed(size);
  if (p == nullptr) return nullptr;
  return std::shared_ptr<HeapStorage>(new (std::nothrow) HeapStorage(Adopt{}, p, size));
}

HeapStorage::~HeapStorage() { std::free(data_); }

std::shared_ptr<ElidedStorage> ElidedStorage::create(size_t size) {
  if (size < kMapElidedBytes) {
    auto* p = static_cast<uint8_t*>(std::calloc(size == 0 ? 1 : size, 1));
    if (p == nullptr) return nullptr;
    return std::shared_ptr<ElidedStorage>(new ElidedStorage(p, size, false));
  }
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return std::shared_ptr<ElidedStorage>(new ElidedStorage(static_cast<const uint8_t*>(p), size, true));
}

ElidedStorage::~ElidedStorage() {
  if (mapped_) {
    munmap(const_cast<uint8_t*>(data_), size_);
  } else {
    std::free(const_cast<uint8_t*>(data_));
  }
}

std::optional<int64_t> checked_numel(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > INT64_MAX / d) return std::nullopt;
    n *= d;
  }
  return n;
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  auto n = checked_numel(shape_);
  KILN_CHECK(n.has_value());
  numel_ = *n;
  storage_ = std::make_shared<HeapStorage>(nbytes());
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape, std::shared_ptr<const Storage> storage,
               size_t offset)
    : dtype_(dtype), shape_(std::move(shape)), storage_(std::move(storage)), offset_(offset) {
  auto n = checked_numel(shape_);
  KILN_CHECK(n.has_value());
  numel_ = *n;
  KILN_CHECK(storage_ == nullptr || offset_ + nbytes() <= storage_->size());
}

namespace {

// Bytes of `shape`, or invalid argument naming `what` for a negative or overflowing shape.
Result<size_t> checked_bytes(DType dtype, std::span<const int64_t> shape, std::string_view what) {
  auto n = checked_numel(shape);
  size_t esize = dtype_size(dtype);
  if (!n || static_cast<uint64_t>(*n) > SIZE_MAX / esize) {
    return invalid_argument("{}: shape [{}] has a negative dim or overflows", what,
                            fmt::join(shape, ", "));
  }
  return static_cast<size_t>(*n) * esize;
}

}  // namespace

Result<size_t> checked_tensor_bytes(DType dtype, std::span<const int64_t> shape, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(size_t bytes, checked_bytes(dtype, shape, what));
  KILN_RETURN_IF_ERROR(check_memory(bytes, fmt::format("{} ({})", what, format_shape(dtype, shape))));
  return bytes;
}

Result<Tensor> Tensor::create(DType dtype, std::vector<int64_t> shape, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(size_t bytes, checked_tensor_bytes(dtype, shape, what));
  auto storage = HeapStorage::try_allocate(bytes);
  if (storage == nullptr) {
    return resource_exhausted("{} ({}): cannot allocate {}", what, format_shape(dtype, shape),
                              format_bytes(bytes));
  }
  return Tensor(dtype, std::move(shape), std::move(storage));
}

Result<Tensor> Tensor::elided(DType dtype, std::vector<int64_t> shape, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(size_t bytes, checked_bytes(dtype, shape, what));
  auto storage = ElidedStorage::create(bytes);
  if (storage == nullptr) {
    return resource_exhausted("{} ({}): cannot map {} of zeros", what, format_shape(dtype, shape),
                              format_bytes(bytes));
  }
  return Tensor(dtype, std::move(shape), std::move(storage));
}

bool is_elided(const Storage& s) { return dynamic_cast<const ElidedStorage*>(&s) != nullptr; }

bool Tensor::elided() const { return storage_ != nullptr && is_elided(*storage_); }

void* Tensor::mutable_data() {
  if (storage_ == nullptr) return nullptr;
  auto* heap = dynamic_cast<const HeapStorage*>(storage_.get());
  bool exclusive = heap != nullptr && storage_.use_count() == 1 && offset_ == 0;
  if (!exclusive) {
    auto fresh = std::make_shared<HeapStorage>(nbytes());
    std::memcpy(fresh->mutable_data(), data(), nbytes());
    storage_ = fresh;
    offset_ = 0;
    return fresh->mutable_data();
  }
  return const_cast<HeapStorage*>(heap)->mutable_data();
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  Tensor t = *this;
  auto n = checked_numel(shape);
  KILN_CHECK(n.has_value() && *n == numel_);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes() > 0) std::memcpy(t.mutable_data(), data(), nbytes());
  return t;
}

double Tensor::scalar_at(int64_t i) const {
  const void* p = data();
  switch (dtype_) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBF16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kF64: return static_cast<const double*>(p)[i];
    case DType::kI64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::kI32: return static_cast<const int32_t*>(p)[i];
    case DType::kI16: return static_cast<const int16_t*>(p)[i];
    case DType::kU16: return static_cast<const uint16_t*>(p)[i];
    case DType::kU32: return static_cast<const uint32_t*>(p)[i];
    case DType::kU64: return static_cast<double>(static_cast<const uint64_t*>(p)[i]);
    case DType::kI8: return static_cast<const int8_t*>(p)[i];
    case DType::kU8: return static_cast<const uint8_t*>(p)[i];
    case DType::kBool: return static_cast<const uint8_t*>(p)[i] != 0 ? 1.0 : 0.0;
  }
  return 0;
}

void Tensor::set_scalar_at(int64_t i, double v) {
  void* p = mutable_data();
  switch (dtype_) {
    case DType::kF32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v)); break;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::kF64: static_cast<double*>(p)[i] = v; break;
    case DType::kI64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::kI32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::kI16: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); break;
    case DType::kU16: static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); break;
    case DType::kU32: static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); break;
    case DType::kU64: static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); break;
    case DType::kI8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case DType::kU8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case DType::kBool: static_cast<uint8_t*>(p)[i] = v != 0 ? 1 : 0; break;
  }
}

std::string format_shape(DType dtype, std::span<const int64_t> shape) {
  return fmt::format("{}[{}]", dtype_name(dtype), fmt::join(shape, ", "));
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t mant = x & 0x7fffff;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      float f = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -f : f;
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000 | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bf16_to_float(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace kiln
