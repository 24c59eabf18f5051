"""Seed 000 from Python: partitioners and their WhyNoPartition reports, to_backend, is_same_node,
get_delegated_payload, DelegateMappingBuilder, saving several methods."""
import numpy as np
import pytest

import kiln


@pytest.fixture
def program(tinynet):
    return kiln.load(tinynet, dims={"batch": 1})


def test_demo_partitioner_report_and_payload(program, calib_inputs, tmp_path):
    partitioner = kiln.DemoPartitioner(["add", "relu", "convolution"])
    lowered = kiln.to_backend(program, partitioner)
    assert program.lowered_modules == []  # the given program is left as it was
    assert lowered.lowered_modules and all(m["backend_id"] == "demo" for m in lowered.lowered_modules)
    assert partitioner.reporter.reason_for("_Softmax") is not None
    assert any(e["node_name"] == "_Softmax" for e in partitioner.reporter.entries)
    assert "Node name" in partitioner.reporter.get_table_report() and len(partitioner.reporter) > 0
    payload = kiln.get_delegated_payload(lowered)
    assert set(payload) == {d.name for d in kiln.get_delegates(lowered)}
    assert all(p["backend_id"] == "demo" and len(p["processed_bytes"]) > 0 for p in payload.values())
    # The delegated program computes what the float program does.
    path_a, path_b = tmp_path / "a.kpte", tmp_path / "b.kpte"
    program.save(str(path_a))
    lowered.save(str(path_b))
    feed = calib_inputs[0]
    np.testing.assert_allclose(kiln.Runtime.load(str(path_b)).method()(**feed)[0],
                               kiln.Runtime.load(str(path_a)).method()(**feed)[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.Error, match="nope"):
        kiln.DemoPartitioner(["nope"])


def test_save_several_methods_in_one_file(program, calib_inputs, tmp_path):
    path = tmp_path / "two.kpte"
    kiln.save(str(path), {"first": program, "second": program.clone()})
    runtime = kiln.Runtime.load(str(path))
    assert sorted(runtime.method_names) == ["first", "second"]
    a = runtime.method("first")(**calib_inputs[0])[0]
    b = runtime.method("second")(**calib_inputs[0])[0]
    np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="kiln.Program"):
        kiln.save(str(path), {"first": 3})
    with pytest.raises(TypeError):
        kiln.save(str(path), 3)


def test_symbolic_dims_are_planned_when_saved(tinynet, calib_inputs, tmp_path):
    program = kiln.load(tinynet)
    with pytest.raises(kiln.Error, match="batch"):
        program.save(str(tmp_path / "x.kpte"))
    program.save(str(tmp_path / "x.kpte"), dims={"batch": (1, 4)})
    method = kiln.Runtime.load(str(tmp_path / "x.kpte")).method()
    batch = np.concatenate([calib_inputs[0]["image"], calib_inputs[1]["image"]])
    assert method(batch)[0].shape == (2, 10)
    with pytest.raises(ValueError, match="range"):
        program.save(str(tmp_path / "x.kpte"), dims={"batch": (4, 1)})


def test_is_same_node_and_debug_handles(program):
    clone = program.clone()
    a = program.nodes
    b = clone.nodes
    assert all(kiln.is_same_node(x, y) for x, y in zip(a, b))
    convs = [n for n in a if n.target == "convolution"]
    assert not kiln.is_same_node(convs[0], convs[1])
    assert kiln.assign_debug_handles(clone) == len(b)
    handles = [n.debug_handle for n in clone.nodes]
    assert None not in handles and len(set(handles)) == len(handles)


def test_delegate_mapping_builder(program):
    kiln.assign_debug_handles(program)
    nodes = program.nodes
    generated = kiln.DelegateMappingBuilder(generated_identifiers=True)
    assert generated.insert_delegate_mapping_entry(nodes=nodes[2:4]) == 0
    assert generated.insert_delegate_mapping_entry(handles=[9, None, 7]) == 1
    assert generated.insert_delegate_mapping_entry(nodes=nodes[5]) == 2
    mapping = generated.get_delegate_mapping()
    assert mapping[0] == sorted(n.debug_handle for n in nodes[2:4]) and mapping[1] == [7, 9]
    with pytest.raises(kiln.Error, match="generat"):
        generated.insert_delegate_mapping_entry(handles=[1], identifier=5)

    named = kiln.DelegateMappingBuilder()
    assert named.insert_delegate_mapping_entry(handles=3, identifier="conv") == "conv"
    with pytest.raises(kiln.Error, match="conv"):
        named.insert_delegate_mapping_entry(handles=4, identifier="conv")
    with pytest.raises(kiln.Error):
        named.insert_delegate_mapping_entry(identifier="x")  # neither nodes nor handles
    with pytest.raises(TypeError):
        named.insert_delegate_mapping_entry(handles=[1], identifier=1.5)
    with pytest.raises(TypeError, match="kiln.Node"):
        named.insert_delegate_mapping_entry(nodes=["conv"], identifier="y")
    with pytest.raises(TypeError, match="handles"):
        named.insert_delegate_mapping_entry(handles=["3"], identifier="z")
