#include "kiln/lower/delegate_mapping.h"

namespace kiln {

std::string format_identifier(const DelegateIdentifier& id) {
  if (const int64_t* i = std::get_if<int64_t>(&id)) return std::to_string(*i);
  return fmt::format("'{}'", std::get<std::string>(id));
}

Result<DelegateIdentifier> DelegateMappingBuilder::insert_delegate_mapping_entry(
    const DelegateMappingEntry& entry) {
  if (generated_identifiers_ && entry.identifier.has_value()) {
    return invalid_argument(
        "delegate mapping: builders using generated identifiers can't manually add identifiers: "
        "{}; failed to add or update entry",
        format_identifier(*entry.identifier));
  }
  if (entry.identifier.has_value() && map_.count(*entry.identifier) != 0) {
    return invalid_argument(
        "delegate mapping: identifier {} was already inserted; duplicate delegate debug "
        "identifiers are not allowed",
        format_identifier(*entry.identifier));
  }
  if (entry.nodes.has_value() == entry.handles.has_value()) {
    return invalid_argument(
        "delegate mapping: only one of nodes or handles must be provided; either both were "
        "provided or neither were provided; failed to add or update entry");
  }
  if (!entry.identifier.has_value() && !generated_identifiers_) {
    return invalid_argument("delegate mapping: no identifier provided; failed to add or update entry");
  }
  std::set<int64_t> handles;
  if (entry.nodes.has_value()) {
    for (const Node* n : *entry.nodes) {
      if (n != nullptr && n->meta.debug_handle >= 0) handles.insert(n->meta.debug_handle);
    }
  } else {
    for (const auto& h : *entry.handles) {
      if (h.has_value()) handles.insert(*h);
    }
  }
  if (handles.empty()) {
    return invalid_argument("delegate mapping: no valid debug handles found; failed to add entry");
  }
  // The generated identifier is taken only once every check passed, so a failed insert leaves
  // the numbering unchanged.
  DelegateIdentifier id = entry.identifier.has_value() ? *entry.identifier
                                                       : DelegateIdentifier(next_index_++);
  map_[id] = std::move(handles);
  return id;
}

Result<DelegateIdentifier> DelegateMappingBuilder::insert(const std::vector<const Node*>& nodes,
                                                          std::optional<DelegateIdentifier> identifier) {
  DelegateMappingEntry e;
  e.nodes = nodes;
  e.identifier = std::move(identifier);
  return insert_delegate_mapping_entry(e);
}

Result<DelegateIdentifier> DelegateMappingBuilder::insert_handles(
    const std::vector<std::optional<int64_t>>& handles, std::optional<DelegateIdentifier> identifier) {
  DelegateMappingEntry e;
  e.handles = handles;
  e.identifier = std::move(identifier);
  return insert_delegate_mapping_entry(e);
}

std::map<DelegateIdentifier, std::vector<int64_t>> DelegateMappingBuilder::get_delegate_mapping()
    const {
  std::map<DelegateIdentifier, std::vector<int64_t>> out;
  for (const auto& [id, handles] : map_) out[id] = std::vector<int64_t>(handles.begin(), handles.end());
  return out;
}

Result<std::map<int64_t, std::vector<int64_t>>>
DelegateMappingBuilder::get_integer_delegate_mapping() const {
  std::map<int64_t, std::vector<int64_t>> out;
  for (const auto& [id, handles] : map_) {
    const int64_t* i = std::get_if<int64_t>(&id);
    if (i == nullptr) {
      return invalid_argument("delegate mapping: identifier {} is not an integer",
                              format_identifier(id));
    }
    out[*i] = std::vector<int64_t>(handles.begin(), handles.end());
  }
  return out;
}

}  // namespace kiln
