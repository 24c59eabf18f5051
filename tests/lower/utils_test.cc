// Delegation utilities: queries on lowered programs and the quantization rewrites.
#include "kiln/lower/utils.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(names(get_delegates(p.graph())),
            (std::vector<std::string>{"call_delegate", "call_delegate_1"}));
  auto payload = get_delegated_payload(p);
  ASSERT_EQ(payload.size(), 2u);
  const DelegatedPayload& d1 = payload.at("lowered_module_1");
  EXPECT_EQ(d1.backend_id, "demo");
  EXPECT_EQ(d1.compile_specs, specs);
  EXPECT_EQ(d1.blob, p.lowered_modules()[1].processed_bytes);
}

TEST(DelegationQueries, FormatPlainGraphIsPrintGraph) {
  ExportedProgram p;
  LowerBuilder b(p);
  Node* x = b.input("x", f32({2}));
  b.outputs({b.relu(x)});
  EXPECT_EQ(format_delegated_graph(p), print_graph(p.graph()));
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
