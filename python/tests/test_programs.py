"""The HTP program utilities from Python: capture_program, convert_linear_to_conv2d, tag_quant_io,
from_context_binary, update_spill_fill_size, skip_annotation (with a Python calibration callback)."""
import numpy as np
import pytest

import kiln


def specs(fp16=False, soc=kiln.QcomChipset.SM8650, **kw):
    backend = kiln.generate_htp_compiler_spec(use_fp16=fp16, use_multi_contexts=kw.pop("multi", False))
    return kiln.generate_qnn_executorch_compiler_spec(soc, backend, **kw)


def run(program, feed, tmp_path, name, **save):
    path = tmp_path / f"{name}.kpte"
    program.save(str(path), **save)
    return kiln.Runtime.load(str(path)).method()(**feed)


@pytest.fixture
def program(tinynet):
    return kiln.load(tinynet, dims={"batch": 1})


@pytest.fixture
def quantized(program, calib_inputs):
    return kiln.quantize(program, kiln.QnnQuantizer(), calib_inputs)


def test_capture_program_and_its_pass_config(quantized):
    captured = kiln.capture_program(quantized)
    targets = {n.target for n in captured.nodes}
    assert "permute" in targets  # NHWC around the convolutions
    assert quantized.kir() != captured.kir() and "dequantize_per_tensor" in {n.target for n in quantized.nodes}
    kiln.capture_program(quantized, {"skip_advanced_requant"})
    with pytest.raises(kiln.Error, match="no_such_pass"):
        kiln.capture_program(quantized, {"no_such_pass"})


def test_convert_linear_to_conv2d_keeps_the_outputs(program, calib_inputs, tmp_path):
    want = run(program, calib_inputs[0], tmp_path, "before")[0]
    converted = kiln.convert_linear_to_conv2d(program.clone())
    assert not any(n.target == "linear" for n in converted.nodes)
    got = run(converted, calib_inputs[0], tmp_path, "after")[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_tag_quant_io_with_a_python_dtype_function(quantized, calib_inputs, tmp_path):
    whole = kiln.to_backend(quantized, kiln.QnnPartitioner(specs()))
    want = run(whole, calib_inputs[0], tmp_path, "real")[0]
    tagged_program = quantized.clone()
    seen = []

    def dtype_fn(node):
        seen.append(node.name)
        return np.uint8 if node.name == "image" else None

    (io,) = kiln.tag_quant_io(tagged_program, dtype_fn)
    assert "image" in seen
    assert io["kind"] == "input" and io["name"] == "image" and io["dtype"] == "u8"
    lowered = kiln.to_backend(tagged_program, kiln.QnnPartitioner(specs()))
    image = calib_inputs[0]["image"]
    codes = np.clip(np.round(image / io["scale"]) + io["zero_point"], 0, 255).astype(np.uint8)
    got = run(lowered, {"image": codes}, tmp_path, "codes")[0]
    np.testing.assert_array_equal(got, want)

    untouched = quantized.clone()
    with pytest.raises(kiln.Error, match="uint8 or uint16"):
        kiln.tag_quant_io(untouched, lambda n: "float32" if n.name == "image" else None)
    with pytest.raises(ZeroDivisionError):
        kiln.tag_quant_io(untouched, lambda n: 1 / 0)
    assert untouched.kir() == quantized.kir()  # errors leave the program as it was


def test_from_context_binary_round_trip(program, calib_inputs, tmp_path):
    lowered = kiln.to_backend(program, kiln.QnnPartitioner(specs(fp16=True)))
    want = run(lowered, calib_inputs[2], tmp_path, "lowered")[0]
    (payload,) = kiln.get_delegated_payload(lowered).values()
    ctx = payload["processed_bytes"]
    bundle = kiln.from_context_binary(ctx, "ctx_loader")
    assert bundle["graph_name"] == "forward"
    assert [i["name"] for i in bundle["inputs"]] == ["image"] and bundle["inputs"][0]["dims"] == [1, 3, 32, 32]
    assert bundle["outputs"][0]["dtype"] == "QNN_DATATYPE_FLOAT_16"  # an fp16 graph
    got = run(bundle["exported_program"], calib_inputs[2], tmp_path, "ctx")[0]
    np.testing.assert_array_equal(got, want)
    path = tmp_path / "ctx.bin"
    path.write_bytes(ctx)
    info = {"graph_inputs": bundle["inputs"], "graph_outputs": bundle["outputs"], "graph_name": "forward"}
    again = kiln.from_context_binary(path, "ctx_loader", kiln.QcomChipset.SM8650, custom_info=info)
    np.testing.assert_array_equal(run(again["exported_program"], calib_inputs[2], tmp_path, "ctx2")[0], want)

    bad = dict(info, graph_inputs=[dict(bundle["inputs"][0], dtype="QNN_DATATYPE_COMPLEX")])
    with pytest.raises(kiln.Error, match="QNN_DATATYPE_COMPLEX"):
        kiln.from_context_binary(ctx, "ctx_loader", custom_info=bad)
    with pytest.raises(ValueError, match="graph_name"):
        kiln.from_context_binary(ctx, "ctx_loader", custom_info={"graph_inputs": [], "graph_outputs": []})
    with pytest.raises(kiln.Error):
        kiln.from_context_binary(b"not a context binary", "ctx_loader")
    with pytest.raises(kiln.Error, match="SM8550|SoC"):
        kiln.from_context_binary(ctx, "ctx_loader", kiln.QcomChipset.SM8550)


def test_update_spill_fill_size_over_multi_context_delegates(program):
    torch = pytest.importorskip("torch")
    # Activations of 32 x 192 x 192 halves (2.25 MiB) do not fit the 2 MB of VTCM of SXR1230P.
    net = torch.nn.Sequential(*[m for _ in range(3) for m in (torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.ReLU())])
    torch.manual_seed(0)
    big = kiln.from_torch(net, (torch.randn(1, 32, 192, 192),))
    spec = specs(fp16=True, multi=True, soc=kiln.QcomChipset.SXR1230P)
    shards = [kiln.to_backend(big, kiln.QnnPartitioner(spec, max_partition_nodes=n)) for n in (2, 4)]
    assert all(len(p.lowered_modules) > 1 for p in shards)
    size = kiln.update_spill_fill_size(shards)
    assert size > 0
    for p in shards:
        for payload in kiln.get_delegated_payload(p).values():
            options = kiln.flatbuffer_to_option(payload["compile_specs"][0].value)
            assert options.backend_options.htp_options.max_sf_buf_size == size
    assert kiln.update_spill_fill_size(kiln.to_backend(program, kiln.QnnPartitioner(specs(fp16=True)))) == 0
    with pytest.raises(TypeError):
        kiln.update_spill_fill_size([42])


def test_skip_annotation_with_a_python_callback(program, calib_inputs, tmp_path):
    partitioner = kiln.QnnPartitioner(specs())
    kept = []

    def calibrate(prepared):
        kept.append(prepared)
        for feed in calib_inputs:
            prepared(**feed)

    graph, groups = kiln.skip_annotation(program, kiln.QnnQuantizer(), partitioner, calibration_cb=calibrate,
                                         fp_node_op_set={"softmax"}, fallback_to_cpu=False)
    assert [g["name"] for g in groups] == ["annotated_group_0", "skipped_group_0"]
    assert groups[0]["precision"] == kiln.QnnExecuTorchHtpPrecision.kHtpQuantized
    assert groups[1]["precision"] == kiln.QnnExecuTorchHtpPrecision.kHtpFp16 and groups[1]["nodes"] == ["_Softmax"]
    assert "fp_node_op_set has 'softmax'" in partitioner.reporter.get_table_report()
    want = run(program, calib_inputs[0], tmp_path, "float")[0]
    got = run(graph, calib_inputs[0], tmp_path, "mixed")[0]
    assert np.abs(got - want).max() < 2e-2
    with pytest.raises(kiln.Error, match="gone"):
        kept[0](**calib_inputs[0])  # the prepared model lived for the callback only

    def failing(prepared):
        raise RuntimeError("calibration data missing")
    with pytest.raises(RuntimeError, match="calibration data missing"):
        kiln.skip_annotation(program, kiln.QnnQuantizer(), partitioner, calibration_cb=failing, fp_node_id_set={"_Softmax"})
    with pytest.raises(kiln.Error, match="nope"):
        kiln.skip_annotation(program, kiln.QnnQuantizer(), partitioner, calibration_cb=calibrate, fp_node_id_set={"nope"})
    with pytest.raises(TypeError, match="QnnPartitioner"):
        kiln.skip_annotation(program, kiln.QnnQuantizer(), kiln.DemoPartitioner(), calibration_cb=calibrate)
