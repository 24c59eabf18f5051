"""kiln.Runtime and kiln.Method: program files in, numpy out; HTP lowering from Python."""
import gc

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")


def small_cnn():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 10)).eval()
    x = torch.randn(1, 3, 8, 8)
    return model, x


def htp_specs(use_fp16=True, **kwargs):
    backend = kiln.generate_htp_compiler_spec(use_fp16=use_fp16)
    return kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8650, backend, **kwargs)


def compiled(tmp_path, specs=None, name="m.kpte"):
    model, x = small_cnn()
    program = kiln.from_torch(model, (x,), input_names=["x"], output_names=["logits"])
    if specs is not None:
        program = kiln.to_backend(program, kiln.QnnPartitioner(specs))
    path = tmp_path / name
    program.save(str(path))
    with torch.no_grad():
        want = model(x).numpy()
    return path, x.numpy(), want, program


def test_portable_program_matches_torch(tmp_path):
    path, x, want, program = compiled(tmp_path)
    assert program.lowered_modules == []
    rt = kiln.Runtime.load(str(path))
    assert rt.method_names == ["forward"]
    method = rt.method("forward")
    assert method.input_names == ["x"] and method.output_names == ["logits"]
    (got,) = method(x)
    assert got.dtype == np.float32 and got.shape == (1, 10)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    (named,) = method(x=x)
    np.testing.assert_array_equal(named, got)
    # From bytes, and through kiln.load.
    (again,) = kiln.Runtime.load(path.read_bytes()).method()(x)
    np.testing.assert_array_equal(again, got)
    assert isinstance(kiln.load(path), kiln.Runtime)


def test_htp_fp16_matches_torch_within_half_precision(tmp_path):
    path, x, want, program = compiled(tmp_path, htp_specs(use_fp16=True))
    assert [m["backend_id"] for m in program.lowered_modules] == ["htp"]
    (got,) = kiln.Runtime.load(str(path)).method(num_threads=2)(x)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    np.testing.assert_array_equal(got, got.astype(np.float16).astype(np.float32))


def test_profiles_and_intermediate_outputs(tmp_path):
    with pytest.warns(UserWarning, match="dump"):
        specs = htp_specs(use_fp16=True, profile=True, dump_intermediate_outputs=True)
    path, x, _, _ = compiled(tmp_path, specs)
    method = kiln.Runtime.load(str(path)).method()
    method(x)
    (profile,) = method.profiles
    assert profile["graph"] == "forward" and profile["level"] == "detailed" and profile["total_ms"] > 0
    assert len(profile["ops"]) >= 4 and all(op["duration_us"] >= 0 for op in profile["ops"])
    assert '"traceEvents"' in method.chrome_trace
    dumps = method.intermediate_outputs
    assert len(dumps) >= 4 and all(isinstance(v, np.ndarray) for v in dumps.values())


def test_inputs_are_converted_or_refused_with_the_input_named(tmp_path):
    path, x, want, _ = compiled(tmp_path)
    method = kiln.Runtime.load(str(path)).method()
    (from_f64,) = method(x.astype(np.float64))  # converted to the input's dtype
    np.testing.assert_allclose(from_f64, want, rtol=1e-4, atol=1e-5)
    (strided,) = method(np.asfortranarray(x))  # made contiguous
    np.testing.assert_allclose(strided, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="input 'x'.*missing"):
        method()
    with pytest.raises(TypeError, match="no input 'y'.*it has: x"):
        method(y=x)
    with pytest.raises(TypeError, match="takes 1 input"):
        method(x, x)
    with pytest.raises(TypeError, match="given twice"):
        method(x, x=x)
    with pytest.raises(kiln.InvalidArgumentError) as e:
        method(np.zeros((1, 3, 9, 9), np.float32))
    assert "x" in str(e.value)
    with pytest.raises(TypeError, match="numpy dtype"):
        method(np.array([["a"]]))


def test_runtime_errors(tmp_path):
    with pytest.raises(kiln.Error) as e:
        kiln.Runtime.load(str(tmp_path / "none.kpte"))
    assert "none.kpte" in str(e.value)
    with pytest.raises(kiln.Error):
        kiln.Runtime.load(b"\x00" * 64)
    path, _, _, _ = compiled(tmp_path)
    rt = kiln.Runtime.load(str(path))
    with pytest.raises(kiln.NotFoundError, match="forward"):
        rt.method("decode")
    with pytest.raises(ValueError, match="num_threads"):
        rt.method(num_threads=0)


def test_arrays_outlive_the_runtime_and_programs_their_modules(tmp_path):
    path, x, want, _ = compiled(tmp_path)
    method = kiln.Runtime.load(str(path)).method()
    outs = [method(x)[0] for _ in range(3)]
    del method
    gc.collect()
    for out in outs:
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
        out += 1  # outputs are the caller's, writable
    # A node keeps its program alive.
    program = kiln.from_torch(*[small_cnn()[0], (torch.randn(1, 3, 8, 8),)])
    node = program.nodes[-1]
    del program
    gc.collect()
    assert node.op == "output"
    # The caller's input may go away right after the call.
    method = kiln.Runtime.load(str(path)).method()
    y = x.copy()
    (got,) = method(y)
    del y
    gc.collect()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_delegation_utilities_and_drawing(tmp_path):
    _, _, _, lowered = compiled(tmp_path, htp_specs(use_fp16=True))
    model, x = small_cnn()
    program = kiln.from_torch(model, (x,), input_names=["x"])
    assert kiln.is_identical_graph(program, program.clone())
    assert not kiln.is_identical_graph(program, lowered)
    assert kiln.get_delegates(program) == []
    (delegate,) = kiln.get_delegates(lowered)
    assert delegate.op == "get_attr" and delegate.name == "lowered_module_0"
    assert kiln.get_non_lowered_nodes(lowered) == []
    assert len(kiln.get_non_lowered_nodes(program)) >= 4
    text = kiln.format_delegated_graph(lowered)
    assert "lowered_module_0" in text and "convolution" in text
    kiln.draw_graph("cnn", str(tmp_path), lowered)
    svg = (tmp_path / "cnn.svg").read_text()
    assert "<svg" in svg and "lowered_module_0: htp, fp16" in svg
    with pytest.raises(kiln.Error, match="plain file name"):
        kiln.draw_graph("a/b", str(tmp_path), lowered)
    assert kiln.tag_constant_data(program) == 0  # nothing tagged: no constant has a tagged user
