#!/usr/bin/python3
"""Writes small single-op ONNX models (opset 17) and seeded inputs for the kiln-vs-ORT check.

Usage: /usr/bin/python3 tests/models/make_op_models.py OUT_DIR

For each case writes OUT_DIR/<case>.onnx and OUT_DIR/<case>.inputs/<input name>.npy, and lists
the cases in OUT_DIR/cases.txt, one a line: the name, then the integer tolerance when it is not
0 (QLinearConv / QLinearMatMul: kiln computes the float op in f32 where ONNX Runtime accumulates
in i32 and requantizes, so an output within f32 rounding of a rounding boundary may differ by
one step). A few cases use opset 21 (16-bit QuantizeLinear / DequantizeLinear), written as IR 10
models without the checker (python3-onnx 1.12 knows opset 17). Needs Debian's python3-onnx and
numpy; no network.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, mapping, numpy_helper

OPSET = 17
F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL


def rng(seed):
    return np.random.default_rng(seed)


class Case:
    def __init__(self, name, nodes, inputs, outputs, inits=None, opset=OPSET, int_tol=0):
        self.name, self.nodes, self.inputs, self.outputs = name, nodes, inputs, outputs
        self.inits = inits or {}
        self.opset, self.int_tol = opset, int_tol


def case(name, op, inputs, out_type=F, inits=None, n_out=1, opset=OPSET, int_tol=0, order=None,
         **attrs):
    """One node `op` reading `inputs` (name -> array) and `inits` (name -> array), in that order
    unless `order` lists the input names ("" for an absent optional input). `out_type` is one
    type for every output or a list of one per output."""
    inits = inits or {}
    names = order if order is not None else list(inputs) + list(inits)
    outs = [f"out{i}" for i in range(n_out)]
    types = out_type if isinstance(out_type, list) else [out_type] * n_out
    node = helper.make_node(op, names, outs, **attrs)
    return Case(name, [node], inputs, list(zip(outs, types)), inits, opset, int_tol)


def cases():
    r = rng(0)
    x4 = r.standard_normal((1, 4, 9, 9)).astype(np.float32)
    x2 = r.standard_normal((3, 5)).astype(np.float32)
    y2 = r.standard_normal((3, 5)).astype(np.float32)
    row = r.standard_normal((5,)).astype(np.float32)
    w = lambda *s: r.standard_normal(s).astype(np.float32)  # noqa: E731
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    out = [
        case("conv", "Conv", {"x": x4}, inits={"w": w(6, 4, 3, 3), "b": w(6)}, pads=[1, 0, 2, 1],
             strides=[2, 1]),
        case("conv_group_dilation", "Conv", {"x": x4}, inits={"w": w(4, 2, 3, 3)}, group=2,
             dilations=[2, 2], pads=[2, 2, 2, 2]),
        case("conv_depthwise", "Conv", {"x": x4}, inits={"w": w(4, 1, 3, 3), "b": w(4)}, group=4,
             pads=[1, 1, 1, 1], strides=[2, 2]),
        case("conv_1x1", "Conv", {"x": x4}, inits={"w": w(8, 4, 1, 1), "b": w(8)}),
        case("conv1d", "Conv", {"x": w(2, 3, 17)}, inits={"w": w(5, 3, 4)}, pads=[2, 1]),
        case("conv_transpose", "ConvTranspose", {"x": x4}, inits={"w": w(4, 3, 3, 3), "b": w(3)},
             strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
        case("gemm", "Gemm", {"a": x2}, inits={"b": w(6, 5), "c": w(6)}, transB=1, alpha=0.5,
             beta=2.0),
        case("matmul_batched", "MatMul", {"a": w(2, 3, 4, 5), "b": w(2, 3, 5, 6)}),
        case("matmul_shared", "MatMul", {"a": w(2, 7, 5)}, inits={"b": w(5, 3)}),
        case("einsum_attention", "Einsum", {"q": w(2, 3, 5, 4), "k": w(2, 3, 6, 4)},
             equation="bhqd,bhkd->bhqk"),
        case("einsum_ellipsis_three", "Einsum", {"a": w(2, 3, 4), "b": w(4, 5), "c": w(5)},
             equation="...ij,jk,k->...i"),
        case("topk", "TopK", {"x": w(3, 7)}, inits={"k": i64(4)}, n_out=2,
             out_type=[F, TensorProto.INT64], axis=-1, largest=1),
        case("add_broadcast", "Add", {"a": x2, "b": row}),
        case("sub", "Sub", {"a": x2, "b": y2}),
        case("mul", "Mul", {"a": x2, "b": row}),
        case("div", "Div", {"a": x2, "b": (np.abs(y2) + 0.5).astype(np.float32)}),
        case("pow", "Pow", {"a": (np.abs(x2) + 0.1).astype(np.float32)},
             inits={"e": np.array(1.7, np.float32)}),
        case("add_int", "Add", {"a": i64(1, 2, 3), "b": i64(10, -20, 30)}, out_type=I64),
        case("relu", "Relu", {"x": x2}),
        case("clip", "Clip", {"x": x2}, inits={"lo": np.array(-0.5, np.float32),
                                                "hi": np.array(0.7, np.float32)}),
        case("sigmoid", "Sigmoid", {"x": x2}),
        case("tanh", "Tanh", {"x": x2}),
        case("hardswish", "HardSwish", {"x": (x2 * 4).astype(np.float32)}),
        case("hardsigmoid", "HardSigmoid", {"x": (x2 * 4).astype(np.float32)}, alpha=0.2, beta=0.4),
        case("leaky_relu", "LeakyRelu", {"x": x2}, alpha=0.1),
        case("prelu", "PRelu", {"x": x4}, inits={"s": w(4, 1, 1)}),
        case("erf", "Erf", {"x": x2}),
        case("softmax", "Softmax", {"x": x2}, axis=0),
        case("log_softmax", "LogSoftmax", {"x": x2}, axis=-1),
        case("batch_norm", "BatchNormalization", {"x": x4},
             inits={"s": w(4), "b": w(4), "m": w(4), "v": (np.abs(w(4)) + 0.5).astype(np.float32)}),
        case("layer_norm", "LayerNormalization", {"x": w(2, 3, 8)}, inits={"s": w(8), "b": w(8)},
             axis=-1, epsilon=1e-5),
        case("instance_norm", "InstanceNormalization", {"x": x4}, inits={"s": w(4), "b": w(4)}),
        case("global_avg_pool", "GlobalAveragePool", {"x": x4}),
        case("avg_pool", "AveragePool", {"x": x4}, kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1], count_include_pad=0, ceil_mode=1),
        case("avg_pool_include_pad", "AveragePool", {"x": x4}, kernel_shape=[2, 3], strides=[2, 2],
             pads=[1, 1, 1, 1], count_include_pad=1),
        case("max_pool", "MaxPool", {"x": x4}, kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1]),
        case("max_pool_ceil", "MaxPool", {"x": x4}, kernel_shape=[2, 2], strides=[2, 2],
             ceil_mode=1),
        case("flatten", "Flatten", {"x": x4}, axis=2),
        case("reshape", "Reshape", {"x": x4}, inits={"s": i64(0, -1, 3)}),
        case("transpose", "Transpose", {"x": x4}, perm=[0, 2, 3, 1]),
        case("squeeze", "Squeeze", {"x": w(3, 1, 5, 1)}, inits={"axes": i64(1, 3)}),
        case("unsqueeze", "Unsqueeze", {"x": x2}, inits={"axes": i64(0, 3)}),
        case("concat", "Concat", {"a": x2, "b": y2}, axis=1),
        case("split", "Split", {"x": w(6, 4)}, inits={"sizes": i64(2, 4)}, n_out=2, axis=0),
        case("slice", "Slice", {"x": x4}, inits={"st": i64(1, -7), "en": i64(100, -1),
                                                  "ax": i64(2, 3), "sp": i64(2, 1)}),
        case("gather", "Gather", {"x": x2}, inits={"i": i64(2, 0, -1)}, axis=0),
        case("gather_axis1", "Gather", {"x": x2}, inits={"i": np.array([[1, 4], [0, 0]], np.int64)},
             axis=1),
        case("expand", "Expand", {"x": w(3, 1)}, inits={"s": i64(2, 3, 4)}),
        case("pad_constant", "Pad", {"x": x4}, inits={"p": i64(0, 0, 1, 2, 0, 0, 3, 0),
                                                      "v": np.array(0.5, np.float32)}),
        case("pad_reflect", "Pad", {"x": x4}, inits={"p": i64(0, 0, 2, 1, 0, 0, 1, 2)},
             mode="reflect"),
        case("pad_edge", "Pad", {"x": x4}, inits={"p": i64(0, 0, 1, 1, 0, 0, 2, 2)}, mode="edge"),
        case("resize_nearest", "Resize", {"x": x4},
             inits={"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 2, 2], np.float32)},
             mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        case("resize_linear_half_pixel", "Resize", {"x": x4},
             inits={"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 2, 2], np.float32)},
             mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
        case("resize_linear_align", "Resize", {"x": x4},
             inits={"roi": np.zeros(0, np.float32), "sc": np.zeros(0, np.float32),
                    "sz": i64(1, 4, 5, 13)},
             mode="linear", coordinate_transformation_mode="align_corners"),
        # The resize op (any rank, every mode): what the upsample ops do not compute.
        case("resize_cubic_half_pixel", "Resize", {"x": x4},
             inits={"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 1.6, 0.7], np.float32)},
             mode="cubic"),
        case("resize_cubic_exclude_outside", "Resize", {"x": x4},
             inits={"roi": np.zeros(0, np.float32), "sc": np.zeros(0, np.float32),
                    "sz": i64(1, 4, 9, 3)},
             mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1,
             coordinate_transformation_mode="asymmetric"),
        case("resize_nearest_round_prefer_floor", "Resize", {"x": x4},
             inits={"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 1.5, 2.5], np.float32)}),
        case("resize_nearest_3d_ceil", "Resize",
             {"x": rng(7).standard_normal((2, 5, 3)).astype(np.float32)},
             inits={"roi": np.zeros(0, np.float32), "sc": np.array([1, 1.7, 3], np.float32)},
             coordinate_transformation_mode="align_corners", nearest_mode="ceil"),
        case("resize_linear_tf_crop", "Resize", {"x": x4},
             inits={"roi": np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.3], np.float32),
                    "sc": np.zeros(0, np.float32), "sz": i64(1, 4, 5, 7)},
             mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
             extrapolation_value=-2.0),
        case("cast", "Cast", {"x": (x2 * 10).astype(np.float32)}, out_type=TensorProto.INT32,
             to=TensorProto.INT32),
        case("where", "Where", {"c": x2 > 0, "a": x2, "b": y2}),
        case("equal", "Equal", {"a": i64(1, 2, 3), "b": i64(1, 0, 3)}, out_type=B),
        case("less", "Less", {"a": x2, "b": y2}, out_type=B),
        case("greater", "Greater", {"a": x2, "b": row}, out_type=B),
        case("not", "Not", {"a": x2 > 0}, out_type=B),
        case("and", "And", {"a": x2 > 0, "b": y2 > 0}, out_type=B),
        case("or", "Or", {"a": x2 > 0, "b": y2 > 0}, out_type=B),
        case("reduce_mean", "ReduceMean", {"x": x4}, axes=[2, 3], keepdims=1),
        case("reduce_sum", "ReduceSum", {"x": x4}, inits={"axes": i64(1)}, keepdims=0),
        case("reduce_max", "ReduceMax", {"x": x4}, axes=[1], keepdims=0),
        case("reduce_min", "ReduceMin", {"x": x4}, axes=[-1], keepdims=1),
        case("argmax", "ArgMax", {"x": x2}, out_type=I64, axis=1, keepdims=0),
        case("cumsum", "CumSum", {"x": x2}, inits={"axis": np.array(1, np.int64)}),
        case("range", "Range", {}, out_type=I64, inits={"s": np.array(2, np.int64),
                                                        "l": np.array(11, np.int64),
                                                        "d": np.array(3, np.int64)}),
        case("identity", "Identity", {"x": x2}),
        case("depth_to_space", "DepthToSpace", {"x": w(1, 8, 2, 3)}, blocksize=2, mode="CRD"),
        case("depth_to_space_dcr", "DepthToSpace", {"x": w(1, 8, 2, 3)}, blocksize=2),
        case("space_to_depth", "SpaceToDepth", {"x": w(1, 2, 4, 6)}, blocksize=2),
        case("quantize", "QuantizeLinear", {"x": (x2 * 3).astype(np.float32)},
             out_type=TensorProto.UINT8,
             inits={"s": np.array(0.05, np.float32), "z": np.array(128, np.uint8)}),
        case("dequantize", "DequantizeLinear",
             {"q": r.integers(-128, 127, (3, 5)).astype(np.int8)},
             inits={"s": np.array(0.1, np.float32), "z": np.array(-3, np.int8)}),
    ]
    return (out + quant_cases() + if_cases() + loop_cases() + value_shaped_cases()
            + volume_cases() + coverage_cases())


def if_cases():
    """If on conditions known only at run time: a cond whose else branch holds a cond of its own,
    its branches reading the graph's input and initializer."""
    x = rng(2).standard_normal((3, 5)).astype(np.float32)
    k = rng(3).standard_normal((5,)).astype(np.float32)
    mk = helper.make_graph
    out_f = lambda n: helper.make_tensor_value_info(n, F, [3, 5])  # noqa: E731
    inner = helper.make_node(
        "If", ["d"], ["inner"],
        then_branch=mk([helper.make_node("Neg", ["x"], ["neg"])], "neg_g", [], [out_f("neg")]),
        else_branch=mk([helper.make_node("Mul", ["x", "x"], ["sq"])], "sq_g", [], [out_f("sq")]))
    outer = helper.make_node(
        "If", ["c"], ["y"],
        then_branch=mk([helper.make_node("Add", ["x", "k"], ["sum"]),
                        helper.make_node("Relu", ["sum"], ["relu"])], "relu_g", [], [out_f("relu")]),
        else_branch=mk([inner], "inner_g", [], [out_f("inner")]))
    sig = helper.make_node("Sigmoid", ["y"], ["out0"])
    out = []
    for c, d in [(True, False), (False, True), (False, False)]:
        inputs = {"x": x, "c": np.array(c), "d": np.array(d)}
        name = f"if_runtime_{'t' if c else 'f'}{'t' if d else 'f'}"
        out.append(Case(name, [outer, sig], inputs, [("out0", F)], {"k": k}))
    return out


def loop_cases():
    """Loop with a condition computed in the body (the trip count known only at run time, zero
    trips too), Loop with a constant trip count and no condition, and Scan with reversed and
    non-leading axes."""
    mk, vi = helper.make_graph, helper.make_tensor_value_info
    r = rng(4)
    x = (r.standard_normal((3, 5)) * 5).astype(np.float32)
    k = (r.standard_normal((5,)) * 0.3).astype(np.float32)
    body = mk([helper.make_node("Mul", ["x_in", "half"], ["h"]),
               helper.make_node("Add", ["h", "k"], ["x_out"]),
               helper.make_node("Abs", ["x_out"], ["a"]),
               helper.make_node("ReduceMax", ["a"], ["m"], keepdims=0),
               helper.make_node("Greater", ["m", "limit"], ["c_out"]),
               helper.make_node("ReduceSum", ["x_out"], ["s"], keepdims=0),
               helper.make_node("Cast", ["i"], ["i_f"], to=F)],
              "converge", [vi("i", I64, []), vi("c_in", B, []), vi("x_in", F, [3, 5])],
              [vi("c_out", B, []), vi("x_out", F, [3, 5]), vi("s", F, []), vi("i_f", F, [])])
    converge = helper.make_node("Loop", ["max_trips", "c", "x"], ["x_final", "sums", "steps"],
                                body=body)
    inits = {"max_trips": np.array(50, np.int64), "half": np.array(0.5, np.float32), "k": k,
             "limit": np.array(1.5, np.float32)}
    outs = [("x_final", F), ("sums", F), ("steps", F)]
    out = [Case(f"loop_converge_{'t' if c else 'f'}", [converge], {"x": x, "c": np.array(c)}, outs,
                inits) for c in (True, False)]

    z = r.standard_normal((2, 3)).astype(np.float32)
    y0 = r.standard_normal((2, 3)).astype(np.float32)
    fixed_body = mk([helper.make_node("Add", ["y_in", "z"], ["y_out"]),
                     helper.make_node("Identity", ["c_in"], ["c_out"]),
                     helper.make_node("Mul", ["y_out", "y_in"], ["p"])],
                    "fixed", [vi("i", I64, []), vi("c_in", B, []), vi("y_in", F, [2, 3])],
                    [vi("c_out", B, []), vi("y_out", F, [2, 3]), vi("p", F, [2, 3])])
    fixed = helper.make_node("Loop", ["four", "", "y0"], ["y", "products"], body=fixed_body)
    out.append(Case("loop_fixed_trips", [fixed], {"y0": y0, "z": z},
                    [("y", F), ("products", F)], {"four": np.array(4, np.int64)}))

    xs = r.standard_normal((6, 4)).astype(np.float32)
    zs = r.standard_normal((4, 6)).astype(np.float32)
    scan_body = mk([helper.make_node("Mul", ["x_row", "z_row"], ["xz"]),
                    helper.make_node("Add", ["s_in", "xz"], ["s_out"]),
                    helper.make_node("Mul", ["s_out", "two"], ["y_row"])],
                   "scan_body", [vi("s_in", F, [4]), vi("x_row", F, [4]), vi("z_row", F, [4])],
                   [vi("s_out", F, [4]), vi("y_row", F, [4])])
    scan = helper.make_node("Scan", ["s0", "xs", "zs"], ["s", "ys"], body=scan_body,
                            num_scan_inputs=2, scan_input_axes=[0, 1],
                            scan_input_directions=[0, 1], scan_output_axes=[1],
                            scan_output_directions=[1])
    out.append(Case("scan_axes_reversed", [scan],
                    {"s0": r.standard_normal((4,)).astype(np.float32), "xs": xs, "zs": zs},
                    [("s", F), ("ys", F)], {"two": np.array(2, np.float32)}))
    return out


def volume_cases():
    """3-D convolution (grouped, strided, dilated, padded) and 3-D max / average pooling."""
    r = rng(6)
    x = r.standard_normal((2, 4, 7, 8, 9)).astype(np.float32)
    w = lambda *s: r.standard_normal(s).astype(np.float32)  # noqa: E731
    return [
        case("conv3d", "Conv", {"x": x}, inits={"w": w(6, 2, 3, 2, 3), "b": w(6)}, group=2,
             pads=[1, 0, 2, 1, 1, 0], strides=[2, 1, 2], dilations=[1, 2, 1]),
        case("max_pool3d", "MaxPool", {"x": x}, kernel_shape=[3, 2, 3], strides=[2, 2, 1],
             pads=[1, 0, 1, 1, 1, 1], dilations=[1, 2, 1], ceil_mode=1),
        case("avg_pool3d", "AveragePool", {"x": x}, kernel_shape=[2, 3, 3], strides=[1, 2, 2],
             pads=[1, 1, 0, 0, 1, 1]),
        case("avg_pool3d_pad", "AveragePool", {"x": x}, kernel_shape=[3, 3, 2],
             strides=[2, 2, 2], pads=[1, 1, 1, 1, 1, 1], count_include_pad=1, ceil_mode=1),
    ]


def coverage_cases():
    """GridSample, unsigned 32/64-bit arithmetic and BitShift, Det, DFT, the window functions,
    ReverseSequence, MaxUnpool, training-mode BatchNormalization, 1-D ConvTranspose and pooling
    padded wider than half the window, Einsum diagonals."""
    r = rng(7)
    f = lambda *s: r.standard_normal(s).astype(np.float32)  # noqa: E731
    U32, U64, I64 = TensorProto.UINT32, TensorProto.UINT64, TensorProto.INT64
    img = f(2, 3, 5, 6)
    grid = (r.random((2, 4, 7, 2)) * 2.6 - 1.3).astype(np.float32)  # reaches past the edges
    u32 = r.integers(0, 2**32, (3, 4), dtype=np.uint64).astype(np.uint32)
    u64 = r.integers(0, 2**63, (3, 4), dtype=np.uint64) * np.uint64(2)
    shifts = lambda t: r.integers(0, np.iinfo(t).bits, (3, 4)).astype(t)  # noqa: E731
    pooled = np.array([[[[5.0, 7.0], [2.0, 9.0]]]], np.float32)
    where = np.array([[[[5, 3], [12, 15]]]], np.int64)  # a 2x2 max pool's picks in 4x4
    return [
        case("grid_sample_bilinear", "GridSample", {"x": img, "g": grid}, opset=16),
        case("grid_sample_bicubic_reflect", "GridSample", {"x": img, "g": grid}, opset=16,
             mode="bicubic", padding_mode="reflection", align_corners=1),
        case("grid_sample_nearest_border", "GridSample", {"x": img, "g": grid}, opset=16,
             mode="nearest", padding_mode="border"),
        case("shift_left_u32", "BitShift", {"x": u32, "s": shifts(np.uint32)}, out_type=U32,
             direction="LEFT"),
        case("shift_right_u64", "BitShift", {"x": u64, "s": shifts(np.uint64)}, out_type=U64,
             direction="RIGHT"),
        case("max_u64", "Max", {"a": u64, "b": u64[::-1].copy()}, out_type=U64),
        case("mod_u32", "Mod", {"a": u32, "b": (u32 % 1000 + 1).astype(np.uint32)}, out_type=U32),
        case("det", "Det", {"x": f(3, 4, 4)}),
        case("dft_onesided_padded", "DFT", {"x": f(2, 9, 3, 1)}, opset=17, order=["x", "n"],
             inits={"n": np.array(12, np.int64)}, onesided=1),
        case("dft_inverse_axis2", "DFT", {"x": f(2, 3, 8, 2)}, opset=17, axis=2, inverse=1),
        case("hann_window_runtime", "HannWindow", {"n": np.array(11, np.int64)}, opset=17),
        case("blackman_window_symmetric", "BlackmanWindow", {"n": np.array(9, np.int32)},
             opset=17, periodic=0),
        case("reverse_sequence", "ReverseSequence",
             {"x": f(5, 3, 2), "lens": np.array([5, 1, 3], np.int64)}, batch_axis=1,
             time_axis=0),
        case("max_unpool", "MaxUnpool", {"x": pooled, "i": where}, kernel_shape=[2, 2],
             strides=[2, 2]),
        case("batch_norm_training", "BatchNormalization",
             {"x": f(4, 3, 5, 2), "s": f(3), "b": f(3), "m": f(3), "v": np.abs(f(3)) + 0.5},
             n_out=3, opset=15, training_mode=1, momentum=0.8),
        case("conv_transpose_1d", "ConvTranspose", {"x": f(2, 4, 9)},
             inits={"w": f(4, 3, 3), "b": f(3)}, strides=[2], pads=[1, 0], output_padding=[1]),
        case("max_pool_wide_pad", "MaxPool", {"x": f(1, 2, 6, 7)}, kernel_shape=[3, 2],
             pads=[2, 0, 1, 1], strides=[2, 1]),
        case("avg_pool_wide_pad", "AveragePool", {"x": f(1, 2, 6, 7)}, kernel_shape=[3, 3],
             pads=[2, 1, 2, 2], strides=[1, 2]),
        case("avg_pool_wide_pad_counted", "AveragePool", {"x": f(1, 2, 6, 7)},
             kernel_shape=[3, 3], pads=[2, 2, 0, 2], count_include_pad=1),
        case("einsum_diagonal", "Einsum", {"x": f(2, 4, 4), "y": f(4, 3)}, equation="bii,ij->bj"),
        case("einsum_trace", "Einsum", {"x": f(5, 5)}, equation="ii"),
    ]


def value_shaped_cases():
    """Ops whose output size is known only when they run: NonZero, Compress, NonMaxSuppression,
    Unique, and Pad / OneHot / Split fed sizes the model computes."""
    r = rng(5)
    I64 = TensorProto.INT64
    sparse = (r.standard_normal((3, 4)) * (r.random((3, 4)) > 0.5)).astype(np.float32)
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11],
                       [1, 10.1, 0, 11.1], [0, 100, 1, 101]]], np.float32)
    scores = r.random((1, 2, 6)).astype(np.float32)
    dup = np.array([[1, 2], [3, 4], [1, 2], [0, 9], [3, 4]], np.float32)
    return [
        case("nonzero", "NonZero", {"x": sparse}, out_type=I64),
        case("compress_axis", "Compress",
             {"x": sparse, "c": np.array([True, False, True, True])}, axis=1),
        case("compress_flat", "Compress",
             {"x": sparse, "c": np.array([False, True, True, False, True])}),
        case("nms", "NonMaxSuppression", {"boxes": boxes, "scores": scores}, out_type=I64,
             inits={"max": np.array([3], np.int64), "iou": np.array([0.5], np.float32),
                    "thr": np.array([0.1], np.float32)}),
        case("unique_first_seen", "Unique", {"x": np.array([2, 1, 1, 3, 4, 3], np.float32)},
             n_out=4, out_type=[F, I64, I64, I64], sorted=0),
        case("unique_rows", "Unique", {"x": dup}, n_out=4, out_type=[F, I64, I64, I64], axis=0),
        case("pad_runtime", "Pad", {"x": sparse, "pads": np.array([1, 0, 2, 1], np.int64),
                                    "v": np.array(1.5, np.float32)}),
        case("one_hot_runtime_depth", "OneHot",
             {"i": np.array([[0, 4, -1], [2, 7, -5]], np.int64), "depth": np.array(5, np.int64)},
             inits={"values": np.array([0.5, 2], np.float32)}, axis=1),
        case("split_runtime", "Split", {"x": r.standard_normal((7, 2)).astype(np.float32),
                                        "sizes": np.array([2, 4, 1], np.int64)}, n_out=3),
    ]


def quant_cases():
    """QuantizeLinear / DequantizeLinear at 8, 16 and 32 bits, and the integer ops (issue 10)."""
    r = rng(1)
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    x4 = f32(r.standard_normal((1, 3, 7, 7)) * 2)
    u8 = lambda *s: r.integers(0, 256, s).astype(np.uint8)  # noqa: E731
    i8 = lambda *s: r.integers(-128, 128, s).astype(np.int8)  # noqa: E731
    # s8 weights against u8 activations stay in 7 bits: ONNX Runtime's u8 x s8 kernels on CPUs
    # without VNNI (AVX2 vpmaddubsw) saturate pairs of products at int16, which 7 bits cannot
    # reach, so its results stay exact there (its own advice: reduce_range).
    i7 = lambda *s: r.integers(-64, 64, s).astype(np.int8)  # noqa: E731
    scales = lambda n, lo, hi: f32(r.uniform(lo, hi, n))  # noqa: E731
    U8, I8, I32 = TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
    U16, I16 = TensorProto.UINT16, TensorProto.INT16
    qconv_pads = dict(pads=[1, 1, 1, 1], strides=[2, 1])
    return [
        case("quantize_per_axis_i8", "QuantizeLinear", {"x": x4}, out_type=I8, axis=1,
             inits={"s": scales(3, 0.01, 0.05), "z": np.array([-5, 0, 5], np.int8)}),
        case("dequantize_per_axis_i32", "DequantizeLinear",
             {"q": r.integers(-2**20, 2**20, (4, 3)).astype(np.int32)}, axis=0,
             inits={"s": scales(4, 1e-5, 1e-3), "z": np.zeros(4, np.int32)}),
        case("quantize_u16", "QuantizeLinear", {"x": f32(r.standard_normal((3, 5)) * 20)},
             out_type=U16, opset=21,
             inits={"s": np.array(0.001, np.float32), "z": np.array(30000, np.uint16)}),
        case("dequantize_u16", "DequantizeLinear",
             {"q": r.integers(0, 65536, (3, 5)).astype(np.uint16)}, opset=21,
             inits={"s": np.array(0.0003, np.float32), "z": np.array(32768, np.uint16)}),
        case("quantize_i16_per_axis", "QuantizeLinear", {"x": x4}, out_type=I16, opset=21, axis=1,
             inits={"s": scales(3, 1e-4, 1e-3), "z": np.array([-100, 0, 100], np.int16)}),
        case("dequantize_i16", "DequantizeLinear",
             {"q": r.integers(-32768, 32768, (3, 5)).astype(np.int16)}, opset=21,
             inits={"s": np.array(0.002, np.float32), "z": np.array(-7, np.int16)}),
        case("qlinear_conv_u8", "QLinearConv", {"x": u8(1, 3, 7, 7)}, out_type=U8, int_tol=1,
             inits={"xs": np.array(0.02, np.float32), "xz": np.array(120, np.uint8),
                    "w": u8(4, 3, 3, 3), "ws": np.array(0.01, np.float32),
                    "wz": np.array(130, np.uint8), "ys": np.array(0.15, np.float32),
                    "yz": np.array(100, np.uint8),
                    "b": r.integers(-3000, 3000, 4).astype(np.int32)}, **qconv_pads),
        case("qlinear_conv_per_channel", "QLinearConv", {"x": u8(1, 3, 7, 7)}, out_type=U8,
             int_tol=1, inits={"xs": np.array(0.02, np.float32), "xz": np.array(120, np.uint8),
                               "w": i7(5, 3, 3, 3), "ws": scales(5, 0.002, 0.01),
                               "wz": np.zeros(5, np.int8), "ys": np.array(0.1, np.float32),
                               "yz": np.array(128, np.uint8),
                               "b": r.integers(-3000, 3000, 5).astype(np.int32)}, **qconv_pads),
        case("qlinear_conv_s8_grouped", "QLinearConv", {"x": i8(1, 4, 6, 6)}, out_type=I8,
             int_tol=1, group=2, pads=[1, 1, 1, 1],
             inits={"xs": np.array(0.03, np.float32), "xz": np.array(-2, np.int8),
                    "w": i8(6, 2, 3, 3), "ws": scales(6, 0.002, 0.01),
                    "wz": np.zeros(6, np.int8), "ys": np.array(0.08, np.float32),
                    "yz": np.array(3, np.int8)}),
        case("qlinear_matmul_u8", "QLinearMatMul", {"a": u8(2, 3, 8)}, out_type=U8, int_tol=1,
             inits={"as": np.array(0.02, np.float32), "az": np.array(128, np.uint8),
                    "b": u8(8, 5), "bs": np.array(0.03, np.float32),
                    "bz": np.array(120, np.uint8), "ys": np.array(0.2, np.float32),
                    "yz": np.array(110, np.uint8)}),
        case("qlinear_matmul_per_column", "QLinearMatMul", {"a": u8(4, 8)}, out_type=U8, int_tol=1,
             inits={"as": np.array(0.02, np.float32), "az": np.array(128, np.uint8),
                    "b": i7(8, 6), "bs": scales(6, 0.005, 0.02), "bz": np.zeros(6, np.int8),
                    "ys": np.array(0.1, np.float32), "yz": np.array(124, np.uint8)}),
        case("conv_integer", "ConvInteger", {"x": u8(1, 3, 7, 7)}, out_type=I32,
             inits={"w": u8(4, 3, 3, 3), "xz": np.array(100, np.uint8),
                    "wz": np.array(140, np.uint8)}, **qconv_pads),
        case("conv_integer_no_zero_points", "ConvInteger", {"x": u8(1, 2, 5, 5)}, out_type=I32,
             inits={"w": u8(3, 2, 2, 2)}),
        case("matmul_integer", "MatMulInteger", {"a": u8(2, 4, 16)}, out_type=I32,
             inits={"b": i7(16, 3), "az": np.array(7, np.uint8), "bz": np.array(-3, np.int8)}),
        case("matmul_integer_per_column", "MatMulInteger", {"a": u8(5, 300)}, out_type=I32,
             inits={"b": u8(300, 4), "az": np.array(128, np.uint8),
                    "bz": np.array([1, 50, 128, 250], np.uint8)}),
    ]


def to_value_info(name, arr):
    return helper.make_tensor_value_info(name, mapping.NP_TYPE_TO_TENSOR_TYPE[arr.dtype],
                                         list(arr.shape))


def write(c, out_dir):
    graph = helper.make_graph(
        c.nodes, c.name,
        [to_value_info(n, a) for n, a in c.inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in c.outputs],
        [numpy_helper.from_array(a, n) for n, a in c.inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", c.opset)],
                              producer_name="kiln-tests")
    model.ir_version = 10 if c.opset >= 21 else 8
    with open(os.path.join(out_dir, c.name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())
    in_dir = os.path.join(out_dir, c.name + ".inputs")
    os.makedirs(in_dir, exist_ok=True)
    for n, a in c.inputs.items():
        np.save(os.path.join(in_dir, n + ".npy"), a)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    names = []
    for c in cases():
        write(c, out_dir)
        names.append(c.name + (f" {c.int_tol}" if c.int_tol else ""))
    with open(os.path.join(out_dir, "cases.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    print(f"wrote {len(names)} models to {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
