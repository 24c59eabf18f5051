#include "kiln/core/arena.h"

#include <sys/mman.h>

#include <algorithm>

#include "kiln/core/status.h"

namespace kiln {
namespace {

constexpr size_t kFirstBlock = size_t{64} << 10;  // small graphs stay small
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kMaxBlock = size_t{64} << 20;
constexpr size_t kMapThreshold = size_t{1} << 20;

}  // namespace

void* map_pages(size_t bytes) {
  if (bytes < kMapThreshold) return ::operator new(bytes);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  KILN_CHECK(p != MAP_FAILED);
  madvise(p, bytes, MADV_HUGEPAGE);  // advice: failure is harmless
  return p;
}

void release_pages(void* p, size_t bytes) {
  if (bytes < kMapThreshold) {
    ::operator delete(p);
  } else {
    munmap(p, bytes);
  }
}

Arena::~Arena() {
  for (const Block& b : blocks_) munmap(b.base, b.size);
}

void* Arena::allocate_slow(size_t bytes, size_t align) {
  size_t size = blocks_.empty() ? kFirstBlock : std::min(blocks_.back().size * 2, kMaxBlock);
  if (bytes + align > size) size = (bytes + align + kHugePage - 1) & ~(kHugePage - 1);
  bool huge = size >= kHugePage;
  // Over-map by one huge page so the block can start on a huge-page boundary.
  size_t mapped = huge ? size + kHugePage : size;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  KILN_CHECK(base != MAP_FAILED);
  auto start = reinterpret_cast<uintptr_t>(base);
  if (huge) {
    start = (start + kHugePage - 1) & ~(kHugePage - 1);
    madvise(reinterpret_cast<void*>(start), size, MADV_HUGEPAGE);  // advice: failure is harmless
  }
  blocks_.push_back({base, mapped});
  reserved_ += mapped;
  cur_ = reinterpret_cast<char*>(start);
  end_ = cur_ + size;
  return allocate(bytes, align);
}

}  // namespace kiln
