#include "kiln/ir/detail/name_table.h"

#include <charconv>

#include "kiln/ir/node.h"

namespace kiln::detail {
namespace {

Node* const kTombstone = reinterpret_cast<Node*>(uintptr_t{1});
constexpr size_t kNpos = ~size_t{0};
// A number this far past the end of its stem's array goes to the hash table instead, so a name
// such as `layer_900000000` cannot make a huge array.
constexpr uint32_t kMaxGap = 4096;

// Splits "stem_N" (N decimal without leading zeros, at most 9 digits, stem not empty).
bool split_numbered(std::string_view name, std::string_view* stem, uint32_t* number) {
  size_t underscore = name.find_last_of('_');
  if (underscore == std::string_view::npos || underscore == 0) return false;
  std::string_view digits = name.substr(underscore + 1);
  if (digits.empty() || digits.size() > 9 || (digits[0] == '0' && digits.size() > 1)) return false;
  uint32_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  *stem = name.substr(0, underscore);
  *number = n;
  return true;
}

}  // namespace

// ---- HashedNames

uint64_t HashedNames::hash_of(std::string_view name) {
  // FNV-1a, then a murmur finalizer so the low bits used for the slot index mix well.
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

size_t HashedNames::probe(std::string_view name, uint64_t h) const {
  if (slots_.empty()) return kNpos;
  size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.node == nullptr) return kNpos;
    if (s.node != kTombstone && s.hash == h && s.node->name() == name) return i;
  }
}

Node* HashedNames::find(std::string_view name) const {
  size_t i = probe(name, hash_of(name));
  return i == kNpos ? nullptr : slots_[i].node;
}

bool HashedNames::insert(std::string_view name, Node* node) {
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

bool HashedNames::erase(std::string_view name) {
  size_t i = probe(name, hash_of(name));
  if (i == kNpos) return false;
  slots_[i].node = kTombstone;
  --size_;
  return true;
}

void HashedNames::grow() {
  auto old = std::move(slots_);
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

// ---- NameTable

Node** NameTable::number_slot(Stem* stem, uint32_t n, bool create) {
  std::vector<Node*>& by_number = stem->by_number;
  if (n >= by_number.size()) {
    if (!create || n - by_number.size() > kMaxGap) return nullptr;
    by_number.resize(n + 1, nullptr);
  }
  return &by_number[n];
}

NameTable::Place NameTable::place(std::string_view name, bool create) {
  std::string_view stem_name;
  uint32_t n = 0;
  if (!split_numbered(name, &stem_name, &n)) return {};
  auto it = stems_.find(stem_name);
  if (it == stems_.end()) {
    if (!create) return {};
    it = stems_.emplace(std::string(stem_name), Stem()).first;
  }
  return {&it->second, number_slot(&it->second, n, create)};
}

Node* NameTable::find(std::string_view name) const {
  std::string_view stem_name;
  uint32_t n = 0;
  if (split_numbered(name, &stem_name, &n)) {
    // Every stem_N name has its stem entry, made when it was inserted.
    auto it = stems_.find(stem_name);
    if (it == stems_.end()) return nullptr;
    const Stem& stem = it->second;
    if (n < stem.by_number.size() && stem.by_number[n] != nullptr) return stem.by_number[n];
    if (stem.hashed == 0) return nullptr;
  }
  return hashed_.find(name);
}

bool NameTable::insert(std::string_view name, Node* node) {
  return insert_at(place(name, true), name, node);
}

bool NameTable::insert_at(Place at, std::string_view name, Node* node) {
  if (at.slot != nullptr) {
    // The array slot may be free while an earlier stem_N sits in the hash table: it went there
    // when N was far past the array's end, before the array grew.
    if (*at.slot != nullptr || (at.stem->hashed > 0 && hashed_.find(name) != nullptr)) {
      return false;
    }
    *at.slot = node;
  } else {
    if (!hashed_.insert(name, node)) return false;
    if (at.stem != nullptr) ++at.stem->hashed;
  }
  ++size_;
  return true;
}

std::string NameTable::insert_unique(std::string_view base, Node* node) {
  auto it = stems_.find(base);
  if (it == stems_.end() || !it->second.base_taken) {
    if (insert(base, node)) return std::string(base);
    it = stems_.try_emplace(std::string(base)).first;  // stems only for bases that collided
    it->second.base_taken = true;
  }
  Stem* stem = &it->second;
  std::string name;
  char digits[16];
  for (;;) {
    uint32_t n = ++stem->last_number;
    auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), n);
    name.assign(it->first).push_back('_');
    name.append(digits, end);
    // Past nine digits a name is no longer "numbered" (split_numbered) and is looked up hashed.
    Place at = end - digits <= 9 ? Place{stem, number_slot(stem, n, true)} : Place{};
    if (insert_at(at, name, node)) return name;
  }
}

bool NameTable::erase(std::string_view name) {
  Place at = place(name, false);
  if (at.slot != nullptr && *at.slot != nullptr) {
    *at.slot = nullptr;
  } else if (hashed_.erase(name)) {
    if (at.stem != nullptr) --at.stem->hashed;
  } else {
    return false;
  }
  --size_;
  return true;
}

}  // namespace kiln::detail
