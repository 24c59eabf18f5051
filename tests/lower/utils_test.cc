// Delegation utilities: queries on lowered programs and the quantization rewrites.
#include "kiln/lower/utils.h"

#include <gtest/gtest.h>

#include <sstream>

#include "kiln/ir/kir.h"
#include "lower_test_util.h"
#include "testing/graph_builder.h"

namespace kiln {
namespace {

using testing::f32;
using testing::LowerBuilder;

std::vector<std::string> names(const std::vector<Node*>& nodes) {
  std::vector<std::string> out;
  for (Node* n : nodes) out.push_back(n->name());
  return out;
}

TEST(DelegationQueries, NonLoweredNodesDelegatesAndPayload) {
  ExportedProgram p;
  LowerBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* r = b.relu(x);
  Node* n = b.neg(r);
  Node* e = b.op(OpId::kExp, {n});
  Node* a = b.add(e, r);
  b.outputs({a});
  BackendRegistry reg = testing::demo_registry();
  std::vector<CompileSpec> specs = {make_compile_spec("ops", "relu,exp,add")};
  testing::TagPartitioner part(testing::Tags{{"relu", "a"}, {"exp", "b"}, {"add", "b"}}, "demo", specs);
  auto rep = to_backend(p, part, reg);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(names(get_non_lowered_nodes(p.graph())), std::vector<std::string>{"neg"});
  // The get_attr nodes that read the modules, as ExecuTorch's get_delegates returns.
  EXPECT_EQ(names(get_delegates(p.graph())),
            (std::vector<std::string>{"lowered_module_0", "lowered_module_1"}));
  // A module no get_attr reads is no delegate of the graph.
  p.lowered_modules().push_back({"lowered_module_7", "demo", specs, nullptr, nullptr, {}});
  auto payload = get_delegated_payload(p);
  ASSERT_EQ(payload.size(), 2u);
  EXPECT_EQ(payload.count("lowered_module_7"), 0u);
  const DelegatedPayload& d1 = payload.at("lowered_module_1");
  EXPECT_EQ(d1.backend_id, "demo");
  EXPECT_EQ(d1.compile_specs, specs);
  EXPECT_EQ(d1.blob, p.lowered_modules()[1].processed_bytes);
  EXPECT_NE(payload.at("lowered_module_0").blob, d1.blob);
}

// _get_item_from_executorch_call_delegate: only a getitem of a call_delegate is lowered.
TEST(DelegationQueries, GetitemOfAnOrdinaryOpIsNotLowered) {
  ExportedProgram p;
  LowerBuilder b(p);
  Node* x = b.input("x", f32({4}));
  std::vector<Arg> split_args;
  split_args.emplace_back(x);
  Kwargs split_kwargs;
  split_kwargs.emplace_back("split_sizes", Arg(std::vector<int64_t>{2, 2}));
  Node* sp = b.call(OpId::kSplit, std::move(split_args), split_kwargs);
  std::vector<Arg> getitem_args;
  getitem_args.emplace_back(sp);
  getitem_args.emplace_back(int64_t{1});
  b.outputs({b.call(OpId::kGetitem, std::move(getitem_args))});
  EXPECT_EQ(names(get_non_lowered_nodes(p.graph())),
            (std::vector<std::string>{"split", "getitem"}));
  EXPECT_TRUE(get_delegates(p.graph()).empty());
}

TEST(DelegationQueries, FormatPlainGraphIsPrintGraph) {
  ExportedProgram p;
  LowerBuilder b(p);
  Node* x = b.input("x", f32({2}));
  b.outputs({b.relu(x)});
  EXPECT_EQ(format_delegated_graph(p), print_graph(p.graph()));
}

// Levels of 4 spaces, as the reference's docstring shows (its code indents by 2). A nested
// module is not expanded (the reference prints original_module's nodes only); a module read by
// a get_attr not named lowered_module_*, or by none, follows the graph.
TEST(DelegationQueries, FormatNestsOneLevelAndListsTheRest) {
  auto inner = std::make_shared<ExportedProgram>();
  {
    LowerBuilder b(*inner);
    b.outputs({b.neg(b.input("x", f32({2})))});
  }
  auto add_delegate = [](ExportedProgram& p, const char* attr_name, const char* module) {
    Node* x = p.graph().find("x");
    Node* attr = p.graph().add_get_attr(module, attr_name);
    auto call = p.graph().add_call(OpId::kCallDelegate, {attr, x});
    EXPECT_TRUE(call.ok());
    (*call)->meta.val = {f32({2})};
    return LowerBuilder(p).call(OpId::kGetitem, {*call, 0});
  };
  auto middle = std::make_shared<ExportedProgram>();
  {
    LowerBuilder b(*middle);
    b.input("x", f32({2}));
    b.outputs({add_delegate(*middle, "lowered_module_0", "lowered_module_0")});
    middle->lowered_modules().push_back({"lowered_module_0", "cpu", {}, nullptr, inner, {}});
  }
  ExportedProgram p;
  LowerBuilder b(p);
  b.input("x", f32({2}));
  Node* g0 = add_delegate(p, "lowered_module_0", "lowered_module_0");
  Node* g1 = add_delegate(p, "other", "lowered_module_1");
  b.outputs({g0, g1});
  p.lowered_modules().push_back({"lowered_module_0", "demo", {}, nullptr, middle, {}});
  p.lowered_modules().push_back({"lowered_module_1", "demo", {}, nullptr, inner, {}});
  p.lowered_modules().push_back({"lowered_module_2", "npu", {}, nullptr, nullptr, {}});
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  EXPECT_EQ(format_delegated_graph(p),
            "graph():\n"
            "    %x : [num_users=2] f32[2] = placeholder[target=x]\n"
            "    %lowered_module_0 : [num_users=1] ? = get_attr[target=lowered_module_0]\n"
            "        backend_id: demo\n"
            "        lowered graph():\n"
            "            %x : [num_users=1] f32[2] = placeholder[target=x]\n"
            "            %lowered_module_0 : [num_users=1] ? = get_attr[target=lowered_module_0]\n"
            "            %call_delegate : [num_users=1] (f32[2],) = "
            "call_function[target=call_delegate](args = (%lowered_module_0, %x), kwargs = {})\n"
            "            %getitem : [num_users=1] f32[2] = call_function[target=getitem]"
            "(args = (%call_delegate, 0), kwargs = {})\n"
            "            return (getitem,)\n"
            "    %call_delegate : [num_users=1] (f32[2],) = call_function[target=call_delegate]"
            "(args = (%lowered_module_0, %x), kwargs = {})\n"
            "    %getitem : [num_users=1] f32[2] = call_function[target=getitem]"
            "(args = (%call_delegate, 0), kwargs = {})\n"
            "    %other : [num_users=1] ? = get_attr[target=lowered_module_1]\n"
            "    %call_delegate_1 : [num_users=1] (f32[2],) = call_function[target=call_delegate]"
            "(args = (%other, %x), kwargs = {})\n"
            "    %getitem_1 : [num_users=1] f32[2] = call_function[target=getitem]"
            "(args = (%call_delegate_1, 0), kwargs = {})\n"
            "    return (getitem, getitem_1)\n"
            "lowered_module_1:\n"
            "    backend_id: demo\n"
            "    lowered graph():\n"
            "        %x : [num_users=1] f32[2] = placeholder[target=x]\n"
            "        %neg : [num_users=1] f32[2] = call_function[target=neg](args = (%x,), "
            "kwargs = {})\n"
            "        return (neg,)\n"
            "lowered_module_2:\n"
            "    backend_id: npu\n");
  EXPECT_EQ(names(get_delegates(p.graph())), std::vector<std::string>{"lowered_module_0"});
  EXPECT_EQ(get_delegated_payload(p).size(), 1u);
  std::ostringstream os;
  print_delegated_graph(p, os);
  EXPECT_EQ(os.str(), format_delegated_graph(p) + "\n");
}

// x -> q -> dq -> relu -> q -> dq -> output 0; relu -> output 1 (float).
struct QuantChain {
  ExportedProgram p;
  Node *x, *q_in, *dq_in, *relu, *q_out, *dq_out;
  QuantChain() {
    LowerBuilder b(p);
    x = b.input("x", f32({4}));
    Kwargs qk = {{"scale", 0.5}, {"zero_point", int64_t{1}}, {"quant_min", int64_t{-128}},
                 {"quant_max", int64_t{127}}, {"dtype", DType::kI8}};
    q_in = b.call(OpId::kQuantizePerTensor, {x}, qk);
    dq_in = b.call(OpId::kDequantizePerTensor, {q_in}, qk);
    relu = b.relu(dq_in);
    q_out = b.call(OpId::kQuantizePerTensor, {relu}, qk);
    dq_out = b.call(OpId::kDequantizePerTensor, {q_out}, qk);
    b.outputs({dq_out, relu});
  }
};

TEST(RemoveFirstQuantAndLastDequant, ChangesBoundaryDtypesAndKeepsOtherOutputs) {
  QuantChain c;
  auto r = remove_first_quant_and_last_dequant(c.p);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(*r);
  EXPECT_EQ(c.x->spec().dtype, DType::kI8);
  ASSERT_TRUE(c.x->meta.quant.has_value());
  EXPECT_EQ(c.x->meta.quant->scales, std::vector<double>{0.5});
  EXPECT_EQ(c.dq_in->arg(0).node(), c.x);
  const auto& outs = c.p.graph().output_node()->arg(0).nodes();
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0], c.q_out);
  EXPECT_EQ(outs[0]->spec().dtype, DType::kI8);
  EXPECT_EQ(outs[1], c.relu);
  EXPECT_EQ(c.p.graph().find("quantize_per_tensor"), nullptr);
  EXPECT_EQ(c.p.graph().find("dequantize_per_tensor_1"), nullptr);
  EXPECT_TRUE(c.p.lint().ok()) << c.p.lint().message();
  auto again = remove_first_quant_and_last_dequant(c.p);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

TEST(RemoveFirstQuantAndLastDequant, KeepsADequantWithOtherUsers) {
  QuantChain c;
  LowerBuilder b(c.p);
  Node* extra = b.neg(c.dq_out);
  b.outputs({c.dq_out, extra});
  auto r = remove_first_quant_and_last_dequant(c.p);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(c.dq_out->erased());
  EXPECT_EQ(c.p.graph().output_node()->arg(0).nodes()[0], c.q_out);
  EXPECT_EQ(extra->arg(0).node(), c.dq_out);
  EXPECT_TRUE(c.p.lint().ok()) << c.p.lint().message();
}

// Where the reference would break the program, kiln leaves the quantize alone: a parameter's
// (its stored data is float), and one of an input another node reads as float. A dequantize is
// found at any output position, not only when the output is its first user. Only the q / dq
// bypassed are erased (the reference's eliminate_dead_code would also take the unused neg).
TEST(RemoveFirstQuantAndLastDequant, OnlyWhatStaysTypeCorrect) {
  ExportedProgram p;
  LowerBuilder b(p);
  Kwargs qk = {{"scale", 0.5}, {"zero_point", int64_t{0}}, {"quant_min", int64_t{-128}},
               {"quant_max", int64_t{127}}, {"dtype", DType::kI8}};
  Node* x = b.input("x", f32({4}));
  Node* w = b.param("w", {4});
  Node* qx = b.call(OpId::kQuantizePerTensor, {x}, qk);
  Node* qw = b.call(OpId::kQuantizePerTensor, {w}, qk);
  Node* dx = b.call(OpId::kDequantizePerTensor, {qx}, qk);
  Node* dw = b.call(OpId::kDequantizePerTensor, {qw}, qk);
  Node* r = b.relu(x);
  Node* a = b.add(dx, dw);
  Node* q = b.call(OpId::kQuantizePerTensor, {a}, qk);
  Node* dq = b.call(OpId::kDequantizePerTensor, {q}, qk);
  Node* n = b.neg(dq);
  Node* dead = b.neg(r);
  b.outputs({r, dq, n});
  auto res = remove_first_quant_and_last_dequant(p);
  ASSERT_TRUE(res.ok()) << res.status().message();
  EXPECT_TRUE(*res);
  EXPECT_EQ(x->spec().dtype, DType::kF32);
  EXPECT_EQ(dx->arg(0).node(), qx);
  EXPECT_EQ(dw->arg(0).node(), qw);
  EXPECT_EQ(w->spec().dtype, DType::kF32);
  EXPECT_EQ(p.graph().output_node()->arg(0).nodes(), (std::vector<Node*>{r, q, n}));
  EXPECT_EQ(n->arg(0).node(), dq);
  EXPECT_FALSE(dead->erased());
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
}

TEST(ReplaceQuantizedPartition, FusesDqOpQ) {
  QuantChain c;
  SourcePartition part{{c.relu}, {}};
  // The float output reads relu directly: drop it so only the q leaves the pattern.
  ASSERT_TRUE(c.p.erase_output(1).ok());
  auto r = replace_quantized_partition_with_op(c.p, part, OpId::kRelu6);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->dequant_nodes, std::vector<std::string>{"dequantize_per_tensor"});
  EXPECT_EQ(r->quant_nodes, std::vector<std::string>{"quantize_per_tensor_1"});
  Node* op = r->replaced;
  EXPECT_TRUE(op->is_call(OpId::kRelu6));
  EXPECT_EQ(op->arg(0).node(), c.q_in);
  EXPECT_EQ(op->spec().dtype, DType::kI8);
  EXPECT_EQ(c.dq_out->arg(0).node(), op);
  EXPECT_TRUE(c.p.lint().ok()) << c.p.lint().message();
}

// The reference lists a dq once per read (mul(dq, dq) gives [dq, dq]) and looks at top-level
// args only, so it misses dqs inside a list (cat([dq0, dq1])) and asserts. kiln lists each
// dq once, in first-read order, wherever it is read.
TEST(ReplaceQuantizedPartition, EachDqOnceAndInsideLists) {
  Kwargs qk = {{"scale", 0.5}, {"zero_point", int64_t{0}}, {"quant_min", int64_t{-128}},
               {"quant_max", int64_t{127}}, {"dtype", DType::kI8}};
  {
    ExportedProgram p;
    LowerBuilder b(p);
    Node* q = b.call(OpId::kQuantizePerTensor, {b.input("x", f32({4}))}, qk);
    Node* dq = b.call(OpId::kDequantizePerTensor, {q}, qk);
    Node* m = b.mul(dq, dq);
    b.outputs({b.call(OpId::kQuantizePerTensor, {m}, qk)});
    auto r = replace_quantized_partition_with_op(p, {{m}, {}}, OpId::kRelu6);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->dequant_nodes, std::vector<std::string>{"dequantize_per_tensor"});
    EXPECT_EQ(r->quant_nodes, std::vector<std::string>{"quantize_per_tensor_1"});
    EXPECT_EQ(r->replaced->arg(0).node(), q);
    EXPECT_EQ(p.graph().output_node()->arg(0).nodes()[0], r->replaced);
    EXPECT_TRUE(p.lint().ok()) << p.lint().message();
  }
  ExportedProgram p;
  LowerBuilder b(p);
  Node* q0 = b.call(OpId::kQuantizePerTensor, {b.input("x", f32({4}))}, qk);
  Node* q1 = b.call(OpId::kQuantizePerTensor, {b.input("y", f32({4}))}, qk);
  Node* d0 = b.call(OpId::kDequantizePerTensor, {q0}, qk);
  Node* d1 = b.call(OpId::kDequantizePerTensor, {q1}, qk);
  Node* cat = b.call(OpId::kCat, {std::vector<Node*>{d1, d0}});
  b.outputs({b.call(OpId::kQuantizePerTensor, {cat}, qk)});
  auto r = replace_quantized_partition_with_op(p, {{cat}, {}}, OpId::kAdd);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->dequant_nodes,
            (std::vector<std::string>{"dequantize_per_tensor_1", "dequantize_per_tensor"}));
  EXPECT_TRUE(r->replaced->is_call(OpId::kAdd));
  EXPECT_EQ(r->replaced->arg(0).node(), q0);  // graph order: d0 comes first
  EXPECT_EQ(r->replaced->arg(1).node(), q1);
}

TEST(ReplaceQuantizedPartition, MissingDequant) {
  ExportedProgram p;
  LowerBuilder b(p);
  Node* x = b.input("x", f32({4}));
  Node* r = b.relu(x);
  Node* q = b.call(OpId::kQuantizePerTensor, {r},
                   {{"scale", 0.5}, {"zero_point", int64_t{0}}, {"quant_min", int64_t{-128}},
                    {"quant_max", int64_t{127}}, {"dtype", DType::kI8}});
  b.outputs({q});
  auto res = replace_quantized_partition_with_op(p, {{r}, {}}, OpId::kRelu6);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().message(),
            "replace_quantized_partition_with_op: dequant nodes missing in node list to be "
            "replaced (no dequantize_per_tensor feeds the partition)");
}

TEST(ReplaceQuantizedPartition, MissingQuant) {
  QuantChain c;
  auto res = replace_quantized_partition_with_op(c.p, {{c.q_out}, {}}, OpId::kRelu6);
  ASSERT_FALSE(res.ok());
  // q_out is fed by relu, not by a dequantize: the dq check fails first.
  EXPECT_EQ(res.status().message(),
            "replace_quantized_partition_with_op: dequant nodes missing in node list to be "
            "replaced (no dequantize_per_tensor feeds the partition)");
  auto res2 = replace_quantized_partition_with_op(c.p, {{c.relu}, {}}, OpId::kRelu6);
  ASSERT_FALSE(res2.ok());
  EXPECT_EQ(res2.status().message(),
            "replace_quantized_partition_with_op: 2 values leave the quantized partition; 'relu6' "
            "returns one");
  ExportedProgram p;
  LowerBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kI8, {4}));
  Node* dq = b.call(OpId::kDequantizePerTensor, {x},
                    {{"scale", 0.5}, {"zero_point", int64_t{0}}, {"quant_min", int64_t{-128}},
                     {"quant_max", int64_t{127}}, {"dtype", DType::kI8}});
  Node* r = b.relu(dq);
  b.outputs({r});
  auto res3 = replace_quantized_partition_with_op(p, {{r}, {}}, OpId::kRelu6);
  ASSERT_FALSE(res3.ok());
  EXPECT_EQ(res3.status().message(),
            "replace_quantized_partition_with_op: quant nodes missing in node list to be replaced "
            "(no quantize_per_tensor reads the partition)");
}

}  // namespace
}  // namespace kiln
