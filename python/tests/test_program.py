"""Models in: kiln.load, kiln.from_onnx, kiln.from_torch, and the Program object."""
import numpy as np
import pytest

import kiln


def test_load_onnx_gives_a_program_with_the_models_names(tinynet):
    p = kiln.load(tinynet, dims={"batch": 1})
    assert isinstance(p, kiln.Program)
    assert [i["name"] for i in p.inputs] == ["image"]
    assert p.inputs[0]["dtype"] == "f32" and p.inputs[0]["shape"] == [1, 3, 32, 32]
    assert [o["name"] for o in p.outputs] == ["probs"]
    assert "graph():" in str(p) and "user_output(name=probs)" in str(p)
    assert repr(p).startswith("<kiln.Program: ")
    convs = [n for n in p.nodes if n.target == "convolution"]
    assert convs and convs[0].op == "call_function" and convs[0].spec.startswith("f32[1, ")
    node = p.node(convs[0].name)
    assert node.inputs and node.users
    with pytest.raises(kiln.NotFoundError, match="no node named 'nope'"):
        p.node("nope")


def test_symbolic_dims_stay_symbolic_without_dims(tinynet):
    p = kiln.load(tinynet)
    assert p.inputs[0]["shape"][0] == "batch"


def test_save_kir_round_trips(tinynet, tmp_path):
    p = kiln.load(tinynet, dims={"batch": 1})
    p.save(str(tmp_path / "m.kir"))
    back = kiln.load(tmp_path / "m.kir")
    assert back.kir() == p.kir()
    assert kiln.parse_kir(p.kir()).kir() == p.kir()


def test_from_onnx_takes_bytes_and_protos(tinynet):
    data = tinynet.read_bytes()
    assert kiln.from_onnx(data).kir() == kiln.load(tinynet).kir()
    onnx = pytest.importorskip("onnx")
    assert kiln.from_onnx(onnx.load(str(tinynet))).kir() == kiln.load(tinynet).kir()
    with pytest.raises(TypeError, match="onnx.ModelProto or its serialized bytes"):
        kiln.from_onnx(42)
    with pytest.raises(kiln.ParseError):
        kiln.from_onnx(b"not a model")


def test_load_errors_are_kiln_errors(tinynet, tmp_path):
    with pytest.raises(kiln.IoError) as e:
        kiln.load(tmp_path / "missing.onnx")
    assert "missing.onnx" in str(e.value)
    assert isinstance(e.value, kiln.Error) and isinstance(e.value, OSError)
    bad = tmp_path / "bad.kir"
    bad.write_text("program:\n  this is not kir\n")
    with pytest.raises(kiln.ParseError) as e:
        kiln.load(bad)
    assert "bad.kir" in str(e.value)
    with pytest.raises(ValueError, match="neither .kir nor .kpte"):
        kiln.load(tinynet).save(str(tmp_path / "x.txt"))
    with pytest.raises(ValueError, match="dims apply to ONNX"):
        kiln.load(tmp_path / "m.kpte", dims={"batch": 1})


def test_from_torch_matches_torch_eager():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 8 * 8, 10))
    x = torch.randn(1, 3, 8, 8)
    p = kiln.from_torch(model, (x,), input_names=["x"], output_names=["logits"])
    assert [i["name"] for i in p.inputs] == ["x"] and [o["name"] for o in p.outputs] == ["logits"]
    with pytest.raises(TypeError, match="torch.nn.Module"):
        kiln.from_torch(lambda t: t, (x,))


def test_every_public_name_has_a_docstring_and_a_stub():
    import ast
    import pathlib

    stub = ast.parse((pathlib.Path(kiln.__file__).parent / "__init__.pyi").read_text())
    stubbed = {n.name for n in stub.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    stubbed |= {t.id for n in stub.body if isinstance(n, ast.AnnAssign) for t in [n.target]}
    missing_doc = [name for name in kiln.__all__ if not (getattr(kiln, name).__doc__ or "").strip()
                   and not isinstance(getattr(kiln, name), str)]
    assert missing_doc == []
    assert sorted(set(kiln.__all__) - stubbed) == []
