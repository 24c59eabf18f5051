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
import sys
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

from ._kiln import (  # noqa: F401  (re-exported)
    QCOM_QNN_COMPILE_SPEC,
    CompileSpec,
    DelegateError,
    DelegateMappingBuilder,
    DemoPartitioner,
    MultiGraphProgram,
    PreparedModel,
    QnnQuantizer,
    QuantDtype,
    WhyNoPartitionReporter,
    accuracy_report,
    assign_debug_handles,
    capture_program,
    convert_linear_to_conv2d,
    convert_pt2e,
    from_context_binary,
    generate_multi_graph_program,
    get_delegated_payload,
    is_same_node,
    prepare_pt2e,
    save,
    update_spill_fill_size,
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
from ._kiln import _load_program, _skip_annotation, _tag_quant_io


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


def _to_program(model: Any, sample_input: Any) -> Program:
    """A Program as it is, or a torch module exported with ``sample_input``."""
    if isinstance(model, Program):
        return model
    if sample_input is None:
        raise TypeError(f"expected a kiln.Program, or a torch module with sample_input; got {type(model).__name__}")
    return from_torch(model, sample_input)


def _feed_call(prepared: PreparedModel, feed: Any) -> None:
    """Calls ``prepared`` with one feed: {name: array}, a tuple / list of arrays, or one array."""
    if isinstance(feed, Mapping):
        prepared(**{k: _as_array(v) for k, v in feed.items()})
    elif isinstance(feed, (tuple, list)):
        prepared(*[_as_array(v) for v in feed])
    else:
        prepared(_as_array(feed))


def _as_array(value: Any) -> Any:
    """numpy arrays as they are; torch tensors through .numpy() (no copy on the CPU)."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().cpu().numpy()
    return value


def calibrate(prepared: PreparedModel, data: Iterable[Any], progress: Optional[bool] = None) -> int:
    """Runs ``prepared`` on every feed of ``data`` (each {input name: array}, a tuple of arrays
    or one array; torch tensors too). Shows a tqdm progress bar when ``progress`` is true, or
    when it is None and stderr is a terminal. Returns the number of samples calibrated."""
    if progress is None:
        progress = sys.stderr.isatty()
    if progress:
        from tqdm import tqdm

        total = len(data) if hasattr(data, "__len__") else None
        data = tqdm(data, total=total, desc="calibrating", unit="sample", file=sys.stderr)
    count = 0
    for feed in data:
        _feed_call(prepared, feed)
        count += 1
    if count == 0:
        raise ValueError("calibrate: the calibration data is empty")
    return count


def quantize(
    program: Program,
    quantizer: QnnQuantizer,
    calibration: Union[Iterable[Any], Callable[[PreparedModel], None]],
    progress: Optional[bool] = None,
) -> Program:
    """Post-training quantization in one call: prepare_pt2e, calibration, convert_pt2e.

    ``calibration`` is an iterable of feeds (see :func:`calibrate`) or a callable that is given
    the prepared model and calls it once per sample (ExecuTorch's calibration callback).
    """
    prepared = prepare_pt2e(program, quantizer)
    if callable(calibration) and not isinstance(calibration, (list, tuple)):
        calibration(prepared)
        if prepared.samples == 0:
            raise ValueError("quantize: the calibration callback ran the prepared model on no sample")
    else:
        calibrate(prepared, calibration, progress)
    return convert_pt2e(prepared)


def _op_name(op: Any) -> str:
    """kiln's op name for a name or a torch op overload (torch.ops.aten.conv2d.default)."""
    if isinstance(op, str):
        return op
    text = str(op)  # "aten.conv2d.default"
    parts = text.split(".")
    name = parts[1] if len(parts) >= 2 and parts[0] == "aten" else parts[0]
    return {"conv2d": "convolution", "conv1d": "convolution", "_softmax": "softmax", "addmm": "linear"}.get(name, name)


def skip_annotation(
    nn_module: Any,
    quantizer: QnnQuantizer,
    partitioner: Partitioner,
    sample_input: Optional[Sequence[Any]] = None,
    calibration_cb: Optional[Callable[[PreparedModel], None]] = None,
    fp_node_id_set: Optional[Set[str]] = None,
    fp_node_op_set: Optional[Set[Any]] = None,
    fallback_to_cpu: bool = True,
) -> Tuple[Program, List[Dict[str, Any]]]:
    """Mixed precision on the HTP (ExecuTorch's skip_annotation).

    The nodes named in ``fp_node_id_set`` or of an op in ``fp_node_op_set`` (op names, or torch
    ops such as ``torch.ops.aten.conv2d.default``) stay in floating point with the parameters
    only they read; every other group is quantized with ``quantizer``, calibrated by
    ``calibration_cb`` (given the prepared model: call it once per sample) and lowered with
    ``partitioner``. With ``fallback_to_cpu`` false the skipped nodes are lowered again in HTP
    fp16. ``nn_module`` is a kiln.Program, or a torch module exported with ``sample_input``.

    Returns the graph and its groups: [{'name', 'precision', 'nodes', 'lowered_modules'}].
    """
    if calibration_cb is None:
        raise TypeError("skip_annotation: calibration_cb is required (it runs the prepared model on samples)")
    program = _to_program(nn_module, sample_input)
    return _skip_annotation(
        program,
        quantizer,
        partitioner,
        calibration_cb,
        set(fp_node_id_set or ()),
        {_op_name(op) for op in (fp_node_op_set or ())},
        fallback_to_cpu,
    )


def _dtype_name(dtype: Any) -> str:
    """"uint8" for np.uint8, "uint8", torch.uint8; the same for 16 bits."""
    import numpy as np

    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype).replace("torch.", "")


def tag_quant_io(program: Program, get_quant_io_dtype_fn: Callable[[Node], Any]) -> List[Dict[str, Any]]:
    """ExecuTorch's tag_quant_io, applied in place: every user input placeholder (and every node a
    user output returns) for which ``get_quant_io_dtype_fn(node)`` gives a dtype (uint8 / uint16:
    numpy, torch or a name) takes / returns that dtype's codes, with no quantize or dequantize
    around it. Returns the tagged I/O with their encodings ({'kind', 'name', 'dtype', 'scale',
    'zero_point'}): real = scale * (code - zero_point)."""

    def name_of(node: Node) -> Optional[str]:
        dtype = get_quant_io_dtype_fn(node)
        return None if dtype is None or dtype is False else _dtype_name(dtype)

    return _tag_quant_io(program, name_of)


# The public names: kiln's own objects (the extension's and this module's), not the helpers
# imported above.
__all__ = sorted(
    ["QCOM_QNN_COMPILE_SPEC"]
    + [name for name, value in list(globals().items())
       if not name.startswith("_") and getattr(value, "__module__", "").split(".")[0] == "kiln"]
)
