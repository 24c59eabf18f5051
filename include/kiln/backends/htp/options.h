// The HTP backend's options (ExecuTorch's QnnExecuTorchOptions): the SoC table, the option structs,
// their flatbuffer form (the value of the compile spec "qnn_compile_spec", schema/htp_options.fbs)
// and the spec generators of ExecuTorch's backends/qualcomm/utils/utils.py. IR-free: the runtime
// half reads the same options at init.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/core/status.h"

namespace kiln::htp {

// ---- enums (numeric values are ExecuTorch's and part of the flatbuffer format) ----

/// Snapdragon SoC models by Qualcomm chipset id: exactly the rows of the SoC table, plus kUnknown.
enum class QcomChipset : int32_t {
  kUnknown = 0,
  SM8350 = 30,
  SM8450 = 36,
  SA8295 = 39,
  SM8475 = 42,
  SM8550 = 43,
  SXR1230P = 45,
  SSG2115P = 46,
  SA8255 = 52,
  SXR2230P = 53,
  SM8650 = 57,
  SSG2125P = 58,
  SM8750 = 69,
  QCS9100 = 77,
  QCM6490 = 93,
};

/// HTP hardware generation (Hexagon version).
enum class HtpArch : int32_t { kNone = 0, V68 = 68, V69 = 69, V73 = 73, V75 = 75, V79 = 79 };

/// The QNN backend a graph is delegated to (ExecuTorch's QnnExecuTorchBackendType).
enum class BackendType : int32_t { kUndefined = 0, kGpu = 1, kHtp = 2, kDsp = 3 };

/// HTP performance modes (ExecuTorch's kHtpDefault .. kHtpBalanced). Here they choose the thread
/// count and the wait policy of execution: see threads_for and spins.
enum class HtpPerformanceMode : int32_t {
  kDefault = 0,
  kSustainedHighPerformance = 1,
  kBurst = 2,
  kHighPerformance = 3,
  kPowerSaver = 4,
  kLowPowerSaver = 5,
  kHighPowerSaver = 6,
  kLowBalanced = 7,
  kBalanced = 8,
};

/// Precision of the tensors inside an HTP graph: fixed point, or IEEE half (V69 and newer).
enum class HtpPrecision : int32_t { kQuantized = 0, kFp16 = 1 };

/// HTP protection-domain session (ExecuTorch's kHtpUnsignedPd / kHtpSignedPd).
enum class HtpPdSession : int32_t { kUnsignedPd = 0, kSignedPd = 1 };

/// Logging level of the delegate (ExecuTorch's kLogOff .. kLogLevelDebug).
enum class LogLevel : int32_t {
  kOff = 0,
  kError = 1,
  kWarn = 2,
  kInfo = 3,
  kVerbose = 4,
  kDebug = 5
};

/// Profiling level: graph time (basic), per-op time (detailed), a Chrome trace JSON (optrace).
enum class ProfileLevel : int32_t { kOff = 0, kBasic = 1, kDetailed = 2, kOptrace = 3 };

/// "SM8650"; a value outside the enum prints as "QcomChipset(12)".
std::string to_string(QcomChipset chipset);
/// "V75"; "none" for kNone.
std::string to_string(HtpArch arch);
/// "undefined", "gpu", "htp", "dsp" (ExecuTorch's names).
std::string to_string(BackendType type);
/// "default", "sustained_high_performance", "burst", "high_performance", "power_saver",
/// "low_power_saver", "high_power_saver", "low_balanced", "balanced".
std::string to_string(HtpPerformanceMode mode);
/// "quantized", "fp16".
std::string to_string(HtpPrecision precision);
/// "unsigned_pd", "signed_pd".
std::string to_string(HtpPdSession session);
/// "off", "error", "warn", "info", "verbose", "debug".
std::string to_string(LogLevel level);
/// "off", "basic", "detailed", "optrace".
std::string to_string(ProfileLevel level);

// Parsers from the names above, for the command line. Case does not matter and '-' may stand for
// '_'. An unknown name is an invalid_argument error quoting the text and listing the valid names.

/// "SM8650" (kUnknown is not accepted: it names no SoC).
Result<QcomChipset> chipset_from_name(std::string_view name);
/// "V73" or "73" (kNone is not accepted).
Result<HtpArch> htp_arch_from_name(std::string_view name);
/// "htp", "gpu", "dsp", "undefined".
Result<BackendType> backend_type_from_name(std::string_view name);
/// "burst", "balanced", ...
Result<HtpPerformanceMode> performance_mode_from_name(std::string_view name);
/// "quantized" or "fp16".
Result<HtpPrecision> precision_from_name(std::string_view name);
/// "unsigned_pd" or "signed_pd".
Result<HtpPdSession> pd_session_from_name(std::string_view name);
/// "off", "error", "warn", "info", "verbose", "debug".
Result<LogLevel> log_level_from_name(std::string_view name);
/// "off", "basic", "detailed", "optrace".
Result<ProfileLevel> profile_level_from_name(std::string_view name);

// ---- the options (ExecuTorch's qc_schema.py dataclasses, with its defaults) ----

/// The SoC compiled for: its model and the HTP it carries.
struct SocInfo {
  QcomChipset soc_model = QcomChipset::kUnknown;  ///< the chipset
  HtpArch htp_arch = HtpArch::kNone;              ///< its HTP generation
  /// On-chip memory (VTCM) the graphs may use, in MB: bounds the working set the context planner
  /// keeps on chip; what does not fit spills to the spill-fill buffer.
  uint32_t vtcm_size_mb = 0;

  bool operator==(const SocInfo&) const = default;
};

/// Options of the HTP backend proper.
struct HtpBackendOptions {
  /// Spill-fill buffer shared by every context of the program, bytes (0: each context plans its
  /// own). With use_multi_contexts, set after compile to the largest context's need (ExecuTorch's
  /// update_spill_fill_size).
  uint64_t max_sf_buf_size = 0;
  HtpPerformanceMode performance_mode = HtpPerformanceMode::kDefault;  ///< threads and waiting
  HtpPrecision precision = HtpPrecision::kQuantized;    ///< fixed point or fp16 inside the graph
  /// The DSP protection domain the graph runs in on a device. There is no DSP here: recorded in
  /// the compile spec (kiln inspect shows it), no effect on the CPU execution.
  HtpPdSession pd_session = HtpPdSession::kUnsignedPd;
  bool use_conv_hmx = true;         ///< quantized convs on oneDNN's matrix (VNNI) kernels; off: direct loops
  /// Deep-learning bandwidth compression: the context binary stores its weights
  /// deflate-compressed where that is smaller, inflated once at load (lossless: same outputs).
  bool use_dlbc = false;
  bool use_fold_relu = true;        ///< fold a relu into its producer's quantized output range
  bool use_multi_contexts = false;  ///< contexts of the program share one spill-fill buffer
  bool use_weight_sharing = false;  ///< graphs of one context share their weights

  bool operator==(const HtpBackendOptions&) const = default;
};

/// The backend and its options.
struct BackendOptions {
  BackendType backend_type = BackendType::kUndefined;  ///< must be kHtp for this backend
  HtpBackendOptions htp_options;                       ///< used when backend_type is kHtp

  bool operator==(const BackendOptions&) const = default;
};

/// Everything one "qnn_compile_spec" carries (ExecuTorch's QnnExecuTorchOptions).
struct Options {
  SocInfo soc_info;                ///< from the SoC table, by generate_qnn_executorch_compiler_spec
  BackendOptions backend_options;  ///< see generate_htp_compiler_spec
  std::string graph_name;          ///< the graph's name in its context ("forward")
  /// Backend library override; "libQnnSaver.so" selects the saver (writes the graph as JSON
  /// instead of compiling it).
  std::string library_path;
  LogLevel log_level = LogLevel::kOff;  ///< delegate logging
  /// Ship the op graph and build the executable context at init (small blob, slower init)
  /// instead of the prepared context with packed weights.
  bool online_prepare = false;
  bool dump_intermediate_outputs = false;           ///< write every op's output (dequantized, .npy)
  ProfileLevel profile_level = ProfileLevel::kOff;  ///< what a run records
  bool shared_buffer = false;           ///< execute on the caller's I/O buffers, no copies
  bool is_from_context_binary = false;  ///< the graph came from a prebuilt context binary
  bool multiple_graphs = false;         ///< several methods' graphs in one context

  bool operator==(const Options&) const = default;
};

// ---- the SoC table ----

/// Every supported SoC with its HTP arch and VTCM size, in chipset id order. Static storage.
std::span<const SocInfo> soc_table();
/// The table's row for `chipset`; not_found naming the chipset (and its id) when it has none.
Result<SocInfo> soc_info(QcomChipset chipset);
/// The seed's six SoC names -> HTP arch (SSG2115P, SM8650, SM8550, SM8475, SM8450, SA8295).
std::map<std::string, HtpArch> get_soc_to_arch_map();
/// The seed's six SoC names -> chipset.
std::map<std::string, QcomChipset> get_soc_to_chipset_map();

// ---- the compile spec ----

/// The compile spec key whose value is option_to_flatbuffer(options).
inline constexpr std::string_view kQnnCompileSpecKey = "qnn_compile_spec";

/// A compile spec as plain data: the key and value of kiln::CompileSpec, which is declared with
/// the IR (kiln/ir/exported_program.h) that this IR-free library does not include. The compile
/// half converts with to_compile_specs<kiln::CompileSpec>(specs).
struct CompileSpecBytes {
  std::string key;             ///< kQnnCompileSpecKey
  std::vector<uint8_t> value;  ///< the options flatbuffer

  bool operator==(const CompileSpecBytes&) const = default;
};

/// Copies `specs` into any {key, value} aggregate type, e.g. kiln::CompileSpec.
template <typename Spec>
std::vector<Spec> to_compile_specs(std::span<const CompileSpecBytes> specs) {
  std::vector<Spec> out;
  out.reserve(specs.size());
  for (const CompileSpecBytes& s : specs) out.push_back(Spec{s.key, s.value});
  return out;
}

/// Serializes `options` (file identifier "KQCS"). Does not validate: flatbuffer_to_option does.
std::vector<uint8_t> option_to_flatbuffer(const Options& options);

/// Decodes untrusted bytes without the consistency checks of validate_options: the flatbuffers
/// verifier, the file identifier, every enum value within its enum, and no field unknown to this
/// schema (a newer writer's option is an error naming the table and field id, never dropped).
/// Errors start with "qnn_compile_spec: ". For tools that show a spec even when it is invalid;
/// everything else uses flatbuffer_to_option. `bytes` need not be aligned.
Result<Options> decode_options_flatbuffer(std::span<const uint8_t> bytes);

/// Whether `options` describe something the HTP backend can build: the SoC is in the table and
/// soc_info's arch and VTCM agree with its row; backend_type is kHtp; fp16 precision is on a V69
/// or newer SoC; online_prepare is not combined with use_multi_contexts. The error names the
/// fields and values that disagree.
Status validate_options(const Options& options);

/// decode_options_flatbuffer, then validate_options: what the backend's preprocess and init use.
Result<Options> flatbuffer_to_option(std::span<const uint8_t> bytes);

// ---- the generators (ExecuTorch's backends/qualcomm/utils/utils.py) ----

/// HTP backend options as the seed makes them: precision fp16 or quantized, performance mode
/// burst, backend type HTP, the other fields at their defaults.
BackendOptions generate_htp_compiler_spec(bool use_fp16, bool use_dlbc = false,
                                          bool use_multi_contexts = false);

/// The switches of generate_qnn_executorch_compiler_spec after soc_model and backend_options.
struct CompilerSpecArgs {
  bool debug = false;                      ///< log level debug (else warn)
  bool saver = false;                      ///< library_path "libQnnSaver.so"
  bool online_prepare = false;             ///< build the context at init
  bool dump_intermediate_outputs = false;  ///< dump every op's output
  bool profile = false;                    ///< per-op profile (detailed)
  bool optrace = false;                    ///< Chrome trace; wins over profile
  bool shared_buffer = false;              ///< execute on the caller's buffers
  bool is_from_context_binary = false;     ///< graph from a prebuilt context binary
  bool multiple_graphs = false;  ///< several graphs in one context: turns weight sharing on
  /// The graph's name (unique per method with multiple_graphs).
  std::string graph_name = "forward";
};

/// One compile spec, key kQnnCompileSpecKey, value option_to_flatbuffer of the options these
/// arguments make, by the seed's rules: soc_info from the SoC table (an unknown SoC is an error
/// naming it); log level debug or warn; saver selects "libQnnSaver.so"; profile level optrace over
/// detailed (profile) over off; online_prepare with HTP use_multi_contexts is an error;
/// multiple_graphs turns use_weight_sharing on in the returned spec (`backend_options` is not
/// changed). profile together with dump_intermediate_outputs appends a warning to `*warnings`
/// (when not null). The result always passes validate_options: fp16 on a V68 SoC or a backend
/// type other than HTP is an error.
Result<std::vector<CompileSpecBytes>> generate_qnn_executorch_compiler_spec(
    QcomChipset soc_model, const BackendOptions& backend_options, const CompilerSpecArgs& args = {},
    std::vector<std::string>* warnings = nullptr);

/// A readable multi-line dump of `options`, one field per line (what `kiln inspect` prints).
std::string format_options(const Options& options);

// ---- what the options mean at run time ----

/// Worker threads an HTP execution uses out of `hardware_threads` (values below 1 count as 1):
/// burst, high performance and sustained high performance use all of them; default (no vote) uses
/// all of them too, leaving the caller's thread budget as it is; balanced and low balanced use
/// half (at least one); the power savers (power saver, low and high power saver) use one.
int threads_for(HtpPerformanceMode mode, int hardware_threads);

/// Whether workers spin-wait for work (lowest latency, burns the cores) instead of sleeping:
/// burst and high performance spin; every other mode, sustained high performance included
/// (it is meant to hold its clocks over long runs), sleeps.
bool spins(HtpPerformanceMode mode);

}  // namespace kiln::htp
