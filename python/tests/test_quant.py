"""Quantization from Python: QnnQuantizer, prepare_pt2e / calibration / convert_pt2e, quantize()."""
import numpy as np
import pytest

import kiln


def run(program, feed, tmp_path, name):
    path = tmp_path / f"{name}.kpte"
    program.save(str(path))
    return kiln.Runtime.load(str(path)).method()(**feed)[0]


def sqnr_db(want, got):
    return 10 * np.log10(np.sum(want.astype(np.float64) ** 2) / max(np.sum((want - got).astype(np.float64) ** 2), 1e-30))


@pytest.fixture
def program(tinynet):
    return kiln.load(tinynet, dims={"batch": 1})


def test_feeds_and_callback_calibrate_alike_and_the_result_tracks_the_float_model(program, calib_inputs, tmp_path):
    q = kiln.QnnQuantizer()
    q.set_default_quant_config(kiln.QuantDtype.use_8a8w, is_conv_per_channel=True, is_linear_per_channel=True)
    by_feeds = kiln.quantize(program, q, calib_inputs, progress=False)

    def callback(prepared):
        for feed in calib_inputs:
            prepared(feed["image"])  # positional, as a torch module is called
    by_callback = kiln.quantize(program, q, callback)
    assert by_feeds.kir() == by_callback.kir()
    targets = {n.target for n in by_feeds.nodes}
    assert {"quantize_per_tensor", "dequantize_per_tensor"} <= targets

    prepared = kiln.prepare_pt2e(program, q)
    assert prepared.input_names == ["image"] and "_stem_stem_0_Conv" in prepared.layers
    assert kiln.calibrate(prepared, calib_inputs, progress=False) == len(calib_inputs) == prepared.samples
    report = kiln.accuracy_report(prepared, kiln.convert_pt2e(prepared), calib_inputs[:4])
    assert "output 'probs': SQNR" in report

    feed = calib_inputs[0]
    want = run(program, feed, tmp_path, "float")
    got = run(by_feeds, feed, tmp_path, "q")
    assert sqnr_db(want, got) > 20


def test_configurations_differ_and_16_bits_is_closer(program, calib_inputs, tmp_path):
    feed = calib_inputs[1]
    want = run(program, feed, tmp_path, "float")
    scores = {}
    for dtype in (kiln.QuantDtype.use_8a8w, kiln.QuantDtype.use_16a16w):
        q = kiln.QnnQuantizer()
        q.set_default_quant_config(dtype, act_observer="minmax")
        scores[dtype] = sqnr_db(want, run(kiln.quantize(program, q, calib_inputs), feed, tmp_path, dtype.name))
    assert scores[kiln.QuantDtype.use_16a16w] > scores[kiln.QuantDtype.use_8a8w] + 10


def test_discard_ops_layer_configs_and_torch_observer_names(program, calib_inputs):
    q = kiln.QnnQuantizer()
    torch = pytest.importorskip("torch")
    q.set_default_quant_config(kiln.QuantDtype.use_8a8w, act_observer=torch.ao.quantization.observer.HistogramObserver)
    q.add_discard_ops(["softmax"])
    q.set_layer_config("_head_head_3_Gemm", kiln.QuantDtype.use_16a8w)
    assert "8a8w" in repr(q) and q.quant_dtype == "8a8w"
    out = kiln.quantize(program, q, calib_inputs[:4])
    softmax = next(n for n in out.nodes if n.target == "softmax")
    assert not any(u.endswith("_q") for u in softmax.users)
    gemm = out.node("_head_head_3_Gemm")
    assert any(out.node(u).spec.startswith("u16") for u in gemm.users)


def test_progress_bar_on_request(program, calib_inputs, capsys):
    q = kiln.QnnQuantizer()
    prepared = kiln.prepare_pt2e(program, q)
    kiln.calibrate(prepared, calib_inputs[:3], progress=True)
    assert "calibrating" in capsys.readouterr().err


def test_errors(program, calib_inputs):
    q = kiln.QnnQuantizer()
    with pytest.raises(NotImplementedError, match="is_qat"):
        q.set_default_quant_config(kiln.QuantDtype.use_8a8w, is_qat=True)
    with pytest.raises(ValueError, match="set both"):
        q.set_default_quant_config(kiln.QuantDtype.use_8a8w, is_conv_per_channel=True, is_linear_per_channel=False)
    with pytest.raises(ValueError, match="act_observer 'nope'"):
        q.set_default_quant_config(kiln.QuantDtype.use_8a8w, act_observer="nope")
    bad = kiln.QnnQuantizer()
    bad.add_discard_nodes(["no_such_node"])
    with pytest.raises(kiln.Error, match="no_such_node"):
        kiln.prepare_pt2e(program, bad)
    prepared = kiln.prepare_pt2e(program, q)
    with pytest.raises(TypeError, match="no input 'x'"):
        prepared(x=np.zeros((1, 3, 32, 32), np.float32))
    with pytest.raises(kiln.Error, match="image"):
        prepared(np.zeros((1, 3, 8, 8), np.float32))
    with pytest.raises(kiln.Error, match="never observed|not observed|calibrat"):
        kiln.convert_pt2e(prepared)
    with pytest.raises(ValueError, match="empty"):
        kiln.quantize(program, q, [])
    with pytest.raises(ValueError, match="no sample"):
        kiln.quantize(program, q, lambda prepared: None)
