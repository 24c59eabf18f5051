// skip_annotation (HTP programs issue: mixed precision): quantized groups on the HTP, the
// skipped nodes in floating point on the CPU or on the HTP in fp16.
#include <gtest/gtest.h>

#include <cmath>

#include "backend_test_util.h"
#include "kiln/backends/htp/programs.h"

namespace kiln::htp {
namespace {

using namespace test_util;

quant::QuantizeOptions quant_8a8w() {
  quant::QuantizeOptions options;
  options.config = *quant::make_config("8a8w", false, quant::ObserverKind::kMinMax, false);
  return options;
}

CalibrationFn calibrate_on(std::vector<quant::Sample> samples) {
  return [samples = std::move(samples)](quant::PreparedModel& prepared) {
    return quant::calibrate(prepared, samples, 1);
  };
}

Result<SkipAnnotationResult> skip(const ExportedProgram& p, std::set<std::string> ids, std::set<std::string> ops,
                                  bool fallback_to_cpu, const std::vector<CompileSpec>& sp = specs(false)) {
  return skip_annotation(p, quant_8a8w(), sp, calibrate_on(two_input_samples(4)), ids, ops, fallback_to_cpu);
}

// Call nodes of the top-level graph that are neither delegate calls nor their getitems.
std::vector<std::string> on_the_cpu(const ExportedProgram& p) {
  std::vector<std::string> out;
  for (const Node* n : p.graph().nodes()) {
    if (n->op() != OpKind::kCallFunction || n->is_call(OpId::kCallDelegate) || n->is_call(OpId::kGetitem)) continue;
    out.push_back(n->name());
  }
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Relative L2 error of `got` against `want`.
double rel_error(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double d = got.data_as<float>()[i] - want.data_as<float>()[i];
    num += d * d;
    den += double(want.data_as<float>()[i]) * want.data_as<float>()[i];
  }
  return std::sqrt(num / den);
}

// The lowered program's output on a sample is within 5% (relative L2) of the float model's.
void expect_close_to_float(ExportedProgram& float_program, ExportedProgram& lowered) {
  auto samples = two_input_samples(1);
  std::vector<Tensor> in = {samples[0].inputs["input_1"], samples[0].inputs["input_2"]};
  std::vector<Tensor> want = interpret(float_program, in);
  std::vector<Tensor> got = run_program(lowered, in);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LT(rel_error(got[0], want[0]), 0.05);
}

TEST(HtpSkipAnnotation, ByNameKeepsTheNodeAndItsParametersInFloatOnTheCpu) {
  ExportedProgram p = two_convs();
  auto r = skip(p, {"conv2d_1"}, {}, true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // One annotated group: conv2d_2 and add_1, lowered as one quantized delegate.
  ASSERT_EQ(r->groups.size(), 1u);
  EXPECT_EQ(r->groups[0].name, "annotated_group_0");
  EXPECT_EQ(r->groups[0].nodes, (std::vector<std::string>{"conv2d_2", "add_1"}));
  ASSERT_EQ(r->groups[0].lowered_modules.size(), 1u);
  ASSERT_EQ(r->program.lowered_modules().size(), 1u);
  EXPECT_EQ(delegate_precision(r->program.lowered_modules()[0]), HtpPrecision::kQuantized);
  EXPECT_TRUE(r->warnings.empty());
  // conv2d_1 runs on the CPU in float, on its float weight and bias.
  EXPECT_TRUE(contains(on_the_cpu(r->program), "conv2d_1"));
  const Node* conv = r->program.graph().find("conv2d_1");
  ASSERT_NE(conv, nullptr);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(conv->input(i)->spec().dtype, DType::kF32) << "input " << i << " of conv2d_1";
    if (i > 0) EXPECT_FALSE(conv->input(i)->is_call(OpId::kDequantizePerTensor)) << "input " << i;
  }
  expect_close_to_float(p, r->program);
}

TEST(HtpSkipAnnotation, ByOpSkipsEveryNodeOfTheOp) {
  ExportedProgram p = two_convs();
  auto r = skip(p, {}, {"convolution"}, true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->groups.size(), 1u);
  EXPECT_EQ(r->groups[0].nodes, (std::vector<std::string>{"add_1"}));
  std::vector<std::string> cpu = on_the_cpu(r->program);
  EXPECT_TRUE(contains(cpu, "conv2d_1"));
  EXPECT_TRUE(contains(cpu, "conv2d_2"));
  ASSERT_EQ(r->program.lowered_modules().size(), 1u);
  // The delegate is the add (with its q/dq), and nothing else.
  for (const Node* n : r->program.lowered_modules()[0].original_module->graph().nodes()) {
    if (n->op() != OpKind::kCallFunction) continue;
    EXPECT_TRUE(n->is_call(OpId::kAdd) || n->is_call(OpId::kQuantizePerTensor) ||
                n->is_call(OpId::kDequantizePerTensor))
        << n->name();
  }
}

TEST(HtpSkipAnnotation, WithoutCpuFallbackTheSkippedNodesRunInFp16OnTheHtp) {
  ExportedProgram p = two_convs();
  auto r = skip(p, {}, {"convolution"}, false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // The quantized add, then one fp16 group per conv (no edge joins them: the partitioner never
  // merges unconnected nodes).
  ASSERT_EQ(r->groups.size(), 3u);
  EXPECT_EQ(r->groups[0].precision, HtpPrecision::kQuantized);
  std::vector<std::string> fp16_nodes;
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(r->groups[i].name, "skipped_group_" + std::to_string(i - 1));
    EXPECT_EQ(r->groups[i].precision, HtpPrecision::kFp16);
    EXPECT_EQ(r->groups[i].lowered_modules.size(), 1u);
    fp16_nodes.insert(fp16_nodes.end(), r->groups[i].nodes.begin(), r->groups[i].nodes.end());
  }
  EXPECT_TRUE(contains(fp16_nodes, "conv2d_1"));
  EXPECT_TRUE(contains(fp16_nodes, "conv2d_2"));
  size_t quantized = 0, fp16 = 0;
  for (const LoweredModule& lm : r->program.lowered_modules()) {
    auto precision = delegate_precision(lm);
    ASSERT_TRUE(precision.has_value()) << lm.name;
    (*precision == HtpPrecision::kFp16 ? fp16 : quantized) += 1;
  }
  EXPECT_EQ(quantized, 1u);
  EXPECT_EQ(fp16, 2u);
  // No float op is left on the CPU (only the q/dq at the boundary between precisions).
  for (const std::string& name : on_the_cpu(r->program)) {
    const Node* n = r->program.graph().find(name);
    EXPECT_TRUE(n->is_call(OpId::kQuantizePerTensor) || n->is_call(OpId::kDequantizePerTensor)) << name;
  }
  expect_close_to_float(p, r->program);
}

TEST(HtpSkipAnnotation, Fp16OnAV68SocIsAWarningAndTheCpuKeepsTheSkippedNodes) {
  ExportedProgram p = two_convs();
  auto r = skip(p, {"conv2d_1"}, {}, false, specs(false, false, QcomChipset::SM8350));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("fall back to the CPU"), std::string::npos) << r->warnings[0];
  EXPECT_EQ(r->program.lowered_modules().size(), 1u);
  EXPECT_TRUE(contains(on_the_cpu(r->program), "conv2d_1"));
}

TEST(HtpSkipAnnotation, WithNothingSkippedItIsThePlainQuantizedLowering) {
  ExportedProgram p = two_convs();
  auto r = skip(p, {}, {}, false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->groups.size(), 1u);
  EXPECT_EQ(r->groups[0].nodes.size(), 3u);
  EXPECT_EQ(r->program.lowered_modules().size(), 1u);
  EXPECT_TRUE(on_the_cpu(r->program).empty());
}

TEST(HtpSkipAnnotation, ErrorsAreNamed) {
  ExportedProgram p = two_convs();
  auto message = [](const Result<SkipAnnotationResult>& r) { return r.ok() ? std::string("ok") : r.status().message(); };
  EXPECT_NE(message(skip(p, {"conv9"}, {}, true)).find("fp_node_id_set names 'conv9'"), std::string::npos);
  EXPECT_NE(message(skip(p, {"weight_1"}, {}, true)).find("not an operator node"), std::string::npos);
  EXPECT_NE(message(skip(p, {}, {"conv"}, true)).find("fp_node_op_set names 'conv'"), std::string::npos);
  EXPECT_NE(message(skip(p, {}, {}, true, specs(true))).find("quantized-precision specs"), std::string::npos);
  EXPECT_NE(message(skip(p, {}, {}, true, {})).find("skip_annotation"), std::string::npos);

  auto nothing = skip_annotation(p, quant_8a8w(), specs(false), [](quant::PreparedModel&) { return Status::Ok(); },
                                 {"conv2d_1"}, {}, true);
  EXPECT_NE(message(nothing).find("observed no samples"), std::string::npos) << message(nothing);
  auto failing = skip_annotation(
      p, quant_8a8w(), specs(false), [](quant::PreparedModel&) { return invalid_argument("no data"); }, {}, {}, true);
  EXPECT_NE(message(failing).find("skip_annotation: calibration: no data"), std::string::npos) << message(failing);
  EXPECT_NE(message(skip_annotation(p, quant_8a8w(), specs(false), nullptr, {}, {}, true)).find("no calibration callback"),
            std::string::npos);

  // A program already quantized is refused by the quantizer, under skip_annotation's name.
  ExportedProgram q = quantized(p, two_input_samples(2));
  auto again = skip(q, {}, {}, true);
  EXPECT_NE(message(again).find("already quantized"), std::string::npos) << message(again);
}

}  // namespace
}  // namespace kiln::htp
