// Quantized ONNX ops: QuantizeLinear / DequantizeLinear (8- and 16-bit, per tensor and per axis,
// opset rules), QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger imported as q/dq + float op.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "onnx/onnx_test_util.h"

namespace kiln::testing {
namespace {

using B = OnnxBuilder;
using TP = onnx::TensorProto;

// An integer initializer of ONNX type `elem` (int8 ... int32 go in int32_data).
void init_typed(B& b, const std::string& name, int32_t elem, std::vector<int64_t> dims,
                std::vector<int32_t> values) {
  auto& t = *b.graph().add_initializer();
  t.set_name(name);
  t.set_data_type(elem);
  for (int64_t d : dims) t.add_dims(d);
  for (int32_t v : values) t.add_int32_data(v);
}

// A scalar (rank-0) integer initializer.
void init_scalar(B& b, const std::string& name, int32_t elem, int32_t value) {
  init_typed(b, name, elem, {}, {value});
}

Node* op(const ExportedProgram& p, OpId id, size_t nth = 0) {
  for (Node* n : p.graph().nodes()) {
    if (n->is_call(id) && nth-- == 0) return n;
  }
  ADD_FAILURE() << "no " << op_name(id);
  return nullptr;
}

// The constant a placeholder holds.
const Tensor* constant(const ExportedProgram& p, const Node* placeholder) {
  const InputSpec* s = p.input_spec(placeholder);
  return s == nullptr ? nullptr : p.constants().find(s->target);
}

std::vector<double> values_of(const Tensor* t) {
  std::vector<double> v;
  if (t == nullptr) return v;
  for (int64_t i = 0; i < t->numel(); ++i) v.push_back(t->scalar_at(i));
  return v;
}

Result<ExportedProgram> import_with_output(B& b, const std::string& out = "y") {
  b.output(out);
  return import_model(b);
}

void expect_error(B& b, const std::string& needle) {
  auto p = import_with_output(b);
  ASSERT_FALSE(p.ok()) << "expected: " << needle;
  EXPECT_NE(p.status().message().find(needle), std::string::npos) << p.status().message();
}

// ---- QuantizeLinear / DequantizeLinear.

TEST(OnnxQuantOps, Uint16AtOpset21) {
  B b(21, 10);
  b.input("x", {2, 3}).init("s", {}, {0.001f});
  init_scalar(b, "zp", TP::UINT16, 30000);
  b.node("QuantizeLinear", {"x", "s", "zp"}, {"q"});
  b.node("DequantizeLinear", {"q", "s", "zp"}, {"y"});
  b.output("q");
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  Node* q = op(*p, OpId::kQuantizePerTensor);
  EXPECT_EQ(q->kwarg("dtype").to_dtype(), DType::kU16);
  EXPECT_EQ(q->kwarg_int("quant_min"), 0);
  EXPECT_EQ(q->kwarg_int("quant_max"), 65535);
  EXPECT_EQ(q->kwarg_int("zero_point"), 30000);
  EXPECT_EQ(q->kwarg_float("scale"), static_cast<double>(0.001f));
  EXPECT_EQ(q->spec().to_string(), "u16[2, 3]");
  Node* d = op(*p, OpId::kDequantizePerTensor);
  EXPECT_EQ(d->kwarg("dtype").to_dtype(), DType::kU16);
  EXPECT_EQ(d->spec().to_string(), "f32[2, 3]");
}

TEST(OnnxQuantOps, Int16PerAxisAtOpset21) {
  B b(21, 10);
  b.input("x", {1, 3, 2}).init("s", {3}, {0.5f, 0.25f, 0.125f});
  init_typed(b, "zp", TP::INT16, {3}, {-1000, 0, 1000});
  auto& q = b.node("QuantizeLinear", {"x", "s", "zp"}, {"q"});
  B::attr_int(q, "axis", 1);
  auto& d = b.node("DequantizeLinear", {"q", "s", "zp"}, {"y"});
  B::attr_int(d, "axis", -2);
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  Node* qc = op(*p, OpId::kQuantizePerChannel);
  EXPECT_EQ(qc->kwarg("dtype").to_dtype(), DType::kI16);
  EXPECT_EQ(qc->kwarg_int("quant_min"), -32768);
  EXPECT_EQ(qc->kwarg_int("quant_max"), 32767);
  EXPECT_EQ(qc->kwarg_int("axis"), 1);
  EXPECT_EQ(values_of(constant(*p, qc->input(2))), (std::vector<double>{-1000, 0, 1000}));
  EXPECT_EQ(values_of(constant(*p, qc->input(1))), (std::vector<double>{0.5, 0.25, 0.125}));
  EXPECT_EQ(op(*p, OpId::kDequantizePerChannel)->kwarg_int("axis"), 1);
}

TEST(OnnxQuantOps, OutputDtypeAttributeGivesTheTypeWithoutZeroPoint) {
  B b(21, 10);
  b.input("x", {4}).init("s", {}, {0.1f});
  auto& q = b.node("QuantizeLinear", {"x", "s"}, {"y"});
  B::attr_int(q, "output_dtype", TP::INT16);
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(op(*p, OpId::kQuantizePerTensor)->spec().to_string(), "i16[4]");
}

TEST(OnnxQuantOps, DefaultZeroPointIsUint8) {
  B b(13);
  b.input("x", {4}).init("s", {1}, {0.1f});
  b.node("QuantizeLinear", {"x", "s"}, {"y"});
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  Node* q = op(*p, OpId::kQuantizePerTensor);
  EXPECT_EQ(q->spec().to_string(), "u8[4]");
  EXPECT_EQ(q->kwarg_int("zero_point"), 0);
}

TEST(OnnxQuantOps, DequantizeInt32BiasPerChannel) {
  B b(13);
  b.init("s", {2}, {0.5f, 2.0f});
  init_typed(b, "bias", TP::INT32, {2}, {-7, 100000});
  auto& d = b.node("DequantizeLinear", {"bias", "s"}, {"y"});
  B::attr_int(d, "axis", 0);
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  Node* dq = op(*p, OpId::kDequantizePerChannel);
  EXPECT_EQ(dq->kwarg("dtype").to_dtype(), DType::kI32);
  EXPECT_EQ(dq->kwarg_int("quant_min"), -2147483648LL);
  EXPECT_EQ(values_of(constant(*p, dq->input(2))), (std::vector<double>{0, 0}));
}

TEST(OnnxQuantOps, SixteenBitBeforeOpset21IsAnErrorNamingTheType) {
  B b(17);
  b.input("x", {4}).init("s", {}, {0.1f});
  init_scalar(b, "zp", TP::UINT16, 0);
  b.node("QuantizeLinear", {"x", "s", "zp"}, {"y"}, "q16");
  expect_error(b,
               "node 'q16' (QuantizeLinear): input 'y_zero_point' ('zp'): element type u16 "
               "needs opset 21 (the model imports opset 17)");
  B d(19);
  d.input("q", {4}, TP::INT16).init("s", {}, {0.1f});
  d.node("DequantizeLinear", {"q", "s"}, {"y"}, "dq16");
  expect_error(d,
               "node 'dq16' (DequantizeLinear): input 'x' ('q'): element type i16 needs opset 21");
}

TEST(OnnxQuantOps, UnsupportedTypesAreNamed) {
  B b(21, 10);
  b.input("x", {4}).init("s", {}, {0.1f});
  init_scalar(b, "zp", TP::INT32, 0);
  b.node("QuantizeLinear", {"x", "s", "zp"}, {"y"}, "q32");
  expect_error(b,
               "node 'q32' (QuantizeLinear): input 'y_zero_point' ('zp'): element type i32 is "
               "not supported (expected u8, i8, u16 and i16 (opset 21))");
  B f(13);
  f.input("x", {4}).init("s", {}, {0.1f});
  f.node("DequantizeLinear", {"x", "s"}, {"y"}, "dqf");
  expect_error(f,
               "node 'dqf' (DequantizeLinear): input 'x' ('x'): element type f32 is not "
               "supported (expected u8, i8, i32");
  B i(13);
  i.input("x", {4}, TP::INT8).init("s", {}, {0.1f});
  init_scalar(i, "zp", TP::UINT8, 0);
  i.node("DequantizeLinear", {"x", "s", "zp"}, {"y"}, "mix");
  expect_error(i, "input 'x_zero_point' ('zp'): element type u8 differs from input 'x' ('x') (i8)");
  B q(13);
  q.input("x", {4}, TP::INT8).init("s", {}, {0.1f});
  q.node("QuantizeLinear", {"x", "s"}, {"y"}, "qi");
  expect_error(q,
               "node 'qi' (QuantizeLinear): input 'x' ('x'): element type i8 is not a float type");
}

TEST(OnnxQuantOps, PerAxisNeedsOpset13AndMatchingCounts) {
  B b(11);
  b.input("x", {1, 3}).init("s", {3}, {0.1f, 0.2f, 0.3f});
  b.node("QuantizeLinear", {"x", "s"}, {"y"}, "q");
  expect_error(b,
               "node 'q' (QuantizeLinear): input 'y_scale' ('s'): per-axis quantization needs "
               "opset 13 (the model imports opset 11)");
  B c(13);
  c.input("x", {1, 4}).init("s", {3}, {0.1f, 0.2f, 0.3f});
  c.node("QuantizeLinear", {"x", "s"}, {"y"}, "q");
  expect_error(c,
               "input 'y_scale' ('s'): has 3 values, expected 1 or 4 (dim 1 of input 'x' ('x') "
               "f32[1, 4])");
  B z(13);
  z.input("x", {1, 3}).init("s", {3}, {0.1f, 0.2f, 0.3f});
  init_typed(z, "zp", TP::UINT8, {2}, {1, 2});
  z.node("QuantizeLinear", {"x", "s", "zp"}, {"y"}, "q");
  expect_error(z, "input 'y_zero_point' ('zp'): has 2 values, input 'y_scale' ('s') has 3");
  B n(13);
  n.input("x", {3}).init("s", {}, {-0.5f});
  n.node("QuantizeLinear", {"x", "s"}, {"y"}, "q");
  expect_error(n, "input 'y_scale' ('s'): value -0.5 at index 0 is not positive and finite");
  B r(13);
  // Parameters computed at run time are checked by their types and shapes.
  r.input("x", {3, 4}).input("s", {2, 2});
  r.node("QuantizeLinear", {"x", "s"}, {"y"}, "q");
  expect_error(r, "input 'y_scale' ('s'): got f32[2, 2], expected a scalar or a 1-D tensor");
  B t(13);
  t.input("x", {3}).input("s", {}).input("zp", {}, TP::FLOAT);
  t.node("QuantizeLinear", {"x", "s", "zp"}, {"y"}, "q");
  expect_error(t, "input 'y_zero_point' ('zp'): element type f32 is not an integer type");
}

// ---- QLinearConv.

// x u8[1, 2, 5, 5], w i8[4, 2, 3, 3]; `per_channel` gives w four scales.
void qlinear_conv(B& b, bool per_channel, bool bias) {
  b.input("x", {1, 2, 5, 5}, TP::UINT8).init("xs", {}, {0.02f});
  init_scalar(b, "xz", TP::UINT8, 128);
  std::vector<int32_t> w(4 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int32_t>(i % 17) - 8;
  init_typed(b, "w", TP::INT8, {4, 2, 3, 3}, w);
  if (per_channel) {
    b.init("ws", {4}, {0.01f, 0.02f, 0.03f, 0.04f});
    init_typed(b, "wz", TP::INT8, {4}, {0, 0, 0, 0});
  } else {
    b.init("ws", {}, {0.01f});
    init_scalar(b, "wz", TP::INT8, 0);
  }
  b.init("ys", {}, {0.05f});
  init_scalar(b, "yz", TP::INT8, -3);
  std::vector<std::string> in{"x", "xs", "xz", "w", "ws", "wz", "ys", "yz"};
  if (bias) {
    init_typed(b, "bias", TP::INT32, {4}, {100, -200, 300, -400});
    in.push_back("bias");
  }
  auto& n = b.node("QLinearConv", in, {"y"}, "qconv");
  B::attr_ints(n, "pads", {1, 1, 1, 1});
  B::attr_ints(n, "strides", {2, 2});
}

TEST(OnnxQuantOps, QLinearConvPerTensorWithBias) {
  B b(13);
  qlinear_conv(b, false, true);
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(call_ops(*p), (std::vector<std::string>{
                              "dequantize_per_tensor", "dequantize_per_tensor",
                              "dequantize_per_tensor", "convolution", "quantize_per_tensor"}));
  Node* dx = op(*p, OpId::kDequantizePerTensor, 0);
  EXPECT_EQ(dx->kwarg_int("zero_point"), 128);
  EXPECT_EQ(dx->kwarg("dtype").to_dtype(), DType::kU8);
  Node* db = op(*p, OpId::kDequantizePerTensor, 2);
  EXPECT_EQ(db->kwarg("dtype").to_dtype(), DType::kI32);
  EXPECT_EQ(db->kwarg_int("zero_point"), 0);
  EXPECT_EQ(db->kwarg_float("scale"), static_cast<double>(0.02f * 0.01f));
  Node* conv = op(*p, OpId::kConvolution);
  EXPECT_EQ(conv->kwarg("stride").to_ints(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(conv->input(2), db);
  Node* q = op(*p, OpId::kQuantizePerTensor);
  EXPECT_EQ(q->kwarg_int("zero_point"), -3);
  EXPECT_EQ(q->kwarg_int("quant_min"), -128);
  EXPECT_EQ(q->spec().to_string(), "i8[1, 4, 3, 3]");
}

TEST(OnnxQuantOps, QLinearConvPerChannelWeightsAndBias) {
  B b(13);
  qlinear_conv(b, true, true);
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(call_ops(*p), (std::vector<std::string>{
                              "dequantize_per_tensor", "dequantize_per_channel",
                              "dequantize_per_channel", "convolution", "quantize_per_tensor"}));
  Node* dw = op(*p, OpId::kDequantizePerChannel, 0);
  EXPECT_EQ(dw->kwarg_int("axis"), 0);
  EXPECT_EQ(dw->kwarg("dtype").to_dtype(), DType::kI8);
  Node* db = op(*p, OpId::kDequantizePerChannel, 1);
  EXPECT_EQ(db->kwarg("dtype").to_dtype(), DType::kI32);
  std::vector<double> want;
  for (float s : {0.01f, 0.02f, 0.03f, 0.04f}) want.push_back(static_cast<double>(0.02f * s));
  EXPECT_EQ(values_of(constant(*p, db->input(1))), want);
  EXPECT_EQ(values_of(constant(*p, db->input(2))), (std::vector<double>{0, 0, 0, 0}));
}

TEST(OnnxQuantOps, QLinearConvErrorsNameTheInput) {
  {
    B b(13);
    qlinear_conv(b, false, false);
    b.init("fb", {4}, {1, 2, 3, 4});
    b.graph().mutable_node(0)->add_input("fb");
    expect_error(b,
                 "node 'qconv' (QLinearConv): input 'B' ('fb'): got f32[4], expected i32[4] "
                 "(one per output channel)");
  }
  {
    B b(13);
    qlinear_conv(b, false, false);
    *b.graph().mutable_initializer(3) = B::float_tensor("ws", {3}, {0.1f, 0.2f, 0.3f});
    expect_error(b,
                 "input 'w_scale' ('ws'): has 3 values, expected 1 or 4 (output channels of "
                 "input 'w' i8[4, 2, 3, 3])");
  }
  {
    B b(13);
    b.input("x", {1, 2, 5, 5}).init("xs", {3}, {0.1f, 0.1f, 0.1f});
    b.node("QLinearConv", {"x", "xs", "", "x", "xs", "", "xs", ""}, {"y"}, "qc");
    expect_error(b,
                 "node 'qc' (QLinearConv): input 'x' ('x'): element type f32 is not supported "
                 "(expected u8, i8)");
  }
  {
    B b(13);
    qlinear_conv(b, false, false);
    b.graph().mutable_initializer(1)->set_data_type(TP::INT8);  // "xz" i8 for a u8 x
    b.graph().mutable_initializer(1)->set_int32_data(0, 0);
    expect_error(b,
                 "input 'x_zero_point' ('xz'): element type i8 differs from input 'x' ('x') (u8)");
  }
  {
    B b(13);
    qlinear_conv(b, false, false);
    *b.graph().mutable_initializer(0) = B::float_tensor("xs", {2}, {0.1f, 0.2f});
    expect_error(b, "input 'x_scale' ('xs'): has 2 values, expected one (per-tensor quantization)");
  }
}

// ---- QLinearMatMul.

TEST(OnnxQuantOps, QLinearMatMulPerColumnB) {
  B b(13);
  b.input("a", {2, 3, 4}, TP::UINT8).init("as", {}, {0.1f});
  init_scalar(b, "az", TP::UINT8, 10);
  init_typed(b, "b", TP::INT8, {4, 5}, std::vector<int32_t>(20, 3));
  b.init("bs", {5}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f});
  init_typed(b, "bz", TP::INT8, {5}, {0, 1, 2, 3, 4});
  b.init("ys", {}, {0.3f});
  init_scalar(b, "yz", TP::UINT8, 7);
  b.node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"});
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(call_ops(*p),
            (std::vector<std::string>{"dequantize_per_tensor", "dequantize_per_channel", "matmul",
                                      "quantize_per_tensor"}));
  Node* db = op(*p, OpId::kDequantizePerChannel);
  EXPECT_EQ(db->kwarg_int("axis"), 1);
  EXPECT_EQ(values_of(constant(*p, db->input(2))), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(op(*p, OpId::kQuantizePerTensor)->spec().to_string(), "u8[2, 3, 5]");
}

TEST(OnnxQuantOps, QLinearMatMulPerRowAAndY) {
  B b(13);
  b.input("a", {3, 4}, TP::INT8).init("as", {3}, {0.1f, 0.2f, 0.3f});
  init_typed(b, "az", TP::INT8, {3}, {0, 0, 0});
  b.input("b", {4, 2}, TP::INT8).init("bs", {}, {0.5f});
  init_scalar(b, "bz", TP::INT8, 0);
  b.init("ys", {3}, {0.1f, 0.2f, 0.4f});
  init_typed(b, "yz", TP::INT8, {3}, {1, 2, 3});
  b.node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"});
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(call_ops(*p),
            (std::vector<std::string>{"dequantize_per_channel", "dequantize_per_tensor", "matmul",
                                      "quantize_per_channel"}));
  EXPECT_EQ(op(*p, OpId::kDequantizePerChannel)->kwarg_int("axis"), 0);
  Node* q = op(*p, OpId::kQuantizePerChannel);
  EXPECT_EQ(q->kwarg_int("axis"), 0);
  EXPECT_EQ(q->spec().to_string(), "i8[3, 2]");
}

TEST(OnnxQuantOps, QLinearMatMulBadScaleCount) {
  B b(13);
  b.input("a", {3, 4}, TP::UINT8).init("as", {}, {0.1f});
  b.input("b", {4, 2}, TP::UINT8).init("bs", {4}, {0.1f, 0.1f, 0.1f, 0.1f});
  b.init("ys", {}, {0.1f});
  b.node("QLinearMatMul", {"a", "as", "", "b", "bs", "", "ys", ""}, {"y"}, "qmm");
  expect_error(b,
               "node 'qmm' (QLinearMatMul): input 'b_scale' ('bs'): has 4 values, expected 1 "
               "or 2 (columns of input 'b' u8[4, 2])");
}

// ---- ConvInteger, MatMulInteger.

TEST(OnnxQuantOps, ConvIntegerIsDequantizeConvCast) {
  B b(13);
  b.input("x", {1, 2, 4, 4}, TP::UINT8);
  init_typed(b, "w", TP::UINT8, {3, 2, 2, 2}, std::vector<int32_t>(24, 130));
  init_scalar(b, "xz", TP::UINT8, 5);
  init_typed(b, "wz", TP::UINT8, {3}, {128, 129, 130});
  b.node("ConvInteger", {"x", "w", "xz", "wz"}, {"y"});
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(call_ops(*p),
            (std::vector<std::string>{"dequantize_per_tensor", "dequantize_per_channel",
                                      "convolution", "cast"}));
  Node* dx = op(*p, OpId::kDequantizePerTensor);
  EXPECT_EQ(dx->kwarg_float("scale"), 1.0);
  EXPECT_EQ(dx->kwarg_int("zero_point"), 5);
  Node* dw = op(*p, OpId::kDequantizePerChannel);
  EXPECT_EQ(values_of(constant(*p, dw->input(1))), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(values_of(constant(*p, dw->input(2))), (std::vector<double>{128, 129, 130}));
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), "i32[1, 3, 3, 3]");
}

TEST(OnnxQuantOps, ConvIntegerWithoutZeroPoints) {
  B b(13);
  b.input("x", {1, 1, 3, 3}, TP::INT8);
  init_typed(b, "w", TP::INT8, {1, 1, 3, 3}, std::vector<int32_t>(9, -1));
  b.node("ConvInteger", {"x", "w"}, {"y"});
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(op(*p, OpId::kDequantizePerTensor)->kwarg_int("zero_point"), 0);
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), "i32[1, 1, 1, 1]");
}

TEST(OnnxQuantOps, MatMulIntegerPerRowAndPerColumnZeroPoints) {
  B b(13);
  b.input("A", {3, 4}, TP::UINT8).input("B", {4, 2}, TP::INT8);
  init_typed(b, "az", TP::UINT8, {3}, {1, 2, 3});
  init_typed(b, "bz", TP::INT8, {2}, {-1, 1});
  b.node("MatMulInteger", {"A", "B", "az", "bz"}, {"y"});
  auto p = import_with_output(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(call_ops(*p), (std::vector<std::string>{"dequantize_per_channel",
                                                    "dequantize_per_channel", "matmul", "cast"}));
  EXPECT_EQ(op(*p, OpId::kDequantizePerChannel, 0)->kwarg_int("axis"), 0);
  EXPECT_EQ(op(*p, OpId::kDequantizePerChannel, 1)->kwarg_int("axis"), 1);
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), "i32[3, 2]");
}

TEST(OnnxQuantOps, MatMulIntegerErrorsNameTheInput) {
  {
    B b(13);
    b.input("A", {2, 3, 4}, TP::UINT8).input("B", {4, 2}, TP::UINT8);
    init_typed(b, "az", TP::UINT8, {2, 3, 1}, {0, 0, 0, 0, 0, 0});
    b.node("MatMulInteger", {"A", "B", "az"}, {"y"}, "mmi");
    expect_error(b,
                 "node 'mmi' (MatMulInteger): input 'a_zero_point' ('az'): got u8[2, 3, 1], "
                 "expected a scalar or 3 values (rows of input 'A' u8[2, 3, 4])");
  }
  {
    B b(13);
    b.input("A", {3, 4}, TP::UINT8).input("B", {4, 2}, TP::UINT8);
    init_scalar(b, "bz", TP::INT8, 0);
    b.node("MatMulInteger", {"A", "B", "", "bz"}, {"y"}, "mmi");
    expect_error(b,
                 "input 'b_zero_point' ('bz'): element type i8 differs from input 'B' ('B') (u8)");
  }
  {
    B b(13);
    b.input("A", {3, 4}, TP::INT32).input("B", {4, 2}, TP::UINT8);
    b.node("MatMulInteger", {"A", "B"}, {"y"}, "mmi");
    expect_error(b, "input 'A' ('A'): element type i32 is not supported (expected u8, i8)");
  }
}

}  // namespace
}  // namespace kiln::testing
