// to_backend: submodules, signatures, graph rewrite, validation errors and debug handles.
#include "kiln/lower/to_backend.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "golden.h"
#include "kiln/ir/kir.h"
#include "kiln/lower/utils.h"
#include "lower_test_util.h"
#include "testing/graph_builder.h"

namespace kiln {
namespace {

using testing::f32;
using testing::LowerBuilder;
using testing::TagPartitioner;

std::vector<std::string> names(const Graph& g) {
  std::vector<std::string> out;
  for (Node* n : g.nodes()) out.push_back(n->name());
  return out;
}

std::vector<std::string> input_names(const ExportedProgram& p) {
  std::vector<std::string> out;
  for (const InputSpec& s : p.signature().inputs) out.push_back(s.arg);
  return out;
}

// Pins a delegated program two ways: the fx-style view of ExecuTorch's print_delegated_graph
// (print only, as there) and the full .kir, which must parse back to the same program.
void expect_delegated_goldens(const ExportedProgram& p, const std::string& stem) {
  testing::expect_golden(format_delegated_graph(p), stem + ".view.txt");
  std::string text = print_kir(p);
  testing::expect_golden(text, stem + ".kir");
  auto again = parse_kir(text);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(print_kir(*again), text);
  ASSERT_EQ(again->lowered_modules().size(), p.lowered_modules().size());
  for (size_t i = 0; i < p.lowered_modules().size(); ++i) {
    const LoweredModule& a = p.lowered_modules()[i];
    const LoweredModule& b = again->lowered_modules()[i];
    EXPECT_EQ(a.backend_id, b.backend_id);
    EXPECT_EQ(a.compile_specs, b.compile_specs);
    EXPECT_EQ(a.debug_handle_map, b.debug_handle_map);
    auto x = a.processed_bytes->bytes(), y = b.processed_bytes->bytes();
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << a.name;
  }
}

// ExecuTorch's print_delegated_graph example: mm + add twice around a sub.
void build_mm_add(ExportedProgram& p) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({2, 2}));
  Node* y = b.input("y", f32({2, 2}));
  Node* z = b.input("z", f32({2, 2}));
  Node* mm = b.op(OpId::kMm, {x, y});
  Node* add = b.add(mm, z);
  Node* sub = b.op(OpId::kSub, {add, x});
  Node* mm1 = b.op(OpId::kMm, {sub, y});
  Node* add1 = b.add(mm1, z);
  b.outputs({add1});
}

class ToBackendTest : public ::testing::Test {
 protected:
  BackendRegistry registry = testing::demo_registry();
  ExportedProgram p;
};

TEST_F(ToBackendTest, TwoPartitionsBecomeDelegateCalls) {
  build_mm_add(p);
  TagPartitioner part(testing::Tags{{"mm", "tag0"}, {"add", "tag0"}, {"mm_1", "tag1"}, {"add_1", "tag1"}});
  auto r = to_backend(p, part, registry);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->partitions, 2u);
  EXPECT_EQ(r->nodes_total, 5u);
  EXPECT_EQ(r->nodes_delegated, 4u);
  EXPECT_EQ(r->lowered_modules, (std::vector<std::string>{"lowered_module_0", "lowered_module_1"}));
  EXPECT_EQ(names(p.graph()),
            (std::vector<std::string>{"x", "y", "z", "lowered_module_0", "call_delegate", "getitem",
                                      "sub", "lowered_module_1", "call_delegate_1", "getitem_1",
                                      "output"}));
  ASSERT_EQ(p.lowered_modules().size(), 2u);
  const LoweredModule& m0 = p.lowered_modules()[0];
  EXPECT_EQ(m0.backend_id, "demo");
  EXPECT_EQ(input_names(*m0.original_module), (std::vector<std::string>{"x", "y", "z"}));
  const LoweredModule& m1 = p.lowered_modules()[1];
  EXPECT_EQ(input_names(*m1.original_module), (std::vector<std::string>{"sub", "y", "z"}));
  // The delegate call reads the module and the values flowing in; getitem unpacks its output.
  Node* cd = p.graph().find("call_delegate");
  ASSERT_NE(cd, nullptr);
  EXPECT_EQ(cd->arg(0).node()->name(), "lowered_module_0");
  EXPECT_EQ(cd->num_args(), 4u);
  EXPECT_EQ(cd->meta.val, (std::vector<TensorSpec>{f32({2, 2})}));
  EXPECT_EQ(p.graph().find("getitem")->spec(), f32({2, 2}));
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
  expect_delegated_goldens(p, "lower/mm_add_delegated");
}

TEST_F(ToBackendTest, DebugHandlesOnEveryNodeAndEachDelegate) {
  build_mm_add(p);
  p.graph().find("sub")->meta.debug_handle = 40;
  TagPartitioner part(testing::Tags{{"mm", "t"}, {"add", "t"}});
  auto r = to_backend(p, part, registry);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (Node* n : p.graph().nodes()) {
    if (n->op() == OpKind::kGetAttr || n->is_call(OpId::kGetitem)) continue;
    EXPECT_GE(n->meta.debug_handle, 0) << n->name();
  }
  // Sequential after the largest present (40); the delegate gets the next free one.
  Node* cd = p.graph().find("call_delegate");
  EXPECT_GT(cd->meta.debug_handle, 40);
  const LoweredModule& m = p.lowered_modules()[0];
  const Graph& sg = m.original_module->graph();
  std::map<int64_t, std::vector<int64_t>> expect = {
      {0, {sg.find("mm")->meta.debug_handle}}, {1, {sg.find("add")->meta.debug_handle}}};
  EXPECT_EQ(m.debug_handle_map, expect);
  EXPECT_GT(cd->meta.debug_handle, sg.find("add")->meta.debug_handle);
}

TEST(AssignDebugHandles, FillsOnlyMissingAfterLargest) {
  ExportedProgram p;
  LowerBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* r = b.relu(x);
  Node* n = b.neg(r);
  b.outputs({n});
  r->meta.debug_handle = 7;
  EXPECT_EQ(assign_debug_handles(p.graph()), 3u);
  EXPECT_EQ(x->meta.debug_handle, 8);
  EXPECT_EQ(r->meta.debug_handle, 7);
  EXPECT_EQ(n->meta.debug_handle, 9);
  EXPECT_EQ(p.graph().output_node()->meta.debug_handle, 10);
  EXPECT_EQ(assign_debug_handles(p.graph()), 0u);
}

TEST_F(ToBackendTest, OwnedParametersMoveIntoTheSubmodule) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({1, 3}));
  Node* w = b.param("w", {4, 3});
  Node* bias = b.param("b", {4});
  Node* lin = b.linear(x, w, bias);
  Node* r = b.relu(lin);
  b.outputs({r});
  Tensor w_before = *p.constants().find("w");
  TagPartitioner part(testing::Tags{{"p_w", "t"}, {"p_b", "t"}, {"linear", "t"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(input_names(p), (std::vector<std::string>{"x"}));
  EXPECT_FALSE(p.constants().contains("w"));
  EXPECT_FALSE(p.constants().contains("b"));
  const ExportedProgram& sub = *p.lowered_modules()[0].original_module;
  ASSERT_EQ(sub.signature().inputs.size(), 3u);
  EXPECT_EQ(sub.signature().inputs[0], (InputSpec{InputKind::kParameter, "p_w", "w", true}));
  EXPECT_EQ(sub.signature().inputs[1], (InputSpec{InputKind::kParameter, "p_b", "b", true}));
  EXPECT_EQ(sub.signature().inputs[2], (InputSpec{InputKind::kUserInput, "x", "", true, "x"}));
  ASSERT_NE(sub.constants().find("w"), nullptr);
  EXPECT_TRUE(sub.constants().find("w")->shares_storage_with(w_before));
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
  expect_delegated_goldens(p, "lower/linear_params_delegated");
}

TEST_F(ToBackendTest, OwnedBufferMutationMovesIntoTheDelegate) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({3}));
  Node* buf = b.buffer("count", {3});
  Node* upd = b.add(buf, x);
  Node* y = b.relu(upd);
  b.outputs({upd, y}, {{OutputKind::kBufferMutation, "count"}, {OutputKind::kUserOutput, ""}});
  TagPartitioner part(testing::Tags{{"b_count", "t"}, {"add", "t"}, {"relu", "t"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(input_names(p), (std::vector<std::string>{"x"}));
  ASSERT_EQ(p.signature().outputs.size(), 1u);
  EXPECT_EQ(p.signature().outputs[0].kind, OutputKind::kUserOutput);
  EXPECT_TRUE(p.mutated_buffers().empty());
  const ExportedProgram& sub = *p.lowered_modules()[0].original_module;
  ASSERT_EQ(sub.signature().outputs.size(), 2u);
  EXPECT_EQ(sub.signature().outputs[0], (OutputSpec{OutputKind::kBufferMutation, "count"}));
  EXPECT_EQ(sub.signature().outputs[1], (OutputSpec{OutputKind::kUserOutput, "", "relu"}));
  EXPECT_EQ(sub.signature().inputs[0].kind, InputKind::kBuffer);
  // The delegate returns only the user output.
  EXPECT_EQ(p.graph().find("call_delegate")->meta.val.size(), 1u);
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
}

TEST_F(ToBackendTest, BufferLeftInOwnerStaysAMutationOfTheOwner) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({3}));
  Node* buf = b.buffer("count", {3});
  Node* upd = b.add(buf, x);
  b.outputs({upd}, {{OutputKind::kBufferMutation, "count"}});
  TagPartitioner part(testing::Tags{{"add", "t"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(input_names(p), (std::vector<std::string>{"x", "b_count"}));
  EXPECT_EQ(p.mutated_buffers(), (std::vector<std::string>{"count"}));
  EXPECT_EQ(p.graph().output_node()->arg(0).nodes()[0]->name(), "getitem");
  const ExportedProgram& sub = *p.lowered_modules()[0].original_module;
  EXPECT_EQ(sub.signature().inputs[0], (InputSpec{InputKind::kUserInput, "b_count", "", true, "b_count"}));
  EXPECT_EQ(sub.signature().outputs[0].kind, OutputKind::kUserOutput);
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
}

TEST_F(ToBackendTest, OutsideUsersInsideTheSpanMoveAfterTheDelegate) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({4}));
  Node* r = b.relu(x);
  Node* n = b.neg(r);
  Node* n2 = b.op(OpId::kAbs, {n});
  Node* e = b.op(OpId::kExp, {x});
  Node* s = b.add(e, r);
  b.outputs({n2, s});
  TagPartitioner part(testing::Tags{{"relu", "t"}, {"exp", "t"}, {"add", "t"}});
  ToBackendOptions opts;
  opts.lint_each_partition = true;
  auto rep = to_backend(p, part, registry, opts);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(names(p.graph()),
            (std::vector<std::string>{"x", "lowered_module_0", "call_delegate", "getitem",
                                      "getitem_1", "neg", "abs", "output"}));
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
  // Outputs in partition order: relu (read by neg), then add (returned).
  EXPECT_EQ(p.graph().find("neg")->arg(0).node()->name(), "getitem");
  EXPECT_EQ(p.graph().output_node()->arg(0).nodes()[1]->name(), "getitem_1");
}

TEST_F(ToBackendTest, PartitionWithACycleThroughOutsideNodesIsRejected) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({4}));
  Node* r = b.relu(x);
  Node* n = b.neg(r);
  Node* a = b.add(n, x);
  b.outputs({a});
  std::string before = print_kir(p);
  TagPartitioner part(testing::Tags{{"relu", "t"}, {"add", "t"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(),
            "to_backend: partition 't' forms a cycle: node 'add' reads 'neg', which is outside "
            "the partition and depends on it");
  // Untouched on error, apart from the debug handles set first.
  EXPECT_TRUE(p.lowered_modules().empty());
  EXPECT_EQ(p.graph().find("relu")->meta.delegation_tag, "");
}

TEST_F(ToBackendTest, TaggedOutputNodeIsAnError) {
  build_mm_add(p);
  TagPartitioner part(testing::Tags{{"add_1", "t"}, {"output", "t"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(), "to_backend: output node 'output' should not be tagged (tag 't')");
}

TEST_F(ToBackendTest, TaggedUserInputIsAnError) {
  build_mm_add(p);
  TagPartitioner part(testing::Tags{{"x", "t"}, {"mm", "t"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(),
            "to_backend: placeholder 'x' is a user input and should not be tagged (tag 't'); only "
            "parameters, buffers and constants can be");
}

TEST_F(ToBackendTest, TagWithoutNodesIsSkipped) {
  build_mm_add(p);
  TagPartitioner part(testing::Tags{{"sub", "t"}});
  part.add_empty_tag("empty");
  auto rep = to_backend(p, part, registry);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->partitions, 1u);
  EXPECT_EQ(rep->skipped_tags, (std::vector<std::string>{"empty"}));
}

class RewritingPartitioner : public Partitioner {
 public:
  Result<PartitionResult> partition(ExportedProgram& program) override {
    Node* sub = program.graph().find("sub");
    KILN_RETURN_IF_ERROR(program.graph().set_arg(sub, 1, Arg(program.graph().find("y"))));
    sub->meta.delegation_tag = "t";
    PartitionResult r;
    r.partition_tags["t"] = DelegationSpec{"demo", {}};
    return r;
  }
};

TEST_F(ToBackendTest, PartitionerThatChangesTheGraphIsRejected) {
  build_mm_add(p);
  RewritingPartitioner part;
  auto rep = to_backend(p, part, registry);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(),
            "to_backend: the partitioner should not modify the graph (only set delegation tags)");
  EXPECT_EQ(p.graph().find("sub")->arg(1).node()->name(), "x");  // restored
  ToBackendOptions lenient;
  lenient.check_identical_graph = false;
  auto ok = to_backend(p, part, registry, lenient);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->partitions, 1u);
}

TEST_F(ToBackendTest, UnknownBackend) {
  build_mm_add(p);
  TagPartitioner part(testing::Tags{{"sub", "t"}}, "npu9000");
  auto rep = to_backend(p, part, registry);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(),
            "to_backend: tag 't': backend 'npu9000' was not found (registered: demo)");
}

TEST_F(ToBackendTest, PreprocessFailureLeavesTheProgramUnchanged) {
  build_mm_add(p);
  assign_debug_handles(p.graph());
  std::string before = print_kir(p);
  TagPartitioner part(testing::Tags{{"mm", "t"}, {"add", "t"}}, "demo",
                      {make_compile_spec("ops", "add")});
  auto rep = to_backend(p, part, registry);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(),
            "to_backend: backend 'demo' failed on partition 't': demo backend: node 'mm' (mm) is "
            "not in the delegated op set {add}");
  EXPECT_EQ(print_kir(p), before);
}

TEST_F(ToBackendTest, SharedConstantWithoutDuplicationIsAnError) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* c = b.param("c", {2});
  Node* a = b.add(x, c);
  Node* m = b.mul(a, c);
  b.outputs({m});
  TagPartitioner part(testing::Tags{{"p_c", "t"}, {"add", "t"}});
  ToBackendOptions opts;
  opts.duplicate_constants = false;
  auto rep = to_backend(p, part, registry, opts);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(),
            "to_backend: constant data node 'p_c' is tagged with 't' but has user 'mul' which has "
            "tag none");
}

TEST_F(ToBackendTest, SharedConstantIsDuplicatedForEachTag) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* c = b.param("c", {2});
  Node* a = b.add(x, c);
  Node* m = b.mul(a, c);
  b.outputs({m});
  TagPartitioner part(testing::Tags{{"p_c", "t0"}, {"add", "t0"}, {"mul", "t1"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->partitions, 2u);
  EXPECT_EQ(rep->constants_duplicated, 1u);
  EXPECT_EQ(rep->duplicated_bytes, 8u);
  const ExportedProgram& s0 = *p.lowered_modules()[0].original_module;
  const ExportedProgram& s1 = *p.lowered_modules()[1].original_module;
  EXPECT_TRUE(s0.constants().contains("c"));
  EXPECT_EQ(s1.signature().inputs[0].kind, InputKind::kParameter);
  EXPECT_TRUE(s1.constants().find(s1.signature().inputs[0].target)
                  ->shares_storage_with(*s0.constants().find("c")));
  // The owner keeps no parameter, only each delegate's named data (the demo blob's weights):
  // the same storage twice, which a program file stores once.
  ASSERT_EQ(p.constants().entries().size(), 2u);
  const Tensor* n0 = p.constants().find("lowered_module_0.c");
  const Tensor* n1 = p.constants().find(p.lowered_modules()[1].named_data.at(0).second);
  ASSERT_TRUE(n0 && n1);
  EXPECT_TRUE(n0->shares_storage_with(*n1));
  // The copy gets a debug handle of its own.
  const Node* copy = s1.graph().find(s1.signature().inputs[0].arg);
  ASSERT_NE(copy, nullptr);
  EXPECT_GE(copy->meta.debug_handle, 0);
  EXPECT_NE(copy->meta.debug_handle, s0.graph().find("p_c")->meta.debug_handle);
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
}

// The reference copies a shared constant once per user after the first (two copies here, both
// in t1's delegate); kiln once per other tag, and the copy takes that tag (_assign_new_tag).
TEST_F(ToBackendTest, SharedConstantIsCopiedOncePerOtherTag) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* c = b.param("c", {2});
  Node* a = b.add(x, c);
  Node* m = b.mul(a, c);
  Node* s = b.op(OpId::kSub, {m, c});
  b.outputs({s});
  TagPartitioner part(testing::Tags{{"p_c", "t0"}, {"add", "t0"}, {"mul", "t1"}, {"sub", "t1"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->constants_duplicated, 1u);
  const ExportedProgram& s1 = *p.lowered_modules()[1].original_module;
  EXPECT_EQ(input_names(s1), (std::vector<std::string>{"p_c_copy_0", "getitem"}));
  EXPECT_EQ(s1.signature().inputs[0].kind, InputKind::kParameter);
  EXPECT_EQ(s1.graph().find("mul")->arg(1).node(), s1.graph().find("sub")->arg(1).node());
}

// The reference raises for a no_copy constant read in another partition; kiln returns the
// error and restores the program.
TEST_F(ToBackendTest, NoCopyConstantReadByAnotherTagIsAnError) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* c = b.param("c", {2});
  Node* a = b.add(x, c);
  b.outputs({b.mul(a, c)});
  c->meta.no_copy = true;
  assign_debug_handles(p.graph());
  std::string before = print_kir(p);
  TagPartitioner part(testing::Tags{{"p_c", "t0"}, {"add", "t0"}, {"mul", "t1"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(),
            "to_backend: constant 'p_c' (tag 't0') has no_copy set but is used by node 'mul' "
            "(tag 't1')");
  EXPECT_EQ(print_kir(p), before);
}

TEST_F(ToBackendTest, TupleAcrossTheBoundaryIsUnsupported) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({4}));
  Node* r = b.relu(x);
  std::vector<Arg> split_args;  // built one by one: see LowerBuilder
  split_args.emplace_back(r);
  Kwargs split_kwargs;
  split_kwargs.emplace_back("split_sizes", Arg(std::vector<int64_t>{2, 2}));
  Node* sp = b.call(OpId::kSplit, std::move(split_args), split_kwargs);
  std::vector<Arg> getitem_args;
  getitem_args.emplace_back(sp);
  getitem_args.emplace_back(int64_t{0});
  Node* g0 = b.call(OpId::kGetitem, std::move(getitem_args));
  b.outputs({g0});
  TagPartitioner part(testing::Tags{{"relu", "t"}, {"split", "t"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(),
            "to_backend: partition 't': output 'split' returns 2 values; a delegate boundary must "
            "carry single tensors (tag the getitem nodes with it)");
}

TEST_F(ToBackendTest, OwnedBufferWrittenOutsideIsRejected) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({3}));
  Node* buf = b.buffer("state", {3});
  Node* m = b.mul(buf, x);
  Node* upd = b.relu(x);
  b.outputs({upd, m}, {{OutputKind::kBufferMutation, "state"}, {OutputKind::kUserOutput, ""}});
  TagPartitioner part(testing::Tags{{"b_state", "t"}, {"mul", "t"}});
  auto rep = to_backend(p, part, registry);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(),
            "to_backend: partition 't' owns buffer 'state' but its new value 'relu' is computed "
            "outside the partition");
}

TEST_F(ToBackendTest, WholeProgramToOneLoweredModule) {
  build_mm_add(p);
  auto lm = to_backend("demo", p, {make_compile_spec("ops", "mm,add,sub")}, registry);
  ASSERT_TRUE(lm.ok()) << lm.status().message();
  EXPECT_EQ(lm->backend_id, "demo");
  EXPECT_EQ(lm->name, "");
  ASSERT_NE(lm->processed_bytes, nullptr);
  auto bytes = lm->processed_bytes->bytes();
  std::string blob(bytes.begin(), bytes.end());
  EXPECT_EQ(blob.rfind("KILNPTE", 0), 0u);  // a program file
  EXPECT_EQ(lm->debug_handle_map.size(), 5u);
  EXPECT_EQ(names(lm->original_module->graph()), names(p.graph()));
  EXPECT_EQ(p.graph().find("mm")->meta.debug_handle, -1);  // the caller's program is untouched
  auto missing = to_backend("nope", p, {}, registry);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "backend 'nope' was not found (registered: demo)");
}

TEST(BackendRegistry, RejectsDuplicateIds) {
  BackendRegistry r;
  ASSERT_TRUE(demo::register_demo_backend(r).ok());
  Status st = demo::register_demo_backend(r);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "backend registry: backend 'demo' is already registered");
  EXPECT_EQ(r.ids(), std::vector<std::string>{"demo"});
  EXPECT_NE(r.find("demo"), nullptr);
  EXPECT_EQ(r.find("xnnpack"), nullptr);
}

}  // namespace
}  // namespace kiln
