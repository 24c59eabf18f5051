// draw_graph (HTP programs issue: drawing) and the Chrome trace of HTP profiles read back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend_test_util.h"
#include "kiln/backends/htp/draw.h"
#include "kiln/backends/htp/programs.h"

namespace kiln::htp {
namespace {

using namespace test_util;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

SkipAnnotationResult mixed(bool fallback_to_cpu) {
  quant::QuantizeOptions options;
  options.config = *quant::make_config("8a8w", false, quant::ObserverKind::kMinMax, false);
  auto samples = two_input_samples(2);
  auto r = skip_annotation(
      two_convs(), options, specs(false), [&](quant::PreparedModel& p) { return quant::calibrate(p, samples, 1); },
      {"conv2d_1"}, {}, fallback_to_cpu);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

TEST(HtpDraw, DelegatesAreClustersColoredByPrecision) {
  SkipAnnotationResult r = mixed(/*fallback_to_cpu=*/false);
  auto svg = graph_to_svg(r.program, "two convs");
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_NE(svg->find("<svg"), std::string::npos);
  EXPECT_NE(svg->find("two convs"), std::string::npos);
  // One cluster per delegate, titled by backend and precision.
  EXPECT_EQ(count(*svg, "class=\"cluster\""), 2u);
  EXPECT_NE(svg->find("lowered_module_0: htp, quantized"), std::string::npos);
  EXPECT_NE(svg->find("lowered_module_1: htp, fp16"), std::string::npos);
  // A box per call of each delegate's original module, two inputs and the output.
  size_t calls = 0;
  for (const LoweredModule& lm : r.program.lowered_modules()) {
    for (const Node* n : lm.original_module->graph().nodes()) calls += n->op() == OpKind::kCallFunction;
  }
  EXPECT_EQ(count(*svg, "class=\"node\""), calls + 3);
  // Each box says its node, op and spec; colors are the placements'.
  EXPECT_NE(svg->find(">conv2d_1</text>"), std::string::npos);
  EXPECT_NE(svg->find(">convolution</text>"), std::string::npos);
  EXPECT_NE(svg->find(">f32[1, 4, 8, 8]</text>"), std::string::npos);
  EXPECT_NE(svg->find(std::string(placement_color(Placement::kHtpQuantized))), std::string::npos);
  EXPECT_NE(svg->find(std::string(placement_color(Placement::kHtpFp16))), std::string::npos);
  EXPECT_EQ(svg->find(std::string(placement_color(Placement::kPortable))), std::string::npos);
  // Edges cross the cluster boundaries: input_1 -> (fp16) conv2d_1 -> (quantized) add_1 -> output.
  EXPECT_GE(count(*svg, "class=\"edge\""), 6u);
}

TEST(HtpDraw, NodesOnTheCpuArePortable) {
  SkipAnnotationResult r = mixed(/*fallback_to_cpu=*/true);
  auto svg = graph_to_svg(r.program, "cpu");
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_EQ(count(*svg, "class=\"cluster\""), 1u);
  EXPECT_NE(svg->find(std::string(placement_color(Placement::kPortable))), std::string::npos);
  // A float program has no cluster: every node portable.
  auto plain = graph_to_svg(two_convs(), "float");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(count(*plain, "class=\"cluster\""), 0u);
  EXPECT_EQ(count(*plain, "class=\"node\""), 3u + 3u);
}

TEST(HtpDraw, DrawGraphWritesTitleSvgAndNamesErrors) {
  auto dir = std::filesystem::temp_directory_path() / "kiln_draw_test";
  std::filesystem::create_directories(dir);
  ExportedProgram p = two_convs();
  ASSERT_TRUE(draw_graph("net", dir, p).ok());
  std::ifstream in(dir / "net.svg");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("<svg"), std::string::npos);

  EXPECT_NE(draw_graph("a/b", dir, p).message().find("plain file name"), std::string::npos);
  EXPECT_NE(draw_graph("", dir, p).message().find("plain file name"), std::string::npos);
  EXPECT_NE(draw_graph("net", dir / "missing", p).message().find("is not a directory"), std::string::npos);
  DrawOptions small;
  small.max_nodes = 4;
  Status big = draw_graph("net", dir, p, small);
  EXPECT_NE(big.message().find("more than 4 nodes to draw"), std::string::npos) << big.message();
  std::filesystem::remove_all(dir);
}

TEST(HtpProfile, ChromeTraceReadsBack) {
  std::vector<GraphProfile> profiles(2);
  profiles[0].graph = "forward";
  profiles[0].total_ns = 1234567;
  profiles[0].ops = {{"conv", "Conv2d", 3, 1000, 500000}, {"relu", "Relu", 4, 501000, 2500}};
  profiles[1].graph = "forward";
  profiles[1].total_ns = 999000;
  auto back = profile_from_chrome_trace(profile_to_chrome_trace(profiles));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].graph, "forward");
  EXPECT_EQ((*back)[0].total_ns, 1234567);
  EXPECT_EQ((*back)[0].level, ProfileLevel::kDetailed);
  ASSERT_EQ((*back)[0].ops.size(), 2u);
  EXPECT_EQ((*back)[0].ops[1].name, "relu");
  EXPECT_EQ((*back)[0].ops[1].type, "Relu");
  EXPECT_EQ((*back)[0].ops[1].debug_handle, 4);
  EXPECT_EQ((*back)[0].ops[1].start_ns, 501000);
  EXPECT_EQ((*back)[0].ops[1].duration_ns, 2500);
  EXPECT_EQ((*back)[1].level, ProfileLevel::kBasic);
  EXPECT_TRUE((*back)[1].ops.empty());
}

TEST(HtpProfile, MalformedTracesAreNamed) {
  auto error = [](std::string_view json) {
    auto r = profile_from_chrome_trace(json);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(error("{").find("not JSON"), std::string::npos);
  EXPECT_NE(error("[]").find("no traceEvents"), std::string::npos);
  EXPECT_NE(error(R"({"traceEvents": 3})").find("no traceEvents"), std::string::npos);
  EXPECT_NE(error(R"({"traceEvents": [1]})").find("event 0: is not an object"), std::string::npos);
  EXPECT_NE(error(R"({"traceEvents": [{"cat": "graph", "ts": 0, "dur": 1}]})").find("event 0: no string 'name'"),
            std::string::npos);
  EXPECT_NE(error(R"({"traceEvents": [{"name": "x", "cat": "Conv", "ts": 0, "dur": 1}]})").find("before any graph"),
            std::string::npos);
  EXPECT_NE(error(R"({"traceEvents": [{"name": "g", "cat": "graph", "ts": 0, "dur": -1}]})").find("out of range"),
            std::string::npos);
  EXPECT_NE(error(R"({"traceEvents": [{"name": "g", "cat": "graph", "ts": "0", "dur": 1}]})").find("ts: is not a number"),
            std::string::npos);
  EXPECT_EQ(error(R"({"traceEvents": []})"), "ok");
}

}  // namespace
}  // namespace kiln::htp
