// The .kir printer and parser: golden files, round trips and programs built through the API.
#include "kiln/ir/kir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/ir/compare.h"
#include "testing/graph_builder.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::f32;
using testing::GraphBuilder;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> golden_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(KILN_TEST_DATA_DIR) / "kir")) {
    if (e.path().extension() == ".kir") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// parse(print(p)) must print the same text and hold an identical graph.
void expect_round_trip(const ExportedProgram& p) {
  std::string text = print_kir(p);
  auto again = parse_kir(text, "reprint");
  ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << text;
  EXPECT_EQ(print_kir(*again), text);
  EXPECT_TRUE(is_identical_graph(p.graph(), again->graph()));
}

TEST(KirGolden, FilesPrintExactlyAndRoundTrip) {
  auto files = golden_files();
  EXPECT_GE(files.size(), 8u);
  bool update = std::getenv("KILN_UPDATE_GOLDEN") != nullptr &&
                std::string(std::getenv("KILN_UPDATE_GOLDEN")) == "1";
  for (const auto& path : files) {
    SCOPED_TRACE(path.filename().string());
    std::string text = read_file(path);
    auto p = load_kir_file(path.string());
    ASSERT_TRUE(p.ok()) << p.status().message();
    std::string printed = print_kir(*p);
    if (update) {
      std::ofstream(path, std::ios::binary) << printed;
    } else {
      EXPECT_EQ(printed, text) << "rerun with KILN_UPDATE_GOLDEN=1 to accept the new text";
    }
    expect_round_trip(*p);
  }
}

TEST(KirGolden, DelegatedProgramKeepsItsLoweredModule) {
  auto p = load_kir_file((fs::path(KILN_TEST_DATA_DIR) / "kir" / "delegated.kir").string());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->lowered_modules().size(), 1u);
  const LoweredModule& m = p->lowered_modules()[0];
  EXPECT_EQ(m.name, "lowered_module_0");
  EXPECT_EQ(m.backend_id, "demo");
  ASSERT_EQ(m.compile_specs.size(), 2u);
  EXPECT_EQ(m.compile_specs[0].key, "threads");
  EXPECT_EQ(m.compile_specs[0].value, (std::vector<uint8_t>{2, 0, 0, 0}));
  EXPECT_EQ(m.compile_specs[1].key, "opt level");
  EXPECT_EQ(m.processed_bytes->size(), 96u);
  EXPECT_EQ(m.debug_handle_map.at(1), (std::vector<int64_t>{1, 2}));
  ASSERT_NE(m.original_module, nullptr);
  EXPECT_EQ(m.original_module->graph().find("neg")->meta.no_copy, true);
  Node* call = p->graph().find("call_delegate");
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->meta.val.size(), 2u);
  EXPECT_EQ(call->meta.delegation_tag, "demo_0");
  EXPECT_FALSE(p->graph().find("lowered_module_0")->has_spec());
  // Without lowered modules the graph alone still prints.
  KirPrintOptions opts;
  opts.print_lowered_modules = false;
  EXPECT_EQ(print_kir(*p, opts).find("lowered("), std::string::npos);
}

TEST(KirGolden, CondKeepsItsBranchesAsSubgraphs) {
  auto p = load_kir_file((fs::path(KILN_TEST_DATA_DIR) / "kir" / "cond.kir").string());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->subgraphs().size(), 2u);
  EXPECT_EQ(p->subgraphs()[0].name, "true_graph");
  EXPECT_EQ(p->subgraphs()[0].program->constants().size(), 1u);
  EXPECT_NE(p->find_subgraph("false_graph"), nullptr);
  EXPECT_FALSE(p->graph().find("true_graph")->has_spec());
  // A copy owns its subgraphs: changing one leaves the original alone.
  ExportedProgram copy = p->clone();
  ASSERT_EQ(copy.subgraphs().size(), 2u);
  EXPECT_NE(copy.subgraphs()[0].program, p->subgraphs()[0].program);
  EXPECT_EQ(print_kir(copy), print_kir(*p));
  // A branch that cannot run on the program's shapes prints as its error, and reads back.
  copy.subgraphs()[1] = {"false_graph", nullptr, "Squeeze: dim 0 is \"2\", not 1"};
  std::string partial = print_kir(copy);
  EXPECT_NE(partial.find("false_graph = subgraph(error=\"Squeeze: dim 0 is \\\"2\\\", not 1\")\n"),
            std::string::npos)
      << partial;
  auto reread = parse_kir(partial, "partial");
  ASSERT_TRUE(reread.ok()) << reread.status().message();
  ASSERT_NE(reread->find_subgraph("false_graph"), nullptr);
  EXPECT_EQ(reread->find_subgraph("false_graph")->error, "Squeeze: dim 0 is \"2\", not 1");
  EXPECT_EQ(print_kir(*reread), partial);
  // A branch whose result differs from the cond's is refused, naming both.
  std::string text = print_kir(*p);
  std::string bad = text;
  bad.replace(bad.find("%neg : [num_users=1] f32[2, 3]"), 30, "%neg : [num_users=1] f32[3, 2]");
  auto r = parse_kir(bad, "bad");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("neg"), std::string::npos) << r.status().message();
  std::string missing = text;
  missing.replace(missing.find("false_graph = subgraph():"), 25, "other_graph = subgraph():");
  auto m = parse_kir(missing, "missing");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'false_graph', which is neither a constant, a lowered "
                                      "module nor a subgraph"),
            std::string::npos)
      << m.status().message();
}

TEST(KirPrinter, PrintsTheBriefsLayout) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec(DType::kF32, {Dim::symbol("batch"), 3}));
  Node* w = b.param("weight", {3});
  Node* add = b.add(x, w);
  Node* mean = b.call(OpId::kMean, {add}, {{"dim", std::vector<int64_t>{1}}, {"keepdim", true}});
  add->meta.debug_handle = 3;
  add->meta.source = "/add\t\"x\"";
  b.outputs({add, mean});
  std::string text = print_kir(p);
  EXPECT_EQ(text,
            "program:\n"
            "  inputs:\n"
            "    %x : user_input\n"
            "    %p_weight : parameter(target=weight)\n"
            "  outputs:\n"
            "    %add : user_output\n"
            "    %mean : user_output\n"
            "  constants:\n"
            "    weight : f32[3] = [0.5, 0.75, 1]\n"
            "graph():\n"
            "    %x : [num_users=1] f32[batch, 3] = placeholder[target=x]\n"
            "    %p_weight : [num_users=1] f32[3] = placeholder[target=p_weight]\n"
            "    %add : [num_users=2, debug_handle=3, source=\"/add\\t\\\"x\\\"\"] f32[batch, 3] = "
            "call_function[target=add](args = (%x, %p_weight), kwargs = {})\n"
            "    %mean : [num_users=1] f32[batch, 1] = call_function[target=mean](args = (%add,), "
            "kwargs = {dim: [1], keepdim: True})\n"
            "    return (add, mean)\n");
  EXPECT_EQ(print_graph(p.graph()), text.substr(text.find("graph():")));
  expect_round_trip(p);
  auto again = parse_kir(text);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->graph().find("add")->meta.source, "/add\t\"x\"");
}

TEST(KirPrinter, FloatsKeepTheirKindAndValue) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2}));
  Node* a = b.call(OpId::kAdd, {x, 2.0}, {{"alpha", 0.1}});
  Node* c = b.call(OpId::kAdd, {a, int64_t{2}});
  Node* d = b.call(OpId::kMul, {c, 1e-30});
  Node* e = b.call(OpId::kClamp, {d}, {{"min", -std::numeric_limits<double>::infinity()},
                                       {"max", 6.0}});
  b.outputs({e});
  std::string text = print_kir(p);
  EXPECT_NE(text.find("args = (%x, 2.0), kwargs = {alpha: 0.1}"), std::string::npos) << text;
  EXPECT_NE(text.find("args = (%add, 2), kwargs = {}"), std::string::npos) << text;
  EXPECT_NE(text.find("(%add_1, 1e-30)"), std::string::npos) << text;
  EXPECT_NE(text.find("{min: -inf, max: 6.0}"), std::string::npos) << text;
  auto again = parse_kir(text);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->graph().find("add")->arg(1).kind(), Arg::Kind::kFloat);
  EXPECT_EQ(again->graph().find("add_1")->arg(1).kind(), Arg::Kind::kInt);
  EXPECT_EQ(again->graph().find("mul")->arg(1).to_float(), 1e-30);
  expect_round_trip(p);
}

TEST(KirPrinter, ConstantsOfEveryDTypeRoundTrip) {
  ExportedProgram p;
  std::vector<Node*> outs;
  for (int d = 0; d < kNumDTypes; ++d) {
    auto dtype = static_cast<DType>(d);
    Tensor t(dtype, {2, 2});
    double values[] = {1, 0, 3, 1};
    if (is_floating(dtype)) values[1] = -0.5;
    if (dtype == DType::kI8) values[1] = -128;
    for (int64_t i = 0; i < 4; ++i) t.set_scalar_at(i, values[i]);
    std::string name(dtype_name(dtype));
    outs.push_back(p.add_constant("c_" + name, "k." + name, t));
  }
  Tensor big(DType::kI64, {5, 5});
  outs.push_back(p.add_parameter("p_big", "big", big));
  Tensor exact(DType::kI64, {1});
  exact.mutable_data_as<int64_t>()[0] = (int64_t{1} << 62) + 1;
  outs.push_back(p.add_buffer("b_exact", "exact", exact, false));
  std::vector<OutputSpec> specs(outs.size());
  ASSERT_TRUE(p.set_outputs(outs, specs).ok());
  std::string text = print_kir(p, kir_summary());
  EXPECT_NE(text.find("\"k.bool\" : bool[2, 2] = [True, False, True, True]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"k.bf16\" : bf16[2, 2] = [1, -0.5, 3, 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"k.i8\" : i8[2, 2] = [1, -128, 3, 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("big : i64[5, 5] = <200 bytes>"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer(target=exact, persistent=False)"), std::string::npos) << text;
  auto again = parse_kir(text);
  ASSERT_TRUE(again.ok()) << again.status().message();
  for (const auto& [name, t] : p.constants().entries()) {
    const Tensor* u = again->constants().find(name);
    ASSERT_NE(u, nullptr) << name;
    ASSERT_EQ(u->nbytes(), t.nbytes());
    EXPECT_EQ(std::memcmp(u->data(), t.data(), t.nbytes()), 0) << name;
  }
  EXPECT_EQ(again->signature().inputs.back().persistent, false);
  expect_round_trip(p);
  // A smaller inline limit prints by size; the text still parses to zeros of that size.
  KirPrintOptions opts;
  opts.inline_limit = 0;
  std::string sized_text = print_kir(p, opts);
  auto sized = parse_kir(sized_text);
  ASSERT_TRUE(sized.ok()) << sized.status().message();
  EXPECT_EQ(sized->constants().find("exact")->data_as<int64_t>()[0], 0);
  // What was given by size stays by size, even when printed in full: the text round-trips.
  EXPECT_TRUE(sized->constants().find("exact")->elided());
  EXPECT_EQ(print_kir(*sized), sized_text);
}

TEST(KirPrinter, FullPrintKeepsEveryValue) {
  // The default prints every value (kiln fmt, kiln import): a 25-element constant is not lost
  // to "<N bytes>" when a file is rewritten.
  ExportedProgram p;
  Tensor big(DType::kI64, {5, 5});
  for (int64_t i = 0; i < 25; ++i) big.set_scalar_at(i, static_cast<double>(i * i));
  Node* c = p.add_parameter("p_big", "big", big);
  ASSERT_TRUE(p.set_outputs({c}, {OutputSpec{}}).ok());
  std::string text = print_kir(p);
  EXPECT_NE(text.find("big : i64[5, 5] = [0, 1, 4, 9,"), std::string::npos) << text;
  auto again = parse_kir(text);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(again->constants().find("big")->elided());
  EXPECT_EQ(again->constants().find("big")->data_as<int64_t>()[24], 576);
  EXPECT_EQ(print_kir(*again), text);
  EXPECT_NE(print_kir(p, kir_summary()).find("big : i64[5, 5] = <200 bytes>"), std::string::npos);
}

TEST(KirParser, LargeSizedConstantsAreZerosWithoutAllocating) {
  std::string text =
      "program:\n  inputs:\n    %p : parameter(target=w)\n  outputs:\n    %p : user_output\n"
      "  constants:\n    w : f32[1024, 1024, 1024] = <4294967296 bytes>\n"
      "graph():\n    %p : [num_users=1] f32[1024, 1024, 1024] = placeholder[target=p]\n"
      "    return (p,)\n";
  auto p = parse_kir(text);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const Tensor* w = p->constants().find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->nbytes(), size_t{1} << 32);
  EXPECT_EQ(w->data_as<float>()[123456789], 0.0f);
  EXPECT_EQ(print_kir(*p), text);
}

TEST(KirParser, BareGraphGetsAUserSignature) {
  auto p = parse_kir(
      "graph():\n"
      "    %x : f32[2] = placeholder[target=x]  # comments are allowed\n"
      "    %relu : f32[2] = call_function[target=relu](args = (%x,), kwargs = {})\n"
      "    return (relu,)\n");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->signature().inputs.size(), 1u);
  EXPECT_EQ(p->signature().inputs[0].kind, InputKind::kUserInput);
  ASSERT_EQ(p->signature().outputs.size(), 1u);
  EXPECT_EQ(p->user_outputs()[0]->name(), "relu");
  expect_round_trip(*p);
}

TEST(KirParser, FillsDefaultsAndKeepsMeta) {
  auto p = parse_kir(
      "graph():\n"
      "    %x : f32[1, 2, 8, 8] = placeholder[target=x]\n"
      "    %mp : [num_users=1, tag=\"t 1\", debug_handle=7, no_copy=True, "
      "quant=(u8, scales=[0.5, 1], zero_points=[1, 2], qmin=0, qmax=255, axis=1)] "
      "f32[1, 2, 4, 4] = call_function[target=max_pool2d](args = (%x,), "
      "kwargs = {kernel_size: [2, 2], stride: [2, 2]})\n"
      "    return (mp,)\n");
  ASSERT_TRUE(p.ok()) << p.status().message();
  Node* mp = p->graph().find("mp");
  EXPECT_EQ(mp->kwarg("padding").to_ints(), std::vector<int64_t>{0});
  EXPECT_EQ(mp->kwarg_bool("ceil_mode"), false);
  EXPECT_EQ(mp->meta.delegation_tag, "t 1");
  EXPECT_EQ(mp->meta.debug_handle, 7);
  EXPECT_TRUE(mp->meta.no_copy);
  ASSERT_TRUE(mp->meta.quant.has_value());
  EXPECT_EQ(mp->meta.quant->dtype, DType::kU8);
  EXPECT_EQ(mp->meta.quant->scales, (std::vector<double>{0.5, 1}));
  EXPECT_EQ(mp->meta.quant->zero_points, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(mp->meta.quant->axis, 1);
  expect_round_trip(*p);
}

TEST(KirParser, ChannelsLastLayoutRoundTrips) {
  // After the HTP LayoutTransform: a convolution reading NHWC has an NHWC spec that inference
  // over its inputs would not give; lint accepts it because the node is channels-last.
  auto p = parse_kir(
      "graph():\n"
      "    %x : f32[1, 3, 4, 4] = placeholder[target=x]\n"
      "    %w : f32[2, 3, 1, 1] = placeholder[target=w]\n"
      "    %p : [num_users=1, layout=nhwc] f32[1, 4, 4, 3] = call_function[target=permute]"
      "(args = (%x,), kwargs = {dims: [0, 2, 3, 1]})\n"
      "    %conv : [num_users=1, quant=(u8, scales=[0.5], zero_points=[1], qmin=0, qmax=255, "
      "axis=-1), layout=nhwc] f32[1, 4, 4, 2] = call_function[target=convolution](args = (%p, %w), "
      "kwargs = {})\n"
      "    %out : [num_users=1] f32[1, 2, 4, 4] = call_function[target=permute](args = (%conv,), "
      "kwargs = {dims: [0, 3, 1, 2]})\n"
      "    return (out,)\n");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->graph().find("p")->meta.channels_last);
  EXPECT_TRUE(p->graph().find("conv")->meta.channels_last);
  EXPECT_FALSE(p->graph().find("out")->meta.channels_last);
  EXPECT_NE(print_kir(*p).find("axis=-1), layout=nhwc] f32[1, 4, 4, 2]"), std::string::npos);
  expect_round_trip(*p);

  // The same convolution without the layout is a spec that does not follow from its inputs.
  auto bad = parse_kir(
      "graph():\n"
      "    %x : f32[1, 4, 4, 3] = placeholder[target=x]\n"
      "    %w : f32[2, 3, 1, 1] = placeholder[target=w]\n"
      "    %conv : [num_users=1] f32[1, 4, 4, 2] = call_function[target=convolution]"
      "(args = (%x, %w), kwargs = {})\n"
      "    return (conv,)\n");
  EXPECT_FALSE(bad.ok());

  auto nchw = parse_kir(
      "graph():\n"
      "    %x : [num_users=1, layout=nchw] f32[1] = placeholder[target=x]\n"
      "    return (x,)\n");
  ASSERT_FALSE(nchw.ok());
  EXPECT_NE(nchw.status().message().find("expected layout nhwc"), std::string::npos)
      << nchw.status().message();
}

TEST(KirParser, NestedLoweredModulesRoundTrip) {
  // Lowered modules inside a lowered module print at deeper indentation and parse back there.
  auto inner = std::make_shared<ExportedProgram>();
  {
    GraphBuilder b(*inner);
    b.outputs({b.relu(b.input("x", f32({2})))});
  }
  auto middle = std::make_shared<ExportedProgram>();
  {
    GraphBuilder b(*middle);
    Node* x = b.input("x", f32({2}));
    Node* attr = middle->graph().add_get_attr("inner_0");
    auto call = middle->graph().add_call(OpId::kCallDelegate, {attr, x});
    ASSERT_TRUE(call.ok());
    (*call)->meta.val = {f32({2})};
    Node* item = b.call(OpId::kGetitem, {*call, 0});
    b.outputs({item});
    middle->lowered_modules().push_back({"inner_0", "cpu", {}, nullptr, inner, {}, {}});
  }
  ExportedProgram outer;
  GraphBuilder b(outer);
  Node* x = b.input("x", f32({2}));
  Node* attr = outer.graph().add_get_attr("lowered_module_0");
  auto call = outer.graph().add_call(OpId::kCallDelegate, {attr, x});
  ASSERT_TRUE(call.ok());
  (*call)->meta.val = {f32({2})};
  b.outputs({b.call(OpId::kGetitem, {*call, 0})});
  outer.lowered_modules().push_back({"lowered_module_0", "demo", {}, nullptr, middle, {}, {}});
  outer.lowered_modules().push_back({"lowered_module_1", "demo", {}, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(outer.lint().ok()) << outer.lint().message();
  std::string text = print_kir(outer);
  EXPECT_NE(text.find("\n  inner_0 = lowered(backend=cpu, compile_specs={}, bytes=0):\n    program:\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("\nlowered_module_1 = lowered(backend=demo, compile_specs={}, bytes=0)\n"),
            std::string::npos) << text;
  auto again = parse_kir(text);
  ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << text;
  ASSERT_EQ(again->lowered_modules().size(), 2u);
  const auto& mid = again->lowered_modules()[0].original_module;
  ASSERT_NE(mid, nullptr);
  ASSERT_EQ(mid->lowered_modules().size(), 1u);
  EXPECT_TRUE(is_identical_graph(mid->lowered_modules()[0].original_module->graph(), inner->graph()));
  EXPECT_EQ(again->lowered_modules()[1].original_module, nullptr);
  EXPECT_EQ(print_kir(*again), text);
}

TEST(KirParser, LongChainParsesAndPrints) {
  std::string text = "graph():\n    %x : f32[4] = placeholder[target=x]\n";
  std::string prev = "x";
  for (int i = 0; i < 5000; ++i) {
    std::string name = fmt::format("n{}", i);
    text += fmt::format("    %{} : f32[4] = call_function[target=neg](args = (%{},), kwargs = {{}})\n",
                        name, prev);
    prev = name;
  }
  text += "    return (" + prev + ",)\n";
  auto p = parse_kir(text);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->graph().size(), 5002u);
  expect_round_trip(*p);
}

TEST(KirParser, LoadsFilesAndReportsMissingOnes) {
  auto missing = load_kir_file("/nonexistent/model.kir");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  EXPECT_EQ(missing.status().message(), "'/nonexistent/model.kir': no such file");
  auto dir = load_kir_file(KILN_TEST_DATA_DIR);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().message(),
            fmt::format("'{}' is a directory, expected a file", KILN_TEST_DATA_DIR));
}

}  // namespace
}  // namespace kiln
