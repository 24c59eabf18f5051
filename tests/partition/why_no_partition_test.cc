#include "kiln/partition/why_no_partition.h"

#include <gtest/gtest.h>

#include "partition/partition_test_util.h"

namespace kiln {
namespace {

TEST(WhyNoPartition, MessageText) {
  test::ProgramBuilder b;
  Node* add = b.add(b.input("x"), b.input("y"), "add_3");
  EXPECT_EQ(why_no_partition_message(*add, "op 'add' is not in the supported op set"),
            "WhyNoPartition: Node add_3 was not partitioned because op 'add' is not in the "
            "supported op set.");
  std::vector<std::string> lines;
  WhyNoPartition log([&](std::string_view l) { lines.emplace_back(l); });
  log(*add, "R");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "WhyNoPartition: Node add_3 was not partitioned because R.");
  WhyNoPartition silent;
  silent(*add, "R");  // an empty sink discards
}

TEST(WhyNoPartitionReporter, FirstReasonWinsAndSkipsPlaceholdersAndOutput) {
  test::ProgramBuilder b;
  Node* x = b.input("x");
  Node* relu = b.relu(x, "relu");
  Node* gelu = b.call(OpId::kGelu, {relu}, "gelu");
  b.outputs({gelu});
  std::vector<std::string> lines;
  WhyNoPartitionReporter rep([&](std::string_view l) { lines.emplace_back(l); });
  rep.report(*x, "a placeholder");
  rep.report(*b.ep.graph().output_node(), "the output");
  rep.report(*gelu, "first");
  rep.report(*relu, "only");
  rep.report(*gelu, "second");
  ASSERT_EQ(rep.entries().size(), 2u);
  EXPECT_EQ(rep.entries()[0].node_name, "gelu");
  EXPECT_EQ(rep.entries()[1].node_name, "relu");
  EXPECT_EQ(rep.reason_for("gelu"), "first");
  EXPECT_EQ(rep.reason_for("relu"), "only");
  EXPECT_FALSE(rep.reason_for("x").has_value());
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "WhyNoPartition: Node gelu was not partitioned because first.",
                       "WhyNoPartition: Node relu was not partitioned because only."}));
  rep.clear();
  EXPECT_TRUE(rep.empty());
  rep.report(*gelu, "again");
  EXPECT_EQ(rep.reason_for("gelu"), "again");
}

TEST(WhyNoPartitionReporter, EmptyTable) {
  WhyNoPartitionReporter rep;
  EXPECT_EQ(rep.table(), "No nodes rejected.");
}

TEST(WhyNoPartitionReporter, FancyGridTable) {
  test::ProgramBuilder b;
  Node* x = b.input("x");
  Node* gelu = b.call(OpId::kGelu, {x}, "gelu");
  Node* mm = b.call(OpId::kMm, {gelu, gelu}, "mm_1");
  mm->meta.source = "model.py:12 torch.mm";
  Node* relu = b.relu(mm, "a_very_long_node_name_that_exceeds_the_limit");
  WhyNoPartitionReporter rep;
  rep.report(*gelu, "op 'gelu' is not in the supported op set");
  rep.report(*mm, "input 'x' has dtype i64, which is not in {f32}");
  rep.report(*relu, "it is excluded");
  // Expected text made with Python's textwrap (what tabulate's maxcolwidths uses).
  const char* expected =
      "╒═════════════════════════════════════╤══════════╤══════════════════════╤═══════════════════════════════════╕\n"
      "│ Node name                           │ Target   │ Torch func           │ Reason                            │\n"
      "╞═════════════════════════════════════╪══════════╪══════════════════════╪═══════════════════════════════════╡\n"
      "│ gelu                                │ gelu     │ gelu                 │ op 'gelu' is not in the supported │\n"
      "│                                     │          │                      │ op set                            │\n"
      "├─────────────────────────────────────┼──────────┼──────────────────────┼───────────────────────────────────┤\n"
      "│ mm_1                                │ mm       │ model.py:12 torch.mm │ input 'x' has dtype i64, which is │\n"
      "│                                     │          │                      │ not in {f32}                      │\n"
      "├─────────────────────────────────────┼──────────┼──────────────────────┼───────────────────────────────────┤\n"
      "│ a_very_long_node_name_that_exceeds_ │ relu     │ relu                 │ it is excluded                    │\n"
      "│ the_limit                           │          │                      │                                   │\n"
      "╘═════════════════════════════════════╧══════════╧══════════════════════╧═══════════════════════════════════╛";
  EXPECT_EQ(rep.table(), expected);
}

TEST(WhyNoPartitionReporter, SmallTableUsesHeaderPadding) {
  // Column width = max(header + 2, widest cell); ü counts as one character.
  const char* expected =
      "╒═════╤═══════╕\n"
      "│ a   │ bcd   │\n"
      "╞═════╪═══════╡\n"
      "│ x   │ ü     │\n"
      "├─────┼───────┤\n"
      "│ yyy │       │\n"
      "│ yy  │       │\n"
      "╘═════╧═══════╛";
  EXPECT_EQ(render_fancy_grid({"a", "bcd"}, {{"x", "ü"}, {"yyyyy", ""}}, 3), expected);
}

TEST(WhyNoPartitionReporter, WrapperReportsRejections) {
  test::ProgramBuilder b;
  Node* x = b.input("x");
  Node* relu = b.relu(x, "relu");
  Node* gelu = b.call(OpId::kGelu, {relu}, "gelu");
  auto rep = std::make_shared<WhyNoPartitionReporter>();
  auto check = report_rejections(supported_ops({OpId::kRelu}), rep);
  EXPECT_TRUE(check->is_node_supported(b.ep, *relu).supported);
  SupportResult r = check->is_node_supported(b.ep, *gelu);
  EXPECT_FALSE(r.supported);
  EXPECT_EQ(r.reason, "op 'gelu' is not in the supported op set");
  ASSERT_EQ(rep->entries().size(), 1u);
  EXPECT_EQ(rep->entries()[0].node_name, "gelu");
  EXPECT_EQ(rep->entries()[0].target, "gelu");
  EXPECT_EQ(rep->entries()[0].torch_func, "gelu");
  EXPECT_EQ(rep->entries()[0].reason, "op 'gelu' is not in the supported op set");
}

}  // namespace
}  // namespace kiln
