// DelegateMappingBuilder (ExecuTorch's exir/backend/utils.py): builds the map from delegate debug
// identifiers to the debug handles of the nodes each delegate instruction covers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/node.h"

namespace kiln {

/// A delegate debug identifier: an integer or a string, as in ExecuTorch.
using DelegateIdentifier = std::variant<int64_t, std::string>;

/// "3" or "'conv_1'" for messages.
std::string format_identifier(const DelegateIdentifier& id);

/// One entry to insert. Exactly one of `nodes` and `handles` must be set. A node without a
/// debug handle (or a null handle) is skipped; an entry left with none is an error.
struct DelegateMappingEntry {
  std::optional<std::vector<const Node*>> nodes;            ///< borrowed for the call
  std::optional<std::vector<std::optional<int64_t>>> handles;
  std::optional<DelegateIdentifier> identifier;  ///< required unless identifiers are generated
};

/// Builds a delegate's debug-handle map. With generated identifiers, each entry gets the next
/// integer (from 0) and giving one is an error; otherwise each entry must give a new identifier.
class DelegateMappingBuilder {
 public:
  /// `generated_identifiers`: number entries 0, 1, ... instead of taking given identifiers.
  explicit DelegateMappingBuilder(bool generated_identifiers = false)
      : generated_identifiers_(generated_identifiers) {}

  /// Adds an entry; returns the identifier used. Errors (nothing inserted): an identifier given
  /// to a generating builder, a duplicate identifier, nodes and handles both or neither given,
  /// no identifier for a non-generating builder, no valid debug handle.
  Result<DelegateIdentifier> insert_delegate_mapping_entry(const DelegateMappingEntry& entry);
  /// Shorthands for the two entry forms.
  Result<DelegateIdentifier> insert(const std::vector<const Node*>& nodes,
                                    std::optional<DelegateIdentifier> identifier = std::nullopt);
  Result<DelegateIdentifier> insert_handles(const std::vector<std::optional<int64_t>>& handles,
                                            std::optional<DelegateIdentifier> identifier = std::nullopt);

  /// Identifier -> sorted, distinct debug handles.
  std::map<DelegateIdentifier, std::vector<int64_t>> get_delegate_mapping() const;
  /// The mapping with integer identifiers, as stored in LoweredModule::debug_handle_map; an
  /// error names the first string identifier.
  Result<std::map<int64_t, std::vector<int64_t>>> get_integer_delegate_mapping() const;

 private:
  bool generated_identifiers_;
  int64_t next_index_ = 0;
  std::map<DelegateIdentifier, std::set<int64_t>> map_;
};

}  // namespace kiln
