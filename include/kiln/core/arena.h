// Arena: a bump allocator for objects that live as long as their owner (a graph's nodes and
// their argument arrays). Blocks grow geometrically; from 2 MiB on they are 2 MiB-aligned and
// marked for transparent huge pages, because first-touch page faults dominate building a
// million-node graph (one fault per 4 KiB page costs more than the node itself).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln {

class Arena {
 public:
  Arena() = default;
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  /// `bytes` of uninitialized memory aligned to `align` (a power of two, at most 4096). Never
  /// null: aborts when the system is out of memory, like operator new.
  void* allocate(size_t bytes, size_t align) {
    auto p = (reinterpret_cast<uintptr_t>(cur_) + align - 1) & ~(uintptr_t{align} - 1);
    if (p + bytes > reinterpret_cast<uintptr_t>(end_)) return allocate_slow(bytes, align);
    cur_ = reinterpret_cast<char*>(p + bytes);
    return reinterpret_cast<void*>(p);
  }
  /// Total bytes mapped so far.
  size_t bytes_reserved() const { return reserved_; }

 private:
  struct Block {
    void* base;
    size_t size;
  };
  void* allocate_slow(size_t bytes, size_t align);

  std::vector<Block> blocks_;
  char* cur_ = nullptr;
  char* end_ = nullptr;
  size_t reserved_ = 0;
};

/// Large zeroed mappings, huge-page backed when they span at least one huge page. Small sizes
/// fall back to the heap. release_pages must get the same size.
void* map_pages(size_t bytes);
void release_pages(void* p, size_t bytes);

/// std::allocator that maps large arrays with map_pages (a hash table of a million nodes).
template <typename T>
struct PageAllocator {
  using value_type = T;
  PageAllocator() = default;
  template <typename U>
  PageAllocator(const PageAllocator<U>&) {}  // NOLINT
  T* allocate(size_t n) { return static_cast<T*>(map_pages(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { release_pages(p, n * sizeof(T)); }
  bool operator==(const PageAllocator&) const { return true; }
};

}  // namespace kiln
