// NameTable: node name -> Node*, an open-addressing hash table that stores only (hash, node)
// pairs and compares against the node's own name string. One probe usually touches one cache
// line, which matters when a graph has a million nodes (std::unordered_map chases a heap node
// per lookup).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln {
class Node;
namespace detail {

class NameTable {
 public:
  /// Node named `name`, or null.
  Node* find(std::string_view name) const;
  /// Enters `node` under `name` (which must view node's own name); false if the name is taken.
  bool insert(std::string_view name, Node* node);
  /// Removes `name`; false if absent.
  bool erase(std::string_view name);
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    Node* node = nullptr;  // null: empty; kTombstone: erased
  };
  static uint64_t hash_of(std::string_view name);
  size_t probe(std::string_view name, uint64_t h) const;  // slot holding name, or npos
  void grow();

  std::vector<Slot> slots_;
  size_t size_ = 0;
  size_t used_ = 0;  // live + tombstones
};

}  // namespace detail
}  // namespace kiln
