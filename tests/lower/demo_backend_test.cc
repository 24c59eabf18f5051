// The demo backend end to end: partition, lower, execute (portable kernels outside, demo
// delegate inside) and compare with executing the original program.
#include "kiln/backends/demo/demo_backend.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/ir/kir.h"
#include "kiln/lower/to_backend.h"
#include "kiln/lower/utils.h"
#include "kiln/partition/capability_partitioner.h"
#include "lower_test_util.h"
#include "testing/graph_builder.h"

namespace kiln {
namespace {

using testing::f32;
using testing::LowerBuilder;

using testing::ramp;

std::vector<Tensor> run_reference(ExportedProgram& p, std::span<const Tensor> inputs, int runs = 1) {
  portable::InterpreterOptions o;
  o.update_buffers = true;
  auto interp = portable::Interpreter::create(p, o);
  EXPECT_TRUE(interp.ok()) << interp.status().message();
  std::vector<Tensor> out;
  for (int i = 0; i < runs; ++i) {
    auto r = (*interp)->run(inputs);
    EXPECT_TRUE(r.ok()) << r.status().message();
    out = r->outputs;
  }
  return out;
}

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape()) << "output " << i;
    ASSERT_EQ(a[i].dtype(), b[i].dtype()) << "output " << i;
    for (int64_t k = 0; k < a[i].numel(); ++k) {
      EXPECT_EQ(a[i].scalar_at(k), b[i].scalar_at(k)) << "output " << i << " element " << k;
    }
  }
}

// x -> linear(w1, b1) -> relu -> tanh (not delegated) -> linear(w2) -> add(x2) -> out,
// plus a side output mul(relu, 2).
void build_mlp(ExportedProgram& p) {
  LowerBuilder b(p);
  Node* x = b.input("x", f32({2, 3}));
  Node* x2 = b.input("x2", f32({2, 4}));
  Node* w1 = p.add_parameter("p_w1", "w1", ramp({4, 3}, -0.5, 0.1));
  Node* b1 = p.add_parameter("p_b1", "b1", ramp({4}, 0.1, 0.05));
  Node* w2 = p.add_parameter("p_w2", "w2", ramp({4, 4}, 0.3, -0.04));
  Node* l1 = b.linear(x, w1, b1);
  Node* r = b.relu(l1);
  Node* t = b.op(OpId::kTanh, {r});
  Node* l2 = b.linear(t, w2);
  Node* a = b.add(l2, x2);
  Node* m = b.op_scalar(OpId::kMul, r, 2.0);
  b.outputs({a, m});
}

TEST(DemoBackend, EndToEndMatchesThePortableInterpreter) {
  ExportedProgram p;
  build_mlp(p);
  std::vector<Tensor> inputs = {ramp({2, 3}, -1.0, 0.3), ramp({2, 4}, 0.5, -0.2)};
  ExportedProgram original = p.clone();
  std::vector<Tensor> expect = run_reference(original, inputs);

  BackendRegistry registry = testing::demo_registry();
  std::vector<CompileSpec> specs = {make_compile_spec("ops", "linear,relu,add,mul")};
  auto support = demo::demo_operator_support(specs);
  ASSERT_TRUE(support.ok());
  CapabilityPartitioner partitioner("demo", specs, *support);
  auto rep = to_backend(p, partitioner, registry);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->partitions, 2u);
  EXPECT_EQ(rep->nodes_delegated, 5u);
  EXPECT_EQ(rep->nodes_total, 6u);
  EXPECT_EQ(get_non_lowered_nodes(p.graph()).size(), 1u);

  auto got = demo::run_with_demo_delegates(p, inputs);
  ASSERT_TRUE(got.ok()) << got.status().message();
  expect_same(*got, expect);
}

TEST(DemoBackend, DelegateKeepsItsBufferState) {
  ExportedProgram p;
  LowerBuilder b(p);
  Node* x = b.input("x", f32({3}));
  Node* buf = p.add_buffer("b_acc", "acc", ramp({3}, 1.0, 1.0));
  Node* upd = b.add(buf, x);
  Node* y = b.op_scalar(OpId::kMul, upd, 3.0);
  b.outputs({upd, y}, {{OutputKind::kBufferMutation, "acc"}, {OutputKind::kUserOutput, ""}});
  std::vector<Tensor> inputs = {ramp({3}, 0.5, 0.25)};
  ExportedProgram original = p.clone();
  std::vector<Tensor> expect = run_reference(original, inputs, /*runs=*/3);

  BackendRegistry registry = testing::demo_registry();
  auto support = demo::demo_operator_support(std::vector<CompileSpec>{});
  ASSERT_TRUE(support.ok());
  CapabilityPartitioner partitioner("demo", {}, *support);
  auto rep = to_backend(p, partitioner, registry);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_TRUE(p.mutated_buffers().empty()) << "the delegate should own the buffer";
  // One delegate instance across three calls: its buffer accumulates like the original's.
  const LoweredModule& m = p.lowered_modules()[0];
  auto named_or = demo::named_data_of(p, m);
  ASSERT_TRUE(named_or.ok()) << named_or.status().message();
  const runtime::NamedDataMap& named = *named_or;
  auto d = demo::DemoDelegate::init(m.processed_bytes->bytes(), m.processed_bytes, &named);
  ASSERT_TRUE(d.ok()) << d.status().message();
  std::vector<Tensor> got;
  for (int i = 0; i < 3; ++i) {
    auto r = d->execute(inputs);
    ASSERT_TRUE(r.ok()) << r.status().message();
    got = *r;
  }
  expect_same(got, expect);
}

TEST(DemoBackend, BlobIsTheSubmoduleAsAProgramFileWithNamedWeights) {
  ExportedProgram p;
  build_mlp(p);
  BackendRegistry registry = testing::demo_registry();
  testing::TagPartitioner part(testing::Tags{{"p_w1", "t"}, {"p_b1", "t"}, {"linear", "t"}});
  ASSERT_TRUE(to_backend(p, part, registry).ok());
  const LoweredModule& m = p.lowered_modules()[0];
  // The weights stay with the owner as named data, under the module's name.
  EXPECT_EQ(m.named_data, (std::vector<std::pair<std::string, std::string>>{
                              {"w1", "lowered_module_0.w1"}, {"b1", "lowered_module_0.b1"}}));
  const Tensor* w1 = p.constants().find("lowered_module_0.w1");
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(std::memcmp(w1->data(), m.original_module->constants().find("w1")->data(), w1->nbytes()), 0);
  // The blob holds no weight bytes: it is a program file whose constants are external.
  auto blob = m.processed_bytes->bytes();
  std::string_view blob_text(reinterpret_cast<const char*>(blob.data()), blob.size());
  EXPECT_EQ(blob_text.find(std::string_view(static_cast<const char*>(w1->data()), w1->nbytes())),
            std::string_view::npos);
  auto alone = runtime::Program::load_buffer(blob, m.processed_bytes);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("named data 'w1' is needed but none was given"),
            std::string::npos)
      << alone.status().message();
  auto named_or = demo::named_data_of(p, m);
  ASSERT_TRUE(named_or.ok()) << named_or.status().message();
  const runtime::NamedDataMap& named = *named_or;
  auto program = runtime::Program::load_buffer(blob, m.processed_bytes, &named);
  ASSERT_TRUE(program.ok()) << program.status().message();
  EXPECT_EQ((*program)->method_names(), std::vector<std::string>{"forward"});
  auto info = (*program)->method_info("forward");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->kernel_calls, 1u);  // the linear
  EXPECT_TRUE((*program)->segments().empty());
  // It runs like the submodule.
  runtime::BackendRegistry none;
  auto method = (*program)->load_method("forward", none);
  ASSERT_TRUE(method.ok()) << method.status().message();
  std::vector<Tensor> inputs;
  for (const auto& meta : (*method)->input_meta()) inputs.push_back(ramp(meta.sizes, 0.25, 0.5));
  auto d = demo::DemoDelegate::init(blob, m.processed_bytes, &named);
  ASSERT_TRUE(d.ok()) << d.status().message();
  auto got = d->execute(inputs);
  ASSERT_TRUE(got.ok()) << got.status().message();
  expect_same(*got, run_reference(*m.original_module, inputs, 1));
}

TEST(DemoBackend, BlobErrors) {
  std::vector<uint8_t> junk = {'n', 'o', 'p', 'e'};
  auto r = demo::DemoDelegate::init(junk, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "demo delegate: invalid program: header: the file has 4 bytes, fewer than the 64-byte "
            "header (truncated?)");
  // A real blob cut short.
  ExportedProgram p;
  build_mlp(p);
  BackendRegistry registry = testing::demo_registry();
  testing::TagPartitioner part(testing::Tags{{"p_w1", "t"}, {"p_b1", "t"}, {"linear", "t"}});
  ASSERT_TRUE(to_backend(p, part, registry).ok());
  auto full = p.lowered_modules()[0].processed_bytes->bytes();
  std::vector<uint8_t> cut(full.begin(), full.end() - 64);
  auto r3 = demo::DemoDelegate::init(cut, {});
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().message().rfind("demo delegate: invalid program: header: ", 0), 0u)
      << r3.status().message();
}

TEST(DemoBackend, OpListParsing) {
  auto ok = demo::parse_op_list("add, mul,add");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<OpId>{OpId::kAdd, OpId::kMul}));
  EXPECT_EQ(demo::format_op_list(*ok), "add,mul");
  auto unknown = demo::parse_op_list("add,frobnicate");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "op list 'add,frobnicate': unknown op 'frobnicate'");
  auto empty = demo::parse_op_list("add,,mul");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "op list 'add,,mul': empty op name");
  auto spec = demo::demo_operator_support({make_compile_spec("ops", "gelu,nope")});
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(), "op list 'gelu,nope': unknown op 'nope'");
}

TEST(DemoBackend, RunRejectsForeignLoweredModules) {
  ExportedProgram p;
  build_mlp(p);
  BackendRegistry registry = testing::demo_registry();
  testing::TagPartitioner part(testing::Tags{{"tanh", "t"}});
  ASSERT_TRUE(to_backend(p, part, registry).ok());
  p.lowered_modules()[0].backend_id = "xnnpack";
  auto r = demo::run_with_demo_delegates(p, std::vector<Tensor>{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "lowered module 'lowered_module_0' is for backend 'xnnpack', not 'demo'");
}

}  // namespace
}  // namespace kiln
