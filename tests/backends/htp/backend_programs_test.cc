// HTP programs (issue: context binaries in and out): from_context_binary.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "backend_test_util.h"
#include "kiln/backends/htp/programs.h"

namespace kiln::htp {
namespace {

using namespace test_util;

// The context binary preprocess makes of `p` (all of it delegated).
std::vector<uint8_t> context_of(const ExportedProgram& p, const std::vector<CompileSpec>& sp) {
  auto blob = HtpBackend().preprocess(p, sp);
  EXPECT_TRUE(blob.ok()) << blob.status().message();
  return blob.ok() ? blob->processed_bytes : std::vector<uint8_t>{};
}

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape());
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].nbytes()), 0) << "output " << i;
  }
}

TEST(HtpFromContextBinary, RunsLikeTheCompiledProgram) {
  ExportedProgram p;
  build_cnn(p);
  auto samples = samples_for("x", {1, 3, 16, 16}, 4);
  ExportedProgram q = quantized(p, samples);
  std::vector<Tensor> in = {samples[0].inputs["x"]};
  std::vector<Tensor> compiled = run_on_htp(q.clone(), specs(false), in);

  // The partition's context binary: compile -> context binary -> from_context_binary -> run.
  std::vector<uint8_t> ctx = context_of(q, specs(false));
  auto cp = from_context_binary(ctx, "my_loader");
  ASSERT_TRUE(cp.ok()) << cp.status().message();
  EXPECT_EQ(cp->graph_name, "forward");
  ASSERT_EQ(cp->inputs.size(), 1u);
  EXPECT_EQ(cp->inputs[0].name, "x");
  EXPECT_EQ(cp->inputs[0].dims, (std::vector<uint32_t>{1, 3, 16, 16}));
  ASSERT_EQ(cp->outputs.size(), 1u);
  // The program: one delegate whose blob is the binary, byte for byte.
  ASSERT_EQ(cp->program.lowered_modules().size(), 1u);
  const LoweredModule& lm = cp->program.lowered_modules()[0];
  EXPECT_EQ(lm.backend_id, "htp");
  ASSERT_EQ(lm.processed_bytes->size(), ctx.size());
  EXPECT_EQ(std::memcmp(lm.processed_bytes->data(), ctx.data(), ctx.size()), 0);
  auto options = options_from_specs(lm.compile_specs);
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->is_from_context_binary);
  EXPECT_EQ(options->graph_name, "forward");
  // Before lowering the program was the loader op named as asked, with the binary as a constant.
  const ExportedProgram& original = *lm.original_module;
  size_t loaders = 0;
  for (const Node* n : original.graph().nodes()) {
    if (n->is_call(OpId::kContextLoader)) {
      ++loaders;
      EXPECT_EQ(n->name(), "my_loader");
    }
  }
  EXPECT_EQ(loaders, 1u);
  EXPECT_TRUE(cp->program.constants().entries().empty()) << "the binary is stored once, as the blob";
  expect_same(run_program(cp->program, in), compiled);
}

TEST(HtpFromContextBinary, Fp16AndAFile) {
  ExportedProgram p;
  build_attention(p);
  std::vector<uint8_t> ctx = context_of(p, specs(true));
  auto path = std::filesystem::temp_directory_path() / "kiln_from_context_fp16.bin";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(ctx.data()),
                                               static_cast<std::streamsize>(ctx.size()));
  auto cp = from_context_binary(path, "loader");
  std::filesystem::remove(path);
  ASSERT_TRUE(cp.ok()) << cp.status().message();
  auto options = options_from_specs(cp->program.lowered_modules()[0].compile_specs);
  EXPECT_EQ(options->backend_options.htp_options.precision, HtpPrecision::kFp16);
  std::vector<Tensor> in = {random_tensor({1, 6, 16}, 3)};
  expect_same(run_program(cp->program, in), run_on_htp(p.clone(), specs(true), in));
}

TEST(HtpFromContextBinary, CustomInfoGivesTheIo) {
  ExportedProgram p;
  build_attention(p);
  std::vector<uint8_t> ctx = context_of(p, specs(true));
  auto parsed = parse_context(ctx);
  ASSERT_TRUE(parsed.ok());
  const QnnGraph& g = parsed->graphs[0];
  CustomInfo info;
  info.graph_name = g.name;
  for (uint32_t id : g.inputs) info.graph_inputs.push_back({"tokens", g.tensors[id].data_type, g.tensors[id].dims});
  for (uint32_t id : g.outputs) info.graph_outputs.push_back({"hidden", g.tensors[id].data_type, g.tensors[id].dims});
  auto cp = from_context_binary(ctx, "loader", QcomChipset::SM8650, &info);
  ASSERT_TRUE(cp.ok()) << cp.status().message();
  EXPECT_EQ(cp->program.signature().outputs[0].name, "hidden");
  EXPECT_EQ(cp->program.input_spec(cp->program.user_inputs()[0])->name, "tokens");
  std::vector<Tensor> in = {random_tensor({1, 6, 16}, 4)};
  expect_same(run_program(cp->program, in), run_on_htp(p.clone(), specs(true), in));
}

TEST(HtpFromContextBinary, ErrorsAreNamed) {
  ExportedProgram p;
  build_attention(p);
  std::vector<uint8_t> ctx = context_of(p, specs(true));
  auto message = [](const Result<ContextProgram>& r) { return r.ok() ? std::string("(ok)") : r.status().message(); };

  CustomInfo info;
  info.graph_name = "forward";
  info.graph_inputs.push_back({"x", static_cast<QnnDataType>(99), {1, 6, 16}});
  info.graph_outputs.push_back({"y", QnnDataType::kFloat32, {1, 6, 16}});
  EXPECT_NE(message(from_context_binary(ctx, "loader", QcomChipset::SM8650, &info)).find("unknown QNN data type 99"),
            std::string::npos);
  EXPECT_NE(message(from_context_binary(ctx, "loader", QcomChipset::SM8550)).find("built for SoC SM8650, not SM8550"),
            std::string::npos);
  EXPECT_NE(message(from_context_binary(ctx, "")).find("op name is empty"), std::string::npos);
  EXPECT_NE(message(from_context_binary(ctx, "a.b")).find("not an identifier"), std::string::npos);
  std::vector<uint8_t> junk(ctx.begin(), ctx.begin() + 100);
  EXPECT_NE(message(from_context_binary(junk, "loader")).find("context binary"), std::string::npos);
  EXPECT_NE(message(from_context_binary(std::filesystem::path("/nonexistent/ctx.bin"), "loader")).find("/nonexistent/ctx.bin"),
            std::string::npos);
  // With custom_info the binary is not opened here; a graph the binary lacks fails at lowering.
  info.graph_inputs[0].data_type = QnnDataType::kFloat32;
  info.graph_name = "decode";
  EXPECT_NE(message(from_context_binary(ctx, "loader", QcomChipset::SM8650, &info)).find("no graph 'decode'"),
            std::string::npos);
}

// A decoder step over a KV cache kept as I/O (as static LLM exports do): x [1, S, 16] and the
// cache k, v [1, 8, 16] in; out = softmax(q [k_cache; k]^T / 4) [v_cache; v] + x, and the new
// k, v rows for the caller to append. The same weights (seeded) for every S.
void build_decoder(ExportedProgram& p, int64_t seq) {
  testing::GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kF32, {1, seq, 16}));
  Node* kc = b.input("k_cache", TensorSpec::of(DType::kF32, {1, 8, 16}));
  Node* vc = b.input("v_cache", TensorSpec::of(DType::kF32, {1, 8, 16}));
  Node* wq = p.add_parameter("wq", "wq", random_tensor({16, 16}, 5, 0.25f));
  Node* wk = p.add_parameter("wk", "wk", random_tensor({16, 16}, 6, 0.25f));
  Node* wv = p.add_parameter("wv", "wv", random_tensor({16, 16}, 7, 0.25f));
  Node* wo = p.add_parameter("wo", "wo", random_tensor({64, 16}, 8, 0.25f));
  Node* q = b.linear(x, wq);
  Node* k = b.linear(x, wk);
  Node* v = b.linear(x, wv);
  Node* keys = b.call(OpId::kCat, {Arg(std::vector<Node*>{kc, k})}, {{"dim", int64_t{1}}});
  Node* values = b.call(OpId::kCat, {Arg(std::vector<Node*>{vc, v})}, {{"dim", int64_t{1}}});
  Node* kt = b.call(OpId::kTranspose, {keys}, {{"dim0", int64_t{1}}, {"dim1", int64_t{2}}});
  Node* scores = b.call(OpId::kDiv, {b.call(OpId::kMatmul, {q, kt}), 4.0});
  Node* a = b.call(OpId::kSoftmax, {scores}, {{"dim", int64_t{-1}}});
  Node* o = b.call(OpId::kMatmul, {a, values});
  Node* up = b.call(OpId::kRelu, {b.linear(o, wo)});
  Node* down = b.call(OpId::kMatmul, {up, p.add_parameter("wd", "wd", random_tensor({64, 16}, 9, 0.25f))});
  b.outputs({b.add(down, x), k, v});
}

// The online-prepare blob of `p` compiled as graph `name` (fp16).
std::vector<uint8_t> online_blob(const ExportedProgram& p, const std::string& name) {
  CompilerSpecArgs args;
  args.online_prepare = true;
  args.graph_name = name;
  auto s = generate_qnn_executorch_compiler_spec(QcomChipset::SM8650, generate_htp_compiler_spec(true), args);
  EXPECT_TRUE(s.ok());
  return context_of(p, to_compile_specs<CompileSpec>(*s));
}

std::vector<CompileSpec> multi_graph_specs(bool fp16 = true) {
  CompilerSpecArgs args;
  args.multiple_graphs = true;
  auto s = generate_qnn_executorch_compiler_spec(QcomChipset::SM8650, generate_htp_compiler_spec(fp16), args);
  EXPECT_TRUE(s.ok());
  return to_compile_specs<CompileSpec>(*s);
}

TEST(HtpMultiGraph, PrefillAndDecodeShareOneContextAndItsWeights) {
  ExportedProgram prefill, decode;
  build_decoder(prefill, 32);
  build_decoder(decode, 1);
  std::vector<std::vector<uint8_t>> blobs = {online_blob(prefill, "prefill"), online_blob(decode, "decode")};
  auto mg = generate_multi_graph_program(multi_graph_specs(), blobs);
  ASSERT_TRUE(mg.ok()) << mg.status().message();
  ASSERT_EQ(mg->graphs.size(), 2u);
  EXPECT_EQ(mg->graphs[0].graph_name, "prefill");
  EXPECT_EQ(mg->graphs[1].graph_name, "decode");
  // Every weight once: the context holds half of the two blobs' static data.
  EXPECT_EQ(mg->static_bytes * 2, mg->static_bytes_inputs);
  const uint64_t weights = (16 * 16 * 3 + 64 * 16 * 2) * 2;  // fp16
  EXPECT_GE(mg->static_bytes, weights);
  auto parsed = parse_context(mg->context);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_TRUE(parsed->prepared);
  ASSERT_EQ(parsed->graphs.size(), 2u);

  // One file, two methods, one blob segment: the file is about one context, not two.
  std::vector<MethodToSerialize> methods = {{"prefill", &mg->graphs[0].program}, {"decode", &mg->graphs[1].program}};
  auto image = serialize_program(methods);
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_LT(image->size, mg->context.size() + 16384);
  for (const ContextProgram& cp : mg->graphs) {
    const LoweredModule& lm = cp.program.lowered_modules()[0];
    EXPECT_EQ(options_from_specs(lm.compile_specs)->graph_name, cp.graph_name);
    EXPECT_NE(lm.original_module, nullptr);
  }

  // Both run, on the same file, and match the float model: prefill fills the cache, decode
  // reads it.
  std::vector<Tensor> pin = {random_tensor({1, 32, 16}, 21), random_tensor({1, 8, 16}, 22), random_tensor({1, 8, 16}, 23)};
  std::vector<Tensor> din = {random_tensor({1, 1, 16}, 24), pin[1], pin[2]};
  for (auto [program, in, method] : {std::tuple{&prefill, pin, "prefill"}, std::tuple{&decode, din, "decode"}}) {
    std::vector<Tensor> want = interpret(*program, in);
    std::vector<Tensor> got = run_image(*image, method, in);
    ASSERT_EQ(got.size(), want.size()) << method;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].shape(), want[i].shape());
      double worst = 0, scale = 0;
      for (int64_t j = 0; j < got[i].numel(); ++j) {
        worst = std::max(worst, std::abs(double(got[i].data_as<float>()[j]) - want[i].data_as<float>()[j]));
        scale = std::max(scale, std::abs(double(want[i].data_as<float>()[j])));
      }
      EXPECT_LE(worst, 4e-3 * std::max(scale, 1.0)) << method << " output " << i;  // fp16
    }
  }
}

// The programs take their inputs in the order given (a model's signature), whatever the graph's.
TEST(HtpMultiGraph, InputOrderIsTheOneGiven) {
  ExportedProgram prefill, decode;
  build_decoder(prefill, 32);
  build_decoder(decode, 1);
  std::vector<std::vector<uint8_t>> blobs = {online_blob(prefill, "prefill"), online_blob(decode, "decode")};
  std::vector<std::vector<std::string>> orders = {{"v_cache", "x", "k_cache"}, {"x", "k_cache", "v_cache"}};
  auto mg = generate_multi_graph_program(multi_graph_specs(), blobs, orders);
  ASSERT_TRUE(mg.ok()) << mg.status().message();
  for (size_t g = 0; g < 2; ++g) {
    std::vector<std::string> names;
    for (Node* p : mg->graphs[g].program.user_inputs()) names.push_back(mg->graphs[g].program.input_spec(p)->name);
    EXPECT_EQ(names, orders[g]);
  }
  std::vector<Tensor> in = {random_tensor({1, 32, 16}, 31), random_tensor({1, 8, 16}, 32), random_tensor({1, 8, 16}, 33)};
  std::vector<Tensor> permuted = {in[2], in[0], in[1]};
  expect_same(run_program(mg->graphs[0].program, permuted), run_on_htp(prefill.clone(), specs(true), in));

  std::vector<std::vector<std::string>> wrong = {{"x", "k_cache"}, orders[1]};
  auto bad = generate_multi_graph_program(multi_graph_specs(), blobs, wrong);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not name graph 'prefill''s inputs"), std::string::npos) << bad.status().message();
}

TEST(HtpMultiGraph, ErrorsAreNamed) {
  ExportedProgram prefill, decode;
  build_decoder(prefill, 32);
  build_decoder(decode, 1);
  auto message = [](const Result<MultiGraphProgram>& r) { return r.ok() ? std::string("(ok)") : r.status().message(); };
  std::vector<std::vector<uint8_t>> same = {online_blob(prefill, "step"), online_blob(decode, "step")};
  EXPECT_NE(message(generate_multi_graph_program(multi_graph_specs(), same)).find("graph 'step' is in processed bytes 0 and 1"),
            std::string::npos);
  std::vector<std::vector<uint8_t>> two = {online_blob(prefill, "prefill"), online_blob(decode, "decode")};
  EXPECT_NE(message(generate_multi_graph_program(specs(true), two)).find("multiple_graphs"), std::string::npos);
  std::vector<std::vector<uint8_t>> junk = {two[0], std::vector<uint8_t>(two[1].begin(), two[1].begin() + 64)};
  EXPECT_NE(message(generate_multi_graph_program(multi_graph_specs(), junk)).find("processed bytes 1"), std::string::npos);
  std::vector<std::vector<uint8_t>> none;
  EXPECT_NE(message(generate_multi_graph_program(multi_graph_specs(), none)).find("no processed bytes"), std::string::npos);
  CompilerSpecArgs args;
  args.multiple_graphs = true;
  auto sm8550 = generate_qnn_executorch_compiler_spec(QcomChipset::SM8550, generate_htp_compiler_spec(true), args);
  EXPECT_NE(message(generate_multi_graph_program(to_compile_specs<CompileSpec>(*sm8550), two)).find("built for SoC SM8650"),
            std::string::npos);
}

// relu(x) and sigmoid(x), both alive for the add: working memory 2 * |x| (f32 inside).
void build_wide(ExportedProgram& p, int64_t rows) {
  testing::GraphBuilder b(p);
  Node* x = b.input("x", TensorSpec::of(DType::kF32, {1, rows, 1024}));
  b.outputs({b.add(b.call(OpId::kRelu, {x}), b.call(OpId::kSigmoid, {x}))});
}

// Lowered to the HTP of SXR1230P (2 MB of VTCM), fp16, with or without multi contexts.
ExportedProgram lowered_wide(int64_t rows, bool multi_contexts) {
  ExportedProgram p;
  build_wide(p, rows);
  auto s = generate_qnn_executorch_compiler_spec(QcomChipset::SXR1230P,
                                                 generate_htp_compiler_spec(true, false, multi_contexts));
  EXPECT_TRUE(s.ok()) << s.status().message();
  auto sp = to_compile_specs<CompileSpec>(*s);
  BackendRegistry registry;
  EXPECT_TRUE(register_htp_backend(registry).ok());
  CapabilityPartitioner partitioner("htp", sp, htp_operator_support(*options_from_specs(sp)));
  auto rep = to_backend(p, partitioner, registry);
  EXPECT_TRUE(rep.ok()) << rep.status().message();
  return p;
}

// ExecuTorch's update_spill_fill_size: the largest spill-fill size of the multi-context
// delegates, in every one's spec; the runtime then allocates one spill-fill buffer, so memory
// grows with the largest context, not with the sum.
TEST(HtpSpillFill, OneBufferSizedByTheLargestContext) {
  const int64_t rows[] = {512, 1024, 1536};  // 2, 4 and 6 MiB per tensor
  std::vector<ExportedProgram> shared, separate;
  for (int64_t r : rows) {
    shared.push_back(lowered_wide(r, true));
    separate.push_back(lowered_wide(r, false));
  }
  std::vector<ExportedProgram*> programs;
  for (ExportedProgram& p : shared) programs.push_back(&p);
  auto size = update_spill_fill_size(programs);
  ASSERT_TRUE(size.ok()) << size.status().message();
  // The largest: two 6 MiB tensors alive together, less the 2 MiB of VTCM the planner keeps.
  uint64_t largest = 0;
  for (ExportedProgram& p : shared) {
    auto c = parse_context(p.lowered_modules()[0].processed_bytes->bytes());
    ASSERT_TRUE(c.ok());
    largest = std::max(largest, c->graphs[0].spill_fill_bytes);
    EXPECT_EQ(options_from_specs(p.lowered_modules()[0].compile_specs)->backend_options.htp_options.max_sf_buf_size,
              *size);
  }
  EXPECT_EQ(*size, largest);
  EXPECT_GE(largest, uint64_t{10} << 20);
  // Programs without multi contexts are left alone.
  std::vector<ExportedProgram*> others = {&separate[0]};
  EXPECT_EQ(*update_spill_fill_size(others), 0u);

  auto executors = [](std::vector<ExportedProgram>& ps) {
    std::vector<std::unique_ptr<HtpExecutor>> out;
    for (ExportedProgram& p : ps) {
      const LoweredModule& lm = p.lowered_modules()[0];
      auto c = parse_context(lm.processed_bytes->bytes());
      EXPECT_TRUE(c.ok());
      auto ex = HtpExecutor::create(std::make_shared<const Context>(std::move(*c)), "forward",
                                    *options_from_specs(lm.compile_specs), 1);
      EXPECT_TRUE(ex.ok()) << ex.status().message();
      out.push_back(std::move(ex).value());
    }
    return out;
  };
  uint64_t sum_separate = 0, sum_own = 0;
  {
    auto alone = executors(separate);
    for (auto& ex : alone) sum_separate += ex->working_memory_bytes();
    auto together = executors(shared);
    for (auto& ex : together) sum_own += ex->working_memory_bytes();
    const uint64_t peak_shared = sum_own + shared_spill_fill_bytes();
    EXPECT_EQ(shared_spill_fill_bytes(), largest);
    // Separate contexts: every spill-fill area; shared: the VTCM parts and the largest one.
    EXPECT_LT(peak_shared + (uint64_t{8} << 20), sum_separate) << peak_shared << " vs " << sum_separate;
    // Run in turns on the shared buffer: the same numbers as alone.
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < together.size(); ++i) {
        std::vector<Tensor> in = {random_tensor({1, rows[i], 1024}, 40 + static_cast<uint32_t>(i))};
        auto a = alone[i]->execute(in);
        auto b = together[i]->execute(in);
        ASSERT_TRUE(a.ok() && b.ok());
        expect_same(*a, *b);
      }
    }
  }
  EXPECT_EQ(shared_spill_fill_bytes(), 0u) << "the buffer goes with its last context";

  // A spec whose size is too small for its context is refused at load, naming the fix.
  const LoweredModule& lm = shared[2].lowered_modules()[0];
  auto options = *options_from_specs(lm.compile_specs);
  options.backend_options.htp_options.max_sf_buf_size = 1024;
  auto c = parse_context(lm.processed_bytes->bytes());
  auto ex = HtpExecutor::create(std::make_shared<const Context>(std::move(*c)), "forward", options, 1);
  ASSERT_FALSE(ex.ok());
  EXPECT_NE(ex.status().message().find("update_spill_fill_size"), std::string::npos) << ex.status().message();
}

// The planner never lets a tensor straddle the end of VTCM (the spill-fill part may be shared).
TEST(HtpSpillFill, NoTensorStraddlesVtcm) {
  ExportedProgram p = lowered_wide(700, true);
  auto c = parse_context(p.lowered_modules()[0].processed_bytes->bytes());
  ASSERT_TRUE(c.ok());
  const QnnGraph& g = c->graphs[0];
  EXPECT_GT(g.spill_fill_bytes, 0u);
  for (const QnnTensor& t : g.tensors) {
    if (t.type != TensorType::kNative) continue;
    uint64_t bytes = t.num_elements() * 4;
    EXPECT_TRUE(t.offset + bytes <= g.vtcm_bytes || t.offset >= g.vtcm_bytes) << t.name;
  }
}

}  // namespace
}  // namespace kiln::htp
