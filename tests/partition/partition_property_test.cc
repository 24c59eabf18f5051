// Property tests of the capability partitioner on random DAGs: the contracted graph is acyclic,
// every partition is weakly connected, no two partitions joined by an edge could merge, and on
// small graphs the partition count is compared with the exact optimum found by brute force.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <unordered_map>

#include "kiln/partition/capability_partitioner.h"
#include "partition/partition_test_util.h"

namespace kiln {
namespace {

// Call nodes of a program as a plain DAG (placeholders are sources and never partitioned, so
// they cannot lie on a cycle and are left out).
struct Dag {
  std::vector<std::vector<int>> preds;
  std::vector<bool> supported;
  std::vector<Node*> nodes;
  std::unordered_map<const Node*, int> index;
};

// True if contracting each group (ids >= 0; -1: the node alone) leaves a DAG. Kahn's algorithm.
bool contracted_acyclic(const Dag& d, const std::vector<int>& group) {
  const int n = static_cast<int>(d.preds.size());
  std::vector<int> vid(n);
  int next = 0;
  std::unordered_map<int, int> gid;
  for (int i = 0; i < n; ++i) {
    if (group[i] < 0) {
      vid[i] = next++;
    } else {
      auto [it, fresh] = gid.emplace(group[i], next);
      if (fresh) ++next;
      vid[i] = it->second;
    }
  }
  std::vector<std::vector<int>> succ(next);
  std::vector<int> indeg(next, 0);
  for (int v = 0; v < n; ++v) {
    for (int p : d.preds[v]) {
      if (vid[p] == vid[v]) continue;
      succ[vid[p]].push_back(vid[v]);
      ++indeg[vid[v]];
    }
  }
  std::vector<int> ready;
  for (int i = 0; i < next; ++i) {
    if (indeg[i] == 0) ready.push_back(i);
  }
  int seen = 0;
  while (!ready.empty()) {
    int x = ready.back();
    ready.pop_back();
    ++seen;
    for (int y : succ[x]) {
      if (--indeg[y] == 0) ready.push_back(y);
    }
  }
  return seen == next;
}

bool weakly_connected(const Dag& d, const std::vector<int>& group, int g) {
  std::vector<int> members;
  for (int i = 0; i < static_cast<int>(group.size()); ++i) {
    if (group[i] == g) members.push_back(i);
  }
  if (members.empty()) return true;
  std::vector<int> parent(group.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = static_cast<int>(i);
  std::function<int(int)> find = [&](int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); };
  for (int v : members) {
    for (int p : d.preds[v]) {
      if (group[p] == g) parent[find(p)] = find(v);
    }
  }
  int root = find(members[0]);
  return std::all_of(members.begin(), members.end(), [&](int v) { return find(v) == root; });
}

// Exact minimum number of partitions covering all supported nodes (each weakly connected,
// contraction acyclic), by enumerating set partitions (restricted growth strings).
int optimum_partitions(const Dag& d) {
  std::vector<int> sup;
  for (int i = 0; i < static_cast<int>(d.supported.size()); ++i) {
    if (d.supported[i]) sup.push_back(i);
  }
  int best = static_cast<int>(sup.size());
  std::vector<int> group(d.preds.size(), -1);
  std::function<void(size_t, int)> rec = [&](size_t k, int used) {
    if (used >= best) return;
    if (k == sup.size()) {
      for (int g = 0; g < used; ++g) {
        if (!weakly_connected(d, group, g)) return;
      }
      if (contracted_acyclic(d, group)) best = used;
      return;
    }
    for (int g = 0; g <= used; ++g) {
      group[sup[k]] = g;
      rec(k + 1, std::max(used, g + 1));
    }
    group[sup[k]] = -1;
  };
  rec(0, 0);
  return best;
}

struct RandomProgram {
  test::ProgramBuilder b;
  Dag dag;
};

std::unique_ptr<RandomProgram> random_program(std::mt19937& rng, int n, double p_supported,
                                              int window) {
  auto rp = std::make_unique<RandomProgram>();
  auto& b = rp->b;
  std::vector<Node*> values = {b.input("x0"), b.input("x1")};
  std::uniform_real_distribution<double> coin(0, 1);
  auto pick = [&]() {
    int lo = std::max(0, static_cast<int>(values.size()) - window);
    std::uniform_int_distribution<int> d(lo, static_cast<int>(values.size()) - 1);
    return values[static_cast<size_t>(d(rng))];
  };
  for (int i = 0; i < n; ++i) {
    double r = coin(rng);
    std::string name = fmt::format("n{}", i);
    Node* node;
    if (r < 0.35) {
      node = b.relu(pick(), name);
    } else if (r < 0.8) {
      node = b.add(pick(), pick(), name);
    } else {
      std::vector<Node*> list = {pick(), pick(), pick()};
      node = b.call(OpId::kCat, {list}, name);
    }
    values.push_back(node);
    int idx = static_cast<int>(rp->dag.nodes.size());
    rp->dag.index[node] = idx;
    rp->dag.nodes.push_back(node);
    rp->dag.supported.push_back(coin(rng) < p_supported);
    auto& preds = rp->dag.preds.emplace_back();
    for (Node* in : node->input_nodes()) {
      auto it = rp->dag.index.find(in);
      if (it != rp->dag.index.end()) preds.push_back(it->second);
    }
  }
  b.outputs({values.back()});
  return rp;
}

// Runs the partitioner and checks every property; returns the partition count.
int partition_and_check(RandomProgram& rp, const std::string& label) {
  const Dag& d = rp.dag;
  auto support = support_fn([&](const ExportedProgram&, const Node& n) {
    return d.supported[static_cast<size_t>(d.index.at(&n))] ? SupportResult::yes()
                                                            : SupportResult::no("random");
  });
  Proposal p = propose_partitions(rp.b.ep, *support, {});
  EXPECT_EQ(p.budget_refusals, 0u) << label;
  std::vector<int> group(d.preds.size(), -1);
  for (size_t k = 0; k < p.partitions.size(); ++k) {
    for (const Node* n : p.partitions[k]) {
      int i = d.index.at(n);
      EXPECT_EQ(group[i], -1) << label << ": node in two partitions";
      EXPECT_TRUE(d.supported[i]) << label << ": unsupported node partitioned";
      group[i] = static_cast<int>(k);
    }
    if (k > 0) {
      EXPECT_LT(d.index.at(p.partitions[k - 1][0]), d.index.at(p.partitions[k][0])) << label;
    }
  }
  for (size_t i = 0; i < d.supported.size(); ++i) {
    if (d.supported[i]) {
      EXPECT_GE(group[i], 0) << label << ": supported node left out";
    }
  }
  EXPECT_TRUE(contracted_acyclic(d, group)) << label << ": contraction has a cycle";
  for (int g = 0; g < static_cast<int>(p.partitions.size()); ++g) {
    EXPECT_TRUE(weakly_connected(d, group, g)) << label << ": partition " << g;
  }
  // Maximality: partitions joined by an edge cannot merge.
  for (int v = 0; v < static_cast<int>(d.preds.size()); ++v) {
    for (int u : d.preds[v]) {
      if (group[u] < 0 || group[v] < 0 || group[u] == group[v]) continue;
      std::vector<int> merged = group;
      for (int& x : merged) {
        if (x == group[u]) x = group[v];
      }
      EXPECT_FALSE(contracted_acyclic(d, merged))
          << label << ": partitions " << group[u] << " and " << group[v] << " could merge";
    }
  }
  return static_cast<int>(p.partitions.size());
}

TEST(PartitionProperty, RandomSmallDagsAgainstExactOptimum) {
  std::mt19937 rng(1234);
  int graphs = 0, compared = 0, optimal = 0, extra = 0;
  for (int t = 0; t < 3000; ++t) {
    int n = 3 + static_cast<int>(rng() % 14);
    double p = 0.4 + 0.55 * (static_cast<double>(rng() % 100) / 100.0);
    int window = 2 + static_cast<int>(rng() % 6);
    auto rp = random_program(rng, n, p, window);
    std::string label = fmt::format("graph {} (n={}, p={:.2f}, window={})", t, n, p, window);
    int count = partition_and_check(*rp, label);
    ++graphs;
    if (::testing::Test::HasFailure()) break;
    int sup = static_cast<int>(std::count(rp->dag.supported.begin(), rp->dag.supported.end(), true));
    if (sup > 7) continue;
    int best = optimum_partitions(rp->dag);
    ++compared;
    EXPECT_GE(count, best) << label;
    if (count == best) ++optimal;
    extra += count - best;
  }
  EXPECT_EQ(graphs, 3000);
  ASSERT_GT(compared, 500);
  // Greedy is not optimal in general, but on small graphs it nearly always is.
  double rate = static_cast<double>(optimal) / compared;
  RecordProperty("optimal_rate", fmt::format("{:.4f}", rate));
  fmt::print("compared {} graphs with the exact optimum: {} optimal ({:.2f}%), {} extra "
             "partitions in total\n",
             compared, optimal, 100.0 * rate, extra);
  EXPECT_GE(rate, 0.95);
}

TEST(PartitionProperty, RandomLargeDags) {
  std::mt19937 rng(99);
  for (int t = 0; t < 6; ++t) {
    int n = 1500;
    double p = 0.6 + 0.07 * t;
    auto rp = random_program(rng, n, p, 3 + 4 * t);
    partition_and_check(*rp, fmt::format("large graph {}", t));
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace kiln
