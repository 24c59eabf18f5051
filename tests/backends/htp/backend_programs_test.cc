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

}  // namespace
}  // namespace kiln::htp
