// Helpers of the HTP backend tests: small models, quantizing them, lowering to the HTP and
// running the program file on the runtime.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kiln/backends/htp/htp_backend.h"
#include "kiln/backends/htp/htp_runtime.h"
#include "kiln/backends/portable/interpreter.h"
#include "kiln/core/memory.h"
#include "kiln/lower/to_backend.h"
#include "kiln/partition/capability_partitioner.h"
#include "kiln/quant/quantizer.h"
#include "kiln/runtime/program.h"
#include "kiln/serialize/program_writer.h"
#include "testing/graph_builder.h"

namespace kiln::htp::test_util {

inline Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed, float scale = 1.0f) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_data_as<float>()[i] = d(rng);
  return t;
}

// conv-relu -> maxpool -> conv + residual -> relu -> global mean -> linear.
inline void build_cnn(ExportedProgram& p) {
  testing::GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kF32, {1, 3, 16, 16}));
  Node* w1 = p.add_parameter("w1", "w1", random_tensor({8, 3, 3, 3}, 1, 0.3f));
  Node* b1 = p.add_parameter("b1", "b1", random_tensor({8}, 2, 0.1f));
  Node* c1 = b.call(OpId::kConvolution, {x, w1, b1}, {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1}}});
  Node* r1 = b.relu(c1);
  Node* mp = b.call(OpId::kMaxPool2d, {r1}, {{"kernel_size", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}}});
  Node* w2 = p.add_parameter("w2", "w2", random_tensor({8, 1, 3, 3}, 3, 0.3f));
  Node* c2 = b.call(OpId::kConvolution, {mp, w2, nullptr},
                    {{"padding", std::vector<int64_t>{1, 1}}, {"groups", int64_t{8}}});
  Node* sum = b.add(c2, mp);
  Node* r2 = b.relu(sum);
  Node* gap = b.call(OpId::kMean, {r2}, {{"dim", std::vector<int64_t>{2, 3}}, {"keepdim", false}});
  Node* fw = p.add_parameter("fw", "fw", random_tensor({5, 8}, 4, 0.3f));
  Node* fc = b.linear(gap, fw);
  b.outputs({fc});
}

// q/k/v projections, softmax(q k^T / 4) v, layer norm: the transformer's ops.
inline void build_attention(ExportedProgram& p) {
  testing::GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kF32, {1, 6, 16}));
  Node* wq = p.add_parameter("wq", "wq", random_tensor({16, 16}, 5, 0.25f));
  Node* wk = p.add_parameter("wk", "wk", random_tensor({16, 16}, 6, 0.25f));
  Node* wv = p.add_parameter("wv", "wv", random_tensor({16, 16}, 7, 0.25f));
  Node* q = b.linear(x, wq);
  Node* k = b.linear(x, wk);
  Node* v = b.linear(x, wv);
  Node* kt = b.call(OpId::kTranspose, {k}, {{"dim0", int64_t{1}}, {"dim1", int64_t{2}}});
  Node* s = b.call(OpId::kMatmul, {q, kt});
  Node* sc = b.call(OpId::kDiv, {s, 4.0});
  Node* a = b.call(OpId::kSoftmax, {sc}, {{"dim", int64_t{-1}}});
  Node* o = b.call(OpId::kMatmul, {a, v});
  Node* res = b.add(o, x);
  Node* ln = b.call(OpId::kLayerNorm, {res, nullptr, nullptr}, {{"normalized_shape", std::vector<int64_t>{16}}});
  b.outputs({ln});
}

// The seed's docstring graph: conv2d_1(input_1) + conv2d_2(input_2) -> add_1.
inline ExportedProgram two_convs() {
  ExportedProgram p;
  testing::GraphBuilder b(p);
  Node* x1 = b.input("input_1", TensorSpec::of(DType::kF32, {1, 3, 8, 8}));
  Node* x2 = b.input("input_2", TensorSpec::of(DType::kF32, {1, 3, 8, 8}));
  Node* w1 = p.add_parameter("weight_1", "weight_1", random_tensor({4, 3, 3, 3}, 11, 0.3f));
  Node* b1 = p.add_parameter("bias_1", "bias_1", random_tensor({4}, 12, 0.1f));
  Node* w2 = p.add_parameter("weight_2", "weight_2", random_tensor({4, 3, 3, 3}, 13, 0.3f));
  Node* b2 = p.add_parameter("bias_2", "bias_2", random_tensor({4}, 14, 0.1f));
  const Kwargs pad = {{"padding", std::vector<int64_t>{1, 1}}};
  Node* c1 = b.call(OpId::kConvolution, {x1, w1, b1}, pad, "conv2d_1");
  Node* c2 = b.call(OpId::kConvolution, {x2, w2, b2}, pad, "conv2d_2");
  Node* sum = b.call(OpId::kAdd, {c1, c2}, {}, "add_1");
  b.outputs({sum});
  return p;
}

inline std::vector<quant::Sample> two_input_samples(int n) {
  std::vector<quant::Sample> out;
  for (int i = 0; i < n; ++i) {
    quant::Sample s;
    s.source = "random";
    s.inputs["input_1"] = random_tensor({1, 3, 8, 8}, 200 + i);
    s.inputs["input_2"] = random_tensor({1, 3, 8, 8}, 300 + i);
    out.push_back(std::move(s));
  }
  return out;
}

inline std::vector<quant::Sample> samples_for(const std::string& input, std::vector<int64_t> shape, int n) {
  std::vector<quant::Sample> out;
  for (int i = 0; i < n; ++i) {
    quant::Sample s;
    s.source = "random";
    s.inputs[input] = random_tensor(shape, 100 + i);
    out.push_back(std::move(s));
  }
  return out;
}

inline ExportedProgram quantized(const ExportedProgram& p, const std::vector<quant::Sample>& samples) {
  quant::QuantizeOptions options;
  options.config = *quant::make_config("8a8w", false, quant::ObserverKind::kMinMax, false);
  auto prepared = quant::prepare(p, options);
  EXPECT_TRUE(prepared.ok()) << prepared.status().message();
  EXPECT_TRUE(quant::calibrate(**prepared, samples, 1).ok());
  auto q = quant::convert(**prepared);
  EXPECT_TRUE(q.ok()) << q.status().message();
  return std::move(q).value();
}

inline std::vector<CompileSpec> specs(bool fp16, bool online = false, QcomChipset soc = QcomChipset::SM8650,
                               bool fold_relu = true, bool conv_hmx = true, bool dlbc = false) {
  CompilerSpecArgs args;
  args.online_prepare = online;
  BackendOptions backend = generate_htp_compiler_spec(fp16, dlbc);
  backend.htp_options.use_fold_relu = fold_relu;
  backend.htp_options.use_conv_hmx = conv_hmx;
  auto s = generate_qnn_executorch_compiler_spec(soc, backend, args);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return to_compile_specs<CompileSpec>(*s);
}

// Runs `method` of a program file image in memory on the runtime (HTP backend registered).
inline std::vector<Tensor> run_image(const ProgramImage& image, const std::string& method, std::span<const Tensor> in) {
  auto storage = std::make_shared<HeapStorage>(image.size);
  size_t at = 0;
  for (std::string_view c : image.chunks) {
    std::memcpy(storage->mutable_data() + at, c.data(), c.size());
    at += c.size();
  }
  auto program = runtime::Program::load_buffer(std::span<const uint8_t>(storage->mutable_data(), image.size), storage);
  EXPECT_TRUE(program.ok()) << program.status().message();
  if (!program.ok()) return {};
  runtime::BackendRegistry backends;
  EXPECT_TRUE(backends.add(make_htp_runtime_backend()).ok());
  auto m = (*program)->load_method(method, backends, {});
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return {};
  auto out = (*m)->execute(in);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::vector<Tensor>{};
}

// Writes `p` (lowered) as a program file in memory and runs method "forward" on the runtime.
inline std::vector<Tensor> run_program(ExportedProgram& p, std::span<const Tensor> in) {
  MethodToSerialize m{"forward", &p};
  auto image = serialize_program(std::span(&m, 1));
  EXPECT_TRUE(image.ok()) << image.status().message();
  return image.ok() ? run_image(*image, "forward", in) : std::vector<Tensor>{};
}

// Lowers `p` to the HTP (everything it takes), writes a program file in memory and runs it.
inline std::vector<Tensor> run_on_htp(ExportedProgram p, const std::vector<CompileSpec>& sp, std::span<const Tensor> in,
                               size_t* partitions = nullptr) {
  BackendRegistry registry;
  EXPECT_TRUE(register_htp_backend(registry).ok());
  auto options = options_from_specs(sp);
  EXPECT_TRUE(options.ok());
  CapabilityOptions copts;
  copts.quantized_clusters = false;
  CapabilityPartitioner partitioner("htp", sp, htp_operator_support(*options), copts);
  auto rep = to_backend(p, partitioner, registry);
  EXPECT_TRUE(rep.ok()) << rep.status().message();
  if (!rep.ok()) return {};
  if (partitions) *partitions = rep->partitions;
  return run_program(p, in);
}

inline std::vector<Tensor> interpret(ExportedProgram& p, std::span<const Tensor> in) {
  auto interp = portable::Interpreter::create(p);
  EXPECT_TRUE(interp.ok());
  auto r = (*interp)->run(in);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->outputs : std::vector<Tensor>{};
}

}  // namespace kiln::htp::test_util
