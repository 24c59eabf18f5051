"""kiln: an ahead-of-time compiler and runtime for neural networks, from Python.

Models come in as ONNX files or protos, kiln text IR (.kir), or torch modules (exported to ONNX in
memory); they are partitioned across backends, lowered to delegate blobs and written as one
program file (.kpte) that :class:`Runtime` loads and runs on numpy arrays.

The names follow ExecuTorch's Qualcomm utilities (``backends/qualcomm/utils/utils.py``) so that a
script written for them ports by changing its imports. Every error kiln reports is raised as a
:class:`Error` subclass carrying kiln's own message.
"""
from __future__ import annotations

import io
import os
from typing import Any, Dict, Mapping, Optional, Sequence

from ._kiln import (  # noqa: F401  (re-exported)
    QCOM_QNN_COMPILE_SPEC,
    CompileSpec,
    DelegateError,
    Error,
    HtpArch,
    InternalError,
    InvalidArgumentError,
    InvalidProgramError,
    IoError,
    Method,
    Node,
    NotFoundError,
    OutOfRangeError,
    ParseError,
    Partitioner,
    Program,
    QcomChipset,
    QnnExecuTorchBackendOptions,
    QnnExecuTorchBackendType,
    QnnExecuTorchHtpBackendOptions,
    QnnExecuTorchHtpPdSession,
    QnnExecuTorchHtpPerformanceMode,
    QnnExecuTorchHtpPrecision,
    QnnExecuTorchLogLevel,
    QnnExecuTorchOptions,
    QnnExecuTorchProfileLevel,
    QnnPartitioner,
    ResourceExhaustedError,
    Runtime,
    SocInfo,
    UnsupportedError,
    draw_graph,
    flatbuffer_to_option,
    format_delegated_graph,
    get_delegates,
    get_non_lowered_nodes,
    is_identical_graph,
    from_onnx,
    generate_htp_compiler_spec,
    generate_qnn_executorch_compiler_spec,
    get_soc_to_arch_map,
    get_soc_to_chipset_map,
    option_to_flatbuffer,
    parse_kir,
    tag_constant_data,
    tag_mutated_buffer,
    to_backend,
)
from ._kiln import _load_program

__all__ = [name for name in dir() if not name.startswith("_") and name not in ("annotations", "io", "os")]
__all__ += ["load", "from_torch"]


def load(path: "os.PathLike[str] | str", dims: Optional[Mapping[str, int]] = None) -> "Program | Runtime":
    """Loads a model or a program file by its extension.

    ``.onnx`` and ``.kir`` give a :class:`Program` (``dims`` fixes symbolic ONNX input dims by name,
    e.g. ``{"batch": 1}``); ``.kpte`` gives a :class:`Runtime` over the program file.
    """
    p = os.fspath(path)
    if p.lower().endswith(".kpte"):
        if dims:
            raise ValueError("kiln.load: dims apply to ONNX models, not to a compiled .kpte")
        return Runtime.load(p)
    return _load_program(p, dict(dims or {}))


def from_torch(
    module: Any,
    example_inputs: Sequence[Any],
    dynamic_axes: Optional[Dict[str, Dict[int, str]]] = None,
    opset: int = 17,
    input_names: Optional[Sequence[str]] = None,
    output_names: Optional[Sequence[str]] = None,
) -> Program:
    """Exports a torch module with Debian's torch (``torch.onnx.export``, in memory) and imports it.

    ``example_inputs`` are the tensors the module is traced with; ``dynamic_axes`` is
    torch.onnx.export's (``{"x": {0: "batch"}}``). Inputs and outputs are named ``input_names`` /
    ``output_names`` when given, else ``input_<i>`` / ``output_<i>``.
    """
    import torch  # the caller has torch: it is handing us a torch module

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_torch: expected a torch.nn.Module, got {type(module).__name__}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if input_names is None:
        input_names = [f"input_{i}" for i in range(len(example_inputs))]
    module = module.eval()
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            module,
            example_inputs,
            buffer,
            opset_version=opset,
            input_names=list(input_names),
            output_names=list(output_names) if output_names is not None else None,
            dynamic_axes=dynamic_axes,
            do_constant_folding=True,
        )
    return from_onnx(buffer.getvalue())
