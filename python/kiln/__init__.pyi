# Type stubs of the kiln package (the extension kiln._kiln and the pure-Python layer).
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Union

import numpy as np

QCOM_QNN_COMPILE_SPEC: str

class Error(Exception):
    """Base class of every error kiln raises; the message is kiln's own."""

class InvalidArgumentError(Error, ValueError): ...
class NotFoundError(Error, LookupError): ...
class ParseError(Error, ValueError): ...
class IoError(Error, OSError): ...
class UnsupportedError(Error, NotImplementedError): ...
class OutOfRangeError(Error, ValueError): ...
class ResourceExhaustedError(Error, MemoryError): ...
class InternalError(Error): ...
class InvalidProgramError(Error, ValueError): ...
class DelegateError(Error): ...

class Node:
    """A node of a program's graph (read-only view; keeps the program alive)."""
    @property
    def name(self) -> str: ...
    @property
    def op(self) -> str:
        """placeholder, get_attr, call_function or output."""
    @property
    def target(self) -> str:
        """The op a call_function calls, or the placeholder's / attribute's name."""
    @property
    def spec(self) -> str:
        """The output's dtype and shape as .kir prints them ("f32[1, 3, 224, 224]")."""
    @property
    def inputs(self) -> List[str]: ...
    @property
    def users(self) -> List[str]: ...
    @property
    def delegation_tag(self) -> str: ...

class Program:
    """A model in kiln's IR: graph, signature, constants and lowered modules. str() prints .kir."""
    def kir(self) -> str:
        """The program as .kir text in full."""
    @property
    def graph(self) -> str: ...
    @property
    def nodes(self) -> List[Node]: ...
    def node(self, name: str) -> Node: ...
    @property
    def inputs(self) -> List[Dict[str, Any]]:
        """[{'name', 'dtype', 'shape'}] of the user inputs, in signature order."""
    @property
    def outputs(self) -> List[Dict[str, Any]]: ...
    @property
    def lowered_modules(self) -> List[Dict[str, Any]]:
        """[{'name', 'backend_id', 'processed_bytes'}] of the delegates."""
    def clone(self) -> "Program": ...
    def save(self, path: str, method: str = "forward") -> None:
        """Writes .kir text, or a .kpte program file with one method."""

class Method:
    """One method of a program file: call it with numpy arrays, get a list of numpy arrays."""
    def __call__(self, *inputs: np.ndarray, **named_inputs: np.ndarray) -> List[np.ndarray]: ...
    @property
    def name(self) -> str: ...
    @property
    def input_names(self) -> List[str]: ...
    @property
    def output_names(self) -> List[str]: ...
    @property
    def inputs(self) -> List[Dict[str, str]]: ...
    @property
    def profiles(self) -> List[Dict[str, Any]]:
        """The HTP delegates' profiles of the last call."""
    @property
    def chrome_trace(self) -> str: ...
    @property
    def intermediate_outputs(self) -> Dict[str, np.ndarray]: ...

class Runtime:
    """A loaded program file (.kpte)."""
    @staticmethod
    def load(source: Union[str, os.PathLike, bytes, bytearray]) -> "Runtime": ...
    @property
    def method_names(self) -> List[str]: ...
    def method(self, name: str = "forward", num_threads: int = 1) -> Method: ...

class _Enum:
    """A pybind11 enum: members by name, int() gives the value ExecuTorch uses."""
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...
    def __int__(self) -> int: ...

class QcomChipset(_Enum):
    UNKNOWN_SM: "QcomChipset"
    SM8350: "QcomChipset"
    SM8450: "QcomChipset"
    SA8295: "QcomChipset"
    SM8475: "QcomChipset"
    SM8550: "QcomChipset"
    SXR1230P: "QcomChipset"
    SSG2115P: "QcomChipset"
    SA8255: "QcomChipset"
    SXR2230P: "QcomChipset"
    SM8650: "QcomChipset"
    SSG2125P: "QcomChipset"
    SM8750: "QcomChipset"
    QCS9100: "QcomChipset"
    QCM6490: "QcomChipset"

class HtpArch(_Enum):
    NONE: "HtpArch"
    V68: "HtpArch"
    V69: "HtpArch"
    V73: "HtpArch"
    V75: "HtpArch"
    V79: "HtpArch"

class QnnExecuTorchBackendType(_Enum):
    kUndefinedBackend: "QnnExecuTorchBackendType"
    kGpuBackend: "QnnExecuTorchBackendType"
    kHtpBackend: "QnnExecuTorchBackendType"
    kDspBackend: "QnnExecuTorchBackendType"

class QnnExecuTorchHtpPerformanceMode(_Enum):
    kHtpDefault: "QnnExecuTorchHtpPerformanceMode"
    kHtpSustainedHighPerformance: "QnnExecuTorchHtpPerformanceMode"
    kHtpBurst: "QnnExecuTorchHtpPerformanceMode"
    kHtpHighPerformance: "QnnExecuTorchHtpPerformanceMode"
    kHtpPowerSaver: "QnnExecuTorchHtpPerformanceMode"
    kHtpLowPowerSaver: "QnnExecuTorchHtpPerformanceMode"
    kHtpHighPowerSaver: "QnnExecuTorchHtpPerformanceMode"
    kHtpLowBalanced: "QnnExecuTorchHtpPerformanceMode"
    kHtpBalanced: "QnnExecuTorchHtpPerformanceMode"

class QnnExecuTorchHtpPrecision(_Enum):
    kHtpQuantized: "QnnExecuTorchHtpPrecision"
    kHtpFp16: "QnnExecuTorchHtpPrecision"

class QnnExecuTorchHtpPdSession(_Enum):
    kHtpUnsignedPd: "QnnExecuTorchHtpPdSession"
    kHtpSignedPd: "QnnExecuTorchHtpPdSession"

class QnnExecuTorchLogLevel(_Enum):
    kLogOff: "QnnExecuTorchLogLevel"
    kLogLevelError: "QnnExecuTorchLogLevel"
    kLogLevelWarn: "QnnExecuTorchLogLevel"
    kLogLevelInfo: "QnnExecuTorchLogLevel"
    kLogLevelVerbose: "QnnExecuTorchLogLevel"
    kLogLevelDebug: "QnnExecuTorchLogLevel"

class QnnExecuTorchProfileLevel(_Enum):
    kProfileOff: "QnnExecuTorchProfileLevel"
    kProfileBasic: "QnnExecuTorchProfileLevel"
    kProfileDetailed: "QnnExecuTorchProfileLevel"
    kProfileOptrace: "QnnExecuTorchProfileLevel"

class SocInfo:
    soc_model: QcomChipset
    htp_arch: HtpArch
    vtcm_size_in_mb: int
    def __init__(self) -> None: ...

class QnnExecuTorchHtpBackendOptions:
    max_sf_buf_size: int
    performance_mode: QnnExecuTorchHtpPerformanceMode
    precision: QnnExecuTorchHtpPrecision
    pd_session: QnnExecuTorchHtpPdSession
    use_conv_hmx: bool
    use_dlbc: bool
    use_fold_relu: bool
    use_multi_contexts: bool
    use_weight_sharing: bool
    def __init__(self) -> None: ...

class QnnExecuTorchBackendOptions:
    backend_type: QnnExecuTorchBackendType
    htp_options: QnnExecuTorchHtpBackendOptions
    def __init__(self) -> None: ...

class QnnExecuTorchOptions:
    soc_info: SocInfo
    backend_options: QnnExecuTorchBackendOptions
    graph_name: str
    library_path: str
    log_level: QnnExecuTorchLogLevel
    online_prepare: bool
    dump_intermediate_outputs: bool
    profile_level: QnnExecuTorchProfileLevel
    shared_buffer: bool
    is_from_context_binary: bool
    multiple_graphs: bool
    def __init__(self) -> None: ...

class CompileSpec:
    key: str
    value: bytes
    def __init__(self, key: str, value: bytes) -> None: ...

class Partitioner:
    @property
    def backend_id(self) -> str: ...
    @property
    def compiler_specs(self) -> List[CompileSpec]: ...

def option_to_flatbuffer(options: QnnExecuTorchOptions) -> bytes: ...
def flatbuffer_to_option(flatbuffer: bytes) -> QnnExecuTorchOptions: ...
def generate_htp_compiler_spec(use_fp16: bool, use_dlbc: bool = False, use_multi_contexts: bool = False) -> QnnExecuTorchBackendOptions: ...
def generate_qnn_executorch_compiler_spec(
    soc_model: QcomChipset,
    backend_options: QnnExecuTorchBackendOptions,
    debug: bool = False,
    saver: bool = False,
    online_prepare: bool = False,
    dump_intermediate_outputs: bool = False,
    profile: bool = False,
    optrace: bool = False,
    shared_buffer: bool = False,
    is_from_context_binary: bool = False,
    multiple_graphs: bool = False,
    graph_name: str = "forward",
) -> List[CompileSpec]: ...
def get_soc_to_arch_map() -> Dict[str, HtpArch]: ...
def get_soc_to_chipset_map() -> Dict[str, QcomChipset]: ...
def QnnPartitioner(
    compiler_specs: List[CompileSpec],
    skip_node_id_set: Optional[Set[str]] = None,
    skip_node_op_set: Optional[Set[str]] = None,
) -> Partitioner: ...
def to_backend(program: Program, partitioner: Partitioner) -> Program: ...
def from_onnx(model: Any, dims: Mapping[str, int] = ...) -> Program: ...
def parse_kir(text: str) -> Program: ...
def load(path: Union[str, os.PathLike], dims: Optional[Mapping[str, int]] = None) -> Union[Program, Runtime]: ...
def from_torch(
    module: Any,
    example_inputs: Sequence[Any],
    dynamic_axes: Optional[Dict[str, Dict[int, str]]] = None,
    opset: int = 17,
    input_names: Optional[Sequence[str]] = None,
    output_names: Optional[Sequence[str]] = None,
) -> Program: ...
def format_delegated_graph(program: Program) -> str: ...
def get_delegates(program: Program) -> List[Node]: ...
def get_non_lowered_nodes(program: Program) -> List[Node]: ...
def is_identical_graph(a: Program, b: Program) -> bool: ...
def tag_constant_data(program: Program) -> int: ...
def tag_mutated_buffer(program: Program) -> List[str]: ...
def draw_graph(title: str, path: str, graph: Program) -> None:
    """Writes path/title.svg through Graphviz (delegates as clusters)."""
