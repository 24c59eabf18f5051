# Type stubs of the kiln package (the extension kiln._kiln and the pure-Python layer).
import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

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
    @property
    def debug_handle(self) -> Optional[int]:
        """The node's debug handle, or None (see assign_debug_handles)."""

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
    def save(self, path: str, method: str = "forward", dims: Mapping[str, Union[int, Tuple[int, int]]] = ...) -> None:
        """Writes .kir text, or a .kpte program file with one method; dims plans symbolic dims."""

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

class WhyNoPartitionReporter:
    """Why nodes were not delegated by a partitioner's last lowering."""
    def get_table_report(self) -> str:
        """The rejections as a table: node name, target, torch func, reason."""
    @property
    def entries(self) -> List[Dict[str, str]]: ...
    def reason_for(self, node_name: str) -> Optional[str]: ...
    def __len__(self) -> int: ...

class Partitioner:
    """A capability-based partitioner for one backend (QnnPartitioner, DemoPartitioner)."""
    @property
    def backend_id(self) -> str: ...
    @property
    def compiler_specs(self) -> List[CompileSpec]: ...
    @property
    def reporter(self) -> WhyNoPartitionReporter: ...

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
    min_partition_nodes: int = 1,
    max_partitions: int = 0,
    max_partition_nodes: int = 0,
) -> Partitioner:
    """The HTP partitioner; max_partition_nodes shards large partitions (multi contexts)."""
def DemoPartitioner(ops: Optional[List[str]] = None, min_partition_nodes: int = 1, max_partitions: int = 0) -> Partitioner:
    """The demo backend's partitioner: the nodes of `ops` (None: any op) run in a delegate."""
def to_backend(program: Program, partitioner: Partitioner) -> Program:
    """Lowers what the partitioner takes into delegates; returns the lowered program."""
def is_same_node(a: Node, b: Node) -> bool:
    """Same operation on the same inputs (names and meta ignored)."""
def get_delegated_payload(program: Program) -> Dict[str, Dict[str, Any]]:
    """Delegate name -> {'backend_id', 'compile_specs', 'processed_bytes'}."""
def assign_debug_handles(program: Program) -> int:
    """Gives every node without a debug handle a new one; returns how many."""

class DelegateMappingBuilder:
    """A delegate's map from debug identifiers to the debug handles its instructions cover."""
    def __init__(self, generated_identifiers: bool = False) -> None: ...
    def insert_delegate_mapping_entry(
        self,
        nodes: Optional[Union[Node, List[Node]]] = None,
        handles: Optional[Union[int, List[Optional[int]]]] = None,
        identifier: Optional[Union[int, str]] = None,
    ) -> Union[int, str]:
        """Adds an entry for nodes or handles (exactly one); returns its identifier."""
    def get_delegate_mapping(self) -> Dict[Union[int, str], List[int]]: ...

class QuantDtype(_Enum):
    """Activation bits x weight bits."""
    use_16a16w: "QuantDtype"
    use_16a8w: "QuantDtype"
    use_16a4w: "QuantDtype"
    use_8a8w: "QuantDtype"

class QnnQuantizer:
    """How a program is quantized: default configuration, per-layer overrides, float nodes / ops."""
    def __init__(self) -> None: ...
    def set_default_quant_config(
        self,
        quant_dtype: QuantDtype,
        is_qat: bool = False,
        is_conv_per_channel: bool = True,
        is_linear_per_channel: bool = True,
        act_observer: Any = None,
        full_range_weights: bool = False,
    ) -> None:
        """act_observer: 'minmax', 'moving-average', 'histogram' or torch's observer class."""
    def set_layer_config(self, layer: str, quant_dtype: QuantDtype) -> None: ...
    def add_discard_nodes(self, nodes: List[str]) -> None: ...
    def add_discard_ops(self, ops: List[str]) -> None: ...
    @property
    def quant_dtype(self) -> str: ...

class PreparedModel:
    """A program with observers; call it with one calibration sample per call."""
    def __call__(self, *inputs: np.ndarray, **named_inputs: np.ndarray) -> None: ...
    @property
    def samples(self) -> int: ...
    @property
    def input_names(self) -> List[str]: ...
    @property
    def layers(self) -> List[str]: ...
    num_threads: int

def prepare_pt2e(program: Program, quantizer: QnnQuantizer) -> PreparedModel:
    """Annotates a copy of the program and places the observers."""
def convert_pt2e(prepared: PreparedModel) -> Program:
    """The quantized (QDQ) program from the calibrated observers."""
def calibrate(prepared: PreparedModel, data: Iterable[Any], progress: Optional[bool] = None) -> int:
    """Runs every feed of data; a tqdm bar when progress (default: stderr is a terminal)."""
def quantize(
    program: Program,
    quantizer: QnnQuantizer,
    calibration: Union[Iterable[Any], Callable[[PreparedModel], None]],
    progress: Optional[bool] = None,
) -> Program:
    """prepare_pt2e, calibration from feeds or a callback, convert_pt2e."""
def accuracy_report(prepared: PreparedModel, quantized: Program, feeds: List[Dict[str, np.ndarray]], max_layers: int = 20) -> str:
    """The SQNR table of the quantized program against the float one."""

def capture_program(program: Program, custom_pass_config: Set[str] = ...) -> Program:
    """The HTP capture pipeline on a copy of the program."""
def convert_linear_to_conv2d(program: Program) -> Program:
    """Every linear becomes a 1x1 convolution, in place; returns the program."""
def tag_quant_io(program: Program, get_quant_io_dtype_fn: Callable[[Node], Any]) -> List[Dict[str, Any]]:
    """Tagged user inputs / outputs take / return uint8 or uint16 codes; returns their encodings."""
def from_context_binary(
    ctx_path: Union[str, os.PathLike, bytes],
    op_name: str,
    soc_model: QcomChipset = ...,
    custom_info: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """A program running a context binary: {'exported_program', 'inputs', 'outputs', 'graph_name', ...}."""

class MultiGraphProgram:
    """Several graphs in one context binary, one method each."""
    @property
    def methods(self) -> List[str]: ...
    @property
    def programs(self) -> Dict[str, Program]: ...
    @property
    def context_binary(self) -> bytes: ...
    static_bytes: int
    static_bytes_inputs: int
    @property
    def buffer(self) -> bytes: ...
    def save(self, path: str) -> None: ...

def generate_multi_graph_program(
    compiler_specs: List[CompileSpec],
    processed_bytes: List[bytes],
    backend_config: None = None,
    input_orders: Optional[List[List[str]]] = None,
) -> MultiGraphProgram:
    """One context binary for several online-prepare blobs, identical weights once."""
def save(path: str, programs: Union[Program, Dict[str, Program]], dims: Mapping[str, Any] = ...) -> None:
    """One .kpte file: a Program as 'forward', or one method per entry."""
def update_spill_fill_size(exported_program: Union[Program, List[Program]]) -> int:
    """The largest spill-fill size over multi-context HTP delegates, written into their specs."""
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
    """Mixed precision: the fp nodes stay float (CPU, or HTP fp16), the rest is quantized."""
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
