// One small ONNX model per op (and per opset difference): the imported graph's ops and specs.
#include <gtest/gtest.h>

#include <functional>

#include "onnx/onnx_test_util.h"

namespace kiln::testing {
namespace {

using B = OnnxBuilder;
using Check = std::function<void(const ExportedProgram&)>;

struct OpCase {
  std::string name;
  int64_t opset;
  std::function<void(B&)> build;  // adds inputs and nodes; the graph output is "y"
  std::vector<std::string> ops;   // expected call ops in order
  std::string out_spec;           // expected spec of output "y"
  Check check = nullptr;
};

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

Node* op(const ExportedProgram& p, OpId id) {
  Node* n = find_op(p, id);
  EXPECT_NE(n, nullptr) << op_name(id);
  return n;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> c;
  c.push_back({"ConvSameUpperStride2", 13, [](B& b) {
                 b.input("x", {1, 3, 7, 7}).init("w", {8, 3, 3, 3});
                 auto& n = b.node("Conv", {"x", "w"}, {"y"});
                 B::attr_str(n, "auto_pad", "SAME_UPPER");
                 B::attr_ints(n, "strides", {2, 2});
               },
               {"convolution"}, "f32[1, 8, 4, 4]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kConvolution)->kwarg("padding").to_ints(),
                           (std::vector<int64_t>{1, 1}));
               }});
  c.push_back({"ConvAsymmetricPads", 13, [](B& b) {
                 b.input("x", {1, 3, 8, 8}).init("w", {4, 3, 3, 3});
                 auto& n = b.node("Conv", {"x", "w"}, {"y"});
                 B::attr_ints(n, "pads", {0, 0, 1, 1});
               },
               {"convolution"}, "f32[1, 4, 7, 7]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kConvolution)->kwarg("padding").to_ints(),
                           (std::vector<int64_t>{0, 0, 1, 1}));
               }});
  c.push_back({"DepthwiseConv", 11, [](B& b) {
                 b.input("x", {1, 4, 6, 6}).init("w", {4, 1, 3, 3}).init("bias", {4});
                 auto& n = b.node("Conv", {"x", "w", "bias"}, {"y"});
                 B::attr_int(n, "group", 4);
               },
               {"convolution"}, "f32[1, 4, 4, 4]"});
  c.push_back({"ConvTranspose", 13, [](B& b) {
                 b.input("x", {1, 4, 5, 5}).init("w", {4, 2, 3, 3});
                 auto& n = b.node("ConvTranspose", {"x", "w"}, {"y"});
                 B::attr_ints(n, "strides", {2, 2});
                 B::attr_ints(n, "pads", {1, 1, 1, 1});
                 B::attr_ints(n, "output_padding", {1, 1});
               },
               {"conv_transpose2d"}, "f32[1, 2, 10, 10]"});
  c.push_back({"GemmTransB", 13, [](B& b) {
                 b.input("x", {2, 8}).init("w", {16, 8}).init("bias", {16});
                 auto& n = b.node("Gemm", {"x", "w", "bias"}, {"y"});
                 B::attr_int(n, "transB", 1);
               },
               {"linear"}, "f32[2, 16]", [](const ExportedProgram& p) {
                 EXPECT_EQ(p.signature().inputs[1].kind, InputKind::kParameter);
               }});
  c.push_back({"GemmNoTransFoldsWeightTranspose", 13, [](B& b) {
                 b.input("x", {2, 8}).init("w", {8, 16});
                 auto& n = b.node("Gemm", {"x", "w"}, {"y"});
                 B::attr_float(n, "alpha", 2.0f);
               },
               {"linear"}, "f32[2, 16]", [](const ExportedProgram& p) {
                 const Tensor* w = p.constants().find(p.signature().inputs[1].target);
                 ASSERT_NE(w, nullptr);
                 EXPECT_EQ(w->shape(), (std::vector<int64_t>{16, 8}));
                 // w[1][0] after transpose is original w[0][1] = 0.01, times alpha 2.
                 EXPECT_NEAR(w->scalar_at(8), 0.02, 1e-6);
               }});
  c.push_back({"GemmRuntimeB", 13, [](B& b) {
                 b.input("x", {3, 2}).input("m", {4, 2}).input("c", {3, 4});
                 auto& n = b.node("Gemm", {"x", "m", "c"}, {"y"});
                 B::attr_int(n, "transB", 1);
                 B::attr_float(n, "beta", 0.5f);
               },
               {"permute", "addmm"}, "f32[3, 4]"});
  c.push_back({"MatMulBatched", 13, [](B& b) {
                 b.input("x", {2, 5, 8}).init("w", {8, 3});
                 b.node("MatMul", {"x", "w"}, {"y"});
               },
               {"matmul"}, "f32[2, 5, 3]"});
  c.push_back({"AddScalarConstantBecomesNumber", 13, [](B& b) {
                 b.input("x", {2, 3}).init("two", {}, {2.0f});
                 b.node("Mul", {"two", "x"}, {"t"});
                 b.node("Sub", {"t", "two"}, {"u"});
                 b.node("Div", {"u", "two"}, {"v"});
                 b.node("Pow", {"v", "two"}, {"y"});
               },
               {"mul", "sub", "div", "pow"}, "f32[2, 3]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kMul)->arg(1).to_float(), 2.0);
                 EXPECT_EQ(p.signature().inputs.size(), 1u);
               }});
  c.push_back({"Activations", 14, [](B& b) {
                 b.input("x", {2, 3});
                 b.node("Sigmoid", {"x"}, {"a"});
                 b.node("Tanh", {"a"}, {"c"});
                 b.node("HardSwish", {"c"}, {"d"});
                 auto& hs = b.node("HardSigmoid", {"d"}, {"e"});
                 B::attr_float(hs, "alpha", 0.25f);
                 auto& lr = b.node("LeakyRelu", {"e"}, {"f"});
                 B::attr_float(lr, "alpha", 0.1f);
                 b.node("Erf", {"f"}, {"g"});
                 b.node("Sqrt", {"g"}, {"h"});
                 b.node("Exp", {"h"}, {"i"});
                 b.node("Log", {"i"}, {"j"});
                 b.node("Neg", {"j"}, {"k"});
                 b.node("Abs", {"k"}, {"l"});
                 b.node("Reciprocal", {"l"}, {"y"});
               },
               {"sigmoid", "tanh", "hardswish", "hardsigmoid", "leaky_relu", "erf", "sqrt", "exp",
                "log", "neg", "abs", "div"},
               "f32[2, 3]", [](const ExportedProgram& p) {
                 EXPECT_DOUBLE_EQ(op(p, OpId::kHardsigmoid)->kwarg_float("alpha"), 0.25);
                 EXPECT_NEAR(op(p, OpId::kLeakyRelu)->kwarg_float("negative_slope"), 0.1, 1e-7);
               }});
  c.push_back({"ClipInputsAt11", 11, [](B& b) {
                 b.input("x", {2, 3}).init("lo", {}, {0.0f}).init("hi", {}, {6.0f});
                 b.node("Clip", {"x", "lo", "hi"}, {"y"});
               },
               {"clamp"}, "f32[2, 3]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kClamp)->kwarg_float("max"), 6.0);
               }});
  c.push_back({"PReluChannelSlope", 13, [](B& b) {
                 b.input("x", {1, 3, 4, 4}).init("s", {3, 1, 1});
                 b.node("PRelu", {"x", "s"}, {"y"});
               },
               {"prelu"}, "f32[1, 3, 4, 4]"});
  c.push_back({"PReluLastDimSlopeBroadcastsElementwise", 16, [](B& b) {
                 b.input("x", {3, 4, 5}).init("s", {5});
                 b.node("PRelu", {"x", "s"}, {"y"});
               },
               {"lt", "mul", "where"}, "f32[3, 4, 5]"});
  c.push_back({"PReluRuntimeChannelSlope", 16, [](B& b) {
                 b.input("x", {2, 3, 4}).input("s", {3, 1});
                 b.node("PRelu", {"x", "s"}, {"y"});
               },
               {"reshape", "prelu"}, "f32[2, 3, 4]"});
  c.push_back({"TileIsReshapeExpandReshape", 13, [](B& b) {
                 b.input("x", {2, 3});
                 b.init_ints("reps", {2, 1});
                 b.node("Tile", {"x", "reps"}, {"y"});
               },
               {"reshape", "expand", "reshape"}, "f32[4, 3]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kExpand)->kwarg("size").to_ints(),
                           (std::vector<int64_t>{2, 2, 1, 3}));
               }});
  c.push_back({"SliceNegativeStepFollowsOnnxClamping", 13, [](B& b) {
                 b.input("x", {4, 3});
                 b.init_ints("s", {-1}).init_ints("e", {-100}).init_ints("a", {0}).init_ints("st", {-2});
                 b.node("Slice", {"x", "s", "e", "a", "st"}, {"y"}, "neg");
               },
               {"dynamic_slice"}, "f32[neg_d0, neg_d1]"});
  c.push_back({"Gelu20", 20, [](B& b) {
                 b.input("x", {4});
                 auto& n = b.node("Gelu", {"x"}, {"y"});
                 B::attr_str(n, "approximate", "tanh");
               },
               {"gelu"}, "f32[4]"});
  c.push_back({"SoftmaxOpset11FlattensTo2D", 11, [](B& b) {
                 b.input("x", {2, 3, 4});
                 auto& n = b.node("Softmax", {"x"}, {"y"});
                 B::attr_int(n, "axis", 1);
               },
               {"reshape", "softmax", "reshape"}, "f32[2, 3, 4]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kReshape)->spec().to_string(), "f32[2, 12]");
               }});
  c.push_back({"SoftmaxOpset13IsOneAxis", 13, [](B& b) {
                 b.input("x", {2, 3, 4});
                 auto& n = b.node("LogSoftmax", {"x"}, {"y"});
                 B::attr_int(n, "axis", 1);
               },
               {"log_softmax"}, "f32[2, 3, 4]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kLogSoftmax)->kwarg_int("dim"), 1);
               }});
  c.push_back({"Norms", 17, [](B& b) {
                 b.input("x", {2, 4, 5, 5});
                 b.init("g", {4}).init("be", {4}).init("m", {4}).init("v", {4}, {1, 1, 1, 1});
                 b.node("BatchNormalization", {"x", "g", "be", "m", "v"}, {"a"});
                 b.node("InstanceNormalization", {"a", "g", "be"}, {"c"});
                 b.init("lg", {5}).init("lb", {5});
                 b.node("LayerNormalization", {"c", "lg", "lb"}, {"y"});
               },
               {"batch_norm", "group_norm", "layer_norm"}, "f32[2, 4, 5, 5]",
               [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kGroupNorm)->kwarg_int("num_groups"), 4);
                 EXPECT_EQ(op(p, OpId::kLayerNorm)->kwarg("normalized_shape").to_ints(),
                           (std::vector<int64_t>{5}));
               }});
  c.push_back({"Pools", 13, [](B& b) {
                 b.input("x", {1, 2, 8, 8});
                 auto& mp = b.node("MaxPool", {"x"}, {"a"});
                 B::attr_ints(mp, "kernel_shape", {3, 3});
                 B::attr_ints(mp, "strides", {2, 2});
                 B::attr_ints(mp, "pads", {1, 1, 1, 1});
                 auto& ap = b.node("AveragePool", {"a"}, {"c"});
                 B::attr_ints(ap, "kernel_shape", {2, 2});
                 B::attr_ints(ap, "strides", {2, 2});
                 b.node("GlobalAveragePool", {"c"}, {"d"});
                 b.node("Flatten", {"d"}, {"y"});
               },
               {"max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "flatten"}, "f32[1, 2]",
               [](const ExportedProgram& p) {
                 EXPECT_FALSE(op(p, OpId::kAvgPool2d)->kwarg_bool("count_include_pad"));
               }});
  c.push_back({"FlattenAxis0", 13, [](B& b) {
                 b.input("x", {2, 3, 4});
                 auto& n = b.node("Flatten", {"x"}, {"y"});
                 B::attr_int(n, "axis", 0);
               },
               {"unsqueeze", "flatten"}, "f32[1, 24]"});
  c.push_back({"TransposeDefaultReverses", 13, [](B& b) {
                 b.input("x", {2, 3, 4});
                 b.node("Transpose", {"x"}, {"y"});
               },
               {"permute"}, "f32[4, 3, 2]"});
  c.push_back({"SplitAttrAt11", 11, [](B& b) {
                 b.input("x", {2, 6});
                 auto& n = b.node("Split", {"x"}, {"a", "c"});
                 B::attr_int(n, "axis", 1);
                 B::attr_ints(n, "split", {2, 4});
                 auto& cat = b.node("Concat", {"c", "a"}, {"y"});
                 B::attr_int(cat, "axis", 1);
               },
               {"split", "getitem", "getitem", "cat"}, "f32[2, 6]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kSplit)->kwarg("split_sizes").to_ints(),
                           (std::vector<int64_t>{2, 4}));
               }});
  c.push_back({"SplitInputAt13", 13, [](B& b) {
                 b.input("x", {2, 6}).init_ints("sizes", {2, 4});
                 auto& n = b.node("Split", {"x", "sizes"}, {"a", "y"});
                 B::attr_int(n, "axis", 1);
               },
               {"split", "getitem", "getitem"}, "f32[2, 4]"});
  c.push_back({"SplitNumOutputs18", 18, [](B& b) {
                 b.input("x", {7});
                 auto& n = b.node("Split", {"x"}, {"a", "c", "y"});
                 B::attr_int(n, "num_outputs", 3);
               },
               {"split", "getitem", "getitem", "getitem"}, "f32[1]"});
  c.push_back({"SqueezeAttrAt11", 11, [](B& b) {
                 b.input("x", {1, 3, 1});
                 auto& n = b.node("Squeeze", {"x"}, {"a"});
                 B::attr_ints(n, "axes", {0});
                 auto& u = b.node("Unsqueeze", {"a"}, {"y"});
                 B::attr_ints(u, "axes", {0, 3});
               },
               {"squeeze", "unsqueeze", "unsqueeze"}, "f32[1, 3, 1, 1]"});
  c.push_back({"SqueezeInputAt13", 13, [](B& b) {
                 b.input("x", {1, 3, 1}).init_ints("ax", {-1});
                 b.node("Squeeze", {"x", "ax"}, {"y"});
               },
               {"squeeze"}, "f32[1, 3]"});
  c.push_back({"SliceGatherExpand", 13, [](B& b) {
                 b.input("x", {4, 6}).init_ints("st", {1}).init_ints("en", {INT64_MAX});
                 b.init_ints("ax", {1}).init_ints("i", {2}, true).init_ints("shape", {3, 1});
                 b.node("Slice", {"x", "st", "en", "ax"}, {"a"});
                 b.node("Gather", {"a", "i"}, {"g"});
                 b.node("Expand", {"g", "shape"}, {"y"});
               },
               {"slice", "select", "expand"}, "f32[3, 5]"});
  c.push_back({"GatherEmbedding", 13, [](B& b) {
                 b.input("ids", {2, 3}, onnx::TensorProto::INT64).init("table", {10, 4});
                 b.node("Gather", {"table", "ids"}, {"y"});
               },
               {"embedding"}, "f32[2, 3, 4]"});
  c.push_back({"PadReflectAt11", 11, [](B& b) {
                 b.input("x", {1, 2, 4, 4}).init_ints("pads", {0, 0, 1, 2, 0, 0, 1, 2});
                 auto& n = b.node("Pad", {"x", "pads"}, {"y"});
                 B::attr_str(n, "mode", "reflect");
               },
               {"pad"}, "f32[1, 2, 6, 8]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kPad)->kwarg("pad").to_ints(),
                           (std::vector<int64_t>{2, 2, 1, 1}));
               }});
  c.push_back({"ResizeNearestAsymmetric", 13, [](B& b) {
                 b.input("x", {1, 2, 4, 4}).init("scales", {4}, {1, 1, 2, 2});
                 auto& n = b.node("Resize", {"x", "", "scales"}, {"y"});
                 B::attr_str(n, "coordinate_transformation_mode", "asymmetric");
                 B::attr_str(n, "nearest_mode", "floor");
               },
               {"upsample_nearest2d"}, "f32[1, 2, 8, 8]"});
  c.push_back({"ResizeLinearHalfPixelSizes", 13, [](B& b) {
                 b.input("x", {1, 2, 4, 4}).init_ints("sizes", {1, 2, 6, 10});
                 auto& n = b.node("Resize", {"x", "", "", "sizes"}, {"y"});
                 B::attr_str(n, "mode", "linear");
               },
               {"upsample_bilinear2d"}, "f32[1, 2, 6, 10]", [](const ExportedProgram& p) {
                 EXPECT_FALSE(op(p, OpId::kUpsampleBilinear2d)->kwarg_bool("align_corners"));
               }});
  c.push_back({"ResizeNearestHalfPixelIsTheResizeOp", 13, [](B& b) {
                 b.input("x", {1, 2, 4, 4}).init("scales", {4}, {1, 1, 2, 2});
                 b.node("Resize", {"x", "", "scales"}, {"y"});
               },
               {"resize"}, "f32[1, 2, 8, 8]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kResize)->kwarg("nearest_mode").to_str(), "round_prefer_floor");
               }});
  c.push_back({"ResizeCubicAxesOfA3DTensor", 18, [](B& b) {
                 b.input("x", {2, 3, 5}).init("scales", {1}, {1.5f});
                 auto& n = b.node("Resize", {"x", "", "scales"}, {"y"});
                 B::attr_str(n, "mode", "cubic");
                 B::attr_ints(n, "axes", {-1});
               },
               {"resize"}, "f32[2, 3, 7]"});
  c.push_back({"DepthToSpaceDcrAndCrd", 13, [](B& b) {
                 b.input("x", {1, 8, 2, 3});
                 auto& d = b.node("DepthToSpace", {"x"}, {"a"});
                 B::attr_int(d, "blocksize", 2);
                 auto& c2 = b.node("SpaceToDepth", {"a"}, {"s"});
                 B::attr_int(c2, "blocksize", 2);
                 auto& e = b.node("DepthToSpace", {"s"}, {"y"});
                 B::attr_int(e, "blocksize", 2);
                 B::attr_str(e, "mode", "CRD");
               },
               {"reshape", "permute", "reshape", "reshape", "permute", "reshape", "pixel_shuffle"},
               "f32[1, 2, 4, 6]"});
  c.push_back({"Reductions13vs18", 18, [](B& b) {
                 b.input("x", {2, 3, 4}).init_ints("ax", {1});
                 b.node("ReduceMean", {"x", "ax"}, {"a"});
                 b.node("ReduceSum", {"a", "ax"}, {"c"});
                 auto& m = b.node("ReduceMax", {"c", "ax"}, {"d"});
                 B::attr_int(m, "keepdims", 0);
                 auto& am = b.node("ArgMax", {"d"}, {"y"});
                 B::attr_int(am, "axis", 1);
               },
               {"mean", "sum", "amax", "argmax"}, "i64[2, 1]"});
  c.push_back({"ReduceAxesAttrAt13", 13, [](B& b) {
                 b.input("x", {2, 3, 4});
                 auto& n = b.node("ReduceMin", {"x"}, {"y"});
                 B::attr_ints(n, "axes", {0, 2});
               },
               {"amin"}, "f32[1, 3, 1]"});
  c.push_back({"CompareWhereLogic", 13, [](B& b) {
                 b.input("x", {2, 3}).input("z", {2, 3}).init("zero", {}, {0.0f});
                 b.node("Greater", {"x", "zero"}, {"g"});
                 b.node("Less", {"x", "z"}, {"l"});
                 b.node("Equal", {"x", "z"}, {"e"});
                 b.node("And", {"g", "l"}, {"a"});
                 b.node("Or", {"a", "e"}, {"o"});
                 b.node("Not", {"o"}, {"n"});
                 b.node("Where", {"n", "x", "zero"}, {"y"});
               },
               {"gt", "lt", "eq", "logical_and", "logical_or", "logical_not", "where"}, "f32[2, 3]"});
  c.push_back({"CastCumSum", 13, [](B& b) {
                 b.input("x", {2, 3}).init_ints("axis", {1}, true);
                 auto& n = b.node("Cast", {"x"}, {"i"});
                 B::attr_int(n, "to", onnx::TensorProto::INT32);
                 b.node("CumSum", {"i", "axis"}, {"y"});
               },
               {"cast", "cumsum", "cast"}, "i32[2, 3]"});
  c.push_back({"QdqPerTensorAndPerChannel", 13, [](B& b) {
                 b.input("x", {1, 3, 2, 2}).init("s", {}, {0.5f});
                 auto& zp = *b.graph().add_initializer();
                 zp.set_name("zp");
                 zp.set_data_type(onnx::TensorProto::INT8);
                 zp.add_int32_data(3);
                 b.node("QuantizeLinear", {"x", "s", "zp"}, {"q"});
                 b.node("DequantizeLinear", {"q", "s", "zp"}, {"d"});
                 b.init("cs", {3}, {0.1f, 0.2f, 0.3f});
                 auto& q2 = b.node("QuantizeLinear", {"d", "cs"}, {"q2"});
                 B::attr_int(q2, "axis", 1);
                 auto& d2 = b.node("DequantizeLinear", {"q2", "cs"}, {"y"});
                 B::attr_int(d2, "axis", 1);
               },
               {"quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel",
                "dequantize_per_channel"},
               "f32[1, 3, 2, 2]", [](const ExportedProgram& p) {
                 Node* q = op(p, OpId::kQuantizePerTensor);
                 EXPECT_EQ(q->kwarg_int("zero_point"), 3);
                 EXPECT_EQ(q->kwarg_int("quant_min"), -128);
                 EXPECT_EQ(q->kwarg("dtype").to_dtype(), DType::kI8);
                 Node* qc = op(p, OpId::kQuantizePerChannel);
                 EXPECT_EQ(qc->kwarg_int("quant_max"), 255);
                 EXPECT_EQ(qc->spec().dtype, DType::kU8);
               }});
  c.push_back({"ConstantOfShapeRangeFoldAway", 13, [](B& b) {
                 b.input("x", {3});
                 auto& k = b.node("Constant", {}, {"shape"});
                 B::attr_tensor(k, "value", B::int_tensor("", {3}));
                 auto& cs = b.node("ConstantOfShape", {"shape"}, {"ones"});
                 B::attr_tensor(cs, "value", B::float_tensor("", {1}, {1.0f}));
                 b.init("s0", {}, {0.0f}).init("s1", {}, {3.0f}).init("s2", {}, {1.0f});
                 b.node("Range", {"s0", "s1", "s2"}, {"r"});
                 b.node("Add", {"ones", "r"}, {"c"});
                 b.node("Mul", {"x", "c"}, {"y"});
               },
               {"mul"}, "f32[3]", [](const ExportedProgram& p) {
                 const Tensor* c = nullptr;
                 for (const auto& [name, t] : p.constants().entries()) c = &t;
                 ASSERT_NE(c, nullptr);
                 EXPECT_EQ(c->scalar_at(2), 3.0);
               }});
  c.push_back({"IdentityDropout", 13, [](B& b) {
                 b.input("x", {2});
                 b.node("Identity", {"x"}, {"a"});
                 b.node("Dropout", {"a"}, {"c"});
                 b.node("Relu", {"c"}, {"y"});
               },
               {"relu"}, "f32[2]"});
  // Issue 14: ops defined by formula, variadic ops and ONNX's result types.
  c.push_back({"MaxMinSumMeanFoldLeft", 13, [](B& b) {
                 b.input("x", {2, 3}).input("a", {3}).input("b", {1});
                 b.node("Max", {"x", "a", "b"}, {"m"});
                 b.node("Min", {"m", "x"}, {"n"});
                 b.node("Sum", {"n"}, {"s"});
                 b.node("Mean", {"s", "x"}, {"y"});
               },
               {"maximum", "maximum", "minimum", "add", "div"}, "f32[2, 3]"});
  c.push_back({"ModPicksRemainderOrFmod", 13, [](B& b) {
                 b.input("x", {4}, onnx::TensorProto::INT32).input("d", {4}, onnx::TensorProto::INT32);
                 b.node("Mod", {"x", "d"}, {"r"});
                 auto& n = b.node("Mod", {"r", "d"}, {"y"});
                 B::attr_int(n, "fmod", 1);
               },
               {"remainder", "fmod"}, "i32[4]"});
  c.push_back({"IntegerDivTruncatesAndKeepsTheType", 13, [](B& b) {
                 b.input("x", {4}, onnx::TensorProto::UINT8).input("d", {4}, onnx::TensorProto::UINT8);
                 b.node("Div", {"x", "d"}, {"y"});
               },
               {"div"}, "u8[4]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kDiv)->kwarg("rounding_mode").to_str(), "trunc");
               }});
  c.push_back({"PowHasTheBasesType", 15, [](B& b) {
                 b.input("x", {3}, onnx::TensorProto::INT64).input("e", {3});
                 b.node("Pow", {"x", "e"}, {"y"});
               },
               {"cast", "cast", "pow", "cast"}, "i64[3]"});
  c.push_back({"TriluMasksTheLastTwoDims", 14, [](B& b) {
                 b.input("x", {2, 3, 4});
                 b.init_ints("k", {1}, true);
                 auto& n = b.node("Trilu", {"x", "k"}, {"y"});
                 B::attr_int(n, "upper", 0);
               },
               {"where"}, "f32[2, 3, 4]"});
  c.push_back({"ReduceLogSumExpSubtractsTheMax", 18, [](B& b) {
                 b.input("x", {2, 3});
                 b.init_ints("axes", {1});
                 auto& n = b.node("ReduceLogSumExp", {"x", "axes"}, {"y"});
                 B::attr_int(n, "keepdims", 0);
               },
               {"amax", "sub", "exp", "sum", "log", "amax", "add"}, "f32[2]"});
  c.push_back({"ReduceL2", 18, [](B& b) {
                 b.input("x", {2, 3});
                 b.node("ReduceL2", {"x"}, {"y"});
               },
               {"mul", "sum", "sqrt"}, "f32[1, 1]"});
  c.push_back({"SizeIsAConstant", 13, [](B& b) {
                 b.input("x", {2, 3});
                 b.node("Size", {"x"}, {"n"});
                 b.node("Add", {"x", "n"}, {"y"});  // n is i64: the add promotes nothing away
               },
               {"add"}, "f32[2, 3]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kAdd)->arg(1).to_int(), 6);
               }});
  c.push_back({"EluSeluSoftplusByFormula", 13, [](B& b) {
                 b.input("x", {4});
                 b.node("Elu", {"x"}, {"e"});
                 b.node("Softplus", {"e"}, {"y"});
               },
               {"gt", "exp", "sub", "mul", "where", "relu", "abs", "neg", "exp", "add", "log", "add"}, "f32[4]"});
  c.push_back({"GatherElementsIsGather", 13, [](B& b) {
                 b.input("x", {3, 4}).input("i", {2, 4}, onnx::TensorProto::INT64);
                 auto& n = b.node("GatherElements", {"x", "i"}, {"y"});
                 B::attr_int(n, "axis", 0);
               },
               {"gather"}, "f32[2, 4]"});
  c.push_back({"NllLossMeanOverCountedWeights", 13, [](B& b) {
                 b.input("x", {2, 5, 3}).input("t", {2, 3}, onnx::TensorProto::INT64).input("w", {5});
                 auto& n = b.node("NegativeLogLikelihoodLoss", {"x", "t", "w"}, {"y"});
                 B::attr_int(n, "ignore_index", 1);
               },
               {"ne", "where", "unsqueeze", "gather", "squeeze", "neg", "unsqueeze", "embedding", "squeeze", "mul",
                "where", "where", "sum", "sum", "div"},
               "f32[]"});
  c.push_back({"SoftmaxCrossEntropyLossWithLogProb", 13, [](B& b) {
                 b.input("x", {4, 3}).input("t", {4}, onnx::TensorProto::INT64);
                 auto& n = b.node("SoftmaxCrossEntropyLoss", {"x", "t"}, {"y", "lp"});
                 B::attr_str(n, "reduction", "none");  // "lp" is the log_softmax (a graph output in the suite)
               },
               {"log_softmax", "unsqueeze", "gather", "squeeze", "neg"}, "f32[4]"});
  c.push_back({"LayerNormMeanAndInvStdDev", 17, [](B& b) {
                 b.input("x", {2, 3, 4});
                 b.init("g", {4});
                 auto& n = b.node("LayerNormalization", {"x", "g"}, {"n", "m", "s"});
                 B::attr_int(n, "axis", -1);
                 b.node("Mul", {"m", "s"}, {"y"});
               },
               {"layer_norm", "mean", "sub", "mul", "mean", "add", "rsqrt", "mul"}, "f32[2, 3, 1]"});
  c.push_back({"LstmBatchFirstBetweenPermutes",
               14,
               [](B& b) {
                 b.input("x", {2, 5, 4}).init("w", {1, 12, 4}).init("r", {1, 12, 3});
                 auto& n = b.node("LSTM", {"x", "w", "r"}, {"y", "", "c"});
                 B::attr_int(n, "layout", 1);  // hidden_size left out: R gives it
               },
               {"permute", "lstm", "getitem", "permute"},
               "f32[2, 5, 1, 3]",
               [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kLstm)->kwarg_int("hidden_size"), 3);
               }});
  c.push_back({"GruActivationsLowerCased",
               14,
               [](B& b) {
                 b.input("x", {5, 2, 4}).init("w", {2, 9, 4}).init("r", {2, 9, 3});
                 auto& n = b.node("GRU", {"x", "w", "r"}, {"", "y"});
                 B::attr_int(n, "hidden_size", 3);
                 B::attr_str(n, "direction", "bidirectional");
                 auto* a = n.add_attribute();
                 a->set_name("activations");
                 a->set_type(onnx::AttributeProto::STRINGS);
                 for (const char* f : {"HardSigmoid", "Tanh", "Sigmoid", "LeakyRelu"})
                   a->add_strings(f);
               },
               {"gru", "getitem"},
               "f32[2, 2, 3]",
               [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kGru)->kwarg("activations").to_str(),
                           "hardsigmoid,tanh,sigmoid,leakyrelu");
               }});
  c.push_back({"HardmaxBeforeOpset13FlattensFirst",
               11,
               [](B& b) {
                 b.input("x", {2, 3, 4});
                 b.node("Hardmax", {"x"}, {"y"});  // axis 1: over the flattened [3 * 4]
               },
               {"reshape", "argmax", "eq", "cast", "reshape"},
               "f32[2, 3, 4]"});
  c.push_back({"OneHotWrapsNegativeIndices",
               11,
               [](B& b) {
                 b.input("i", {3}, onnx::TensorProto::INT64);
                 b.init_ints("depth", {5}, true);
                 b.init("values", {2}, {-1, 7});
                 auto& n = b.node("OneHot", {"i", "depth", "values"}, {"y"});
                 B::attr_int(n, "axis", 0);
               },
               {"lt", "add", "where", "unsqueeze", "eq", "select", "select", "where"},
               "f32[5, 3]"});
  c.push_back({"EyeLikeIsAConstant",
               11,
               [](B& b) {
                 b.input("x", {3, 4});
                 auto& n = b.node("EyeLike", {"x"}, {"e"});
                 B::attr_int(n, "k", 1);
                 b.node("Add", {"x", "e"}, {"y"});
               },
               {"add"},
               "f32[3, 4]"});
  c.push_back(
      {"ScatterElementsWithReduction",
       18,
       [](B& b) {
         b.input("x", {3, 4}).input("i", {2, 4}, onnx::TensorProto::INT64).input("u", {2, 4});
         auto& n = b.node("ScatterElements", {"x", "i", "u"}, {"y"});
         B::attr_str(n, "reduction", "max");
       },
       {"scatter"},
       "f32[3, 4]",
       [](const ExportedProgram& p) {
         EXPECT_EQ(op(p, OpId::kScatter)->kwarg("reduce").to_str(), "max");
       }});
  c.push_back({"GatherNdBatchDims",
               13,
               [](B& b) {
                 b.input("x", {2, 3, 4}).input("i", {2, 1}, onnx::TensorProto::INT64);
                 auto& n = b.node("GatherND", {"x", "i"}, {"y"});
                 B::attr_int(n, "batch_dims", 1);
               },
               {"gather_nd"},
               "f32[2, 4]"});
  c.push_back({"ReduceProdKeepsIntegerType",
               18,
               [](B& b) {
                 b.input("x", {2, 3}, onnx::TensorProto::INT32);
                 b.node("ReduceProd", {"x"}, {"y"});
               },
               {"prod", "cast"},
               "i32[1, 1]"});
  c.push_back({"ReshapeOfTwoSymbolicDimsKeepsThem",
               13,
               [](B& b) {
                 b.input("x", {"N", "T", 360});
                 b.node("Shape", {"x"}, {"s"});
                 b.init_ints("zero", {0}).init_ints("one", {1}).init_ints("two", {2});
                 b.node("Slice", {"s", "one", "two"}, {"t"});
                 b.init_ints("tail", {3, 8, 15});
                 auto& n = b.node("Concat", {"zero", "t", "tail"}, {"shape"});
                 B::attr_int(n, "axis", 0);
                 b.node("Reshape", {"x", "shape"}, {"y"});  // [0, T, 3, 8, 15]
               },
               {"unflatten"},
               "f32[N, T, 3, 8, 15]"});
  c.push_back({"MaxPool1dIsMaxPool2dOverAUnitHeight", 13, [](B& b) {
                 b.input("x", {1, 3, 32});
                 auto& n = b.node("MaxPool", {"x"}, {"y"});
                 B::attr_ints(n, "kernel_shape", {5});
                 B::attr_ints(n, "pads", {2, 1});
               },
               {"unsqueeze", "max_pool2d", "squeeze"}, "f32[1, 3, 31]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kMaxPool2d)->kwarg("padding").to_ints(), (std::vector<int64_t>{0, 2, 0, 1}));
               }});
  c.push_back({"LrnSumsSquaresOverChannels", 13, [](B& b) {
                 b.input("x", {2, 5, 4, 3});
                 auto& n = b.node("LRN", {"x"}, {"y"});
                 B::attr_int(n, "size", 3);
               },
               {"mul", "unsqueeze", "flatten", "avg_pool2d", "squeeze", "unflatten", "mul", "add", "pow", "mul"},
               "f32[2, 5, 4, 3]"});
  c.push_back({"GatherWithRuntime2dIndices", 13, [](B& b) {
                 b.input("x", {5, 4}).input("i", {2, 3}, onnx::TensorProto::INT64);
                 auto& n = b.node("Gather", {"x", "i"}, {"y"});
                 B::attr_int(n, "axis", 1);
               },
               {"flatten", "index_select", "unflatten"}, "f32[5, 2, 3]"});
  c.push_back({"IsInfPositiveOnly", 13, [](B& b) {
                 b.input("x", {4});
                 auto& n = b.node("IsInf", {"x"}, {"y"});
                 B::attr_int(n, "detect_negative", 0);
               },
               {"gt"}, "bool[4]"});
  c.push_back({"ClipWithoutBoundsIsIdentity", 13, [](B& b) {
                 b.input("x", {4});
                 b.node("Clip", {"x"}, {"c"});
                 b.node("Celu", {"c"}, {"y"});
               },
               {"gt", "exp", "sub", "mul", "where"}, "f32[4]"});
  c.push_back({"MeanVarianceNormalizationDefaultAxes", 13, [](B& b) {
                 b.input("x", {2, 3, 4, 4});
                 b.node("MeanVarianceNormalization", {"x"}, {"y"});
               },
               {"mean", "sub", "mul", "mean", "add", "sqrt", "div"}, "f32[2, 3, 4, 4]"});
  c.push_back({"TopKIndices", 11, [](B& b) {
                 b.input("x", {3, 8});
                 b.init_ints("k", {2});
                 b.node("TopK", {"x", "k"}, {"", "y"});
               },
               {"topk", "getitem"}, "i64[3, 2]"});
  c.push_back({"EinsumIsABatchedMatmul", 12, [](B& b) {
                 b.input("q", {2, 3, 5, 4}).input("k", {2, 3, 6, 4});
                 auto& n = b.node("Einsum", {"q", "k"}, {"y"});
                 B::attr_str(n, "equation", "bhqd,bhkd->bhqk");
               },
               {"permute", "matmul"}, "f32[2, 3, 5, 6]"});
  c.push_back({"EinsumSumsAndGroupsLabels", 12, [](B& b) {
                 b.input("a", {2, 3, 4, 7}).input("c", {3, 4, 5});
                 auto& n = b.node("Einsum", {"a", "c"}, {"y"});
                 B::attr_str(n, "equation", "bijz,ijk->kb");  // z summed out, i and j contracted together
               },
               {"sum", "flatten", "flatten", "matmul", "permute"}, "f32[5, 2]"});
  c.push_back({"ClipRuntimeMinConstantMax", 13, [](B& b) {
                 b.input("x", {2, 3}).input("lo", {}).init("hi", {}, {6.0f});
                 b.node("Clip", {"x", "lo", "hi"}, {"y"});
               },
               {"clamp", "maximum"}, "f32[2, 3]", [](const ExportedProgram& p) {
                 EXPECT_EQ(op(p, OpId::kClamp)->kwarg_float("max"), 6.0);
                 EXPECT_TRUE(op(p, OpId::kClamp)->kwarg("min").is_none());
               }});
  c.push_back({"TriluRuntimeK", 14, [](B& b) {
                 b.input("x", {3, 4}).input("k", {}, onnx::TensorProto::INT64);
                 auto& n = b.node("Trilu", {"x", "k"}, {"y"});
                 B::attr_int(n, "upper", 0);
               },
               {"le", "where"}, "f32[3, 4]"});
  c.push_back({"QuantizeLinearRuntimeScale", 13, [](B& b) {
                 b.input("x", {2, 3}).input("s", {}).input("z", {}, onnx::TensorProto::INT8);
                 b.node("QuantizeLinear", {"x", "s", "z"}, {"y"});
               },
               {"reshape", "div", "round", "reshape", "cast", "add", "clamp", "cast"}, "i8[2, 3]"});
  c.push_back({"DequantizeLinearRuntimeAxisScale", 13, [](B& b) {
                 b.input("x", {2, 3}, onnx::TensorProto::UINT8).input("s", {3});
                 b.node("DequantizeLinear", {"x", "s"}, {"y"});
               },
               {"reshape", "cast", "cast", "mul"}, "f32[2, 3]"});
  c.push_back({"DynamicQuantizeLinearFeedsMatMulInteger", 11, [](B& b) {
                 b.input("x", {2, 4});
                 b.init("w", {4, 3});
                 b.node("DynamicQuantizeLinear", {"x"}, {"q", "s", "z"});
                 B::attr_int(b.node("Cast", {"w"}, {"wq"}), "to", onnx::TensorProto::UINT8);
                 b.node("MatMulInteger", {"q", "wq", "z"}, {"y"});
               },
               {"amin", "minimum", "amax", "maximum", "sub", "div", "neg", "div", "round", "clamp",
                "cast", "reshape", "div", "round", "reshape", "cast", "add", "clamp", "cast", "cast",
                "reshape", "cast", "sub", "cast", "dequantize_per_tensor", "matmul", "cast"},
               "i32[2, 3]"});
  return c;
}

class OnnxOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(OnnxOps, ImportsToExpectedGraph) {
  const OpCase& tc = GetParam();
  B b(tc.opset);
  tc.build(b);
  b.output("y");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->lint().ok()) << p->lint().message();
  EXPECT_EQ(call_ops(*p), tc.ops);
  ASSERT_EQ(p->user_outputs().size(), 1u);
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), tc.out_spec);
  if (tc.check) tc.check(*p);
}

INSTANTIATE_TEST_SUITE_P(Cases, OnnxOps, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

TEST(OnnxOpsErrors, ResizeAntialiasIsRefusedClearly) {
  B b(18);
  b.input("x", {1, 2, 4, 4}).init("scales", {4}, {1, 1, 0.5f, 0.5f});
  auto& n = b.node("Resize", {"x", "", "scales"}, {"y"}, "down");
  B::attr_int(n, "antialias", 1);
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("node 'down' (Resize): antialias=1 is not supported"),
            std::string::npos)
      << p.status().message();
}

// An If whose condition folds at import time (shape arithmetic, once the dims are fixed) is its
// branch, converted in the enclosing scope: exporters emit "squeeze if the batch is 1" this way.
TEST(OnnxOps, IfWithAnImportTimeConditionIsItsBranch) {
  B then_b, else_b;
  then_b.init_ints("axes", {0});
  then_b.node("Squeeze", {"x", "axes"}, {"t"});
  then_b.output("t");
  else_b.node("Identity", {"x"}, {"e"});
  else_b.output("e");
  B b(13);
  b.input("x", {"n", 3});
  b.init_ints("zero", {0}, true).init_ints("one", {1}, true);
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "zero"}, {"n0"});
  b.node("Equal", {"n0", "one"}, {"c"});
  auto& n = b.node("If", {"c"}, {"y"}, "if");
  B::attr_graph(n, "then_branch", then_b.model().graph());
  B::attr_graph(n, "else_branch", else_b.model().graph());
  b.node("Relu", {"y"}, {"z"});
  b.output("z");
  for (int64_t batch : {1, 2}) {
    OnnxImportOptions o;
    o.dim_values["n"] = batch;
    auto p = import_model(b, o);
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_TRUE(p->lint().ok()) << p->lint().message();
    EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), batch == 1 ? "f32[3]" : "f32[2, 3]");
    EXPECT_EQ(call_ops(*p), batch == 1 ? (std::vector<std::string>{"squeeze", "relu"})
                                       : (std::vector<std::string>{"relu"}));
  }
  // The sizes of the tensors a run is given fix the dims the same way.
  OnnxImportOptions given;
  given.input_shapes["x"] = {1, 3};
  auto p = import_model(b, given);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->user_outputs()[0]->spec().to_string(), "f32[3]");
  given.input_shapes["x"] = {1, 4};
  auto bad = import_model(b, given);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("graph input 'x' has shape f32[n, 3]; the tensor given for "
                                        "it has shape [1, 4]"),
            std::string::npos)
      << bad.status().message();
  // A condition computed when the model runs is a cond node: each branch a subgraph taking, as
  // operands, the run-time values it reads (x); the constants it reads (k) are copied in.
  B add_b, id_b, flip_b;
  add_b.node("Add", {"x", "k"}, {"t"});
  add_b.output("t");
  id_b.node("Identity", {"x"}, {"e"});
  id_b.output("e");
  flip_b.node("Transpose", {"x"}, {"f"});
  flip_b.output("f");
  auto runtime_if = [&](B& then_g, B& else_g) {
    B r(13);
    r.input("x", {2, 3}).input("c", {}, onnx::TensorProto::BOOL).init("k", {3});
    auto& m = r.node("If", {"c"}, {"y"}, "if");
    B::attr_graph(m, "then_branch", then_g.model().graph());
    B::attr_graph(m, "else_branch", else_g.model().graph());
    r.output("y");
    return import_model(r);
  };
  auto q = runtime_if(add_b, id_b);
  ASSERT_TRUE(q.ok()) << q.status().message();
  ASSERT_TRUE(q->lint().ok()) << q->lint().message();
  EXPECT_EQ(call_ops(*q), (std::vector<std::string>{"cond", "getitem"}));
  ASSERT_EQ(q->subgraphs().size(), 2u);
  const ExportedProgram& then_p = *q->subgraphs()[0].program;
  EXPECT_EQ(q->subgraphs()[0].name, "if_then");
  EXPECT_EQ(then_p.user_input_names(), std::vector<std::string>{"x"});
  EXPECT_EQ(call_ops(then_p), std::vector<std::string>{"add"});
  EXPECT_EQ(then_p.constants().size(), 1u);
  EXPECT_EQ(q->subgraphs()[1].program->user_input_names(), std::vector<std::string>{"x"});
  // A branch that does not fit the input shapes (a squeeze of a dim of 2) is kept as its error:
  // a run that takes it fails with it.
  auto partial = runtime_if(then_b, id_b);
  ASSERT_TRUE(partial.ok()) << partial.status().message();
  ASSERT_EQ(partial->subgraphs().size(), 2u);
  EXPECT_EQ(partial->subgraphs()[0].program, nullptr);
  EXPECT_NE(partial->subgraphs()[0].error.find("Squeeze"), std::string::npos)
      << partial->subgraphs()[0].error;
  EXPECT_EQ(partial->user_outputs()[0]->spec().to_string(), "f32[2, 3]");
  // Branches whose results differ in shape are refused, naming both.
  auto bad_if = runtime_if(add_b, flip_b);
  ASSERT_FALSE(bad_if.ok());
  EXPECT_NE(bad_if.status().message().find("node 'if' (If): output 0 ('y') is f32[2, 3] from "
                                           "then_branch but f32[3, 2] from else_branch"),
            std::string::npos)
      << bad_if.status().message();
}

// Loop is a loop node whose body is a subgraph taking (iteration, condition, carried..., the
// run-time values it reads); its scan outputs have the trip count as dim 0 when the importer
// knows it, else a fresh symbol. Scan is a loop over its scan inputs' rows.
TEST(OnnxOps, LoopAndScanAreLoopNodes) {
  auto loop_model = [](bool constant_trips, bool grow) {
    B body;
    body.input("i", {}, onnx::TensorProto::INT64).input("c", {}, onnx::TensorProto::BOOL);
    body.input("acc", {2, 3});
    if (grow) {
      auto& cat = body.node("Concat", {"acc", "acc"}, {"next"});
      B::attr_int(cat, "axis", 0);
    } else {
      body.node("Add", {"acc", "x"}, {"next"});
    }
    body.node("Mul", {"next", "next"}, {"sq"});
    body.output("c").output("next").output("sq");
    B b(13);
    b.input("x", {2, 3});
    if (constant_trips) {
      b.init_ints("n", {4}, true);
    } else {
      b.input("n", {}, onnx::TensorProto::INT64);
    }
    auto& n = b.node("Loop", {"n", "", "x"}, {"y", "rows"}, "loop");
    B::attr_graph(n, "body", body.model().graph());
    b.output("y").output("rows");
    return import_model(b);
  };
  auto p = loop_model(false, false);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->lint().ok()) << p->lint().message();
  EXPECT_EQ(call_ops(*p), (std::vector<std::string>{"loop", "getitem", "getitem"}));
  ASSERT_EQ(p->subgraphs().size(), 1u);
  EXPECT_EQ(p->subgraphs()[0].name, "loop_body");
  EXPECT_EQ(p->subgraphs()[0].program->user_input_names(),
            (std::vector<std::string>{"i", "c", "acc", "x"}));
  EXPECT_EQ(p->user_outputs()[1]->spec().to_string(), "f32[loop_trips, 2, 3]");
  auto fixed = loop_model(true, false);
  ASSERT_TRUE(fixed.ok()) << fixed.status().message();
  EXPECT_EQ(fixed->user_outputs()[0]->spec().to_string(), "f32[2, 3]");
  EXPECT_EQ(fixed->user_outputs()[1]->spec().to_string(), "f32[4, 2, 3]");
  auto grows = loop_model(true, true);
  ASSERT_FALSE(grows.ok());
  EXPECT_NE(grows.status().message().find("node 'loop' (Loop): loop-carried value 0 ('acc') is "
                                          "f32[2, 3] going into the body and f32[4, 3] coming out"),
            std::string::npos)
      << grows.status().message();

  auto scan_model = [](std::vector<OnnxDim> xs_dims, int64_t out_axis) {
    B body;
    body.input("s", {4}).input("row", {4});
    body.node("Add", {"s", "row"}, {"s2"});
    body.node("Neg", {"s2"}, {"y"});
    body.output("s2").output("y");
    B b(13);
    b.input("s0", {4}).input("xs", std::move(xs_dims));
    auto& n = b.node("Scan", {"s0", "xs"}, {"s", "ys"}, "scan");
    B::attr_graph(n, "body", body.model().graph());
    B::attr_int(n, "num_scan_inputs", 1);
    B::attr_ints(n, "scan_output_axes", {out_axis});
    b.output("s").output("ys");
    return import_model(b);
  };
  auto scan = scan_model({6, 4}, 1);
  ASSERT_TRUE(scan.ok()) << scan.status().message();
  ASSERT_TRUE(scan->lint().ok()) << scan->lint().message();
  EXPECT_EQ(scan->user_outputs()[0]->spec().to_string(), "f32[4]");
  EXPECT_EQ(scan->user_outputs()[1]->spec().to_string(), "f32[4, 6]");
  EXPECT_EQ(call_ops(*scan->subgraphs()[0].program),
            (std::vector<std::string>{"unsqueeze", "index_select", "squeeze", "add", "neg"}));
  auto symbolic = scan_model({"t", 4}, 0);
  ASSERT_FALSE(symbolic.ok());
  EXPECT_NE(symbolic.status().message().find("scan input 0 (f32[t, 4]) has a symbolic length 't'"),
            std::string::npos)
      << symbolic.status().message();
}

// Sequences live in the importer: their elements are graph values, positions constants.
TEST(OnnxOps, SequencesAreTrackedAtImportTime) {
  B b(12);
  b.input("x", {2, 3}).input("y", {2, 3});
  b.init_ints("front", {0}, true).init_ints("last", {-1}, true);
  b.node("SequenceConstruct", {"x", "y"}, {"s"});
  b.node("SequenceInsert", {"s", "x", "front"}, {"s2"});
  b.node("SequenceAt", {"s2", "last"}, {"a"});
  auto& cat = b.node("ConcatFromSequence", {"s2"}, {"c"});
  B::attr_int(cat, "axis", 0);
  B::attr_int(cat, "new_axis", 1);
  b.node("Add", {"a", "c"}, {"sum"});
  b.node("SequenceLength", {"s2"}, {"n"});
  auto& split = b.node("SplitToSequence", {"x"}, {"parts"});
  B::attr_int(split, "axis", 1);
  B::attr_int(split, "keepdims", 0);
  b.node("SequenceAt", {"parts", "last"}, {"col"});
  b.output("sum").output("n").output("col");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->lint().ok()) << p->lint().message();
  std::vector<std::string> specs;
  for (const Node* n : p->user_outputs()) specs.push_back(n->spec().to_string());
  EXPECT_EQ(specs, (std::vector<std::string>{"f32[3, 2, 3]", "i64[]", "f32[2]"}));
  // The element SequenceAt returns is y itself: the add reads the graph input.
  const Node* add = op(*p, OpId::kAdd);
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->arg(0).node()->name(), "y");
}

TEST(OnnxOpsErrors, SequenceMisuseIsRefusedClearly) {
  B b(12);
  b.input("x", {2, 3});
  b.init_ints("two", {2}, true);
  b.node("SequenceConstruct", {"x", "x"}, {"s"});
  b.node("SequenceAt", {"s", "two"}, {"y"}, "at");
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("input 'position': 2 is outside [-2, 1] for a sequence of 2 "
                                      "tensors"),
            std::string::npos)
      << p.status().message();
  B o(12);
  o.input("x", {2, 3});
  o.node("SequenceConstruct", {"x"}, {"s"});
  o.output("s");
  auto q = import_model(o);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("graph output 's': value 's' is a sequence where a tensor is "
                                      "expected"),
            std::string::npos)
      << q.status().message();
}

// ONNX's optimizer ops (ai.onnx.preview.training) become element-wise graphs; a model may import
// that domain alone.
TEST(OnnxOps, OptimizerStepsAreElementwise) {
  B b(13);
  b.model().clear_opset_import();
  auto* op = b.model().add_opset_import();
  op->set_domain("ai.onnx.preview.training");
  op->set_version(1);
  b.input("r", {}).input("t", {}, onnx::TensorProto::INT64);
  b.input("x", {4}).input("g", {4}).input("v", {4}).input("h", {4});
  auto& adam = b.node("Adam", {"r", "t", "x", "g", "v", "h"}, {"x_new", "v_new", "h_new"});
  adam.set_domain("ai.onnx.preview.training");
  B::attr_float(adam, "norm_coefficient_post", 0.1f);
  b.output("x_new").output("v_new").output("h_new");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->lint().ok()) << p->lint().message();
  std::vector<std::string> specs;
  for (const Node* n : p->user_outputs()) specs.push_back(n->spec().to_string());
  EXPECT_EQ(specs, (std::vector<std::string>{"f32[4]", "f32[4]", "f32[4]"}));
  B bad(13);
  bad.input("r", {2}).input("t", {}, onnx::TensorProto::INT64).input("x", {4}).input("g", {4});
  bad.input("h", {4});
  auto& ada = bad.node("Adagrad", {"r", "t", "x", "g", "h"}, {"x_new", "h_new"}, "step");
  ada.set_domain("ai.onnx.preview.training");
  bad.output("x_new");
  auto q = import_model(bad);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("input 'R' ('r'): got f32[2], expected a scalar"),
            std::string::npos)
      << q.status().message();
}

// Pads the model computes are read when the program runs; a padded dim is a symbol.
TEST(OnnxOps, RuntimePadsAreDynamicPad) {
  B b(18);
  b.input("x", {2, 3}).input("pads", {2}, onnx::TensorProto::INT64);
  b.init_ints("axes", {-1});
  auto& n = b.node("Pad", {"x", "pads", "", "axes"}, {"y"}, "p");
  B::attr_str(n, "mode", "edge");
  b.output("y");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(call_ops(*p), std::vector<std::string>{"dynamic_pad"});
  const Node* pad = p->user_outputs()[0];
  EXPECT_EQ(pad->spec().to_string(), "f32[2, p_d1]");
  EXPECT_EQ(pad->kwarg("mode").to_str(), "replicate");
  EXPECT_EQ(pad->kwarg("axes").to_ints(), std::vector<int64_t>{1});
}

// A window of a constant size is a constant; of a size the model computes, an arange through
// cos. DFT is two matrix products with constant cos / sin matrices [n, bins].
TEST(OnnxOps, WindowsAndDftDecompose) {
  B b(17);
  b.input("n", {}, onnx::TensorProto::INT64).input("x", {2, 9, 1});
  b.init_ints("five", {5}, true);
  b.init_ints("len", {12}, true);
  b.node("HannWindow", {"five"}, {"c"}, "c");
  B::attr_int(b.node("BlackmanWindow", {"n"}, {"w"}, "w"), "periodic", 0);
  B::attr_int(b.node("DFT", {"x", "len"}, {"f"}, "f"), "onesided", 1);
  b.output("c").output("w").output("f");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->lint().ok()) << p->lint().message();
  EXPECT_EQ(p->user_outputs()[0]->op(), OpKind::kPlaceholder);  // folded to a constant
  EXPECT_EQ(p->user_outputs()[1]->spec().to_string(), "f32[w_2_d0]");  // the arange, third node of w
  EXPECT_EQ(p->user_outputs()[2]->spec().to_string(), "f32[2, 7, 2]");
  const std::vector<std::string> ops = call_ops(*p);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "dynamic_arange"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "matmul"), 2);
}

// BitShift, GridSample and Det map to one kiln op each; ReverseSequence is a gather and MaxUnpool a
// scatter into zeros.
TEST(OnnxOps, ShiftsGridSampleDetReverseSequenceMaxUnpool) {
  B b(16);
  b.input("a", {3}, onnx::TensorProto::UINT64).input("s", {3}, onnx::TensorProto::UINT64);
  b.input("img", {1, 2, 4, 4}).input("grid", {1, 3, 3, 2}).input("m", {5, 3, 3});
  b.input("seq", {4, 2}).input("lens", {2}, onnx::TensorProto::INT64);
  b.input("v", {1, 1, 2, 2}).input("i", {1, 1, 2, 2}, onnx::TensorProto::INT64);
  B::attr_str(b.node("BitShift", {"a", "s"}, {"l"}, "l"), "direction", "LEFT");
  B::attr_str(b.node("GridSample", {"img", "grid"}, {"g"}, "g"), "mode", "nearest");
  b.node("Det", {"m"}, {"d"}, "d");
  B::attr_int(b.node("ReverseSequence", {"seq", "lens"}, {"r"}, "r"), "batch_axis", 1);
  auto& u = b.node("MaxUnpool", {"v", "i"}, {"u"}, "u");
  B::attr_ints(u, "kernel_shape", {2, 2});
  B::attr_ints(u, "strides", {2, 2});
  b.output("l").output("g").output("d").output("r").output("u");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->lint().ok()) << p->lint().message();
  const auto& outs = p->user_outputs();
  EXPECT_EQ(outs[0]->target(), OpId::kBitwiseLeftShift);
  EXPECT_EQ(outs[0]->spec().to_string(), "u64[3]");
  EXPECT_EQ(outs[1]->target(), OpId::kGridSample);
  EXPECT_EQ(outs[1]->kwarg("mode").to_str(), "nearest");
  EXPECT_EQ(outs[1]->spec().to_string(), "f32[1, 2, 3, 3]");
  EXPECT_EQ(outs[2]->target(), OpId::kDet);
  EXPECT_EQ(outs[2]->spec().to_string(), "f32[5]");
  EXPECT_EQ(outs[3]->target(), OpId::kGather);
  EXPECT_EQ(outs[3]->spec().to_string(), "f32[4, 2]");
  EXPECT_EQ(outs[4]->spec().to_string(), "f32[1, 1, 4, 4]");
}

// Bad attributes of the new imports are errors that name the attribute.
TEST(OnnxOps, ShiftsDftAndMaxUnpoolNameTheirBadAttributes) {
  struct Case {
    const char* op;
    const char* attr;
    std::vector<int64_t> value;
    const char* message;
  };
  const Case cases[] = {
      {"DFT", "axis", {3}, "attribute 'axis': got 3, expected a signal axis in [1, 2]"},
      {"MaxUnpool", "strides", {2, 2, 2}, "attribute 'strides' has 3 values, expected 2"},
      {"MaxUnpool", "kernel_shape", {2, 0}, "attribute 'kernel_shape' has a non-positive value 0"},
  };
  for (const Case& c : cases) {
    B b(17);
    b.input("x", {1, 2, 2, 2}).input("i", {1, 2, 2, 2}, onnx::TensorProto::INT64);
    auto& n = b.node(c.op, std::string(c.op) == "DFT" ? std::vector<std::string>{"x"}
                                                       : std::vector<std::string>{"x", "i"},
                     {"y"}, "n");
    if (std::string(c.op) == "MaxUnpool" && std::string(c.attr) != "kernel_shape") {
      B::attr_ints(n, "kernel_shape", {2, 2});
    }
    if (std::string(c.attr) == "axis") {
      B::attr_int(n, c.attr, c.value[0]);
    } else {
      B::attr_ints(n, c.attr, c.value);
    }
    b.output("y");
    auto p = import_model(b);
    ASSERT_FALSE(p.ok()) << c.op;
    EXPECT_THAT(p.status().message(), ::testing::HasSubstr(c.message)) << c.op;
  }
  B b(16);
  b.input("a", {3}, onnx::TensorProto::UINT8).input("s", {3}, onnx::TensorProto::UINT8);
  B::attr_str(b.node("BitShift", {"a", "s"}, {"y"}, "n"), "direction", "UP");
  b.output("y");
  auto p = import_model(b);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              ::testing::HasSubstr("attribute 'direction': got 'UP', expected LEFT or RIGHT"));
}

// Shape operands the model computes become ops that read them when the program runs; their
// output dims are symbols named after the node.
TEST(OnnxOps, RuntimeShapeOperandsReadWhenTheProgramRuns) {
  B b(13);
  b.input("x", {2, 3}).input("shape", {2}, onnx::TensorProto::INT64);
  b.input("lo", {}, onnx::TensorProto::INT64).input("hi", {}, onnx::TensorProto::INT64);
  b.init_ints("one", {1}, true);
  b.node("Reshape", {"x", "shape"}, {"r"}, "r");
  b.node("Expand", {"x", "shape"}, {"e"}, "e");
  b.node("ConstantOfShape", {"shape"}, {"c"}, "c");
  b.node("Range", {"lo", "hi", "one"}, {"n"}, "n");
  b.output("r").output("e").output("c").output("n");
  auto p = import_model(b);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->lint().ok()) << p->lint().message();
  EXPECT_EQ(call_ops(*p), (std::vector<std::string>{"dynamic_reshape", "dynamic_expand",
                                                    "dynamic_full", "dynamic_arange"}));
  std::vector<std::string> specs;
  for (const Node* n : p->user_outputs()) specs.push_back(n->spec().to_string());
  EXPECT_EQ(specs, (std::vector<std::string>{"f32[r_d0, r_d1]", "f32[2, 3]", "f32[c_d0, c_d1]",
                                             "i64[n_d0]"}));
}

}  // namespace
}  // namespace kiln::testing
