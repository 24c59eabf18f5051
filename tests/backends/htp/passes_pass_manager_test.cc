// PassManager (src/passes/pass_manager.cc): order, lint after a changed pass, print hook, timings.
#include "kiln/passes/pass_manager.h"

#include <gtest/gtest.h>

#include "testing/graph_builder.h"

namespace kiln {
namespace {

using testing::f32;
using testing::GraphBuilder;

ExportedProgram small_program() {
  ExportedProgram p;
  GraphBuilder b(p);
  b.outputs({b.relu(b.neg(b.input("x", f32({2}))))});
  return p;
}

TEST(PassManager, RunsInOrderAndReportsChange) {
  ExportedProgram p = small_program();
  std::vector<std::string> seen;
  std::vector<std::string> printed;
  PassManagerOptions options;
  options.after_changed = [&](std::string_view pass, const ExportedProgram&) { printed.emplace_back(pass); };
  PassManager pm(options);
  pm.add("A", [&](ExportedProgram&) -> Result<bool> { seen.push_back("A"); return false; })
      .add("B", [&](ExportedProgram&) -> Result<bool> { seen.push_back("B"); return true; });
  auto r = pm.run(p);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(*r);
  EXPECT_EQ(seen, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(printed, (std::vector<std::string>{"B"}));  // only the pass that changed something
  ASSERT_EQ(pm.records().size(), 2u);
  EXPECT_FALSE(pm.records()[0].changed);
  EXPECT_TRUE(pm.records()[1].changed);
  std::string report = pm.timing_report();
  EXPECT_NE(report.find("A "), std::string::npos);
  EXPECT_NE(report.find("total"), std::string::npos);
}

TEST(PassManager, ErrorsNameThePass) {
  ExportedProgram p = small_program();
  PassManager pm;
  bool ran_after = false;
  pm.add("Broken", [](ExportedProgram&) -> Result<bool> { return invalid_argument("cannot"); })
      .add("Next", [&](ExportedProgram&) -> Result<bool> { ran_after = true; return false; });
  auto r = pm.run(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "pass 'Broken': cannot");
  EXPECT_FALSE(ran_after);
}

TEST(PassManager, LintsAfterAChangedPassAndNamesIt) {
  ExportedProgram p = small_program();
  PassManager pm;
  // Breaks the signature: a second output value without an output spec.
  pm.add("Unsigned", [](ExportedProgram& q) -> Result<bool> {
    Node* out = q.graph().output_node();
    std::vector<Node*> values = out->arg(0).nodes();
    values.push_back(values[0]);
    q.graph().set_output(values);
    return true;
  });
  auto r = pm.run(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("after pass 'Unsigned': ", 0), 0u) << r.status().message();
}

TEST(PassManager, UnchangedPassIsNotLinted) {
  ExportedProgram p = small_program();
  PassManagerOptions options;
  options.lint_input = false;
  PassManager pm(options);
  pm.add("Quiet", [](ExportedProgram& q) -> Result<bool> {
    Node* out = q.graph().output_node();
    std::vector<Node*> values = out->arg(0).nodes();
    values.push_back(values[0]);
    q.graph().set_output(values);
    return false;  // claims no change: the manager trusts it
  });
  EXPECT_TRUE(pm.run(p).ok());
}

}  // namespace
}  // namespace kiln
