#!/usr/bin/python3
"""Writes the malformed and hostile ONNX models the kiln tool test feeds to kiln.

Usage: /usr/bin/python3 tests/tools/make_hostile_models.py OUT_DIR

Each model is tiny on disk but declares or computes something huge, names its outputs apart from
its nodes, or reaches outside its folder. Needs Debian's python3-onnx and numpy; no network.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def save(graph, path, opset=17):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def out(name):
    return helper.make_tensor_value_info(name, F, None)


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    p = lambda name: os.path.join(out_dir, name)

    # An initializer whose dims multiply to 2^40 bytes and that carries no data at all.
    t = TensorProto(name="w", data_type=F, dims=[1 << 18, 1 << 20])
    save(helper.make_graph([helper.make_node("Abs", ["w"], ["y"])], "g", [], [out("y")], [t]),
         p("huge_initializer.onnx"))

    # 16 bytes of raw_data for an initializer that declares 8 GiB.
    t = TensorProto(name="w", data_type=F, dims=[1 << 31], raw_data=b"\0" * 16)
    save(helper.make_graph([helper.make_node("Abs", ["w"], ["y"])], "g", [], [out("y")], [t]),
         p("short_raw_data.onnx"))

    # A graph input of 2^40 elements (kiln run makes a random input for it).
    x = helper.make_tensor_value_info("x", F, [1 << 20, 1 << 20])
    save(helper.make_graph([helper.make_node("Abs", ["x"], ["y"])], "g", [x], [out("y")]),
         p("huge_input.onnx"))

    # ConstantOfShape and Expand to 16 GiB.
    shape = numpy_helper.from_array(np.array([4, 1 << 30], dtype=np.int64), "shape")
    one = helper.make_tensor("one", F, [1], [1.0])
    save(helper.make_graph([helper.make_node("ConstantOfShape", ["shape"], ["y"], value=one)],
                           "g", [], [out("y")], [shape]),
         p("constant_of_shape_16g.onnx"))
    c = numpy_helper.from_array(np.ones([1], dtype=np.float32), "c")
    save(helper.make_graph([helper.make_node("Expand", ["c", "shape"], ["y"])], "g", [],
                           [out("y")], [c, shape]),
         p("expand_16g.onnx"))

    # Graph outputs named apart from the nodes that make them (as ONNX Runtime reports them).
    x = helper.make_tensor_value_info("input.1", F, [2, 3])
    nodes = [helper.make_node("Abs", ["input.1"], ["y"], name="Abs"),
             helper.make_node("Softmax", ["y"], ["probs"], name="/head/Softmax")]
    save(helper.make_graph(nodes, "g", [x], [out("y"), out("probs")]), p("named_outputs.onnx"))

    # One 64 MiB weight (random, so no text or compression trick makes it small): partitioning it
    # must hold about two copies (the weight and the delegate blob), not five.
    w = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((1024, 16384), dtype=np.float32), "W")
    x = helper.make_tensor_value_info("x", F, [1, 1024])
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Relu", ["y"], ["z"])]
    save(helper.make_graph(nodes, "g", [x], [out("z")], [w]), p("weight_64m.onnx"))

    # External data reached through a symbolic link that leads out of the model's folder.
    ext = os.path.join(out_dir, "ext")
    os.makedirs(ext, exist_ok=True)
    outside = os.path.join(out_dir, "outside")
    os.makedirs(outside, exist_ok=True)
    with open(os.path.join(outside, "w.bin"), "wb") as f:
        f.write(np.ones([4], dtype=np.float32).tobytes())
    link = os.path.join(ext, "data")
    if not os.path.islink(link):
        os.symlink(outside, link)
    t = TensorProto(name="w", data_type=F, dims=[4])
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="data/w.bin")
    save(helper.make_graph([helper.make_node("Abs", ["w"], ["y"])], "g", [], [out("y")], [t]),
         os.path.join(ext, "model.onnx"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
