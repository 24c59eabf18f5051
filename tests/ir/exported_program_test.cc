// ExportedProgram: signature upkeep through edits, lint of signature drift, constants, clone.
#include "kiln/ir/exported_program.h"

#include <gtest/gtest.h>

#include "testing/graph_builder.h"

namespace kiln {
namespace {

using testing::f32;
using testing::GraphBuilder;

TEST(ExportedProgramTest, SignatureFollowsPlaceholders) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 3}));
  Node* w = b.param("weight", {4, 3});
  Node* rm = b.buffer("running", {4});
  Node* y = b.linear(x, w);
  Node* upd = b.add(rm, rm);
  b.outputs({y, upd}, {{OutputKind::kUserOutput, ""}, {OutputKind::kBufferMutation, "running"}});
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  ASSERT_EQ(p.signature().inputs.size(), 3u);
  EXPECT_EQ(p.signature().inputs[1].kind, InputKind::kParameter);
  EXPECT_EQ(p.signature().inputs[1].target, "weight");
  EXPECT_EQ(p.input_spec(w)->arg, "p_weight");
  EXPECT_EQ(p.user_inputs(), std::vector<Node*>{x});
  EXPECT_EQ(p.user_outputs(), std::vector<Node*>{y});
  EXPECT_EQ(p.mutated_buffers(), std::vector<std::string>{"running"});
}

TEST(ExportedProgramTest, EraseInputDropsSpecAndConstant) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({3}));
  Node* c = b.param("unused", {3});
  b.outputs({b.relu(x)});
  ASSERT_TRUE(p.constants().contains("unused"));
  ASSERT_TRUE(p.erase_input(c).ok());
  EXPECT_FALSE(p.constants().contains("unused"));
  EXPECT_EQ(p.signature().inputs.size(), 1u);
  EXPECT_TRUE(p.lint().ok()) << p.lint().message();
  EXPECT_EQ(p.erase_input(x).message(), "erase_input: placeholder 'x' still has 1 users");
}

TEST(ExportedProgramTest, LintCatchesSignatureDrift) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({3}));
  Node* c = b.param("w", {3});
  b.outputs({b.add(x, c)});
  ASSERT_TRUE(p.lint().ok());

  // A pass that erases a placeholder behind the program's back.
  Node* extra = p.graph().add_placeholder("sneaky", f32({1}));
  EXPECT_EQ(p.lint().message(), "lint: graph has 3 placeholders but the signature lists 2 inputs");
  p.graph().erase(extra);
  ASSERT_TRUE(p.lint().ok());

  p.signature().inputs[1].target = "missing";
  EXPECT_EQ(p.lint().message(),
            "lint: parameter 'p_w' names constant 'missing', which is not in the store");
  p.signature().inputs[1].target = "w";

  p.constants().set("w", Tensor(DType::kF32, {4}));
  EXPECT_EQ(p.lint().message(), "lint: placeholder 'p_w' is f32[3] but constant 'w' is f32[4]");
  p.constants().set("w", Tensor(DType::kF32, {3}));

  p.signature().outputs.push_back({OutputKind::kUserOutput, ""});
  EXPECT_EQ(p.lint().message(), "lint: graph returns 1 values but the signature lists 2 outputs");
  p.signature().outputs.pop_back();
  const OutputSpec out0 = p.signature().outputs[0];
  EXPECT_EQ(out0.name, "add");  // named after its node when set_outputs was given no name

  p.signature().outputs[0] = {OutputKind::kBufferMutation, "w"};
  EXPECT_EQ(p.lint().message(), "lint: output 0 mutates 'w', which is not a buffer input");
  p.signature().outputs[0] = {OutputKind::kUserInputMutation, "nobody"};
  EXPECT_EQ(p.lint().message(), "lint: output 0 mutates 'nobody', which is not a user input");
  p.signature().outputs[0] = {OutputKind::kUserOutput, ""};
  EXPECT_EQ(p.lint().message(), "lint: user output 0 has an empty name ''");
  p.signature().outputs[0] = out0;
  p.signature().inputs[0].name.clear();
  EXPECT_EQ(p.lint().message(), "lint: user input 'x' has an empty name ''");
  p.signature().inputs[0].name = "x";

  std::swap(p.signature().inputs[0], p.signature().inputs[1]);
  EXPECT_EQ(p.lint().message(),
            "lint: input 0 is placeholder 'x' but the signature names 'p_w'");
  std::swap(p.signature().inputs[0], p.signature().inputs[1]);

  p.graph().add_get_attr("ghost");
  EXPECT_EQ(p.lint().message(),
            "lint: get_attr 'ghost' reads 'ghost', which is neither a constant, a lowered module nor a subgraph");
}

TEST(ExportedProgramTest, EraseOutputKeepsTheRest) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({3}));
  Node* r = b.relu(x);
  Node* n = b.neg(x);
  b.outputs({r, n});
  ASSERT_TRUE(p.erase_output(0).ok());
  EXPECT_EQ(p.user_outputs(), std::vector<Node*>{n});
  EXPECT_FALSE(r->has_uses());
  EXPECT_TRUE(p.lint().ok());
  EXPECT_EQ(p.erase_output(3).message(), "erase_output: no output 3");
}

TEST(ExportedProgramTest, CloneIsDeepForGraphAndSharesConstantBytes) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 3}));
  Node* w = b.param("weight", {2, 3});
  Node* y = b.linear(x, w);
  y->meta.delegation_tag = "demo_0";
  y->meta.debug_handle = 7;
  b.outputs({y});
  ExportedProgram c = p.clone();
  ASSERT_TRUE(c.lint().ok()) << c.lint().message();
  Node* cy = c.graph().find("linear");
  ASSERT_NE(cy, nullptr);
  EXPECT_NE(cy, y);
  EXPECT_EQ(cy->meta.delegation_tag, "demo_0");
  EXPECT_EQ(cy->meta.debug_handle, 7);
  EXPECT_EQ(cy->input(1)->name(), "p_weight");
  EXPECT_TRUE(c.constants().find("weight")->shares_storage_with(*p.constants().find("weight")));
  // Writing the copy's constant leaves the original untouched (copy-on-write).
  c.constants().find_mutable("weight")->mutable_data_as<float>()[0] = 42.0f;
  EXPECT_NE(p.constants().find("weight")->data_as<float>()[0], 42.0f);
}

TEST(ExportedProgramTest, KindNamesRoundTrip) {
  for (auto k : {InputKind::kUserInput, InputKind::kParameter, InputKind::kBuffer,
                 InputKind::kConstantTensor}) {
    EXPECT_EQ(input_kind_from_name(input_kind_name(k)), k);
  }
  for (auto k : {OutputKind::kUserOutput, OutputKind::kBufferMutation,
                 OutputKind::kUserInputMutation}) {
    EXPECT_EQ(output_kind_from_name(output_kind_name(k)), k);
  }
  EXPECT_FALSE(input_kind_from_name("weights").has_value());
}

}  // namespace
}  // namespace kiln
