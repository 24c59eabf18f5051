#include "kiln/ir/detail/name_table.h"

#include "kiln/ir/node.h"

namespace kiln::detail {
namespace {
Node* const kTombstone = reinterpret_cast<Node*>(uintptr_t{1});
constexpr size_t kNpos = ~size_t{0};
}  // namespace

uint64_t NameTable::hash_of(std::string_view name) {
  // FNV-1a, then a murmur finalizer so the low bits used for the slot index mix well.
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

size_t NameTable::probe(std::string_view name, uint64_t h) const {
  if (slots_.empty()) return kNpos;
  size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.node == nullptr) return kNpos;
    if (s.node != kTombstone && s.hash == h && s.node->name() == name) return i;
  }
}

Node* NameTable::find(std::string_view name) const {
  size_t i = probe(name, hash_of(name));
  return i == kNpos ? nullptr : slots_[i].node;
}

bool NameTable::insert(std::string_view name, Node* node) {
  if ((used_ + 1) * 4 >= slots_.size() * 3) grow();
  uint64_t h = hash_of(name);
  size_t mask = slots_.size() - 1;
  size_t tomb = kNpos;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.node == nullptr) {
      Slot& dst = tomb != kNpos ? slots_[tomb] : s;
      if (tomb == kNpos) ++used_;
      dst.hash = h;
      dst.node = node;
      ++size_;
      return true;
    }
    if (s.node == kTombstone) {
      if (tomb == kNpos) tomb = i;
    } else if (s.hash == h && s.node->name() == name) {
      return false;
    }
  }
}

bool NameTable::erase(std::string_view name) {
  size_t i = probe(name, hash_of(name));
  if (i == kNpos) return false;
  slots_[i].node = kTombstone;
  --size_;
  return true;
}

void NameTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  size_t cap = old.empty() ? 64 : old.size();
  while (size_ * 2 >= cap) cap *= 2;  // rehash drops tombstones; keep load under one half
  slots_.assign(cap, Slot{});
  used_ = size_;
  size_t mask = cap - 1;
  for (const Slot& s : old) {
    if (s.node == nullptr || s.node == kTombstone) continue;
    size_t i = s.hash & mask;
    while (slots_[i].node != nullptr) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace kiln::detail
