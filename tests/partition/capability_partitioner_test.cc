#include "kiln/partition/capability_partitioner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "partition/partition_test_util.h"

namespace kiln {
namespace {

using test::ProgramBuilder;

std::vector<std::vector<std::string>> names(const Proposal& p) {
  std::vector<std::vector<std::string>> out;
  for (const auto& part : p.partitions) {
    auto& v = out.emplace_back();
    for (const Node* n : part) v.push_back(n->name());
  }
  return out;
}
using Names = std::vector<std::vector<std::string>>;

TEST(CapabilityPartitioner, ChainSplitsAtUnsupportedNode) {
  ProgramBuilder b;
  Node* r1 = b.relu(b.input("x"), "r1");
  Node* g = b.call(OpId::kGelu, {r1}, "g");
  Node* r2 = b.relu(g, "r2");
  Node* r3 = b.relu(r2, "r3");
  b.outputs({r3});
  auto rep = std::make_shared<WhyNoPartitionReporter>();
  CapabilityPartitioner part("xnnpack", {{"k", {1, 2}}},
                             wrap_check(supported_ops({OpId::kRelu}), rep));
  auto res = part.partition(b.ep);
  ASSERT_TRUE(res.ok()) << res.status().message();
  ASSERT_EQ(res->partition_tags.size(), 2u);
  EXPECT_EQ(res->partition_tags.at("xnnpack_0").backend_id, "xnnpack");
  EXPECT_EQ(res->partition_tags.at("xnnpack_1").compile_specs,
            (std::vector<CompileSpec>{{"k", {1, 2}}}));
  EXPECT_EQ(b.tag("r1"), "xnnpack_0");
  EXPECT_EQ(b.tag("g"), "");
  EXPECT_EQ(b.tag("r2"), "xnnpack_1");
  EXPECT_EQ(b.tag("r3"), "xnnpack_1");
  EXPECT_EQ(b.tag("x"), "");
  EXPECT_EQ(rep->reason_for("g"), "op 'gelu' is not in the supported op set");
  EXPECT_EQ(rep->entries().size(), 1u);
  EXPECT_TRUE(b.ep.lint().ok());
}

TEST(CapabilityPartitioner, DiamondThroughUnsupportedNodeIsNotMerged) {
  ProgramBuilder b;
  Node* a = b.relu(b.input("x"), "a");
  Node* u = b.call(OpId::kGelu, {a}, "u");
  Node* c = b.relu(a, "c");
  Node* d = b.add(u, c, "d");
  b.outputs({d});
  Proposal p = propose_partitions(b.ep, *supported_ops({OpId::kRelu, OpId::kAdd}), {});
  EXPECT_EQ(names(p), (Names{{"a", "c"}, {"d"}}));
  EXPECT_EQ(p.supported_nodes, 3u);
  EXPECT_EQ(p.budget_refusals, 0u);
}

// max_nodes_per_partition shards a partition into consecutive pieces; a diamond split inside
// stays acyclic (each piece convex) and the pieces lower one after the other.
TEST(CapabilityPartitioner, MaxNodesPerPartitionShardsInGraphOrder) {
  ProgramBuilder b;
  Node* a = b.relu(b.input("x"), "a");
  Node* l = b.relu(a, "l");
  Node* r = b.relu(a, "r");
  Node* d = b.add(l, r, "d");
  Node* e = b.relu(d, "e");
  b.outputs({e});
  CapabilityOptions options;
  options.max_nodes_per_partition = 2;
  Proposal p = propose_partitions(b.ep, *supported_ops({OpId::kRelu, OpId::kAdd}), options);
  EXPECT_EQ(names(p), (Names{{"a", "l"}, {"r", "d"}, {"e"}}));
  options.max_nodes_per_partition = 0;
  EXPECT_EQ(names(propose_partitions(b.ep, *supported_ops({OpId::kRelu, OpId::kAdd}), options)),
            (Names{{"a", "l", "r", "d", "e"}}));
}

TEST(CapabilityPartitioner, CycleThroughAnotherPartitionIsAvoided) {
  // a1 -> u1 -> b1 and b2 -> u2 -> a2 with a1 -> a2 and b1 -> b2: merging all a's and all b's
  // would make {a} -> {b} -> {a}.
  ProgramBuilder b;
  Node* x = b.input("x");
  Node* a1 = b.relu(x, "a1");
  Node* u1 = b.call(OpId::kGelu, {a1}, "u1");
  Node* b1 = b.relu(u1, "b1");
  Node* b2 = b.relu(b1, "b2");
  Node* u2 = b.call(OpId::kGelu, {b2}, "u2");
  Node* a2 = b.add(a1, u2, "a2");
  b.outputs({a2});
  Proposal p = propose_partitions(b.ep, *supported_ops({OpId::kRelu, OpId::kAdd}), {});
  EXPECT_EQ(names(p), (Names{{"a1"}, {"b1", "b2"}, {"a2"}}));
}

TEST(CapabilityPartitioner, IndependentBranchesJoinAtTheirConsumer) {
  ProgramBuilder b;
  Node* x = b.input("x");
  Node* l1 = b.relu(x, "l1");
  Node* r1 = b.relu(x, "r1");
  Node* l2 = b.relu(l1, "l2");
  Node* r2 = b.relu(r1, "r2");
  Node* s = b.add(l2, r2, "s");
  b.outputs({s});
  Proposal p = propose_partitions(b.ep, *supported_ops({OpId::kRelu, OpId::kAdd}), {});
  EXPECT_EQ(names(p), (Names{{"l1", "r1", "l2", "r2", "s"}}));
}

TEST(CapabilityPartitioner, QuantizedClusterJoinsWhole) {
  ProgramBuilder b;
  Node* q0 = b.q(b.input("x"), "q0");
  Node* dq0 = b.dq(q0, "dq0");
  Node* op = b.relu(dq0, "op");
  Node* q1 = b.q(op, "q1");
  Node* dq1 = b.dq(q1, "dq1");
  Node* g = b.call(OpId::kGelu, {dq1}, "g");
  b.outputs({g});
  CapabilityOptions opt;
  opt.reporter = std::make_shared<WhyNoPartitionReporter>();
  auto support = supported_ops({OpId::kRelu, OpId::kQuantizePerTensor,
                                OpId::kDequantizePerTensor});
  Proposal p = propose_partitions(b.ep, *support, opt);
  EXPECT_EQ(names(p), (Names{{"q0", "dq0", "op", "q1"}}));
  EXPECT_EQ(opt.reporter->reason_for("dq1"),
            "it belongs to a quantized cluster with node 'g', which is not supported");
}

TEST(CapabilityPartitioner, QuantizedClusterStaysOutWhenItsOpIsUnsupported) {
  ProgramBuilder b;
  Node* q0 = b.q(b.input("x"), "q0");
  Node* dq0 = b.dq(q0, "dq0");
  Node* op = b.call(OpId::kGelu, {dq0}, "op");
  Node* q1 = b.q(op, "q1");
  Node* dq1 = b.dq(q1, "dq1");
  b.outputs({dq1});
  CapabilityOptions opt;
  opt.reporter = std::make_shared<WhyNoPartitionReporter>();
  auto support = supported_ops({OpId::kRelu, OpId::kQuantizePerTensor,
                                OpId::kDequantizePerTensor});
  Proposal p = propose_partitions(b.ep, *support, opt);
  // q0 and dq1 belong to no op's cluster; dq0 and q1 stay out with the op.
  EXPECT_EQ(names(p), (Names{{"q0"}, {"dq1"}}));
  const std::string why = "it belongs to a quantized cluster with node 'op', which is not supported";
  EXPECT_EQ(opt.reporter->reason_for("dq0"), why);
  EXPECT_EQ(opt.reporter->reason_for("q1"), why);
}

TEST(CapabilityPartitioner, SharedDequantizeMakesOneUnit) {
  ProgramBuilder b;
  Node* dq = b.dq(b.q(b.input("x"), "q0"), "dq");
  Node* good = b.relu(dq, "good");
  Node* bad = b.call(OpId::kGelu, {dq}, "bad");
  Node* qg = b.q(good, "qg");
  b.outputs({qg, bad});
  CapabilityOptions opt;
  opt.reporter = std::make_shared<WhyNoPartitionReporter>();
  Proposal p = propose_partitions(
      b.ep, *supported_ops({OpId::kRelu, OpId::kQuantizePerTensor, OpId::kDequantizePerTensor}),
      opt);
  EXPECT_EQ(names(p), (Names{{"q0"}}));
  EXPECT_EQ(opt.reporter->reason_for("good"),
            "it belongs to a quantized cluster with node 'bad', which is not supported");
}

// Without clusters (a backend that takes codes at its boundaries), a dequantize read by one call
// goes with that call, so a partition never reads another partition's dequantized float.
TEST(CapabilityPartitioner, WithoutClustersADequantizeGoesWithItsReader) {
  ProgramBuilder b;
  Node* r = b.relu(b.input("x"), "r");
  Node* q = b.q(r, "q");
  Node* dq = b.dq(q, "dq");
  Node* cpu = b.call(OpId::kGelu, {r}, "cpu");  // unsupported: `use` cannot join r's partition
  Node* use = b.call(OpId::kAdd, {dq, cpu}, "use");
  b.outputs({use});
  CapabilityOptions opt;
  opt.quantized_clusters = false;
  auto support = supported_ops({OpId::kRelu, OpId::kAdd, OpId::kQuantizePerTensor, OpId::kDequantizePerTensor});
  EXPECT_EQ(names(propose_partitions(b.ep, *support, opt)), (Names{{"r", "q"}, {"dq", "use"}}));
}

TEST(CapabilityPartitioner, GetitemFollowsItsTuple) {
  ProgramBuilder b;
  Node* x = b.input("x");
  Node* split = b.call(OpId::kSplit, {x}, "split", {{"split_sizes", std::vector<int64_t>{2, 2}}});
  split->meta.val = {TensorSpec::of(DType::kF32, {2}), TensorSpec::of(DType::kF32, {2})};
  Node* g0 = b.call(OpId::kGetitem, {split, 0}, "g0", {}, TensorSpec::of(DType::kF32, {2}));
  Node* g1 = b.call(OpId::kGetitem, {split, 1}, "g1", {}, TensorSpec::of(DType::kF32, {2}));
  Node* r = b.relu(g0, "r");
  b.outputs({r, g1});
  Proposal p = propose_partitions(b.ep, *supported_ops({OpId::kSplit, OpId::kRelu}), {});
  EXPECT_EQ(names(p), (Names{{"split", "g0", "g1", "r"}}));

  CapabilityOptions opt;
  opt.reporter = std::make_shared<WhyNoPartitionReporter>();
  p = propose_partitions(b.ep, *supported_ops({OpId::kGetitem, OpId::kRelu}), opt);
  EXPECT_EQ(names(p), (Names{{"r"}}));
  EXPECT_EQ(opt.reporter->reason_for("g0"), "its input 'split' is not partitioned");
}

TEST(CapabilityPartitioner, MinNodesMaxPartitionsAndTieBreak) {
  // Partitions of sizes 1, 3, 2, 3 separated by unsupported gelus.
  ProgramBuilder b;
  Node* cur = b.input("x");
  int k = 0;
  for (int size : {1, 3, 2, 3}) {
    for (int i = 0; i < size; ++i) cur = b.relu(cur, fmt::format("r{}", ++k));
    cur = b.call(OpId::kGelu, {cur}, fmt::format("g{}", k));
  }
  b.outputs({cur});
  auto support = supported_ops({OpId::kRelu});
  Proposal all = propose_partitions(b.ep, *support, {});
  EXPECT_EQ(names(all), (Names{{"r1"}, {"r2", "r3", "r4"}, {"r5", "r6"}, {"r7", "r8", "r9"}}));

  CapabilityOptions opt;
  opt.min_nodes_per_partition = 2;
  opt.reporter = std::make_shared<WhyNoPartitionReporter>();
  Proposal p = propose_partitions(b.ep, *support, opt);
  EXPECT_EQ(names(p), (Names{{"r2", "r3", "r4"}, {"r5", "r6"}, {"r7", "r8", "r9"}}));
  EXPECT_EQ(p.dropped_small, 1u);
  EXPECT_EQ(opt.reporter->reason_for("r1"),
            "its partition of 1 nodes is smaller than min_nodes_per_partition (2)");

  // keep_partition sees each partition that is large enough, in graph order, before
  // max_partitions: refusing the first of three leaves the other two to compete.
  std::vector<std::string> asked;
  opt.keep_partition = [&asked](const ExportedProgram&, std::span<Node* const> nodes) -> std::string {
    asked.push_back(nodes.front()->name());
    return nodes.front()->name() == "r2" ? "r2 leads it" : "";
  };
  opt.max_partitions = 1;
  opt.reporter->clear();
  p = propose_partitions(b.ep, *support, opt);
  EXPECT_EQ(asked, (std::vector<std::string>{"r2", "r5", "r7"}));
  EXPECT_EQ(names(p), (Names{{"r7", "r8", "r9"}}));
  EXPECT_EQ(p.dropped_unprofitable, 1u);
  EXPECT_EQ(p.dropped_over_max, 1u);
  EXPECT_EQ(opt.reporter->reason_for("r3"), "r2 leads it");
  opt.keep_partition = nullptr;

  opt.reporter->clear();
  p = propose_partitions(b.ep, *support, opt);
  EXPECT_EQ(names(p), (Names{{"r2", "r3", "r4"}}));  // equal size: the earlier one wins
  EXPECT_EQ(p.dropped_over_max, 2u);
  EXPECT_EQ(opt.reporter->reason_for("r8"),
            "its partition of 3 nodes is not among the 1 largest (max_partitions)");

  opt.max_partitions = 2;
  p = propose_partitions(b.ep, *support, opt);
  EXPECT_EQ(names(p), (Names{{"r2", "r3", "r4"}, {"r7", "r8", "r9"}}));
  EXPECT_EQ(tag_partitions(p, "npu"), (std::vector<std::string>{"npu_0", "npu_1"}));
  EXPECT_EQ(b.tag("r7"), "npu_1");
  EXPECT_EQ(b.tag("r5"), "");
}

TEST(CapabilityPartitioner, TagPrefixAndAlreadyTaggedNodes) {
  ProgramBuilder b;
  Node* r1 = b.relu(b.input("x"), "r1");
  Node* r2 = b.relu(r1, "r2");
  Node* r3 = b.relu(r2, "r3");
  b.outputs({r3});
  r2->meta.delegation_tag = "other_0";
  CapabilityOptions opt;
  opt.tag_prefix = "mine";
  opt.reporter = std::make_shared<WhyNoPartitionReporter>();
  CapabilityPartitioner part("demo", {}, supported_ops({OpId::kRelu}), opt);
  auto res = part.partition(b.ep);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(b.tag("r1"), "mine_0");
  EXPECT_EQ(b.tag("r2"), "other_0");
  EXPECT_EQ(b.tag("r3"), "mine_1");
  EXPECT_EQ(opt.reporter->reason_for("r2"), "it is already tagged 'other_0'");
  EXPECT_EQ(res->partition_tags.size(), 2u);
  EXPECT_EQ(part.last_proposal().partitions.size(), 2u);
}

TEST(CapabilityPartitioner, TagsConstantsAndMutatedBuffers) {
  ProgramBuilder b;
  Node* x = b.input("x");
  Node* w = b.param("w");
  Node* cache = b.buffer("cache");
  Node* m = b.call(OpId::kMul, {x, w}, "m");
  Node* upd = b.add(cache, m, "upd");
  Node* g = b.call(OpId::kGelu, {m}, "g");
  b.outputs({upd, g}, {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
  std::vector<std::string> sunk;
  CapabilityPartitioner part("xnnpack", {}, supported_ops({OpId::kMul, OpId::kAdd}), {},
                             [&](std::string_view l) { sunk.emplace_back(l); });
  auto res = part.partition(b.ep);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(b.tag("w"), "xnnpack_0");
  EXPECT_EQ(b.tag("cache"), "xnnpack_0");
  EXPECT_TRUE(part.warnings().empty());

  // The buffer's new value is also read outside: the buffer stays, with a warning.
  ProgramBuilder b2;
  Node* x2 = b2.input("x");
  Node* c2 = b2.buffer("cache");
  Node* upd2 = b2.add(c2, x2, "upd");
  Node* g2 = b2.call(OpId::kGelu, {upd2}, "g");
  b2.outputs({upd2, g2}, {{OutputKind::kBufferMutation, "cache"}, {OutputKind::kUserOutput, ""}});
  c2->meta.delegation_tag = "xnnpack_0";
  CapabilityPartitioner part2("xnnpack", {}, supported_ops({OpId::kAdd}), {},
                              [&](std::string_view l) { sunk.emplace_back(l); });
  ASSERT_TRUE(part2.partition(b2.ep).ok());
  const std::string w2 =
      "tag_mutated_buffer: buffer 'cache' (placeholder 'cache') stays in the owning program and "
      "loses tag 'xnnpack_0': its reader 'upd' is tagged 'xnnpack_0' but 'g', which reads its new "
      "value 'upd', is not tagged";
  EXPECT_EQ(part2.warnings(), std::vector<std::string>{w2});
  EXPECT_EQ(sunk, std::vector<std::string>{w2});
  EXPECT_EQ(b2.tag("cache"), "");
}

TEST(CapabilityPartitioner, Errors) {
  ProgramBuilder b;
  b.outputs({b.relu(b.input("x"), "r")});
  CapabilityPartitioner no_id("", {}, supported_ops({}));
  auto r = no_id.partition(b.ep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "CapabilityPartitioner: empty backend id");
  CapabilityPartitioner no_support("xnnpack", {}, nullptr);
  r = no_support.partition(b.ep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "CapabilityPartitioner 'xnnpack': no OperatorSupport given");
}

TEST(CapabilityPartitioner, TinyBudgetStaysAcyclic) {
  // With a budget of one entry every non-trivial check refuses: still a valid (finer) result.
  ProgramBuilder b;
  Node* a = b.relu(b.input("x"), "a");
  Node* u = b.call(OpId::kGelu, {a}, "u");
  Node* c = b.relu(a, "c");
  Node* d = b.add(u, c, "d");
  Node* e = b.add(d, c, "e");
  b.outputs({e});
  auto support = supported_ops({OpId::kRelu, OpId::kAdd});
  Proposal full = propose_partitions(b.ep, *support, {});
  EXPECT_EQ(names(full), (Names{{"a", "c"}, {"d", "e"}}));
  EXPECT_EQ(full.budget_refusals, 0u);
  CapabilityOptions opt;
  opt.search_budget = 1;
  Proposal p = propose_partitions(b.ep, *support, opt);
  EXPECT_EQ(names(p), (Names{{"a", "c"}, {"d"}, {"e"}}));
  EXPECT_EQ(p.budget_refusals, 3u);
}

}  // namespace
}  // namespace kiln
