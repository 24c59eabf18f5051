"""Refcounts and lifetimes (also run under AddressSanitizer: ctest python_asan in the sanitize
build): programs outliving their modules' objects, arrays outliving the runtime, inputs dropped
right after a call, exceptions instead of aborts. No torch here: the sanitizer run loads numpy
and kiln only."""
import gc
import threading

import numpy as np
import pytest

import kiln


@pytest.fixture
def saved(tinynet, tmp_path):
    path = tmp_path / "tiny.kpte"
    kiln.load(tinynet, dims={"batch": 1}).save(str(path))
    return path


def feed(seed=0):
    return np.random.default_rng(seed).standard_normal((1, 3, 32, 32)).astype(np.float32)


def test_outputs_outlive_method_and_runtime(saved):
    rt = kiln.Runtime.load(str(saved))
    method = rt.method()
    outs = [method(feed(i))[0] for i in range(4)]
    want = [o.copy() for o in outs]
    del method, rt
    gc.collect()
    for o, w in zip(outs, want):
        np.testing.assert_array_equal(o, w)
        o[...] = 0  # the caller's memory, writable


def test_method_outlives_its_runtime_object(saved):
    method = kiln.Runtime.load(str(saved)).method()
    gc.collect()
    (a,) = method(feed())
    (b,) = method(feed())
    np.testing.assert_array_equal(a, b)


def test_inputs_may_be_dropped_and_views_are_fine(saved):
    method = kiln.Runtime.load(str(saved)).method()
    big = np.ascontiguousarray(np.stack([feed(1)[0], feed(2)[0]]))
    (first,) = method(big[:1])  # a contiguous view of a larger array
    del big
    gc.collect()
    (again,) = method(feed(1))
    np.testing.assert_array_equal(first, again)


def test_nodes_and_programs_keep_each_other_alive(tinynet):
    nodes = kiln.load(tinynet).nodes
    gc.collect()
    assert [n.name for n in nodes][-1] == "output"
    clone = kiln.load(tinynet).clone()
    gc.collect()
    assert clone.outputs[0]["name"] == "probs"


def test_errors_do_not_abort(saved, tmp_path):
    method = kiln.Runtime.load(str(saved)).method()
    for bad in (np.zeros((2, 3, 32, 32), np.float32), np.zeros((1, 3), np.float32)):
        with pytest.raises(kiln.Error):
            method(bad)
    (ok,) = method(feed())
    assert ok.shape == (1, 10)
    broken = tmp_path / "broken.kpte"
    data = bytearray(saved.read_bytes())
    data[:16] = b"\xff" * 16  # the header
    broken.write_bytes(bytes(data))
    with pytest.raises(kiln.Error):
        kiln.Runtime.load(str(broken)).method()
    for cut in (0, 8, 64, len(data) // 3):
        with pytest.raises(kiln.Error):
            kiln.Runtime.load(bytes(data[:cut])).method()


def test_calls_release_the_gil(saved):
    methods = [kiln.Runtime.load(str(saved)).method() for _ in range(2)]
    results = [None, None]

    def run(i):
        results[i] = [methods[i](feed(i))[0] for _ in range(20)]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(results[0][0], methods[0](feed(0))[0])
    np.testing.assert_array_equal(results[1][-1], methods[1](feed(1))[0])


def test_prepared_and_quantized_outlive_their_inputs(tinynet):
    program = kiln.load(tinynet, dims={"batch": 1})
    prepared = kiln.prepare_pt2e(program, kiln.QnnQuantizer())
    del program
    gc.collect()
    images = [feed(i) for i in range(3)]
    for x in images:
        prepared(x)
    del images
    gc.collect()
    quantized = kiln.convert_pt2e(prepared)
    del prepared
    gc.collect()
    assert any(n.target == "quantize_per_tensor" for n in quantized.nodes)


def test_borrowed_prepared_model_and_callback_errors(tinynet):
    program = kiln.load(tinynet, dims={"batch": 1})
    specs = kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8650,
                                                       kiln.generate_htp_compiler_spec(use_fp16=False))
    kept = []

    def calibrate(prepared):
        kept.append(prepared)
        prepared(feed())

    graph, _ = kiln.skip_annotation(program, kiln.QnnQuantizer(), kiln.QnnPartitioner(specs), calibration_cb=calibrate,
                                    fp_node_op_set={"softmax"})
    del program
    gc.collect()
    with pytest.raises(kiln.Error, match="gone"):
        kept[0](feed())
    assert "released" in repr(kept[0])

    def raising(prepared):
        raise KeyError("missing sample")
    with pytest.raises(KeyError, match="missing sample"):
        kiln.skip_annotation(kiln.load(tinynet, dims={"batch": 1}), kiln.QnnQuantizer(), kiln.QnnPartitioner(specs),
                             calibration_cb=raising)
    assert graph.lowered_modules


def test_multi_graph_programs_outlive_the_result(tinynet, tmp_path):
    backend = kiln.generate_htp_compiler_spec(use_fp16=True)
    blobs = []
    for name in ("a", "b"):
        specs = kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8650, backend, online_prepare=True,
                                                           graph_name=name)
        lowered = kiln.to_backend(kiln.load(tinynet, dims={"batch": 1}), kiln.QnnPartitioner(specs))
        blobs.append(next(iter(kiln.get_delegated_payload(lowered).values()))["processed_bytes"])
    specs = kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8650, backend, multiple_graphs=True)
    multi = kiln.generate_multi_graph_program(specs, blobs)
    programs = multi.programs
    buffer = multi.buffer
    del multi, blobs
    gc.collect()
    runtime = kiln.Runtime.load(buffer)
    del buffer
    gc.collect()
    a = runtime.method("a")(feed())[0]
    b = runtime.method("b")(feed())[0]
    np.testing.assert_array_equal(a, b)
    kiln.save(str(tmp_path / "ab.kpte"), programs)
    assert sorted(kiln.Runtime.load(str(tmp_path / "ab.kpte")).method_names) == ["a", "b"]
