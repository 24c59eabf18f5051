#include "kiln/lower/to_backend.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "kiln/ir/compare.h"
#include "kiln/partition/constant_tagging.h"
#include "outline.h"

namespace kiln {
namespace {

using lower_detail::PartitionToLower;

std::string shown_tag(const std::string& tag) { return tag.empty() ? "none" : "'" + tag + "'"; }

// A tagged output node or user-input placeholder cannot be delegated (ExecuTorch's
// _get_node_list_with_same_tag).
Status validate_tags(const ExportedProgram& program, const PartitionResult& partition) {
  for (Node* n : program.graph().nodes()) {
    const std::string& tag = n->meta.delegation_tag;
    if (tag.empty() || partition.partition_tags.count(tag) == 0) continue;
    if (n->op() == OpKind::kOutput) {
      return invalid_argument("to_backend: output node '{}' should not be tagged (tag '{}')",
                              n->name(), tag);
    }
    if (n->op() == OpKind::kPlaceholder) {
      const InputSpec* s = program.input_spec(n);
      if (s == nullptr || s->kind == InputKind::kUserInput) {
        return invalid_argument("to_backend: placeholder '{}' is a user input and should not be "
                                "tagged (tag '{}'); only parameters, buffers and constants can be",
                                n->name(), tag);
      }
    }
  }
  return Status::Ok();
}

// After duplication every tagged constant is read only inside its tag.
Status check_constant_users(const ExportedProgram& program, const PartitionResult& partition) {
  for (Node* n : program.graph().placeholders()) {
    const std::string& tag = n->meta.delegation_tag;
    if (tag.empty() || partition.partition_tags.count(tag) == 0) continue;
    for (Node* user : n->users()) {
      if (user->meta.delegation_tag != tag) {
        return invalid_argument(
            "to_backend: constant data node '{}' is tagged with '{}' but has user '{}' which has "
            "tag {}",
            n->name(), tag, user->name(), shown_tag(user->meta.delegation_tag));
      }
    }
  }
  return Status::Ok();
}

std::string next_module_name(const ExportedProgram& program) {
  for (size_t k = program.lowered_modules().size();; ++k) {
    std::string name = fmt::format("lowered_module_{}", k);
    if (program.find_lowered_module(name) == nullptr && program.graph().find(name) == nullptr &&
        !program.constants().contains(name)) {
      return name;
    }
  }
}

int64_t max_debug_handle(const Graph& g) {
  int64_t m = -1;
  for (Node* n : g.nodes()) m = std::max(m, n->meta.debug_handle);
  return m;
}

Result<LoweringReport> lower_impl(ExportedProgram& program, const PartitionResult& partition,
                                  const BackendRegistry& registry, const ToBackendOptions& options) {
  LoweringReport report;
  KILN_RETURN_IF_ERROR(validate_tags(program, partition));
  for (Node* n : program.graph().nodes()) {
    if (n->op() == OpKind::kCallFunction) ++report.nodes_total;
  }
  if (options.duplicate_constants) {
    std::set<std::string> tags;
    for (const auto& entry : partition.partition_tags) tags.insert(entry.first);
    auto dup = duplicate_constants_for_partitions(program, tags);
    if (!dup.ok()) return dup.status().with_context("to_backend");
    report.constants_duplicated = dup->copies;
    report.duplicated_bytes = dup->bytes;
    // Copies inherit the original's meta; each gets its own debug handle so handles stay unique.
    int64_t next = max_debug_handle(program.graph()) + 1;
    for (const std::string& name : dup->names) {
      if (Node* copy = program.graph().find(name)) copy->meta.debug_handle = next++;
    }
  }
  KILN_RETURN_IF_ERROR(check_constant_users(program, partition));

  // Group by tag; order tags by their first non-placeholder node.
  std::unordered_map<std::string, size_t> index;
  std::vector<PartitionToLower> parts;
  std::vector<size_t> order;
  std::vector<char> has_body;
  for (Node* n : program.graph().nodes()) {
    const std::string& tag = n->meta.delegation_tag;
    if (tag.empty()) continue;
    auto spec = partition.partition_tags.find(tag);
    if (spec == partition.partition_tags.end()) continue;
    auto [it, inserted] = index.emplace(tag, parts.size());
    if (inserted) {
      parts.push_back({tag, {}, &spec->second, nullptr});
      has_body.push_back(0);
    }
    size_t k = it->second;
    if (n->op() != OpKind::kPlaceholder && !has_body[k]) {
      has_body[k] = 1;
      order.push_back(k);
    }
    parts[k].nodes.push_back(n);
  }
  for (const auto& [tag, spec] : partition.partition_tags) {
    auto it = index.find(tag);
    if (it == index.end() || !has_body[it->second]) report.skipped_tags.push_back(tag);
  }
  for (size_t i : order) {
    PartitionToLower& part = parts[i];
    auto backend = registry.get(part.delegation->backend_id);
    if (!backend.ok()) {
      return backend.status().with_context(fmt::format("to_backend: tag '{}'", part.tag));
    }
    part.backend = *backend;
  }

  int64_t next_handle = max_debug_handle(program.graph()) + 1;
  for (size_t i : order) {
    std::string name = next_module_name(program);
    KILN_ASSIGN_OR_RETURN(size_t delegated,
                          lower_detail::outline_partition(program, parts[i], name, next_handle));
    report.nodes_delegated += delegated;
    report.lowered_modules.push_back(name);
    ++report.partitions;
    if (options.lint_each_partition) {
      if (Status st = program.lint(); !st.ok()) {
        return internal_error("to_backend: program invalid after lowering '{}': {}", parts[i].tag,
                              st.message());
      }
    }
  }
  if (Status st = program.lint(); !st.ok()) {
    return internal_error("to_backend: the lowered program is invalid: {}", st.message());
  }
  return report;
}

}  // namespace

size_t assign_debug_handles(Graph& graph) {
  int64_t next = max_debug_handle(graph) + 1;
  size_t assigned = 0;
  for (Node* n : graph.nodes()) {
    if (n->meta.debug_handle >= 0) continue;
    n->meta.debug_handle = next++;
    ++assigned;
  }
  return assigned;
}

Result<LoweringReport> to_backend(ExportedProgram& program, Partitioner& partitioner,
                                  const BackendRegistry& registry, const ToBackendOptions& options) {
  assign_debug_handles(program.graph());
  ExportedProgram snapshot = program.clone();
  auto partition = partitioner.partition(program);
  if (!partition.ok()) {
    program = std::move(snapshot);
    return partition.status().with_context("to_backend: partitioner failed");
  }
  if (options.check_identical_graph && !is_identical_graph(snapshot.graph(), program.graph())) {
    program = std::move(snapshot);
    return invalid_argument("to_backend: the partitioner should not modify the graph (only set "
                            "delegation tags)");
  }
  auto report = lower_impl(program, *partition, registry, options);
  if (!report.ok()) program = std::move(snapshot);
  return report;
}

Result<LoweringReport> lower_tagged_partitions(ExportedProgram& program,
                                               const PartitionResult& partition,
                                               const BackendRegistry& registry,
                                               const ToBackendOptions& options) {
  assign_debug_handles(program.graph());
  ExportedProgram snapshot = program.clone();
  auto report = lower_impl(program, partition, registry, options);
  if (!report.ok()) program = std::move(snapshot);
  return report;
}

Result<LoweredModule> to_backend(std::string_view backend_id, const ExportedProgram& program,
                                 const std::vector<CompileSpec>& compile_specs,
                                 const BackendRegistry& registry) {
  KILN_ASSIGN_OR_RETURN(const BackendDetails* backend, registry.get(backend_id));
  auto copy = std::make_shared<ExportedProgram>(program.clone());
  assign_debug_handles(copy->graph());
  auto pre = backend->preprocess(*copy, compile_specs);
  if (!pre.ok()) {
    return pre.status().with_context(fmt::format("to_backend: backend '{}' failed", backend_id));
  }
  LoweredModule lm;
  lm.backend_id = std::string(backend_id);
  lm.compile_specs = compile_specs;
  lm.processed_bytes = std::make_shared<const VectorStorage>(std::move(pre->processed_bytes));
  lm.original_module = std::move(copy);
  lm.debug_handle_map = std::move(pre->debug_handle_map);
  return lm;
}

}  // namespace kiln
