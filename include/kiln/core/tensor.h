// Tensor: a static-shape, dense, row-major buffer whose bytes are shared copy-on-write.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/core/status.h"

namespace kiln {

/// Bytes behind one or more tensors. Immutable once shared; see Tensor::mutable_data.
class Storage {
 public:
  virtual ~Storage() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
  /// data() and size() as one span.
  std::span<const uint8_t> bytes() const { return {data(), size()}; }
};

/// Storage that owns a 64-byte aligned, zero-filled heap block.
class HeapStorage final : public Storage {
 public:
  /// Throws std::bad_alloc when the memory is not there: for sizes kiln itself chose.
  explicit HeapStorage(size_t size);
  /// Null when the memory is not there: for sizes that came from input (see Tensor::create).
  static std::shared_ptr<HeapStorage> try_allocate(size_t size);
  ~HeapStorage() override;
  HeapStorage(const HeapStorage&) = delete;
  HeapStorage& operator=(const HeapStorage&) = delete;
  const uint8_t* data() const override { return data_; }
  uint8_t* mutable_data() { return data_; }
  size_t size() const override { return size_; }

 private:
  struct Adopt {};
  HeapStorage(Adopt, uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

/// Storage that owns a byte vector (a delegate blob handed over by a backend).
class VectorStorage final : public Storage {
 public:
  explicit VectorStorage(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  const uint8_t* data() const override { return bytes_.data(); }
  size_t size() const override { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

/// Zeros standing for data that a text form gave by size only ("<N bytes>"): they read as zeros,
/// cost no memory until written (large blocks map untouched pages), and print by size again.
class ElidedStorage final : public Storage {
 public:
  /// Null when `size` bytes cannot be mapped.
  static std::shared_ptr<ElidedStorage> create(size_t size);
  ~ElidedStorage() override;
  ElidedStorage(const ElidedStorage&) = delete;
  ElidedStorage& operator=(const ElidedStorage&) = delete;
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  ElidedStorage(const uint8_t* data, size_t size, bool mapped)
      : data_(data), size_(size), mapped_(mapped) {}
  const uint8_t* data_;
  size_t size_;
  bool mapped_;
};

/// Storage that views bytes owned by someone else (an mmap, a program file), kept alive by `owner`.
class ExternalStorage final : public Storage {
 public:
  ExternalStorage(const uint8_t* data, size_t size, std::shared_ptr<const void> owner)
      : data_(data), size_(size), owner_(std::move(owner)) {}
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  std::shared_ptr<const void> owner_;
};

/// True if `s` is an ElidedStorage.
bool is_elided(const Storage& s);

/// Number of elements of a static shape (1 for a scalar); nullopt on overflow or a negative dim.
std::optional<int64_t> checked_numel(std::span<const int64_t> shape);

/// Bytes a tensor of `shape` takes, when it may be allocated: invalid argument naming `what` for
/// a negative or overflowing shape, resource exhausted past the memory limit (check_memory).
/// What Tensor::create checks before it allocates.
Result<size_t> checked_tensor_bytes(DType dtype, std::span<const int64_t> shape, std::string_view what);

/// A dense row-major tensor. Copies share storage; the first write through mutable_data() on a
/// shared tensor copies its bytes (so a duplicated constant costs nothing until written).
class Tensor {
 public:
  Tensor() = default;
  /// Zero-filled tensor. Shape must be valid (non-negative, no overflow): callers check input.
  Tensor(DType dtype, std::vector<int64_t> shape);
  /// A view of `storage` starting at `offset` bytes; the caller checked it fits.
  Tensor(DType dtype, std::vector<int64_t> shape, std::shared_ptr<const Storage> storage,
         size_t offset = 0);

  /// Checked constructor for shapes that came from input: a negative or overflowing shape is
  /// invalid, a size over memory_limit() or that cannot be allocated is resource exhausted; the
  /// messages name `what` ("initializer 'w'", "input 'x'").
  static Result<Tensor> create(DType dtype, std::vector<int64_t> shape,
                               std::string_view what = "tensor");
  /// A tensor of zeros whose data was elided ("<N bytes>" in text); see ElidedStorage.
  static Result<Tensor> elided(DType dtype, std::vector<int64_t> shape,
                               std::string_view what = "tensor");

  bool defined() const { return storage_ != nullptr || numel_ == 0; }
  /// True if the bytes are an ElidedStorage (printed by size only, read back as zeros).
  bool elided() const;
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  const void* data() const { return storage_ ? storage_->data() + offset_ : nullptr; }
  template <typename T>
  const T* data_as() const { return static_cast<const T*>(data()); }
  /// Writable bytes; copies them first if they are shared with another tensor or not owned.
  void* mutable_data();
  template <typename T>
  T* mutable_data_as() { return static_cast<T*>(mutable_data()); }

  /// True if this and `other` view the same bytes (for tests of copy-on-write).
  bool shares_storage_with(const Tensor& other) const {
    return storage_ != nullptr && storage_ == other.storage_;
  }
  const std::shared_ptr<const Storage>& storage() const { return storage_; }
  size_t storage_offset() const { return offset_; }

  /// Same bytes viewed with another shape of equal element count.
  Tensor reshaped(std::vector<int64_t> shape) const;
  /// A deep copy that owns its bytes.
  Tensor clone() const;

  /// Element i converted to double (any dtype); for tests, summaries and small constants.
  double scalar_at(int64_t i) const;
  /// Sets element i from a double, converting to the dtype.
  void set_scalar_at(int64_t i, double v);

 private:
  DType dtype_ = DType::kF32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::shared_ptr<const Storage> storage_;
  size_t offset_ = 0;
};

/// "f32[2, 3]" for a static shape.
std::string format_shape(DType dtype, std::span<const int64_t> shape);

/// fp16 / bf16 conversions (round to nearest even).
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);

}  // namespace kiln
