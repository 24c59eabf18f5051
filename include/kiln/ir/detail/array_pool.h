// ArrayPool: storage for short arrays (a node's args, its operand uses) carved from an Arena
// and recycled by length, so replacing a node's args does not leak arena memory. Arrays longer
// than kMaxPooled (a concat of many inputs) come from the heap.
#pragma once

#include <array>
#include <cstdint>
#include <new>

#include "kiln/core/arena.h"

namespace kiln::detail {

template <typename T>
class ArrayPool {
 public:
  explicit ArrayPool(Arena* arena) : arena_(arena) {}
  ArrayPool(const ArrayPool&) = delete;
  ArrayPool& operator=(const ArrayPool&) = delete;

  /// Uninitialized storage for `n` > 0 elements.
  T* take(uint32_t n) {
    if (n > kMaxPooled) return static_cast<T*>(::operator new(n * sizeof(T)));
    if (Free* f = free_[n]) {
      free_[n] = f->next;
      return reinterpret_cast<T*>(f);
    }
    return static_cast<T*>(arena_->allocate(n * sizeof(T), alignof(T)));
  }
  /// Returns storage from take(n); its elements must be destroyed already.
  void give(T* p, uint32_t n) {
    if (p == nullptr) return;
    if (n > kMaxPooled) {
      ::operator delete(p);
      return;
    }
    auto* f = reinterpret_cast<Free*>(p);
    f->next = free_[n];
    free_[n] = f;
  }

 private:
  static constexpr uint32_t kMaxPooled = 32;
  struct Free {
    Free* next;
  };
  static_assert(sizeof(T) >= sizeof(Free) && alignof(T) >= alignof(Free));

  Arena* arena_;
  std::array<Free*, kMaxPooled + 1> free_{};
};

}  // namespace kiln::detail
