// NameTable: node name -> Node*. Graphs name nodes `stem_N` (add, add_1, add_2, ...), so such
// names live in one dense array per stem, indexed by N: entering the millionth generated name
// appends to an array the cache already holds, where a hash table would take a cache miss per
// name. Every other name, and numbers far past the end of their stem's array, goes to an
// open-addressing hash table that stores (hash, node) pairs and compares against the node's
// own name string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/core/arena.h"

namespace kiln {
class Node;
namespace detail {

/// Open-addressing hash table of names that do not fit a stem's array.
class HashedNames {
 public:
  Node* find(std::string_view name) const;
  bool insert(std::string_view name, Node* node);
  bool erase(std::string_view name);

 private:
  struct Slot {
    uint64_t hash = 0;
    Node* node = nullptr;  // null: empty; kTombstone: erased
  };
  static uint64_t hash_of(std::string_view name);
  size_t probe(std::string_view name, uint64_t h) const;  // slot holding name, or npos
  void grow();

  std::vector<Slot, PageAllocator<Slot>> slots_;
  size_t size_ = 0;
  size_t used_ = 0;  // live + tombstones
};

class NameTable {
 public:
  /// Node named `name`, or null.
  Node* find(std::string_view name) const;
  /// Enters `node` under `name` (which must view node's own name); false if the name is taken.
  bool insert(std::string_view name, Node* node);
  /// Enters `node` under `base` if that is free, else under base_N with the next free N, and
  /// returns the name given (the caller stores it as the node's name). Once `base` has been
  /// taken, later calls go straight to numbers after the last one given, as torch.fx does.
  std::string insert_unique(std::string_view base, Node* node);
  /// Removes `name`; false if absent.
  bool erase(std::string_view name);
  size_t size() const { return size_; }

 private:
  struct Stem {
    std::vector<Node*> by_number;  // by_number[N]: the node named stem_N, or null
    uint32_t hashed = 0;           // names stem_N kept in hashed_ (N far past the array)
    bool base_taken = false;       // insert_unique found the bare stem taken
    uint32_t last_number = 0;      // the last N insert_unique gave
  };
  struct StemHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  using Stems = std::unordered_map<std::string, Stem, StemHash, std::equal_to<>>;

  // Where `name` lives: for stem_N, its stem (made if `create`) and its array slot (made if
  // `create` and N is near the array's end); a null slot means hashed_.
  struct Place {
    Stem* stem = nullptr;
    Node** slot = nullptr;
  };
  Place place(std::string_view name, bool create);
  // The slot of stem_N in `stem`'s array (grown if `create` and N is near its end), or null.
  static Node** number_slot(Stem* stem, uint32_t n, bool create);
  // Enters `node` as `name`, whose place is `at`.
  bool insert_at(Place at, std::string_view name, Node* node);

  Stems stems_;  // every stem_N name entered has its stem here
  HashedNames hashed_;
  size_t size_ = 0;
};

}  // namespace detail
}  // namespace kiln
