// The Qualcomm half (seed 002, backends/qualcomm/utils/utils.py): the enums and option structs of
// qc_schema under their ExecuTorch names, the spec generators and the SoC maps.
#include <fmt/format.h>

#include <optional>
#include <set>

#include "common.h"
#include "kiln/backends/htp/capture.h"
#include "kiln/backends/htp/htp_backend.h"
#include "kiln/backends/htp/options.h"

namespace kiln::python {
void bind_htp(py::module_& m) {
  py::enum_<htp::QcomChipset>(m, "QcomChipset", "Snapdragon SoCs by Qualcomm chipset id (the SoC table).")
      .value("UNKNOWN_SM", htp::QcomChipset::kUnknown)
      .value("SM8350", htp::QcomChipset::SM8350)
      .value("SM8450", htp::QcomChipset::SM8450)
      .value("SA8295", htp::QcomChipset::SA8295)
      .value("SM8475", htp::QcomChipset::SM8475)
      .value("SM8550", htp::QcomChipset::SM8550)
      .value("SXR1230P", htp::QcomChipset::SXR1230P)
      .value("SSG2115P", htp::QcomChipset::SSG2115P)
      .value("SA8255", htp::QcomChipset::SA8255)
      .value("SXR2230P", htp::QcomChipset::SXR2230P)
      .value("SM8650", htp::QcomChipset::SM8650)
      .value("SSG2125P", htp::QcomChipset::SSG2125P)
      .value("SM8750", htp::QcomChipset::SM8750)
      .value("QCS9100", htp::QcomChipset::QCS9100)
      .value("QCM6490", htp::QcomChipset::QCM6490);
  py::enum_<htp::HtpArch>(m, "HtpArch", "HTP hardware generation (Hexagon version).")
      .value("NONE", htp::HtpArch::kNone)
      .value("V68", htp::HtpArch::V68)
      .value("V69", htp::HtpArch::V69)
      .value("V73", htp::HtpArch::V73)
      .value("V75", htp::HtpArch::V75)
      .value("V79", htp::HtpArch::V79);
  py::enum_<htp::BackendType>(m, "QnnExecuTorchBackendType", "The QNN backend a graph is delegated to.")
      .value("kUndefinedBackend", htp::BackendType::kUndefined)
      .value("kGpuBackend", htp::BackendType::kGpu)
      .value("kHtpBackend", htp::BackendType::kHtp)
      .value("kDspBackend", htp::BackendType::kDsp);
  py::enum_<htp::HtpPerformanceMode>(m, "QnnExecuTorchHtpPerformanceMode",
                                     "HTP performance modes: here, the thread count and wait policy of execution.")
      .value("kHtpDefault", htp::HtpPerformanceMode::kDefault)
      .value("kHtpSustainedHighPerformance", htp::HtpPerformanceMode::kSustainedHighPerformance)
      .value("kHtpBurst", htp::HtpPerformanceMode::kBurst)
      .value("kHtpHighPerformance", htp::HtpPerformanceMode::kHighPerformance)
      .value("kHtpPowerSaver", htp::HtpPerformanceMode::kPowerSaver)
      .value("kHtpLowPowerSaver", htp::HtpPerformanceMode::kLowPowerSaver)
      .value("kHtpHighPowerSaver", htp::HtpPerformanceMode::kHighPowerSaver)
      .value("kHtpLowBalanced", htp::HtpPerformanceMode::kLowBalanced)
      .value("kHtpBalanced", htp::HtpPerformanceMode::kBalanced);
  py::enum_<htp::HtpPrecision>(m, "QnnExecuTorchHtpPrecision", "Fixed point, or IEEE half (V69 and newer).")
      .value("kHtpQuantized", htp::HtpPrecision::kQuantized)
      .value("kHtpFp16", htp::HtpPrecision::kFp16);
  py::enum_<htp::HtpPdSession>(m, "QnnExecuTorchHtpPdSession", "The DSP protection domain (recorded only here).")
      .value("kHtpUnsignedPd", htp::HtpPdSession::kUnsignedPd)
      .value("kHtpSignedPd", htp::HtpPdSession::kSignedPd);
  py::enum_<htp::LogLevel>(m, "QnnExecuTorchLogLevel", "Logging level of the delegate.")
      .value("kLogOff", htp::LogLevel::kOff)
      .value("kLogLevelError", htp::LogLevel::kError)
      .value("kLogLevelWarn", htp::LogLevel::kWarn)
      .value("kLogLevelInfo", htp::LogLevel::kInfo)
      .value("kLogLevelVerbose", htp::LogLevel::kVerbose)
      .value("kLogLevelDebug", htp::LogLevel::kDebug);
  py::enum_<htp::ProfileLevel>(m, "QnnExecuTorchProfileLevel",
                               "What a profiled run records: graph time, per-op time, a Chrome trace.")
      .value("kProfileOff", htp::ProfileLevel::kOff)
      .value("kProfileBasic", htp::ProfileLevel::kBasic)
      .value("kProfileDetailed", htp::ProfileLevel::kDetailed)
      .value("kProfileOptrace", htp::ProfileLevel::kOptrace);

  py::class_<htp::SocInfo>(m, "SocInfo", "The SoC compiled for: model, HTP arch, VTCM size in MB.")
      .def(py::init<>())
      .def_readwrite("soc_model", &htp::SocInfo::soc_model)
      .def_readwrite("htp_arch", &htp::SocInfo::htp_arch)
      .def_readwrite("vtcm_size_in_mb", &htp::SocInfo::vtcm_size_mb)
      .def("__eq__", [](const htp::SocInfo& a, const htp::SocInfo& b) { return a == b; });
  py::class_<htp::HtpBackendOptions>(m, "QnnExecuTorchHtpBackendOptions", "Options of the HTP backend proper.")
      .def(py::init<>())
      .def_readwrite("max_sf_buf_size", &htp::HtpBackendOptions::max_sf_buf_size)
      .def_readwrite("performance_mode", &htp::HtpBackendOptions::performance_mode)
      .def_readwrite("precision", &htp::HtpBackendOptions::precision)
      .def_readwrite("pd_session", &htp::HtpBackendOptions::pd_session)
      .def_readwrite("use_conv_hmx", &htp::HtpBackendOptions::use_conv_hmx)
      .def_readwrite("use_dlbc", &htp::HtpBackendOptions::use_dlbc)
      .def_readwrite("use_fold_relu", &htp::HtpBackendOptions::use_fold_relu)
      .def_readwrite("use_multi_contexts", &htp::HtpBackendOptions::use_multi_contexts)
      .def_readwrite("use_weight_sharing", &htp::HtpBackendOptions::use_weight_sharing)
      .def("__eq__", [](const htp::HtpBackendOptions& a, const htp::HtpBackendOptions& b) { return a == b; });
  py::class_<htp::BackendOptions>(m, "QnnExecuTorchBackendOptions", "The backend type and its options.")
      .def(py::init<>())
      .def_readwrite("backend_type", &htp::BackendOptions::backend_type)
      .def_readwrite("htp_options", &htp::BackendOptions::htp_options)
      .def("__eq__", [](const htp::BackendOptions& a, const htp::BackendOptions& b) { return a == b; });
  py::class_<htp::Options>(m, "QnnExecuTorchOptions", "Everything one qnn_compile_spec carries.")
      .def(py::init<>())
      .def_readwrite("soc_info", &htp::Options::soc_info)
      .def_readwrite("backend_options", &htp::Options::backend_options)
      .def_readwrite("graph_name", &htp::Options::graph_name)
      .def_readwrite("library_path", &htp::Options::library_path)
      .def_readwrite("log_level", &htp::Options::log_level)
      .def_readwrite("online_prepare", &htp::Options::online_prepare)
      .def_readwrite("dump_intermediate_outputs", &htp::Options::dump_intermediate_outputs)
      .def_readwrite("profile_level", &htp::Options::profile_level)
      .def_readwrite("shared_buffer", &htp::Options::shared_buffer)
      .def_readwrite("is_from_context_binary", &htp::Options::is_from_context_binary)
      .def_readwrite("multiple_graphs", &htp::Options::multiple_graphs)
      .def("__eq__", [](const htp::Options& a, const htp::Options& b) { return a == b; })
      .def("__str__", [](const htp::Options& o) { return htp::format_options(o); });

  py::class_<CompileSpec>(m, "CompileSpec", "A compile spec: a key and its bytes (ExecuTorch's CompileSpec).")
      .def(py::init([](std::string key, const py::bytes& value) { return CompileSpec{std::move(key), from_bytes(value)}; }),
           py::arg("key"), py::arg("value"))
      .def_readonly("key", &CompileSpec::key)
      .def_property_readonly("value", [](const CompileSpec& s) { return as_bytes(s.value); })
      .def("__repr__", [](const CompileSpec& s) { return fmt::format("CompileSpec(key='{}', value=<{} bytes>)", s.key, s.value.size()); });

  m.attr("QCOM_QNN_COMPILE_SPEC") = std::string(htp::kQnnCompileSpecKey);
  m.def("option_to_flatbuffer", [](const htp::Options& o) { return as_bytes(htp::option_to_flatbuffer(o)); },
        py::arg("options"), "Serializes QnnExecuTorchOptions to the qnn_compile_spec flatbuffer.");
  m.def("flatbuffer_to_option", [](const py::bytes& b) { return unwrap(htp::flatbuffer_to_option(from_bytes(b))); },
        py::arg("flatbuffer"), "Parses and validates a qnn_compile_spec flatbuffer (errors name the field).");
  m.def("generate_htp_compiler_spec", &htp::generate_htp_compiler_spec, py::arg("use_fp16"), py::arg("use_dlbc") = false,
        py::arg("use_multi_contexts") = false,
        "HTP backend options as ExecuTorch makes them: fp16 or quantized precision, performance mode burst.");
  m.def(
      "generate_qnn_executorch_compiler_spec",
      [](htp::QcomChipset soc_model, const htp::BackendOptions& backend_options, bool debug, bool saver,
         bool online_prepare, bool dump_intermediate_outputs, bool profile, bool optrace, bool shared_buffer,
         bool is_from_context_binary, bool multiple_graphs, std::string graph_name) {
        htp::CompilerSpecArgs args;
        args.debug = debug;
        args.saver = saver;
        args.online_prepare = online_prepare;
        args.dump_intermediate_outputs = dump_intermediate_outputs;
        args.profile = profile;
        args.optrace = optrace;
        args.shared_buffer = shared_buffer;
        args.is_from_context_binary = is_from_context_binary;
        args.multiple_graphs = multiple_graphs;
        args.graph_name = std::move(graph_name);
        std::vector<std::string> warnings;
        auto specs = unwrap(htp::generate_qnn_executorch_compiler_spec(soc_model, backend_options, args, &warnings));
        for (const std::string& text : warnings) warn(text, 2);
        return htp::to_compile_specs<CompileSpec>(specs);
      },
      py::arg("soc_model"), py::arg("backend_options"), py::arg("debug") = false, py::arg("saver") = false,
      py::arg("online_prepare") = false, py::arg("dump_intermediate_outputs") = false, py::arg("profile") = false,
      py::arg("optrace") = false, py::arg("shared_buffer") = false, py::arg("is_from_context_binary") = false,
      py::arg("multiple_graphs") = false, py::arg("graph_name") = "forward",
      "The compile spec list (one qnn_compile_spec) by ExecuTorch's rules: an unknown SoC is an\n"
      "error, profile with dump warns, optrace over profile, saver selects the saver library,\n"
      "online_prepare with use_multi_contexts is an error, multiple_graphs turns weight sharing on.");
  m.def("get_soc_to_arch_map", &htp::get_soc_to_arch_map, "ExecuTorch's SoC name -> HtpArch map.");
  m.def("get_soc_to_chipset_map", &htp::get_soc_to_chipset_map, "ExecuTorch's SoC name -> QcomChipset map.");
}

}  // namespace kiln::python
