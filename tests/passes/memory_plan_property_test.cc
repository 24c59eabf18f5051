// Property tests of the memory planner on random programs and on every .kir test model: each plan
// is checked against what the header guarantees, recomputed here without the planner's code:
// homes from the signature, lifetimes from the use-lists, no two live arena values sharing a
// byte, aligned offsets, and lower_bound <= arena <= no_reuse with the lower bound recomputed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kiln/ir/kir.h"
#include "kiln/passes/memory_plan.h"
#include "testing/graph_builder.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Checks `plan` of `p` against the guarantees of memory_plan.h. `trace` names the program.
void check_plan(const ExportedProgram& p, const MemoryPlan& plan, const MemoryPlanOptions& options,
                const std::string& trace) {
  SCOPED_TRACE(trace);
  const Graph& g = p.graph();
  // Positions and the value table's shape.
  std::vector<int64_t> pos(g.id_bound(), -1);
  int64_t end = 0;
  size_t expected_values = 0;
  for (const Node* n : g.nodes()) {
    pos[n->id()] = end++;
    if (n->op() != OpKind::kOutput) expected_values += n->meta.val.size();
  }
  end = std::max<int64_t>(end - 1, 0);
  ASSERT_EQ(plan.values.size(), expected_values);
  ASSERT_EQ(plan.first_value.size(), g.id_bound());
  size_t k = 0;
  for (const Node* n : g.nodes()) {
    if (n->op() == OpKind::kOutput || !n->has_spec()) {
      EXPECT_EQ(plan.first_value[n->id()], -1) << n->name();
      continue;
    }
    ASSERT_EQ(plan.first_value[n->id()], static_cast<int32_t>(k)) << n->name();
    for (uint32_t i = 0; i < n->meta.val.size(); ++i, ++k) {
      const PlannedValue& v = plan.values[k];
      EXPECT_EQ(v.node, n);
      EXPECT_EQ(v.index, i);
      EXPECT_EQ(v.first, pos[n->id()]) << n->name();
    }
  }
  auto value_index = [&](const Node* n, size_t i) {
    return static_cast<size_t>(plan.first_value[n->id()]) + i;
  };

  // Homes: placeholders from the signature, getitem always an alias of its element, aliases
  // always of a root and only from ops that may alias.
  std::set<std::string> mutated;
  for (const OutputSpec& s : p.signature().outputs) {
    if (s.kind == OutputKind::kBufferMutation) mutated.insert(s.target);
  }
  std::set<std::string> input_symbols;  // the symbols the program's placeholders carry
  for (const Node* n : g.nodes()) {
    if (n->op() != OpKind::kPlaceholder || !n->has_spec()) continue;
    for (const Dim& d : n->spec().shape) {
      if (!d.is_static()) input_symbols.emplace(d.symbol_name());
    }
  }
  for (size_t idx = 0; idx < plan.values.size(); ++idx) {
    const PlannedValue& v = plan.values[idx];
    const Node* n = v.node;
    if (n->op() == OpKind::kPlaceholder) {
      const InputSpec* s = p.input_spec(n);
      ASSERT_NE(s, nullptr) << n->name();
      ValueHome want = ValueHome::kConstant;
      if (s->kind == InputKind::kUserInput) want = ValueHome::kInput;
      if (s->kind == InputKind::kBuffer && mutated.count(s->target)) want = ValueHome::kBuffer;
      EXPECT_EQ(v.home, want) << n->name();
      continue;
    }
    if (n->op() == OpKind::kGetAttr) {
      EXPECT_EQ(v.home, ValueHome::kConstant) << n->name();
      continue;
    }
    if (n->is_call(OpId::kGetitem)) {
      ASSERT_EQ(v.home, ValueHome::kAlias) << n->name();
      const Node* list = n->arg(0).node();
      int64_t count = static_cast<int64_t>(list->meta.val.size());
      int64_t i = n->arg(1).to_int();
      if (i < 0) i += count;
      size_t elem = value_index(list, static_cast<size_t>(i));
      size_t root = plan.values[elem].home == ValueHome::kAlias
                        ? static_cast<size_t>(plan.values[elem].alias_of)
                        : elem;
      EXPECT_EQ(v.alias_of, static_cast<int32_t>(root)) << n->name();
    }
    if (v.home == ValueHome::kAlias) {
      EXPECT_TRUE(may_alias_input(n->target())) << n->name();
      ASSERT_GE(v.alias_of, 0);
      ASSERT_LT(static_cast<size_t>(v.alias_of), plan.values.size());
      EXPECT_NE(plan.values[static_cast<size_t>(v.alias_of)].home, ValueHome::kAlias) << n->name();
      EXPECT_LT(static_cast<size_t>(v.alias_of), idx) << n->name();
    } else if (v.home == ValueHome::kDynamic) {
      // Only with unbounded_dims_dynamic or for a dim no placeholder has (a size the program
      // computes: a loop's trip count, dynamic_reshape's dims); never placed.
      bool computed = false;
      for (const Dim& d : n->meta.val[v.index].shape) {
        if (d.is_static()) continue;
        computed = computed || std::none_of(input_symbols.begin(), input_symbols.end(),
                                            [&](const std::string& sym) {
                                              return d.symbol_name().find(sym) != std::string::npos;
                                            });
      }
      EXPECT_TRUE(options.unbounded_dims_dynamic || computed) << n->name();
      EXPECT_FALSE(n->meta.val[v.index].is_static()) << n->name();
      EXPECT_EQ(v.offset, -1) << n->name();
    } else {
      EXPECT_TRUE(v.home == ValueHome::kArena || v.home == ValueHome::kOutput) << n->name();
    }
  }
  // User outputs (and the computed roots of returned views) are kOutput; nothing else is.
  std::vector<bool> returned(plan.values.size(), false);
  if (const Node* out = g.output_node()) {
    const auto& specs = p.signature().outputs;
    for (const Use& u : out->operands()) {
      size_t slot = static_cast<size_t>(u.elem_index);
      if (slot >= specs.size() || specs[slot].kind != OutputKind::kUserOutput) continue;
      if (plan.first_value[u.value->id()] < 0) continue;
      for (size_t i = 0; i < u.value->meta.val.size(); ++i) {
        size_t idx = value_index(u.value, i);
        const PlannedValue& v = plan.values[idx];
        if (v.home == ValueHome::kAlias) {
          size_t root = static_cast<size_t>(v.alias_of);
          ValueHome rh = plan.values[root].home;
          EXPECT_TRUE(rh == ValueHome::kOutput || rh == ValueHome::kInput ||
                      rh == ValueHome::kConstant || rh == ValueHome::kBuffer ||
                      rh == ValueHome::kDynamic)
              << "the root of returned view '" << v.node->name() << "' is " << value_home_name(rh);
          if (rh == ValueHome::kOutput) returned[root] = true;
        } else if (v.node->op() == OpKind::kCallFunction && v.home != ValueHome::kDynamic) {
          EXPECT_EQ(v.home, ValueHome::kOutput) << v.node->name();
          returned[idx] = true;
        }
      }
    }
  }
  for (size_t idx = 0; idx < plan.values.size(); ++idx) {
    if (plan.values[idx].home == ValueHome::kOutput) {
      EXPECT_TRUE(returned[idx]) << plan.values[idx].node->name() << " is kOutput, not returned";
    }
  }

  // Lifetimes, recomputed: a root lives from its definition to the last node that reads it or
  // any of its aliases (the output node reads at the end); a getitem's read of its list is the
  // definition of its own alias.
  std::vector<int64_t> last(plan.values.size());
  for (size_t idx = 0; idx < plan.values.size(); ++idx) last[idx] = plan.values[idx].first;
  for (const Node* n : g.nodes()) {
    int64_t at = n->op() == OpKind::kOutput ? end : pos[n->id()];
    for (const Use& u : n->operands()) {
      if (plan.first_value[u.value->id()] < 0) continue;
      if (n->is_call(OpId::kGetitem) && u.arg_index == 0) continue;
      for (size_t i = 0; i < u.value->meta.val.size(); ++i) {
        size_t idx = value_index(u.value, i);
        last[idx] = std::max(last[idx], at);
      }
    }
  }
  std::vector<int64_t> root_last = last;
  for (size_t idx = 0; idx < plan.values.size(); ++idx) {
    const PlannedValue& v = plan.values[idx];
    if (v.home != ValueHome::kAlias) continue;
    size_t root = static_cast<size_t>(v.alias_of);
    root_last[root] = std::max(root_last[root], last[idx]);
  }
  for (size_t idx = 0; idx < plan.values.size(); ++idx) {
    const PlannedValue& v = plan.values[idx];
    if (v.home != ValueHome::kArena) continue;
    EXPECT_EQ(v.last, root_last[idx]) << v.node->name() << " output " << v.index;
  }

  // Placement.
  const uint64_t align = options.alignment;
  std::vector<const PlannedValue*> arena;
  uint64_t no_reuse = 0, top = 0;
  size_t dynamic = 0;
  for (const PlannedValue& v : plan.values) {
    if (v.home != ValueHome::kArena) continue;
    bool symbolic = !v.node->meta.val[v.index].is_static();
    EXPECT_EQ(v.dynamic, symbolic) << v.node->name();
    dynamic += symbolic;
    ASSERT_GE(v.offset, 0) << v.node->name();
    EXPECT_EQ(static_cast<uint64_t>(v.offset) % align, 0u) << v.node->name() << " @" << v.offset;
    if (v.bytes == 0) continue;
    arena.push_back(&v);
    no_reuse += align_up(v.bytes, align);
    top = std::max<uint64_t>(top, static_cast<uint64_t>(v.offset) + v.bytes);
  }
  EXPECT_EQ(plan.dynamic_values, dynamic);
  EXPECT_EQ(plan.arena_bytes, top);
  EXPECT_EQ(plan.no_reuse_bytes, no_reuse);
  for (size_t a = 0; a < arena.size(); ++a) {
    for (size_t b = a + 1; b < arena.size(); ++b) {
      const PlannedValue& x = *arena[a];
      const PlannedValue& y = *arena[b];
      bool live_together = x.first <= y.last && y.first <= x.last;
      if (!live_together) continue;
      uint64_t x0 = static_cast<uint64_t>(x.offset), y0 = static_cast<uint64_t>(y.offset);
      bool apart = x0 + x.bytes <= y0 || y0 + y.bytes <= x0;
      EXPECT_TRUE(apart) << x.node->name() << " [" << x.first << ", " << x.last << "] @" << x0
                         << "+" << x.bytes << " overlaps " << y.node->name() << " [" << y.first
                         << ", " << y.last << "] @" << y0 << "+" << y.bytes;
    }
  }
  // The lower bound, by brute force over positions.
  uint64_t peak = 0;
  for (int64_t t = 0; t <= end; ++t) {
    uint64_t live = 0;
    for (const PlannedValue* v : arena) {
      if (v->first <= t && t <= v->last) live += v->bytes;
    }
    peak = std::max(peak, live);
  }
  EXPECT_EQ(plan.lower_bound_bytes, peak);
  EXPECT_LE(plan.lower_bound_bytes, plan.arena_bytes);
  EXPECT_LE(plan.arena_bytes, plan.no_reuse_bytes);
}

// Random programs over [batch, n] tensors: elementwise ops, linear / matmul against parameters,
// views, transposes, splits read through getitem (not always every element), cat, reductions,
// and buffers that some programs mutate. Inputs are picked mostly from recent nodes, sometimes
// from far back, so lifetimes nest and cross.
class RandomProgram {
 public:
  RandomProgram(uint64_t seed, Dim batch, int nodes) : rng_(seed), batch_(batch), g_(p_) {
    int inputs = 1 + static_cast<int>(rng_() % 3);
    for (int i = 0; i < inputs; ++i) {
      pool_.push_back(g_.input(fmt::format("x{}", i), spec(width())));
    }
    if (rng_() % 2) {
      buffer_ = g_.buffer("state", {4});
    }
    for (int i = 0; i < nodes; ++i) step();
    finish();
  }

  ExportedProgram& program() { return p_; }

 private:
  int64_t width() { return int64_t{1} << (rng_() % 7); }  // 1 .. 64
  TensorSpec spec(int64_t n) const { return TensorSpec(DType::kF32, {batch_, Dim(n)}); }
  int64_t cols(const Node* n) const { return n->spec().shape[1].value(); }

  Node* pick() {
    size_t n = pool_.size();
    if (rng_() % 5 == 0) return pool_[rng_() % n];
    return pool_[n - 1 - rng_() % std::min<size_t>(n, 4)];
  }
  Node* pick_cols(int64_t c) {
    for (int tries = 0; tries < 8; ++tries) {
      Node* n = pick();
      if (cols(n) == c) return n;
    }
    return nullptr;
  }
  Node* param(int64_t rows, int64_t cols) {
    return g_.param(fmt::format("w{}", params_++), {rows, cols});
  }
  void keep(Node* n) {
    ASSERT_NE(n, nullptr);
    pool_.push_back(n);
  }

  void step() {
    Node* a = pick();
    int64_t c = cols(a);
    switch (rng_() % 14) {
      case 0:
        keep(g_.relu(a));
        break;
      case 1:
        keep(g_.neg(a));
        break;
      case 2: {
        Node* b = pick_cols(c);
        keep(b != nullptr ? g_.add(a, b) : g_.call(OpId::kAdd, {a, 1.5}));
        break;
      }
      case 3: {
        Node* b = pick_cols(c);
        keep(g_.mul(a, b != nullptr ? b : a));
        break;
      }
      case 4:
        keep(g_.linear(a, param(width(), c)));
        break;
      case 5:
        keep(g_.call(OpId::kMatmul, {a, param(c, width())}));
        break;
      case 6: {
        // A view of the same shape, then a user: the view is an alias the user extends.
        Node* v = g_.call(OpId::kView, {a}, {{"size", std::vector<int64_t>{-1, c}}});
        keep(rng_() % 2 ? g_.relu(v) : v);
        break;
      }
      case 7: {
        // [batch, c] -> [batch*c] flattened, read by an elementwise op: values outside the pool.
        Node* f = g_.call(OpId::kFlatten, {a});
        Node* r = g_.call(OpId::kSigmoid, {f});
        if (rng_() % 2) tails_.push_back(r);
        break;
      }
      case 8: {
        // transpose to [c, batch] and back: the first copies, the identity one is an alias.
        Node* t = g_.call(OpId::kTranspose, {a}, {{"dim0", 0}, {"dim1", 1}});
        Node* u = g_.call(OpId::kTranspose, {t}, {{"dim0", 1}, {"dim1", 0}});
        Node* same = g_.call(OpId::kTranspose, {u}, {{"dim0", 1}, {"dim1", 1}});
        keep(same);
        break;
      }
      case 9: {
        if (c < 2) {
          keep(g_.relu(a));
          break;
        }
        int64_t first = 1 + static_cast<int64_t>(rng_() % static_cast<uint64_t>(c - 1));
        std::vector<int64_t> sizes{first, c - first};
        // Along dim 1: a copy unless batch is 1, then both parts view their input.
        Node* s = g_.call(OpId::kSplit, {a}, {{"split_sizes", sizes}, {"dim", 1}});
        ASSERT_NE(s, nullptr);
        int which = static_cast<int>(rng_() % 3);  // 0, 1, or both
        if (which != 1) keep(g_.call(OpId::kGetitem, {s, 0}));
        if (which != 0) keep(g_.call(OpId::kGetitem, {s, -1}));
        break;
      }
      case 10: {
        Node* b = pick();
        keep(g_.call(OpId::kCat, {std::vector<Node*>{a, b}}, {{"dim", 1}}));
        break;
      }
      case 11: {
        Node* s = g_.call(OpId::kSum, {a}, {{"dim", std::vector<int64_t>{1}}, {"keepdim", true}});
        keep(g_.call(OpId::kExpand, {s}, {{"size", std::vector<int64_t>{-1, 4}}}));
        break;
      }
      case 12: {
        Node* s = g_.call(OpId::kSlice, {a}, {{"dim", 1}, {"start", 0}, {"end", (c + 1) / 2}});
        keep(s);
        break;
      }
      case 13: {
        Node* u = g_.call(OpId::kUnsqueeze, {a}, {{"dim", 0}});
        Node* e = g_.call(OpId::kExp, {u});
        keep(g_.call(OpId::kSqueeze, {e}, {{"dim", std::vector<int64_t>{0}}}));
        break;
      }
    }
  }

  void finish() {
    std::vector<Node*> values;
    std::vector<OutputSpec> specs;
    std::set<Node*> chosen;
    chosen.insert(pool_.back());
    int extra = static_cast<int>(rng_() % 3);
    for (int i = 0; i < extra; ++i) chosen.insert(pool_[rng_() % pool_.size()]);
    for (Node* t : tails_) {
      if (rng_() % 2) chosen.insert(t);
    }
    for (Node* n : chosen) {
      values.push_back(n);
      specs.push_back(OutputSpec{});
    }
    if (buffer_ != nullptr && rng_() % 2) {
      Node* upd = g_.call(OpId::kAdd, {buffer_, 1.0});
      values.push_back(upd);
      specs.push_back({OutputKind::kBufferMutation, "state", ""});
    }
    g_.outputs(values, specs);
  }

  std::mt19937_64 rng_;
  Dim batch_;
  ExportedProgram p_;
  testing::GraphBuilder g_;
  std::vector<Node*> pool_;
  std::vector<Node*> tails_;
  Node* buffer_ = nullptr;
  int params_ = 0;
};

TEST(MemoryPlanProperty, RandomPrograms) {
  const size_t alignments[] = {1, 8, 16, 64, 256};
  int planned = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    int nodes = 1 + static_cast<int>(seed % 60);
    RandomProgram r(seed, Dim(static_cast<int64_t>(1 + seed % 5)), nodes);
    if (::testing::Test::HasFailure()) return;
    ASSERT_TRUE(r.program().lint().ok()) << r.program().lint().message();
    MemoryPlanOptions options;
    options.alignment = alignments[seed % std::size(alignments)];
    auto plan = plan_memory(r.program(), options);
    ASSERT_TRUE(plan.ok()) << "seed " << seed << ": " << plan.status().message();
    check_plan(r.program(), *plan, options,
               fmt::format("seed {} alignment {}", seed, options.alignment));
    if (::testing::Test::HasFailure()) return;
    ++planned;
  }
  EXPECT_EQ(planned, 300);
}

// The same random program with a symbolic batch planned at bound B, and with batch fixed at B:
// the same bytes per value and the same arena (every derived dim is exact at the bound), and the
// symbolic plan counts its dynamic values.
TEST(MemoryPlanProperty, SymbolicBatchAtItsBoundPlansLikeTheStaticProgram) {
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    int64_t b = 2 + static_cast<int64_t>(seed % 7);
    int nodes = 5 + static_cast<int>(seed % 40);
    RandomProgram fixed(seed, Dim(b), nodes);
    RandomProgram symbolic(seed, Dim::symbol("batch"), nodes);
    if (::testing::Test::HasFailure()) return;
    MemoryPlanOptions options;
    options.dim_bounds["batch"] = b;
    auto pf = plan_memory(fixed.program(), options);
    auto ps = plan_memory(symbolic.program(), options);
    ASSERT_TRUE(pf.ok()) << pf.status().message();
    ASSERT_TRUE(ps.ok()) << ps.status().message();
    check_plan(symbolic.program(), *ps, options, fmt::format("symbolic seed {}", seed));
    ASSERT_EQ(pf->values.size(), ps->values.size()) << "seed " << seed;
    size_t arena_values = 0;
    for (size_t i = 0; i < pf->values.size(); ++i) {
      const PlannedValue& f = pf->values[i];
      const PlannedValue& s = ps->values[i];
      EXPECT_EQ(f.node->name(), s.node->name());
      EXPECT_EQ(f.bytes, s.bytes) << s.node->name() << " " << s.node->meta.val[s.index].to_string();
      EXPECT_EQ(f.home, s.home) << s.node->name();
      EXPECT_FALSE(f.dynamic);
      EXPECT_EQ(s.dynamic, !s.node->meta.val[s.index].is_static()) << s.node->name();
      if (s.home == ValueHome::kArena && s.dynamic) ++arena_values;
    }
    EXPECT_EQ(ps->dynamic_values, arena_values);
    EXPECT_EQ(pf->dynamic_values, 0u);
    EXPECT_EQ(pf->arena_bytes, ps->arena_bytes) << "seed " << seed;
    EXPECT_EQ(pf->lower_bound_bytes, ps->lower_bound_bytes) << "seed " << seed;
    if (::testing::Test::HasFailure()) return;
  }
}

// Symbolic random programs with no bound and unbounded_dims_dynamic: every computed value
// with the symbolic batch is allocated when computed, the rest is still planned and checked.
TEST(MemoryPlanProperty, UnboundedBatchIsDynamic) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    RandomProgram r(seed, Dim::symbol("batch"), 5 + static_cast<int>(seed % 40));
    if (::testing::Test::HasFailure()) return;
    MemoryPlanOptions options;
    options.unbounded_dims_dynamic = true;
    auto plan = plan_memory(r.program(), options);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    check_plan(r.program(), *plan, options, fmt::format("unbounded seed {}", seed));
    for (const PlannedValue& v : plan->values) {
      if (v.home == ValueHome::kArena || v.home == ValueHome::kOutput) {
        EXPECT_TRUE(v.node->meta.val[v.index].is_static()) << v.node->name();
      }
      if (v.node->op() == OpKind::kCallFunction && v.home != ValueHome::kAlias &&
          !v.node->meta.val[v.index].is_static()) {
        EXPECT_EQ(v.home, ValueHome::kDynamic) << v.node->name();
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
}

// Wide random DAGs with specs set by hand (no inference), sizes spread over four orders of
// magnitude: many conflicts per value, so placement leaves and fills gaps.
TEST(MemoryPlanProperty, RandomDagsWithSpreadSizes) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    ExportedProgram p;
    Graph& g = p.graph();
    std::vector<Node*> nodes{p.add_user_input("x", TensorSpec::of(DType::kF32, {64}))};
    int count = 50 + static_cast<int>(rng() % 300);
    for (int i = 0; i < count; ++i) {
      std::vector<Arg> args{nodes.back()};
      size_t back = std::min<size_t>(nodes.size(), 1 + rng() % 40);
      args.emplace_back(nodes[nodes.size() - back]);
      std::vector<Arg> kwargs{Arg(1.0)};
      auto r = g.add_call_exact(OpId::kAdd, std::move(args), std::move(kwargs), "", false);
      ASSERT_TRUE(r.ok()) << r.status().message();
      int64_t numel = int64_t{1} << (rng() % 14);
      DType t = rng() % 3 == 0 ? DType::kU8 : DType::kF32;
      (*r)->meta.val = {TensorSpec::of(t, {numel + static_cast<int64_t>(rng() % 7)})};
      nodes.push_back(*r);
    }
    ASSERT_TRUE(p.set_outputs({nodes.back()}, {OutputSpec{}}).ok());
    MemoryPlanOptions options;
    options.alignment = size_t{1} << (seed % 8);
    auto plan = plan_memory(p, options);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    check_plan(p, *plan, options, fmt::format("dag seed {}", seed));
    if (::testing::Test::HasFailure()) return;
  }
}

// Every .kir test model plans and keeps the guarantees (symbolic dims bounded here).
TEST(MemoryPlanProperty, KirModels) {
  int models = 0;
  for (const auto& e : fs::directory_iterator(fs::path(KILN_TEST_DATA_DIR) / "kir")) {
    if (e.path().extension() != ".kir") continue;
    auto p = load_kir_file(e.path().string());
    ASSERT_TRUE(p.ok()) << e.path() << ": " << p.status().message();
    MemoryPlanOptions options;
    options.dim_bounds = {{"batch", 4}, {"seq", 16}};
    auto plan = plan_memory(*p, options);
    ASSERT_TRUE(plan.ok()) << e.path() << ": " << plan.status().message();
    check_plan(*p, *plan, options, e.path().filename().string());
    ++models;
  }
  EXPECT_GE(models, 8);
}

}  // namespace
}  // namespace kiln
