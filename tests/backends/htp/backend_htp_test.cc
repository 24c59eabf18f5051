// The HTP backend end to end: a small CNN and an attention block, quantized by kiln's quantizer,
// partitioned, preprocessed to a context binary, written to a program file and run by the
// runtime's HTP delegate; compared with the fake-quant program on the portable interpreter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kiln/backends/htp/capture.h"
#include "kiln/backends/htp/htp_backend.h"
#include "kiln/backends/htp/htp_runtime.h"
#include "kiln/backends/htp/kernels.h"
#include "kiln/backends/portable/interpreter.h"
#include "kiln/core/memory.h"
#include "kiln/ir/kir.h"
#include "kiln/lower/to_backend.h"
#include "kiln/partition/capability_partitioner.h"
#include "kiln/quant/quantizer.h"
#include "kiln/runtime/program.h"
#include "kiln/serialize/program_writer.h"
#include "testing/graph_builder.h"
#include "backend_test_util.h"

namespace kiln::htp {
namespace {

using namespace test_util;

// The output scale: the last quantize's.
double output_scale(const ExportedProgram& q) {
  const Node* out = q.user_outputs().front();
  while (!out->is_call(OpId::kQuantizePerTensor)) out = out->input(0);
  return out->kwarg_float("scale");
}

void expect_within_steps(const Tensor& got, const Tensor& want, double step, double steps) {
  ASSERT_EQ(got.shape(), want.shape());
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    worst = std::max(worst, std::abs(double(got.data_as<float>()[i]) - want.data_as<float>()[i]));
  }
  EXPECT_LE(worst, steps * step + 1e-6) << "worst difference " << worst / step << " steps";
}

TEST(HtpBackend, QuantizedCnnMatchesFakeQuantWithinOneStep) {
  ExportedProgram p;
  build_cnn(p);
  auto samples = samples_for("x", {1, 3, 16, 16}, 8);
  ExportedProgram q = quantized(p, samples);
  std::vector<Tensor> in = {samples[3].inputs["x"]};
  std::vector<Tensor> want = interpret(q, in);
  size_t partitions = 0;
  std::vector<Tensor> got = run_on_htp(q.clone(), specs(false), in, &partitions);
  EXPECT_EQ(partitions, 1u);
  ASSERT_EQ(got.size(), 1u);
  expect_within_steps(got[0], want[0], output_scale(q), 1);
}

// tag_quant_io: the input takes the codes the delegate's Quantize would make and the output
// returns the codes its Dequantize would read, so the two programs agree bit for bit; the
// context then has no Quantize / Dequantize op.
TEST(HtpBackend, TaggedQuantIoTakesAndReturnsCodes) {
  ExportedProgram p;
  build_cnn(p);
  auto samples = samples_for("x", {1, 3, 16, 16}, 4);
  ExportedProgram q = quantized(p, samples);
  ExportedProgram tagged = q.clone();
  auto io = tag_quant_io(tagged, [](const Node&) -> std::optional<DType> { return DType::kU8; });
  ASSERT_TRUE(io.ok()) << io.status().message();
  ASSERT_EQ(io->size(), 2u);
  EXPECT_EQ((*io)[0].kind, QuantizedIo::kInput);
  EXPECT_EQ((*io)[0].name, "x");
  EXPECT_EQ((*io)[1].kind, QuantizedIo::kOutput);
  EXPECT_EQ(tagged.user_inputs()[0]->spec().dtype, DType::kU8);
  EXPECT_EQ(tagged.user_outputs()[0]->spec().dtype, DType::kU8);

  const Tensor& x = samples[2].inputs["x"];
  const QuantAttrs& qi = (*io)[0].quant;
  const QuantAttrs& qo = (*io)[1].quant;
  Tensor codes(DType::kU8, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    codes.mutable_data_as<uint8_t>()[i] = static_cast<uint8_t>(
        quantize_value(x.data_as<float>()[i], static_cast<float>(qi.scales[0]),
                       static_cast<int32_t>(qi.zero_points[0]), qi.quant_min, qi.quant_max));
  }
  std::vector<Tensor> real = run_on_htp(q.clone(), specs(false), std::span(&x, 1));
  std::vector<Tensor> coded = run_on_htp(tagged.clone(), specs(false), std::span(&codes, 1));
  ASSERT_EQ(real.size(), 1u);
  ASSERT_EQ(coded.size(), 1u);
  ASSERT_EQ(coded[0].dtype(), DType::kU8);
  for (int64_t i = 0; i < real[0].numel(); ++i) {
    float want = real[0].data_as<float>()[i];
    float got = dequantize_value(coded[0].data_as<uint8_t>()[i], static_cast<float>(qo.scales[0]),
                                 static_cast<int32_t>(qo.zero_points[0]));
    ASSERT_EQ(got, want) << "element " << i;
  }

  HtpBackend backend;
  auto blob = backend.preprocess(tagged, specs(false));
  ASSERT_TRUE(blob.ok()) << blob.status().message();
  auto ctx = parse_context(blob->processed_bytes);
  ASSERT_TRUE(ctx.ok()) << ctx.status().message();
  for (const QnnOp& op : ctx->graphs[0].ops) {
    EXPECT_NE(op.type, "Quantize") << op.name;
    EXPECT_NE(op.type, "Dequantize") << op.name;
  }
}

TEST(HtpBackend, TagQuantIoNamesWhatCannotCarryCodes) {
  ExportedProgram p;
  build_cnn(p);
  std::string before = print_kir(p);
  auto r = tag_quant_io(p, [](const Node&) -> std::optional<DType> { return DType::kU8; });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 'x'"), std::string::npos) << r.status().message();
  EXPECT_EQ(print_kir(p), before);

  ExportedProgram q = quantized(p, samples_for("x", {1, 3, 16, 16}, 2));
  before = print_kir(q);
  r = tag_quant_io(q, [](const Node& n) -> std::optional<DType> {
    return n.op() == OpKind::kPlaceholder ? std::optional<DType>() : DType::kU16;
  });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is quantized to u8, not u16"), std::string::npos) << r.status().message();
  EXPECT_EQ(print_kir(q), before);
}

TEST(HtpBackend, OnlinePrepareRunsTheSameAsOffline) {
  ExportedProgram p;
  build_cnn(p);
  auto samples = samples_for("x", {1, 3, 16, 16}, 4);
  ExportedProgram q = quantized(p, samples);
  std::vector<Tensor> in = {samples[1].inputs["x"]};
  std::vector<Tensor> offline = run_on_htp(q.clone(), specs(false, false), in);
  std::vector<Tensor> online = run_on_htp(q.clone(), specs(false, true), in);
  ASSERT_EQ(offline.size(), 1u);
  ASSERT_EQ(online.size(), 1u);
  EXPECT_EQ(std::memcmp(offline[0].data(), online[0].data(), offline[0].nbytes()), 0);
}

// use_conv_hmx off runs the convolutions on the direct loops instead of oneDNN: same codes.
TEST(HtpBackend, ConvWithoutHmxGivesTheSameCodes) {
  ExportedProgram p;
  build_cnn(p);
  auto samples = samples_for("x", {1, 3, 16, 16}, 4);
  ExportedProgram q = quantized(p, samples);
  std::vector<Tensor> in = {samples[2].inputs["x"]};
  std::vector<Tensor> hmx = run_on_htp(q.clone(), specs(false), in);
  std::vector<Tensor> direct = run_on_htp(q.clone(), specs(false, false, QcomChipset::SM8650, true, false), in);
  ASSERT_EQ(hmx.size(), 1u);
  ASSERT_EQ(direct.size(), 1u);
  EXPECT_EQ(std::memcmp(hmx[0].data(), direct[0].data(), hmx[0].nbytes()), 0);
}

// use_dlbc stores the weights compressed in the context binary (HtpContext.Dlbc* checks the
// sizes): lossless, so the outputs stay bit for bit.
TEST(HtpBackend, DlbcKeepsTheCodes) {
  ExportedProgram p;
  build_cnn(p);
  auto samples = samples_for("x", {1, 3, 16, 16}, 4);
  ExportedProgram q = quantized(p, samples);
  auto dlbc = specs(false, false, QcomChipset::SM8650, true, true, /*dlbc=*/true);
  auto dlbc_blob = HtpBackend().preprocess(q, dlbc);
  ASSERT_TRUE(dlbc_blob.ok()) << dlbc_blob.status().message();
  auto context = parse_context(dlbc_blob->processed_bytes);
  ASSERT_TRUE(context.ok()) << context.status().message();
  EXPECT_TRUE(context->dlbc);
  std::vector<Tensor> in = {samples[1].inputs["x"]};
  std::vector<Tensor> plain = run_on_htp(q.clone(), specs(false), in);
  std::vector<Tensor> packed = run_on_htp(q.clone(), dlbc, in);
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(packed.size(), 1u);
  EXPECT_EQ(std::memcmp(plain[0].data(), packed[0].data(), plain[0].nbytes()), 0);
}

// preprocess runs capture_program first: the convolutions and pooling read and write NHWC, so
// the context needs one Transpose in and one back (before the mean), not a pair per conv / pool.
TEST(HtpBackend, CapturedCnnNeedsAtMostTwoTransposes) {
  ExportedProgram p;
  build_cnn(p);
  ExportedProgram q = quantized(p, samples_for("x", {1, 3, 16, 16}, 4));
  HtpBackend backend;
  auto blob = backend.preprocess(q, specs(false));
  ASSERT_TRUE(blob.ok()) << blob.status().message();
  auto context = parse_context(blob->processed_bytes);
  ASSERT_TRUE(context.ok()) << context.status().message();
  ASSERT_EQ(context->graphs.size(), 1u);
  size_t transposes = 0, convs = 0;
  for (const QnnOp& op : context->graphs[0].ops) {
    transposes += op.type == "Transpose";
    convs += op.type == "Conv2d" || op.type == "DepthWiseConv2d";
  }
  EXPECT_EQ(convs, 2u);
  EXPECT_LE(transposes, 2u);
}

// An ONNX QDQ model's conv -> q -> dq -> clip(0, 6) -> q, one encoding throughout: with
// use_fold_relu the clip becomes the conv's output clamp (no ReluMinMax op), and the outputs are
// bit for bit those of running the clip.
TEST(HtpBackend, QdqClipFoldsIntoTheConvBitExactly) {
  ExportedProgram p;
  testing::GraphBuilder b(p);
  auto qkw = [](double scale, int64_t zp, DType dtype, int64_t lo, int64_t hi) {
    return Kwargs{{"scale", scale}, {"zero_point", zp}, {"quant_min", lo}, {"quant_max", hi}, {"dtype", dtype}};
  };
  auto qdq = [&](Node* v, double scale, int64_t zp) {
    Node* q = b.call(OpId::kQuantizePerTensor, {v}, qkw(scale, zp, DType::kU8, 0, 255));
    return b.call(OpId::kDequantizePerTensor, {q}, qkw(scale, zp, DType::kU8, 0, 255));
  };
  Node* x = b.input("x", TensorSpec::of(DType::kF32, {1, 3, 8, 8}));
  Tensor wq(DType::kI8, {4, 3, 3, 3});
  std::mt19937 rng(7);
  for (int64_t i = 0; i < wq.numel(); ++i) wq.mutable_data_as<int8_t>()[i] = static_cast<int8_t>(int(rng() % 255) - 127);
  Node* w = p.add_constant("w", "w", std::move(wq));
  Node* dw = b.call(OpId::kDequantizePerTensor, {w}, qkw(0.01, 0, DType::kI8, -127, 127));
  Node* conv = b.call(OpId::kConvolution, {qdq(x, 0.02, 128), dw, nullptr}, {{"padding", std::vector<int64_t>{1, 1}}});
  Node* clip = b.call(OpId::kClamp, {qdq(conv, 0.05, 100)}, {{"min", 0.0}, {"max", 6.0}});
  b.outputs({qdq(clip, 0.05, 100)});

  auto relu_ops = [&](bool fold) {
    HtpBackend backend;
    auto blob = backend.preprocess(p, specs(false, false, QcomChipset::SM8650, fold));
    EXPECT_TRUE(blob.ok()) << blob.status().message();
    if (!blob.ok()) return -1;
    auto context = parse_context(blob->processed_bytes);
    EXPECT_TRUE(context.ok()) << context.status().message();
    int n = 0;
    for (const QnnOp& op : context->graphs.at(0).ops) n += op.type == "ReluMinMax";
    return n;
  };
  EXPECT_EQ(relu_ops(true), 0);
  EXPECT_EQ(relu_ops(false), 1);

  std::vector<Tensor> in = {random_tensor({1, 3, 8, 8}, 11)};
  std::vector<Tensor> folded = run_on_htp(p.clone(), specs(false, false, QcomChipset::SM8650, true), in);
  std::vector<Tensor> plain = run_on_htp(p.clone(), specs(false, false, QcomChipset::SM8650, false), in);
  ASSERT_EQ(folded.size(), 1u);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(std::memcmp(folded[0].data(), plain[0].data(), plain[0].nbytes()), 0);
  // Both clamps bite: some outputs are 0 and some 6 (codes 100 and 220).
  const float* v = folded[0].data_as<float>();
  EXPECT_NE(std::find(v, v + folded[0].numel(), 0.0f), v + folded[0].numel());
  EXPECT_NE(std::find_if(v, v + folded[0].numel(), [](float f) { return std::abs(f - 6.0f) < 1e-5f; }), v + folded[0].numel());
}

TEST(HtpBackend, QuantizedAttentionMatchesFakeQuant) {
  ExportedProgram p;
  build_attention(p);
  auto samples = samples_for("x", {1, 6, 16}, 8);
  ExportedProgram q = quantized(p, samples);
  std::vector<Tensor> in = {samples[2].inputs["x"]};
  std::vector<Tensor> want = interpret(q, in);
  size_t partitions = 0;
  std::vector<Tensor> got = run_on_htp(q.clone(), specs(false), in, &partitions);
  EXPECT_EQ(partitions, 1u);
  ASSERT_EQ(got.size(), 1u);
  // Integer matmuls and requantization against float fake-quant: a few steps after 6 layers.
  expect_within_steps(got[0], want[0], output_scale(q), 3);
}

TEST(HtpBackend, Fp16RoundsEveryOutputToHalf) {
  ExportedProgram p;
  build_cnn(p);
  std::vector<Tensor> in = {random_tensor({1, 3, 16, 16}, 9)};
  std::vector<Tensor> want = interpret(p, in);
  std::vector<Tensor> got = run_on_htp(p.clone(), specs(true), in);
  ASSERT_EQ(got.size(), 1u);
  for (int64_t i = 0; i < got[0].numel(); ++i) {
    float v = got[0].data_as<float>()[i];
    EXPECT_EQ(half_to_float(float_to_half(v)), v) << "element " << i << " is not a half value";
    EXPECT_NEAR(v, want[0].data_as<float>()[i], 2e-2 * (1 + std::abs(want[0].data_as<float>()[i])));
  }
}

TEST(HtpBackend, QuantizedPrecisionRejectsFloatOpsWithAReason) {
  ExportedProgram p;
  build_cnn(p);
  auto options = flatbuffer_to_option(specs(false)[0].value);
  ASSERT_TRUE(options.ok());
  auto support = htp_operator_support(*options);
  for (Node* n : p.graph().nodes()) {
    if (n->op() != OpKind::kCallFunction) continue;
    SupportResult r = support->is_node_supported(p, *n);
    EXPECT_FALSE(r.supported) << n->name();
    EXPECT_NE(r.reason.find("quantiz"), std::string::npos) << r.reason;
  }
}

TEST(HtpBackend, SkipsNodesAndOpsByName) {
  ExportedProgram p;
  build_cnn(p);
  auto options = flatbuffer_to_option(specs(true)[0].value);
  SupportOptions skip;
  skip.skip_ops = {"relu"};
  skip.skip_node_names = {"linear"};
  auto support = htp_operator_support(*options, skip);
  for (Node* n : p.graph().nodes()) {
    if (n->op() != OpKind::kCallFunction) continue;
    bool skipped = n->is_call(OpId::kRelu) || n->is_call(OpId::kLinear);
    SupportResult r = support->is_node_supported(p, *n);
    EXPECT_EQ(r.supported, !skipped) << n->name() << ": " << r.reason;
    if (skipped) EXPECT_NE(r.reason.find("skipped"), std::string::npos);
  }
}

TEST(HtpBackend, PreprocessNeedsItsCompileSpec) {
  ExportedProgram p;
  build_cnn(p);
  HtpBackend backend;
  auto r = backend.preprocess(p, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("qnn_compile_spec"), std::string::npos);
}

TEST(HtpBackend, SaverWritesTheGraphAsJson) {
  ExportedProgram p;
  build_cnn(p);
  CompilerSpecArgs args;
  args.saver = true;
  auto s = generate_qnn_executorch_compiler_spec(QcomChipset::SM8650, generate_htp_compiler_spec(true), args);
  ASSERT_TRUE(s.ok());
  HtpBackend backend;
  auto r = backend.preprocess(p, to_compile_specs<CompileSpec>(*s));
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::string json(r->processed_bytes.begin(), r->processed_bytes.end());
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"DepthWiseConv2d\""), std::string::npos);
  EXPECT_NE(json.find("\"FullyConnected\""), std::string::npos);
}

TEST(HtpBackend, ProfileAndDumpThroughTheExecutor) {
  ExportedProgram p;
  build_cnn(p);
  auto sp = specs(true);
  HtpBackend backend;
  auto blob = backend.preprocess(p, sp);
  ASSERT_TRUE(blob.ok());
  auto context = parse_context(blob->processed_bytes);
  ASSERT_TRUE(context.ok()) << context.status().message();
  auto options = *flatbuffer_to_option(sp[0].value);
  options.profile_level = ProfileLevel::kOptrace;
  auto ex = HtpExecutor::create(std::make_shared<const Context>(std::move(*context)), "forward", options, 1);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  std::vector<std::string> dumped;
  (*ex)->set_dump([&](const std::string& name, const Tensor& t) {
    dumped.push_back(name);
    EXPECT_EQ(t.dtype(), DType::kF32);
  });
  std::vector<Tensor> in = {random_tensor({1, 3, 16, 16}, 11)};
  ASSERT_TRUE((*ex)->execute(in).ok());
  const GraphProfile& prof = (*ex)->last_profile();
  EXPECT_EQ(prof.ops.size(), (*ex)->graph().ops.size());
  EXPECT_EQ(dumped.size(), (*ex)->graph().ops.size());
  EXPECT_GT(prof.total_ns, 0);
  std::string trace = profile_to_chrome_trace(std::span(&prof, 1));
  EXPECT_NE(trace.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(trace.find("\"ph\": \"X\""), std::string::npos);
}

// Hands out output buffers and remembers them: the caller's memory.
class RecordingContext final : public portable::KernelContext {
 public:
  Tensor allocate(DType dtype, std::vector<int64_t> shape) override {
    Tensor t(dtype, std::move(shape));
    given.push_back(t.data());
    return t;
  }
  std::vector<const void*> given;
};

TEST(HtpBackend, SharedBufferExecutesOnTheCallersBuffers) {
  ExportedProgram p;
  build_cnn(p);
  auto sp = specs(true);
  auto blob = HtpBackend().preprocess(p, sp);
  ASSERT_TRUE(blob.ok()) << blob.status().message();
  auto context = parse_context(blob->processed_bytes);
  ASSERT_TRUE(context.ok()) << context.status().message();
  auto shared_context = std::make_shared<const Context>(std::move(*context));
  std::vector<Tensor> in = {random_tensor({1, 3, 16, 16}, 5)};
  std::vector<std::vector<Tensor>> results;
  for (bool shared : {false, true}) {
    auto options = *flatbuffer_to_option(sp[0].value);
    options.shared_buffer = shared;
    options.profile_level = ProfileLevel::kBasic;
    auto ex = HtpExecutor::create(shared_context, "forward", options, 1);
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    RecordingContext caller;
    auto out = (*ex)->execute(in, &caller);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ(out->size(), caller.given.size());
    for (size_t k = 0; k < out->size(); ++k) EXPECT_EQ((*out)[k].data(), caller.given[k]);
    int64_t io = in[0].nbytes();
    for (const Tensor& t : *out) io += t.nbytes();
    // Without a shared buffer the inputs are copied in and the outputs out; with it, none.
    EXPECT_EQ((*ex)->last_profile().io_copy_bytes, shared ? 0 : io) << "shared_buffer " << shared;
    results.push_back(std::move(out).value());
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t k = 0; k < results[0].size(); ++k) {
    EXPECT_EQ(0, std::memcmp(results[0][k].data(), results[1][k].data(), results[0][k].nbytes()));
  }
}

TEST(HtpBackend, SymbolicShapesStayOnTheCpu) {
  ExportedProgram p;
  testing::GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec(DType::kF32, {Dim::symbol("batch"), 4}));
  b.outputs({b.relu(x)});
  auto options = flatbuffer_to_option(specs(true)[0].value);
  SupportResult r = htp_operator_support(*options)->is_node_supported(p, *p.user_outputs().front());
  EXPECT_FALSE(r.supported);
  EXPECT_NE(r.reason.find("symbolic"), std::string::npos) << r.reason;
}

}  // namespace
}  // namespace kiln::htp
