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
  log(*add, "it is slow.");  // the reason is used as given: ExecuTorch prints ".." too
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "WhyNoPartition: Node add_3 was not partitioned because it is slow..");
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
  rep.report_reject(*x, "a placeholder");
  rep.report_reject(*b.ep.graph().output_node(), "the output");
  rep.report_reject(*gelu, "first");
  rep.report_reject(*relu, "only");
  rep.report_reject(*gelu, "second");
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
  rep.report_reject(*gelu, "again");
  EXPECT_EQ(rep.reason_for("gelu"), "again");
}

TEST(WhyNoPartitionReporter, EmptyTable) {
  WhyNoPartitionReporter rep;
  EXPECT_EQ(rep.get_table_report(), "No nodes rejected.");
}

TEST(WhyNoPartitionReporter, FancyGridTable) {
  test::ProgramBuilder b;
  Node* x = b.input("x");
  Node* gelu = b.call(OpId::kGelu, {x}, "gelu");
  Node* mm = b.call(OpId::kMm, {gelu, gelu}, "mm_1");
  mm->meta.source = "model.py:12 torch.mm";
  Node* relu = b.relu(mm, "a_very_long_node_name_that_exceeds_the_limit");
  WhyNoPartitionReporter rep;
  rep.report_reject(*gelu, "op 'gelu' is not in the supported op set");
  rep.report_reject(*mm, "input 'x' has dtype i64, which is not in {f32}");
  rep.report_reject(*relu, "it is excluded");
  rep.report_reject(*gelu, "a second reason");  // first reason wins: no second row
  // Expected text made with Python's textwrap (what tabulate's maxcolwidths uses). A node
  // without meta.source shows "-" as Torch func, as ExecuTorch does without meta["torch_fn"].
  const char* expected =
      "╒═════════════════════════════════════╤══════════╤══════════════════════╤═══════════════════════════════════╕\n"
      "│ Node name                           │ Target   │ Torch func           │ Reason                            │\n"
      "╞═════════════════════════════════════╪══════════╪══════════════════════╪═══════════════════════════════════╡\n"
      "│ gelu                                │ gelu     │ -                    │ op 'gelu' is not in the supported │\n"
      "│                                     │          │                      │ op set                            │\n"
      "├─────────────────────────────────────┼──────────┼──────────────────────┼───────────────────────────────────┤\n"
      "│ mm_1                                │ mm       │ model.py:12 torch.mm │ input 'x' has dtype i64, which is │\n"
      "│                                     │          │                      │ not in {f32}                      │\n"
      "├─────────────────────────────────────┼──────────┼──────────────────────┼───────────────────────────────────┤\n"
      "│ a_very_long_node_name_that_exceeds_ │ relu     │ -                    │ it is excluded                    │\n"
      "│ the_limit                           │          │                      │                                   │\n"
      "╘═════════════════════════════════════╧══════════╧══════════════════════╧═══════════════════════════════════╛";
  EXPECT_EQ(rep.get_table_report(), expected);
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
  auto check = wrap_check(supported_ops({OpId::kRelu}), rep);
  EXPECT_TRUE(check->is_node_supported(b.ep, *relu).supported);
  SupportResult r = check->is_node_supported(b.ep, *gelu);
  EXPECT_FALSE(r.supported);
  EXPECT_EQ(r.reason, "op 'gelu' is not in the supported op set");
  ASSERT_EQ(rep->entries().size(), 1u);
  EXPECT_EQ(rep->entries()[0].node_name, "gelu");
  EXPECT_EQ(rep->entries()[0].target, "gelu");
  EXPECT_EQ(rep->entries()[0].torch_func, "-");
  EXPECT_EQ(rep->entries()[0].reason, "op 'gelu' is not in the supported op set");
}

TEST(WhyNoPartitionReporter, RowsInReportOrder) {
  test::ProgramBuilder b;
  Node* x = b.input("x");
  Node* relu = b.relu(x, "relu");
  Node* gelu = b.call(OpId::kGelu, {relu}, "gelu");
  b.outputs({gelu});
  WhyNoPartitionReporter rep;
  rep.report_reject(*gelu, "B");
  rep.report_reject(*x, "a placeholder");  // never a row, as in get_table_report
  rep.report_reject(*relu, "A");
  rep.report_reject(*gelu, "C");
  const char* expected =
      "╒═════════════╤══════════╤══════════════╤══════════╕\n"
      "│ Node name   │ Target   │ Torch func   │ Reason   │\n"
      "╞═════════════╪══════════╪══════════════╪══════════╡\n"
      "│ gelu        │ gelu     │ -            │ B        │\n"
      "├─────────────┼──────────┼──────────────┼──────────┤\n"
      "│ relu        │ relu     │ -            │ A        │\n"
      "╘═════════════╧══════════╧══════════════╧══════════╛";
  EXPECT_EQ(rep.get_table_report(), expected);
}

TEST(WhyNoPartitionReporter, DocstringTable) {
  // The table in ExecuTorch's get_table_report docstring: a word longer than 35 fills the rest
  // of its line ("('conv2d_1', 'builtin_function_or_m").
  const char* expected =
      "╒══════════════════════════╤══════════════════════════╤═════════════════════════════════════╤═════════════════════════════════════╕\n"
      "│ Node name                │ Target                   │ Torch func                          │ Reason                              │\n"
      "╞══════════════════════════╪══════════════════════════╪═════════════════════════════════════╪═════════════════════════════════════╡\n"
      "│ aten_convolution_default │ aten.convolution.default │ ('conv2d_1', 'builtin_function_or_m │ Convolution needs to have           │\n"
      "│                          │                          │ ethod.conv2d')                      │ kernel_y<=64,                       │\n"
      "│                          │                          │                                     │ kernel_x*kernel_y<=4096, got kernel │\n"
      "│                          │                          │                                     │ (2, 65)                             │\n"
      "╘══════════════════════════╧══════════════════════════╧═════════════════════════════════════╧═════════════════════════════════════╛";
  EXPECT_EQ(render_fancy_grid({"Node name", "Target", "Torch func", "Reason"},
                              {{"aten_convolution_default", "aten.convolution.default",
                                "('conv2d_1', 'builtin_function_or_method.conv2d')",
                                "Convolution needs to have kernel_y<=64, "
                                "kernel_x*kernel_y<=4096, got kernel (2, 65)"}},
                              35),
            expected);
}

TEST(WhyNoPartitionReporter, WrapsLikeTextwrap) {
  // Expected text from tabulate's wrapping (textwrap.TextWrapper plus tabulate's long-word rule,
  // each line of a cell wrapped on its own, blank lines dropped, the cell stripped): long words
  // fill the line, words break after hyphens and around em-dashes, spaces inside a line and tabs
  // (to 8 columns) are kept.
  const char* expected =
      "╒════════════╕\n"
      "│ cell       │\n"
      "╞════════════╡\n"
      "│ ab cdefghi │\n"
      "│ jklmno     │\n"
      "├────────────┤\n"
      "│ a well-    │\n"
      "│ known op   │\n"
      "├────────────┤\n"
      "│ a  b    c  │\n"
      "├────────────┤\n"
      "│ first      │\n"
      "│ second     │\n"
      "├────────────┤\n"
      "│ x--yy--    │\n"
      "│ zzzzzzz    │\n"
      "╘════════════╛";
  EXPECT_EQ(render_fancy_grid({"cell"},
                              {{"ab cdefghijklmno"},
                               {"a well-known op"},
                               {"a  b\tc"},
                               {"  first\n\n \nsecond"},
                               {"x--yy--zzzzzzz"}},
                              10),
            expected);
}

TEST(WhyNoPartitionReporter, HeadersAreNotWrapped) {
  const char* expected =
      "╒════════════════╕\n"
      "│ header wider   │\n"
      "╞════════════════╡\n"
      "│ ab             │\n"
      "│ cd             │\n"
      "╘════════════════╛";
  EXPECT_EQ(render_fancy_grid({"header wider"}, {{"ab cd"}}, 3), expected);
}

TEST(WhyNoPartitionReporter, WrapCheckReportsItsMessage) {
  // ExecuTorch's wrap_check(support, message) reports `message`, not the check's own reason.
  test::ProgramBuilder b;
  Node* x = b.input("x");
  Node* relu = b.relu(x, "relu");
  Node* gelu = b.call(OpId::kGelu, {relu}, "gelu");
  auto rep = std::make_shared<WhyNoPartitionReporter>();
  auto check = wrap_check(supported_ops({OpId::kRelu}), rep, "Not an op XYZ supports");
  EXPECT_TRUE(check->is_node_supported(b.ep, *relu).supported);
  SupportResult r = check->is_node_supported(b.ep, *gelu);
  EXPECT_FALSE(r.supported);
  EXPECT_EQ(r.reason, "op 'gelu' is not in the supported op set");  // the answer is unchanged
  EXPECT_EQ(rep->reason_for("gelu"), "Not an op XYZ supports");
  EXPECT_FALSE(rep->reason_for("relu").has_value());
  auto again = wrap_check(
      support_fn([](const ExportedProgram&, const Node&) { return SupportResult::no("later"); }),
      rep, "");
  EXPECT_FALSE(again->is_node_supported(b.ep, *gelu).supported);
  EXPECT_EQ(rep->reason_for("gelu"), "Not an op XYZ supports");  // first report wins
  EXPECT_FALSE(again->is_node_supported(b.ep, *relu).supported);
  EXPECT_EQ(rep->reason_for("relu"), "");  // an empty message is reported as given
}

}  // namespace
}  // namespace kiln
