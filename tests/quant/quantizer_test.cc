// annotate / prepare / calibrate / convert: the op rules, exclusions, the converted graph
// (golden .kir) and its numbers, and errors on bad calibration data.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/ir/kir.h"
#include "kiln/quant/quantizer.h"
#include "kiln/quant/report.h"
#include "lower/golden.h"
#include "testing/graph_builder.h"

namespace kiln::quant {
namespace {

using kiln::testing::f32;
using kiln::testing::GraphBuilder;
using kiln::testing::ramp;

// x -> linear(w1, b1) -> relu -> reshape -> sigmoid; cat(reshape, sigmoid) -> mul(cat, cat).
struct RulesModel {
  ExportedProgram p;
  Node *x, *lin, *relu, *view, *sig, *cat, *mul;
  RulesModel() {
    GraphBuilder b(p);
    x = b.input("x", f32({2, 4}));
    Node* w1 = p.add_parameter("w1", "w1", ramp({3, 4}, -1.0, 0.17));
    Node* b1 = p.add_parameter("b1", "b1", ramp({3}, 0.1, 0.05));
    lin = b.call(OpId::kLinear, {x, w1, b1}, {}, "lin");
    relu = b.call(OpId::kRelu, {lin}, {}, "relu");
    view = b.call(OpId::kReshape, {relu}, {{"shape", std::vector<int64_t>{3, 2}}}, "view");
    sig = b.call(OpId::kSigmoid, {view}, {}, "sig");
    cat = b.call(OpId::kCat, {std::vector<Node*>{view, sig}}, {{"dim", 0}}, "cat");
    mul = b.call(OpId::kMul, {cat, cat}, {}, "mul");
    b.outputs({mul});
  }
};

QuantizeOptions options(const std::string& config = "8a8w",
                        ObserverKind observer = ObserverKind::kMovingAverageMinMax) {
  QuantizeOptions o;
  o.config = *make_config(config, false, observer);
  return o;
}

// Ramps over about the same range (a moving average tracks the first sample: later ones that
// reach far past it would be clipped).
std::vector<Sample> samples(int n, std::vector<int64_t> shape = {2, 4}) {
  std::vector<Sample> out;
  for (int i = 0; i < n; ++i) out.push_back({fmt::format("s{}", i), {{"x", ramp(shape, -1.0 + 0.01 * i, 0.3)}}});
  return out;
}

TEST(Annotate, RulesPerOpClass) {
  RulesModel m;
  auto ann = annotate(m.p, options());
  ASSERT_TRUE(ann.ok()) << ann.status().message();
  for (Node* n : {m.lin, m.relu, m.view, m.sig, m.cat, m.mul}) ASSERT_NE(ann->of(n), nullptr) << n->name();
  EXPECT_EQ(ann->of(m.x), nullptr);
  const NodeAnnotation* lin = ann->of(m.lin);
  ASSERT_NE(lin, nullptr);
  ASSERT_EQ(lin->inputs.size(), 3u);
  EXPECT_EQ(lin->inputs[0].role, InputRole::kActivation);
  EXPECT_EQ(lin->inputs[1].role, InputRole::kWeight);
  EXPECT_EQ(lin->inputs[1].ch_axis, 0);
  EXPECT_EQ(lin->inputs[2].role, InputRole::kBias);
  EXPECT_EQ(lin->output, OutputRule::kNone) << "relu is fused: its output carries the parameters";
  const NodeAnnotation* relu = ann->of(m.relu);
  EXPECT_EQ(relu->output, OutputRule::kOwn);
  EXPECT_EQ(relu->layer, m.lin);
  EXPECT_TRUE(relu->inputs.empty());
  EXPECT_EQ(ann->of(m.view)->output, OutputRule::kSharesInput);
  EXPECT_EQ(ann->of(m.sig)->output, OutputRule::kFixed);
  EXPECT_EQ(ann->of(m.sig)->fixed_min, 0.0);
  const NodeAnnotation* cat = ann->of(m.cat);
  ASSERT_EQ(cat->inputs.size(), 2u);
  EXPECT_FALSE(cat->inputs[0].shares_first_input);
  EXPECT_TRUE(cat->inputs[1].shares_first_input);
  EXPECT_EQ(cat->output, OutputRule::kSharesInput);
  EXPECT_EQ(ann->of(m.mul)->output, OutputRule::kOwn);
}

TEST(Prepare, SharedTensorsShareOneObserver) {
  RulesModel m;
  auto prep = prepare(m.p, options());
  ASSERT_TRUE(prep.ok());
  const ExportedProgram& fp = (*prep)->float_program();
  auto g = [&](const char* name) { return (*prep)->group_of(fp.graph().find(name)); };
  EXPECT_GE(g("x"), 0);
  EXPECT_EQ(g("lin"), -1) << "a fused conv/linear output is not quantized";
  EXPECT_EQ(g("relu"), g("view"));
  EXPECT_EQ(g("view"), g("cat"));
  EXPECT_NE(g("sig"), g("view")) << "a fixed range never absorbs a free one";
  EXPECT_NE(g("mul"), g("cat"));
  EXPECT_EQ((*prep)->groups().size(), 4u);
  std::vector<std::string> layers;
  for (const Node* n : (*prep)->layers()) layers.push_back(n->name());
  EXPECT_EQ(layers, (std::vector<std::string>{"lin", "view", "sig", "cat", "mul"}));
}

TEST(Convert, GoldenGraphAndNumbers) {
  RulesModel m;
  auto prep = prepare(m.p, options());
  ASSERT_TRUE(prep.ok());
  auto s = samples(3);
  ASSERT_TRUE(calibrate(**prep, s).ok());
  auto q = convert(**prep);
  ASSERT_TRUE(q.ok()) << q.status().message();
  kiln::testing::expect_golden(print_kir(*q), "quant/rules_8a8w.kir");
  // The printed program parses back and runs.
  auto parsed = parse_kir(print_kir(*q));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  auto report = measure_accuracy(**prep, *q, s);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_GT(report->output_sqnr_db(), 25.0);
  EXPECT_EQ(report->layers.size(), 3u);  // relu (for lin), sig, mul
  for (size_t i = 1; i < report->layers.size(); ++i) {
    EXPECT_LE(report->layers[i - 1].sqnr_db, report->layers[i].sqnr_db) << "worst first";
  }
}

TEST(Convert, Golden16a4wPerTensor) {
  // uint16 activations, 4-bit weights in int8 storage with one scale per tensor.
  RulesModel m;
  QuantizeOptions o;
  o.config = *make_config("16a4w", /*per_tensor=*/true, ObserverKind::kMinMax);
  auto prep = prepare(m.p, o);
  ASSERT_TRUE(prep.ok());
  ASSERT_TRUE(calibrate(**prep, samples(2)).ok());
  auto q = convert(**prep);
  ASSERT_TRUE(q.ok()) << q.status().message();
  kiln::testing::expect_golden(print_kir(*q), "quant/rules_16a4w.kir");
  const Tensor* w = q->constants().find("w1_q");
  ASSERT_NE(w, nullptr);
  for (int64_t i = 0; i < w->numel(); ++i) {
    EXPECT_LE(std::abs(w->scalar_at(i)), 7.0);
  }
}

TEST(Convert, WeightAndBiasIntegers) {
  // linear(x, w, b): weight rows max |w| 2 and 0.5 -> per-channel int8; bias i32 with
  // scale = input scale x weight scale.
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({1, 2}));
  Tensor w(DType::kF32, {2, 2});
  float wv[] = {1.0f, -2.0f, 0.5f, 0.25f};
  for (int i = 0; i < 4; ++i) w.set_scalar_at(i, wv[i]);
  Tensor bias(DType::kF32, {2});
  bias.set_scalar_at(0, 0.3);
  bias.set_scalar_at(1, -0.2);
  Node* lin = b.call(OpId::kLinear, {x, p.add_parameter("w", "w", w), p.add_parameter("b", "b", bias)}, {}, "lin");
  b.outputs({lin});
  auto prep = prepare(p, options());
  ASSERT_TRUE(prep.ok());
  Tensor in(DType::kF32, {1, 2});
  in.set_scalar_at(0, -1.0);
  in.set_scalar_at(1, 3.0);
  std::vector<Sample> s = {{"one", {{"x", in}}}};
  ASSERT_TRUE(calibrate(**prep, s).ok());
  auto q = convert(**prep);
  ASSERT_TRUE(q.ok()) << q.status().message();
  const Tensor* wq = q->constants().find("w_q");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->dtype(), DType::kI8);
  EXPECT_EQ(wq->scalar_at(0), 64);  // 63.5 rounds half to even
  EXPECT_EQ(wq->scalar_at(1), -127);
  EXPECT_EQ(wq->scalar_at(2), 127);
  EXPECT_EQ(wq->scalar_at(3), 64);
  const Tensor* bq = q->constants().find("b_q");
  ASSERT_NE(bq, nullptr);
  EXPECT_EQ(bq->dtype(), DType::kI32);
  float act_scale = 4.0f / 255.0f;  // the input's range [-1, 3]
  float s0 = act_scale * (2.0f / 127.0f), s1 = act_scale * (0.5f / 127.0f);
  EXPECT_EQ(bq->scalar_at(0), std::nearbyint(0.3f * (1.0f / s0)));
  EXPECT_EQ(bq->scalar_at(1), std::nearbyint(-0.2f * (1.0f / s1)));
  const Tensor* bs = q->constants().find("b_scales");
  ASSERT_NE(bs, nullptr);
  EXPECT_EQ(bs->scalar_at(0), static_cast<double>(s0));
  EXPECT_FALSE(q->constants().contains("w")) << "the float weight is gone";
}

TEST(Convert, ConstantOperandQuantizedFromItsData) {
  // add(x, c) with a constant tensor c: c is quantized with the activation spec over its own
  // range [-1.5, 2], at convert time.
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 4}));
  Tensor c(DType::kF32, {4});
  float cv[] = {0.5f, -1.5f, 2.0f, 0.0f};
  for (int i = 0; i < 4; ++i) c.set_scalar_at(i, cv[i]);
  Node* add = b.call(OpId::kAdd, {x, p.add_constant("c", "c", c)}, {}, "add");
  b.outputs({add});
  auto prep = prepare(p, options());
  ASSERT_TRUE(prep.ok());
  ASSERT_TRUE(calibrate(**prep, samples(1)).ok());
  auto q = convert(**prep);
  ASSERT_TRUE(q.ok()) << q.status().message();
  const Tensor* cq = q->constants().find("c_q");
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(cq->dtype(), DType::kU8);
  Node* dq = q->graph().find("add")->arg(1).node();
  ASSERT_TRUE(dq->is_call(OpId::kDequantizePerTensor));
  EXPECT_EQ(dq->kwarg_float("scale"), static_cast<double>(3.5f / 255.0f));
  EXPECT_EQ(dq->kwarg_int("zero_point"), 109);  // round(1.5 / (3.5 / 255)) = round(109.29)
  EXPECT_EQ(cq->scalar_at(2), 255);
  EXPECT_EQ(cq->scalar_at(3), 109);
}

TEST(Convert, LayerNormWeightAsAnActivationBiasAsI32) {
  // The Qualcomm quantizer's annotate_layer_norm: gamma quantized over its own range with the
  // activation spec (u8), beta with the bias spec (i32, symmetric per tensor).
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 4}));
  Node* gamma = p.add_parameter("gamma", "gamma", ramp({4}, 0.5, 0.25));
  Node* beta = p.add_parameter("beta", "beta", ramp({4}, -0.2, 0.1));
  Node* ln = b.call(OpId::kLayerNorm, {x, gamma, beta}, {{"normalized_shape", std::vector<int64_t>{4}}}, "ln");
  b.outputs({ln});
  auto prep = prepare(p, options());
  ASSERT_TRUE(prep.ok()) << prep.status().message();
  ASSERT_TRUE(calibrate(**prep, samples(2)).ok());
  auto q = convert(**prep);
  ASSERT_TRUE(q.ok()) << q.status().message();
  Node* qln = q->graph().find("ln");
  Node* dg = qln->arg(1).node();
  Node* db = qln->arg(2).node();
  ASSERT_TRUE(dg->is_call(OpId::kDequantizePerTensor)) << print_kir(*q);
  ASSERT_TRUE(db->is_call(OpId::kDequantizePerTensor)) << print_kir(*q);
  EXPECT_EQ(dg->kwarg("dtype").to_dtype(), DType::kU8);
  EXPECT_EQ(db->kwarg("dtype").to_dtype(), DType::kI32);
  EXPECT_EQ(db->kwarg_int("zero_point"), 0);
  // gamma spans [0.5, 1.25]; the range always holds 0: [0, 1.25].
  EXPECT_EQ(dg->kwarg_float("scale"), static_cast<double>(1.25f / 255.0f));
}

TEST(Exclusions, SkippedNodesAndTheirWeightsStayFloat) {
  RulesModel m;
  QuantizeOptions o = options();
  o.skip_nodes = {"lin"};
  o.skip_ops = {"sigmoid"};
  auto ann = annotate(m.p, o);
  ASSERT_TRUE(ann.ok());
  EXPECT_EQ(ann->of(m.lin), nullptr);
  EXPECT_EQ(ann->of(m.sig), nullptr);
  EXPECT_EQ(ann->skipped_nodes, (std::vector<std::string>{"lin", "sig"}));
  EXPECT_EQ(ann->skipped_parameters, (std::vector<std::string>{"w1", "b1"}));
  // relu is no longer fused into an excluded producer: it quantizes its own input.
  const NodeAnnotation* relu = ann->of(m.relu);
  ASSERT_NE(relu, nullptr);
  ASSERT_EQ(relu->inputs.size(), 1u);
  EXPECT_EQ(relu->inputs[0].value, m.lin);
  auto prep = prepare(m.p, o);
  ASSERT_TRUE(prep.ok());
  ASSERT_TRUE(calibrate(**prep, samples(2)).ok());
  auto q = convert(**prep);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->constants().contains("w1"));
  EXPECT_TRUE(q->constants().contains("b1"));
  EXPECT_FALSE(q->constants().contains("w1_q"));
  // x is read only by the excluded linear: it is not quantized at all.
  Node* lin = q->graph().find("lin");
  EXPECT_EQ(lin->arg(0).node()->name(), "x");
  EXPECT_TRUE(lin->arg(1).node()->op() == OpKind::kPlaceholder);
}

TEST(Exclusions, UnknownNamesAndQuantizedModels) {
  RulesModel m;
  QuantizeOptions o = options();
  o.skip_nodes = {"nope"};
  auto a = annotate(m.p, o);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "--skip-node 'nope': no node of that name");
  o.skip_nodes.clear();
  o.skip_ops = {"frobnicate"};
  a = annotate(m.p, o);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "--skip-op 'frobnicate': no operator of that name");

  auto prep = prepare(m.p, options());
  ASSERT_TRUE(calibrate(**prep, samples(1)).ok());
  auto q = convert(**prep);
  ASSERT_TRUE(q.ok());
  auto again = annotate(*q, options());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already quantized"), std::string::npos);
}

TEST(Calibrate, BadSamplesNameTheProblem) {
  RulesModel m;
  auto prep = prepare(m.p, options());
  ASSERT_TRUE(prep.ok());
  Status st = calibrate(**prep, {});
  EXPECT_EQ(st.message(), "the calibration set is empty: give at least one sample");
  std::vector<Sample> wrong_name = {{"a.npz", {{"image", ramp({2, 4}, 0, 1)}}}};
  st = calibrate(**prep, wrong_name);
  EXPECT_EQ(st.message(), "calibration sample 'a.npz': 'image' is not an input of the model (inputs: x)");
  std::vector<Sample> wrong_shape = {{"b.npz", {{"x", ramp({2, 5}, 0, 1)}}}};
  st = calibrate(**prep, wrong_shape);
  EXPECT_EQ(st.message(), "calibration sample 'b.npz': input 'x' is f32[2, 5], expected f32[2, 4]");
  std::vector<Sample> wrong_dtype = {{"c.npz", {{"x", Tensor(DType::kI64, {2, 4})}}}};
  st = calibrate(**prep, wrong_dtype);
  EXPECT_EQ(st.message(), "calibration sample 'c.npz': input 'x' is i64[2, 4], expected f32[2, 4]");
  auto unobserved = convert(**prep);
  ASSERT_FALSE(unobserved.ok());
  EXPECT_NE(unobserved.status().message().find("was never observed"), std::string::npos);
}

// A chain of linear layers where 8-bit activations cost accuracy; 16 bits win it back.
ExportedProgram chain(int layers) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* h = b.input("x", f32({4, 16}));
  for (int i = 0; i < layers; ++i) {
    Tensor w(DType::kF32, {16, 16});
    for (int64_t k = 0; k < w.numel(); ++k) w.set_scalar_at(k, std::sin(0.37 * static_cast<double>(k + 31 * i)) * 0.4);
    std::string name = fmt::format("l{}", i);
    h = b.call(OpId::kLinear, {h, p.add_parameter(name + "_w", name + ".weight", w)}, {}, name);
  }
  b.outputs({h});
  return p;
}

TEST(MixedPrecision, PromotesUntilTheTargetIsReached) {
  ExportedProgram p = chain(4);
  auto prep = prepare(p, options("8a8w", ObserverKind::kMinMax));
  ASSERT_TRUE(prep.ok());
  auto s = samples(4, {4, 16});
  ASSERT_TRUE(calibrate(**prep, s).ok());
  auto base = auto_mixed_precision(**prep, s, -100.0);
  ASSERT_TRUE(base.ok()) << base.status().message();
  EXPECT_TRUE(base->reached);
  EXPECT_EQ(base->evaluations, 1);
  EXPECT_EQ(base->bytes, base->base_bytes);
  double target = base->base_sqnr_db + 12.0;
  auto mixed = auto_mixed_precision(**prep, s, target);
  ASSERT_TRUE(mixed.ok()) << mixed.status().message();
  EXPECT_TRUE(mixed->reached) << format_mixed(*mixed);
  EXPECT_GE(mixed->sqnr_db, target);
  size_t promoted = 0;
  for (const LayerChoice& l : mixed->layers) promoted += l.config != "8a8w";
  EXPECT_GT(promoted, 0u);
  EXPECT_GT(mixed->bytes, mixed->base_bytes);
  // The configurations stay set: convert gives the program that was measured.
  auto q = convert(**prep);
  ASSERT_TRUE(q.ok());
  auto report = measure_accuracy(**prep, *q, s);
  ASSERT_TRUE(report.ok());
  EXPECT_NEAR(report->output_sqnr_db(), mixed->sqnr_db, 1e-9);
  // An unreachable target: everything at the most precise rung, and it says so.
  auto far = auto_mixed_precision(**prep, s, 500.0);
  ASSERT_TRUE(far.ok());
  EXPECT_FALSE(far->reached);
  for (const LayerChoice& l : far->layers) EXPECT_EQ(l.config, "16a16w");
}

TEST(QuantizeValue, MatchesThePortableKernel) {
  // Weights are quantized offline by quantize_value; activations at run time by the kernel: the
  // two must round alike, halves and clamps included.
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({4096}));
  const double scale = 0.0173;
  Node* q = b.call(OpId::kQuantizePerTensor, {x},
                   {{"scale", scale}, {"zero_point", 7}, {"quant_min", 0}, {"quant_max", 255}, {"dtype", DType::kU8}});
  b.outputs({q});
  Tensor in(DType::kF32, {4096});
  for (int64_t i = 0; i < in.numel(); ++i) {
    // Exact halves of the grid, values between, and some past either end of the range.
    in.set_scalar_at(i, (static_cast<double>(i % 700) - 150.0) * 0.5 * scale + (i % 3 == 0 ? 1e-4 : 0.0));
  }
  auto interp = portable::Interpreter::create(p);
  ASSERT_TRUE(interp.ok());
  auto out = (*interp)->run(std::vector<Tensor>{in});
  ASSERT_TRUE(out.ok()) << out.status().message();
  for (int64_t i = 0; i < in.numel(); ++i) {
    ASSERT_EQ(out->outputs[0].scalar_at(i), quantize_value(in.data_as<float>()[i], scale, 7, 0, 255)) << i;
  }
}

TEST(Samples, FolderOfNpzAndErrors) {
  auto missing = read_samples("/nonexistent/calib");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "'/nonexistent/calib': no such file");
}

}  // namespace
}  // namespace kiln::quant
