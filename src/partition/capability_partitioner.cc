// The capability-based partitioner; the algorithm and its complexity are described in
// include/kiln/partition/capability_partitioner.h.
#include "kiln/partition/capability_partitioner.h"

#include <algorithm>
#include <span>

#include <fmt/format.h>

#include "kiln/partition/constant_tagging.h"

namespace kiln {
namespace {

bool is_dequantize(const Node* n) {
  return n->is_call(OpId::kDequantizePerTensor) || n->is_call(OpId::kDequantizePerChannel);
}
bool is_quantize(const Node* n) {
  return n->is_call(OpId::kQuantizePerTensor) || n->is_call(OpId::kQuantizePerChannel);
}

// Union-find over node positions whose roots carry the quotient-graph data of their group.
class Groups {
 public:
  Groups(std::vector<uint32_t> pred_off, std::vector<uint32_t> preds, size_t budget)
      : off_(std::move(pred_off)), preds_(std::move(preds)), budget_(budget) {
    size_t n = off_.size() - 1;
    parent_.resize(n);
    minpos_.resize(n);
    maxpos_.resize(n);
    count_.assign(n, 1);
    in_.resize(n);
    has_in_.assign(n, 0);
    mark_.assign(n, 0);
    for (uint32_t i = 0; i < n; ++i) parent_[i] = minpos_[i] = maxpos_[i] = i;
  }

  uint32_t find(uint32_t x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  uint32_t count(uint32_t root) const { return count_[root]; }
  size_t refusals() const { return refusals_; }
  /// Distinct call_function inputs of node v (positions).
  std::span<const uint32_t> preds(uint32_t v) const {
    return {preds_.data() + off_[v], preds_.data() + off_[v + 1]};
  }
  void reset_refusals() { refusals_ = 0; }

  // True if merging the groups of a and b keeps the quotient graph acyclic.
  bool can_merge(uint32_t a, uint32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return true;
    size_t work = 0;
    Search s = reaches_indirectly(a, b, work);
    if (s == Search::kNotFound) s = reaches_indirectly(b, a, work);
    if (s == Search::kBudget) ++refusals_;
    return s == Search::kNotFound;
  }

  void unite(uint32_t a, uint32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (list_size(a) < list_size(b)) std::swap(a, b);
    materialize(a);
    // Entries of b that point into a or b are internal now; entries of a that pointed into b
    // become internal too and are dropped lazily when a search scans them.
    auto append = [&](uint32_t p) {
      uint32_t r = find(p);
      if (r != a && r != b) in_[a].push_back(p);
    };
    if (has_in_[b]) {
      for (uint32_t p : in_[b]) append(p);
      std::vector<uint32_t>().swap(in_[b]);
      has_in_[b] = 0;
    } else {
      for (uint32_t k = off_[b]; k < off_[b + 1]; ++k) append(preds_[k]);
    }
    parent_[b] = a;
    minpos_[a] = std::min(minpos_[a], minpos_[b]);
    maxpos_[a] = std::max(maxpos_[a], maxpos_[b]);
    count_[a] += count_[b];
  }

 private:
  enum class Search { kNotFound, kFound, kBudget };

  size_t list_size(uint32_t r) const { return has_in_[r] ? in_[r].size() : off_[r + 1] - off_[r]; }
  void materialize(uint32_t r) {
    if (has_in_[r]) return;
    in_[r].assign(preds_.begin() + off_[r], preds_.begin() + off_[r + 1]);
    has_in_[r] = 1;
  }

  // Is there a path a -> X -> ... -> b in the quotient graph through at least one other group?
  // Backward search from b over recorded inputs, pruned by the position window.
  Search reaches_indirectly(uint32_t a, uint32_t b, size_t& work) {
    if (minpos_[a] >= maxpos_[b]) return Search::kNotFound;
    if (++epoch_ == 0) {
      std::fill(mark_.begin(), mark_.end(), 0);
      epoch_ = 1;
    }
    stack_.clear();
    mark_[b] = epoch_;
    Search s = expand(a, b, b, true, work);
    while (s == Search::kNotFound && !stack_.empty()) {
      uint32_t x = stack_.back();
      stack_.pop_back();
      s = expand(a, b, x, false, work);
    }
    return s;
  }

  Search expand(uint32_t a, uint32_t b, uint32_t x, bool direct, size_t& work) {
    auto visit = [&](uint32_t p) -> Search {
      uint32_t r = find(p);
      if (++work > budget_) return Search::kBudget;
      if (r == a) return direct ? Search::kNotFound : Search::kFound;
      if (r == b || mark_[r] == epoch_ || maxpos_[r] <= minpos_[a]) return Search::kNotFound;
      mark_[r] = epoch_;
      stack_.push_back(r);
      return Search::kNotFound;
    };
    if (!has_in_[x]) {
      for (uint32_t k = off_[x]; k < off_[x + 1]; ++k) {
        Search s = visit(preds_[k]);
        if (s != Search::kNotFound) return s;
      }
      return Search::kNotFound;
    }
    std::vector<uint32_t>& list = in_[x];
    for (size_t k = 0; k < list.size();) {
      if (find(list[k]) == x) {  // became internal by a later merge: compact
        list[k] = list.back();
        list.pop_back();
        continue;
      }
      Search s = visit(list[k]);
      if (s != Search::kNotFound) return s;
      ++k;
    }
    return Search::kNotFound;
  }

  std::vector<uint32_t> off_, preds_;
  size_t budget_;
  std::vector<uint32_t> parent_, minpos_, maxpos_, count_;
  std::vector<std::vector<uint32_t>> in_;
  std::vector<uint8_t> has_in_;
  std::vector<uint32_t> mark_;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> stack_;
  size_t refusals_ = 0;
};

}  // namespace

Proposal propose_partitions(const ExportedProgram& program, const OperatorSupport& support,
                            const CapabilityOptions& options) {
  const Graph& g = program.graph();
  Proposal out;
  // One pass over the (large, pointer-linked) nodes gathers what the later passes need into
  // dense arrays: order, kind, and the quotient inputs (distinct call_function operands; sources
  // cannot lie on a path between two groups).
  const uint32_t n_nodes = static_cast<uint32_t>(g.size());
  std::vector<Node*> order;
  order.reserve(n_nodes);
  std::vector<uint32_t> pos_of(g.id_bound(), 0);
  enum Kind : uint8_t { kOther, kCall, kQuant, kDequant, kGetitemKind };
  std::vector<uint8_t> kind(n_nodes, kOther);
  std::vector<uint32_t> off(n_nodes + 1, 0), preds;
  preds.reserve(n_nodes * 2);
  std::vector<uint32_t> seen(n_nodes, UINT32_MAX);  // seen[p] == i: p already an input of i
  for (Node* n : g.nodes()) {
    uint32_t i = static_cast<uint32_t>(order.size());
    pos_of[n->id()] = i;
    order.push_back(n);
    off[i] = static_cast<uint32_t>(preds.size());
    if (n->op() != OpKind::kCallFunction) continue;
    kind[i] = is_quantize(n) ? kQuant
              : is_dequantize(n) ? kDequant
              : n->target() == OpId::kGetitem ? kGetitemKind
                                              : kCall;
    for (const Use& u : n->operands()) {
      if (u.value->op() != OpKind::kCallFunction) continue;
      uint32_t p = pos_of[u.value->id()];
      if (seen[p] == i) continue;
      seen[p] = i;
      preds.push_back(p);
    }
  }
  off[n_nodes] = static_cast<uint32_t>(preds.size());
  auto reject = [&](const Node* n, std::string_view reason) {
    if (options.reporter) options.reporter->report_reject(*n, reason);
  };

  // 1. Support.
  std::vector<uint8_t> cand(n_nodes, 0);
  for (uint32_t i = 0; i < n_nodes; ++i) {
    if (kind[i] == kOther || kind[i] == kGetitemKind) continue;
    const Node* n = order[i];
    if (!n->meta.delegation_tag.empty()) {
      reject(n, fmt::format("it is already tagged '{}'", n->meta.delegation_tag));
      continue;
    }
    if (n->is_call(OpId::kCond) || n->is_call(OpId::kLoop)) {  // its subgraphs are programs
      reject(n,
             fmt::format("control flow ({}) runs its subgraphs on the CPU", op_name(n->target())));
      continue;
    }
    cand[i] = support.is_node_supported(program, *n).supported;
    out.supported_nodes += cand[i];
  }

  // 2. Quantized clusters: op + dequantize inputs + quantize users; overlapping ones are a unit.
  std::vector<uint32_t> unit(n_nodes);
  for (uint32_t i = 0; i < n_nodes; ++i) unit[i] = i;
  auto unit_find = [&](uint32_t x) {
    while (unit[x] != x) x = unit[x] = unit[unit[x]];
    return x;
  };
  std::vector<std::pair<uint32_t, uint32_t>> cluster_edges;  // (op, member)
  auto join = [&](uint32_t o, uint32_t m) {
    cluster_edges.emplace_back(o, m);
    unit[unit_find(m)] = unit_find(o);
  };
  for (uint32_t i = 0; i < n_nodes && options.quantized_clusters; ++i) {
    if (kind[i] == kQuant) {
      // A quantize joins the cluster of the op it reads (its only tensor input).
      uint32_t p = pos_of[order[i]->input(0)->id()];
      if (order[i]->input(0)->op() == OpKind::kCallFunction && kind[p] == kCall) join(p, i);
    } else if (kind[i] == kCall) {
      for (uint32_t k = off[i]; k < off[i + 1]; ++k) {
        if (kind[preds[k]] == kDequant) join(i, preds[k]);
      }
    }
  }
  std::sort(cluster_edges.begin(), cluster_edges.end());
  std::vector<uint8_t> in_unit(n_nodes, 0);
  std::vector<int64_t> unit_blocker(n_nodes, -1);  // per unit root: first unsupported member
  for (const auto& [o, m] : cluster_edges) {
    for (uint32_t x : {o, m}) {
      in_unit[x] = 1;
      uint32_t r = unit_find(x);
      if (!cand[x] && (unit_blocker[r] < 0 || x < unit_blocker[r])) unit_blocker[r] = x;
    }
  }
  for (uint32_t i = 0; i < n_nodes; ++i) {
    if (!in_unit[i] || !cand[i]) continue;
    int64_t blocker = unit_blocker[unit_find(i)];
    if (blocker < 0) continue;
    cand[i] = 0;
    reject(order[i], fmt::format("it belongs to a quantized cluster with node '{}', which is not "
                                 "supported",
                                 order[static_cast<size_t>(blocker)]->name()));
  }
  // A getitem goes wherever its tuple goes.
  for (uint32_t i = 0; i < n_nodes; ++i) {
    if (kind[i] != kGetitemKind || order[i]->num_inputs() == 0) continue;
    const Node* n = order[i];
    cand[i] = cand[pos_of[n->input(0)->id()]];
    if (!cand[i]) reject(n, fmt::format("its input '{}' is not partitioned", n->input(0)->name()));
  }
  Groups groups(std::move(off), std::move(preds), options.search_budget);

  // Pre-merge valid units, then getitems with their producers.
  std::vector<uint8_t> unit_failed(n_nodes, 0);
  for (const auto& [o, m] : cluster_edges) {
    if (!cand[o] || !cand[m]) continue;
    uint32_t r = unit_find(o);
    if (unit_failed[r]) continue;
    if (groups.can_merge(o, m)) {
      groups.unite(o, m);
      continue;
    }
    unit_failed[r] = 1;
  }
  for (uint32_t i = 0; i < n_nodes; ++i) {
    if (!in_unit[i] || !cand[i] || !unit_failed[unit_find(i)]) continue;
    cand[i] = 0;
    reject(order[i], "its quantized cluster cannot be partitioned without a cycle");
  }
  // Without clusters, a dequantize read by one call goes with that call: a partition that takes
  // codes at its boundary then reads the codes, not a float another partition dequantized.
  for (uint32_t i = 0; i < n_nodes && !options.quantized_clusters; ++i) {
    if (kind[i] != kDequant || !cand[i] || order[i]->num_users() != 1) continue;
    const Node* u = order[i]->users()[0];
    if (u->op() != OpKind::kCallFunction) continue;
    uint32_t j = pos_of[u->id()];
    if (cand[j] && groups.can_merge(i, j)) groups.unite(i, j);
  }
  std::vector<std::pair<uint32_t, uint32_t>> failed;
  for (uint32_t i = 0; i < n_nodes; ++i) {
    const Node* n = order[i];
    if (!cand[i] || kind[i] != kGetitemKind) continue;
    uint32_t p = pos_of[n->input(0)->id()];
    if (groups.can_merge(p, i)) {
      groups.unite(p, i);
    } else {
      failed.emplace_back(p, i);
    }
  }

  // 3. Greedy pass in graph order.
  for (uint32_t v = 0; v < n_nodes; ++v) {
    if (!cand[v]) continue;
    for (uint32_t p : groups.preds(v)) {
      if (!cand[p] || groups.find(p) == groups.find(v)) continue;
      if (groups.can_merge(p, v)) {
        groups.unite(p, v);
      } else {
        failed.emplace_back(p, v);
      }
    }
  }
  // 4. Retry the failed edges until nothing merges.
  for (bool changed = true; changed;) {
    changed = false;
    groups.reset_refusals();
    std::vector<std::pair<uint32_t, uint32_t>> still;
    for (const auto& [p, v] : failed) {
      if (groups.find(p) == groups.find(v)) continue;
      if (groups.can_merge(p, v)) {
        groups.unite(p, v);
        changed = true;
      } else {
        still.emplace_back(p, v);
      }
    }
    failed = std::move(still);
  }
  out.budget_refusals = groups.refusals();

  // 5. Collect, drop small and refused partitions, keep the largest max_partitions.
  std::vector<int64_t> slot(n_nodes, -1);
  std::vector<std::vector<uint32_t>> parts;
  for (uint32_t i = 0; i < n_nodes; ++i) {
    if (!cand[i]) continue;
    uint32_t r = groups.find(i);
    if (slot[r] < 0) {
      slot[r] = static_cast<int64_t>(parts.size());
      parts.emplace_back();
    }
    parts[static_cast<size_t>(slot[r])].push_back(i);
  }
  std::vector<std::vector<uint32_t>> kept;
  std::vector<Node*> nodes;
  for (auto& p : parts) {
    if (p.size() >= options.min_nodes_per_partition) {
      if (options.keep_partition) {
        nodes.clear();
        for (uint32_t i : p) nodes.push_back(order[i]);
        if (std::string why = options.keep_partition(program, nodes); !why.empty()) {
          ++out.dropped_unprofitable;
          for (Node* n : nodes) reject(n, why);
          continue;
        }
      }
      kept.push_back(std::move(p));
      continue;
    }
    ++out.dropped_small;
    for (uint32_t i : p) {
      reject(order[i], fmt::format("its partition of {} nodes is smaller than "
                                   "min_nodes_per_partition ({})",
                                   p.size(), options.min_nodes_per_partition));
    }
  }
  if (options.max_partitions > 0 && kept.size() > options.max_partitions) {
    // parts are in order of first node, so a stable sort by size breaks ties by first node.
    std::stable_sort(kept.begin(), kept.end(),
                     [](const auto& x, const auto& y) { return x.size() > y.size(); });
    for (size_t k = options.max_partitions; k < kept.size(); ++k) {
      ++out.dropped_over_max;
      for (uint32_t i : kept[k]) {
        reject(order[i], fmt::format("its partition of {} nodes is not among the {} largest "
                                     "(max_partitions)",
                                     kept[k].size(), options.max_partitions));
      }
    }
    kept.resize(options.max_partitions);
    std::sort(kept.begin(), kept.end(), [](const auto& x, const auto& y) { return x[0] < y[0]; });
  }
  // 6. Shard: consecutive pieces of a partition in graph order (a topological order) are each
  // convex, since a path between two nodes of one piece stays inside the partition and so
  // passes only nodes ordered between them.
  const size_t most = options.max_nodes_per_partition;
  for (const auto& p : kept) {
    for (size_t at = 0; at < p.size();) {
      size_t end = most == 0 ? p.size() : std::min(p.size(), at + most);
      while (end < p.size() && order[p[end]]->is_call(OpId::kGetitem)) ++end;
      auto& nodes = out.partitions.emplace_back();
      for (size_t k = at; k < end; ++k) nodes.push_back(order[p[k]]);
      at = end;
    }
  }
  return out;
}

std::vector<std::string> tag_partitions(const Proposal& proposal, const std::string& prefix) {
  std::vector<std::string> tags;
  tags.reserve(proposal.partitions.size());
  for (size_t k = 0; k < proposal.partitions.size(); ++k) {
    tags.push_back(fmt::format("{}_{}", prefix.empty() ? "tag" : prefix, k));
    for (Node* n : proposal.partitions[k]) n->meta.delegation_tag = tags.back();
  }
  return tags;
}

CapabilityPartitioner::CapabilityPartitioner(std::string backend_id,
                                             std::vector<CompileSpec> compile_specs,
                                             OperatorSupportPtr support, CapabilityOptions options,
                                             LogSink warning_sink)
    : backend_id_(std::move(backend_id)),
      compile_specs_(std::move(compile_specs)),
      support_(std::move(support)),
      options_(std::move(options)),
      warning_sink_(std::move(warning_sink)) {}

Result<PartitionResult> CapabilityPartitioner::partition(ExportedProgram& program) {
  if (backend_id_.empty()) return invalid_argument("CapabilityPartitioner: empty backend id");
  if (support_ == nullptr) {
    return invalid_argument("CapabilityPartitioner '{}': no OperatorSupport given", backend_id_);
  }
  proposal_ = propose_partitions(program, *support_, options_);
  std::string prefix = options_.tag_prefix.empty() ? backend_id_ : options_.tag_prefix;
  std::vector<std::string> tags = tag_partitions(proposal_, prefix);
  tag_constant_data(program);
  warnings_ = tag_mutated_buffer(program);
  if (warning_sink_) {
    for (const auto& w : warnings_) warning_sink_(w);
  }
  PartitionResult result;
  for (const auto& t : tags) result.partition_tags[t] = DelegationSpec{backend_id_, compile_specs_};
  return result;
}

}  // namespace kiln
