// The xnnpack backend: what it takes (and why not), numerics against the portable interpreter
// through lowering, the program file and the runtime, and blobs that must be refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/backends/xnnpack/xnnpack_backend.h"
#include "kiln/lower/to_backend.h"
#include "kiln/partition/capability_partitioner.h"
#include "kiln/runtime/program.h"
#include "kiln/serialize/program_writer.h"
#include "lower/golden.h"
#include "testing/graph_builder.h"
#include "xnnpack_graph_generated.h"

namespace kiln::xnnpack {
namespace {

using testing::GraphBuilder;
using V = std::vector<int64_t>;

Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed, float scale = 1.0f) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_data_as<float>()[i] = d(rng);
  return t;
}

Node* param(ExportedProgram& p, const std::string& name, std::vector<int64_t> shape, uint32_t seed, float scale = 0.3f) {
  return p.add_parameter(name, name, random_tensor(std::move(shape), seed, scale));
}

// Lowers what XNNPACK takes; returns the partition count.
size_t lower(ExportedProgram& p) {
  BackendRegistry registry;
  EXPECT_TRUE(register_xnnpack_backend(registry).ok());
  CapabilityPartitioner partitioner(std::string(kBackendId), {}, xnnpack_operator_support());
  auto report = to_backend(p, partitioner, registry);
  EXPECT_TRUE(report.ok()) << report.status().message();
  return report.ok() ? report->partitions : 0;
}

std::vector<Tensor> interpret(ExportedProgram& p, std::span<const Tensor> in) {
  auto interp = portable::Interpreter::create(p);
  EXPECT_TRUE(interp.ok());
  auto r = (*interp)->run(in);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->outputs : std::vector<Tensor>{};
}

// Writes `p` as a program file in memory and runs it on the runtime with the xnnpack backend.
std::vector<Tensor> run_program(ExportedProgram& p, std::span<const Tensor> in, int threads) {
  MethodToSerialize m{"forward", &p};
  auto image = serialize_program(std::span(&m, 1));
  EXPECT_TRUE(image.ok()) << image.status().message();
  if (!image.ok()) return {};
  auto storage = std::make_shared<HeapStorage>(image->size);
  size_t at = 0;
  for (std::string_view c : image->chunks) {
    std::memcpy(storage->mutable_data() + at, c.data(), c.size());
    at += c.size();
  }
  auto program = runtime::Program::load_buffer(std::span<const uint8_t>(storage->mutable_data(), image->size), storage);
  EXPECT_TRUE(program.ok()) << program.status().message();
  if (!program.ok()) return {};
  runtime::BackendRegistry backends;
  EXPECT_TRUE(backends.add(make_xnnpack_runtime_backend()).ok());
  runtime::MethodOptions options;
  options.num_threads = threads;
  auto method = (*program)->load_method("forward", backends, options);
  EXPECT_TRUE(method.ok()) << method.status().message();
  if (!method.ok()) return {};
  std::vector<Tensor> out;
  for (int run = 0; run < 2; ++run) {  // the runtime is reused: a second run gives the same
    auto r = (*method)->execute(in);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return {};
    if (run == 1) {
      for (size_t i = 0; i < r->size(); ++i) EXPECT_EQ(std::memcmp((*r)[i].data(), out[i].data(), out[i].nbytes()), 0);
    }
    out = std::move(r).value();
  }
  return out;
}

// Lowered to XNNPACK and run (1 and 2 threads) against the interpreter on the original graph.
void expect_matches_interpreter(const ExportedProgram& original, std::span<const Tensor> in, size_t want_partitions,
                                float tol = 1e-4f) {
  ExportedProgram reference = original.clone();
  std::vector<Tensor> want = interpret(reference, in);
  ExportedProgram lowered = original.clone();
  EXPECT_EQ(lower(lowered), want_partitions);
  for (int threads : {1, 2}) {
    std::vector<Tensor> got = run_program(lowered, in, threads);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].shape(), want[i].shape());
      float scale = 1e-6f;
      for (int64_t k = 0; k < want[i].numel(); ++k) scale = std::max(scale, std::abs(want[i].data_as<float>()[k]));
      for (int64_t k = 0; k < want[i].numel(); ++k) {
        ASSERT_NEAR(got[i].data_as<float>()[k], want[i].data_as<float>()[k], tol * scale)
            << "output " << i << " element " << k << " at " << threads << " thread(s)";
      }
    }
  }
}

// Conv (dense, depthwise with a multiplier, grouped, strided with asymmetric padding), pooling,
// residual add, activations, global mean, linear: one delegate.
ExportedProgram cnn() {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", testing::f32({1, 4, 12, 12}));
  Node* c1 = b.call(OpId::kConvolution, {x, param(p, "w1", {8, 4, 3, 3}, 1), param(p, "b1", {8}, 2)},
                    {{"padding", V{1, 1}}});
  Node* r1 = b.relu(c1);
  Node* dw = b.call(OpId::kConvolution, {r1, param(p, "w2", {16, 1, 3, 3}, 3), nullptr},
                    {{"padding", V{1}}, {"groups", int64_t{8}}});
  Node* g = b.call(OpId::kConvolution, {dw, param(p, "w3", {8, 4, 1, 1}, 4), param(p, "b3", {8}, 5)},
                   {{"groups", int64_t{4}}});
  Node* sum = b.add(g, r1);
  Node* c6 = b.call(OpId::kClamp, {sum}, {{"min", 0.0}, {"max", 6.0}});
  Node* s = b.call(OpId::kConvolution, {c6, param(p, "w4", {6, 8, 3, 3}, 6), nullptr},
                   {{"stride", V{2, 2}}, {"padding", V{0, 1, 1, 0}}});
  Node* mp = b.call(OpId::kMaxPool2d, {s}, {{"kernel_size", V{3, 3}}, {"stride", V{2, 2}}, {"padding", V{1, 1}}});
  Node* hs = b.call(OpId::kHardswish, {mp});
  Node* gap = b.call(OpId::kMean, {hs}, {{"dim", V{-1, -2}}, {"keepdim", false}});
  Node* fc = b.linear(gap, param(p, "fw", {5, 6}, 7), param(p, "fb", {5}, 8));
  b.outputs({fc, mp});
  return p;
}

TEST(Xnnpack, ConvNetMatchesTheInterpreter) {
  ExportedProgram p = cnn();
  Tensor x = random_tensor({1, 4, 12, 12}, 42);
  expect_matches_interpreter(p, std::span(&x, 1), 1);
}

// The other operators: average and adaptive pooling, broadcasting constants of lower rank
// against NHWC data, channel softmax, prelu, reshapes that keep the layout, addmm and matmul
// with a constant, sigmoid, leaky relu, and arithmetic with numbers.
ExportedProgram every_operator() {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", testing::f32({2, 3, 8, 8}));
  Node* ap = b.call(OpId::kAvgPool2d, {x}, {{"kernel_size", V{2, 2}}});
  Node* scale = param(p, "scale", {3, 1, 1}, 9);
  Node* m = b.mul(ap, scale);
  Node* shift = param(p, "shift", {3, 1, 1}, 10);
  Node* d = b.call(OpId::kDiv, {b.call(OpId::kSub, {m, shift}), 2.0});
  Node* sm = b.call(OpId::kSoftmax, {d}, {{"dim", int64_t{1}}});
  Node* pr = b.call(OpId::kPrelu, {b.call(OpId::kAdd, {sm, -0.3}), param(p, "slope", {3}, 11)});
  Node* sg = b.call(OpId::kSigmoid, {pr});
  Node* aap = b.call(OpId::kAdaptiveAvgPool2d, {sg}, {{"output_size", V{1, 1}}});
  Node* flat = b.call(OpId::kFlatten, {aap}, {{"start_dim", int64_t{1}}});
  Node* mm = b.call(OpId::kAddmm, {param(p, "bias", {4}, 12), flat, param(p, "w", {3, 4}, 13)});
  Node* lr = b.call(OpId::kLeakyRelu, {mm}, {{"negative_slope", 0.2}});
  Node* r = b.call(OpId::kReshape, {lr}, {{"shape", V{2, 2, 2}}});
  Node* mat = b.call(OpId::kMatmul, {r, param(p, "k", {2, 3}, 14)});
  Node* neg = b.neg(b.call(OpId::kAbs, {mat}));
  b.outputs({neg, d});
  return p;
}

TEST(Xnnpack, EveryOperatorMatchesTheInterpreter) {
  Tensor in = random_tensor({2, 3, 8, 8}, 43);
  expect_matches_interpreter(every_operator(), std::span(&in, 1), 1);
}

// What a detection head and neck use: transposed convolutions (stride, padding, output padding,
// groups), batch norm after them and on a rank-2 tensor, and hardsigmoid with ONNX's slope.
TEST(Xnnpack, DecoderOperatorsMatchTheInterpreter) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", testing::f32({2, 4, 5, 6}));
  Node* up = b.call(OpId::kConvTranspose2d, {x, param(p, "wt", {4, 3, 3, 3}, 21), param(p, "bt", {3}, 22)},
                    {{"stride", V{2, 2}}, {"padding", V{1, 1}}, {"output_padding", V{1, 0}}});
  auto variance = [&p](const std::string& name, int64_t n, uint32_t seed) {
    Tensor t = random_tensor({n}, seed);
    for (int64_t i = 0; i < n; ++i) t.mutable_data_as<float>()[i] = std::abs(t.data_as<float>()[i]) + 0.1f;
    return p.add_parameter(name, name, std::move(t));
  };
  Node* bn = b.call(OpId::kBatchNorm, {up, param(p, "gamma", {3}, 24), param(p, "beta", {3}, 25), param(p, "mean", {3}, 26),
                                       variance("var", 3, 23)},
                    {{"eps", 1e-3}});
  Node* hs = b.call(OpId::kHardsigmoid, {bn}, {{"alpha", 0.2}, {"beta", 0.5}});
  Node* grouped = b.call(OpId::kConvTranspose2d, {hs, param(p, "wg", {3, 2, 2, 2}, 27), nullptr},
                         {{"stride", V{2, 1}}, {"groups", int64_t{3}}, {"dilation", V{1, 2}}});
  Node* pooled = b.call(OpId::kMean, {grouped}, {{"dim", V{2, 3}}});
  Node* bn2 = b.call(OpId::kBatchNorm, {pooled, nullptr, nullptr, param(p, "mean2", {6}, 28), variance("var2", 6, 30)});
  b.outputs({bn2, hs});
  Tensor in = random_tensor({2, 4, 5, 6}, 29);
  expect_matches_interpreter(p, std::span(&in, 1), 1);
}

// ---- quantized graphs --------------------------------------------------------------------------

std::string reason(const ExportedProgram& p, const Node* n);

Kwargs qkw(double scale, int64_t zp, DType dtype = DType::kU8) {
  const bool u8 = dtype == DType::kU8;
  return Kwargs{{"scale", scale}, {"zero_point", zp}, {"quant_min", int64_t{u8 ? 0 : -128}}, {"quant_max", int64_t{u8 ? 255 : 127}},
                {"dtype", dtype}};
}

Node* int8_weight(ExportedProgram& p, GraphBuilder& b, const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
  Tensor codes(DType::kI8, shape);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < codes.numel(); ++i) codes.mutable_data_as<int8_t>()[i] = static_cast<int8_t>(int(rng() % 255) - 127);
  Tensor scales(DType::kF32, {shape[0]}), zps(DType::kI64, {shape[0]});
  for (int64_t c = 0; c < shape[0]; ++c) {
    scales.mutable_data_as<float>()[c] = 0.002f + 0.001f * float(c);
    zps.mutable_data_as<int64_t>()[c] = 0;
  }
  Node* q = p.add_constant(name, name, std::move(codes));
  Node* s = p.add_constant(name + "_scales", name + "_scales", std::move(scales));
  Node* z = p.add_constant(name + "_zps", name + "_zps", std::move(zps));
  return b.call(OpId::kDequantizePerChannel, {q, s, z},
                {{"axis", int64_t{0}}, {"quant_min", int64_t{-127}}, {"quant_max", int64_t{127}}, {"dtype", DType::kI8}});
}

// A QDQ network as torch FX and ONNX QDQ exports write it (uint8 activations, per-channel int8
// weights): conv + relu, max pool, a depthwise branch, residual add + relu, global pool,
// flatten, and a Gemm whose weight is transposed and whose bias is int32 codes.
ExportedProgram qdq_net() {
  ExportedProgram p;
  GraphBuilder b(p);
  auto q = [&](Node* v, double scale, int64_t zp) { return b.call(OpId::kQuantizePerTensor, {v}, qkw(scale, zp)); };
  auto dq = [&](Node* v, double scale, int64_t zp) { return b.call(OpId::kDequantizePerTensor, {v}, qkw(scale, zp)); };
  Node* x = b.input("x", testing::f32({1, 3, 8, 8}));
  Node* conv = b.call(OpId::kConvolution, {dq(q(x, 0.02, 128), 0.02, 128), int8_weight(p, b, "w1", {4, 3, 3, 3}, 1), param(p, "b1", {4}, 2)},
                      {{"padding", V{1, 1}}});
  Node* c1 = q(b.relu(conv), 0.05, 0);
  Node* pool = q(b.call(OpId::kMaxPool2d, {dq(c1, 0.05, 0)}, {{"kernel_size", V{2, 2}}, {"stride", V{2, 2}}}), 0.05, 0);
  Node* dw = q(b.call(OpId::kConvolution, {dq(pool, 0.05, 0), int8_weight(p, b, "w2", {4, 1, 3, 3}, 3), nullptr},
                      {{"padding", V{1, 1}}, {"groups", int64_t{4}}}),
               0.04, 120);
  Node* sum = q(b.relu(b.call(OpId::kAdd, {dq(pool, 0.05, 0), dq(dw, 0.04, 120)})), 0.06, 0);
  Node* gap = q(b.call(OpId::kAdaptiveAvgPool2d, {dq(sum, 0.06, 0)}, {{"output_size", V{1, 1}}}), 0.03, 0);
  Node* flat = q(b.call(OpId::kFlatten, {dq(gap, 0.03, 0)}, {{"start_dim", int64_t{1}}}), 0.03, 0);
  Tensor bias_codes(DType::kI32, {5});
  for (int64_t i = 0; i < 5; ++i) bias_codes.mutable_data_as<int32_t>()[i] = int32_t(i * 700 - 1500);
  Node* bias = b.call(OpId::kDequantizePerTensor, {p.add_constant("fc_b", "fc_b", std::move(bias_codes))},
                      Kwargs{{"scale", 0.0001}, {"zero_point", int64_t{0}}, {"quant_min", int64_t{-2147483648LL}},
                             {"quant_max", int64_t{2147483647}}, {"dtype", DType::kI32}});
  Node* wt = b.call(OpId::kPermute, {int8_weight(p, b, "fc_w", {5, 4}, 4)}, {{"dims", V{1, 0}}});
  Node* fc = q(b.call(OpId::kAddmm, {bias, dq(flat, 0.03, 0), wt}), 0.01, 128);
  b.outputs({dq(fc, 0.01, 128), pool});
  return p;
}

// The largest difference between `got` and `want` in units of `step` (1 for integer codes).
double steps_apart(const Tensor& got, const Tensor& want, double step) {
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(got.shape(), want.shape());
  double most = 0;
  for (int64_t i = 0; i < want.numel() && got.shape() == want.shape(); ++i) {
    most = std::max(most, std::abs(got.scalar_at(i) - want.scalar_at(i)) / step);
  }
  return most;
}

TEST(XnnpackInt8, QdqNetworkRunsOnInt8OperatorsWithinAStep) {
  ExportedProgram lowered = qdq_net();
  ASSERT_EQ(lower(lowered), 1u);
  auto bytes = lowered.lowered_modules()[0].processed_bytes->bytes();
  const fb::Graph& g = *fb::GetGraph(bytes.data());
  int int8_convs = 0, converts = 0;
  for (const fb::Node* n : *g.nodes()) {
    if (n->kind() == fb::NodeKind::Convert) ++converts;
    if (n->kind() == fb::NodeKind::Convolution2d || n->kind() == fb::NodeKind::DepthwiseConvolution2d) {
      int8_convs += g.values()->Get(n->inputs()->Get(1))->dtype() == fb::DataType::QCInt8;
    }
  }
  EXPECT_EQ(int8_convs, 3);  // the convolutions and the Gemm (as a 1x1 convolution)
  EXPECT_EQ(converts, 2);    // the input's quantize and the output's dequantize: codes in between
  ExportedProgram reference = qdq_net();
  Tensor in = random_tensor({1, 3, 8, 8}, 5);
  std::vector<Tensor> want = interpret(reference, std::span(&in, 1));
  for (int threads : {1, 2}) {
    std::vector<Tensor> got = run_program(lowered, std::span(&in, 1), threads);
    ASSERT_EQ(got.size(), 2u);
    // Integer requantization and the interpreter's float op + round can differ by one code.
    EXPECT_LE(steps_apart(got[0], want[0], 0.01), 1.0 + 1e-4);
    EXPECT_EQ(got[1].dtype(), DType::kU8);  // the pool's codes leave the delegate as uint8
    EXPECT_LE(steps_apart(got[1], want[1], 1), 1.0);
  }
}

TEST(XnnpackInt8, CodesInAndOut) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kU8, {1, 3, 6, 6}));
  Node* conv = b.call(OpId::kConvolution,
                      {b.call(OpId::kDequantizePerTensor, {x}, qkw(0.03, 140)), int8_weight(p, b, "w", {5, 3, 1, 1}, 7), nullptr});
  b.outputs({b.call(OpId::kQuantizePerTensor, {conv}, qkw(0.02, -3, DType::kI8))});
  Tensor in(DType::kU8, {1, 3, 6, 6});
  for (int64_t i = 0; i < in.numel(); ++i) in.mutable_data_as<uint8_t>()[i] = static_cast<uint8_t>(i * 37 % 256);
  ExportedProgram reference = p.clone();
  std::vector<Tensor> want = interpret(reference, std::span(&in, 1));
  ExportedProgram lowered = p.clone();
  ASSERT_EQ(lower(lowered), 1u);
  std::vector<Tensor> got = run_program(lowered, std::span(&in, 1), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].dtype(), DType::kI8);
  EXPECT_LE(steps_apart(got[0], want[0], 1), 1.0);
}

// A lone relu between a dequantize and a quantize of the same codes clamps them; a dequantize
// that reads codes with other parameters than they were made with stays out.
TEST(XnnpackInt8, LoneActivationClampsCodes) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", testing::f32({2, 6}));
  Node* codes = b.call(OpId::kQuantizePerTensor, {x}, qkw(0.1, 128));
  Node* relu = b.relu(b.call(OpId::kDequantizePerTensor, {codes}, qkw(0.1, 128)));
  Node* out = b.call(OpId::kDequantizePerTensor, {b.call(OpId::kQuantizePerTensor, {relu}, qkw(0.1, 128))}, qkw(0.1, 128));
  Node* other = b.call(OpId::kDequantizePerTensor, {codes}, qkw(0.2, 128), "other_scale");
  b.outputs({out, other});
  ExportedProgram lowered = p.clone();
  ASSERT_EQ(lower(lowered), 1u);
  auto bytes = lowered.lowered_modules()[0].processed_bytes->bytes();
  const fb::Graph& g = *fb::GetGraph(bytes.data());
  std::vector<fb::NodeKind> kinds;
  for (const fb::Node* n : *g.nodes()) kinds.push_back(n->kind());
  // 'other_scale' runs outside: the input's codes leave the delegate as uint8 for it.
  EXPECT_EQ(kinds, (std::vector<fb::NodeKind>{fb::NodeKind::Convert, fb::NodeKind::Clamp, fb::NodeKind::Convert}));
  EXPECT_EQ(g.outputs()->size(), 2u);
  EXPECT_EQ(reason(p, other), "it reads the codes of '" + codes->name() + "' with another scale or zero point");
  Tensor in = random_tensor({2, 6}, 8);
  ExportedProgram reference = p.clone();
  std::vector<Tensor> want = interpret(reference, std::span(&in, 1));
  std::vector<Tensor> got = run_program(lowered, std::span(&in, 1), 1);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(steps_apart(got[0], want[0], 0.1), 0.0);
  EXPECT_EQ(steps_apart(got[1], want[1], 0.2), 0.0);
}

std::string reason(const ExportedProgram& p, const Node* n) {
  SupportResult r = xnnpack_operator_support()->is_node_supported(p, *n);
  return r.supported ? "(supported)" : r.reason;
}

TEST(Xnnpack, WhatItDoesNotTakeSaysWhy) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", testing::f32({1, 4, 6, 6}));
  Node* c = b.call(OpId::kConvolution, {x, param(p, "w", {4, 4, 1, 1}, 1), nullptr}, {}, "conv");
  Node* sm = b.call(OpId::kSoftmax, {c}, {{"dim", int64_t{-1}}}, "softmax_w");
  Node* r = b.call(OpId::kReshape, {sm}, {{"shape", V{1, 24, 6}}}, "reorder");
  Node* ln = b.call(OpId::kLayerNorm, {r, nullptr, nullptr}, {{"normalized_shape", V{6}}}, "norm");
  Node* w = b.input("w", testing::f32({4, 4, 1, 1}));
  Node* c2 = b.call(OpId::kConvolution, {x, w, nullptr}, {}, "conv_input_weight");
  Node* ap = b.call(OpId::kAvgPool2d, {x}, {{"kernel_size", V{3, 3}}, {"padding", V{1, 1}}}, "avg_padded");
  Node* mp = b.call(OpId::kMaxPool2d, {x}, {{"kernel_size", V{2, 2}}, {"stride", V{2, 2}}, {"ceil_mode", true}}, "max_ceil");
  b.outputs({ln, c2, ap, mp});
  EXPECT_EQ(reason(p, c), "(supported)");
  EXPECT_EQ(reason(p, sm), "softmax over other than channels of a rank-4 tensor");
  EXPECT_EQ(reason(p, r), "a reshape to or from a rank-4 shape that would reorder the delegate's NHWC data");
  EXPECT_EQ(reason(p, ln), "op 'layer_norm' has no XNNPACK operator in this version");
  EXPECT_EQ(reason(p, c2), "its weight is not a constant");
  EXPECT_EQ(reason(p, ap), "average pooling with padding (XNNPACK excludes the padding from the count)");
  EXPECT_EQ(reason(p, mp), "(supported)");  // 6x6 by 2: ceil and floor agree

  Tensor in = random_tensor({1, 4, 6, 6}, 5);
  Tensor wt = random_tensor({4, 4, 1, 1}, 6);
  std::vector<Tensor> ins{in, wt};
  expect_matches_interpreter(p, ins, 2);
}

TEST(Xnnpack, DecoderLimitsSayWhy) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", testing::f32({1, 4, 6, 6}));
  Node* mean = b.input("mean", testing::f32({4}));
  Node* up = b.call(OpId::kConvTranspose2d, {x, param(p, "wt", {4, 4, 2, 2}, 2), nullptr},
                    {{"stride", V{2, 2}}, {"dilation", V{3, 3}}, {"output_padding", V{2, 0}}}, "up_padded");
  Node* bn = b.call(OpId::kBatchNorm, {x, nullptr, nullptr, mean, param(p, "var", {4}, 3)}, {}, "bn_input_mean");
  b.outputs({up, bn});
  EXPECT_EQ(reason(p, up), "an output_padding not below the stride (XNNPACK's adjustment)");
  EXPECT_EQ(reason(p, bn), "its statistics or affine parameters are not constants");
}

TEST(Xnnpack, OnlyPartitionsThatComputeAreWorthIt) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", testing::f32({1, 4, 6, 6}));
  Node* r = b.relu(x);
  Node* a = b.call(OpId::kAdd, {r, 1.0});
  Node* c = b.call(OpId::kConvolution, {a, param(p, "w", {4, 4, 1, 1}, 1), nullptr});
  b.outputs({c});
  std::vector<Node*> elementwise{r, a}, with_conv{r, a, c};
  EXPECT_EQ(xnnpack_partition_worth(p, elementwise),
            "its partition of 2 elementwise op(s) and reshape(s) would cost more to copy in and out of XNNPACK than "
            "to run in the portable kernels");
  EXPECT_EQ(xnnpack_partition_worth(p, with_conv), "");
}

TEST(Xnnpack, SymbolicShapesStayOnTheCpu) {
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec(DType::kF32, Shape{Dim::symbol("batch"), Dim(8)}));
  Node* r = b.relu(x);
  b.outputs({r});
  EXPECT_EQ(reason(p, r), "input 'x' has the symbolic shape f32[batch, 8] (XNNPACK graphs are static: bind it with --dim)");
  EXPECT_EQ(lower(p), 0u);
}

// ---- blobs -----------------------------------------------------------------------------------

std::vector<uint8_t> blob_of(ExportedProgram p) {
  lower(p);
  EXPECT_EQ(p.lowered_modules().size(), 1u);
  if (p.lowered_modules().empty()) return {};
  auto bytes = p.lowered_modules()[0].processed_bytes->bytes();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

std::string init_error(const std::vector<uint8_t>& blob) {
  auto d = XnnpackDelegate::init(blob, nullptr);
  return d.ok() ? std::string("(loaded)") : d.status().message();
}

// The test graphs' blobs are the fuzz target's seeds: the format changes only on purpose.
TEST(XnnpackBlob, TheTestGraphsBlobsAreTheFuzzSeeds) {
  for (auto [make, file] : {std::pair{&cnn, "cnn.xnn"}, std::pair{&every_operator, "ops.xnn"}, std::pair{&qdq_net, "qdq.xnn"}}) {
    std::vector<uint8_t> blob = blob_of(make());
    ASSERT_FALSE(blob.empty());
    EXPECT_EQ(init_error(blob), "(loaded)");
    testing::expect_golden(std::string(blob.begin(), blob.end()), std::string("../../fuzz/corpus/xnnpack/") + file);
  }
}

TEST(XnnpackBlob, MalformedBytesAreRefused) {
  std::vector<uint8_t> blob = blob_of(cnn());
  EXPECT_NE(init_error({}).find("not an XNNPACK graph"), std::string::npos);
  std::vector<uint8_t> cut(blob.begin(), blob.begin() + static_cast<long>(blob.size() / 2));
  EXPECT_NE(init_error(cut).find("malformed"), std::string::npos) << init_error(cut);
  std::vector<uint8_t> other = blob;
  std::memcpy(other.data() + 4, "NOPE", 4);
  EXPECT_NE(init_error(other).find("no 'KXNN' identifier"), std::string::npos);
}

// A hand-made graph: one value per entry of `dims` (static when `data` is set), one node.
struct Hand {
  std::vector<std::vector<uint64_t>> dims;
  std::vector<bool> is_static;
  std::vector<int> input_index, output_index;
  fb::NodeKind kind = fb::NodeKind::Clamp;
  std::vector<uint32_t> node_in{0}, node_out{1};
  std::vector<int64_t> ints;
  std::vector<float> floats{0.0f, 6.0f};
  uint32_t version = kBlobVersion;
  uint64_t data_offset = 0;
  // Quantized values: dtype, per-tensor scale and zero point, per-channel scales.
  std::vector<fb::DataType> dtypes;
  float scale = 0.5f;
  int zero_point = 0;
  std::vector<float> channel_scales;
  bool caller_uint8 = false;

  std::vector<uint8_t> build() const {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<fb::Value>> values;
    std::vector<uint32_t> ins, outs;
    size_t bytes = 0;
    for (size_t i = 0; i < dims.size(); ++i) {
      uint64_t n = 1;
      for (uint64_t d : dims[i]) n *= d;
      auto dv = fbb.CreateVector(dims[i]);
      const fb::DataType dtype = i < dtypes.size() ? dtypes[i] : fb::DataType::Fp32;
      const uint64_t esize = dtype == fb::DataType::QInt8 || dtype == fb::DataType::QCInt8 ? 1 : 4;
      flatbuffers::Offset<flatbuffers::Vector<float>> cs;
      if (!channel_scales.empty() && (dtype == fb::DataType::QCInt8 || dtype == fb::DataType::QCInt32)) cs = fbb.CreateVector(channel_scales);
      fb::ValueBuilder vb(fbb);
      vb.add_dtype(dtype);
      vb.add_dims(dv);
      if (dtype != fb::DataType::Fp32) {
        vb.add_scale(scale);
        vb.add_zero_point(zero_point);
        if (!cs.IsNull()) vb.add_channel_scales(cs);
        vb.add_caller_uint8(caller_uint8);
      }
      if (is_static[i]) {
        vb.add_data_offset(data_offset + bytes);
        vb.add_data_size(n * esize);
        bytes += (n * esize + 3) / 4 * 4;
      }
      vb.add_input_index(input_index[i]);
      vb.add_output_index(output_index[i]);
      values.push_back(vb.Finish());
      if (input_index[i] >= 0) ins.push_back(uint32_t(i));
      if (output_index[i] >= 0) outs.push_back(uint32_t(i));
    }
    std::vector<uint8_t> data(std::min<size_t>(bytes, 1 << 20), 0);
    auto node = fb::CreateNode(fbb, kind, fbb.CreateVector(node_in), fbb.CreateVector(node_out), fbb.CreateVector(ints),
                               fbb.CreateVector(floats), fbb.CreateString("hand"));
    std::vector<flatbuffers::Offset<fb::Node>> nodes{node};
    auto g = fb::CreateGraph(fbb, version, fbb.CreateVector(values), fbb.CreateVector(nodes), fbb.CreateVector(ins),
                             fbb.CreateVector(outs), fbb.CreateVector(data));
    fbb.Finish(g, "KXNN");
    return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }
};

Hand clamp_graph() {
  Hand h;
  h.dims = {{1, 8}, {1, 8}};
  h.is_static = {false, false};
  h.input_index = {0, -1};
  h.output_index = {-1, 0};
  return h;
}

TEST(XnnpackBlob, QuantizedValuesAreChecked) {
  Hand h = clamp_graph();
  h.dtypes = {fb::DataType::QInt8, fb::DataType::QInt8};
  h.caller_uint8 = true;
  EXPECT_EQ(init_error(h.build()), "(loaded)");
  h.scale = 0;
  EXPECT_NE(init_error(h.build()).find("value #0: int8 quantization scale 0 and zero point 0"), std::string::npos);
  h.scale = 0.5f;
  h.zero_point = 300;
  EXPECT_NE(init_error(h.build()).find("expected a positive scale and -128..127"), std::string::npos);
  h.zero_point = 0;
  h.dtypes = {fb::DataType::Fp32, fb::DataType::QInt8};
  h.caller_uint8 = false;
  EXPECT_NE(init_error(h.build()).find("node #0 'hand': an fp32 operator with a quantized output"), std::string::npos);
  h.dtypes = {fb::DataType::QCInt8, fb::DataType::QInt8};
  EXPECT_NE(init_error(h.build()).find("value #0: per-channel scales are not one per element of the channel dim"), std::string::npos);
  h.channel_scales = {1, 1, 1, 1, 1, 1, 1, 1};
  h.dims = {{8, 1}, {1, 8}};
  EXPECT_NE(init_error(h.build()).find("value #0: per-channel quantized values must be static"), std::string::npos);
  h.channel_scales = {1.0f};
  EXPECT_NE(init_error(h.build()).find("value #0: per-channel scales are not one per element of the channel dim"), std::string::npos);
  h.dtypes = {fb::DataType::QInt32, fb::DataType::QInt8};
  EXPECT_NE(init_error(h.build()).find("dtype 5 is not one this build runs"), std::string::npos);
  // A quantized clamp must keep its codes' parameters: both values share them here, so a
  // convert between unlike types is what fails.
  h = clamp_graph();
  h.kind = fb::NodeKind::Convert;
  h.floats = {};
  h.dtypes = {fb::DataType::QInt8, fb::DataType::QInt8};
  EXPECT_NE(init_error(h.build()).find("a convert is between fp32 and qint8"), std::string::npos);
}

TEST(XnnpackBlob, AHandMadeGraphRuns) {
  Hand h = clamp_graph();
  auto d = XnnpackDelegate::init(h.build(), nullptr);
  ASSERT_TRUE(d.ok()) << d.status().message();
  Tensor x = random_tensor({1, 8}, 3, 10.0f);
  portable::SimpleKernelContext ctx;
  std::vector<Tensor> out;
  ASSERT_TRUE(d->execute(std::span(&x, 1), ctx, &out).ok());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[0].data_as<float>()[i], std::clamp(x.data_as<float>()[i], 0.0f, 6.0f));
  Tensor wrong = random_tensor({1, 9}, 3);
  EXPECT_NE(d->execute(std::span(&wrong, 1), ctx, &out).message().find("input 0 is f32 [1, 9], expected f32 [1, 8]"),
            std::string::npos);
}

TEST(XnnpackBlob, DeclaredShapesMustBeWhatTheNodeComputes) {
  // An output declared smaller than the node writes would be overrun by XNNPACK.
  Hand h = clamp_graph();
  h.dims[1] = {1, 4};
  EXPECT_NE(init_error(h.build()).find("declared [1, 4], but clamp computes [1, 8]"), std::string::npos)
      << init_error(h.build());
  // A convolution whose filter does not fit its parameters.
  Hand c;
  c.dims = {{1, 5, 5, 2}, {3, 3, 3, 2}, {1, 5, 5, 3}};
  c.is_static = {false, true, false};
  c.input_index = {0, -1, -1};
  c.output_index = {-1, -1, 0};
  c.kind = fb::NodeKind::Convolution2d;
  c.node_in = {0, 1, 0xFFFFFFFFu};
  c.node_out = {2};
  c.ints = {1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 2, 3};
  c.floats = {-INFINITY, INFINITY};
  EXPECT_EQ(init_error(c.build()), "(loaded)");
  c.ints[4] = 5;  // a 5x5 kernel over a 3x3 filter
  EXPECT_NE(init_error(c.build()).find("the filter's shape does not match"), std::string::npos) << init_error(c.build());
  c.ints[4] = 3;
  c.is_static[1] = false;  // weights given at run time
  EXPECT_NE(init_error(c.build()).find("read before it is written"), std::string::npos) << init_error(c.build());
}

TEST(XnnpackBlob, SizesAndRangesAreCheckedBeforeUse) {
  Hand h = clamp_graph();
  h.dims = {{1, uint64_t{1} << 41}, {1, uint64_t{1} << 41}};
  EXPECT_NE(init_error(h.build()).find("value #0: dim 2199023255552"), std::string::npos) << init_error(h.build());
  h = clamp_graph();
  h.dims = {{1u << 20, 1u << 20}, {1u << 20, 1u << 20}};
  EXPECT_NE(init_error(h.build()).find("value #0"), std::string::npos) << init_error(h.build());
  h = clamp_graph();
  h.node_in = {7};
  EXPECT_NE(init_error(h.build()).find("input 0 names value 7 of 2"), std::string::npos) << init_error(h.build());
  h = clamp_graph();
  h.node_out = {0};
  EXPECT_NE(init_error(h.build()).find("already written"), std::string::npos) << init_error(h.build());
  h = clamp_graph();
  h.floats = {6.0f, 0.0f};
  EXPECT_NE(init_error(h.build()).find("output range is empty"), std::string::npos);
  h = clamp_graph();
  h.ints = {3};
  EXPECT_NE(init_error(h.build()).find("clamp takes 0 integer and 2 float parameters, got 1 and 2"), std::string::npos);
  h = clamp_graph();
  h.version = kBlobVersion + 1;
  EXPECT_NE(init_error(h.build()).find("blob version 2"), std::string::npos);
  h = clamp_graph();
  h.kind = static_cast<fb::NodeKind>(200);
  EXPECT_NE(init_error(h.build()).find("unknown node kind 200"), std::string::npos) << init_error(h.build());
  // Static data outside the blob's data.
  Hand s;
  s.dims = {{1, 4}, {4}, {1, 4}};
  s.is_static = {false, true, false};
  s.input_index = {0, -1, -1};
  s.output_index = {-1, -1, 0};
  s.kind = fb::NodeKind::Add;
  s.node_in = {0, 1};
  s.node_out = {2};
  s.floats = {-INFINITY, INFINITY};
  EXPECT_EQ(init_error(s.build()), "(loaded)");
  s.data_offset = 1 << 20;
  EXPECT_NE(init_error(s.build()).find("outside the blob's 16 data bytes"), std::string::npos) << init_error(s.build());
}

}  // namespace
}  // namespace kiln::xnnpack
