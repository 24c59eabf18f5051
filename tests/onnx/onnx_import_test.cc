// ONNX importer: model-level behaviour (signature, folding, symbolic dims) and every kind of
// malformed input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kiln/core/memory.h"
#include "onnx/onnx_test_util.h"

namespace kiln::testing {
namespace {

using TP = onnx::TensorProto;

OnnxBuilder conv_relu_model() {
  OnnxBuilder b(13);
  b.input("x", {1, 3, 8, 8}).init("w", {4, 3, 3, 3}).init("b", {4});
  auto& conv = b.node("Conv", {"x", "w", "b"}, {"c"}, "conv1");
  OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"y"}, "relu1");
  b.output("y");
  return b;
}

TEST(OnnxImport, ConvReluStructureAndSignature) {
  auto p = import_model(conv_relu_model());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->lint().ok());
  EXPECT_EQ(call_ops(*p), (std::vector<std::string>{"convolution", "relu"}));
  Node* conv = find_op(*p, OpId::kConvolution);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->kwarg("padding").to_ints(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(conv->meta.source, "Conv 'conv1'");
  EXPECT_EQ(conv->spec().to_string(), "f32[1, 4, 8, 8]");
  const auto& inputs = p->signature().inputs;
  ASSERT_EQ(inputs.size(), 3u);
  EXPECT_EQ(inputs[0].kind, InputKind::kUserInput);
  EXPECT_EQ(inputs[1].kind, InputKind::kParameter);
  EXPECT_EQ(inputs[2].kind, InputKind::kParameter);
  const Tensor* w = p->constants().find(inputs[1].target);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape(), (std::vector<int64_t>{4, 3, 3, 3}));
  EXPECT_FLOAT_EQ(static_cast<float>(w->scalar_at(5)), 0.05f);
  ASSERT_EQ(p->user_outputs().size(), 1u);
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), "f32[1, 4, 8, 8]");
}

TEST(OnnxImport, InitializerListedAsInputIsAConstantNotAUserInput) {
  OnnxBuilder b(13);
  b.input("x", {2, 3}).input("bias", {3}).init("bias", {3});
  b.node("Add", {"x", "bias"}, {"y"});
  b.output("y");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->user_inputs().size(), 1u);
  EXPECT_EQ(p->signature().inputs.size(), 2u);
  EXPECT_EQ(p->signature().inputs[1].kind, InputKind::kConstantTensor);
}

TEST(OnnxImport, ShapeArithmeticFoldsToOneReshape) {
  OnnxBuilder b(13);
  b.input("x", {2, 3, 4});
  b.init_ints("i0", {0}, /*scalar=*/true).init_ints("minus1", {-1});
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "i0"}, {"d0"});
  b.node("Unsqueeze", {"d0", "axes0"}, {"d0v"});
  b.init_ints("axes0", {0});
  auto& cat = b.node("Concat", {"d0v", "minus1"}, {"target"});
  OnnxBuilder::attr_int(cat, "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"});
  b.output("y");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(call_ops(*p), (std::vector<std::string>{"reshape"}));
  Node* r = find_op(*p, OpId::kReshape);
  EXPECT_EQ(r->kwarg("shape").to_ints(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(r->spec().to_string(), "f32[2, 12]");
}

TEST(OnnxImport, SymbolicBatchStaysSymbolicThroughShapeArithmetic) {
  OnnxBuilder b(13);
  b.input("x", {"N", 3, 4});
  b.init_ints("i0", {0}, true).init_ints("axes0", {0}).init_ints("rest", {12});
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "i0"}, {"n"});
  b.node("Unsqueeze", {"n", "axes0"}, {"nv"});
  auto& cat = b.node("Concat", {"nv", "rest"}, {"target"});
  OnnxBuilder::attr_int(cat, "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"});
  b.output("y");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->user_inputs()[0]->spec().to_string(), "f32[N, 3, 4]");
  Node* r = find_op(*p, OpId::kReshape);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kwarg("shape").to_ints(), (std::vector<int64_t>{-1, 12}));
  EXPECT_EQ(r->spec().to_string(), "f32[N, 12]");

  OnnxImportOptions fixed;
  fixed.dim_values["N"] = 5;
  auto q = import_model(b, fixed);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(find_op(*q, OpId::kReshape)->kwarg("shape").to_ints(), (std::vector<int64_t>{5, 12}));
}

TEST(OnnxImport, UnnamedDynamicDimsGetBatchAndUnkNames) {
  OnnxBuilder b(13);
  b.input("x", {"", 3, ""});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->user_inputs()[0]->spec().to_string(), "f32[batch, 3, unk_0]");
}

TEST(OnnxImport, UnsupportedOpsAreListedInOneError) {
  OnnxBuilder b(13);
  b.input("x", {1, 4});
  b.node("StringNormalizer", {"x"}, {"a"}, "normalize_1");
  b.node("StringNormalizer", {"a"}, {"c"}, "normalize_2");
  b.node("TfIdfVectorizer", {"c"}, {"y"}, "tfidf_0");
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(p.status().message(),
            "unsupported ONNX ops: StringNormalizer (nodes 'normalize_1', 'normalize_2'), "
            "TfIdfVectorizer (node 'tfidf_0')");
}

TEST(OnnxImport, CycleIsAnErrorNamingANodeOnIt) {
  OnnxBuilder b(13);
  b.input("x", {2});
  b.node("Add", {"x", "b"}, {"a"}, "first");
  b.node("Relu", {"a"}, {"b"}, "second");
  b.node("Relu", {"a"}, {"y"}, "third");
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("cycle"), std::string::npos) << p.status().message();
  bool names_cycle_node = p.status().message().find("'first'") != std::string::npos ||
                          p.status().message().find("'second'") != std::string::npos;
  EXPECT_TRUE(names_cycle_node) << p.status().message();
}

TEST(OnnxImport, NodesOutOfOrderAreSorted) {
  OnnxBuilder b(13);
  b.input("x", {2});
  b.node("Relu", {"a"}, {"y"}, "second");
  b.node("Neg", {"x"}, {"a"}, "first");
  b.output("y");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(call_ops(*p), (std::vector<std::string>{"neg", "relu"}));
}

TEST(OnnxImport, MissingInputIsAnError) {
  OnnxBuilder b(13);
  b.input("x", {2});
  b.node("Add", {"x", "nowhere"}, {"y"}, "add0");
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("'nowhere'"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("'add0'"), std::string::npos);
}

TEST(OnnxImport, WrongAttributeTypeIsAnError) {
  OnnxBuilder b(13);
  b.input("x", {2, 3});
  auto& n = b.node("Softmax", {"x"}, {"y"}, "sm");
  OnnxBuilder::attr_str(n, "axis", "one");
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "node 'sm' (Softmax): attribute 'axis': got STRING, expected INT");
}

TEST(OnnxImport, HugeDimsAreRejected) {
  OnnxBuilder b(13);
  b.input("x", {int64_t{1} << 30, int64_t{1} << 30, 4});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("2^40"), std::string::npos) << p.status().message();

  OnnxBuilder c(13);
  c.input("x", {2});
  auto& init = *c.graph().add_initializer();
  init.set_name("big");
  init.set_data_type(TP::FLOAT);
  init.add_dims(int64_t{1} << 62);
  init.add_dims(8);
  c.node("Add", {"x", "big"}, {"y"});
  c.output("y");
  auto q = import_model(c);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("initializer 'big'"), std::string::npos) << q.status().message();
}

TEST(OnnxImport, InitializerDataCountMismatchIsAnError) {
  OnnxBuilder b(13);
  b.input("x", {4});
  b.init("w", {4}, {1, 2, 3});
  b.node("Add", {"x", "w"}, {"y"});
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("initializer 'w': field 'float_data' has 3 values"),
            std::string::npos)
      << p.status().message();
}

// Each is a reproducer of an abort (std::bad_alloc) or a huge allocation before validation: the
// data a tensor declares is checked against the bytes present before anything is allocated.
TEST(OnnxImport, DeclaredSizesAreCheckedAgainstTheDataBeforeAllocating) {
  size_t limit_before = memory_limit();
  set_memory_limit(size_t{64} << 20);  // any allocation of the declared sizes would fail loudly
  auto model_with = [](auto fill) {
    OnnxBuilder b(13);
    auto& w = *b.graph().add_initializer();
    w.set_name("w");
    w.set_data_type(TP::FLOAT);
    fill(w);
    b.node("Abs", {"w"}, {"y"});
    b.output("y");
    return import_model(b);
  };
  // 2^40 bytes declared, no data at all.
  auto none = model_with([](TP& w) {
    w.add_dims(int64_t{1} << 18);
    w.add_dims(int64_t{1} << 20);
  });
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "initializer 'w': field 'float_data' has 0 values, expected 274877906944 for "
            "f32[262144, 1048576] (the tensor has no data)");
  // 8 GiB declared, 16 bytes of raw_data.
  auto short_raw = model_with([](TP& w) {
    w.add_dims(int64_t{1} << 31);
    w.set_raw_data(std::string(16, '\0'));
  });
  ASSERT_FALSE(short_raw.ok());
  EXPECT_EQ(short_raw.status().message(),
            "initializer 'w': field 'raw_data' has 16 bytes, expected 8589934592 for "
            "f32[2147483648]");
  // Data that is really there but over the memory limit: resource exhausted, naming it.
  auto big = model_with([](TP& w) {
    w.add_dims(int64_t{1} << 25);
    w.set_raw_data(std::string(size_t{4} << 25, '\0'));
  });
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(big.status().message(),
            "initializer 'w' (f32[33554432]) needs 128.0 MiB, more than kiln's memory limit of "
            "64.0 MiB (the set limit)");
  set_memory_limit(limit_before);
}

TEST(OnnxImport, SignatureKeepsTheModelsOwnNames) {
  OnnxBuilder b(13);
  b.input("input.1", {2, 3});
  b.node("Abs", {"input.1"}, {"y"}, "Abs");
  b.node("Softmax", {"y"}, {"probs"}, "/head/Softmax");
  b.output("y").output("probs");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->user_input_names(), (std::vector<std::string>{"input.1"}));
  EXPECT_EQ(p->user_output_names(), (std::vector<std::string>{"y", "probs"}));
  // The nodes keep identifier names; the signature carries the model's.
  EXPECT_EQ(p->user_inputs()[0]->name(), "input_1");
  EXPECT_EQ(p->user_outputs()[1]->name(), "_head_Softmax");

  OnnxBuilder twice(13);
  twice.input("x", {2});
  twice.node("Abs", {"x"}, {"y"});
  twice.output("y").output("y");
  auto dup = import_model(twice);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message(), "graph output 'y' is listed twice");
}

TEST(OnnxImport, OpsetOutsideTheSupportedRangeIsRefused) {
  OnnxBuilder b(22);
  b.input("x", {2});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("opset 22"), std::string::npos) << p.status().message();
}

TEST(OnnxImport, OldOpsetsAreBroughtUpByOnnxsVersionConverter) {
  // Opset 9's Slice takes starts/ends/axes as attributes; opset 10 made them inputs.
  OnnxBuilder b(9, 4);
  b.input("x", {4, 6});
  auto& slice = b.node("Slice", {"x"}, {"s"});
  OnnxBuilder::attr_ints(slice, "starts", {1});
  OnnxBuilder::attr_ints(slice, "ends", {3});
  OnnxBuilder::attr_ints(slice, "axes", {0});
  b.node("Relu", {"s"}, {"y"});
  b.output("y");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), "f32[2, 6]");
  EXPECT_EQ(p->user_output_names(), (std::vector<std::string>{"y"}));
}

TEST(OnnxImport, AnOldOpsetModelOnnxsCheckerRejectsIsRefusedWithItsReason) {
  OnnxBuilder b(9, 4);
  b.input("x", {2});
  b.node("NoSuchOp", {"x"}, {"y"});
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("opset 9; ONNX's checker rejected a node before converting it to opset 11: "),
            std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("NoSuchOp"), std::string::npos) << p.status().message();
}

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(OnnxTensorFile, ReadsTheTensorAndItsName) {
  std::string name;
  const std::string bytes = OnnxBuilder::float_tensor("x", {2, 3}, {1, 2, 3, 4, 5, -6}).SerializeAsString();
  auto t = parse_onnx_tensor(bytes_of(bytes), "", "'input_0.pb'", &name);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(name, "x");
  EXPECT_EQ(t->dtype(), DType::kF32);
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t->scalar_at(5), -6.0);

  const auto dir = std::filesystem::temp_directory_path() / fmt::format("kiln_pb_{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream((dir / "input_0.pb").string(), std::ios::binary) << OnnxBuilder::int_tensor("", {7, 8}).SerializeAsString();
  auto file = read_onnx_tensor_file((dir / "input_0.pb").string(), &name);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(name, "");
  EXPECT_EQ(file->dtype(), DType::kI64);
  EXPECT_EQ(file->scalar_at(1), 8.0);
  auto missing = read_onnx_tensor_file((dir / "input_9.pb").string());
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("input_9.pb"), std::string::npos) << missing.status().message();
  std::filesystem::remove_all(dir);
}

TEST(OnnxTensorFile, MalformedBytesAreErrorsNamingTheFile) {
  const std::string garbage = "\xff\xff\xff\xff\x0f";
  auto g = parse_onnx_tensor(bytes_of(garbage), "", "'input_0.pb'");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "'input_0.pb': not a serialized ONNX TensorProto (5 bytes)");

  TP short_raw = OnnxBuilder::float_tensor("x", {4});
  short_raw.clear_float_data();
  short_raw.set_raw_data(std::string(8, '\0'));  // 2 floats for a shape of 4
  auto s = parse_onnx_tensor(bytes_of(short_raw.SerializeAsString()), "", "'input_0.pb'");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("tensor 'x' in 'input_0.pb'"), std::string::npos) << s.status().message();

  TP huge = OnnxBuilder::float_tensor("big", {1});
  huge.clear_dims();
  for (int i = 0; i < 4; ++i) huge.add_dims(int64_t{1} << 20);
  auto h = parse_onnx_tensor(bytes_of(huge.SerializeAsString()), "", "'input_0.pb'");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("'big'"), std::string::npos) << h.status().message();

  TP external = OnnxBuilder::float_tensor("w", {4});
  external.clear_float_data();
  external.set_data_location(TP::EXTERNAL);
  auto* e = external.add_external_data();
  e->set_key("location");
  e->set_value("w.bin");
  auto x = parse_onnx_tensor(bytes_of(external.SerializeAsString()), "", "'input_0.pb'");
  ASSERT_FALSE(x.ok());
  EXPECT_NE(x.status().message().find("'w'"), std::string::npos) << x.status().message();
}

TEST(OnnxImport, EveryTruncationIsAnErrorNotACrash) {
  std::string bytes = conv_relu_model().bytes();
  size_t failures = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto p = import_onnx_bytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), n), "");
    if (!p.ok()) ++failures;
    if (p.ok()) {
      EXPECT_TRUE(p->lint().ok());
    }
  }
  // Most prefixes cut a field in half; the empty prefix is a model without a graph.
  EXPECT_GT(failures, bytes.size() * 9 / 10);
  auto garbage = std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff, 0x0f};
  EXPECT_FALSE(import_onnx_bytes(garbage, "").ok());
}

TEST(OnnxImport, UnusedOptionalOutputIsFineUsedOneIsNot) {
  OnnxBuilder b(13);
  b.input("x", {1, 2, 4, 4});
  auto& mp = b.node("MaxPool", {"x"}, {"y", "idx"}, "pool");
  OnnxBuilder::attr_ints(mp, "kernel_shape", {2, 2});
  b.output("y");
  ASSERT_TRUE(import_model(b).ok());
  b.output("idx");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("Indices"), std::string::npos) << p.status().message();
}

// ---- External data.

class OnnxExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("kiln_onnx_ext_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "model");
    write(root_ / "model" / "weights.bin", 64);
    write(root_ / "outside.bin", 64);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  static void write(const std::filesystem::path& p, size_t n) {
    std::ofstream f(p, std::ios::binary);
    for (size_t i = 0; i < n / 4; ++i) {
      float v = static_cast<float>(i);
      f.write(reinterpret_cast<const char*>(&v), 4);
    }
  }

  // Writes a model whose initializer 'w' ([4] f32) lives at `location`; returns the import.
  Result<ExportedProgram> import_with(const std::string& location, const std::string& offset = "",
                                      const std::string& length = "") {
    OnnxBuilder b(13);
    b.input("x", {4});
    auto& w = *b.graph().add_initializer();
    w.set_name("w");
    w.set_data_type(TP::FLOAT);
    w.add_dims(4);
    w.set_data_location(TP::EXTERNAL);
    auto add = [&](const std::string& k, const std::string& v) {
      auto* e = w.add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", location);
    if (!offset.empty()) add("offset", offset);
    if (!length.empty()) add("length", length);
    b.node("Add", {"x", "w"}, {"y"});
    b.output("y");
    std::string path = (root_ / "model" / "m.onnx").string();
    std::ofstream(path, std::ios::binary) << b.bytes();
    return import_onnx_file(path);
  }

  std::filesystem::path root_;
};

TEST_F(OnnxExternalData, InsideTheFolderLoads) {
  auto p = import_with("weights.bin", "16", "16");
  ASSERT_TRUE(p.ok()) << p.status().message();
  const Tensor* w = nullptr;
  for (const auto& [name, t] : p->constants().entries()) w = &t;
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->scalar_at(0), 4.0);
  EXPECT_EQ(w->scalar_at(3), 7.0);
}

TEST_F(OnnxExternalData, EscapesAreRefused) {
  auto dotdot = import_with("../outside.bin", "0", "16");
  ASSERT_FALSE(dotdot.ok());
  EXPECT_NE(dotdot.status().message().find("initializer 'w'"), std::string::npos);
  EXPECT_NE(dotdot.status().message().find("'..'"), std::string::npos) << dotdot.status().message();

  auto absolute = import_with((root_ / "outside.bin").string(), "0", "16");
  ASSERT_FALSE(absolute.ok());
  EXPECT_NE(absolute.status().message().find("absolute"), std::string::npos);

  std::filesystem::create_symlink(root_ / "outside.bin", root_ / "model" / "link.bin");
  auto link = import_with("link.bin", "0", "16");
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.status().message().find("'link.bin' is a symbolic link to a place outside the "
                                         "model's folder"),
            std::string::npos)
      << link.status().message();
  // A linked folder on the way is named, and the message says why, not where it leads.
  std::filesystem::create_directories(root_ / "elsewhere");
  write(root_ / "elsewhere" / "w.bin", 16);
  std::filesystem::create_directory_symlink(root_ / "elsewhere", root_ / "model" / "data");
  auto dir_link = import_with("data/w.bin", "0", "16");
  ASSERT_FALSE(dir_link.ok());
  EXPECT_NE(dir_link.status().message().find("external_data field 'location' ('data/w.bin') is "
                                             "refused: 'data' is a symbolic link"),
            std::string::npos)
      << dir_link.status().message();
  EXPECT_EQ(dir_link.status().message().find((root_ / "elsewhere").string()), std::string::npos)
      << dir_link.status().message();
  // A link that stays inside the folder is fine.
  std::filesystem::create_symlink(root_ / "model" / "weights.bin", root_ / "model" / "alias.bin");
  EXPECT_TRUE(import_with("alias.bin", "0", "16").ok());
  // A folder where a file is expected says so.
  std::filesystem::create_directories(root_ / "model" / "adir");
  auto dir = import_with("adir", "0", "16");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is a directory, expected a file"), std::string::npos)
      << dir.status().message();
}

TEST_F(OnnxExternalData, OffsetAndLengthPastTheEndAreRefused) {
  auto offset = import_with("weights.bin", "65", "");
  ASSERT_FALSE(offset.ok());
  EXPECT_NE(offset.status().message().find("'offset'"), std::string::npos) << offset.status().message();

  auto length = import_with("weights.bin", "60", "16");
  ASSERT_FALSE(length.ok());
  EXPECT_NE(length.status().message().find("'length'"), std::string::npos) << length.status().message();

  auto huge = import_with("weights.bin", "18446744073709551615", "16");
  ASSERT_FALSE(huge.ok());

  auto wrong_size = import_with("weights.bin", "0", "12");
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_NE(wrong_size.status().message().find("expected 16"), std::string::npos);

  auto missing = import_with("nope.bin", "0", "16");
  ASSERT_FALSE(missing.ok());
}

TEST(OnnxImportBytes, ExternalDataWithoutAFolderIsRefused) {
  OnnxBuilder b(13);
  b.input("x", {4});
  auto& w = *b.graph().add_initializer();
  w.set_name("w");
  w.set_data_type(TP::FLOAT);
  w.add_dims(4);
  w.set_data_location(TP::EXTERNAL);
  auto* e = w.add_external_data();
  e->set_key("location");
  e->set_value("weights.bin");
  b.node("Add", {"x", "w"}, {"y"});
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("without a folder"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
